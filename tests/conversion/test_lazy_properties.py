"""Property test: for random inputs the lazy send writes exactly ``size_in_bytes`` bytes, and
those bytes are the eager conversion cut at the committed size or followed by overflow padding,
so a consumer (kafka-python) reads exactly the eager conversion's records up to that size.

Random: input magics 0/1/2, codecs none/gzip/snappy/lz4 (zstd has its own tests), control and
transactional batches, LogAppendTime, empty v2 batches, offset gaps, trailing partial batches,
target magic, first offset, chunk sizes 16 KiB – 1 MiB and partial-write patterns (including a
channel that takes one byte per call, and one that often takes nothing).
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from lazy_support import (
    TrickleChannel,
    build_batch,
    consumer_records,
    drive,
    v2_empty_batch,
    v2_end_txn_marker,
    v2_set_log_append_time,
)

from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, overflow_padding
from lazyconv.conversion._down import down_convert_bytes
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.records import Compression, FileRecords, MemoryRecords

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
VALUE_SIZES = st.one_of(st.integers(0, 40), st.integers(2000, 9000))


@st.composite
def batch_specs(draw):  # one input batch, described (offsets assigned later)
    kind = draw(st.sampled_from(["v0", "v1", "v2", "v2", "v2_many", "control", "empty_v2"]))
    if kind in ("control", "empty_v2"):
        count = 0
    elif kind == "v2_many":  # many small records: v2 → v0/v1 grows them (cuts)
        count = draw(st.integers(20, 300))
    else:
        count = draw(st.integers(1, 6))
    base_ts = draw(st.integers(0, 2**41))
    if kind == "v2_many":  # generated, not drawn one by one: drawing 300 records is slow
        records = [
            (base_ts + i, None if i % 3 else b"k%d" % i, bytes([i % 256]) * (i % 4))
            for i in range(count)
        ]
    else:
        values = VALUE_SIZES.map(lambda n: bytes([n % 251]) * n)
        records = [
            (
                draw(st.one_of(st.just(-1), st.integers(base_ts, base_ts + 10_000))),
                draw(st.one_of(st.none(), st.binary(max_size=8))),
                draw(st.one_of(st.none(), values)),
            )
            for _ in range(count)
        ]
    return {
        "kind": kind,
        "records": records,
        "codec": draw(st.sampled_from(CODECS)),
        "gaps": [draw(st.integers(0, 3)) for _ in range(count)],
        "log_append": draw(st.booleans()),
        "transactional": draw(st.booleans()),
    }


def _encode(spec: dict, next_offset: int) -> tuple[bytes, int]:
    kind = spec["kind"]
    if kind == "control":
        return v2_end_txn_marker(next_offset, 1000, producer_id=5, commit=spec["log_append"]), next_offset + 1
    if kind == "empty_v2":
        return v2_empty_batch(next_offset, last_offset_delta=2), next_offset + 3
    offsets = []
    for gap in spec["gaps"]:
        next_offset += gap
        offsets.append(next_offset)
        next_offset += 1
    magic = {"v0": 0, "v1": 1, "v2": 2, "v2_many": 2}[kind]
    records = spec["records"]
    if magic == 1:  # v1 cannot hold timestamps below -1; v0 has none at all
        records = [(max(ts, -1), k, v) for ts, k, v in records]
    if magic < 2 and spec["codec"] == Compression.NONE:
        # Standalone legacy messages: one entry per record (several "batches").
        data = b"".join(
            build_batch(magic, [rec], offsets=[off]) for rec, off in zip(records, offsets, strict=True)
        )
        return data, next_offset
    log_append_time = 1_700_000_000_000 if (spec["log_append"] and magic == 1) else None
    data = build_batch(
        magic,
        records,
        offsets=offsets,
        compression=spec["codec"],
        log_append_time=log_append_time,
        transactional=spec["transactional"] and magic == 2,
        producer_id=11 if spec["transactional"] and magic == 2 else -1,
        producer_epoch=0 if spec["transactional"] and magic == 2 else -1,
    )
    if magic == 2 and spec["log_append"]:
        data = v2_set_log_append_time(data, 1_700_000_000_000)
    return data, next_offset


@st.composite
def inputs(draw):
    specs = draw(st.lists(batch_specs(), min_size=0, max_size=7))
    offset = draw(st.integers(0, 2**40))
    start = offset
    pieces = []
    for spec in specs:
        data, offset = _encode(spec, offset)
        pieces.append(data)
    data = b"".join(pieces)
    if data and draw(st.booleans()):
        data = data[: len(data) - draw(st.integers(1, min(len(pieces[-1]), 200)))]
    first_offset = draw(st.one_of(st.just(start), st.integers(start, offset + 1)))
    return data, first_offset


PATTERNS = st.one_of(
    st.just((1 << 20,)),
    st.lists(st.integers(0, 70_000), min_size=1, max_size=5).filter(any).map(tuple),
)


def _first_conversion_size(records: MemoryRecords, to_magic: int, first_offset: int) -> int:
    for batch in records.batches():
        data, _ = down_convert_bytes([batch], to_magic, first_offset)
        if data:
            return len(data)
    return -1


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
@settings(max_examples=30)
@given(
    case=inputs(),
    to_magic=st.sampled_from([0, 1, 1, 2]),
    chunk_size=st.one_of(
        st.just(MIN_CHUNK_SIZE),
        st.integers(MIN_CHUNK_SIZE, 3 * MIN_CHUNK_SIZE),
        st.integers(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE),
    ),
    pattern=PATTERNS,
)
def test_lazy_send_equals_eager_conversion_up_to_the_committed_size(
    case, to_magic, chunk_size, pattern
) -> None:
    data, first_offset = case
    records = MemoryRecords(data)
    eager, eager_stats = down_convert_bytes(records.batches(), to_magic, first_offset)
    lazy = LazyDownConvertedRecords(records, to_magic, first_offset, chunk_size=chunk_size)
    size = lazy.size_in_bytes

    first = _first_conversion_size(records, to_magic, first_offset)
    has_complete_batch = next(iter(records.batches()), None) is not None
    if first >= 0:
        assert size == max(len(data), first)
    else:
        assert size == (12 if has_complete_batch else 0)

    if len(eager) > 20_000:
        pattern = tuple(max(p, 997) if p else 0 for p in pattern)  # keep 1-byte runs short
    send = lazy.to_send()
    sent = drive(send, TrickleChannel(pattern))
    assert len(sent) == size == send.written
    event(f"chunks={min(send.chunks, 4)}")
    event("cut" if send.truncated else "padded" if send.padding_bytes else "exact")
    event(f"input>{min(len(data) // 16384, 4) * 16}KiB")
    event(f"batches={min(sum(1 for _ in records.batches()), 6)}")

    if len(eager) >= size:
        assert sent == eager[:size]
        assert consumer_records(sent) == consumer_records(eager[:size])
    else:
        assert sent == eager + overflow_padding(size - len(eager))
        # Everything fits: a consumer reads every converted record, and the stats are the
        # eager conversion's (each batch converted exactly once, no duplicates).
        assert consumer_records(sent) == consumer_records(eager)
        assert send.stats.records_converted == eager_stats.records_converted
        assert send.stats.temporary_memory_bytes == eager_stats.temporary_memory_bytes


@settings(max_examples=10)
@given(case=inputs(), to_magic=st.sampled_from([0, 1]))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_one_byte_at_a_time_channel(case, to_magic) -> None:
    """A non-blocking channel that takes one byte per call (and often none) still gets the
    exact stream."""
    data, first_offset = case
    data = data[:6_000]
    records = MemoryRecords(data)
    reference = LazyDownConvertedRecords(records, to_magic, first_offset).to_send().to_bytes()
    trickled = drive(
        LazyDownConvertedRecords(records, to_magic, first_offset).to_send(), TrickleChannel((1, 0))
    )
    assert trickled == reference


@settings(max_examples=400)
@given(
    case=inputs(),
    to_magic=st.sampled_from([0, 1, 2]),
    chunk_size=st.integers(MIN_CHUNK_SIZE, 2 * MIN_CHUNK_SIZE),
    pattern=PATTERNS,
)
@pytest.mark.slow
def test_lazy_send_equals_eager_conversion_many_examples(case, to_magic, chunk_size, pattern) -> None:
    """The same property over many more examples, with small chunks (many chunks per send)."""
    test_lazy_send_equals_eager_conversion_up_to_the_committed_size.hypothesis.inner_test(
        case, to_magic, chunk_size, pattern
    )


@settings(max_examples=10)
@given(case=inputs(), to_magic=st.sampled_from([0, 1, 2]), chunk_size=st.just(MIN_CHUNK_SIZE))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_file_backed_input_sends_the_same_bytes(case, to_magic, chunk_size) -> None:
    """A ``FileRecords`` input (headers read with pread, batches loaded when converted) gives
    the same committed size and bytes as the same data in memory."""
    data, first_offset = case
    in_memory = LazyDownConvertedRecords(MemoryRecords(data), to_magic, first_offset, chunk_size)
    with tempfile.NamedTemporaryFile(suffix=".log") as handle:
        handle.write(data)
        handle.flush()
        with FileRecords.open(handle.name) as records:
            from_file = LazyDownConvertedRecords(records, to_magic, first_offset, chunk_size)
            assert from_file.size_in_bytes == in_memory.size_in_bytes
            assert from_file.to_send().to_bytes() == in_memory.to_send().to_bytes()
