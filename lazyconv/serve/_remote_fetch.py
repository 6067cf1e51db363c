"""A planned Fetch response described for a sender process (:mod:`lazyconv.net._sender_pool`).

The serving process plans a fetch as always (:mod:`lazyconv.serve._fetch_handler`): it finds
every partition's bytes, converts each converting partition's first batch to commit its size,
decides every error and encodes the response. :func:`fetch_send_job` then describes the result
by value: the encoded metadata as bytes, and in place of each partition's records (those of
size 0 have none) the segment file, byte range and, where they are converted, the committed state
(:class:`~lazyconv.conversion._lazy_records.CommittedState`). The sender rebuilds the records over the same bytes
(:class:`FetchSendJob`), checks that each has the size the server committed to, and converts and
writes them between the server's bytes; a segment it cannot open means NOT_STARTED, and the
serving process writes the response itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from lazyconv._send import Send
from lazyconv.conversion._cache import ConversionCache, conversion_cache
from lazyconv.conversion._lazy_records import CommittedState, LazyDownConvertedRecords
from lazyconv.errors import LocalProtocolError, RecordsError
from lazyconv.net._remote_send import RemoteJob, SenderContext
from lazyconv.protocol._fetch import fetch_response_send
from lazyconv.protocol._schema import RecordsSlot
from lazyconv.serve._model import BrokerStats
from lazyconv.serve._segment_files import (
    DEFAULT_MAX_OPEN_SEGMENTS,
    CachedFileRecords,
    SegmentFileCache,
    SegmentSlice,
)
from lazyconv.serve._tracked_records import (
    TrackedFileRecords,
    TrackedLazyRecords,
    TrackedRecords,
    send_counts,
)

__all__ = ["FetchSendJob", "SendDetails", "fetch_send_job", "lazy_recipe", "slice_recipe"]


# Recipes and details are tuples: a job and its report cross a process boundary for every
# fetch, and tuples pickle and load several times faster than dataclasses.
class _SliceRecipe(NamedTuple):
    """Segment bytes sent as stored."""

    path: str
    start: int
    size: int


class _LazyRecipe(NamedTuple):
    """Segment bytes down-converted while sent (``state``: CommittedState's fields)."""

    path: str
    start: int
    end: int
    max_decompressed_size: int
    to_magic: int
    first_offset: int
    chunk_size: int
    state: tuple[int, int, bool, int | None, int | None]


class SendDetails(NamedTuple):
    """What a response's records sends did in the sender, for the server's counters:
    ``counts`` the send counters of a :class:`BrokerStats` (:func:`send_counts`);
    ``corrupt`` the described partitions (by position) whose send met corrupt data after its
    size was committed."""

    counts: tuple[int, ...]
    corrupt: list[tuple[int, str]]


class FetchSendJob(RemoteJob):
    """A Fetch response as the server encoded it: ``parts`` holds its bytes and, in place of
    each partition's records, ``(recipe, committed size)`` (records of size 0 have no part:
    nothing is written for them); ``size`` is the whole send's."""

    def __init__(self, parts: list[Any], size: int,
                 max_open_files: int = DEFAULT_MAX_OPEN_SEGMENTS,
                 conversion_cache_bytes: int = 0) -> None:
        self.parts = parts
        self.size = size
        self.max_open_files = max_open_files
        self.conversion_cache_bytes = conversion_cache_bytes
        self._counts = BrokerStats()
        self._tracked: list[TrackedRecords] = []
        self._sources: list[CachedFileRecords] = []
        self._corrupt: list[tuple[int, str]] = []

    def __reduce__(self) -> tuple[Any, ...]:
        return FetchSendJob, (self.parts, self.size, self.max_open_files, self.conversion_cache_bytes)

    def start(self, context: SenderContext) -> Send:
        cache = context.shared("segment_files", lambda: SegmentFileCache(self.max_open_files))
        context.shared("conversion_cache", lambda: _sized(conversion_cache, self.conversion_cache_bytes))
        parts: list[bytes | RecordsSlot] = []
        total = 0
        for part in self.parts:
            if isinstance(part, bytes):
                parts.append(part)
                total += len(part)
                continue
            recipe, committed = part
            records: Any = recipe if isinstance(recipe, bytes) else self._build(cache, recipe)
            built = len(records) if isinstance(records, bytes) else records.size_in_bytes
            if built != committed:
                raise LocalProtocolError(f"the sender's records have {built} bytes, the server "
                                         f"committed {committed}")
            parts.append(RecordsSlot(records, committed))
            total += committed
        if total != self.size:
            raise LocalProtocolError(f"the sender's response has {total} bytes, the server "
                                     f"committed {self.size}")
        return fetch_response_send(parts, total)

    def _build(self, cache: SegmentFileCache, recipe: Any) -> TrackedRecords:
        """The records object a recipe stands for, wrapped as the server wraps its own (the
        same counters)."""
        position = len(self._tracked)
        tracked: TrackedRecords
        if isinstance(recipe, _SliceRecipe):
            tracked = TrackedFileRecords(SegmentSlice(cache, Path(recipe.path), recipe.start, recipe.size),
                                         self._counts)
        elif isinstance(recipe, _LazyRecipe):
            source = CachedFileRecords(cache, Path(recipe.path), recipe.start, recipe.end,
                                       max_decompressed_size=recipe.max_decompressed_size)
            self._sources.append(source)

            def note(exc: RecordsError) -> None:
                self._corrupt.append((position, str(exc)))

            tracked = TrackedLazyRecords(LazyDownConvertedRecords.from_state(
                source, recipe.to_magic, recipe.first_offset, CommittedState(*recipe.state),
                recipe.chunk_size, on_error=note), self._counts)
        else:
            raise LocalProtocolError(f"a part of type {type(recipe).__name__} in a Fetch job")
        self._tracked.append(tracked)
        return tracked

    def details(self) -> SendDetails:
        for tracked in self._tracked:
            tracked.close()  # adds what its send did to the counts
        self._tracked.clear()
        return SendDetails(send_counts(self._counts), self._corrupt)

    def close(self) -> None:
        for tracked in self._tracked:
            tracked.close()
        self._tracked.clear()
        for source in self._sources:
            source.close()
        self._sources.clear()


def _sized(cache: ConversionCache, max_bytes: int) -> ConversionCache:
    cache.resize(max_bytes)
    return cache


def fetch_send_job(parts: list[bytes | RecordsSlot], size: int, recipe_of: Any,
                   max_open_files: int) -> FetchSendJob | None:
    """The job for a response's :meth:`~lazyconv.protocol.FetchResponse.framed_parts` (``size``:
    their total); ``recipe_of(records)`` gives each records slot's recipe, None when it has none
    (the response is then written by the serving process). The sender's conversion cache is
    sized as this process's."""
    described: list[Any] = []
    for part in parts:
        if isinstance(part, RecordsSlot):
            records = part.records
            if isinstance(records, (bytes, bytearray)):
                described.append((bytes(records), part.size))
                continue
            recipe = recipe_of(records)
            if recipe is None:
                return None
            described.append((recipe, part.size))
        else:
            described.append(part)
    return FetchSendJob(described, size, max_open_files, conversion_cache.max_bytes)


def slice_recipe(path: Path, start: int, size: int) -> _SliceRecipe:
    return _SliceRecipe(str(path), start, size)


def lazy_recipe(records: LazyDownConvertedRecords, source: CachedFileRecords) -> _LazyRecipe:
    return _LazyRecipe(str(source.cached_path), source.start, source.end, source.max_decompressed_size,
                       records.to_magic, records.first_offset, records.chunk_size,
                       records.committed_state[:])  # a plain tuple pickles smaller
