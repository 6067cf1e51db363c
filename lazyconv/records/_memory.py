"""Records held in memory: any bytes-like object, split lazily into batches."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING

from lazyconv._buffers import byte_view
from lazyconv._send import BytesSend
from lazyconv.errors import ConfigurationError, TruncatedDataError
from lazyconv.records._batch import plain_v2_records
from lazyconv.records._compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from lazyconv.records._entries import BatchIterator
from lazyconv.records._types import Record, RecordBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["MemoryRecords"]


def check_max_decompressed_size(max_decompressed_size: object) -> None:
    """Raise :class:`ConfigurationError` unless the bound is a positive int."""
    if not isinstance(max_decompressed_size, int) or max_decompressed_size <= 0:
        raise ConfigurationError(f"max_decompressed_size must be a positive int, got {max_decompressed_size!r:.40}")


def check_slice(position: object, size: object) -> None:
    """Raise :class:`ConfigurationError` unless a slice's position and size are ints >= 0."""
    if not isinstance(position, int) or not isinstance(size, int) or position < 0 or size < 0:
        raise ConfigurationError(f"slice needs position >= 0 and size >= 0, got {position!r:.40}, {size!r:.40}")


class _MemorySource:
    __slots__ = ("view", "cache_key")

    def __init__(self, view: memoryview, cache_key: object = None) -> None:
        self.view = view
        self.cache_key = cache_key

    def read(self, position: int, size: int) -> memoryview:
        if position < 0 or position + size > len(self.view):
            raise TruncatedDataError(f"need {size} bytes but the records end first", position)
        return self.view[position : position + size]


class MemoryRecords:
    """A record set in memory (a fetch response's records, a built batch, a file's bytes).

    ``buffer`` is any C-contiguous bytes-like object (see :func:`~lazyconv._buffers.byte_view`). Nothing is copied
    on construction; :meth:`batches` walks the entries lazily (Kafka's
    splitting rules, docs/guide/records.md). Byte positions in errors are relative to this buffer.
    ``max_decompressed_size`` bounds every decompressed batch payload.

    ``cache_key`` (hashable, default ``None``: not cached) names where these bytes come from,
    such that the same key and position mean the same records, e.g. (cluster, topic, partition,
    fetch offset) for a fetch response's records: lazy down-conversions of them are then kept
    by the process's :data:`~lazyconv.conversion._cache.conversion_cache` and reused for other
    buffers with the same key, only where their bytes are identical.
    """

    __slots__ = ("_view", "_source", "max_decompressed_size")

    def __init__(
        self,
        buffer: Buffer,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        *,
        cache_key: object = None,
    ) -> None:
        view = byte_view(buffer)
        check_max_decompressed_size(max_decompressed_size)
        try:
            hash(cache_key)
        except TypeError:
            raise ConfigurationError(f"cache_key must be hashable, got {type(cache_key).__name__}") from None
        self._view = view
        self._source = _MemorySource(view, cache_key)
        self.max_decompressed_size = max_decompressed_size

    @property
    def buffer(self) -> memoryview:
        """The records' bytes (a read-only view is not enforced: do not modify)."""
        return self._view

    @property
    def size_in_bytes(self) -> int:
        return len(self._view)

    def batches(self) -> Iterator[RecordBatch]:
        """Complete batches in order; a trailing partial batch is skipped silently."""
        return BatchIterator(self._source, 0, len(self._view), self.max_decompressed_size)

    def __iter__(self) -> Iterator[RecordBatch]:
        return self.batches()

    def records(self) -> Iterator[Record]:
        """Every record of every batch, in order (control records included)."""
        # plain v2 data with the kernel: one C decoder per batch, no batch objects; else the
        # batches' own iterators chained (no generator frame per record either way)
        fast = plain_v2_records(self._source, self._view, self.max_decompressed_size)
        return fast if fast is not None else chain.from_iterable(self.batches())

    def valid_bytes(self) -> int:
        """Bytes covered by complete batches (the size without a trailing partial batch)."""
        total = 0
        for batch in self.batches():
            total = batch.position + batch.size_in_bytes
        return total

    def slice(self, position: int, size: int) -> MemoryRecords:
        """The records ``[position, position + size)`` (clamped to the end), sharing memory."""
        check_slice(position, size)
        if position > len(self._view):
            raise ConfigurationError(f"slice position {position} is past the end ({len(self._view)})")
        # positions move in a slice: its conversions are not kept under this key
        return MemoryRecords(self._view[position : position + size], self.max_decompressed_size)

    def to_send(self) -> BytesSend:
        """A :class:`~lazyconv._send.BytesSend` of exactly these bytes."""
        return BytesSend(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def __repr__(self) -> str:
        return f"MemoryRecords(size_in_bytes={len(self._view)})"
