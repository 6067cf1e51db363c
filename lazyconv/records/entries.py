"""Splitting a record set into entries (docs/guide/records.md), shared by memory and file records."""

from __future__ import annotations

from collections.abc import Iterator

from lazyconv.errors import CorruptRecordError, UnknownMagicError
from lazyconv.records._codec import LOG_HEADER
from lazyconv.records.batch import DefaultBatch
from lazyconv.records.legacy import LegacyBatch
from lazyconv.records.types import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    ByteSource,
    RecordBatch,
)

__all__ = ["iter_batches", "MAX_ENTRY_SIZE"]

MAX_ENTRY_SIZE = 2**31 - 1  # the consumer's limit: none beyond int32


def iter_batches(
    source: ByteSource,
    start: int,
    end: int,
    max_decompressed_size: int,
    max_entry_size: int = MAX_ENTRY_SIZE,
) -> Iterator[RecordBatch]:
    """Yield the complete entries of ``[start, end)`` in order; a trailing partial entry is
    skipped silently, but a size below 14 or a magic outside 0..2 raises even in a partial one.

    Only the first (at most 61) bytes of each entry are read here; batch bodies are read when
    a batch is iterated or validated.
    """
    pos = start
    while True:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            return
        header = source.read(pos, min(remaining, RECORD_BATCH_OVERHEAD))
        size = LOG_HEADER.unpack_from(header, 0)[1]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"record size {size} is smaller than the minimum {RECORD_OVERHEAD_V0}", pos + 8
            )
        if size > max_entry_size:
            raise CorruptRecordError(
                f"record size {size} exceeds the maximum {max_entry_size}", pos + 8
            )
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            return
        magic = header[16]
        if magic > 2:  # a signed int8 above 127 reads as > 2 here too
            raise UnknownMagicError(f"unknown magic {magic if magic < 128 else magic - 256}", pos + 16)
        if remaining < LOG_OVERHEAD + size:
            return
        if magic == 2:
            yield DefaultBatch(source, pos, header, max_decompressed_size)
        else:
            yield LegacyBatch(source, pos, header, max_decompressed_size)
        pos += LOG_OVERHEAD + size
