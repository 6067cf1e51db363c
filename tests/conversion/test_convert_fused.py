"""The fused v2 down-conversion path must equal the generic one, byte for byte and error for error.

``_convert_v2_batch_into`` (one loop over a v2 batch's record bytes, no ``Record`` objects) and
``_convert_batch_into_generic`` (iterate ``Record`` s, one ``append_legacy_message`` each) run on
the same batches: random well-formed ones (every codec but zstd, CreateTime and LogAppendTime,
headers, null and empty keys and values, offset gaps, extreme offsets and timestamps) and
random corruptions of them (byte flips, wrong record count, wrong lengths, truncated or padded
payloads). Both must return the same bytes and counts, or raise the same error type with the
same message and position.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.conversion._down import (
    _convert_batch_into,
    _convert_batch_into_generic,
    _convert_v2_batch_into,
    down_convert_bytes,
)
from lazyconv.errors import InvalidRecordError, LazyconvError, MalformedVarintError
from lazyconv.records import FileRecords, MemoryRecords
from lazyconv.records._codec import (
    V2_HEADER,
    _field_varint,
    append_v2_record,
    convert_v2_records_to_legacy,
    encode_varint,
    encode_varlong,
    read_varint,
)
from lazyconv.records._compression import Compression, compress

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# -- raw v2 batch construction (no builder: any field value, any inconsistency) -----------------


def _record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[bytes, bytes | None]],
    key_length: int | None = None,
    value_length: int | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One v2 record; ``key_length`` / ``value_length`` override the written lengths and
    ``length_adjust`` is added to the record's length prefix (to write inconsistent records)."""
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    body += encode_varint((-1 if key is None else len(key)) if key_length is None else key_length)
    body += key or b""
    body += encode_varint((-1 if value is None else len(value)) if value_length is None else value_length)
    body += value or b""
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        body += encode_varint(len(hkey)) + hkey
        body += encode_varint(-1 if hvalue is None else len(hvalue)) + (hvalue or b"")
    return encode_varint(len(body) + length_adjust) + bytes(body)


def _batch(
    records: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    codec: int,
    log_append: bool,
    last_offset_delta: int = 0,
) -> bytes:
    payload = records if codec == 0 else compress(Compression(codec), records, 2)
    attributes = codec | (0x08 if log_append else 0)
    header = bytearray(
        V2_HEADER.pack(
            base_offset, 49 + len(payload), -1, 2, 0, attributes, last_offset_delta,
            base_timestamp, max_timestamp, -1, -1, -1, count,
        )
    )
    body = bytes(header[21:]) + payload
    struct.pack_into(">I", header, 17, crc32c(body))
    return bytes(header) + payload


def _outcome(fn: Callable[[bytearray], Any]) -> tuple[Any, ...]:
    out = bytearray(b"before")
    try:
        written, uncompressed = fn(out)
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)
    return ("ok", bytes(out), written, uncompressed)


def _both(data: bytes, to_magic: int, first_offset: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    (batch,) = list(MemoryRecords(data).batches())
    fused = _outcome(lambda out: _convert_v2_batch_into(out, batch, to_magic, first_offset))
    generic = _outcome(lambda out: _convert_batch_into_generic(out, batch, to_magic, first_offset))
    return fused, generic


# -- strategies ---------------------------------------------------------------------------------

small_bytes = st.binary(max_size=40)
optional_bytes = st.none() | small_bytes
header_keys = st.text(max_size=6).map(lambda s: s.encode("utf-8")) | st.binary(max_size=4)
headers = st.lists(st.tuples(header_keys, optional_bytes), max_size=2)
timestamp_deltas = st.integers(-3, 3) | st.integers(-200, 20000) | st.integers(INT64_MIN, INT64_MAX)
offset_steps = st.integers(1, 3) | st.integers(0, 300) | st.integers(-5, 5)
record_fields = st.tuples(offset_steps, timestamp_deltas, optional_bytes, optional_bytes, headers)
base_offsets = st.integers(0, 1000) | st.sampled_from(
    [INT64_MAX - 2, INT64_MAX - 400, INT64_MIN, INT64_MIN + 3, 1 << 40]
)
base_timestamps = st.integers(-3, 2_000_000_000_000) | st.sampled_from(
    [-1, -2, INT64_MAX, INT64_MAX - 5, INT64_MIN, 1_700_000_000_000]
)
codecs = st.sampled_from([0, 0, 0, 1, 2, 3])


@st.composite
def well_formed(draw: st.DrawFn) -> tuple[bytes, int, int]:
    fields = draw(st.lists(record_fields, max_size=8))
    base_offset = draw(base_offsets)
    delta = 0
    parts = []
    for step, ts_delta, key, value, hdrs in fields:
        parts.append(_record(delta, ts_delta, key, value, hdrs))
        delta = max(INT32_MIN, min(INT32_MAX, delta + step))
    data = _batch(
        b"".join(parts), len(fields), base_offset, draw(base_timestamps),
        draw(base_timestamps), draw(codecs), draw(st.booleans()),
    )
    first_offset = draw(st.integers(-2, 12) | st.just(base_offset + 2) | st.just(INT64_MAX))
    return data, draw(st.sampled_from([0, 1])), first_offset


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[bytes, int, int]:
    fields = draw(st.lists(record_fields, min_size=1, max_size=5))
    parts = []
    for index, (step, ts_delta, key, value, hdrs) in enumerate(fields):
        inconsistent = draw(st.booleans())
        parts.append(
            _record(
                index * step, ts_delta, key, value, hdrs,
                key_length=draw(st.none() | st.integers(-3, 50)) if inconsistent else None,
                value_length=draw(st.none() | st.integers(-3, 50)) if inconsistent else None,
                length_adjust=draw(st.integers(-3, 3)) if inconsistent else 0,
            )
        )
    records = bytearray(b"".join(parts))
    for position, byte in draw(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3)):
        records[position % len(records)] = byte
    cut = draw(st.integers(-4, 2))
    if cut < 0:
        del records[cut:]
    else:
        records += b"\x00\x80\xff"[:cut]
    count = len(fields) + draw(st.sampled_from([0, 0, 0, -1, 1, 3]))
    data = _batch(
        bytes(records), count, draw(base_offsets), draw(base_timestamps), draw(base_timestamps),
        draw(codecs), draw(st.booleans()),
    )
    return data, draw(st.sampled_from([0, 1])), draw(st.integers(-1, 4))


# -- properties ---------------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=120)
@given(well_formed())
def test_fused_equals_generic_on_well_formed_batches(case: tuple[bytes, int, int]) -> None:
    data, to_magic, first_offset = case
    fused, generic = _both(data, to_magic, first_offset)
    assert fused == generic


@settings(max_examples=120)
@given(corrupted())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_fused_equals_generic_on_corrupt_batches(case: tuple[bytes, int, int]) -> None:
    data, to_magic, first_offset = case
    fused, generic = _both(data, to_magic, first_offset)
    assert fused == generic


@settings(max_examples=40)
@given(st.lists(well_formed(), min_size=1, max_size=4), st.sampled_from([0, 1]), st.integers(-1, 6))
@pytest.mark.slow  # over a second: kept out of the quick look
def test_down_convert_bytes_uses_the_fused_path_transparently(
    cases: list[tuple[bytes, int, int]], to_magic: int, first_offset: int
) -> None:
    """Whole conversions (several batches, stats included) equal a generic-only conversion."""
    data = b"".join(case[0] for case in cases)

    def run(convert_batch: Callable[..., Any]) -> tuple[Any, ...]:
        import lazyconv.conversion._down as convert_module

        saved = convert_module._convert_batch_into
        convert_module._convert_batch_into = convert_batch
        try:
            return _outcome_stats(lambda: down_convert_bytes(MemoryRecords(data).batches(), to_magic, first_offset))
        finally:
            convert_module._convert_batch_into = saved

    assert run(_convert_batch_into) == run(_convert_batch_into_generic)


def _outcome_stats(fn: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        data, stats = fn()
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)
    return ("ok", bytes(data), stats.records_converted, stats.temporary_memory_bytes)


# -- examples the properties might not hit ------------------------------------------------------


def test_the_short_varint_path_decodes_every_one_and_two_byte_varint() -> None:
    for first in range(256):
        for second in range(128) if first >= 0x80 else [None]:
            encoded = bytes([first]) if second is None else bytes([first, second])
            expected = read_varint(encoded, 0, len(encoded))
            assert _field_varint(encoded, 0, len(encoded), 0, read_varint) == expected


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("to_magic", [0, 1])
def test_log_append_time_and_relative_offsets(codec: int, to_magic: int) -> None:
    records = b"".join(_record(d, d * 7, b"k%d" % d, b"v" * d, []) for d in (0, 1, 4))
    data = _batch(records, 3, 100, 5000, 9999, codec, True, 4)
    fused, generic = _both(data, to_magic, 0)
    assert fused == generic and fused[0] == "ok" and fused[2] == 3


@pytest.mark.parametrize(
    ("base_offset", "base_timestamp", "ts_delta", "log_append", "max_timestamp", "message"),
    [
        (0, 10, -20, False, 0, "invalid negative timestamp -10"),
        (0, INT64_MAX, 5, False, 0, "timestamp beyond int64"),
        (INT64_MAX, 0, 0, False, 0, "cannot be written as an int64 offset"),
        (0, 0, 0, True, -7, "invalid negative timestamp -7"),
    ],
)
def test_unwritable_records_are_refused(
    base_offset: int, base_timestamp: int, ts_delta: int, log_append: bool, max_timestamp: int, message: str
) -> None:
    # the bad record comes first; a later record is fine: both paths reject the batch
    offset_delta = 1 if base_offset == INT64_MAX else 0
    records = _record(offset_delta, ts_delta, b"k", b"v", []) + _record(0, 0, None, None, [])
    data = _batch(records, 2, base_offset, base_timestamp, max_timestamp, 0, log_append)
    fused, generic = _both(data, 1, INT64_MIN)
    assert fused == generic
    assert fused[0] == "error" and message in fused[2] and fused[3] == 0


def test_errors_come_in_record_order_as_in_the_generic_path() -> None:
    # a bad timestamp in record 0 is reported before a malformed record 1
    records = _record(0, -100, b"k", b"v", []) + _record(1, 0, b"k", b"v", [], length_adjust=2)
    data = _batch(records, 2, 0, 5, 5, 0, False)
    fused, generic = _both(data, 1, 0)
    assert fused == generic and "invalid negative timestamp" in fused[2]
    # a malformed record 0 is reported before anything about record 1
    records = _record(0, 0, b"k", b"v", [], length_adjust=2) + _record(1, -100, b"k", b"v", [])
    fused, generic = _both(_batch(records, 2, 0, 5, 5, 0, False), 1, 0)
    assert fused == generic and "record 0: read 9 bytes but the record declares 11" in fused[2]


@pytest.mark.parametrize("codec", [0, 2])
def test_offsets_must_increase(codec: int) -> None:
    records = _record(0, 0, b"k", b"v", []) + _record(3, 0, b"k", b"v", []) + _record(3, 0, None, b"v", [])
    fused, generic = _both(_batch(records, 3, 10, 5, 5, codec, False), 1, 0)
    assert fused == generic and "must increase within a batch: 13 follows 13" in fused[2]


def test_non_utf8_header_key_is_converted_as_kafka_stores_it() -> None:
    # Kafka stores header keys that are not UTF-8 (docs/differences.md): both paths convert
    # the batch (v0/v1 have no headers), neither refuses it
    good = _record(0, 0, b"k", b"v", [(b"plain", b"x"), ("é".encode(), None)])
    odd = _record(1, 0, b"k", b"v", [(b"\xff\xfe", b"x"), (b"\xed\xa0\x80", None)])
    fused, generic = _both(_batch(good + odd, 2, 0, 5, 5, 0, False), 1, 0)
    assert fused == generic and fused[0] == "ok" and fused[2] == 2


def test_header_count_zero_written_as_two_bytes() -> None:
    # a non-canonical 2-byte varint 0x80 0x00 is a header count of 0
    record = bytearray(_record(0, 0, b"k", b"v", []))
    record[0] += 2  # zigzag: length + 1
    record += b"\x00"
    record[-2] = 0x80
    fused, generic = _both(_batch(bytes(record), 1, 0, 5, 5, 0, False), 1, 0)
    assert fused == generic and fused[0] == "ok"


def test_file_records_take_the_fused_path(tmp_path: Any) -> None:
    records = b"".join(_record(d, d, b"k", b"value", []) for d in range(5))
    data = _batch(records, 5, 10, 1000, 1004, 0, False, 4) * 2
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    with FileRecords.open(path) as file_records:
        from_file = down_convert_bytes(file_records.batches(), 1, 12)
    from_memory = down_convert_bytes(MemoryRecords(data).batches(), 1, 12)
    assert from_file[0] == from_memory[0]
    assert from_file[1].records_converted == from_memory[1].records_converted == 6


def test_fused_function_appends_to_the_given_buffer() -> None:
    records = b"".join(_record(d, d, b"k", b"v", []) for d in range(3))
    out = bytearray(b"prefix")
    kept, last_offset, max_timestamp = convert_v2_records_to_legacy(
        out, records, 3, 50, 1000, None, 51, 1, 0, False, 61, 0, False
    )
    assert (kept, last_offset, max_timestamp) == (2, 52, 1002)
    assert out.startswith(b"prefix") and len(out) == 6 + 2 * (12 + 22 + 1 + 1)


@pytest.mark.parametrize(
    "records",
    [
        b"\x80\x80\x80\x80\x80\x01" + _record(0, 0, b"k", b"v", []),  # length varint too long
        b"\x80",  # the records end inside the first length varint
        b"\xff\xff\x03" + b"\x00" * 5,  # a 3-byte length past the end
    ],
)
def test_malformed_first_record_is_reported_like_the_generic_path(records: bytes) -> None:
    fused, generic = _both(_batch(records, 1, 0, 5, 5, 0, False), 1, 0)
    assert fused == generic and fused[0] == "error"


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_a_compressed_batch_converted_from_its_decompressed_records_equals_down_convert() -> None:
    """convert_compressed_v2_entry (records decompressed once, by the caller) and the kernel's
    append_compressed_v2_entry give the bytes and statistics of down_convert_bytes for every
    gzip, snappy and lz4 v2 batch of the committed fixtures (CreateTime and LogAppendTime), to
    magics 0 and 1."""
    from pathlib import Path

    from lazyconv.conversion._down import append_compressed_v2_entry, convert_compressed_v2_entry
    from lazyconv.logdir._layout import list_segments
    from lazyconv.records._batch import DefaultBatch

    root = Path(__file__).resolve().parents[2] / "fixtures"
    compared = log_append = 0
    for seg in list_segments(str(root)):
        records = FileRecords.open(seg.log_path)
        try:
            for batch in records.batches():
                if not isinstance(batch, DefaultBatch) or batch.is_control or not 0 < batch.attributes & 7 < 4:
                    continue
                entry = bytes(batch.buffer())
                for to_magic in (0, 1):
                    expected, stats = down_convert_bytes([batch], to_magic, 0)
                    payload = bytes(batch.records_payload())
                    got, converted, temporary = convert_compressed_v2_entry(
                        entry, payload, to_magic, batch.position)
                    assert (bytes(got), converted, temporary) == (
                        bytes(expected), stats.records_converted, stats.temporary_memory_bytes)
                    # the kernel's path, given a view of the entry as the validation job gives it
                    appended = bytearray(b"~")
                    assert append_compressed_v2_entry(
                        appended, memoryview(entry), payload, to_magic, batch.position
                    ) == (converted, temporary)
                    assert appended[1:] == expected
                compared += 1
                log_append += bool(batch.attributes & 0x08)
        finally:
            records.close()
    assert compared > 100 and log_append > 0


def _compressed_entry(codec: Compression, count: int) -> bytes:
    from lazyconv.records._builder import encode_v2_batch

    records = bytearray()
    for i in range(count):
        append_v2_record(records, i, i, b"k", b"v%d" % i)
    return encode_v2_batch(
        base_offset=40, partition_leader_epoch=-1, attributes=int(codec), last_offset_delta=max(count - 1, 0),
        base_timestamp=1_000, max_timestamp=1_000 + max(count - 1, 0), producer_id=-1, producer_epoch=-1,
        base_sequence=-1, record_count=count, payload=compress(codec, records, 2))


@pytest.mark.parametrize("to_magic", [0, 1])
def test_a_compressed_entry_without_records_converts_to_nothing_as_down_convert(to_magic: int) -> None:
    """A compressed v2 batch of no record: nothing written and all-zero statistics, as
    down_convert_bytes drops it (the validation job's figures must not count it)."""
    from lazyconv.conversion._down import append_compressed_v2_entry, convert_compressed_v2_entry

    entry = _compressed_entry(Compression.GZIP, 0)
    expected, stats = down_convert_bytes(MemoryRecords(entry).batches(), to_magic, 0)
    assert (bytes(expected), stats.records_converted, stats.temporary_memory_bytes) == (b"", 0, 0)
    got, converted, temporary = convert_compressed_v2_entry(entry, b"", to_magic)
    assert (bytes(got), converted, temporary) == (b"", 0, 0)
    out = bytearray(b"~")
    assert append_compressed_v2_entry(out, entry, b"", to_magic) == (0, 0) and out == b"~"
    # with records: the bytes and figures of down_convert_bytes
    entry = _compressed_entry(Compression.GZIP, 3)
    (batch,) = MemoryRecords(entry).batches()
    expected, stats = down_convert_bytes([batch], to_magic, 0)
    got, converted, temporary = convert_compressed_v2_entry(entry, bytes(batch.records_payload()), to_magic)
    assert (bytes(got), converted, temporary) == (bytes(expected), 3, stats.temporary_memory_bytes)


def test_a_compressed_entry_that_cannot_be_converted_is_a_typed_error() -> None:
    from lazyconv.conversion._down import append_compressed_v2_entry, convert_compressed_v2_entry
    from lazyconv.errors import ConfigurationError, TruncatedDataError

    entry = _compressed_entry(Compression.GZIP, 2)
    with pytest.raises(TruncatedDataError, match="shorter than its 61-byte header") as caught:
        convert_compressed_v2_entry(entry[:60], b"", 1)
    assert caught.value.position == 0  # where the entry starts, unless the caller says
    out = bytearray(b"~")
    with pytest.raises(TruncatedDataError) as caught:
        append_compressed_v2_entry(out, entry[:60], b"", 1)
    assert caught.value.position == 0 and out == b"~"
    with pytest.raises(TruncatedDataError) as caught:
        append_compressed_v2_entry(out, entry[:60], b"", 1, 500)
    assert caught.value.position == 500 and out == b"~"
    with pytest.raises(ConfigurationError, match="target magic must be 0, 1 or 2"):
        convert_compressed_v2_entry(entry, b"", 3)
    for wrong, to_magic in ((_compressed_entry(Compression.NONE, 2), 1),
                            (_compressed_entry(Compression.ZSTD, 2), 0), (entry, 2)):
        with pytest.raises(ValueError, match="converts gzip, snappy or lz4 v2 batches to magic 0 or 1"):
            convert_compressed_v2_entry(wrong, b"", to_magic)


# -- the kernel's compressed-batch conversion against convert_compressed_v2_entry ----------------


def _compressed_outcomes(data: bytes, to_magic: int, payload: bytes) -> tuple[Any, Any, bool]:
    """``(kernel outcome, reference outcome, whether the kernel declined)`` for one entry."""
    from lazyconv.conversion._down import append_compressed_v2_entry, convert_compressed_v2_entry
    from lazyconv.records import _impl

    kernel: Any = _impl.kernel_module()
    out = bytearray(b"before")
    declined = kernel.convert_v2_compressed(out, data, payload, to_magic, compress) is None
    if declined:
        assert out == b"before"  # a declined batch leaves the output as it was
    native = _outcome(lambda out: append_compressed_v2_entry(out, data, payload, to_magic, 3))
    def reference(out: bytearray) -> tuple[int, int]:
        converted, written, temporary = convert_compressed_v2_entry(data, payload, to_magic, 3)
        out += converted
        return written, temporary

    with _impl.using(_impl.REFERENCE):  # the pure-Python records path
        expected = _outcome(reference)
    return native, expected, declined


def _payload_of(data: bytes) -> bytes:
    from lazyconv.records._compression import decompress

    return decompress(data[22] & 7, data[61:], 2)


_kernel_needed = pytest.mark.skipif(
    __import__("lazyconv.records._impl", fromlist=["NATIVE"]).NATIVE is None,
    reason="compares the compiled kernel with the reference")


@pytest.mark.slow
@_kernel_needed
@settings(max_examples=150)
@given(well_formed(), st.sampled_from([1, 2, 3]))
def test_kernel_converts_compressed_batches_as_the_reference(case: tuple[bytes, int, int], codec: int) -> None:
    data, to_magic, _ = case
    data = bytearray(data)
    payload = bytes(data[61:]) if data[22] & 7 == 0 else _payload_of(bytes(data))
    data = _batch(payload, struct.unpack_from(">i", data, 57)[0], *struct.unpack_from(">q", data, 0),
                  *struct.unpack_from(">qq", data, 27), codec, bool(data[22] & 0x08))
    native, expected, declined = _compressed_outcomes(data, to_magic, payload)
    assert native == expected
    base_offset = struct.unpack_from(">q", data, 0)[0]
    if expected[0] == "ok" and base_offset >= 0 and base_offset < INT64_MAX - (1 << 32):
        assert not declined  # sound records with sane offsets never leave the kernel's path


@pytest.mark.slow
@_kernel_needed
@settings(max_examples=150)
@given(corrupted(), st.sampled_from([1, 2, 3]), st.sampled_from([None] * 6 + [0, 12, 22, 60]))
def test_kernel_converts_corrupt_compressed_batches_as_the_reference(
    case: tuple[bytes, int, int], codec: int, cut: int | None
) -> None:
    data, to_magic, _ = case
    records = bytes(data[61:]) if data[22] & 7 == 0 else _payload_of(data)
    entry = _batch(records, struct.unpack_from(">i", data, 57)[0], *struct.unpack_from(">q", data, 0),
                   *struct.unpack_from(">qq", data, 27), codec, bool(data[22] & 0x08))
    if cut is not None:  # a header cut short: the kernel declines, the reference raises
        entry = entry[:cut]
    native, expected, _ = _compressed_outcomes(entry, to_magic, records)
    assert native == expected


@_kernel_needed
def test_kernel_compressed_conversion_passes_on_the_codecs_error() -> None:
    from lazyconv.records import _impl

    kernel: Any = _impl.kernel_module()
    data = _batch(_record(0, 0, b"k", b"v", []), 1, 5, 10, 10, 1, False)

    def broken(codec: int, inner: bytes, magic: int) -> bytes:
        raise RuntimeError(f"codec {codec} failed on {len(inner)} bytes for magic {magic}")

    out = bytearray(b"x")
    with pytest.raises(RuntimeError, match="codec 1 failed on 36 bytes for magic 1"):
        kernel.convert_v2_compressed(out, data, _payload_of(data), 1, broken)
    assert out == b"x"
    with pytest.raises(TypeError):
        kernel.convert_v2_compressed(out, data, _payload_of(data), 1, lambda *_: 17)
    assert out == b"x"


@pytest.mark.parametrize("to_magic", [0, 1])
def test_an_offset_below_int64_is_refused_not_written(to_magic: int) -> None:
    """A compressed batch at the lowest int64 offset whose first record's delta is -1: that
    offset (which Java would wrap to the highest) cannot be written as a legacy message's int64
    offset, even as the wrapper's inner messages' relative offsets would fit."""
    records = _record(-1, 0, b"k", b"v", []) + _record(0, 0, b"k", b"w", [])
    fused, generic = _both(_batch(records, 2, INT64_MIN, 5, 5, 1, False), to_magic, 0)
    assert fused == generic
    assert fused[0] == "error" and fused[1] is InvalidRecordError and fused[3] == 0
    assert f"record offset {INT64_MIN - 1} cannot be written as an int64 offset" in fused[2]


def test_a_timestamp_of_minus_one_does_not_take_the_blame_for_an_offset() -> None:
    """A record with no timestamp (-1, allowed) at an offset beyond int64 is refused for its
    offset, not for its timestamp."""
    records = _record(1, 0, b"k", b"v", [])
    fused, generic = _both(_batch(records, 1, INT64_MAX, -1, -1, 0, False), 1, 0)
    assert fused == generic and fused[0] == "error"
    assert "cannot be written as an int64 offset" in fused[2] and "timestamp" not in fused[2]


@pytest.mark.parametrize("codec", [0, 1])
def test_records_without_timestamps_give_a_v1_wrapper_without_one(codec: int) -> None:
    """v2 records with timestamp -1 (no timestamp, as Kafka up-converts v0 messages): the v1
    messages carry -1, and so does the wrapper of a compressed batch, whose timestamp is its
    inner messages' maximum (Kafka's MemoryRecordsBuilder starts it at NO_TIMESTAMP, -1)."""
    records = _record(0, 0, b"k", b"v", []) + _record(1, 0, None, b"w", [])
    data = _batch(records, 2, 40, -1, -1, codec, False, 1)
    out, _stats = down_convert_bytes(MemoryRecords(data).batches(), 1, 0)
    messages = [(m.offset, m.timestamp) for m in MemoryRecords(bytes(out)).batches()]
    assert messages == ([(40, -1), (41, -1)] if codec == 0 else [(41, -1)])
    for message in MemoryRecords(bytes(out)).batches():
        assert [r.timestamp for r in message] == [-1] * len(list(message))
    fused, generic = _both(data, 1, 0)
    assert fused == generic and fused[0] == "ok"


@pytest.mark.parametrize(
    ("header", "message", "position"),
    [
        # count 1, key length 5 with 1 byte left: at the key's first byte (61 + 8)
        (b"\x02\x0a" + b"a", "record 0: header key length 5 exceeds the 1 bytes left", 69),
        # count 1, key "a", value length 5 with 1 byte left: at the value's first byte (61 + 10)
        (b"\x02\x02a\x0a" + b"x", "record 0: header value length 5 exceeds the 1 bytes left", 71),
    ],
)
def test_a_header_longer_than_its_record_is_named_where_it_starts(header: bytes, message: str,
                                                                   position: int) -> None:
    """Kafka refuses a header key or value that runs past its record (InvalidRecordException);
    the error names that header field and the byte where its data would start."""
    body = b"\x00\x00\x00\x01\x01" + header  # attributes, deltas 0, null key, null value
    data = _batch(encode_varint(len(body)) + body, 1, 0, 5, 5, 0, False)
    fused, generic = _both(data, 1, 0)
    assert fused == generic
    assert fused[0] == "error" and fused[1] is InvalidRecordError
    assert fused[2] == f"{message} (at byte {position})" and fused[3] == position


def test_a_negative_record_length_is_refused_at_the_record() -> None:
    """Kafka refuses a record whose length prefix is negative (InvalidRecordException); the
    error says so, at the record's first byte (61: right after the batch header)."""
    data = _batch(encode_varint(-1) + b"\x00" * 8, 1, 0, 5, 5, 0, False)
    fused, generic = _both(data, 1, 0)
    assert fused == generic
    assert fused[0] == "error" and fused[1] is InvalidRecordError and fused[3] == 61
    assert "record 0 declares a body of -1 bytes" in fused[2]


def test_bits_of_a_five_byte_varint_past_32_are_dropped_as_java_does() -> None:
    """Kafka's ByteUtils.readVarint shifts the fifth byte into a Java int, so bits past 32 are
    lost: a key length written as 82 80 80 80 10 reads as 2 (zig-zag: 1), and the record
    converts with its one-byte key rather than failing on a length of 2**31 + 1."""
    body = b"\x00\x00\x00" + bytes([0x82, 0x80, 0x80, 0x80, 0x10]) + b"k" + b"\x01" + b"\x00"
    data = _batch(encode_varint(len(body)) + body, 1, 0, 5, 5, 0, False)
    fused, generic = _both(data, 1, 0)
    assert fused == generic and fused[0] == "ok" and fused[2] == 1
    out, _stats = down_convert_bytes(MemoryRecords(data).batches(), 1, 0)
    assert [(r.key, r.value) for b in MemoryRecords(bytes(out)).batches() for r in b] == [(b"k", None)]


@pytest.mark.parametrize(
    ("body", "message", "position"),
    [
        # key length: five bytes, all with the continuation bit (Kafka: "Varint is too long")
        (b"\x00\x00\x00" + b"\x80" * 5 + b"\x00\x01\x00", "varint longer than 5 bytes", 65),
        # timestamp delta: ten bytes, all with the continuation bit
        (b"\x00" + b"\x80" * 10 + b"\x00\x00\x01\x01\x00", "varlong longer than 10 bytes", 63),
        # header count 0x80 0x01 with its second byte past the record's end (the next byte)
        (b"\x00\x00\x00\x01\x01\x80", "varint runs past the end of its data", 67),
    ],
)
def test_a_malformed_varint_is_named_where_it_starts(body: bytes, message: str, position: int) -> None:
    """An overlong varint or varlong, or one running past its record, is refused as Kafka's
    reader refuses it, the error naming which (32 or 64 bits) and the varint's first byte."""
    data = _batch(encode_varint(len(body)) + body + b"\x01", 1, 0, 5, 5, 0, False)
    fused, generic = _both(data, 1, 0)
    assert fused == generic
    assert fused[0] == "error" and fused[1] is MalformedVarintError
    assert fused[2] == f"{message} (at byte {position})" and fused[3] == position
