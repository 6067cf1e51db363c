"""Fetch through the gateway: a downstream Fetch of any version answered from upstream Fetches
of a version Kafka 4 accepts (docs/guide/gateway.md).

Per downstream fetch: the partitions are grouped by their upstream leader and each leader is
asked once, concurrently (Fetch ≥ v4, topic ids from v13, no fetch session, the client's
isolation level, MaxBytes capped by ``upstream_fetch_max_bytes`` so that one upstream response
is the most a connection holds). The answers are reassembled in the client's order:

- a client that reads magic 2 (Fetch v4+) gets the record bytes as the broker sent them, except
  that below Fetch v10 a zstd batch is not handed over (error 76 when it comes first, cut
  before it otherwise), as a 2.x/3.x broker refused zstd to those versions;
- a client of Fetch v0–3 gets the records down-converted lazily to magic 0 (v0–1) or 1 (v2–3)
  by :class:`~lazyconv._lazy.LazyDownConvertedRecords`: committed sizes first, then one chunk
  at a time on the conversion worker pool, control batches dropped, a fetch offset inside a
  batch honoured, zstd refused with UNSUPPORTED_COMPRESSION_TYPE (76) like a broker.

Upstream partition errors reach the client as codes its version knows
(:mod:`lazyconv.gateway._error_map`); a leader that cannot be reached gives its partitions
NOT_LEADER_OR_FOLLOWER and refreshes the gateway's metadata.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from lazyconv._lazy import LazyDownConvertedRecords
from lazyconv.errors import RecordsError, UnsupportedCompressionError, UpstreamError
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, downstream_error
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.net._model import Response
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol._decision import (
    broker_partition_response,
    error_partition,
    readable_magic,
    zstd_readable,
)
from lazyconv.protocol._error_codes import ErrorCode
from lazyconv.protocol._fetch import FetchRequest, FetchResponse
from lazyconv.protocol._schema import ZERO_UUID
from lazyconv.records import Compression, MemoryRecords

log = logging.getLogger(__name__)

__all__ = ["FetchRelay", "DEFAULT_UPSTREAM_FETCH_MAX_BYTES"]

# One upstream Fetch response is what a downstream connection holds besides one converted chunk.
DEFAULT_UPSTREAM_FETCH_MAX_BYTES = 4 << 20
_INT32_MAX = 0x7FFFFFFF
_FIRST_TOPIC_ID_VERSION = 13


@dataclass
class _Wanted:
    """One partition of the downstream request, in request order."""

    name: str
    topic_id: uuid.UUID | None  # as the client named it (v13+)
    partition: dict[str, Any]
    entry: dict[str, Any] | None = None  # the downstream partition, once known
    upstream: dict[str, Any] | None = None  # the upstream partition it is built from


class FetchRelay:
    """Answers downstream Fetch requests from the upstream cluster."""

    def __init__(self, cluster: UpstreamCluster, *, chunk_size: int,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 max_decompressed_batch: int = 32 << 20,
                 workers: ConversionWorkers | None = None) -> None:
        """``workers``: where the first converted batch of each partition is made (the rest is
        converted while the response is written, on the same pool)."""
        self.cluster = cluster
        self.workers = workers
        self.chunk_size = chunk_size
        self.upstream_fetch_max_bytes = upstream_fetch_max_bytes
        self.max_decompressed_batch = max_decompressed_batch
        self.converted_partitions = 0
        self.relayed_partitions = 0

    async def fetch(self, session: UpstreamSession, version: int, correlation_id: int,
                    body: memoryview) -> Response:
        request = FetchRequest.decode(version, body)
        wanted = await self._resolve(version, request)
        by_leader: dict[int, list[_Wanted]] = {}
        for item in wanted:
            if item.entry is not None:
                continue
            leader = self.cluster.leader(item.name, item.partition["partition"])
            if leader is None:
                item.entry = error_partition(item.partition["partition"], UNREACHABLE)
                self.cluster.invalidate(item.name)
            else:
                by_leader.setdefault(leader, []).append(item)
        await asyncio.gather(*(self._fetch_from(session, node, items, version, request)
                               for node, items in by_leader.items()))
        if self.workers is not None and readable_magic(version) < 2:
            await self.workers.run(self._finish, version, wanted)
        else:
            self._finish(version, wanted)
        converted = any(isinstance(w.entry and w.entry.get("records"), LazyDownConvertedRecords)
                        for w in wanted)
        topics = _group_by_topic(version, wanted)
        fetch_body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}
        response = FetchResponse(version, fetch_body)
        return Response(response.to_send(correlation_id), off_loop=converted)

    async def _resolve(self, version: int, request: dict[str, Any]) -> list[_Wanted]:
        """The request's partitions with topic names (v13+ names topics by id)."""
        wanted: list[_Wanted] = []
        for topic in request["topics"]:
            topic_id = topic.get("topic_id") if version >= _FIRST_TOPIC_ID_VERSION else None
            name = topic.get("topic") or ""
            if topic_id is not None:
                name = self.cluster.topic_name(topic_id) or ""
                if not name:
                    try:
                        await self.cluster.refresh(None)
                    except UpstreamError as exc:
                        log.warning("fetch: metadata refresh failed: %s", exc)
                    name = self.cluster.topic_name(topic_id) or ""
            for part in topic["partitions"]:
                item = _Wanted(name, topic_id, part)
                if not name:
                    item.entry = error_partition(part["partition"], ErrorCode.UNKNOWN_TOPIC_ID)
                wanted.append(item)
        names = list(dict.fromkeys(w.name for w in wanted if w.entry is None))
        if names:
            try:
                known = await self.cluster.topics_for(names)
            except UpstreamError as exc:
                log.warning("fetch: no metadata from the cluster: %s", exc)
                known = {}
            for item in wanted:
                if item.entry is not None:
                    continue
                info = known.get(item.name)
                index = item.partition["partition"]
                if info is None:
                    item.entry = error_partition(index, UNREACHABLE)
                elif info.error_code or index not in info.partitions:
                    code = info.error_code or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    item.entry = error_partition(index, downstream_error(fetch.SPEC.key, version, code))
        return wanted

    async def _fetch_from(self, session: UpstreamSession, node: int, items: list[_Wanted],
                          version: int, request: dict[str, Any]) -> None:
        """One upstream Fetch for the partitions led by ``node``; fills each item's entry."""
        try:
            conn = await session.connection(node)
            upstream_version = conn.version(fetch.SPEC)
            body = self._upstream_request(upstream_version, version, request, items)
            wait = max(0, request.get("max_wait_ms", 0)) / 1000
            answer = await conn.request(fetch.SPEC, upstream_version, body,
                                        timeout=self.cluster.request_timeout + wait)
        except UpstreamError as exc:
            log.warning("fetch from upstream broker %d failed: %s", node, exc)
            self.cluster.invalidate()
            for item in items:
                item.entry = error_partition(item.partition["partition"], UNREACHABLE)
            return
        if answer.get("error_code"):
            code = downstream_error(fetch.SPEC.key, version, answer["error_code"])
            log.warning("upstream broker %d refused a fetch: error %d", node, answer["error_code"])
            for item in items:
                item.entry = error_partition(item.partition["partition"], code)
            return
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for topic in answer["responses"]:
            name = topic.get("topic") or ""
            if upstream_version >= _FIRST_TOPIC_ID_VERSION:
                name = self.cluster.topic_name(topic.get("topic_id") or ZERO_UUID) or ""
            for part in topic["partitions"]:
                results[(name, part["partition_index"])] = part
        for item in items:
            index = item.partition["partition"]
            part = results.get((item.name, index))
            if part is None:
                item.entry = error_partition(index, UNREACHABLE)
                continue
            item.upstream = part

    def _finish(self, version: int, wanted: list[_Wanted]) -> None:
        """The downstream partitions from the upstream ones (converting first batches)."""
        for item in wanted:
            if item.entry is None and item.upstream is not None:
                item.entry = self._downstream_partition(version, item, item.upstream)
                item.upstream = None

    def _upstream_request(self, upstream_version: int, version: int, request: dict[str, Any],
                          items: list[_Wanted]) -> dict[str, Any]:
        cap = self.upstream_fetch_max_bytes
        max_bytes = request.get("max_bytes", _INT32_MAX) if version >= 3 else _INT32_MAX
        topics: list[dict[str, Any]] = []
        for item in items:
            info = self.cluster.topics.get(item.name)
            topic_id = info.topic_id if info is not None else ZERO_UUID
            if not topics or topics[-1]["topic"] != item.name:
                topics.append({"topic": item.name, "topic_id": topic_id, "partitions": []})
            topics[-1]["partitions"].append({
                "partition": item.partition["partition"],
                "current_leader_epoch": -1,
                "fetch_offset": item.partition["fetch_offset"],
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": min(item.partition["partition_max_bytes"], cap),
            })
        return {
            "replica_id": -1,
            "max_wait_ms": request.get("max_wait_ms", 0),
            "min_bytes": request.get("min_bytes", 0),
            "max_bytes": max(0, min(max_bytes, cap)),
            "isolation_level": request.get("isolation_level", 0) if version >= 4 else 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": topics,
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def _downstream_partition(self, version: int, item: _Wanted,
                              part: dict[str, Any]) -> dict[str, Any]:
        index = item.partition["partition"]
        fetch_offset = item.partition["fetch_offset"]
        code = part["error_code"]
        if code in RETRIABLE_ROUTING_ERRORS:
            self.cluster.invalidate(item.name)
        records = part.get("records") or b""
        fields = {
            "high_watermark": part["high_watermark"],
            "last_stable_offset": part.get("last_stable_offset", -1),
            "log_start_offset": part.get("log_start_offset", -1),
            "aborted_transactions": part.get("aborted_transactions") or [],
        }
        if code:
            entry = error_partition(index, downstream_error(fetch.SPEC.key, version, code))
            entry.update(fields)
            return entry
        if readable_magic(version) == 2:
            self.relayed_partitions += 1
            if not zstd_readable(version):
                cut = _before_first_zstd(records)
                if cut == 0:
                    return error_partition(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                if cut is not None:
                    records = memoryview(records)[:cut]
            entry = error_partition(index, 0)
            entry.update(fields, records=records)
            return entry
        name = item.name

        def corrupt_after_commit(exc: RecordsError) -> None:
            log.error("fetch %s-%d at %d: upstream records could not be converted after the "
                      "size was committed; the rest of the partition is padding: %s",
                      name, index, fetch_offset, exc)

        def lazy(records_in: Any, to_magic: int, first_offset: int) -> Any:
            self.converted_partitions += 1
            return LazyDownConvertedRecords(records_in, to_magic, first_offset,
                                            chunk_size=self.chunk_size, on_error=corrupt_after_commit)

        # Old consumers of one topic fetch the same offsets with the same sizes, so the upstream
        # answers them with the same bytes: their conversions are kept and reused (the cache
        # compares the bytes; the key only finds the candidate). The cache adds the position
        # in these records and the fetch offset, which fixes where the records start.
        cache_key = ("upstream", self.cluster.cluster_id or tuple(self.cluster.bootstrap), name, index)
        try:
            return broker_partition_response(
                version, index,
                MemoryRecords(records, self.max_decompressed_batch, cache_key=cache_key)
                if records else None,
                fetch_offset=fetch_offset, error_code=0, lazy_records_factory=lazy, **fields)
        except UnsupportedCompressionError:
            return error_partition(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        except RecordsError as exc:
            log.error("fetch %s-%d at %d: upstream records do not decode: %s", name, index,
                      fetch_offset, exc)
            return error_partition(index, ErrorCode.CORRUPT_MESSAGE)


def _before_first_zstd(records: bytes | memoryview) -> int | None:
    """The byte position of the first zstd batch (``None``: there is none)."""
    if not records:
        return None
    for batch in MemoryRecords(records).batches():
        if batch.compression == Compression.ZSTD:
            return batch.position
    return None


def _group_by_topic(version: int, wanted: list[_Wanted]) -> list[dict[str, Any]]:
    """Consecutive partitions of one topic share a topic entry, in the client's order."""
    topics: list[dict[str, Any]] = []
    last: tuple[str, Any] | None = None
    for item in wanted:
        key = (item.name, item.topic_id)
        if not topics or key != last:
            topic: dict[str, Any] = {"topic": item.name, "partitions": []}
            if item.topic_id is not None:
                topic["topic_id"] = item.topic_id
            topics.append(topic)
            last = key
        assert item.entry is not None
        topics[-1]["partitions"].append(item.entry)
    return topics
