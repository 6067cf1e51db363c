"""Splitting a record set into entries (docs/guide/records.md), shared by memory and file records."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from lazyconv.errors import CorruptRecordError, TruncatedDataError, UnknownMagicError
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._format import (
    ATTRIBUTES_LOW_BYTE_OFFSET,
    COMPRESSION_CODEC_MASK,
    LEGACY_ENTRY_ATTRIBUTES_OFFSET,
    LOG_HEADER,
    MAGIC_OFFSET,
    SIZE_OFFSET,
)
from lazyconv.records._legacy import LegacyBatch
from lazyconv.records._types import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    ByteSource,
    RecordBatch,
)

__all__ = ["iter_batches", "BatchIterator", "ReadAheadSource", "read_ahead", "MAX_ENTRY_SIZE",
           "EntriesSummary", "summarize_entries"]

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
                f"record size {size} is smaller than the minimum {RECORD_OVERHEAD_V0}", pos + SIZE_OFFSET
            )
        if size > max_entry_size:
            raise CorruptRecordError(
                f"record size {size} exceeds the maximum {max_entry_size}", pos + SIZE_OFFSET
            )
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            return
        magic = header[MAGIC_OFFSET]  # where both formats keep it
        if magic > 2:  # a signed int8 above 127 reads as > 2 here too
            raise UnknownMagicError(f"unknown magic {magic if magic < 128 else magic - 256}", pos + MAGIC_OFFSET)
        if remaining < LOG_OVERHEAD + size:
            return
        if magic == 2:
            yield DefaultBatch(source, pos, header, max_decompressed_size)
        else:
            yield LegacyBatch(source, pos, header, max_decompressed_size)
        pos += LOG_OVERHEAD + size


class BatchIterator(Iterator[RecordBatch]):
    """The batches of ``[start, end)`` of a source, as :func:`iter_batches` yields them, plus
    what a consumer of the *whole* range needs to work on its bytes at once: ``source``,
    ``start``, ``end``, ``max_decompressed_size`` and :attr:`untouched` (no batch taken yet).
    ``down_convert`` uses it to convert memory-backed records in one kernel call."""

    __slots__ = ("source", "start", "end", "max_decompressed_size", "_batches")

    def __init__(self, source: ByteSource, start: int, end: int, max_decompressed_size: int) -> None:
        self.source = source
        self.start = start
        self.end = end
        self.max_decompressed_size = max_decompressed_size
        self._batches: Iterator[RecordBatch] | None = None

    @property
    def untouched(self) -> bool:
        """``True`` until the first batch is taken."""
        return self._batches is None

    @property
    def memory_backed(self) -> bool:
        """``True`` when the source is bytes in memory (reads are views: nothing to read ahead)."""
        return isinstance(getattr(self.source, "view", None), memoryview)

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> RecordBatch:
        if self._batches is None:
            self._batches = iter_batches(self.source, self.start, self.end, self.max_decompressed_size)
        return next(self._batches)


class ReadAheadSource:
    """A source that serves small reads from a window of ``window_size`` bytes read at once
    (one positioned read instead of one per batch header); reads it cannot serve from a window
    inside ``[.., end)`` go to the underlying source unchanged (same bytes, same errors)."""

    __slots__ = ("source", "end", "window_size", "window", "window_start")

    def __init__(self, source: ByteSource, end: int, window_size: int) -> None:
        self.source = source
        self.end = end
        self.window_size = window_size
        self.window = memoryview(b"")
        self.window_start = 0

    def read(self, position: int, size: int) -> bytes | memoryview:
        offset = position - self.window_start
        if 0 <= offset and offset + size <= len(self.window):
            return self.window[offset : offset + size]
        load = min(self.window_size, self.end - position)
        if 0 <= size <= load:
            try:
                data = self.source.read(position, load)
            except TruncatedDataError:
                # the file is shorter than when the range was taken: what is asked may still be
                # there, as it would be without a window
                return self.source.read(position, size)
            self.window = memoryview(data)
            self.window_start = position
            return self.window[:size]
        return self.source.read(position, size)

    @property
    def cache_key(self) -> object:
        """The underlying source's ``cache_key`` (``None`` when it has none): a window reads the
        same file or buffer."""
        return getattr(self.source, "cache_key", None)

    def release(self) -> None:
        """Drop the window (its memory), e.g. while a slow reader takes what was made of it."""
        self.window = memoryview(b"")
        self.window_start = 0


def read_ahead(batches: Iterator[RecordBatch], window_size: int) -> Iterator[RecordBatch]:
    """``batches`` (an untouched :class:`BatchIterator` over a file) reading its bytes through a
    window of ``window_size`` bytes: the same batches and errors with a few large reads instead
    of one small read per batch header. Memory-backed or already started iterators are
    returned as they are."""
    if not isinstance(batches, BatchIterator) or not batches.untouched:
        return batches
    if batches.memory_backed:
        return batches
    source = ReadAheadSource(batches.source, batches.end, window_size)
    return BatchIterator(source, batches.start, batches.end, batches.max_decompressed_size)


_SIZE = struct.Struct(">i")


class EntriesSummary(NamedTuple):
    """What the headers of a record set's complete entries say (:func:`summarize_entries`)."""

    #: complete entries (batches or legacy wrappers and messages)
    entries: int
    #: the first entry's compression codec (0: none, also when there is no entry)
    first_codec: int
    #: the codecs of every complete entry, as a mask (bit ``1 << codec``; 0 when there is none)
    codecs: int
    #: whether any complete entry is a legacy (magic 0 or 1) message or wrapper
    legacy: bool

    @property
    def plain_v2(self) -> bool:
        """Every complete entry is a v2 batch without compression (also true when there is none)."""
        return not self.legacy and self.codecs in (0, 1)


def summarize_entries(records: bytes | bytearray | memoryview) -> EntriesSummary:
    """The complete entries at the start of ``records`` read from their headers alone (one
    size field, magic and attributes byte per entry, never a record): their count, the first
    one's codec, every codec seen, whether any is legacy. A partial last entry, or a size that
    cannot be one, ends the walk; nothing is validated (a CRC is not read)."""
    view = memoryview(records)
    end = len(view)
    unpack = _SIZE.unpack_from
    entries = position = first_codec = codecs = 0
    legacy = False
    while position + HEADER_SIZE_UP_TO_MAGIC <= end:
        length = unpack(view, position + SIZE_OFFSET)[0]
        nxt = position + LOG_OVERHEAD + length
        if length <= 0 or nxt > end:
            break
        if view[position + MAGIC_OFFSET] >= 2:
            if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
                break  # too short for a v2 batch: not an entry a reader would take
            codec = view[position + ATTRIBUTES_LOW_BYTE_OFFSET] & COMPRESSION_CODEC_MASK
        else:
            if length < RECORD_OVERHEAD_V0:
                break  # too short for a legacy message
            codec = view[position + LEGACY_ENTRY_ATTRIBUTES_OFFSET] & COMPRESSION_CODEC_MASK
            legacy = True
        if not entries:
            first_codec = codec
        codecs |= 1 << codec
        entries += 1
        position = nxt
    return EntriesSummary(entries, first_codec, codecs, legacy)
