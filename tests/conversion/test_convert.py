"""Eager down-conversion (docs/guide/down-conversion.md): the worked examples' exact bytes and
one test per trap that concerns RecordsUtil semantics."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from crc32c import crc32c
from lazy_support import (
    build_batch,
    consumer_records,
    v2_empty_batch,
    v2_end_txn_marker,
    v2_set_log_append_time,
)

from lazyconv.conversion import LazyDownConvertedRecords, overflow_padding
from lazyconv.conversion._down import (
    ConversionStats,
    ConvertedRecords,
    down_convert,
    down_convert_bytes,
    down_convert_file,
)
from lazyconv.errors import ConfigurationError, InvalidRecordError, UnsupportedCompressionError
from lazyconv.records import (
    Compression,
    FileRecords,
    MemoryRecords,
    RecordsBuilder,
    TimestampType,
)


def _x_batch(base_offset: int = 0, log_append_time: int | None = None) -> bytes:
    """Input X of the worked examples: an 82-byte uncompressed v2 batch."""
    builder = RecordsBuilder(
        2,
        timestamp_type=TimestampType.CREATE_TIME
        if log_append_time is None
        else TimestampType.LOG_APPEND_TIME,
        base_offset=base_offset,
        log_append_time=log_append_time,
    )
    builder.append(offset=base_offset, timestamp=1000, key=b"k", value=b"v", headers=[("h", b"x")])
    builder.append(offset=base_offset + 1, timestamp=1005, key=None, value=b"w")
    return builder.build()


def _convert(data: bytes, to_magic: int, first_offset: int = 0) -> tuple[bytes, ConversionStats]:
    return down_convert_bytes(MemoryRecords(data).batches(), to_magic, first_offset)


X_V1_0 = "0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76"
X_V1_1 = "0000000000000001 00000017 98989778 01 00 00000000000003ed ffffffff 00000001 77"
X_V0 = (
    "0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76"
    "0000000000000001 0000000f a50b8f63 00 00 ffffffff 00000001 77"
)


def test_x_is_the_spec_batch() -> None:
    x = _x_batch()
    assert len(x) == 82
    assert x[17:21] == bytes.fromhex("9711b97b")


def test_v2_to_v1_worked_example() -> None:
    data, stats = _convert(_x_batch(), 1)
    assert data == bytes.fromhex(X_V1_0 + X_V1_1)
    assert stats.temporary_memory_bytes == 82 + 36 + 35
    assert stats.records_converted == 2
    assert stats.conversion_time_ns > 0


def test_v2_to_v0_worked_example() -> None:
    data, stats = _convert(_x_batch(), 0)
    assert data == bytes.fromhex(X_V0)
    assert (stats.temporary_memory_bytes, stats.records_converted) == (137, 2)


def test_first_offset_filters_converted_uncompressed_records() -> None:
    data, stats = _convert(_x_batch(), 1, first_offset=1)
    assert data == bytes.fromhex(X_V1_1)
    assert stats.records_converted == 1


def test_log_append_time_worked_example() -> None:
    x = _x_batch(base_offset=10, log_append_time=5000)
    assert _convert(x, 1)[0] == bytes.fromhex(
        "000000000000000a 00000018 b18e47fd 01 08 0000000000001388 00000001 6b 00000001 76"
        "000000000000000b 00000017 16f1328b 01 08 0000000000001388 ffffffff 00000001 77"
    )
    assert _convert(x, 0)[0] == bytes.fromhex(
        "000000000000000a 00000010 1fecd70a 00 00 00000001 6b 00000001 76"
        "000000000000000b 0000000f a50b8f63 00 00 ffffffff 00000001 77"
    )


GZIP_RECORDS = [(1000, b"k", b"v"), (1005, None, b"w"), (999, b"k3", None)]
GZIP_INNER_V1 = bytes.fromhex(
    "0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76"
    "0000000000000002 00000017 98989778 01 00 00000000000003ed ffffffff 00000001 77"
    "0000000000000003 00000018 deb4c81a 01 00 00000000000003e7 00000002 6b33 ffffffff"
)


def _gzip_input(compression: int = Compression.GZIP) -> bytes:
    return build_batch(2, GZIP_RECORDS, offsets=[20, 22, 23], compression=compression)


def _gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, 16 + zlib.MAX_WBITS)


def test_compressed_batch_becomes_one_v1_wrapper_unfiltered() -> None:
    """A compressed batch becomes one wrapper with the same codec, and is not filtered by offset."""
    data, stats = _convert(_gzip_input(), 1, first_offset=22)
    offset, size, _crc, magic, attributes, timestamp, key_len, value_len = struct.unpack_from(
        ">qiIbbqii", data
    )
    assert (offset, size, magic, attributes, timestamp, key_len) == (23, 98, 1, 0x01, 1005, -1)
    assert len(data) == 12 + size and value_len == 76
    assert _gunzip(data[34:]) == GZIP_INNER_V1
    # Python's zlib gives Java's deflate bytes, so even the wrapper is Java's (CRC 6969619b).
    assert data[12:16] == bytes.fromhex("6969619b")
    assert stats.records_converted == 3
    assert stats.temporary_memory_bytes == len(_gzip_input()) + 34 + len(GZIP_INNER_V1)


def test_compressed_batch_becomes_one_v0_wrapper_with_absolute_offsets() -> None:
    data, _ = _convert(_gzip_input(), 0, first_offset=22)
    offset, size, crc, magic, attributes, key_len, value_len = struct.unpack_from(">qiIbbii", data)
    assert (offset, size, magic, attributes, key_len, value_len) == (23, 0x55, 0, 1, -1, 0x47)
    assert crc == 0xCBF8F5C8
    inner = _gunzip(data[26:])
    assert [struct.unpack_from(">q", inner, p)[0] for p in (0, 28, 55)] == [20, 22, 23]


@pytest.mark.parametrize(
    ("compression", "to_magic", "prefix"),
    [
        (Compression.SNAPPY, 1, "82534e41505059000000000100000001"),
        (Compression.LZ4, 1, "04224d18604082"),
        (Compression.LZ4, 0, "04224d1860401a"),  # v0 keeps Kafka's broken header checksum
    ],
)
def test_wrapper_codec_framing(compression: int, to_magic: int, prefix: str) -> None:
    data, _ = _convert(_gzip_input(compression), to_magic)
    value_at = 34 if to_magic == 1 else 26
    assert data[17] == compression
    assert data[value_at:].startswith(bytes.fromhex(prefix))
    assert [r[0] for r in consumer_records(data)] == [20, 22, 23]


def test_wrapper_uses_the_default_level_not_the_producers() -> None:
    """One wrapper per compressed batch, at the default level: a batch produced with gzip level 1 is recompressed at the default level 6."""
    inner = GZIP_INNER_V1
    level1 = RecordsBuilder(2, compression=Compression.GZIP, base_offset=20, compression_level=1)
    for (ts, key, value), off in zip(GZIP_RECORDS, [20, 22, 23], strict=True):
        level1.append(offset=off, timestamp=ts, key=key, value=value)
    data, _ = _convert(level1.build(), 1)
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = compressor.compress(inner) + compressor.flush()
    assert data[34 + 10 : -8] == deflated


def test_wrapper_offset_is_the_last_kept_record_after_compaction() -> None:
    """A compacted v2 batch whose LastOffsetDelta runs past its last record."""
    batch = bytearray(build_batch(2, [(1, b"a", b"1"), (2, b"b", b"2")], offsets=[50, 52],
                                  compression=Compression.GZIP))
    struct.pack_into(">i", batch, 23, 9)  # last offset 59, as if 53..59 were compacted away
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    assert next(MemoryRecords(bytes(batch)).batches()).last_offset == 59
    data, _ = _convert(bytes(batch), 1)
    assert struct.unpack_from(">q", data)[0] == 52
    assert [r[0] for r in consumer_records(data)] == [50, 52]


def test_mixed_v0_and_v2_uncompressed() -> None:
    """MemoryRecordsBuilderTest.convertToV1WithMixedV0AndV2Data, uncompressed."""
    v0 = build_batch(0, [(-1, b"a", b"1")], base_offset=0)
    v2 = build_batch(2, [(10, b"b", b"2"), (11, b"c", b"3")], base_offset=1)
    data, stats = _convert(v0 + v2, 1, first_offset=2)
    assert data[: len(v0)] == v0  # copied unchanged, even though offset 0 < first offset
    assert consumer_records(data) == [(0, -1, b"a", b"1"), (2, 11, b"c", b"3")]
    assert stats.records_converted == 1


def test_mixed_v0_and_v2_compressed() -> None:
    v0 = build_batch(0, [(-1, b"a", b"1" * 40), (-1, b"a", b"1" * 40)], base_offset=0,
                     compression=Compression.GZIP)
    v2 = build_batch(2, [(10, b"b", b"2"), (11, b"c", b"3")], base_offset=2,
                     compression=Compression.GZIP)
    data, stats = _convert(v0 + v2, 1, first_offset=3)
    assert data[: len(v0)] == v0
    assert [r[0] for r in consumer_records(data)] == [0, 1, 2, 3]
    assert stats.records_converted == 2


def test_v1_to_v0_filters_uncompressed_and_drops_timestamps() -> None:
    v1 = build_batch(1, [(100, b"a", b"1"), (200, b"b", b"2")], base_offset=7)
    data, stats = _convert(v1, 0, first_offset=8)
    assert consumer_records(data) == [(8, -1, b"b", b"2")]
    assert data[16] == 0
    assert stats.records_converted == 1


def test_v1_logappendtime_wrapper_to_v0() -> None:
    builder = RecordsBuilder(1, compression=Compression.GZIP, base_offset=5,
                             timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777)
    builder.append(offset=5, timestamp=1, key=b"k", value=b"v")
    builder.append(offset=6, timestamp=2, key=b"k", value=b"w")
    data, _ = _convert(builder.build(), 0)
    assert consumer_records(data) == [(5, -1, b"k", b"v"), (6, -1, b"k", b"w")]
    assert data[17] == Compression.GZIP  # no timestamp-type bit in v0


def test_v2_logappendtime_compressed_to_v1() -> None:
    batch = v2_set_log_append_time(
        build_batch(2, [(1, b"k", b"v" * 30), (2, b"k", b"w" * 30)], compression=Compression.GZIP),
        4242,
    )
    data, _ = _convert(batch, 1)
    _o, _s, _c, _m, attributes, timestamp = struct.unpack_from(">qiIbbq", data)
    assert attributes == 0x08 | Compression.GZIP and timestamp == 4242
    inner = _gunzip(data[34:])
    assert inner[17] == 0x08 and struct.unpack_from(">q", inner, 18)[0] == 4242
    assert [r[1] for r in consumer_records(data)] == [4242, 4242]


# --- control batches go before the zstd check -------------------------------------------------------------

COMMIT = v2_end_txn_marker(2, 2000, producer_id=7, producer_epoch=1)


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize("to_magic", [0, 1])
def test_control_batches_dropped_below_v2_without_stats(to_magic: int) -> None:
    x = _x_batch()
    data, stats = _convert(COMMIT + x, to_magic)
    assert data == _convert(x, to_magic)[0]
    assert stats.temporary_memory_bytes == _convert(x, to_magic)[1].temporary_memory_bytes


def test_control_batches_kept_for_target_v2() -> None:
    data, stats = _convert(COMMIT + _x_batch(), 2)
    assert data == COMMIT + _x_batch()
    assert (stats.records_converted, stats.temporary_memory_bytes) == (0, 78 + 82)


def test_zstd_control_batch_is_dropped_before_the_zstd_check() -> None:
    zstd_control = _with_attributes(COMMIT, 0x30 | Compression.ZSTD)
    assert next(MemoryRecords(zstd_control).batches()).compression == Compression.ZSTD
    data, _ = _convert(zstd_control + _x_batch(), 1)
    assert data == bytes.fromhex(X_V1_0 + X_V1_1)


# --- zstd fails the whole call --------------------------------------------------------------------


def test_zstd_fails_the_whole_call_even_after_good_batches() -> None:
    zstd = build_batch(2, [(1, b"z", b"z" * 100)], base_offset=2, compression=Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionError, match="zstandard") as info:
        down_convert(MemoryRecords(_x_batch() + zstd).batches(), 1, 0)
    assert info.value.position == 82
    data, stats = _convert(_x_batch() + zstd, 2)  # v2 targets copy zstd batches
    assert data == _x_batch() + zstd and stats.records_converted == 0


# --- dropped fields --------------------------------------------------------------------------------


def test_headers_producer_state_and_transactions_are_dropped() -> None:
    records = [(1000, b"k", b"v"), (1001, None, b"w")]
    plain = build_batch(2, records, base_offset=4)
    rich = build_batch(
        2, records, base_offset=4, headers=[("h", b"x"), ("n", None)], transactional=True,
        producer_id=99, producer_epoch=3, base_sequence=17,
    )
    rich = bytearray(rich)
    struct.pack_into(">i", rich, 12, 42)  # partition leader epoch (not in the CRC)
    for to_magic in (0, 1):
        assert _convert(bytes(rich), to_magic)[0] == _convert(plain, to_magic)[0]


def test_empty_batch_converts_to_nothing() -> None:
    empty = v2_empty_batch(9, last_offset_delta=3)
    assert len(empty) == 61 and next(MemoryRecords(empty).batches()).record_count == 0
    data, stats = _convert(empty, 1)
    assert data == b""
    assert (stats.records_converted, stats.temporary_memory_bytes) == (0, 0)


def test_null_and_empty_keys_and_values_are_preserved() -> None:
    batch = build_batch(2, [(1, None, None), (2, b"", b""), (3, None, b""), (4, b"", None)])
    for to_magic in (0, 1):
        data, _ = _convert(batch, to_magic)
        assert [(r[2], r[3]) for r in consumer_records(data)] == [
            (None, None), (b"", b""), (None, b""), (b"", None)
        ]


def test_stats_add_up() -> None:
    a = ConversionStats(1, 2, 3)
    assert a + ConversionStats(10, 20, 30) == ConversionStats(11, 22, 33)
    assert a.to_dict() == {"records_converted": 1, "temporary_memory_bytes": 2, "conversion_time_ns": 3}


def test_target_magic_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        down_convert([], 3, 0)


def test_records_and_first_offset_are_checked() -> None:
    # raw bytes were iterated as ints ('int' object has no attribute 'is_control'), None and
    # a str offset failed as TypeErrors deep inside
    data = _x_batch()
    for batches in (data, bytearray(data), None):
        with pytest.raises(ConfigurationError, match="needs batches"):
            down_convert(batches, 1, 0)  # type: ignore[arg-type]
    for records in (data, None):
        with pytest.raises(ConfigurationError, match="needs records"):
            down_convert_file(records, 1, 0)  # type: ignore[arg-type]
    for first_offset in (None, "0"):
        with pytest.raises(ConfigurationError, match="first_offset"):
            down_convert(MemoryRecords(data).batches(), 1, first_offset)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="first_offset"):
            down_convert_file(MemoryRecords(data), 1, first_offset)  # type: ignore[arg-type]


def test_down_convert_returns_memory_records() -> None:
    result = down_convert(MemoryRecords(_x_batch()).batches(), 1, 0)
    assert isinstance(result, ConvertedRecords)
    assert isinstance(result.records, MemoryRecords)
    assert [r.offset for r in result.records.records()] == [0, 1]


# --- FileRecords.downConvert returns its input -----------------------------------------------------------------


def test_file_down_convert_returns_the_input_when_nothing_converts(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    content = COMMIT + COMMIT[:20]
    path.write_bytes(content)
    with FileRecords.open(path) as records:
        result = down_convert_file(records, 1, 0)
        assert result.records is records
        assert result.stats == ConversionStats()
        assert records.to_send().to_bytes() == content
        assert bytes(down_convert(records.batches(), 1, 0).records.buffer) == b""


def test_file_down_convert_converts_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(COMMIT + _x_batch())
    with FileRecords.open(path) as records:
        result = down_convert_file(records, 1, 0)
        assert bytes(result.records.buffer) == bytes.fromhex(X_V1_0 + X_V1_1)
        assert result.stats.records_converted == 2


# --- what Kafka's builder refuses -----------------------------------------------------------


def _patch_v2(batch: bytes, at: int, fmt: str, value: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(fmt, data, at, value)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize("to_magic", [0, 1])
def test_negative_timestamp_below_minus_one_is_refused(to_magic: int) -> None:
    batch = build_batch(2, [(10, b"k", b"v")], base_offset=3)
    batch = _patch_v2(batch, 27, ">q", -20)  # BaseTimestamp -20 → record timestamp -20
    with pytest.raises(InvalidRecordError, match="negative timestamp -20"):
        _convert(batch, to_magic)


def test_offsets_that_do_not_increase_are_refused() -> None:
    batch = build_batch(2, [(10, b"k", b"v"), (11, b"k", b"w")], base_offset=3)
    # Record 0 is 9 bytes at 61; record 1's offset delta (zig-zag 1 = 0x02) is its 4th byte.
    data = bytearray(batch)
    assert data[70:74] == bytes.fromhex("10000202")
    data[73] = 0x00  # offset delta 0: both records claim offset 3
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(InvalidRecordError, match="must increase"):
        _convert(bytes(data), 1)


# each: a public conversion call given a wrong type -> the words of its ConfigurationError (was:
# "'int' object has no attribute 'is_control'", a comparison's or a slice's TypeError)
WRONG_ARGUMENTS = {
    "down_convert of a list of ints": (lambda: down_convert(list(_x_batch()), 1, 0),  # type: ignore[arg-type]
                                       "needs batches, got an item of type int"),
    "down_convert of a list holding None": (lambda: down_convert([None], 0, 0),  # type: ignore[list-item]
                                            "needs batches, got an item of type NoneType"),
    "lazy first_batch_size '5'": (lambda: LazyDownConvertedRecords(MemoryRecords(_x_batch()), 1, 0,  # type: ignore[arg-type]
                                                                   first_batch_size="5"),
                                  "first_batch_size must be an int or None"),
    "lazy first_batch_size 2.5": (lambda: LazyDownConvertedRecords(MemoryRecords(_x_batch()), 1, 0,  # type: ignore[arg-type]
                                                                   first_batch_size=2.5),
                                  "first_batch_size must be an int or None"),
    "overflow_padding None": (lambda: overflow_padding(None), "padding needs a number"),  # type: ignore[arg-type]
    "overflow_padding 2.5": (lambda: overflow_padding(2.5), "padding needs a number"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(WRONG_ARGUMENTS))
def test_wrong_argument_types_are_configuration_errors(case: str) -> None:
    call, says = WRONG_ARGUMENTS[case]
    with pytest.raises(ConfigurationError, match=says):
        call()
