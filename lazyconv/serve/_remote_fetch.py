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

from lazyconv._lazy import CommittedState, LazyDownConvertedRecords
from lazyconv._send import Send
from lazyconv.errors import LocalProtocolError, RecordsError
from lazyconv.net._remote_send import RemoteJob, SenderContext
from lazyconv.protocol._fetch import FetchResponse
from lazyconv.serve._segment_files import (
    DEFAULT_MAX_OPEN_SEGMENTS,
    CachedFileRecords,
    SegmentFileCache,
    SegmentSlice,
)

__all__ = ["FetchSendJob", "PartitionSendDetails", "fetch_send_job"]


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
class PartitionSendDetails:
    """What one partition's records send did in the sender (for the server's counters)."""

    zero_copy_bytes: int = 0
    padding_bytes: int = 0
    chunks: int = 0
    records_converted: int = 0
    error: str | None = None  # corrupt data met after the size was committed


class FetchSendJob(RemoteJob):
    """A Fetch response of ``version`` to ``correlation_id`` whose records are recipes; its
    send must be ``size`` bytes (the size the server planned)."""

    def __init__(self, version: int, correlation_id: int, body: dict[str, Any], size: int,
                 max_open_files: int = DEFAULT_MAX_OPEN_SEGMENTS) -> None:
        self.version = version
        self.correlation_id = correlation_id
        self.body = body
        self.size = size
        self.max_open_files = max_open_files
        # each partition's records object, what to close once sent, and its send's errors
        self._built: list[tuple[Any, Any, list[str]]] = []

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_built"] = []
        return state

    def start(self, context: SenderContext) -> Send:
        cache = context.shared("segment_files", lambda: SegmentFileCache(self.max_open_files))
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
        errors: list[str] = []
        built: Any
        closing: Any
        if isinstance(records, _SliceRecipe):
            built = closing = SegmentSlice(cache, Path(records.path), records.start, records.size)
        elif isinstance(records, _LazyRecipe):
            source = CachedFileRecords(cache, Path(records.path), records.start, records.end,
                                       max_decompressed_size=records.max_decompressed_size)

            def note(exc: RecordsError) -> None:
                errors.append(str(exc))

            built = LazyDownConvertedRecords.from_state(source, records.to_magic, records.first_offset,
                                                        records.state, records.chunk_size, on_error=note)
            closing = source
        else:
            return records  # bytes or None: part of the response's fields
        self._built.append((built, closing, errors))
        return built

    def details(self) -> list[PartitionSendDetails]:
        out = []
        for built, _, errors in self._built:
            if isinstance(built, SegmentSlice):
                out.append(PartitionSendDetails(
                    zero_copy_bytes=sum(getattr(s, "zero_copy_bytes", 0) for s in built._sends)))
                continue
            send = built._last_send
            if send is None:
                out.append(PartitionSendDetails())
                continue
            out.append(PartitionSendDetails(padding_bytes=send.padding_bytes, chunks=send.chunks,
                                            records_converted=send.stats.records_converted,
                                            error=errors[-1] if errors else None))
        return out

    def close(self) -> None:
        for _, closing, _ in self._built:
            closing.close()
        self._built.clear()


def fetch_send_job(version: int, correlation_id: int, topics: list[dict[str, Any]], size: int,
                   recipe_of: Any, max_open_files: int) -> FetchSendJob | None:
    """The job for a planned response (``topics`` as the plan made them); ``recipe_of(records)``
    gives each partition's recipe, None when it has none (the response is then written by the
    serving process)."""
    responses = []
    for topic in topics:
        parts = []
        for part in topic["partitions"]:
            records = part.get("records")
            if records is not None and not isinstance(records, (bytes, bytearray)):
                records = recipe_of(records)
                if records is None:
                    return None
            parts.append({**part, "records": records})
        responses.append({**topic, "partitions": parts})
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    return FetchSendJob(version, correlation_id, body, size, max_open_files)


def slice_recipe(path: Path, start: int, size: int) -> _SliceRecipe:
    return _SliceRecipe(str(path), start, size)


def lazy_recipe(records: LazyDownConvertedRecords, source: CachedFileRecords) -> _LazyRecipe:
    return _LazyRecipe(str(source.cached_path), source.start, source.end, source.max_decompressed_size,
                       records.to_magic, records.first_offset, records.chunk_size,
                       records.committed_state)
