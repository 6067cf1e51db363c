"""Bad Produce requests over a real socket: Kafka's error per partition, nothing appended, and
the good partition of the same request appended (the server side of append validation)."""

from __future__ import annotations

import pytest

from lazyconv.protocol import _produce as produce
from lazyconv.records import FileRecords, build_end_txn_marker
from lazyconv.serve._append_validation import AppendErrorCode as E
from lazyconv.serve._producer_state import rebuild_producer_state
from tests.serve.test_append_validation import idem, recrafted, v2_batch
from tests.serve.wire import WireClient


def _garbage_records() -> bytes:
    good = v2_batch(3)
    return recrafted(good, payload=b"\xff" * (len(good) - 61))


BAD_PRODUCES = {
    "garbage-records": (_garbage_records, E.INVALID_RECORD),
    "count-vs-offset-range": (lambda: recrafted(v2_batch(3), record_count=2), E.INVALID_RECORD),
    "last-offset-delta-int32-max": (lambda: recrafted(v2_batch(1), last_offset_delta=2**31 - 1),
                                    E.INVALID_RECORD),
    # without its transactional flag: a transactional batch in a request without a transactional
    # id refuses the whole request (tests/serve/test_txn_verification.py)
    "client-control-batch": (lambda: recrafted(build_end_txn_marker(0, 1_000, producer_id=5, producer_epoch=0,
                                                                    commit=True), attributes=0x20),
                             E.INVALID_RECORD),
    "count-zero-with-a-record": (lambda: recrafted(v2_batch(1), record_count=0), E.INVALID_RECORD),
    "broken-crc": (lambda: v2_batch(2)[:-2] + b"!\x00", E.CORRUPT_MESSAGE),
}


def produce_body(parts: dict[int, bytes | None], version: int, topic: str = "t") -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": r} for p, r in parts.items()]}]}


def answers(response: dict) -> dict[int, dict]:
    return {p["index"]: p for t in response["responses"] for p in t["partition_responses"]}


def offsets_in(path) -> list[int]:
    if not path.exists():
        return []
    with FileRecords.open(path) as records:
        return [r.offset for b in records.batches() for r in b]


@pytest.fixture
def two_partitions(tmp_path):
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    return tmp_path


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("case", sorted(BAD_PRODUCES))
def test_a_bad_produce_is_refused_and_the_good_partition_appended(serve_logdir, two_partitions,
                                                                   case, version):
    make_bad, code = BAD_PRODUCES[case]
    server = serve_logdir(two_partitions)
    segment0 = two_partitions / "t-0" / f"{0:020d}.log"
    segment1 = two_partitions / "t-1" / f"{0:020d}.log"
    with WireClient(server.port) as client:
        first = answers(client.call(produce.SPEC, version, produce_body({0: v2_batch(2)}, version)))
        assert first[0]["error_code"] == 0 and first[0]["base_offset"] == 0
        before = segment0.read_bytes()
        got = answers(client.call(produce.SPEC, version,
                                  produce_body({0: make_bad(), 1: v2_batch(3)}, version)))
    assert got[0]["error_code"] == int(code)
    assert got[0]["base_offset"] == -1
    if version >= 8:
        assert got[0]["error_message"]  # says what is wrong
    # nothing of the bad partition was appended; its high watermark did not move
    assert segment0.read_bytes() == before
    assert server.logdir.partition("t", 0).high_watermark == 2
    # the good partition of the same request was appended
    assert got[1]["error_code"] == 0 and got[1]["base_offset"] == 0
    assert offsets_in(segment1) == [0, 1, 2]
    assert server.logdir.partition("t", 1).high_watermark == 3
    assert server.server.handler.stats.rejected_produce_partitions == 1


def test_record_errors_are_answered_to_produce_v8(serve_logdir, two_partitions):
    """A per-record problem (offset deltas out of order) names the record in RecordErrors."""
    builder_batch = v2_batch(3)
    # swap the offset deltas of records 1 and 2: the batch stays structurally valid
    records = bytearray(builder_batch[61:])
    at, deltas = 0, []
    for _ in range(3):
        length = records[at] >> 1  # one-byte zig-zag varint for these small records
        deltas.append(at + 1 + 1 + 1)  # length, attributes, timestamp delta (one byte each)
        at += 1 + length
    records[deltas[1]], records[deltas[2]] = records[deltas[2]], records[deltas[1]]
    bad = recrafted(builder_batch, payload=bytes(records))
    server = serve_logdir(two_partitions)
    with WireClient(server.port) as client:
        got = answers(client.call(produce.SPEC, 9, produce_body({0: bad}, 9)))[0]
    assert got["error_code"] == int(E.INVALID_RECORD)
    assert [e["batch_index"] for e in got["record_errors"]] == [1, 2]
    assert not (two_partitions / "t-0" / f"{0:020d}.log").exists()


def test_idempotent_producer_state_survives_a_restart(serve_logdir, two_partitions):
    """The producer table is rebuilt from the log: a retried batch after a restart is a duplicate
    (answered with its first offset, not appended again) and a sequence gap is refused."""
    server = serve_logdir(two_partitions)
    with WireClient(server.port) as client:
        assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(0)}, 9)))[0]["base_offset"] == 0
        assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(2)}, 9)))[0]["base_offset"] == 2
    server.stop()
    table = rebuild_producer_state(server.logdir.partition("t", 0))
    assert table.entry(42) is not None and table.entry(42).last_sequence == 3
    again = serve_logdir(two_partitions)
    with WireClient(again.port) as client:
        retry = answers(client.call(produce.SPEC, 9, produce_body({0: idem(2)}, 9)))[0]
        assert (retry["error_code"], retry["base_offset"]) == (0, 2)
        gap = answers(client.call(produce.SPEC, 9, produce_body({0: idem(9)}, 9)))[0]
        assert gap["error_code"] == int(E.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert answers(client.call(produce.SPEC, 9, produce_body({0: idem(4)}, 9)))[0]["base_offset"] == 4
    assert offsets_in(two_partitions / "t-0" / f"{0:020d}.log") == list(range(6))
