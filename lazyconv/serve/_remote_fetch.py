"""A planned Fetch response described for a sender process (:mod:`lazyconv.net._sender_pool`).

The serving process plans a fetch as always (:mod:`lazyconv.serve._fetch_handler`): it finds
every partition's bytes, converts each converting partition's first batch to commit its size,
and decides every error. :func:`fetch_send_job` then describes the result by value: the
response's fields, and for each partition's records the segment file, byte range and, where
they are converted, the committed state (:class:`~lazyconv._lazy.CommittedState`). The sender
rebuilds the same FetchResponse over the same bytes (:class:`FetchSendJob`), checks that its
size is the one the server committed to, and converts and writes it; a segment it cannot open
means NOT_STARTED, and the serving process writes the response itself.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyconv._conversion_cache import ConversionCache, conversion_cache
from lazyconv._lazy import CommittedState, LazyDownConvertedRecords
from lazyconv._send import Send
from lazyconv.errors import LocalProtocolError, RecordsError
from lazyconv.net._remote_send import RemoteJob, SenderContext
from lazyconv.protocol._fetch import FetchResponse
from lazyconv.serve._model import BrokerStats
from lazyconv.serve._segment_files import (
    DEFAULT_MAX_OPEN_SEGMENTS,
    CachedFileRecords,
    SegmentFileCache,
    SegmentSlice,
)
from lazyconv.serve._tracked_records import TrackedFileRecords, TrackedLazyRecords, TrackedRecords

__all__ = ["FetchSendJob", "SendDetails", "fetch_send_job", "lazy_recipe", "slice_recipe"]


@dataclass(frozen=True)
class _SliceRecipe:
    """Segment bytes sent as stored."""

    path: str
    start: int
    size: int


@dataclass(frozen=True)
class _LazyRecipe:
    """Segment bytes down-converted while sent."""

    path: str
    start: int
    end: int
    max_decompressed_size: int
    to_magic: int
    first_offset: int
    chunk_size: int
    state: CommittedState


@dataclass(frozen=True)
class SendDetails:
    """What a response's records sends did in the sender, for the server's counters:
    ``counts`` holds the send counters of a :class:`BrokerStats`; ``corrupt`` the described
    partitions (by position) whose send met corrupt data after its size was committed."""

    counts: BrokerStats
    corrupt: list[tuple[int, str]]


class FetchSendJob(RemoteJob):
    """A Fetch response of ``version`` to ``correlation_id`` whose records are recipes; its
    send must be ``size`` bytes (the size the server planned)."""

    def __init__(self, version: int, correlation_id: int, body: dict[str, Any], size: int,
                 max_open_files: int = DEFAULT_MAX_OPEN_SEGMENTS,
                 conversion_cache_bytes: int = 0) -> None:
        self.version = version
        self.correlation_id = correlation_id
        self.body = body
        self.size = size
        self.max_open_files = max_open_files
        self.conversion_cache_bytes = conversion_cache_bytes
        self._counts = BrokerStats()
        self._tracked: list[TrackedRecords] = []
        self._sources: list[CachedFileRecords] = []
        self._corrupt: list[tuple[int, str]] = []

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def start(self, context: SenderContext) -> Send:
        cache = context.shared("segment_files", lambda: SegmentFileCache(self.max_open_files))
        context.shared("conversion_cache", lambda: _sized(conversion_cache, self.conversion_cache_bytes))
        body = copy.copy(self.body)
        body["responses"] = [
            {**topic, "partitions": [{**part, "records": self._build(cache, part["records"])}
                                     for part in topic["partitions"]]}
            for topic in self.body["responses"]]
        response = FetchResponse(self.version, body)
        send = response.to_send(self.correlation_id)
        if send.size != self.size:
            raise LocalProtocolError(f"the sender's response has {send.size} bytes, the server "
                                     f"committed {self.size}")
        return send

    def _build(self, cache: SegmentFileCache, records: Any) -> Any:
        """The records object a recipe stands for, wrapped as the server wraps its own (the
        same counters); bytes and None are the response's own fields."""
        position = len(self._tracked)
        tracked: TrackedRecords
        if isinstance(records, _SliceRecipe):
            tracked = TrackedFileRecords(SegmentSlice(cache, Path(records.path), records.start, records.size),
                                         self._counts)
        elif isinstance(records, _LazyRecipe):
            source = CachedFileRecords(cache, Path(records.path), records.start, records.end,
                                       max_decompressed_size=records.max_decompressed_size)
            self._sources.append(source)

            def note(exc: RecordsError) -> None:
                self._corrupt.append((position, str(exc)))

            tracked = TrackedLazyRecords(LazyDownConvertedRecords.from_state(
                source, records.to_magic, records.first_offset, records.state, records.chunk_size,
                on_error=note), self._counts)
        else:
            return records
        self._tracked.append(tracked)
        return tracked

    def details(self) -> SendDetails:
        for tracked in self._tracked:
            tracked.close()  # adds what its send did to the counts
        self._tracked.clear()
        return SendDetails(self._counts, self._corrupt)

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


def fetch_send_job(version: int, correlation_id: int, body: dict[str, Any], size: int,
                   recipe_of: Any, max_open_files: int) -> FetchSendJob | None:
    """The job for a planned response's ``body``; ``recipe_of(records)`` gives each partition's
    recipe, None when it has none (the response is then written by the serving process). The
    sender's conversion cache is sized as this process's."""
    responses = []
    for topic in body["responses"]:
        parts = []
        for part in topic["partitions"]:
            records = part.get("records")
            if records is not None and not isinstance(records, (bytes, bytearray)):
                records = recipe_of(records)
                if records is None:
                    return None
            parts.append({**part, "records": records})
        responses.append({**topic, "partitions": parts})
    return FetchSendJob(version, correlation_id, {**body, "responses": responses}, size, max_open_files,
                        conversion_cache.max_bytes)


def slice_recipe(path: Path, start: int, size: int) -> _SliceRecipe:
    return _SliceRecipe(str(path), start, size)


def lazy_recipe(records: LazyDownConvertedRecords, source: CachedFileRecords) -> _LazyRecipe:
    return _LazyRecipe(str(source.cached_path), source.start, source.end, source.max_decompressed_size,
                       records.to_magic, records.first_offset, records.chunk_size,
                       records.committed_state)
