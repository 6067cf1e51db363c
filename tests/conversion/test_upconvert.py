"""lazyconv.conversion._up: old producers' message sets (magic 0/1) to one v2 batch, as Kafka 3.x
brokers up-converted them, with the error each refusal gets (tests/kafka/test_upconvert_oracle.py
checks the same against a real 3.9 broker)."""

from __future__ import annotations

import pickle
import struct
from functools import partial

import legacy_message_sets
import pytest
from hypothesis import given
from hypothesis import strategies as st
from legacy_message_sets import fix_crc as _fix_crc
from legacy_message_sets import flip as _flip
from legacy_message_sets import message as _message
from legacy_message_sets import v0 as _v0

from lazyconv.conversion._up import INVALID_TIMESTAMP, UpConverted, kafka_error_code, up_convert
from lazyconv.errors import (
    ConfigurationError,
    CorruptRecordError,
    DecompressionBombError,
    DecompressionError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    LazyconvError,
    TruncatedDataError,
    UnknownCompressionError,
    UnknownMagicError,
    UnsupportedCompressionError,
)
from lazyconv.records import (
    Compression,
    MemoryRecords,
    RecordsBuilder,
    TimestampType,
    encode_v2_batch,
)
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._compression import compress

T = 1_700_000_000_000
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]

# the hand-written message sets (tests/legacy_message_sets.py), with this module's timestamp
_v1 = partial(legacy_message_sets.v1, ts=T)
_wrapper = partial(legacy_message_sets.wrapper, ts=T)

# key, value, timestamp (ignored for magic 0): null keys and values, empty ones, a -1 timestamp
ROWS = [
    (b"k0", b"v0", T),
    (None, b"v1", T + 5),
    (b"k2", None, T - 3),
    (None, None, -1),
    (b"", b"", T + 1),
    (b"k5", b"x" * 300, T + 2),
]


def _built(magic: int, codec: int, rows=ROWS) -> bytes:
    builder = RecordsBuilder(magic, codec)
    for offset, (key, value, ts) in enumerate(rows):
        builder.append(offset, ts if magic else -1, key, value)
    return builder.build()


def _records(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, tuple]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in MemoryRecords(batch).records()]


def _only_batch(data: bytes) -> DefaultBatch:
    batches = list(MemoryRecords(data).batches())
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, DefaultBatch)
    batch.validate()
    return batch


def _refused(data: bytes, error: type[LazyconvError], code: int, **kwargs) -> LazyconvError:
    with pytest.raises(error) as info:
        up_convert(data, **kwargs)
    assert kafka_error_code(info.value) == code
    return info.value


# -- conversions -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
def test_every_codec_and_magic_becomes_one_v2_batch(magic: int, codec: Compression) -> None:
    result = up_convert(_built(magic, codec))
    assert result == UpConverted(result.batch, len(ROWS), codec, magic)
    assert result.converted
    batch = _only_batch(result.batch)
    assert batch.magic == 2
    assert batch.compression == codec
    assert (batch.base_offset, batch.last_offset_delta, batch.record_count) == (0, len(ROWS) - 1, len(ROWS))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1
    assert not batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    timestamps = [ts if magic else -1 for _k, _v, ts in ROWS]
    assert batch.base_timestamp == timestamps[0]
    assert batch.max_timestamp == max(timestamps)
    expected = [(i, ts, k, v, ()) for i, ((k, v, _), ts) in enumerate(zip(ROWS, timestamps, strict=True))]
    assert _records(result.batch) == expected


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_output_is_what_the_v2_builder_writes(magic: int) -> None:
    # RecordsBuilder(2) writes MemoryRecordsBuilder's bytes; Kafka's LogValidator uses that builder
    builder = RecordsBuilder(2)
    for offset, (key, value, ts) in enumerate(ROWS):
        builder.append(offset, ts if magic else -1, key, value)
    assert up_convert(_built(magic, Compression.NONE)).batch == builder.build()


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_any_bytes_like_input(kind) -> None:
    data = _built(1, Compression.GZIP)
    assert up_convert(kind(data)).batch == up_convert(data).batch


def test_several_plain_messages_become_one_batch_with_fresh_offsets() -> None:
    # Kafka rewrites the offsets: gaps, decreasing, duplicate source offsets are all fine
    data = _v1(5, b"a", ts=T) + _v1(3, b"b", ts=T + 1) + _v1(3, b"c", ts=T + 2) + _v1(100, b"d", ts=T + 3)
    result = up_convert(data, produce_version=2)
    assert [(o, k) for o, _t, k, _v, _h in _records(result.batch)] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


@pytest.mark.parametrize("wrapper_offset", [0, 7, 1000])
def test_v1_wrapper_inner_offsets_need_not_be_consecutive(wrapper_offset: int) -> None:
    inner = _v1(0, b"a") + _v1(5, b"b") + _v1(7, b"c")
    result = up_convert(_wrapper(inner, Compression.GZIP, 1, wrapper_offset))
    assert [(o, k) for o, _t, k, _v, _h in _records(result.batch)] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_v0_wrapper_keeps_any_absolute_inner_offsets() -> None:
    inner = _v0(100, b"a") + _v0(50, b"b") + _v0(7, b"c")
    result = up_convert(_wrapper(inner, Compression.SNAPPY, 0, 9))
    assert _records(result.batch) == [(0, -1, b"a", b"v", ()), (1, -1, b"b", b"v", ()), (2, -1, b"c", b"v", ())]


def test_log_append_time_wrapper_gives_its_timestamp_to_the_inner_messages() -> None:
    inner = _v1(0, ts=1) + _v1(1, ts=2)
    result = up_convert(_wrapper(inner, Compression.LZ4, 1, 1, ts=T + 50, extra_attrs=0x08))
    batch = _only_batch(result.batch)
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert [t for _o, t, _k, _v, _h in _records(result.batch)] == [T + 50, T + 50]


def test_log_append_time_flag_with_a_timestamp_is_accepted_as_create_time() -> None:
    result = up_convert(_v1(0, ts=T, attrs=0x08))
    assert _only_batch(result.batch).timestamp_type == TimestampType.CREATE_TIME
    assert _records(result.batch)[0][1] == T


def test_ignored_attribute_bits() -> None:
    # magic 0 has no timestamp type; bits 4-7 mean nothing below v2; an inner LogAppendTime bit
    # counts for nothing in a CreateTime wrapper (Kafka looks at the wrapper's)
    assert _records(up_convert(_v0(0, attrs=0x08)).batch)[0][1] == -1
    assert _records(up_convert(_v1(0, attrs=0x30)).batch)[0][1] == T
    inner = _v1(0, attrs=0x08) + _v1(1, ts=-1, attrs=0x08)
    assert [t for _o, t, _k, _v, _h in _records(up_convert(_wrapper(inner, 1, 1, 1)).batch)] == [T, -1]


def test_lz4_magic_0_reads_both_header_checksums() -> None:
    inner = _v0(0) + _v0(1)
    broken = _wrapper(inner, Compression.LZ4, 0, 1)  # Kafka's old (wrong) header checksum
    correct = _wrapper(inner, Compression.LZ4, 0, 1, value=compress(Compression.LZ4, inner, 1))
    assert broken != correct
    assert up_convert(broken).batch == up_convert(correct).batch


def test_empty_set_converts_to_nothing() -> None:
    assert up_convert(b"") == UpConverted(b"", 0, Compression.NONE, None)
    assert not up_convert(b"").converted


def test_a_single_v2_batch_passes_through_unchanged() -> None:
    builder = RecordsBuilder(2, Compression.ZSTD)
    builder.append(0, T, b"k", b"v")
    data = builder.build()
    for version in (None, 0, 2):
        result = up_convert(data, produce_version=version)
        assert result == UpConverted(data, 1, Compression.ZSTD, 2)
        assert not result.converted


def test_several_records_of_a_large_set() -> None:
    rows = [(f"k{i}".encode(), f"v{i}".encode() * (i % 7), T + i) for i in range(2000)]
    for codec in (Compression.NONE, Compression.GZIP):
        result = up_convert(_built(1, codec, rows))
        assert result.record_count == 2000
        assert [(k, v) for _o, _t, k, v, _h in _records(result.batch)] == [(k, v) for k, v, _ in rows]


# -- refusals and their error codes ------------------------------------------------------------


def test_several_wrappers_are_refused() -> None:
    first = _wrapper(_v1(0) + _v1(1), Compression.GZIP, 1, 1)
    second = _wrapper(_v1(0) + _v1(1), Compression.SNAPPY, 1, 1)
    error = _refused(first + second, InvalidRecordError, ErrorCode.INVALID_RECORD)
    assert error.position == len(first)
    _refused(first + first, InvalidRecordError, ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("order", ["wrapper-first", "plain-first"])
def test_a_wrapper_with_plain_messages_is_refused(order: str) -> None:
    wrapper = _wrapper(_v1(0), Compression.LZ4, 1, 0)
    data = wrapper + _v1(1) if order == "wrapper-first" else _v1(0) + wrapper
    _refused(data, InvalidRecordError, ErrorCode.INVALID_RECORD)


def test_mixed_magic_is_refused() -> None:
    first = _v0(0)
    error = _refused(first + _v1(1), InvalidRecordError, ErrorCode.INVALID_RECORD)
    assert error.position == len(first) + 16
    _refused(_v1(0) + _v0(1), InvalidRecordError, ErrorCode.INVALID_RECORD)


def test_corrupt_crc_of_a_plain_message() -> None:
    first = _v1(0)
    error = _refused(first + _flip(_v1(1), 30), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    assert error.position == len(first) + 12
    assert "CRC" in str(error) and f"(at byte {len(first) + 12})" in str(error)


def test_corrupt_crc_wins_over_a_second_wrapper() -> None:
    # Kafka checks every top-level entry's CRC before it looks at how many there are
    wrapper = _wrapper(_v1(0), Compression.GZIP, 1, 0)
    _refused(wrapper + _flip(wrapper, 13), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)


def test_corrupt_crc_of_a_wrapper() -> None:
    error = _refused(_flip(_wrapper(_v1(0), 1, 1, 0), 13), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    assert error.position == 12


def test_corrupt_crc_of_an_inner_message() -> None:
    inner = _v1(0) + _flip(_v1(1), 30) + _v1(2)
    error = _refused(_wrapper(inner, Compression.SNAPPY, 1, 2), CorruptRecordError,
                     ErrorCode.CORRUPT_MESSAGE)
    assert error.position == 0 and "inner message 1" in str(error)


def test_truncated_set_is_refused() -> None:
    # Kafka dropped a partial last entry silently; refused here on purpose
    whole = _v1(0)
    for cut in (1, 5, 11, 12, 16, 20, len(whole) - 1):
        error = _refused(whole + whole[:cut], TruncatedDataError, ErrorCode.CORRUPT_MESSAGE)
        assert error.position == len(whole)
    _refused(whole[:20], TruncatedDataError, ErrorCode.CORRUPT_MESSAGE)


def test_truncated_inner_message_is_refused() -> None:
    inner = _v1(0) + _v1(1)
    for tail in (_v1(2)[:15], b"\x01\x02\x03"):
        _refused(_wrapper(inner + tail, Compression.GZIP, 1, 1), TruncatedDataError, ErrorCode.CORRUPT_MESSAGE)


def test_sizes_and_magic_out_of_range() -> None:
    _refused(struct.pack(">qi", 0, 10) + bytes(10), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    entry = _fix_crc(_v1(0)[:16] + b"\x03" + _v1(0)[17:])
    _refused(entry, UnknownMagicError, ErrorCode.CORRUPT_MESSAGE)
    short_v1 = _fix_crc(struct.pack(">qiIbbii", 0, 14, 0, 1, 0, -1, -1))
    _refused(short_v1, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    inner = _v1(0) + struct.pack(">qi", 1, 5) + b"12345"
    _refused(_wrapper(inner, 1, 1, 1), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)


@pytest.mark.parametrize("key_length, value_length", [(100, None), (-1, 5), (-1, 2)])
def test_key_and_value_lengths_must_fill_the_message(key_length: int, value_length: int | None) -> None:
    body = struct.pack(">i", key_length) + (b"" if value_length is None else struct.pack(">i", value_length)) + b"1234"
    body = body.ljust(12, b"\0")
    entry = _fix_crc(struct.pack(">qiIbbq", 0, 14 + len(body), 0, 1, 0, T) + body)
    _refused(entry, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)


def test_wrapper_offset_below_its_last_inner_offset() -> None:
    inner = _v1(0) + _v1(1) + _v1(2)
    error = _refused(_wrapper(inner, Compression.GZIP, 1, 1), InvalidRecordError, ErrorCode.INVALID_RECORD)
    assert "wrapper offset 1" in str(error)
    # magic 0 wrappers hold absolute offsets: nothing to check
    assert up_convert(_wrapper(_v0(5) + _v0(9), Compression.GZIP, 0, 1)).record_count == 2


def test_inner_messages_must_match_and_not_be_compressed() -> None:
    _refused(_wrapper(_v1(0) + _v0(1), 1, 1, 1), InvalidRecordError, ErrorCode.INVALID_RECORD)
    _refused(_wrapper(_v0(0) + _v1(1), 1, 0, 1), InvalidRecordError, ErrorCode.INVALID_RECORD)
    nested = _v1(0) + _wrapper(_v1(0), Compression.GZIP, 1, 0)
    _refused(_wrapper(nested, 1, 1, 1), InvalidRecordError, ErrorCode.INVALID_RECORD)


def test_a_compressed_inner_message_is_a_per_record_error() -> None:
    # Kafka's validateRecordCompression collects it with the other record errors of the wrapper:
    # a later inner CRC mismatch still throws CORRUPT_MESSAGE, a timestamp error wins
    nested = _wrapper(_v1(0), Compression.GZIP, 1, 0)
    _refused(_wrapper(nested + _flip(_v1(1), 30), Compression.GZIP, 1, 1), CorruptRecordError,
             ErrorCode.CORRUPT_MESSAGE)
    _refused(_wrapper(nested + _v1(1), Compression.GZIP, 1, 1, ts=-1, extra_attrs=0x08),
             InvalidTimestampError, INVALID_TIMESTAMP)


def test_wrapper_without_inner_messages() -> None:
    _refused(_message(0, T, None, None, 1, Compression.GZIP), InvalidRecordError, ErrorCode.INVALID_RECORD)
    _refused(_wrapper(b"", Compression.GZIP, 1, 0), InvalidRecordError, ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_a_stream_that_does_not_decompress(codec: Compression) -> None:
    data = _wrapper(b"", codec, 1, 0, value=b"\x1f\x8b\x08\x00 garbage garbage garbage")
    _refused(data, DecompressionError, ErrorCode.UNKNOWN_SERVER_ERROR)


def test_lz4_magic_1_needs_a_correct_header_checksum() -> None:
    inner = _v1(0) + _v1(1)
    data = _wrapper(inner, Compression.LZ4, 1, 1, value=compress(Compression.LZ4, inner, 0))
    _refused(data, DecompressionError, ErrorCode.UNKNOWN_SERVER_ERROR)


def test_zstd_and_unknown_codecs() -> None:
    inner = _v1(0)
    zstd = _wrapper(inner, 0, 1, 0, extra_attrs=Compression.ZSTD, value=compress(Compression.ZSTD, inner, 2))
    _refused(zstd, UnsupportedCompressionError, ErrorCode.INVALID_RECORD)
    codec5 = _wrapper(inner, 0, 1, 0, extra_attrs=5, value=compress(Compression.GZIP, inner, 1))
    _refused(codec5, UnknownCompressionError, ErrorCode.UNKNOWN_SERVER_ERROR)
    _refused(_v1(0, attrs=6), UnknownCompressionError, ErrorCode.UNKNOWN_SERVER_ERROR)


def test_compression_bomb_is_refused() -> None:
    inner = _v1(0, value=bytes(1 << 20))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
        data = _wrapper(inner, codec, 1, 0)
        assert len(data) < 1 << 16
        _refused(data, DecompressionBombError, ErrorCode.MESSAGE_TOO_LARGE, max_decompressed_size=1 << 16)
        assert up_convert(data, max_decompressed_size=1 << 21).record_count == 1


def test_a_v2_batch_with_anything_else_is_refused() -> None:
    builder = RecordsBuilder(2)
    builder.append(0, T, b"k", b"v")
    v2 = builder.build()
    _refused(v2 + _v1(1), InvalidRecordError, ErrorCode.INVALID_RECORD)
    _refused(v2 + v2, InvalidRecordError, ErrorCode.INVALID_RECORD)
    _refused(_v1(0) + v2, InvalidRecordError, ErrorCode.INVALID_RECORD)
    _refused(_flip(v2, len(v2) - 1), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)


def test_a_v2_batch_gets_kafkas_header_checks() -> None:
    builder = RecordsBuilder(2)
    builder.append(0, T, b"k", b"v")
    records = builder.build()[61:]

    def v2(**kwargs) -> bytes:
        fields = dict(base_offset=0, partition_leader_epoch=-1, attributes=0, last_offset_delta=0,
                      base_timestamp=T, max_timestamp=T, producer_id=-1, producer_epoch=-1,
                      base_sequence=-1, record_count=1, payload=records)
        fields.update(kwargs)
        return encode_v2_batch(**fields)

    assert up_convert(v2()).record_count == 1
    assert up_convert(v2(producer_id=7, producer_epoch=0, base_sequence=0)).record_count == 1
    for bad in (dict(base_offset=5), dict(record_count=0, last_offset_delta=-1, payload=b""),
                dict(last_offset_delta=3), dict(attributes=0x20),
                dict(producer_id=7, producer_epoch=0, base_sequence=-1)):
        error = _refused(v2(**bad), InvalidRecordError, ErrorCode.INVALID_RECORD)
        assert error.position == 0


@pytest.mark.parametrize("version", [3, 7, 11])
def test_produce_v3_and_later_carry_only_magic_2(version: int) -> None:
    error = _refused(_v1(0), InvalidRecordError, ErrorCode.INVALID_RECORD, produce_version=version)
    assert error.position == 16
    _refused(_v0(0), InvalidRecordError, ErrorCode.INVALID_RECORD, produce_version=version)
    _refused(b"", InvalidRecordError, ErrorCode.INVALID_RECORD, produce_version=version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_do_not_check_the_magic(version: int) -> None:
    assert up_convert(_v0(0), produce_version=version).source_magic == 0
    assert up_convert(_v1(0), produce_version=version).source_magic == 1


def test_compacted_topics_need_keys() -> None:
    error = _refused(_v1(0) + _v1(1, key=None), InvalidRecordError, ErrorCode.INVALID_RECORD,
                     compacted_topic=True)
    assert error.position == len(_v1(0))
    wrapper = _wrapper(_v1(0) + _v1(1, key=None), Compression.GZIP, 1, 1)
    _refused(wrapper, InvalidRecordError, ErrorCode.INVALID_RECORD, compacted_topic=True)
    assert up_convert(wrapper).record_count == 2
    assert up_convert(_v1(0, key=b""), compacted_topic=True).record_count == 1


def test_log_append_time_without_a_timestamp_is_refused() -> None:
    error = _refused(_v1(0, ts=-1, attrs=0x08), InvalidTimestampError, INVALID_TIMESTAMP)
    assert error.position == 17
    wrapper = _wrapper(_v1(0) + _v1(1), Compression.GZIP, 1, 1, ts=-1, extra_attrs=0x08)
    _refused(wrapper, InvalidTimestampError, INVALID_TIMESTAMP)


def test_a_timestamp_error_wins_over_other_record_errors_in_a_wrapper() -> None:
    # Kafka collects the per-record errors of a wrapper: any timestamp error makes it INVALID_TIMESTAMP
    wrapper = _wrapper(_v1(0, key=None) + _v1(1), Compression.GZIP, 1, 1, ts=-1, extra_attrs=0x08)
    _refused(wrapper, InvalidTimestampError, INVALID_TIMESTAMP, compacted_topic=True)


def test_timestamps_below_minus_one_are_refused() -> None:
    _refused(_v1(0, ts=-5), InvalidTimestampError, INVALID_TIMESTAMP)
    _refused(_wrapper(_v1(0, ts=-2), Compression.GZIP, 1, 0), InvalidTimestampError, INVALID_TIMESTAMP)


def test_bad_arguments() -> None:
    for version in (-1, 2.0, "2"):
        with pytest.raises(ConfigurationError):
            up_convert(_v1(0), produce_version=version)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        up_convert(_v1(0), max_decompressed_size=0)


def test_error_code_table() -> None:
    assert kafka_error_code(CorruptRecordError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert kafka_error_code(UnknownMagicError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert kafka_error_code(TruncatedDataError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert kafka_error_code(InvalidRecordError("x")) == ErrorCode.INVALID_RECORD
    assert kafka_error_code(InvalidTimestampError("x")) == INVALID_TIMESTAMP == 32
    assert kafka_error_code(UnsupportedCompressionError("x")) == ErrorCode.INVALID_RECORD
    assert kafka_error_code(DecompressionBombError("x")) == ErrorCode.MESSAGE_TOO_LARGE
    assert kafka_error_code(DecompressionError("x")) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert kafka_error_code(UnknownCompressionError("x")) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert kafka_error_code(ValueError("x")) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_invalid_timestamp_error_pickles() -> None:
    error = InvalidTimestampError("bad", 17)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidTimestampError and copy.position == 17 and str(copy) == str(error)


# -- round trip --------------------------------------------------------------------------------

_maybe_bytes = st.none() | st.binary(max_size=40)


@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    rows=st.lists(
        st.tuples(_maybe_bytes, _maybe_bytes, st.one_of(st.just(-1), st.integers(0, 2**50))),
        min_size=1, max_size=25),
)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_round_trip(magic: int, codec: Compression, rows: list) -> None:
    result = up_convert(_built(magic, codec, rows))
    assert (result.record_count, result.source_compression, result.source_magic) == (len(rows), codec, magic)
    got = [(r.timestamp, r.key, r.value) for r in MemoryRecords(result.batch).records()]
    assert got == [(ts if magic else -1, key, value) for key, value, ts in rows]
    batch = _only_batch(result.batch)
    assert batch.compression == codec and batch.record_count == len(rows)


# -- the one-pass path for plain sets ---------------------------------------------------------

_MESSAGE = st.tuples(st.sampled_from([0, 1]), st.integers(-1, 2**41), st.one_of(st.none(), st.binary(max_size=20)),
                     st.one_of(st.none(), st.binary(max_size=40)))


@given(st.lists(_MESSAGE, min_size=1, max_size=12), st.sampled_from(["plain", "gzip", "lz4"]),
       st.booleans(), st.data())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_the_one_pass_path_answers_exactly_as_the_careful_one(messages, how, compacted, data):
    """Plain sets and wrappers' inner messages take the one-pass path (the kernel's, or
    ``_plain_set`` without it); with both disabled (the careful path for everything), every set gives the same batch or the same error, also when
    a byte of it is flipped."""
    import lazyconv.conversion._up as up

    magic = messages[0][0]
    builder = RecordsBuilder(magic, Compression.NONE if how == "plain" else Compression[how.upper()],
                             base_offset=0)
    for i, (_m, timestamp, key, value) in enumerate(messages):
        builder.append(i, timestamp if magic else -1, key, value)
    payload = bytearray(builder.build())
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] ^= data.draw(st.integers(1, 255))

    def outcome(fn):
        try:
            return fn(bytes(payload), produce_version=2, compacted_topic=compacted)
        except Exception as exc:  # compared: the same type and message
            return (type(exc), str(exc))

    fast = outcome(up_convert)
    saved = up._plain_set, up._kernel_set
    up._plain_set = up._kernel_set = lambda *args, **kwargs: None
    try:
        careful = outcome(up_convert)
    finally:
        up._plain_set, up._kernel_set = saved
    assert fast == careful
