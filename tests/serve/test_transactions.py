"""Transactions as Kafka serves them: producer state rebuilt from the log, the last stable
offset, AbortedTransactions for read_committed fetches, and Kafka's .txnindex files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lazyconv.errors import CorruptRecordError
from lazyconv.fixtures import _wire as wire
from lazyconv.fixtures._wire import FixtureRecord
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._txnindex import (
    AbortedTxn,
    encode_txnindex_entry,
    parse_txnindex,
)
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.records import MemoryRecords
from tests.serve.wire import WireClient

REPO = Path(__file__).resolve().parents[2]


def data(offset: int, n: int, pid: int = -1, transactional: bool = False) -> bytes:
    return wire.v2_batch([FixtureRecord(offset + i, 1000 + offset + i, None, f"v{offset + i}".encode())
                          for i in range(n)], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                         base_sequence=0 if pid >= 0 else -1, transactional=transactional)


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return wire.end_txn_marker(offset, 5000 + offset, pid, 0, commit=commit)


def build(root: Path, *, split_at: int | None = None) -> Path:
    """Offsets: 0-1 plain; pid 7 txn 2-3 + 6-7 ABORTED at 8 (pid 8 commits 4-5 at 9 meanwhile);
    10-11 plain; pid 7 txn 12-13 COMMIT at 14; pid 9 txn 15-16 open (never ended)."""
    entries = [data(0, 2), data(2, 2, 7, True), data(4, 2, 8, True), data(6, 2, 7, True),
               marker(8, 7, False), marker(9, 8, True), data(10, 2), data(12, 2, 7, True),
               marker(14, 7, True), data(15, 2, 9, True)]
    folder = root / "t-0"
    folder.mkdir()
    if split_at is None:
        (folder / f"{0:020d}.log").write_bytes(b"".join(entries))
    else:
        first = entries[:split_at]
        base = MemoryRecords(entries[split_at]).batches().__next__().base_offset
        (folder / f"{0:020d}.log").write_bytes(b"".join(first))
        (folder / f"{base:020d}.log").write_bytes(b"".join(entries[split_at:]))
    return folder


ABORTED = AbortedTxn(producer_id=7, first_offset=2, last_offset=8, last_stable_offset=4)


@pytest.mark.parametrize("split_at", [None, 5, 9])
def test_state_is_rebuilt_from_the_log(tmp_path: Path, split_at) -> None:
    build(tmp_path, split_at=split_at)
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog is not None
    state = plog.transaction_state()
    # when pid 7 aborted at 8, pid 8's transaction (from 4) was still open: LSO 4
    assert state.aborted == [ABORTED]
    assert state.ongoing == {9: 15}
    assert plog.high_watermark == 17 and plog.last_stable_offset() == 15
    assert state.aborted_between(0, 15) == [ABORTED]
    assert state.aborted_between(9, 15) == []  # ended before the fetch offset
    assert state.aborted_between(0, 2) == []  # starts at/after the upper bound


def test_state_follows_appends(tmp_path: Path) -> None:
    folder = build(tmp_path)
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog is not None and plog.last_stable_offset() == 15
    with open(folder / f"{0:020d}.log", "ab") as f:
        f.write(marker(17, 9, False))
    assert plog.last_stable_offset() == 18
    assert plog.transaction_state().aborted[-1] == AbortedTxn(9, 15, 17, 18)


def test_an_open_transactions_producer_epoch_is_kept(tmp_path: Path) -> None:
    """The largest epoch of its batches: serve aborts a transaction no transactional id holds
    with markers of the next one, which fence its producer in every partition."""
    def batch(offset: int, pid: int, epoch: int) -> bytes:
        return wire.v2_batch([FixtureRecord(offset, 1000 + offset, None, b"v")], producer_id=pid,
                             producer_epoch=epoch, base_sequence=0, transactional=True)

    folder = tmp_path / "t-0"
    folder.mkdir()
    (folder / f"{0:020d}.log").write_bytes(batch(0, 7, 2) + batch(1, 8, 1) + batch(2, 7, 3)
                                           + wire.end_txn_marker(3, 5003, 8, 1, commit=True))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog is not None
    state = plog.transaction_state()
    assert (state.ongoing, state.ongoing_epochs) == ({7: 0}, {7: 3})
    with open(folder / f"{0:020d}.log", "ab") as f:
        f.write(wire.end_txn_marker(4, 5004, 7, 4, commit=False))
    state = plog.transaction_state()
    assert (state.ongoing, state.ongoing_epochs) == ({}, {})


def test_a_transactional_batch_without_a_producer_id_opens_no_transaction(tmp_path: Path) -> None:
    """As Kafka's producer state, which skips batches without a producer id: such a batch (a
    produce may carry one) opened a transaction of producer -1 that no marker could ever end,
    and read_committed consumers stopped before it for good."""
    folder = tmp_path / "t-0"
    folder.mkdir()
    no_pid = wire.v2_batch([FixtureRecord(2, 1002, None, b"v2")], transactional=True)
    (folder / f"{0:020d}.log").write_bytes(data(0, 2) + no_pid + data(3, 2))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog is not None and plog.high_watermark == 5
    assert plog.transaction_state().ongoing == {} and plog.last_stable_offset() == 5


def test_txnindex_is_used_when_present(tmp_path: Path) -> None:
    folder = build(tmp_path)
    # an index that differs from the log shows which one was read
    planted = AbortedTxn(7, 2, 8, 3)
    (folder / f"{0:020d}.txnindex").write_bytes(encode_txnindex_entry(planted))
    state = LogDirectory(tmp_path).partition("t", 0).transaction_state()  # type: ignore[union-attr]
    assert state.aborted == [planted] and state.ongoing == {9: 15}


def test_an_abort_whose_txnindex_entry_a_crash_lost_is_read_from_the_log(tmp_path: Path) -> None:
    """serve appends an ABORT marker, then its .txnindex entry: killed in between, the entry is
    missing, and after the restart the next abort in the segment adds its own. Found by a
    review: every marker up to the index's last entry was taken as accounted for by it, so the
    first abort was forgotten and read_committed consumers got its records."""
    folder = tmp_path / "t-0"
    folder.mkdir()
    (folder / f"{0:020d}.log").write_bytes(
        data(0, 2, 7, True) + marker(2, 7, False) + data(3, 2, 7, True) + marker(5, 7, False)
        + data(6, 2, 7, True) + marker(8, 7, True))
    second = AbortedTxn(7, 3, 5, 6)
    (folder / f"{0:020d}.txnindex").write_bytes(encode_txnindex_entry(second))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog is not None
    state = plog.transaction_state()
    assert state.aborted == [AbortedTxn(7, 0, 2, 3), second] and state.ongoing == {}
    assert state.aborted_between(0, 9) == [AbortedTxn(7, 0, 2, 3), second]


def test_txnindex_entry_layout() -> None:
    entry = encode_txnindex_entry(AbortedTxn(0x0102, 3, 4, 5))
    assert entry.hex() == "0000" "0000000000000102" "0000000000000003" "0000000000000004" "0000000000000005"
    assert len(entry) == 34 and parse_txnindex(entry * 2) == [AbortedTxn(0x0102, 3, 4, 5)] * 2
    # CorruptRecordError exactly: the transaction state catches it to rebuild from the log
    with pytest.raises(CorruptRecordError, match=r"^idx: 67 bytes is not a whole number of 34-byte entries") as info:
        parse_txnindex(entry + entry[:-1], "idx")
    assert info.value.position == 34
    with pytest.raises(CorruptRecordError, match=r"^idx: entry version 1 \(only 0 exists\)") as info:
        parse_txnindex(entry + b"\x00\x01" + entry[2:], "idx")
    assert info.value.position == 34


def test_the_generator_writes_the_txnindex_the_log_implies(tmp_path: Path) -> None:
    for name in ("transactions-0", "transactions-1"):
        copy = tmp_path / name
        shutil.copytree(REPO / "fixtures" / name, copy)
        indexed = []
        for index in sorted(copy.glob("*.txnindex")):
            indexed += parse_txnindex(index.read_bytes(), index)
            index.unlink()
        assert indexed, "the committed transactions fixture has aborted transactions"
        plog = LogDirectory(tmp_path).partition("transactions", int(name[-1]))
        assert plog is not None
        assert plog.transaction_state().aborted == indexed  # rebuilt from the log alone


def _visible(partition: dict) -> list[int]:
    """What a read_committed client keeps: skip batches of aborted transactions (as clients do)."""
    aborted = {(a["producer_id"], a["first_offset"]) for a in partition["aborted_transactions"] or []}
    open_aborts: set[int] = set()
    starts = sorted(aborted, key=lambda a: a[1])
    kept = []
    for batch in MemoryRecords(partition["records"]).batches():
        while starts and starts[0][1] <= batch.base_offset:
            open_aborts.add(starts.pop(0)[0])
        if batch.is_control:
            open_aborts.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in open_aborts:
            continue
        kept += [r.offset for r in batch]
    return kept


@pytest.mark.parametrize("version", [4, 5, 11, 12, 13, 17])
def test_read_committed_fetch(serve_logdir, tmp_path: Path, version: int) -> None:
    build(tmp_path)
    server = serve_logdir(tmp_path)
    topic_id = server.logdir.topic_id("t")

    def call(client: WireClient, isolation: int, offset: int) -> dict:
        topic = {"topic": "t", "topic_id": topic_id, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
        answer = client.call(fetch.SPEC, version, {"max_wait_ms": 0, "min_bytes": 0,
                                                   "isolation_level": isolation, "topics": [topic]})
        return answer["responses"][0]["partitions"][0]

    with WireClient(server.port) as client:
        committed = call(client, 1, 0)
        assert (committed["high_watermark"], committed["last_stable_offset"]) == (17, 15)
        assert committed["aborted_transactions"] == [{"producer_id": 7, "first_offset": 2}]
        offsets = [r.offset for b in MemoryRecords(committed["records"]).batches() for r in b]
        assert max(offsets) == 14  # nothing at or beyond the LSO
        assert _visible(committed) == [0, 1, 4, 5, 10, 11, 12, 13]
        later = call(client, 1, 9)
        assert later["aborted_transactions"] == []
        at_lso = call(client, 1, 15)
        assert at_lso["error_code"] == 0 and at_lso["records"] == b""
        uncommitted = call(client, 0, 0)
        # read_uncommitted: null aborted transactions, as Kafka sends them
        assert uncommitted["last_stable_offset"] == 15 and uncommitted["aborted_transactions"] is None
        assert max(r.offset for b in MemoryRecords(uncommitted["records"]).batches() for r in b) == 16
        for isolation, expected in ((0, 17), (1, 15)):
            answer = client.call(list_offsets.SPEC, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            assert answer["topics"][0]["partitions"][0]["offset"] == expected
