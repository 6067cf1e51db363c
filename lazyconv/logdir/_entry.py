"""One top-level entry of a segment: what the log model reads of its header, its CRC, its offsets.

An *entry* is one top-level item of a ``.log`` file: a v2 batch or a legacy (v0/v1) message,
possibly a compressed wrapper. From its first bytes (:data:`HEADER_READ` of them, read with
``os.pread``) the log keeps its position, size, last offset, magic, codec, attributes and max
timestamp: enough to map a fetch offset to a byte range without decoding any record. The byte
layout is :mod:`lazyconv.records._format`'s.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from lazyconv.errors import CorruptRecordError
from lazyconv.records._codec import crc32c
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_MAGIC_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    OFFSET_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
)

__all__ = ["Entry", "HEADER_READ", "MIN_ENTRY_SIZE", "MAX_ENTRY_SIZE", "parse_entry_header",
           "producer_id", "entry_crc_ok", "assign_offsets"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

# Enough header bytes for every magic: v2 needs up to MaxTimestamp and the producer id after it
# (for the producer-id floor).
HEADER_READ = PRODUCER_ID_OFFSET + _INT64.size
MIN_ENTRY_SIZE = RECORD_OVERHEAD_V0  # the smallest legal size field (a v0 message, null key and value)
# A size field above this is corruption, not an entry still being written: no broker accepts a
# request larger than socket.request.max.bytes (100 MiB by default), so no batch is larger.
MAX_ENTRY_SIZE = 100 << 20
_LEGACY_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
_LEGACY_TIMESTAMP_AT = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET


@dataclass(frozen=True, slots=True)
class Entry:
    """One top-level log entry (v2 batch or legacy message) located in a segment file."""

    position: int
    size: int  # bytes on disk including the 12-byte log overhead
    first_offset: int  # base offset (v2) or the entry's offset (legacy; a wrapper's last offset)
    last_offset: int
    magic: int
    codec: int
    max_timestamp: int
    attributes: int = 0  # the full attributes (v2: transactional 0x10, control 0x20)


def parse_entry_header(header: bytes, position: int, file_size: int, path: Path,
                       active: bool = True) -> Entry | None:
    """The entry whose first bytes are ``header``; ``None`` for a partial entry at the end of the
    ``active`` segment. Raises :class:`CorruptRecordError` for a size field no broker writes, a
    partial entry at the end of a rolled segment, or an unknown magic."""
    if len(header) < LOG_OVERHEAD:
        if active:
            return None
        raise CorruptRecordError(f"{path}: {len(header)} bytes of an entry header at the end of "
                                 "a rolled segment", position)
    (offset,) = _INT64.unpack_from(header, OFFSET_OFFSET)
    (size,) = _INT32.unpack_from(header, SIZE_OFFSET)
    if size < MIN_ENTRY_SIZE:
        raise CorruptRecordError(f"{path}: entry size field {size} is below {MIN_ENTRY_SIZE}", position)
    if size > MAX_ENTRY_SIZE:
        raise CorruptRecordError(f"{path}: entry size field {size} is above {MAX_ENTRY_SIZE} "
                                 "(the largest request a broker accepts)", position)
    total = LOG_OVERHEAD + size
    if position + total > file_size:
        if active:
            return None
        raise CorruptRecordError(f"{path}: an entry of {total} bytes runs past the end of this "
                                 f"rolled segment ({file_size} bytes)", position)
    if len(header) <= _LEGACY_ATTRIBUTES_AT:
        return None
    magic = header[MAGIC_OFFSET]
    if magic == 2:
        if len(header) < HEADER_READ:
            raise CorruptRecordError(f"{path}: v2 batch shorter than its header", position)
        (attributes,) = _INT16.unpack_from(header, ATTRIBUTES_OFFSET)
        (last_delta,) = _INT32.unpack_from(header, LAST_OFFSET_DELTA_OFFSET)
        (max_ts,) = _INT64.unpack_from(header, MAX_TIMESTAMP_OFFSET)
        return Entry(position, total, offset, offset + last_delta, 2, attributes & COMPRESSION_CODEC_MASK,
                     max_ts, attributes)
    if magic in (0, 1):
        attributes = header[_LEGACY_ATTRIBUTES_AT]
        timestamp = -1
        if magic == 1 and len(header) >= _LEGACY_TIMESTAMP_AT + _INT64.size:
            (timestamp,) = _INT64.unpack_from(header, _LEGACY_TIMESTAMP_AT)
        return Entry(position, total, offset, offset, magic, attributes & COMPRESSION_CODEC_MASK, timestamp,
                     attributes)
    raise CorruptRecordError(f"{path}: unknown magic {magic}", position + MAGIC_OFFSET)


def producer_id(header: bytes) -> int:
    """The producer id of the v2 batch whose first :data:`HEADER_READ` bytes are ``header``."""
    (value,) = _INT64.unpack_from(header, PRODUCER_ID_OFFSET)
    return int(value)


def entry_crc_ok(data: memoryview | bytes, magic: int) -> bool:
    """Whether one complete log entry's stored CRC matches its bytes (CRC-32C of a v2 batch
    from its attributes on, CRC-32 of a v0/v1 message from its magic on)."""
    if magic == 2:
        (stored,) = _UINT32.unpack_from(data, CRC_OFFSET)
        return crc32c(data[ATTRIBUTES_OFFSET:]) == stored
    (stored,) = _UINT32.unpack_from(data, LOG_OVERHEAD + LEGACY_CRC_OFFSET)
    return zlib.crc32(data[LOG_OVERHEAD + LEGACY_MAGIC_OFFSET:]) & 0xFFFFFFFF == stored


def assign_offsets(entry: bytes, base_offset: int) -> bytes:
    """Return ``entry`` with its offset fields set for a first offset of ``base_offset``.

    A v2 batch or an uncompressed legacy message gets ``base_offset`` itself. A v1 compressed
    wrapper's offset is the absolute offset of its last inner message, whose inner offsets are
    relative to the first: it gets ``base_offset`` + the last relative offset.
    """
    rest = entry[SIZE_OFFSET:]
    if entry[MAGIC_OFFSET] == 2 or not entry[_LEGACY_ATTRIBUTES_AT] & COMPRESSION_CODEC_MASK:
        return _INT64.pack(base_offset) + rest
    from lazyconv.records import MemoryRecords

    (batch,) = list(MemoryRecords(entry).batches())
    inner = [record.offset for record in batch]
    last_relative = inner[-1] - inner[0] if inner else 0
    return _INT64.pack(base_offset + last_relative) + rest
