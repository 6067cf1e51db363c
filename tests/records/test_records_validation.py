"""Reader validation rules of docs/guide/records.md: each rule raises its typed error at the
right byte position (or is silently tolerated where Kafka tolerates it)."""

from __future__ import annotations

import re
import struct

import pytest

from lazyconv.errors import (
    CorruptRecordError,
    DecompressionBombError,
    InvalidRecordError,
    MalformedVarintError,
    UnknownCompressionError,
    UnknownMagicError,
    UnsupportedCompressionError,
)
from lazyconv.records import (
    Compression,
    ControlRecordType,
    FileRecords,
    MemoryRecords,
    Record,
    RecordsBuilder,
    TimestampType,
    build_end_txn_marker,
    encode_v2_batch,
    parse_control_key,
    parse_end_txn_marker,
    scan_batches,
)
from lazyconv.records._codec import append_legacy_message, append_v2_record
from lazyconv.records._compression import compress


def v2(records=((0, 1000, b"k", b"v", ()), (1, 1005, None, b"w", ())), **kw) -> bytes:
    b = RecordsBuilder(2, **kw)
    for r in records:
        b.append(*r)
    return b.build()


def raw_v2(payload: bytes, count: int, attributes: int = 0, base_offset: int = 0, max_ts: int = 1005) -> bytes:
    return encode_v2_batch(
        base_offset=base_offset,
        partition_leader_epoch=-1,
        attributes=attributes,
        last_offset_delta=max(count - 1, 0),
        base_timestamp=1000,
        max_timestamp=max_ts,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
        payload=payload,
    )


def records_of(data: bytes, **kw) -> list[Record]:
    return list(MemoryRecords(data, **kw).records())


# -- 10.1 splitting ---------------------------------------------------------------------------


def test_trailing_partial_entries_are_skipped() -> None:
    whole = v2()
    for cut in (1, 11, 12, 16, 17, 40, len(whole) - 1):
        data = whole + whole[:cut]
        assert len(list(MemoryRecords(data).batches())) == 1
        assert MemoryRecords(data).valid_bytes() == len(whole)


def test_size_below_14_is_corrupt_even_in_a_partial_entry() -> None:
    data = v2() + struct.pack(">qi", 5, 13)  # exactly 12 bytes of a bad entry
    with pytest.raises(CorruptRecordError) as exc:
        list(MemoryRecords(data).batches())
    assert exc.value.position == len(v2()) + 8


def test_unknown_magic_is_corrupt_once_17_bytes_are_present() -> None:
    bad = bytearray(v2())
    bad[16] = 3
    assert list(MemoryRecords(bytes(bad[:16])).batches()) == []
    with pytest.raises(UnknownMagicError) as exc:
        list(MemoryRecords(bytes(bad[:17])).batches())
    assert exc.value.position == 16
    bad[16] = 0xFF  # -1 as int8
    with pytest.raises(UnknownMagicError):
        list(MemoryRecords(bytes(bad)).batches())


# -- 10.2 v2 batches --------------------------------------------------------------------------


def test_v2_length_below_header_is_corrupt() -> None:
    data = bytearray(v2())
    struct.pack_into(">i", data, 8, 40)
    with pytest.raises(CorruptRecordError) as exc:
        list(MemoryRecords(bytes(data[:52])).batches())
    assert exc.value.position == 8


def test_v2_crc_mismatch() -> None:
    data = bytearray(v2())
    data[-1] ^= 1
    [batch] = MemoryRecords(bytes(data)).batches()
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as exc:
        batch.validate()
    assert exc.value.position == 17
    # the partition leader epoch is not covered by the CRC
    data = bytearray(v2())
    data[12:16] = b"\x00\x00\x00\x07"
    [batch] = MemoryRecords(bytes(data)).batches()
    assert batch.is_valid() and batch.partition_leader_epoch == 7


def test_record_count_disagreeing_with_payload() -> None:
    body = bytearray()
    append_v2_record(body, 0, 0, b"k", b"v")
    append_v2_record(body, 1, 5, None, b"w")
    with pytest.raises(InvalidRecordError, match="still remain"):
        records_of(raw_v2(bytes(body), 1))
    with pytest.raises(InvalidRecordError, match="count"):
        records_of(raw_v2(bytes(body), 3))
    with pytest.raises(InvalidRecordError, match="declares 2000000000 records"):
        records_of(raw_v2(bytes(body), 2_000_000_000))  # no allocation proportional to the count
    with pytest.raises(InvalidRecordError, match="negative"):
        records_of(raw_v2(bytes(body), -1))
    assert len(records_of(raw_v2(bytes(body), 2))) == 2


def test_empty_batch_yields_no_records_even_with_a_codec() -> None:
    for attributes in (0, 1, 4):
        [batch] = MemoryRecords(raw_v2(b"", 0, attributes, base_offset=40)).batches()
        batch.validate()
        assert list(batch) == [] and batch.record_count == 0 and batch.base_offset == 40


def test_unknown_codec_ids() -> None:
    for codec in (5, 6, 7):
        [batch] = MemoryRecords(raw_v2(b"\x00" * 8, 1, codec)).batches()
        batch.validate()  # the CRC is fine
        with pytest.raises(UnknownCompressionError):
            list(batch)
    # only the low byte of the attributes has meaning
    [batch] = MemoryRecords(raw_v2(b"", 0, 0x0100)).batches()
    assert batch.compression == Compression.NONE


def test_record_level_rules() -> None:
    def one(body: bytes) -> list[Record]:
        return records_of(raw_v2(bytes([len(body) * 2]) + body, 1))

    assert one(b"\x00\x00\x00\x02k\x02v\x00") == [Record(0, 1000, b"k", b"v", ())]
    assert one(b"\x00\x00\x00\x03\x05\x00") == [Record(0, 1000, None, None, ())]  # any negative = null
    with pytest.raises(InvalidRecordError, match="key length"):
        one(b"\x00\x00\x00\x10k\x02v\x00")
    with pytest.raises(InvalidRecordError, match="value length"):
        one(b"\x00\x00\x00\x01\x10v\x00")
    with pytest.raises(InvalidRecordError, match="negative header count"):
        one(b"\x00\x00\x00\x01\x01\x01")
    with pytest.raises(InvalidRecordError, match="header count"):
        one(b"\x00\x00\x00\x01\x01\x08")
    with pytest.raises(InvalidRecordError, match="negative header key length"):
        one(b"\x00\x00\x00\x01\x01\x02\x01\x01")
    with pytest.raises(InvalidRecordError, match="declares"):
        one(b"\x00\x00\x00\x01\x01\x00\x00")  # one byte more than its fields use
    with pytest.raises(InvalidRecordError, match="body"):
        records_of(raw_v2(b"\x20\x00\x00", 1))  # body length 16, 2 bytes left
    with pytest.raises(InvalidRecordError):
        records_of(raw_v2(b"\x0f\x00", 1))  # negative body length


def test_overlong_and_truncated_varints_in_records() -> None:
    with pytest.raises(MalformedVarintError) as exc:
        records_of(raw_v2(b"\x16\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00", 1))  # 6-byte offset delta
    assert exc.value.position == 61 + 3
    with pytest.raises(MalformedVarintError):
        records_of(raw_v2(b"\x18\x00" + b"\xff" * 10 + b"\x01", 1))  # 11-byte timestamp delta
    with pytest.raises(MalformedVarintError):
        records_of(raw_v2(b"\xff\xff", 1))  # truncated record length
    with pytest.raises(MalformedVarintError):
        records_of(raw_v2(b"\xff", 1))
    with pytest.raises(MalformedVarintError):
        records_of(raw_v2(b"\x10\x00\x00\x00\x02k\x02v\x00" + b"\x80", 2))


def test_log_append_time_overrides_record_timestamps() -> None:
    data = v2(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5000)
    [batch] = MemoryRecords(data).batches()
    assert batch.max_timestamp == 5000 and batch.base_timestamp == 1000
    assert [r.timestamp for r in batch] == [5000, 5000]


def test_compressed_batch_rules() -> None:
    body = bytearray()
    append_v2_record(body, 0, 0, b"k", b"v" * 1000)
    gz = compress(Compression.GZIP, bytes(body) + b"\x00", 2)
    with pytest.raises(InvalidRecordError, match="remain"):
        records_of(raw_v2(gz, 1, 1))
    gz = compress(Compression.GZIP, bytes(body), 2)
    assert len(records_of(raw_v2(gz, 1, 1))) == 1
    with pytest.raises(DecompressionBombError):
        records_of(raw_v2(gz, 1, 1), max_decompressed_size=500)
    with pytest.raises(InvalidRecordError):
        records_of(raw_v2(gz, 2, 1))


# -- 5.3 legacy wrappers ------------------------------------------------------------------------


def wrapper(inner: bytes, magic: int = 1, offset: int = 23, attributes: int = 1, timestamp: int = 777) -> bytes:
    out = bytearray()
    value = compress(attributes & 7, inner, magic) if attributes & 7 not in (0, 4) else inner
    append_legacy_message(out, offset, timestamp, None, value, magic, attributes)
    return bytes(out)


def inner_set(offsets=(0, 2, 3), magic: int = 1, attributes: int = 0) -> bytes:
    out = bytearray()
    for i, off in enumerate(offsets):
        append_legacy_message(out, off, 100 + i, b"k", b"v%d" % i, magic, attributes)
    return bytes(out)


def test_v1_wrapper_offsets_and_timestamps() -> None:
    assert [(r.offset, r.timestamp) for r in records_of(wrapper(inner_set()))] == [(20, 100), (22, 101), (23, 102)]
    # wrapper offset 0: inner offsets are already absolute
    assert [r.offset for r in records_of(wrapper(inner_set((5, 6, 7)), offset=0))] == [5, 6, 7]
    with pytest.raises(InvalidRecordError, match="below its last inner"):
        records_of(wrapper(inner_set((0, 2, 30))))
    # LogAppendTime wrapper: every inner message takes the wrapper timestamp
    lat = records_of(wrapper(inner_set(), attributes=1 | 8, timestamp=9999))
    assert [r.timestamp for r in lat] == [9999] * 3
    # v0 wrapper: inner offsets used as they are, no timestamps
    v0 = records_of(wrapper(inner_set((7, 8), magic=0), magic=0, offset=8))
    assert [(r.offset, r.timestamp) for r in v0] == [(7, -1), (8, -1)]


def test_wrapper_rules() -> None:
    with pytest.raises(UnsupportedCompressionError):
        records_of(wrapper(inner_set(), attributes=4))
    with pytest.raises(UnknownCompressionError):
        records_of(wrapper(inner_set(), attributes=5))
    out = bytearray()
    append_legacy_message(out, 3, 1, None, None, 1, 1)
    with pytest.raises(InvalidRecordError, match="null value"):
        records_of(bytes(out))
    with pytest.raises(InvalidRecordError, match="no inner records"):
        records_of(wrapper(b""))
    with pytest.raises(InvalidRecordError, match="must not be compressed"):
        records_of(wrapper(inner_set(attributes=2)))
    bad_size = inner_set() + struct.pack(">qi", 4, 10) + b"\x00" * 10
    with pytest.raises(CorruptRecordError):
        records_of(wrapper(bad_size, offset=23))
    # an incomplete inner entry at the very end is dropped silently
    partial = inner_set() + inner_set((4,))[:-3]
    assert [r.offset for r in records_of(wrapper(partial))] == [20, 22, 23]
    corrupt = bytearray(inner_set())
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        records_of(wrapper(bytes(corrupt)))


def test_legacy_message_rules() -> None:
    out = bytearray()
    append_legacy_message(out, 0, 5, b"k", b"v", 1, 0)
    bad = bytearray(out)
    bad[-1] ^= 0xFF
    [batch] = MemoryRecords(bytes(bad)).batches()
    with pytest.raises(CorruptRecordError, match="CRC") as exc:
        batch.validate()
    assert exc.value.position == 12
    bad = bytearray(out)
    struct.pack_into(">i", bad, 26, 50)  # key length past the message
    with pytest.raises(InvalidRecordError):
        records_of(bytes(bad))
    small = bytearray(out)
    struct.pack_into(">i", small, 8, 20)  # v1 message smaller than its overhead
    with pytest.raises(CorruptRecordError):
        list(MemoryRecords(bytes(small)).batches())


def test_builder_argument_errors() -> None:
    from lazyconv.errors import ConfigurationError

    with pytest.raises(UnsupportedCompressionError):
        RecordsBuilder(1, Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionError):
        RecordsBuilder(0, Compression.ZSTD)
    b = RecordsBuilder(2)
    b.append(5, 1)
    with pytest.raises(ConfigurationError):
        b.append(5, 1)
    with pytest.raises(ConfigurationError):
        b.append(6, -2)
    with pytest.raises(ConfigurationError):
        RecordsBuilder(1).append(0, 1, headers=[("a", b"b")])
    with pytest.raises(ConfigurationError):
        RecordsBuilder(1, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert RecordsBuilder(2).build() == b""
    # a v2 record's timestamp delta is an int64: no wrap-around as in Kafka's Java
    far = RecordsBuilder(2)
    far.append(0, -1)
    with pytest.raises(ConfigurationError, match="too far from the batch's first timestamp -1"):
        far.append(1, (1 << 63) - 1)
    far.append(1, (1 << 63) - 2)  # the largest delta there is
    assert [r.timestamp for b in MemoryRecords(far.build()).batches() for r in b] == [-1, (1 << 63) - 2]
    with pytest.raises(ConfigurationError, match="beyond int64"):
        RecordsBuilder(1).append(0, 1 << 63)


@pytest.mark.parametrize(
    "arguments",
    [
        dict(magic=2, producer_id=7, producer_epoch=1 << 15),
        dict(magic=2, base_sequence=1 << 31),
        dict(magic=2, partition_leader_epoch=-(1 << 31) - 1),
        dict(magic=2, producer_id=1 << 63),
        dict(magic=2, base_offset=1 << 63),
        dict(magic=0, base_offset=-(1 << 63) - 1),
        dict(magic=2, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1 << 63),
        dict(magic=1, compression=Compression.GZIP, timestamp_type=TimestampType.LOG_APPEND_TIME,
             log_append_time=-(1 << 63) - 1),
        dict(magic=2, producer_epoch="1"),
        dict(magic=2, timestamp_type=5),
    ],
)
def test_builder_refuses_header_fields_their_wire_types_cannot_hold(arguments: dict) -> None:
    # they used to pass and make build() raise struct.error (or TimestampType a ValueError)
    from lazyconv.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        RecordsBuilder(**arguments)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_builder_refuses_offsets_beyond_int64(magic: int) -> None:
    from lazyconv.errors import ConfigurationError

    builder = RecordsBuilder(magic, base_offset=(1 << 63) - 1)
    builder.append(None, -1, b"k", b"v")
    with pytest.raises(ConfigurationError, match="beyond int64"):
        builder.append(None, -1, b"k", b"v")  # was struct.error from build()
    assert [r.offset for r in MemoryRecords(builder.build()).records()] == [(1 << 63) - 1]
    wrapped = RecordsBuilder(1, Compression.GZIP, base_offset=-(1 << 63))
    with pytest.raises(ConfigurationError, match="too far from the base offset"):
        wrapped.append((1 << 63) - 1, 5, b"k", b"v")  # its inner offset would pass int64


def test_builder_refuses_keys_values_and_headers_of_other_types() -> None:
    from lazyconv.errors import ConfigurationError

    builder = RecordsBuilder(2)
    with pytest.raises(ConfigurationError, match="key must be bytes-like"):
        builder.append(0, 1, 3, b"v")  # bytes(3) would be three zero bytes
    with pytest.raises(ConfigurationError, match="value must be bytes-like"):
        builder.append(0, 1, b"k", "text")
    with pytest.raises(ConfigurationError, match="header key must be a str"):
        builder.append(0, 1, b"k", b"v", [(b"h", b"x")])  # str(b"h") would write "b'h'"
    with pytest.raises(ConfigurationError, match="header must be a"):
        builder.append(0, 1, b"k", b"v", [("h", b"x", b"y")])
    assert builder.record_count == 0
    builder.append(0, 1, bytearray(b"k"), memoryview(b"value"), [("h", bytearray(b"x")), ("n", None)])
    assert list(MemoryRecords(builder.build()).records()) == [
        Record(0, 1, b"k", b"value", (("h", b"x"), ("n", None)))]


@pytest.mark.parametrize("field", [dict(record_count=1 << 31), dict(producer_epoch=-(1 << 15) - 1),
                                   dict(base_offset=1 << 63), dict(attributes=1 << 15)])
def test_encode_v2_batch_refuses_fields_past_their_wire_types(field: dict) -> None:
    from lazyconv.errors import ConfigurationError

    arguments = dict(base_offset=0, partition_leader_epoch=-1, attributes=0, last_offset_delta=0, base_timestamp=0,
                     max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=0,
                     payload=b"")
    with pytest.raises(ConfigurationError, match="out of its wire type's range"):  # was struct.error
        encode_v2_batch(**{**arguments, **field})


def _gzip_build(level: object) -> bytes:
    builder = RecordsBuilder(2, Compression.GZIP, compression_level=level)  # type: ignore[arg-type]
    builder.append(0, 1, b"k", b"v")
    return builder.build()


def _file_read(tmp_path: object, position: object, size: object) -> bytes:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "records.log"
    path.write_bytes(b"\0" * 100)
    with FileRecords(path) as records:
        return records.read(position, size)  # type: ignore[arg-type]


def _file_records(tmp_path: object, start: int, end: int) -> FileRecords:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "records.log"
    path.write_bytes(b"\0" * 100)
    return FileRecords(path, start, end)


def test_a_file_read_past_the_end_of_the_file_allocates_nothing(tmp_path: object) -> None:
    """A size past the file's end is refused before os.pread allocates a buffer of that size
    (2**40 bytes was a MemoryError); the records' end is a TruncatedDataError, as for 200."""
    from lazyconv.errors import TruncatedDataError

    for size in (200, 1 << 40):
        with pytest.raises(TruncatedDataError, match=f"the records end after 90 of the {size} bytes"):
            _file_read(tmp_path, 10, size)
    assert _file_read(tmp_path, 10, 90) == bytes(90)


_V2_FIELDS = dict(base_offset=0, partition_leader_epoch=-1, attributes=0, last_offset_delta=0, base_timestamp=0,
                  max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=0)
# each: a public records call given a wrong type or value -> the words its ConfigurationError has
# (was: Enum's bare ValueError, int()'s TypeError or ValueError, a comparison's TypeError,
# struct.error, len()'s TypeError, os.pread's TypeError or OSError, OverflowError)
WRONG_ARGUMENTS = {
    "Compression(9)": (lambda _: Compression(9), "9 is not a Compression: one of 0 (NONE)"),
    "Compression('gzip')": (lambda _: Compression("gzip"), "is not a Compression"),
    "TimestampType(7)": (lambda _: TimestampType(7), "7 is not a TimestampType"),
    "ControlRecordType(None)": (lambda _: ControlRecordType(None), "None is not a ControlRecordType"),
    "builder compression None": (lambda _: RecordsBuilder(2, None), "compression must be a Compression"),  # type: ignore[arg-type]
    "builder compression '1'": (lambda _: RecordsBuilder(2, "1"), "compression must be a Compression"),  # type: ignore[arg-type]
    "builder compression_level '9'": (lambda _: _gzip_build("9"), "compression level must be an int"),
    "append offset '1'": (lambda _: RecordsBuilder(2).append("1", 1), "offset must be an int or None"),  # type: ignore[arg-type]
    "append timestamp None": (lambda _: RecordsBuilder(2).append(0, None), "timestamp an int"),  # type: ignore[arg-type]
    "append headers 5": (lambda _: RecordsBuilder(2).append(0, 1, headers=5), "headers must be a sequence"),  # type: ignore[arg-type]
    "end marker coordinator_epoch '0'": (lambda _: build_end_txn_marker(0, 0, 1, 0, True, "0"),  # type: ignore[arg-type]
                                         "coordinator_epoch must be an int32"),
    "end marker coordinator_epoch 2**31": (lambda _: build_end_txn_marker(0, 0, 1, 0, True, 1 << 31),
                                           "coordinator_epoch must be an int32"),
    "encode_v2_batch payload None": (lambda _: encode_v2_batch(**_V2_FIELDS, payload=None),  # type: ignore[arg-type]
                                     "a v2 batch's payload must be bytes-like"),
    "parse_control_key 5": (lambda _: parse_control_key(5), "a control record's key must be bytes-like"),  # type: ignore[arg-type]
    "parse_end_txn_marker value 5": (lambda _: parse_end_txn_marker(b"\0\0\0\1", 5),  # type: ignore[arg-type]
                                     "a transaction marker's value must be bytes-like"),
    "scan_batches base_position None": (lambda _: scan_batches(b"", None), "base_position must be an int"),  # type: ignore[arg-type]
    "FileRecords.read position None": (lambda tmp: _file_read(tmp, None, 1), "slice needs"),
    "FileRecords.read size -1": (lambda tmp: _file_read(tmp, 0, -1), "slice needs"),
    # past the largest file offset: os.pread's OverflowError, or OSError EINVAL
    "FileRecords.read position 2**70": (lambda tmp: _file_read(tmp, 1 << 70, 1),
                                        "FileRecords.read position 1180591620717411303424 is past"),
    "FileRecords.read size 2**70": (lambda tmp: _file_read(tmp, 0, 1 << 70),
                                    "FileRecords.read size 1180591620717411303424 at position 0 runs past"),
    "FileRecords.read at 2**63 - 1": (lambda tmp: _file_read(tmp, (1 << 63) - 1, 1),
                                      "FileRecords.read size 1 at position 9223372036854775807 runs past"),
    "FileRecords start 2**70": (lambda tmp: _file_records(tmp, 1 << 70, 1 << 70).read(0, 0),
                                "file records start must be at most 2**63 - 1"),
    "FileRecords(-1)": (lambda _: FileRecords(-1), "a file descriptor is an int from 0"),
    "FileRecords.open(3)": (lambda _: FileRecords.open(3), "FileRecords.open needs a path"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(WRONG_ARGUMENTS))
def test_wrong_argument_types_and_values_are_configuration_errors(case: str, tmp_path: object) -> None:
    from lazyconv.errors import ConfigurationError

    call, says = WRONG_ARGUMENTS[case]
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        call(tmp_path)


def test_append_takes_any_integer_offset_and_timestamp() -> None:
    class Index:  # numpy's integers, for one, are ints by __index__ only
        def __init__(self, value: int) -> None:
            self.value = value

        def __index__(self) -> int:
            return self.value

    builder = RecordsBuilder(2)
    builder.append(Index(0), Index(5), b"k", b"v")  # type: ignore[arg-type]
    assert list(MemoryRecords(builder.build()).records()) == [Record(0, 5, b"k", b"v", ())]
