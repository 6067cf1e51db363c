"""What survives a restart of ``serve``: producer ids are never handed out twice, producer
state comes back from Kafka-format snapshots, a full disk is a Produce error (not a poisoned
partition), fsyncs happen when the flush options ask for them, and a clean stop leaves
snapshots and recovery points behind."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.logdir._partition import LogConfig
from lazyconv.logdir._snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)
from lazyconv.protocol import _init_producer_id as init_producer_id
from lazyconv.protocol import _produce as produce
from lazyconv.records import FileRecords
from lazyconv.serve._append_validation import AppendErrorCode
from lazyconv.serve._producer_ids import FIRST_PRODUCER_ID, PRODUCER_ID_FILE
from lazyconv.serve._producer_state import load_producer_state
from tests.serve.test_append_validation import idem
from tests.serve.test_e2e_errors_and_librdkafka import fetch_raw
from tests.serve.test_produce_validation_e2e import answers, produce_body
from tests.serve.wire import WireClient

kafka = pytest.importorskip("kafka", reason="needs the dev extra: pip install -e '.[dev]'")


def init_pid(client: WireClient) -> int:
    answer = client.call(init_producer_id.SPEC, 4, {"transactional_id": None,
                                                     "transaction_timeout_ms": 60000})
    assert answer["error_code"] == 0, answer
    return answer["producer_id"]


def records_on_disk(part) -> list[tuple[int, bytes]]:
    out = []
    for path in sorted(part.glob("*.log")):
        with FileRecords.open(path) as records:
            out += [(r.offset, r.value) for b in records.batches() for r in b]
    return out


@pytest.mark.slow
def test_four_restarts_with_a_new_idempotent_producer_each_keep_all_four_records(serve_logdir, tmp_path):
    """The bug of issue 23: producer ids started at 1000 on every start, so the second
    producer's first batch was taken for a retry of the first one's, acknowledged at offset 0
    and never written. Each producer here is kafka-python's idempotent producer."""
    (tmp_path / "t-0").mkdir()
    acked = []
    for i in range(4):
        server = serve_logdir(tmp_path)
        producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True,
                                       acks="all", retries=3)
        acked.append(producer.send("t", partition=0, value=b"record-%d" % i).get(timeout=10).offset)
        producer.close()
        server.stop()
    assert acked == [0, 1, 2, 3]
    assert records_on_disk(tmp_path / "t-0") == [(i, b"record-%d" % i) for i in range(4)]


def test_producer_ids_are_recorded_in_blocks_before_use_and_never_reused(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    seen = []
    for _restart in range(3):
        server = serve_logdir(tmp_path)
        with WireClient(server.port) as client:
            for _ in range(3):
                seen.append(init_pid(client))
                block = json.loads((tmp_path / PRODUCER_ID_FILE).read_text())
                assert block["block_start"] <= seen[-1] <= block["block_end"]  # on disk first
        server.stop()
    assert len(set(seen)) == 9 and seen == sorted(seen) and seen[0] == FIRST_PRODUCER_ID


def test_without_the_id_file_ids_stay_above_those_in_the_logs_and_snapshots(serve_logdir, tmp_path):
    """A directory whose id file is gone (or that a Kafka broker wrote): the ids in its batches
    and in its latest producer snapshots are not handed out again."""
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(0, pid=50_000)}, 9)))[0][
            "error_code"] == 0
    server.stop()
    # t-1's log starts at 7: the batches of producer 90000 before it are gone (retention), only
    # the snapshot at 7 remembers it
    (tmp_path / "t-1" / f"{7:020d}.log").write_bytes(b"")
    snapshot_path(tmp_path / "t-1", 7).write_bytes(encode_snapshot([SnapshotEntry(90_000, 0, 4, 6, 4, 1)]))
    (tmp_path / PRODUCER_ID_FILE).unlink(missing_ok=True)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        assert init_pid(client) == 90_001
    server.stop()


def test_a_corrupt_id_file_refuses_init_producer_id_with_a_retriable_error(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    (tmp_path / PRODUCER_ID_FILE).write_text("{not json")
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        answer = client.call(init_producer_id.SPEC, 4, {"transactional_id": None,
                                                         "transaction_timeout_ms": 60000})
    assert answer["error_code"] == int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def test_a_restart_loads_the_snapshot_and_reads_only_the_log_after_it(serve_logdir, tmp_path):
    """A clean stop writes a Kafka-format snapshot at the log end; the next start loads it and
    reads no batch of the log; a retry of the producer's last batch is still a duplicate."""
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, log_config=LogConfig(segment_bytes=400))
    with WireClient(server.port) as client:
        for seq in range(0, 40, 2):
            assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(seq)}, 9)))[0]["error_code"] == 0
    server.stop()
    part = tmp_path / "t-0"
    snapshots = sorted(int(p.stem) for p in part.glob("*.snapshot"))
    bases = sorted(int(p.stem) for p in part.glob("*.log"))
    assert len(bases) > 3 and snapshots[-1] == 40  # the clean stop's, at the log end
    assert set(snapshots[:-1]) <= set(bases)  # and those written at rolls
    (entry,) = decode_snapshot(snapshot_path(part, 40).read_bytes())
    assert (entry.producer_id, entry.last_sequence, entry.last_offset, entry.offset_delta) == (42, 39, 39, 1)

    again = serve_logdir(tmp_path)
    table, end, snapshot = load_producer_state(again.logdir.partition("t", 0))
    assert (end, snapshot) == (40, 40) and table.entry(42).last_sequence == 39
    with WireClient(again.port) as client:
        retry = answers(client.call(produce.SPEC, 9, produce_body({0: idem(38)}, 9)))[0]
        assert (retry["error_code"], retry["base_offset"]) == (0, 38)
        gap = answers(client.call(produce.SPEC, 9, produce_body({0: idem(50)}, 9)))[0]
        assert gap["error_code"] == int(AppendErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(40)}, 9)))[0]["base_offset"] == 40


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_or_the_log_used(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        for seq in (0, 2):
            client.call(produce.SPEC, 9, produce_body({0: idem(seq)}, 9))
    server.stop()
    path = snapshot_path(tmp_path / "t-0", 4)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    again = serve_logdir(tmp_path)
    with WireClient(again.port) as client:
        retry = answers(client.call(produce.SPEC, 9, produce_body({0: idem(2)}, 9)))[0]
        assert (retry["error_code"], retry["base_offset"]) == (0, 2)  # rebuilt from the log
    assert not path.exists() or decode_snapshot(path.read_bytes())


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs, mounted for the test and removed after it (root only)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_a_full_disk_is_a_produce_error_and_the_partition_recovers(small_tmpfs, serve_logdir):
    """ENOSPC while appending: the producer gets KAFKA_STORAGE_ERROR (NOT_LEADER_OR_FOLLOWER
    before Produce v4), the partial write is removed, reads are unaffected, and once space is
    freed the same partition takes appends again, also after a restart."""
    (small_tmpfs / "t-0").mkdir()
    filler = small_tmpfs / "filler"
    filler.write_bytes(os.urandom(1_200_000))
    server = serve_logdir(small_tmpfs)
    part = small_tmpfs / "t-0"
    acked = 0
    codes = set()
    seq = 0
    with WireClient(server.port) as client:
        while len(codes) < 2 and seq < 10_000:
            for version in (9, 3):
                data = big_batch(seq, pid=7 if version == 9 else -1)
                answer = answers(client.call(produce.SPEC, version, produce_body({0: data}, version)))[0]
                if answer["error_code"] == 0:
                    acked += 2
                    seq += 2 if version == 9 else 0
                else:
                    codes.add((version, answer["error_code"]))
        assert codes == {(9, int(ErrorCode.KAFKA_STORAGE_ERROR)), (3, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))}
        plog = server.logdir.partition("t", 0)
        segment = plog.segments[-1]
        assert segment.path.stat().st_size == segment.scanned_bytes  # no partial batch left
        # reads are not affected: everything acknowledged is there
        on_disk = [offset for offset, _ in records_on_disk(part)]
        assert on_disk == list(range(acked)) and acked > 100
        fetched = fetch_raw(server.port, 4, "t", 0, offset=acked - 2)["responses"][0]["partitions"][0]
        assert fetched["error_code"] == 0 and fetched["high_watermark"] == acked
        assert bytes(fetched["records"])
        filler.unlink()  # space comes back
        later = answers(client.call(produce.SPEC, 9, produce_body({0: big_batch(seq, pid=7)}, 9)))[0]
        assert (later["error_code"], later["base_offset"]) == (0, acked)
    server.stop()
    again = serve_logdir(small_tmpfs)
    with WireClient(again.port) as client:
        answer = answers(client.call(produce.SPEC, 9, produce_body({0: big_batch(seq + 2, pid=7)}, 9)))[0]
        assert (answer["error_code"], answer["base_offset"]) == (0, acked + 2)
    again.stop()


def big_batch(seq: int, pid: int) -> bytes:
    """Two records of 4 KiB (idempotent when ``pid`` >= 0)."""
    from lazyconv.records import RecordsBuilder

    producer = {"producer_id": pid, "producer_epoch": 0, "base_sequence": seq} if pid >= 0 else {}
    builder = RecordsBuilder(2, **producer)
    for i in range(2):
        builder.append(None, 1_000 + i, b"k", os.urandom(4096))
    return builder.build()


def test_flush_messages_fsyncs_before_the_answer_and_a_clean_stop_fsyncs_everything(
        serve_logdir, tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    server = serve_logdir(tmp_path, log_config=LogConfig(flush_messages=4))
    segment = str(tmp_path / "t-0" / f"{0:020d}.log")
    with WireClient(server.port) as client:
        client.call(produce.SPEC, 9, produce_body({0: idem(0, count=2)}, 9))
        assert segment not in synced  # 2 messages: below --flush-messages
        client.call(produce.SPEC, 9, produce_body({0: idem(2, count=2)}, 9))
        assert segment in synced  # 4: fsynced before the answer came
        synced.clear()
        client.call(produce.SPEC, 9, produce_body({1: idem(0, count=1, pid=9)}, 9))
    assert not synced
    server.stop()  # the clean stop: t-1's segment, the snapshots, the recovery points
    assert str(tmp_path / "t-1" / f"{0:020d}.log") in synced
    assert any(".snapshot." in path for path in synced)  # written to a temporary name, fsynced, renamed
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 4\nt 1 1\n"


@pytest.mark.slow
def test_flush_ms_fsyncs_a_partition_once_its_oldest_write_is_that_old(serve_logdir, tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, log_config=LogConfig(flush_ms=200))
    segment = str(tmp_path / "t-0" / f"{0:020d}.log")
    with WireClient(server.port) as client:
        client.call(produce.SPEC, 9, produce_body({0: idem(0)}, 9))
    assert segment not in synced
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    deadline = time.monotonic() + 5
    while not checkpoint.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segment in synced  # and then the recovery point moved up to it
    assert checkpoint.read_text() == "0\n1\nt 0 2\n"


def test_an_abort_marker_gets_its_txnindex_entry(serve_logdir, tmp_path):
    """Kafka's TransactionIndex: one 34-byte entry per aborted transaction in the segment that
    holds its marker, what read_committed fetches and ``lazyconv validate`` rely on."""
    from lazyconv.logdir._txnindex import AbortedTxn, parse_txnindex
    from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
    from lazyconv.protocol import _end_txn as end_txn

    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path)
    txn_id = f"txn-{uuid.uuid4().hex[:6]}"
    with WireClient(server.port) as client:
        answer = client.call(init_producer_id.SPEC, 4, {"transactional_id": txn_id,
                                                         "transaction_timeout_ms": 60000})
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        client.call(add_partitions_to_txn.SPEC, 3, {
            "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
        body = produce_body({0: idem(0, pid=pid, epoch=epoch, txn=True)}, 9)
        body["transactional_id"] = txn_id
        assert answers(client.call(produce.SPEC, 9, body))[0]["error_code"] == 0
        assert client.call(end_txn.SPEC, 3, {"transactional_id": txn_id, "producer_id": pid,
                                             "producer_epoch": epoch, "committed": False})["error_code"] == 0
    path = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert parse_txnindex(path.read_bytes()) == [AbortedTxn(pid, 0, 2, 3)]


def test_flush_messages_waits_for_a_flush_that_started_between_the_append_and_the_answer(
        tmp_path, monkeypatch):
    """A flush that began on the flusher thread just after an append (another request's, a
    roll's) zeroes the unflushed count before its fsync is done: the Produce still waits for a
    flush of its own, which the flusher runs after that one (found by a review: the answer went
    out while the fsync was running)."""
    import threading

    import lazyconv.logdir._partition as partition_module
    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.net._model import Listener
    from lazyconv.serve._broker import Broker

    (tmp_path / "t-0").mkdir()
    logdir = LogDirectory(tmp_path, LogConfig(flush_messages=1))
    broker = Broker(logdir, [Listener(0, "127.0.0.1", 9092)], offsets_in_memory=True)
    plog = logdir.partition("t", 0)
    in_fsync, release = threading.Event(), threading.Event()
    real_fsync = partition_module.fsync_path

    def slow_fsync(path):
        in_fsync.set()
        release.wait(10)
        real_fsync(path)

    monkeypatch.setattr(partition_module, "fsync_path", slow_fsync)
    real_append = plog.append

    def append_then_a_flush_starts(entries):
        out = real_append(entries)
        logdir.flusher.submit(plog.flush)  # another request's flush, now on the flusher thread
        assert in_fsync.wait(10)
        return out

    monkeypatch.setattr(plog, "append", append_then_a_flush_starts)
    to_flush: dict = {}
    answer = answers(broker.produce(9, produce_body({0: idem(0, count=1)}, 9), to_flush))[0]
    assert answer["error_code"] == 0
    assert plog in to_flush, "answered without waiting for the fsync of its records"
    release.set()
    logdir.flusher.drain()
