"""Cross-checks with kafka-python's ``kafka.record``: our bytes decode identically there, and its
bytes decode identically here, for every magic x codec x timestamp type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from lazyconv.records import Compression, MemoryRecords, Record, RecordsBuilder, TimestampType

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
COMBOS = [
    (magic, codec, ts_type)
    for magic in (0, 1, 2)
    for codec in CODECS
    if not (codec == Compression.ZSTD and magic < 2)
    for ts_type in (
        (TimestampType.CREATE_TIME,)
        if magic == 0
        else (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
    )
]


blobs = st.one_of(st.none(), st.binary(max_size=40))
timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**42))


@st.composite
def record_lists(draw, with_headers: bool):
    n = draw(st.integers(min_value=1, max_value=12))
    offset = draw(st.integers(min_value=0, max_value=2**40))
    out = []
    for _ in range(n):
        headers = ()
        if with_headers:
            headers = tuple(
                draw(st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3))
            )
        out.append((offset, draw(timestamps), draw(blobs), draw(blobs), headers))
        offset += draw(st.integers(min_value=1, max_value=5))
    return out


def kp_records(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value, headers) as kafka-python reads them."""
    out = []
    records = KpMemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            headers = tuple((k, v) for k, v in (r.headers or []))
            out.append((r.offset, ts, r.key, r.value, headers))
    return out


def expected(magic: int, ts_type: TimestampType, lat: int, records: list[tuple]) -> list[Record]:
    out = []
    for offset, ts, key, value, headers in records:
        if magic == 0:
            ts = -1
        elif ts_type == TimestampType.LOG_APPEND_TIME:
            ts = lat
        out.append(Record(offset, ts, key, value, headers))
    return out


@pytest.mark.parametrize(("magic", "codec", "ts_type"), COMBOS)
@settings(max_examples=10)
@given(data=st.data())
def test_round_trip_and_kafka_python_agrees(magic, codec, ts_type, data) -> None:
    records = data.draw(record_lists(with_headers=magic == 2))
    lat = 1_700_000_000_123
    builder = RecordsBuilder(
        magic,
        codec,
        ts_type,
        base_offset=records[0][0],
        log_append_time=lat if ts_type == TimestampType.LOG_APPEND_TIME else None,
    )
    for rec in records:
        builder.append(*rec)
    built = builder.build()
    want = expected(magic, ts_type, lat, records)
    ours = MemoryRecords(built)
    batches = list(ours.batches())
    for batch in batches:
        batch.validate()
        assert batch.magic == magic
        assert batch.compression == codec
        assert batch.last_offset == records[-1][0] if codec or magic == 2 else True
    if codec or magic == 2:
        assert len(batches) == 1
        assert batches[0].base_offset == records[0][0]
        assert batches[0].timestamp_type == (ts_type if magic else TimestampType.NO_TIMESTAMP)
    assert list(ours.records()) == want
    assert kp_records(built) == [tuple(r) for r in want]


@pytest.mark.parametrize(("magic", "codec"), sorted({(m, c) for m, c, _ in COMBOS}))
@settings(max_examples=10)
@given(data=st.data())
def test_kafka_python_built_batches_decode_identically(magic, codec, data) -> None:
    records = data.draw(record_lists(with_headers=magic == 2))
    # kafka-python writes v2 batches with base offset 0 and the offsets as int32 deltas
    base = records[0][0] % (2**31 - 100) if magic == 2 else records[0][0]
    kp = KpBuilder(magic, int(codec), 1 << 20, offset=base)
    for i, (_offset, ts, key, value, headers) in enumerate(records):
        # kafka-python assigns consecutive offsets and needs timestamps (None = now)
        kp.append(ts if ts >= 0 else i, key, value, headers=list(headers) if magic == 2 else None)
    kp.close()
    built = bytes(kp.buffer())
    theirs = kp_records(built)
    ours = MemoryRecords(built)
    for batch in ours.batches():
        batch.validate()
    assert [tuple(r) for r in ours.records()] == theirs
    assert [r[0] for r in theirs] == list(range(base, base + len(records)))


def test_kafka_python_v2_producer_state_and_control_fields() -> None:
    kp = KpBuilder(2, 0, 1 << 20, offset=10, transactional=True, producer_id=99, producer_epoch=3, base_sequence=7)
    kp.append(5, b"k", b"v", headers=[])
    kp.append(6, None, b"w", headers=[("x", b"y")])
    kp.close()
    [batch] = list(MemoryRecords(bytes(kp.buffer())).batches())
    batch.validate()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, 7)
    assert batch.is_transactional and not batch.is_control
    # kafka-python (a producer) leaves base offset 0 and writes offset deltas 10, 11
    assert (batch.base_offset, batch.last_offset, batch.last_sequence, batch.record_count) == (0, 11, 18, 2)
    assert list(batch) == [Record(10, 5, b"k", b"v", ()), Record(11, 6, None, b"w", (("x", b"y"),))]
