"""Record digests: a 64-bit checksum of each record as a consumer sees it, summed over records.

The validation job (``lazyconv validate``) and the fixtures' manifests summarise a set of
records by the sum, modulo 2**64, of one digest per record. A record's digest is
``(CRC-32C << 32) | CRC-32`` of its canonical encoding::

    key length int32 (-1 = null) | key | value length int32 (-1 = null) | value
    | offset int64 | timestamp int64 | header count int32
    | per header: key length int32 | key (its bytes in the log) | value length int32 (-1 = null) | value

Why CRCs: the compiled kernel computes both at memory speed over the record's own bytes (no
copy into a canonical buffer), and the pure-Python reference gets them from ``zlib`` and the
``crc32c`` package. The sum is order-independent (ranges and segments are digested on different
Spark tasks and added up), and offsets are in every digest, so a missing, duplicated, moved or
altered record changes it. It detects accidents, not adversaries. Timestamp and headers come
last so that one pass over key and value gives the three views a check needs: the consumer's
(``full``), without headers (what a magic 1 consumer receives) and with timestamp -1 and no
headers (what a magic 0 consumer receives).

Functions here digest wire bytes in one call (compiled kernel, GIL released) or, with
``LAZYCONV_NO_EXTENSIONS=1``, by the reference below; both give the same figures and decline
(``None`` / a stop) on the same inputs. They never raise on bad data: whatever they decline, the
records layer's reader decodes and reports.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

from crc32c import crc32c as _crc32c

from lazyconv.errors import RecordsError
from lazyconv.records import _impl
from lazyconv.records._codec import iter_v2_records, parse_legacy_message
from lazyconv.records._format import (
    COMPRESSION_CODEC_MASK,
    LEGACY_ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
)

__all__ = [
    "MASK64",
    "V2Digest",
    "LegacyRunDigest",
    "DIGEST_END",
    "DIGEST_PARTIAL",
    "DIGEST_DECLINED",
    "record_digest",
    "digest_v2_records",
    "digest_legacy_run",
    "digest_delivered",
    "WrapperDecompress",
]

MASK64 = (1 << 64) - 1
DIGEST_END = 0  # the data ends exactly after the last digested entry
DIGEST_PARTIAL = 1  # a trailing incomplete entry
DIGEST_DECLINED = 2  # an entry left to the reader (compressed, magic 2, damaged)

_I32 = struct.Struct(">i")
_NULL = _I32.pack(-1)
_TAIL = struct.Struct(">qqi")
_SIZE = struct.Struct(">i")
_ATTRIBUTES = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
_TIMESTAMP_TYPE = TIMESTAMP_TYPE_MASK
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class V2Digest(NamedTuple):
    """What the records of one v2 batch (or decompressed payload) digest to: offsets of the
    first and last record, whether offsets strictly increase, the max of base timestamp + delta
    (before a LogAppendTime override), whether any record has headers, and the sums of the
    ``full``, ``no_headers`` and ``no_timestamp`` digests."""

    first_offset: int
    last_offset: int
    offsets_increasing: bool
    max_raw_timestamp: int
    has_headers: bool
    full: int
    no_headers: int
    no_timestamp: int


class LegacyRunDigest(NamedTuple):
    """What :func:`digest_legacy_run` did: ``consumed`` bytes of ``entries`` whole plain
    messages, the offset of the last one (-1 if none), the number (``records``) and digest
    ``sum`` (no headers) of those at or above ``min_offset``, and why it stopped."""

    consumed: int
    entries: int
    last_offset: int
    records: int
    sum: int
    stop: int


def _crc_pair(parts: Sequence[bytes | memoryview]) -> tuple[int, int]:
    c32 = c32c = 0
    for part in parts:
        c32 = zlib.crc32(part, c32)
        c32c = _crc32c(part, c32c)
    return c32, c32c


def _key_value(key: bytes | memoryview | None, value: bytes | memoryview | None) -> list[bytes | memoryview]:
    parts: list[bytes | memoryview] = []
    for data in (key, value):
        if data is None:
            parts.append(_NULL)
        else:
            parts.append(_I32.pack(len(data)))
            parts.append(data)
    return parts


def record_digest(
    offset: int,
    timestamp: int,
    key: bytes | memoryview | None,
    value: bytes | memoryview | None,
    headers: Sequence[tuple[str, bytes | memoryview | None]] = (),
) -> int:
    """The digest of one record (the reference; see the module docstring)."""
    parts = _key_value(key, value)
    parts.append(_TAIL.pack(offset, timestamp, len(headers)))
    for header_key, header_value in headers:
        encoded = header_key.encode("utf-8", "surrogateescape")  # the key's bytes in the log
        parts.append(_I32.pack(len(encoded)))
        parts.append(encoded)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts.append(_I32.pack(len(header_value)))
            parts.append(header_value)
    c32, c32c = _crc_pair(parts)
    return (c32c << 32) | c32


def digest_v2_records(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None,
) -> V2Digest | None:
    """Digest the ``count`` (>= 1) v2 records that fill ``data`` exactly (the records of an
    uncompressed batch, or a decompressed payload). ``timestamp_override`` is a LogAppendTime
    batch's max timestamp. ``None`` when the records are malformed or an offset or timestamp
    leaves int64: decode them with the batch to get the error."""
    native = _impl.digest_v2_records  # None: the reference below is the implementation in use
    if native is not None:
        result = native(data, count, base_offset, base_timestamp, timestamp_override)
        return None if result is None else V2Digest(*result)
    return digest_v2_records_reference(data, count, base_offset, base_timestamp, timestamp_override)


def digest_v2_records_reference(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None,
) -> V2Digest | None:
    """:func:`digest_v2_records` by the records layer's decoder and :func:`record_digest`."""
    if count < 1 or count > len(data):
        return None
    raw = bytes(data)
    try:
        records = list(iter_v2_records(raw, 0, len(raw), count, base_offset, base_timestamp, None, 0))
    except RecordsError:
        return None
    full = no_headers = no_timestamp = 0
    increasing = True
    previous = None
    has_headers = False
    for record in records:
        if not _INT64_MIN <= record.offset <= _INT64_MAX or not _INT64_MIN <= record.timestamp <= _INT64_MAX:
            return None
        if previous is not None and record.offset <= previous:
            increasing = False
        previous = record.offset
        timestamp = record.timestamp if timestamp_override is None else timestamp_override
        plain = record_digest(record.offset, timestamp, record.key, record.value)
        no_timestamp += record_digest(record.offset, -1, record.key, record.value)
        no_headers += plain
        if record.headers:
            has_headers = True
            full += record_digest(record.offset, timestamp, record.key, record.value, record.headers)
        else:
            full += plain
    return V2Digest(
        records[0].offset,
        records[-1].offset,
        increasing,
        max(r.timestamp for r in records),
        has_headers,
        full & MASK64,
        no_headers & MASK64,
        no_timestamp & MASK64,
    )


def digest_legacy_run(
    data: bytes | bytearray | memoryview,
    min_offset: int,
    shift: int = 0,
    timestamp_override: int | None = None,
) -> LegacyRunDigest:
    """Digest the plain (uncompressed) magic 0/1 messages at the start of ``data``, each one's
    CRC-32 and structure checked as the reader checks them; stop at the end, at a trailing
    partial entry, or before an entry left to the reader (compressed, magic 2, damaged, an
    offset beyond int64).

    For the inner messages of a v1 wrapper, ``shift`` is added to every offset and
    ``timestamp_override`` (a LogAppendTime wrapper's timestamp) replaces magic 1 timestamps.
    ``min_offset``, ``shift`` and ``timestamp_override`` must be int64 values."""
    native = _impl.digest_legacy_run  # None: the reference below is the implementation in use
    if native is not None:
        return LegacyRunDigest(*native(data, min_offset, shift, timestamp_override))
    return digest_legacy_run_reference(data, min_offset, shift, timestamp_override)


def digest_legacy_run_reference(
    data: bytes | bytearray | memoryview,
    min_offset: int,
    shift: int = 0,
    timestamp_override: int | None = None,
) -> LegacyRunDigest:
    """:func:`digest_legacy_run` by the records layer's message parser and :func:`record_digest`."""
    raw = bytes(data)
    n = len(raw)
    pos = entries = count = total = 0
    last = -1
    stop = DIGEST_END
    while pos < n:
        if n - pos < _ATTRIBUTES:  # up to the magic byte
            stop = DIGEST_PARTIAL
            break
        size_field = _SIZE.unpack_from(raw, pos + SIZE_OFFSET)[0]
        if size_field < RECORD_OVERHEAD_V0 or raw[pos + MAGIC_OFFSET] > 1:
            stop = DIGEST_DECLINED
            break
        end = pos + LOG_OVERHEAD + size_field
        if end > n:
            stop = DIGEST_PARTIAL
            break
        if raw[pos + _ATTRIBUTES] & COMPRESSION_CODEC_MASK:
            stop = DIGEST_DECLINED
            break
        try:
            offset, _crc, magic, _attributes, timestamp, key, value = parse_legacy_message(raw, pos, end, 0, True)
        except RecordsError:
            stop = DIGEST_DECLINED
            break
        offset += shift
        if offset > _INT64_MAX or offset < _INT64_MIN:
            stop = DIGEST_DECLINED
            break
        if magic == 1 and timestamp_override is not None:
            timestamp = timestamp_override
        if offset >= min_offset:
            count += 1
            total += record_digest(offset, timestamp, key, value)
        last = offset
        entries += 1
        pos = end
    return LegacyRunDigest(pos, entries, last, count, total & MASK64, stop)


WrapperDecompress = Callable[[int, int, bytes], "bytes | None"]


def digest_delivered(
    data: bytes | bytearray | memoryview, min_offset: int, decompress: WrapperDecompress
) -> LegacyRunDigest:
    """:func:`digest_legacy_run` over what a legacy consumer receives: plain magic 0/1 messages
    and compressed wrappers (gzip, snappy, lz4). A wrapper's CRC-32 and structure are checked,
    its value decompressed by ``decompress(codec, magic, value)`` (``None``: leave it to the
    reader) and its inner messages digested with absolute offsets (relative to the last one
    in a magic 1 wrapper with a non-zero offset; a LogAppendTime magic 1 wrapper's timestamp
    for each); ``entries`` counts entries, ``last_offset`` is the last entry's (a wrapper's own).
    Anything else stops the walk, as in :func:`digest_legacy_run`."""
    native = _impl.digest_delivered  # None: the reference below is the implementation in use
    if native is not None:
        return LegacyRunDigest(*native(data, min_offset, decompress))
    return digest_delivered_reference(data, min_offset, decompress)


def digest_delivered_reference(
    data: bytes | bytearray | memoryview, min_offset: int, decompress: WrapperDecompress
) -> LegacyRunDigest:
    """:func:`digest_delivered` by the records layer's parser and :func:`record_digest`."""
    raw = bytes(data)
    n = len(raw)
    pos = entries = count = total = 0
    last = -1
    stop = DIGEST_END
    while pos < n:
        plain = digest_legacy_run_reference(raw[pos:], min_offset)
        if plain.entries:
            entries += plain.entries
            count += plain.records
            total += plain.sum
            last = plain.last_offset
        pos += plain.consumed
        stop = plain.stop
        if stop != DIGEST_DECLINED:
            break
        size_field = _SIZE.unpack_from(raw, pos + SIZE_OFFSET)[0]
        if size_field < RECORD_OVERHEAD_V0 or size_field > n - pos - LOG_OVERHEAD:
            break
        end = pos + LOG_OVERHEAD + size_field
        wrapper = _digest_wrapper_reference(raw[pos:end], min_offset, decompress)
        if wrapper is None:
            break
        last, wrapper_count, wrapper_sum = wrapper
        entries += 1
        count += wrapper_count
        total += wrapper_sum
        pos = end
        stop = DIGEST_END
    return LegacyRunDigest(pos, entries, last, count, total & MASK64, stop)


def _digest_wrapper_reference(entry: bytes, min_offset: int,
                              decompress: WrapperDecompress) -> tuple[int, int, int] | None:
    """``(offset, count, digest sum)`` of one compressed legacy wrapper, or ``None`` (declined)."""
    magic = entry[MAGIC_OFFSET]
    attributes = entry[_ATTRIBUTES]
    codec = attributes & COMPRESSION_CODEC_MASK
    if magic > 1 or not 0 < codec < 4:
        return None
    try:
        offset, _crc, magic, attributes, timestamp, _key, value = parse_legacy_message(
            entry, 0, len(entry), 0, True)
    except RecordsError:
        return None
    if value is None:
        return None
    inner = decompress(codec, magic, value)
    if inner is None:
        return None
    if not isinstance(inner, bytes):
        raise TypeError("digest_delivered: decompress must return bytes or None")
    shift = 0
    if magic == 1 and offset != 0:  # inner offsets are relative to the last one
        probe = digest_legacy_run_reference(inner, _INT64_MIN)
        if probe.stop != DIGEST_END or not probe.entries or offset < probe.last_offset:
            return None
        shift = offset - probe.last_offset
        if shift > _INT64_MAX:
            return None
    override = timestamp if magic == 1 and attributes & _TIMESTAMP_TYPE else None
    run = digest_legacy_run_reference(inner, min_offset, shift, override)
    if run.stop != DIGEST_END or not run.entries:
        return None
    return offset, run.records, run.sum
