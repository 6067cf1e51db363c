"""The pure-Python reference of the per-record work: varints, v2 records, legacy messages.

This is the twin the compiled kernel is held to (``lazyconv.records._impl`` chooses between
them; the differential tests and fuzzers compare them), so it is written to be read: one
function per wire structure, in the order of the bytes, each raising the error Kafka's reader
would raise for what it reads. It calls no kernel code (its CRCs are zlib's and the ``crc32c``
package's).

- varints: :func:`read_varint`, :func:`read_varlong` (and the short-form decoder the record
  reader uses for its fields), :func:`encode_varint`, :func:`encode_varlong`;
- v2 records: :func:`read_v2_record` (one record's fields), :func:`iter_v2_records` (a
  payload's records), :func:`append_v2_record` (encoding);
- legacy messages: :func:`parse_legacy_message`, :func:`append_legacy_message_reference`;
- down-conversion of a payload's records: :func:`convert_v2_records_to_legacy`
  (:func:`read_v2_record` then one legacy message per kept record, with the builder's checks).

Positions in error messages are ``error_base + index`` so that callers can report byte
positions relative to their records (or file).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any
from zlib import crc32 as _zlib_crc32

from crc32c import crc32c as _package_crc32c

from lazyconv.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MalformedVarintError,
    RecordsError,
)
from lazyconv.records import _format
from lazyconv.records._format import (
    LEGACY_CRC_LENGTH,
    LEGACY_ENTRY_CRC_OFFSET,
    LEGACY_ENTRY_KEY_SIZE_OFFSET_V0,
    LEGACY_ENTRY_KEY_SIZE_OFFSET_V1,
    LEGACY_ENTRY_MAGIC_OFFSET,
    LEGACY_ENTRY_TIMESTAMP_OFFSET,
    LEGACY_KEY_SIZE_LENGTH,
    LEGACY_VALUE_SIZE_LENGTH,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    SIZE_OFFSET,
)
from lazyconv.records._types import Record

# The header structs are named with the layout in _format.py (re-exported here for the modules
# that parse with this codec).
LOG_HEADER = _format.LOG_HEADER
V2_HEADER = _format.V2_HEADER
V2_AFTER_CRC = _format.V2_AFTER_CRC
LEGACY_HEADER = _format.LEGACY_HEADER
_LEGACY_PREFIX = _format.LEGACY_PREFIX
_V0_BODY = _format.LEGACY_V0_BODY
_V1_BODY = _format.LEGACY_V1_BODY
I8 = struct.Struct(">b")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")

# CRC-32 and CRC-32C of the reference: zlib's and the crc32c package's (the kernel has its own,
# chosen by _impl); signature ``crc(data, value=0)``.
crc32 = _zlib_crc32
crc32c = _package_crc32c

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


# --------------------------------------------------------------------------------------------
# varints


def read_uvarint(data: bytes, pos: int, end: int, max_bytes: int, error_base: int = 0) -> tuple[int, int]:
    """Read an unsigned base-128 varint of at most ``max_bytes`` bytes from ``data[pos:end]``.

    Returns ``(value, new_pos)``. Raises :class:`MalformedVarintError` if the data ends inside the
    varint or the ``max_bytes``-th byte still has its continuation bit set.
    """
    value = 0
    shift = 0
    start = pos
    for _ in range(max_bytes):
        if pos >= end:
            raise MalformedVarintError("varint runs past the end of its data", error_base + start)
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    kind = "varint longer than 5 bytes" if max_bytes == 5 else "varlong longer than 10 bytes"
    raise MalformedVarintError(kind, error_base + start)


def read_varint(data: bytes, pos: int, end: int, error_base: int = 0) -> tuple[int, int]:
    """Read a zig-zag signed 32-bit varint; returns ``(value, new_pos)``."""
    u, pos = read_uvarint(data, pos, end, 5, error_base)
    u &= _MASK32  # Java drops bits shifted past 32
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(data: bytes, pos: int, end: int, error_base: int = 0) -> tuple[int, int]:
    """Read a zig-zag signed 64-bit varlong; returns ``(value, new_pos)``."""
    u, pos = read_uvarint(data, pos, end, 10, error_base)
    u &= _MASK64
    return (u >> 1) ^ -(u & 1), pos


def zigzag32(value: int) -> int:
    """Zig-zag map a signed 32-bit value to unsigned."""
    return ((value << 1) ^ (value >> 31)) & _MASK32


def zigzag64(value: int) -> int:
    """Zig-zag map a signed 64-bit value to unsigned."""
    return ((value << 1) ^ (value >> 63)) & _MASK64


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# Encodings of small signed values (lengths, deltas, counts) are looked up, not computed.
_SMALL_MIN = -64
_SMALL_MAX = 8191
_SMALL_VARINTS: list[bytes] = [_encode_unsigned(zigzag32(v)) for v in range(_SMALL_MIN, _SMALL_MAX + 1)]


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit value as a zig-zag varint."""
    if _SMALL_MIN <= value <= _SMALL_MAX:
        return _SMALL_VARINTS[value - _SMALL_MIN]
    if not -(1 << 31) <= value < (1 << 31):
        raise OverflowError(f"varint value out of int32 range: {value}")
    return _encode_unsigned(zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit value as a zig-zag varlong."""
    if _SMALL_MIN <= value <= _SMALL_MAX:
        return _SMALL_VARINTS[value - _SMALL_MIN]
    if not -(1 << 63) <= value < (1 << 63):
        raise OverflowError(f"varlong value out of int64 range: {value}")
    return _encode_unsigned(zigzag64(value))


def varint_size(value: int) -> int:
    """Number of bytes of the zig-zag varlong encoding of ``value``."""
    u = zigzag64(value)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


# --------------------------------------------------------------------------------------------
# v2 records


def iter_v2_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None,
    error_base: int,
    require_exact_end: bool = True,
    first_index: int = 0,
    declared_count: int | None = None,
) -> Iterator[Record]:
    """Parse ``count`` v2 records from ``data[pos:end]``, yielding :class:`Record` tuples.

    ``timestamp_override`` (the batch's MaxTimestamp for LogAppendTime batches) replaces every
    record's timestamp. Errors carry ``error_base + index`` as position. With
    ``require_exact_end`` the records must end exactly at ``end`` (uncompressed batches and
    fully decompressed payloads alike: Kafka rejects "records still remaining").
    ``first_index`` and ``declared_count`` number the records in error messages when the
    caller parses a run of records from the middle of a batch (default: ``0`` and ``count``).
    """
    total = count if declared_count is None else declared_count
    for index in range(first_index, first_index + count):
        (ts_delta, off_delta, key, value, headers), pos = read_v2_record(data, pos, end, index, total, error_base)
        timestamp = base_timestamp + ts_delta if timestamp_override is None else timestamp_override
        yield _new_record((base_offset + off_delta, timestamp, key, value, headers))
    if require_exact_end:
        check_records_end(pos, end, total, error_base)


V2Fields = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]
# Record(*fields) without NamedTuple's Python-level __new__ (a frame per record)
_new_record: Callable[[tuple[Any, ...]], Record] = partial(tuple.__new__, Record)


def read_v2_record(
    data: bytes, pos: int, end: int, index: int, total: int, error_base: int
) -> tuple[V2Fields, int]:
    """Parse the v2 record ``index`` (of ``total``) at ``data[pos]``, within ``data[:end]``.

    A record is: its length (varint), then that many bytes: attributes (int8, unused),
    timestamp delta (varlong), offset delta (varint), key length (varint, -1 = null) and key,
    value length and value, header count (varint) and the headers. Returns
    ``((timestamp_delta, offset_delta, key, value, headers), position after the record)``;
    raises :class:`InvalidRecordError` or :class:`MalformedVarintError` at ``error_base +``
    the position of what is wrong, with Kafka's checks: lengths within the bytes left, and
    the fields filling the record exactly.
    """
    start = pos
    length, pos = _record_length(data, pos, end, index, total, error_base)
    record_end = pos + length
    if length < 0 or record_end > end:
        raise InvalidRecordError(
            f"record {index} declares a body of {length} bytes but {end - pos} remain", error_base + start
        )
    try:
        pos += 1  # attributes: unused
        ts_delta, pos = _field_varint(data, pos, record_end, error_base, read_varlong)
        off_delta, pos = _field_varint(data, pos, record_end, error_base, read_varint)
        key, pos = _length_prefixed(data, pos, record_end, index, "key", error_base)
        value, pos = _length_prefixed(data, pos, record_end, index, "value", error_base)
        header_count, pos = _field_varint(data, pos, record_end, error_base, read_varint)
    except IndexError:  # a field's first bytes lie past the end of the data
        raise MalformedVarintError(
            f"record {index}: a varint runs past the end of the record", error_base + pos
        ) from None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if header_count != 0:
        headers, pos = _read_headers(data, pos, record_end, header_count, index, error_base)
    if pos != record_end:
        raise InvalidRecordError(
            f"record {index}: read {pos - start} bytes but the record declares {record_end - start}",
            error_base + start,
        )
    return (ts_delta, off_delta, key, value, headers), pos


def check_records_end(pos: int, end: int, total: int, error_base: int) -> None:
    """Kafka's "records still remaining": the records must fill their bytes exactly."""
    if pos != end:
        raise InvalidRecordError(
            f"{end - pos} bytes still remain after the {total} records the batch declares", error_base + pos
        )


def _record_length(data: bytes, pos: int, end: int, index: int, total: int, error_base: int) -> tuple[int, int]:
    """A record's length prefix; a record that starts at ``end`` is a count the payload does
    not hold."""
    try:
        return _field_varint(data, pos, end, error_base, read_varint)
    except IndexError:
        if pos < end:
            raise MalformedVarintError(
                f"record {index}: its length varint runs past the end of the records", error_base + pos
            ) from None
        raise InvalidRecordError(
            f"record {index} of {total} starts past the end of the records (premature EOF:"
            " the record count disagrees with the payload)",
            error_base + pos,
        ) from None


def _field_varint(
    data: bytes, pos: int, limit: int, error_base: int, read: Callable[[bytes, int, int, int], tuple[int, int]]
) -> tuple[int, int]:
    """A zig-zag varint (``read_varint``) or varlong (``read_varlong``) field at ``data[pos]``.

    One- and two-byte encodings (lengths, deltas, counts are small) are decoded here, checking
    only the bytes they use against the data, as Kafka's reader does: a field that reads past
    ``limit`` is then caught by the record's length check. Longer ones go to ``read``, bounded
    by ``limit``. IndexError when ``data`` ends before the field's bytes.
    """
    first = data[pos]
    if first < 0x80:
        return (first >> 1) ^ -(first & 1), pos + 1
    if data[pos + 1] < 0x80 and pos + 2 <= limit:
        both = (first & 0x7F) | (data[pos + 1] << 7)
        return (both >> 1) ^ -(both & 1), pos + 2
    return read(data, pos, limit, error_base)


def _length_prefixed(
    data: bytes, pos: int, limit: int, index: int, what: str, error_base: int
) -> tuple[bytes | None, int]:
    """A key or value: its length (varint, negative = null), then that many bytes."""
    length, pos = _field_varint(data, pos, limit, error_base, read_varint)
    if length < 0:
        return None, pos
    if length > limit - pos:
        raise InvalidRecordError(
            f"record {index}: {what} length {length} exceeds the {limit - pos} bytes left", error_base + pos
        )
    return data[pos : pos + length], pos + length


def _read_headers(
    data: bytes, pos: int, end: int, hcount: int, index: int, error_base: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if hcount < 0:
        raise InvalidRecordError(f"record {index}: negative header count {hcount}", error_base + pos)
    if hcount > end - pos:
        raise InvalidRecordError(
            f"record {index}: header count {hcount} exceeds the {end - pos} bytes left",
            error_base + pos,
        )
    out: list[tuple[str, bytes | None]] = []
    for _ in range(hcount):
        hklen, pos = read_varint(data, pos, end, error_base)
        if hklen < 0:
            raise InvalidRecordError(f"record {index}: negative header key length {hklen}", error_base + pos)
        if hklen > end - pos:
            raise InvalidRecordError(
                f"record {index}: header key length {hklen} exceeds the {end - pos} bytes left",
                error_base + pos,
            )
        # Kafka stores any key bytes (its Java reader turns invalid UTF-8 into U+FFFD): bytes
        # that are not UTF-8 decode as lone surrogates, which encode back to the same bytes
        # (docs/differences.md)
        hkey = bytes(data[pos : pos + hklen]).decode("utf-8", "surrogateescape")
        pos += hklen
        hvlen, pos = read_varint(data, pos, end, error_base)
        if hvlen < 0:
            hval = None
        else:
            if hvlen > end - pos:
                raise InvalidRecordError(
                    f"record {index}: header value length {hvlen} exceeds the {end - pos} bytes left",
                    error_base + pos,
                )
            hval = bytes(data[pos : pos + hvlen])
            pos += hvlen
        out.append((hkey, hval))
    return tuple(out), pos


def append_v2_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> int:
    """Append one v2 record (length-prefixed) to ``out``; returns the bytes appended."""
    ev = encode_varint
    small = _SMALL_VARINTS
    # lengths and deltas are almost always small: index the precomputed table directly
    ts = small[timestamp_delta + 64] if -64 <= timestamp_delta <= _SMALL_MAX else encode_varlong(timestamp_delta)
    od = small[offset_delta + 64] if -64 <= offset_delta <= _SMALL_MAX else ev(offset_delta)
    if key is None:
        kl = b"\x01"
        key = b""
    else:
        n = len(key)
        kl = small[n + 64] if n <= _SMALL_MAX else ev(n)
    if value is None:
        vl = b"\x01"
        value = b""
    else:
        n = len(value)
        vl = small[n + 64] if n <= _SMALL_MAX else ev(n)
    if headers:
        hb: bytes | bytearray = bytearray(ev(len(headers)))
        for hkey, hval in headers:
            hk = hkey.encode("utf-8", "surrogateescape")
            hb += ev(len(hk))
            hb += hk
            if hval is None:
                hb += b"\x01"
            else:
                hb += ev(len(hval))
                hb += hval
    else:
        hb = b"\x00"
    size = 1 + len(ts) + len(od) + len(kl) + len(key) + len(vl) + len(value) + len(hb)
    prefix = small[size + 64] if size <= _SMALL_MAX else ev(size)
    out += b"".join((prefix, b"\x00", ts, od, kl, key, vl, value, hb))
    return len(prefix) + size


# --------------------------------------------------------------------------------------------
# legacy (v0 / v1) messages


def parse_legacy_message(
    data: bytes, pos: int, end: int, error_base: int, check_crc: bool
) -> tuple[int, int, int, int, int, bytes | None, bytes | None]:
    """Parse one complete legacy entry ``data[pos:end]`` (12-byte log header included).

    Returns ``(offset, crc, magic, attributes, timestamp, key, value)``; ``timestamp`` is -1 for
    magic 0. ``end`` must be ``pos + 12 + size``. Raises on a CRC mismatch (if ``check_crc``) and
    on key/value lengths that do not fit the message exactly.
    """
    offset, size, crc, magic, attributes = LEGACY_HEADER.unpack_from(data, pos)
    if magic == 0:
        timestamp = -1
        p = pos + LEGACY_ENTRY_KEY_SIZE_OFFSET_V0
        overhead = RECORD_OVERHEAD_V0
    elif magic == 1:
        overhead = RECORD_OVERHEAD_V1
        p = pos + LEGACY_ENTRY_KEY_SIZE_OFFSET_V1
    else:
        raise CorruptRecordError(f"legacy message with magic {magic}", error_base + pos + LEGACY_ENTRY_MAGIC_OFFSET)
    if size < overhead or end - pos != LOG_OVERHEAD + size:
        raise CorruptRecordError(
            f"v{magic} message size {size} is smaller than the overhead {overhead}"
            if size < overhead
            else f"message size {size} does not match its {end - pos - LOG_OVERHEAD} bytes",
            error_base + pos + SIZE_OFFSET,
        )
    if magic == 1:
        timestamp = I64.unpack_from(data, pos + LEGACY_ENTRY_TIMESTAMP_OFFSET)[0]
    if check_crc:
        actual = crc32(data[pos + LEGACY_ENTRY_MAGIC_OFFSET : end])  # the CRC covers magic .. end
        if actual != crc:
            raise CorruptRecordError(
                f"message CRC mismatch: stored {crc:#010x}, computed {actual:#010x}",
                error_base + pos + LEGACY_ENTRY_CRC_OFFSET,
            )
    klen = I32.unpack_from(data, p)[0]
    p += LEGACY_KEY_SIZE_LENGTH
    if klen < 0:
        key = None
    else:
        if klen > end - p - LEGACY_VALUE_SIZE_LENGTH:
            raise InvalidRecordError(
                f"message key length {klen} exceeds the {end - p - LEGACY_VALUE_SIZE_LENGTH} bytes left",
                error_base + p - LEGACY_KEY_SIZE_LENGTH,
            )
        key = bytes(data[p : p + klen])
        p += klen
    vlen = I32.unpack_from(data, p)[0]
    p += LEGACY_VALUE_SIZE_LENGTH
    if vlen < 0:
        value = None
    else:
        if vlen > end - p:
            raise InvalidRecordError(
                f"message value length {vlen} exceeds the {end - p} bytes left",
                error_base + p - LEGACY_VALUE_SIZE_LENGTH,
            )
        value = bytes(data[p : p + vlen])
        p += vlen
    if p != end:
        raise InvalidRecordError(
            f"message declares {end - pos - LOG_OVERHEAD} bytes but its fields use {p - pos - LOG_OVERHEAD}",
            error_base + pos + SIZE_OFFSET,
        )
    return offset, crc, magic, attributes, timestamp, key, value


def append_legacy_message_reference(
    out: bytearray,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    magic: int,
    attributes: int,
) -> int:
    """Append one legacy entry (offset, size, CRC-32, message) to ``out``; returns bytes appended.

    ``timestamp`` is ignored for magic 0. The CRC is computed piecewise so nothing is copied
    twice and ``out`` never has a live memoryview export.
    """
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    if magic == 0:
        head = _V0_BODY.pack(0, attributes, klen)
        size = RECORD_OVERHEAD_V0
    else:
        head = _V1_BODY.pack(1, attributes, timestamp, klen)
        size = RECORD_OVERHEAD_V1
    if klen > 0:
        size += klen
    if vlen > 0:
        size += vlen
    vl = I32.pack(vlen)
    c = crc32(head)
    if klen > 0:
        c = crc32(key, c)  # type: ignore[arg-type]
    c = crc32(vl, c)
    if vlen > 0:
        c = crc32(value, c)  # type: ignore[arg-type]
    out += _LEGACY_PREFIX.pack(offset, size, c)
    out += head
    if klen > 0:
        out += key  # type: ignore[arg-type]
    out += vl
    if vlen > 0:
        out += value  # type: ignore[arg-type]
    return LOG_OVERHEAD + size


append_legacy_message = append_legacy_message_reference  # the name the reference is known by


# --------------------------------------------------------------------------------------------
# fused down-conversion: v2 records straight to legacy messages (the conversion hot path)

_NO_FILTER = -(1 << 65)  # below every reachable offset: keeps every record
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

def unwritable_record_error(offset: int, timestamp: int, position: int) -> InvalidRecordError:
    """The error for a record no legacy message can hold: Kafka's builder rejects a timestamp
    below -1; a timestamp or offset beyond int64 (Java would wrap it) cannot be written either."""
    if timestamp < -1:
        return InvalidRecordError(f"record at offset {offset} has invalid negative timestamp {timestamp}", position)
    if timestamp > _INT64_MAX:
        return InvalidRecordError(f"record at offset {offset} has a timestamp beyond int64: {timestamp}", position)
    return InvalidRecordError(f"record offset {offset} cannot be written as an int64 offset", position)


def _in_decompressed(exc: RecordsError, batch_position: int) -> RecordsError:
    """``exc`` (positioned in a decompressed payload) re-positioned at its batch, as
    ``DefaultBatch`` iteration reports errors in compressed batches."""
    return type(exc)(f"{exc.message} (byte {exc.position} of the decompressed records)", batch_position)


def convert_v2_records_to_legacy(
    out: bytearray,
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    first_offset: int | None,
    to_magic: int,
    attributes: int,
    relative_offsets: bool,
    error_base: int,
    batch_position: int,
    decompressed: bool,
) -> tuple[int, int, int]:
    """Parse the ``count`` v2 records of ``data`` and append one legacy message per kept record.

    This is :func:`iter_v2_records` followed by :func:`append_legacy_message` per record, in
    one loop over :func:`read_v2_record` (no :class:`Record` objects): the same errors, messages
    and positions (``error_base + index``; every record is parsed, kept or not, and the
    records must end exactly at ``len(data)``).

    - ``log_append_time``: the batch's MaxTimestamp for LogAppendTime batches (written as every
      message's timestamp), else ``None`` (BaseTimestamp + delta).
    - ``first_offset``: records with a lower offset are parsed but not written; ``None`` keeps
      every record (compressed batches are never trimmed).
    - ``to_magic`` 0 or 1; ``attributes`` of every written message (the timestamp-type bit).
    - ``relative_offsets``: write offsets relative to the first kept record (v1 wrapper inner
      messages); otherwise absolute.
    - ``batch_position``: position for errors about kept records (as the generic path reports
      them); ``decompressed``: ``data`` is a decompressed payload, so parse errors are reported
      at ``batch_position`` with their byte in the payload in the message (as
      ``DefaultBatch`` iteration does).

    Kept records are checked in order as Kafka's builder does: offsets must increase, a
    timestamp below -1 is refused, and values beyond int64 (which Java would wrap) are refused
    too, all as :class:`InvalidRecordError` at ``batch_position``.

    Returns ``(kept, last_kept_offset, max_timestamp)``: the number of messages written, the
    offset of the last one, and the maximum written timestamp (-1 if none is higher).
    """
    pack_body = _V1_BODY.pack if to_magic == 1 else _V0_BODY.pack
    lowest = _NO_FILTER if first_offset is None else first_offset
    kept = 0
    first_kept = last_kept = 0
    max_timestamp = -1
    pos = 0
    for index in range(count):
        try:
            (ts_delta, off_delta, key, value, _headers), pos = read_v2_record(
                data, pos, len(data), index, count, error_base
            )
        except RecordsError as exc:
            raise _in_decompressed(exc, batch_position) if decompressed else exc from None
        offset = base_offset + off_delta
        if offset < lowest:
            continue  # parsed (it must be well formed) but not written
        # Kafka's builder checks, in order, raised at the batch: offsets increase, timestamps
        # are -1 or more, and nothing leaves int64 (which Java would wrap).
        if kept and offset <= last_kept:
            raise InvalidRecordError(
                f"record offsets must increase within a batch: {offset} follows {last_kept}", batch_position
            )
        if kept == 0:
            first_kept = offset
        timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
        written_offset = offset - first_kept if relative_offsets else offset
        if not (-1 <= timestamp <= _INT64_MAX and _INT64_MIN <= offset <= _INT64_MAX
                and _INT64_MIN <= written_offset <= _INT64_MAX):
            raise unwritable_record_error(offset, timestamp, batch_position)
        max_timestamp = max(max_timestamp, timestamp)
        _append_message(out, pack_body, written_offset, timestamp, key, value, to_magic, attributes)
        kept += 1
        last_kept = offset
    try:
        check_records_end(pos, len(data), count, error_base)
    except RecordsError as exc:
        raise _in_decompressed(exc, batch_position) if decompressed else exc from None
    return kept, last_kept if kept else _NO_FILTER, max_timestamp


def _append_message(
    out: bytearray, pack_body: Callable[..., bytes], offset: int, timestamp: int, key: bytes | None,
    value: bytes | None, magic: int, attributes: int,
) -> None:
    """One legacy entry, as :func:`append_legacy_message_reference` writes it."""
    head = pack_body(1, attributes, timestamp, -1 if key is None else len(key)) if magic == 1 else pack_body(
        0, attributes, -1 if key is None else len(key))
    body = b"".join((head, key or b"", I32.pack(-1 if value is None else len(value)), value or b""))
    out += _LEGACY_PREFIX.pack(offset, len(body) + LEGACY_CRC_LENGTH, crc32(body))  # the size counts the CRC
    out += body
