"""The transaction coordinator: producer ids and epochs per transactional id, markers, offsets."""

from __future__ import annotations

import time
from itertools import count

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.serve._offset_store import CommittedOffset
from lazyconv.serve._txn_coordinator import TransactionCoordinator


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def world(clock):
    markers: list[tuple[str, int, int, int, bool]] = []
    commits: list[tuple[str, dict]] = []
    ids = count(1000)
    coordinator = TransactionCoordinator(lambda: next(ids), lambda *m: markers.append(m),
                                         lambda g, o: commits.append((g, o)),
                                         lambda topic, p: topic == "t" and p in (0, 1), clock=clock)
    return coordinator, markers, commits


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(world, clock) -> None:
    c, markers, _ = world
    _, pid, epoch = c.init_producer_id("tx", 5000)
    clock.now = 1.0
    c.add_partitions("tx", pid, epoch, [("t", 0)])
    c.expire(5.9)
    assert markers == []
    c.expire(6.0)
    assert markers == [("t", 0, pid, epoch + 1, False)]  # the bumped epoch fences it in t-0 too
    assert c.end_txn("tx", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_EPOCH
    c.expire(100.0)
    assert len(markers) == 1  # nothing open any more


def test_commit_writes_markers_and_applies_offsets(world) -> None:
    c, markers, commits = world
    code, pid, epoch = c.init_producer_id("tx", 60000)
    assert (code, pid, epoch) == (0, 1000, 0)
    assert c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
    assert c.add_offsets("tx", pid, epoch, "g") == 0
    offsets = {("t", 0): CommittedOffset(5)}
    assert c.txn_offset_commit("tx", pid, epoch, "g", offsets) == 0
    assert commits == []  # not before the commit
    assert c.end_txn("tx", pid, epoch, True) == 0
    assert markers == [("t", 0, 1000, 0, True), ("t", 1, 1000, 0, True)]
    assert commits == [("g", offsets)]


def test_abort_drops_the_offsets(world) -> None:
    c, markers, commits = world
    _, pid, epoch = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, epoch, [("t", 1)])
    c.add_offsets("tx", pid, epoch, "g")
    c.txn_offset_commit("tx", pid, epoch, "g", {("t", 1): CommittedOffset(1)})
    assert c.end_txn("tx", pid, epoch, False) == 0
    assert markers == [("t", 1, pid, epoch, False)] and commits == []


def test_reinit_fences_the_old_epoch_and_aborts_its_transaction(world) -> None:
    c, markers, _ = world
    _, pid, old = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, old, [("t", 0)])
    code, same_pid, new = c.init_producer_id("tx", 60000)
    # as Kafka: the abort fences (old + 1, in its markers), the new incarnation bumps again
    assert (code, same_pid, new) == (0, pid, old + 2)
    assert markers == [("t", 0, pid, old + 1, False)]
    assert c.add_partitions("tx", pid, old, [("t", 0)]) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert c.end_txn("tx", pid, old, True) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.end_txn("tx", pid + 1, new, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn("unknown", pid, new, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_unknown_partitions_fail_the_whole_add(world) -> None:
    c, _, _ = world
    _, pid, epoch = c.init_producer_id("tx", 60000)
    assert c.add_partitions("tx", pid, epoch, [("t", 0), ("nope", 0)]) == {
        ("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.txn_offset_commit("tx", pid, epoch, "g", {}) == ErrorCode.INVALID_TXN_STATE  # no AddOffsets


def _broker(root):
    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.net._model import Listener
    from lazyconv.serve._broker import Broker

    return Broker(LogDirectory(root), [Listener(0, "127.0.0.1", 9092)])


def _produce(broker, partition: int, records: bytes, transactional_id: str | None = "tx") -> int:
    """Produce v9 of one partition's records, as a producer of ``transactional_id`` sends them."""
    from tests.serve.test_produce_validation_e2e import answers, produce_body

    body = produce_body({partition: records}, 9)
    body["transactional_id"] = transactional_id
    return answers(broker.produce(9, body))[partition]["error_code"]


def test_a_fenced_producer_cannot_open_a_transaction_nothing_ends(tmp_path) -> None:
    """After a timeout abort or a re-init, the old incarnation's late transactional batches are
    refused (the ABORT markers carry the bumped epoch, as Kafka's): accepted, they opened a
    transaction no EndTxn could end and the last stable offset stopped there for good."""
    from tests.serve.test_append_validation import idem

    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    broker = _broker(tmp_path)
    c = broker.transactions
    for partition, reinit in ((0, False), (1, True)):
        _, pid, epoch = c.init_producer_id(f"tx{partition}", 60000)
        c.add_partitions(f"tx{partition}", pid, epoch, [("t", partition)])
        assert _produce(broker, partition, idem(0, pid=pid, epoch=epoch, txn=True), f"tx{partition}") == 0
        if reinit:
            c.init_producer_id(f"tx{partition}", 60000)
        else:
            c.expire(time.monotonic() + 3600)  # timed out
        plog = broker.logdir.partition("t", partition)
        assert plog.last_stable_offset() == plog.high_watermark == 3
        late = _produce(broker, partition, idem(2, pid=pid, epoch=epoch, txn=True), f"tx{partition}")
        assert late == ErrorCode.INVALID_PRODUCER_EPOCH
        assert plog.last_stable_offset() == plog.high_watermark == 3
    broker.close()


@pytest.mark.parametrize("clean_stop", [True, False])
def test_a_transaction_open_at_a_restart_is_aborted_when_its_id_initialises_again(tmp_path, clean_stop) -> None:
    """The transactional id's producer id and epoch survive the restart, so its next
    InitProducerId aborts what its previous incarnation left open (with a fresh producer id
    the transaction stayed open for good: the last stable offset never moved again)."""
    from tests.serve.test_append_validation import idem

    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    broker = _broker(tmp_path)
    _, pid, epoch = broker.transactions.init_producer_id("tx", 60000)
    broker.transactions.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    for p in (0, 1):
        assert _produce(broker, p, idem(0, pid=pid, epoch=epoch, txn=True)) == 0
    if clean_stop:
        broker.close()
    again = _broker(tmp_path)
    assert again.logdir.partition("t", 0).last_stable_offset() == 0  # still open
    code, same_pid, new = again.transactions.init_producer_id("tx", 60000)
    assert (code, same_pid) == (0, pid) and new > epoch
    for p in (0, 1):
        plog = again.logdir.partition("t", p)
        assert plog.last_stable_offset() == plog.high_watermark == 3  # the ABORT marker at 2
        assert plog.transaction_state().aborted[-1].first_offset == 0
        assert _produce(again, p, idem(2, pid=pid, epoch=epoch, txn=True)) == ErrorCode.INVALID_PRODUCER_EPOCH
    again.close()


def test_the_previous_incarnation_is_fenced_after_a_restart(tmp_path) -> None:
    """Its next call aborts the transaction it had open (its TxnOffsetCommit offsets are lost):
    a commit would have ended none of the partitions it had added before the restart."""
    from tests.serve.test_append_validation import idem

    (tmp_path / "t-0").mkdir()
    broker = _broker(tmp_path)
    _, pid, epoch = broker.transactions.init_producer_id("tx", 60000)
    broker.transactions.add_partitions("tx", pid, epoch, [("t", 0)])
    assert _produce(broker, 0, idem(0, pid=pid, epoch=epoch, txn=True)) == 0
    broker.close()
    again = _broker(tmp_path)
    assert again.transactions.end_txn("tx", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_EPOCH
    plog = again.logdir.partition("t", 0)
    assert plog.last_stable_offset() == plog.high_watermark == 3
    assert plog.transaction_state().aborted[-1].first_offset == 0
    again.close()


@pytest.mark.parametrize("clean_stop", [True, False])
def test_a_transaction_open_at_a_restart_is_aborted_once_its_timeout_has_passed(tmp_path, clean_stop) -> None:
    """As Kafka's coordinator reloads its Ongoing transactions and aborts the timed-out ones:
    found by a review, a transaction a stop or a crash left open stayed open until its
    transactional id came back (or the 7-day expiry), and read_committed consumers saw
    nothing past it. Aborted with the bumped epoch: the old incarnation is fenced, its id's
    next InitProducerId gets the epoch after; what was committed before stays."""
    from lazyconv.logdir._txnindex import AbortedTxn, parse_txnindex
    from tests.serve.test_append_validation import idem

    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    broker = _broker(tmp_path)
    c = broker.transactions
    _, pid, epoch = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, epoch, [("t", 0)])
    assert _produce(broker, 0, idem(0, pid=pid, epoch=epoch, txn=True)) == 0  # 0-1
    assert c.end_txn("tx", pid, epoch, True) == 0  # COMMIT at 2
    c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    assert _produce(broker, 0, idem(2, pid=pid, epoch=epoch, txn=True)) == 0  # 3-4
    assert _produce(broker, 1, idem(0, pid=pid, epoch=epoch, txn=True)) == 0  # 0-1
    if clean_stop:
        broker.close()
    again = _broker(tmp_path)
    again._tick(time.monotonic() + 50)  # within 60 s of the id's last change, the commit
    plogs = [again.logdir.partition("t", p) for p in (0, 1)]
    assert [plog.last_stable_offset() for plog in plogs] == [3, 0]
    again._tick(time.monotonic() + 61)
    assert [(plog.last_stable_offset(), plog.high_watermark) for plog in plogs] == [(6, 6), (3, 3)]
    expected = [AbortedTxn(pid, 3, 5, 6), AbortedTxn(pid, 0, 2, 3)]
    for plog, txn in zip(plogs, expected, strict=True):
        assert plog.transaction_state().aborted == [txn]
        assert parse_txnindex((plog.directory / f"{0:020d}.txnindex").read_bytes()) == [txn]
    assert plogs[0].transaction_state().aborted_between(0, 6) == [expected[0]]  # not 0-1, committed
    # the old incarnation is fenced, in the coordinator and in the partitions
    assert again.transactions.end_txn("tx", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _produce(again, 0, idem(4, pid=pid, epoch=epoch, txn=True)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert again.transactions.init_producer_id("tx", 60000) == (0, pid, epoch + 2)
    again.transactions.add_partitions("tx", pid, epoch + 2, [("t", 1)])
    assert _produce(again, 1, idem(0, pid=pid, epoch=epoch + 2, txn=True)) == 0
    again.close()


def test_recovered_transactions_time_out_from_the_ids_last_recorded_change(tmp_path, clock) -> None:
    """With the id's recorded timeout, counted from its last recorded change (the transaction
    began after it: never later than Kafka, which counts from the transaction's start)."""
    c, store = _stored_world(tmp_path, clock)
    clock.now = 100.0
    _, pid, epoch = c.init_producer_id("tx", 5000)
    _, idle, _ = c.init_producer_id("idle", 5000)
    c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    clock.now = 103.0  # a crash, and the restart
    again, _ = _stored_world(tmp_path, clock)
    markers: list[tuple] = []
    again.write_marker = lambda *m: markers.append(m)
    again.recover({pid: {("t", 0): epoch, ("t", 1): epoch}})
    assert all(not p.restored for p in again.producers.values())  # nothing left to look up
    again.tick(104.9)
    assert markers == []
    again.tick(105.0)
    assert markers == [("t", 0, pid, epoch + 1, False), ("t", 1, pid, epoch + 1, False)]
    assert store.load()["tx"][:2] == (pid, epoch + 1)  # the fence is recorded
    assert again.end_txn("tx", pid, epoch, False) == ErrorCode.INVALID_PRODUCER_EPOCH
    again.tick(200.0)
    assert len(markers) == 2 and again.producers["idle"].started_at is None
    assert again.init_producer_id("tx", 5000) == (0, pid, epoch + 2)


@pytest.mark.parametrize("found_by_sweep", [False, True])
def test_the_previous_incarnation_cannot_commit_a_transaction_from_before_the_restart(clock, found_by_sweep) -> None:
    """Before its timeout, its next call aborts it (its TxnOffsetCommit offsets are gone), also
    when the expiration sweep looked its partitions up first (found by a review: the commit was
    then accepted, and wrote COMMIT markers without the offsets)."""
    markers: list[tuple] = []
    c = TransactionCoordinator(lambda: 2000, lambda *m: markers.append(m), lambda g, o: None,
                               lambda topic, p: True, clock=clock, wall_clock=clock,
                               restored={"tx": (1000, 3, 60000, 0)},
                               open_transactions=lambda pid: [("t", 0)] if pid == 1000 else [])
    if found_by_sweep:
        clock.now = WEEK
        assert c.remove_expired_ids() == []
    assert c.end_txn("tx", 1000, 3, True) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert markers == [("t", 0, 1000, 4, False)]


def test_a_transaction_no_transactional_id_holds_is_aborted_after_kafkas_longest_timeout(tmp_path) -> None:
    """A transaction open in the log whose producer id is in no id's record (a log Kafka wrote,
    whose __transaction_state serve does not have; an id file that was lost) could never end:
    it is aborted 15 minutes (the default of Kafka's transaction.max.timeout.ms, the longest
    timeout its coordinator accepts) after serve started, with markers of the producer's next epoch in
    each partition, which fence a producer still writing with that id."""
    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.serve._offsets import split_entries
    from lazyconv.serve._txn_coordinator import TransactionConfig
    from tests.serve.test_append_validation import idem

    assert TransactionConfig().unknown_producer_transaction_timeout_ms == 15 * 60 * 1000
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    written = LogDirectory(tmp_path)  # by another coordinator: serve's Produce verifies
    for p, batch in ((0, idem(0, pid=777, epoch=3, txn=True)),  # 0-1
                     (1, idem(0, pid=777, epoch=5, txn=True)),  # 0-1
                     (1, idem(0, count=1, pid=778, epoch=0, txn=True))):  # 2
        written.partition("t", p).append(split_entries(batch))
    written.close()
    again = _broker(tmp_path)
    plogs = [again.logdir.partition("t", p) for p in (0, 1)]
    again._tick(time.monotonic() + 890)
    assert [plog.last_stable_offset() for plog in plogs] == [0, 0]
    again._tick(time.monotonic() + 901)
    assert [(plog.last_stable_offset(), plog.high_watermark) for plog in plogs] == [(3, 3), (5, 5)]
    assert [(t.producer_id, t.first_offset) for t in plogs[1].transaction_state().aborted] == [(777, 0), (778, 2)]
    for p, (pid, epoch) in ((0, (777, 3)), (1, (777, 5)), (1, (778, 0))):
        late = _produce(again, p, idem(2, pid=pid, epoch=epoch, txn=True))
        assert late == ErrorCode.INVALID_PRODUCER_ID_MAPPING, (p, pid)  # no transactional id holds it
    assert again.producer_states.table(plogs[0]).entry(777).producer_epoch == 6  # one epoch for all
    again._tick(time.monotonic() + 3600)
    assert plogs[1].high_watermark == 5  # aborted once
    again.close()


def test_a_served_kafka_log_is_left_as_it_is_until_its_open_transaction_times_out(tmp_path) -> None:
    """The committed fixture's transactions-1 ends in a transaction Kafka's producer left open:
    serving it (and stopping) writes nothing into it before the timeout, as the fixture tests
    that serve it in place rely on (a producer snapshot of the state looked at was written at
    the stop); then its ABORT marker lets read_committed consumers past it."""
    import shutil

    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.net._model import Listener
    from lazyconv.serve._broker import Broker
    from lazyconv.serve._txn_coordinator import TransactionConfig
    from tests.serve.test_transactions import REPO

    shutil.copytree(REPO / "fixtures" / "transactions-1", tmp_path / "transactions-1")

    def listing() -> dict[str, tuple[int, int]]:
        return {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in (tmp_path / "transactions-1").iterdir()}

    before = listing()
    broker = Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)], offsets_in_memory=True)
    plog = broker.logdir.partition("transactions", 1)
    open_at = plog.last_stable_offset()
    assert open_at < plog.high_watermark and list(broker.transactions.unknown) == [1001]
    broker._tick(time.monotonic() + 60)
    broker.close()
    assert listing() == before
    config = TransactionConfig(unknown_producer_transaction_timeout_ms=1)
    broker = Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)], offsets_in_memory=True,
                    txn_config=config)
    plog = broker.logdir.partition("transactions", 1)
    end = plog.high_watermark
    broker._tick(time.monotonic() + 0.01)
    assert plog.last_stable_offset() == plog.high_watermark == end + 1
    assert plog.transaction_state().aborted[-1].first_offset == open_at
    broker.close()


class _Crash(BaseException):
    """A process killed at this point (nothing after it runs)."""


@pytest.mark.parametrize("markers_written", [0, 1, 2])
def test_a_commit_a_restart_interrupted_is_completed(tmp_path, markers_written) -> None:
    """Killed after EndTxn(commit) wrote the COMMIT marker of some of the partitions (or all,
    the offsets not stored yet): the restart completes the commit, as Kafka's PrepareCommit in
    its transaction log does. Found by a review: the partitions left open were aborted when the
    producer retried EndTxn, and the transaction stayed committed in t-0, aborted in t-1."""
    from tests.serve.test_append_validation import idem

    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    broker = _broker(tmp_path)
    coordinator = broker.transactions
    _, pid, epoch = coordinator.init_producer_id("tx", 60000)
    coordinator.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    for p in (0, 1):
        assert _produce(broker, p, idem(0, pid=pid, epoch=epoch, txn=True)) == 0
    assert coordinator.add_offsets("tx", pid, epoch, "g") == 0
    assert coordinator.txn_offset_commit("tx", pid, epoch, "g", {("t", 0): CommittedOffset(7)}) == 0
    real_write = coordinator.write_marker
    written: list[int] = []

    def write_marker(topic, partition, *rest):
        if len(written) == markers_written:
            raise _Crash
        written.append(partition)
        real_write(topic, partition, *rest)

    def commit_offsets(group, offsets):
        raise _Crash

    coordinator.write_marker, coordinator.commit_offsets = write_marker, commit_offsets
    with pytest.raises(_Crash):
        coordinator.end_txn("tx", pid, epoch, True)
    again = _broker(tmp_path)
    for p in (0, 1):
        plog = again.logdir.partition("t", p)
        assert plog.last_stable_offset() == plog.high_watermark == 3  # the COMMIT marker at 2
        assert plog.transaction_state().aborted == []
    assert again.groups.store.fetch("g", "t", 0) == CommittedOffset(7)
    assert again.transactions.end_txn("tx", pid, epoch, True) == 0  # the producer's retry
    again.close()
    assert "prepared_commit" not in (tmp_path / "__lazyconv_transactional_ids.json").read_text()


def test_a_commit_that_cannot_be_recorded_writes_nothing_and_is_retried(tmp_path) -> None:
    from lazyconv.errors import StorageError

    saved: list[dict] = []
    failing = [False]

    def save(producers, prepared):
        if failing[0]:
            raise StorageError("disk full")
        saved.append(dict(prepared))

    markers: list[tuple] = []
    ids = count(1000)
    c = TransactionCoordinator(lambda: next(ids), lambda *m: markers.append(m), lambda g, o: None,
                               lambda topic, p: True, save=save)
    _, pid, epoch = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, epoch, [("t", 0)])
    failing[0] = True
    assert c.end_txn("tx", pid, epoch, True) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert markers == [] and c.producers["tx"].ongoing
    failing[0] = False
    assert c.end_txn("tx", pid, epoch, True) == 0
    assert markers == [("t", 0, pid, epoch, True)]
    assert [list(p) for p in saved[-2:]] == [["tx"], []]  # recorded, then cleared


WEEK = 7 * 24 * 3600  # Kafka's transactional.id.expiration.ms, in seconds
HOUR = 3600  # Kafka's transaction.remove.expired.transaction.cleanup.interval.ms, in seconds


def _stored_world(root, clock, **kwargs):
    """A coordinator recording its ids in ``root`` as the broker does, both clocks ``clock``."""
    from lazyconv.serve._txn_ids import TransactionalIdStore

    store = TransactionalIdStore(root)
    ids = count(1000)
    markers: list[tuple] = []
    coordinator = TransactionCoordinator(
        lambda: next(ids), lambda *m: markers.append(m), lambda g, o: None,
        lambda topic, p: topic == "t", clock=clock, wall_clock=clock, restored=store.load(),
        prepared=store.prepared, save=store.save, **kwargs)
    return coordinator, store


def test_an_idle_transactional_id_expires_after_kafkas_seven_days(tmp_path, clock) -> None:
    """Kafka forgets a transactional id without a transaction open or being committed once it
    is unchanged for transactional.id.expiration.ms (7 days), looked for every
    transaction.remove.expired.transaction.cleanup.interval.ms (1 hour); serve kept every id
    for good, in memory and in its file (found by a review). The expired id's producer id no
    longer fences: the old producer gets INVALID_PRODUCER_ID_MAPPING, the id's next
    InitProducerId a fresh producer id at epoch 0; one with a transaction open is kept."""
    from lazyconv.serve._txn_coordinator import TransactionConfig

    assert TransactionConfig() == TransactionConfig(7 * 24 * 3600 * 1000, 3600 * 1000)
    c, store = _stored_world(tmp_path, clock)
    c.init_producer_id("idle", 60000)
    _, pid, epoch = c.init_producer_id("idle", 60000)
    assert (pid, epoch) == (1000, 1)
    _, busy, busy_epoch = c.init_producer_id("busy", 2**31 - 1)  # never times out here
    assert c.add_partitions("busy", busy, busy_epoch, [("t", 0)]) == {("t", 0): 0}
    clock.now = WEEK - 0.001
    c.tick(clock.now)  # the first sweep (an hour after the start): not idle for a week yet
    assert set(c.producers) == {"idle", "busy"}
    clock.now = WEEK
    c.tick(clock.now)  # a week idle, but the next sweep is an hour after the last
    assert set(c.producers) == {"idle", "busy"}
    clock.now = WEEK - 0.001 + HOUR
    c.tick(clock.now)
    assert set(c.producers) == {"busy"}  # an open transaction keeps its id
    assert set(store.load()) == {"busy"}  # and the file forgot it too
    assert c.end_txn("idle", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("idle", pid, epoch, [("t", 1)]) == {("t", 1): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert c.init_producer_id("idle", 60000) == (0, 1002, 0)  # not (1000, 2): a fresh producer id
    assert c.end_txn("busy", busy, busy_epoch, True) == 0


def test_a_transaction_being_committed_or_open_in_the_log_keeps_its_id(tmp_path, clock) -> None:
    """Ids from before a restart: one whose commit the restart interrupted (Kafka's
    PrepareCommit) and one whose producer left a transaction open in the log (Ongoing) are
    kept; one with nothing open expires."""
    from lazyconv.serve._txn_ids import PreparedCommit

    open_in_log = {1001: [("t", 0)]}
    c = TransactionCoordinator(
        lambda: 2000, lambda *m: None, lambda g, o: None, lambda topic, p: True,
        clock=clock, wall_clock=clock,
        restored={"committing": (1000, 3, 60000, 0), "open": (1001, 0, 60000, 0),
                  "done": (1002, 5, 60000, 0)},
        prepared={"committing": PreparedCommit((("t", 1),), {})},
        open_transactions=lambda pid: open_in_log.get(pid, []))
    clock.now = 2 * WEEK
    assert c.remove_expired_ids() == ["done"]
    assert set(c.producers) == {"committing", "open"}
    assert c.producers["open"].partitions == {("t", 0)}  # found: now timed out as any other


def test_expired_ids_are_kept_while_their_removal_cannot_be_recorded(clock) -> None:
    """As Kafka keeps an id whose tombstone was not appended: forgotten in memory only, it
    would come back at the next restart."""
    from lazyconv.errors import StorageError

    failing = [True]

    def save(producers, prepared):
        if failing[0]:
            raise StorageError("disk full")

    c = TransactionCoordinator(lambda: 1000, lambda *m: None, lambda g, o: None, lambda t, p: True,
                               clock=clock, wall_clock=clock, save=save,
                               restored={"idle": (1000, 0, 60000, 0)})
    clock.now = WEEK
    assert c.remove_expired_ids() == [] and "idle" in c.producers
    failing[0] = False
    assert c.remove_expired_ids() == ["idle"] and c.producers == {}


def test_an_id_without_its_last_update_in_the_file_is_taken_as_updated_at_load(tmp_path, clock) -> None:
    """A file from before last updates were recorded: its ids expire a week after the load."""
    import json

    from lazyconv.serve._txn_ids import TRANSACTIONAL_ID_FILE

    (tmp_path / TRANSACTIONAL_ID_FILE).write_text(json.dumps({"version": 1, "producers": {
        "old": {"producer_id": 7, "epoch": 2, "timeout_ms": 60000}}}))
    clock.now = 50 * WEEK
    c, store = _stored_world(tmp_path, clock)
    assert c.producers["old"].last_update_ms == 50 * WEEK * 1000
    clock.now = 51 * WEEK - 0.001
    assert c.remove_expired_ids() == []
    clock.now = 51 * WEEK
    assert c.remove_expired_ids() == ["old"]
    assert store.load() == {}


def test_an_id_in_use_is_not_expired_after_a_restart(tmp_path, clock) -> None:
    """Each end of a transaction is recorded with its time, so an id whose last InitProducerId
    is older than a week but which ended a transaction since is kept after a restart."""
    c, store = _stored_world(tmp_path, clock)
    _, pid, epoch = c.init_producer_id("tx", 60000)
    clock.now = 6 * 24 * 3600
    c.add_partitions("tx", pid, epoch, [("t", 0)])
    assert c.end_txn("tx", pid, epoch, False) == 0
    assert store.load()["tx"] == (pid, epoch, 60000, 6 * 24 * 3600 * 1000)
    clock.now = WEEK + 1
    again, _ = _stored_world(tmp_path, clock)
    assert again.remove_expired_ids() == []
    assert again.add_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): 0}


def test_expired_ids_do_not_come_back_after_a_restart(tmp_path) -> None:
    """Through the broker's timer and its file: after the sweep and a restart the expired id
    is gone, and its next InitProducerId gets a fresh producer id."""
    from lazyconv.serve._txn_coordinator import TransactionConfig

    (tmp_path / "t-0").mkdir()
    broker = _broker(tmp_path)
    assert broker.transactions.config == TransactionConfig()
    _, pid, _ = broker.transactions.init_producer_id("idle", 60000)
    broker.transactions.wall_clock = lambda: time.time() + WEEK + 1
    broker._tick(time.monotonic() + HOUR)
    assert "idle" not in broker.transactions.producers
    broker.close()
    again = _broker(tmp_path)
    assert "idle" not in again.transactions.producers
    code, new_pid, epoch = again.transactions.init_producer_id("idle", 60000)
    assert code == 0 and new_pid != pid and epoch == 0
    again.close()


def test_the_expiration_settings_are_the_brokers(tmp_path) -> None:
    from lazyconv.errors import ConfigurationError
    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.net._model import Listener
    from lazyconv.serve._broker import Broker
    from lazyconv.serve._txn_coordinator import TransactionConfig

    config = TransactionConfig(transactional_id_expiration_ms=1000,
                               remove_expired_transaction_cleanup_interval_ms=10)
    broker = Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)], txn_config=config)
    assert broker.transactions.config is config
    broker.close()
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ConfigurationError, match="transactional_id_expiration_ms"):
            TransactionConfig(transactional_id_expiration_ms=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="unknown_producer_transaction_timeout_ms"):
            TransactionConfig(unknown_producer_transaction_timeout_ms=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="TransactionConfig"):
        Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)],
               txn_config={"transactional_id_expiration_ms": 5})  # type: ignore[arg-type]


kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.mark.slow
def test_transactional_producers_and_read_committed_consumers(serve_logdir, tmp_path) -> None:
    """kafka-python and confluent-kafka transactional producers commit and abort through the
    server; read_committed consumers see only the committed records, read_uncommitted all."""
    for p in (0, 1):
        (tmp_path / f"tx-{p}").mkdir()
    server = serve_logdir(tmp_path)
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-tx")
    producer.init_transactions()
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for i in range(4):
            producer.send("tx", f"kp-{outcome}-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    producer.close()
    cproducer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap,
                                          "transactional.id": "ck-tx", "log_level": 3})
    cproducer.init_transactions(10)
    for outcome in ("commit", "abort"):
        cproducer.begin_transaction()
        for i in range(4):
            cproducer.produce("tx", f"ck-{outcome}-{i}".encode(), partition=i % 2)
        cproducer.flush(10)
        cproducer.commit_transaction(10) if outcome == "commit" else cproducer.abort_transaction(10)
    everything = {f"{who}-{outcome}-{i}".encode() for who in ("kp", "ck")
                  for outcome in ("commit", "abort") for i in range(4)}
    for isolation, expected in (("read_uncommitted", everything),
                                ("read_committed", {v for v in everything if b"commit" in v})):
        consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, isolation_level=isolation,
                                       fetch_max_wait_ms=100)
        consumer.assign([kafka.TopicPartition("tx", p) for p in (0, 1)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < len(expected) and time.monotonic() < deadline:
            for messages in consumer.poll(200).values():
                got.extend(m.value for m in messages)
        consumer.close()
        assert sorted(got) == sorted(expected), isolation
