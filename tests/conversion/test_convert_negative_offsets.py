"""Down-conversion refuses negative offsets; whatever it does write, our reader reads back as is."""

from __future__ import annotations

import pytest

from lazyconv.conversion._down import (
    _convert_batch_into_generic,
    _convert_v2_batch_into,
    down_convert,
)
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import InvalidRecordError, LazyconvError
from lazyconv.records import Compression, MemoryRecords
from lazyconv.records._builder import encode_v2_batch
from lazyconv.records._codec import append_v2_record
from lazyconv.records._compression import compress

CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4]


def batch_bytes(base_offset: int, deltas: list[int], codec: Compression = Compression.NONE) -> bytes:
    """A v2 batch with any base offset and any record offset deltas (CRC valid)."""
    records = bytearray()
    for i, delta in enumerate(deltas):
        append_v2_record(records, delta, i, b"k%d" % i, b"v%d" % i)
    payload = bytes(records) if codec == Compression.NONE else compress(codec, records, 2)
    return encode_v2_batch(
        base_offset=base_offset, partition_leader_epoch=-1, attributes=int(codec),
        last_offset_delta=len(deltas) - 1, base_timestamp=1_000, max_timestamp=1_000 + len(deltas) - 1,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=len(deltas), payload=payload,
    )


def outcome(convert, data: bytes, to_magic: int, first_offset: int):
    (batch,) = list(MemoryRecords(data).batches())
    out = bytearray()
    try:
        convert(out, batch, to_magic, first_offset)
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)
    return ("ok", bytes(out))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("base_offset", [-1, -3, -(1 << 40)])
def test_negative_offsets_are_refused_by_both_paths(codec: Compression, to_magic: int, base_offset: int) -> None:
    data = batch_bytes(base_offset, [0, 1, 2], codec)
    fused = outcome(_convert_v2_batch_into, data, to_magic, base_offset)
    generic = outcome(_convert_batch_into_generic, data, to_magic, base_offset)
    assert fused == generic
    assert fused[0] == "error" and fused[1] is InvalidRecordError
    assert f"record offset {base_offset} is negative" in fused[2] and fused[3] == 0
    with pytest.raises(InvalidRecordError, match="negative"):
        down_convert(MemoryRecords(data).batches(), to_magic, base_offset)


@pytest.mark.parametrize("codec", CODECS)
def test_a_negative_delta_from_a_positive_base_is_refused(codec: Compression) -> None:
    data = batch_bytes(2, [-4, 1, 2], codec)  # offsets -2, 3, 4
    for to_magic in (0, 1):
        fused = outcome(_convert_v2_batch_into, data, to_magic, -10)
        assert fused == outcome(_convert_batch_into_generic, data, to_magic, -10)
        assert fused[0] == "error" and "record offset -2 is negative" in fused[2]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("base_offset", [-3, -1, 0, 1, 7])
@pytest.mark.parametrize("first_offset", [-5, 0, 2])
def test_read_and_convert_agree(codec: Compression, to_magic: int, base_offset: int, first_offset: int) -> None:
    """Either conversion refuses, or reading its output gives the offsets the input holds."""
    data = batch_bytes(base_offset, [0, 1, 2, 3], codec)
    offsets = [record.offset for record in MemoryRecords(data).records()]
    if codec == Compression.NONE:  # only uncompressed batches are trimmed by the fetch offset
        offsets = [offset for offset in offsets if offset >= first_offset]
    try:
        converted = down_convert(MemoryRecords(data).batches(), to_magic, first_offset)
    except InvalidRecordError as exc:
        assert offsets and offsets[0] < 0 and "negative" in str(exc)
        return
    assert all(offset >= 0 for offset in offsets)
    assert [record.offset for record in converted.records.records()] == offsets


def test_the_fetch_offset_filter_drops_negative_records_before_the_check() -> None:
    data = batch_bytes(-2, [0, 1, 2, 3, 4])  # offsets -2..2, uncompressed
    converted = down_convert(MemoryRecords(data).batches(), 1, 0)
    assert [record.offset for record in converted.records.records()] == [0, 1, 2]


def test_the_lazy_conversion_refuses_before_committing_a_size() -> None:
    data = batch_bytes(-3, [0, 1, 2], Compression.GZIP)
    with pytest.raises(InvalidRecordError, match="negative"):
        LazyDownConvertedRecords(MemoryRecords(data), 1, 0)
