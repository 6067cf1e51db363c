"""The per-record hot path: varints, v2 record parsing/encoding, legacy message parsing/encoding.

Everything that runs once per record lives here, as plain functions over ``bytes`` and offsets,
with precompiled :class:`struct.Struct` objects and no per-record objects beyond the yielded
:class:`~lazyconv.records.types.Record`. Down-conversion of v2 batches uses the fused
:func:`convert_v2_records_to_legacy` (v2 record bytes straight to legacy messages, byte- and
error-identical to :func:`iter_v2_records` + :func:`append_legacy_message`, which the generic
path still uses).

Positions in error messages are ``error_base + index`` so that callers can report byte
positions relative to their records (or file).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
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
from lazyconv.records.types import Record

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
    # Local aliases: attribute lookups per record are measurable in this loop.
    rv = read_varint
    rl = read_varlong
    new = tuple.__new__  # skips NamedTuple's Python-level __new__
    record_type = Record
    total = count if declared_count is None else declared_count
    for index in range(first_index, first_index + count):
        rec_start = pos
        try:
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                length, pos = rv(data, pos, end, error_base)
        except IndexError:
            if pos < end:
                raise MalformedVarintError(
                    f"record {index}: its length varint runs past the end of the records",
                    error_base + pos,
                ) from None
            raise InvalidRecordError(
                f"record {index} of {total} starts past the end of the records (premature EOF:"
                " the record count disagrees with the payload)",
                error_base + pos,
            ) from None
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise InvalidRecordError(
                f"record {index} declares a body of {length} bytes but {end - pos} remain",
                error_base + rec_start,
            )
        try:
            pos += 1  # attributes: unused
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= rec_end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = rl(data, pos, rec_end, error_base)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= rec_end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                off_delta, pos = rv(data, pos, rec_end, error_base)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= rec_end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                klen = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                klen, pos = rv(data, pos, rec_end, error_base)
            if klen < 0:
                key = None
            else:
                if klen > rec_end - pos:
                    raise InvalidRecordError(
                        f"record {index}: key length {klen} exceeds the {rec_end - pos} bytes left",
                        error_base + pos,
                    )
                key = data[pos : pos + klen]
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= rec_end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                vlen, pos = rv(data, pos, rec_end, error_base)
            if vlen < 0:
                value = None
            else:
                if vlen > rec_end - pos:
                    raise InvalidRecordError(
                        f"record {index}: value length {vlen} exceeds the {rec_end - pos} bytes left",
                        error_base + pos,
                    )
                value = data[pos : pos + vlen]
                pos += vlen
            b = data[pos]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80 and pos + 2 <= rec_end:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                hcount = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                hcount, pos = rv(data, pos, rec_end, error_base)
            if hcount == 0:
                headers: tuple = ()
            else:
                headers, pos = _read_headers(data, pos, rec_end, hcount, index, error_base)
        except IndexError:
            raise MalformedVarintError(
                f"record {index}: a varint runs past the end of the record", error_base + pos
            ) from None
        if pos != rec_end:
            raise InvalidRecordError(
                f"record {index}: read {pos - rec_start} bytes but the record declares "
                f"{rec_end - rec_start}",
                error_base + rec_start,
            )
        yield new(
            record_type,
            (
                base_offset + off_delta,
                base_timestamp + ts_delta if timestamp_override is None else timestamp_override,
                key,
                value,
                headers,
            ),
        )
    if require_exact_end and pos != end:
        raise InvalidRecordError(
            f"{end - pos} bytes still remain after the {total} records the batch declares",
            error_base + pos,
        )


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
        try:
            hkey = bytes(data[pos : pos + hklen]).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError(f"record {index}: header key is not UTF-8", error_base + pos) from None
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
            hk = hkey.encode("utf-8")
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

# Varint fast paths without shifts or xors (generic, slow int operations in CPython): a 1-byte
# zig-zag varint b decodes to _ZIGZAG_LOW[b]; a 2-byte one (b >= 0x80, then c < 0x80) to
# _ZIGZAG_LOW[b] + _ZIGZAG_HIGH[b] * c, because the parity of the unsigned value (the sign) is
# that of b.
_ZIGZAG_LOW = [
    (b >> 1) ^ -(b & 1) if b < 0x80 else ((b & 0x7F) >> 1) ^ -(b & 1) for b in range(256)
]
_ZIGZAG_HIGH = [0 if b < 0x80 else (-64 if b & 1 else 64) for b in range(256)]


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

    This is :func:`iter_v2_records` followed by :func:`append_legacy_message` per record, fused
    into one loop: no :class:`Record` objects, headers validated but not decoded, one body
    built and CRC'd per message. Parsing is exactly as strict as :func:`iter_v2_records` (same
    errors, messages and positions, ``error_base + index``; every record is parsed, kept or
    not, and the records must end exactly at ``len(data)``).

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
    end = len(data)
    view = memoryview(data)
    pos = 0
    zz = _ZIGZAG_LOW
    zz_high = _ZIGZAG_HIGH
    int64_max = _INT64_MAX
    crc = crc32
    rv = read_varint
    rl = read_varlong
    pack_i32 = I32.pack
    pack_prefix = _LEGACY_PREFIX.pack
    v1 = to_magic == 1
    pack_body = _V1_BODY.pack if v1 else _V0_BODY.pack
    lowest = _NO_FILTER if first_offset is None else first_offset
    filtered = 0
    rel = 0
    unset = _NO_FILTER
    last_kept = unset  # below every offset: the first kept record needs no predecessor
    last_vlen: int | None = None  # values often have one size: their length field is packed once
    vl = b""
    max_timestamp = -1
    # offset deltas are int32: offsets can leave the int64 range only near its ends
    check_offsets = not (_INT64_MIN + (1 << 32) <= base_offset <= _INT64_MAX - (1 << 32))
    for index in range(count):
        rec_start = pos
        # Fast path: 1-2 byte varints, no headers, and only the checks needed not to misread;
        # the record is accepted only if it ends exactly where its length says. Anything else
        # (including every malformed record) is parsed again strictly, which raises the same
        # error iter_v2_records would.
        try:
            b = data[pos]
            if b < 0x80:
                rec_end = pos + 1 + zz[b]
                pos += 2  # the length and the unused attributes byte
            elif (c := data[pos + 1]) < 0x80:
                rec_end = pos + 2 + zz[b] + zz_high[b] * c
                pos += 3
            else:
                length, pos = rv(data, pos, end, error_base)
                rec_end = pos + length
                pos += 1
            b = data[pos]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                ts_delta = zz[b] + zz_high[b] * c
                pos += 2
            else:
                ts_delta, pos = rl(data, pos, rec_end, error_base)
            b = data[pos]
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                off_delta = zz[b] + zz_high[b] * c
                pos += 2
            else:
                off_delta, pos = rv(data, pos, rec_end, error_base)
            b = data[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                klen = zz[b] + zz_high[b] * c
                pos += 2
            else:
                klen, pos = rv(data, pos, rec_end, error_base)
            key_start = pos
            if klen > 0:
                pos += klen
            elif klen < 0:
                klen = -1
            key = data[key_start:pos]
            b = data[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                vlen = zz[b] + zz_high[b] * c
                pos += 2
            else:
                vlen, pos = rv(data, pos, rec_end, error_base)
            value_start = pos
            if vlen > 0:
                pos += vlen
            elif vlen < 0:
                vlen = -1
            value = view[value_start:pos]  # a view: the value is copied once, into the body
            if data[pos] == 0:  # no headers
                pos += 1
            else:
                pos = None  # type: ignore[assignment]  # headers: the strict parser takes over
        except (IndexError, RecordsError):
            pos = None  # type: ignore[assignment]
            rec_end = -1  # may not be set yet; None never equals it: the strict parser takes over
        if pos != rec_end:  # positions only grow: equal means every byte read was in the record
            # The strict reader parses this record again: it raises the error the generic path
            # would, or returns the record (headers, long varints) for the writer below.
            try:
                record = next(iter_v2_records(
                    data, rec_start, end, 1, 0, 0, None, error_base, False, index, count
                ))
            except RecordsError as exc:
                if decompressed:
                    raise _in_decompressed(exc, batch_position) from None
                raise
            off_delta, ts_delta, parsed_key, parsed_value, _ = record
            klen = -1 if parsed_key is None else len(parsed_key)
            vlen = -1 if parsed_value is None else len(parsed_value)
            key = parsed_key or b""
            value = memoryview(parsed_value or b"")
            length, pos = read_varint(data, rec_start, end, error_base)
            pos += length
        offset = base_offset + off_delta
        if offset < lowest:
            filtered += 1
            continue
        # Checks in the generic path's order, raised at once (records are converted in order).
        if offset <= last_kept:
            raise InvalidRecordError(
                f"record offsets must increase within a batch: {offset} follows {last_kept}",
                batch_position,
            )
        timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
        if relative_offsets and last_kept == unset:
            rel = offset
        last_kept = offset
        if timestamp > max_timestamp:
            if timestamp > int64_max:
                raise unwritable_record_error(offset, timestamp, batch_position)
            max_timestamp = timestamp
        elif timestamp < -1:
            raise unwritable_record_error(offset, timestamp, batch_position)
        if check_offsets and not (_INT64_MIN <= offset <= _INT64_MAX and _INT64_MIN <= offset - rel <= _INT64_MAX):
            raise unwritable_record_error(offset, timestamp, batch_position)
        if vlen != last_vlen:
            vl = pack_i32(vlen)
            last_vlen = vlen
        # One body per message: its CRC-32 is one call over one contiguous object.
        if v1:
            body = (
                pack_body(1, attributes, timestamp, klen)
                + key
                + vl
                + value
            )
        else:
            body = pack_body(0, attributes, klen) + key + vl + value
        out += pack_prefix(offset - rel, len(body) + 4, crc(body))  # the size counts the CRC
        out += body
    if pos != end:
        remaining = InvalidRecordError(
            f"{end - pos} bytes still remain after the {count} records the batch declares",
            error_base + pos,
        )
        raise _in_decompressed(remaining, batch_position) if decompressed else remaining
    return count - filtered, last_kept, max_timestamp
