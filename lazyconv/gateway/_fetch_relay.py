"""Fetch through the gateway: a downstream Fetch of any version answered from upstream Fetches
of a version Kafka 4 accepts (docs/guide/gateway.md).

Per downstream fetch: the partitions are grouped by their upstream leader and each leader is
asked once, concurrently (Fetch ≥ v4, topic ids from v13, no fetch session, the client's
isolation level, MaxBytes capped by ``upstream_fetch_max_bytes`` so that one upstream response
is the most a connection holds). The answers are reassembled in the client's order:

- a client that reads magic 2 and every codec (Fetch v10+) whose partitions one leader
  leads gets the leader's answer to its own request passed on from socket to socket
  (:mod:`~lazyconv.gateway._fetch_splice`) where nothing is TLS and the upstream is PLAINTEXT;
- any other client that reads magic 2 (Fetch v4+) gets the record bytes as the broker sent them, except
  that below Fetch v10 a zstd batch is not handed over (error 76 when it comes first, cut
  before it otherwise), as a 2.x/3.x broker refused zstd to those versions;
- a client of Fetch v0–3 gets the records down-converted lazily to magic 0 (v0–1) or 1 (v2–3)
  by :class:`~lazyconv.conversion._lazy_records.LazyDownConvertedRecords`: committed sizes first, then one chunk
  at a time on the conversion worker pool, control batches dropped, a fetch offset inside a
  batch honoured, zstd refused with UNSUPPORTED_COMPRESSION_TYPE (76) like a broker.

Upstream partition errors reach the client as codes its version knows
(:mod:`lazyconv.gateway._error_map`); a leader that cannot be reached gives its partitions
NOT_LEADER_OR_FOLLOWER and refreshes the gateway's metadata.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any

from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import (
    ErrorCode,
    RecordsError,
    RemoteProtocolError,
    UnsupportedCompressionError,
    UpstreamError,
)
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, downstream_error
from lazyconv.gateway._fetch_ahead import AheadBudget, FetchAhead, Prefetched, last_complete_batch
from lazyconv.gateway._fetch_splice import (
    SPLICE_AVAILABLE,
    SplicedFetchSend,
    SpliceLane,
    SpliceLanes,
)
from lazyconv.gateway._metrics import fetch_written, session_metrics
from lazyconv.gateway._on_loop import quick_to_down_convert
from lazyconv.gateway._routing import ask_leaders, route_to_leaders, topic_error
from lazyconv.gateway._upstream import (
    ClusterView,
    UpstreamCluster,
    UpstreamConnection,
    UpstreamSession,
)
from lazyconv.net._model import Response
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol._decision import (
    broker_partition_response,
    error_partition,
    readable_magic,
    zstd_readable,
)
from lazyconv.protocol._fetch import FetchRequest, FetchResponse
from lazyconv.protocol._fetch_scan import FIRST_SCANNED_VERSION, FetchResponseScanner, ScanStep
from lazyconv.protocol._grouping import group_by_topic
from lazyconv.protocol._schema import ZERO_UUID
from lazyconv.records import Compression, MemoryRecords
from lazyconv.records._entries import EntriesSummary, summarize_entries

log = logging.getLogger(__name__)

__all__ = ["FetchRelay", "DEFAULT_UPSTREAM_FETCH_MAX_BYTES", "DEFAULT_FETCH_AHEAD_BYTES"]

# One upstream Fetch response is what a downstream connection holds besides one converted chunk,
# and each partition fetched ahead holds up to one more. 1 MiB (a Java consumer's default
# max.partition.fetch.bytes) keeps 8 consumers asking 50 MiB within the gateway's 64 MiB; 4 MiB
# held 109 MiB above idle, for no more throughput (docs/guide/benchmarks.md, "The upstream
# fetch size").
DEFAULT_UPSTREAM_FETCH_MAX_BYTES = 1 << 20
# What the answers fetched ahead of every connection may hold together.
DEFAULT_FETCH_AHEAD_BYTES = 32 << 20
_INT32_MAX = 0x7FFFFFFF
_ROTATION = "fetch rotation"  # a connection's count of fetches, in its session's extras
_FIRST_SESSION_VERSION = 7  # Fetch has session ids and epochs (KIP-227) from v7 on
_FIRST_TOPIC_ID_VERSION = 13
# Fetch v16 and v17 answers are v15's plus the node_endpoints tag, which a broker adds only
# when a partition's leader moved (and which would name upstream brokers): v15 is asked for them.
_LAST_SPLICED_UPSTREAM_VERSION = 15
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass
class _Wanted:
    """One partition of the downstream request, in request order."""

    name: str
    topic_id: uuid.UUID | None  # as the client named it (v13+)
    partition: dict[str, Any]
    entry: dict[str, Any] | None = None  # the downstream partition, once known
    upstream: dict[str, Any] | None = None  # the upstream partition it is built from
    ahead: Prefetched | None = None  # its answer, fetched ahead (see _fetch_ahead)
    summary: EntriesSummary | None = None  # its upstream records' headers, once read
    throttle_ms: int = 0  # the throttle time of the upstream answer it came in (a quota's)
    undecodable: str | None = None  # why its upstream records did not decode (logged on the loop)

    def entries_summary(self) -> EntriesSummary:
        """What the headers of the upstream records say (:func:`summarize_entries`), read
        once per fetch for both the choice of loop or pool and the metrics."""
        if self.summary is None:
            records = self.upstream.get("records") if self.upstream is not None else None
            self.summary = summarize_entries(records or b"")
        return self.summary


class FetchRelay:
    """Answers downstream Fetch requests from the upstream cluster."""

    def __init__(self, cluster: UpstreamCluster, *, chunk_size: int,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 max_decompressed_batch: int = 32 << 20,
                 workers: ConversionWorkers | None = None,
                 fetch_ahead_bytes: int = DEFAULT_FETCH_AHEAD_BYTES, splice: bool = True,
                 quick_on_loop: bool = True) -> None:
        """``workers``: where the first converted batch of each partition is made (the rest is
        converted while the response is written, on the same pool), unless every batch of the
        response is uncompressed and ``quick_on_loop`` (then on the loop:
        :mod:`~lazyconv.gateway._on_loop`); ``fetch_ahead_bytes``: what
        the prefetched answers of every connection may hold together (0: no fetch-ahead);
        ``splice``: pass the records of the v10+ fetches that allow it from socket to socket."""
        self.splice = splice and SPLICE_AVAILABLE
        self.cluster = cluster
        self.ahead_budget = AheadBudget(fetch_ahead_bytes) if fetch_ahead_bytes > 0 else None
        self.workers = workers
        self.quick_on_loop = quick_on_loop
        self.chunk_size = chunk_size
        self.upstream_fetch_max_bytes = upstream_fetch_max_bytes
        self.max_decompressed_batch = max_decompressed_batch
        self.converted_partitions = 0
        self.relayed_partitions = 0
        self.ahead_hits = 0  # partitions answered from their answer fetched ahead
        self.ahead_misses = 0  # fetched ahead and not used (a seek, an error, nothing new)
        self.spliced_fetches = 0  # answered from socket to socket

    async def fetch(self, session: UpstreamSession, version: int, correlation_id: int,
                    body: memoryview) -> Response:
        request = FetchRequest.decode(version, body)
        if version >= _FIRST_SESSION_VERSION and request.get("session_epoch", -1) not in (0, -1):
            # an incremental fetch names only what changed in a session, and the gateway never
            # made one (it answers session id 0): FETCH_SESSION_ID_NOT_FOUND, as Kafka answers
            # a session it does not know, and the client starts again with a full fetch
            return Response(FetchResponse(version, {
                "throttle_time_ms": 0, "error_code": int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                "session_id": 0, "responses": []}).to_send(correlation_id))
        view = session.cluster  # the topics as this client's identity sees them
        wanted = await self._resolve(view, version, request)
        if self.splice and version >= FIRST_SCANNED_VERSION:
            spliced = await self._spliced(session, version, correlation_id, request, wanted)
            if spliced is not None:
                return spliced

        def fail(item: _Wanted, code: int) -> None:
            item.entry = error_partition(item.partition["partition"],
                                         downstream_error(fetch.SPEC.key, version, code))

        # A broker answers once it has records (min_bytes) or max_wait_ms has passed. The
        # answers fetched ahead come first (quick: an ask ahead never waits upstream); records
        # among them make the partitions still to ask go upstream without waiting, and those are
        # asked in one round, so the client's wait is spent once
        ahead = self._fetch_ahead(session)
        isolation = request.get("isolation_level", 0) if version >= 4 else 0
        prefetched = [w for w in wanted if w.entry is None and ahead is not None
                      and self._take_ahead(ahead, w, isolation)]
        if prefetched and ahead is not None:
            await asyncio.gather(*(self._use_ahead(ahead, item) for item in prefetched))
        has_records = any(w.upstream is not None and w.upstream.get("records") for w in prefetched)
        # the rest, and any answer fetched ahead that cannot be used (it goes upstream after all)
        to_ask = self._rotated(session, [w for w in wanted if w.entry is None and w.ahead is None]) + \
            [w for w in prefetched if w.entry is None and w.upstream is None]
        with_request = dict(request, max_wait_ms=0) if has_records else request

        async def ask(conn: UpstreamConnection, items: list[_Wanted]) -> None:
            await self._fetch_from(view, conn, items, version, with_request)

        by_leader = route_to_leaders(view, to_ask, lambda w: (w.name, w.partition["partition"]), fail)
        await ask_leaders(session, by_leader, ask, fail, "fetch")
        if ahead is not None:
            self._fetch_next(session, ahead, version, request, isolation, wanted)
        workers = self.workers  # lazyconv.gateway._on_loop: which conversions go to them
        off_loop = (workers is not None and readable_magic(version) < 2
                    and not (self.quick_on_loop and quick_to_down_convert(
                        w.entries_summary() for w in wanted
                        if w.entry is None and w.upstream is not None)))
        if off_loop and workers is not None:
            await workers.run(self._finish, view, version, wanted)
        else:
            self._finish(view, version, wanted)
        for item in wanted:
            if item.undecodable is not None:
                # an old consumer fetches the same offset again and again: said once, then at
                # most once a minute with the count, not once per fetch
                self.cluster.state.warn("Fetch down-conversion", item.undecodable)
        converted = off_loop and any(
            isinstance(w.entry and w.entry.get("records"), LazyDownConvertedRecords) for w in wanted)
        topics = []
        for (name, topic_id), entries in group_by_topic(((w.name, w.topic_id), w.entry) for w in wanted):
            topic: dict[str, Any] = {"topic": name, "partitions": entries}
            if topic_id is not None:
                topic["topic_id"] = topic_id
            topics.append(topic)
        # the upstream's quotas reach the client: the longest throttle of the answers it is
        # made of (Fetch v1+ has the field), as a broker would ask it to back off
        throttle = max((w.throttle_ms for w in wanted), default=0)
        fetch_body = {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0,
                      "responses": topics}
        response = FetchResponse(version, fetch_body)
        answer = Response(response.to_send(correlation_id), off_loop=converted,
                          throttle_ms=throttle)
        session_, metrics = session_metrics()
        if metrics is not None and session_ is not None:  # counted once written
            answer.written = fetch_written(session_, metrics,
                                           [(w.entry, w.summary) for w in wanted if w.entry])
        return answer

    # -- spliced responses ---------------------------------------------------------------------

    async def _spliced(self, session: UpstreamSession, version: int, correlation_id: int,
                       request: dict[str, Any], wanted: list[_Wanted]) -> Response | None:
        """The answer passed on from the leader's socket (see :mod:`~lazyconv.gateway.
        _fetch_splice`), or ``None`` when this fetch cannot be (then answered the usual way):
        a partition unknown or led by another broker, TLS or SASL upstream, a broker without
        the version, a lane that cannot be opened or that fails before the answer's size."""
        view = session.cluster
        if not wanted or self.cluster.security.protocol != "PLAINTEXT" or \
                any(w.entry is not None for w in wanted):
            return None
        leaders = {view.leader(w.name, w.partition["partition"]) for w in wanted}
        node = leaders.pop() if len(leaders) == 1 else None
        if node is None:
            return None
        upstream_version = min(version, _LAST_SPLICED_UPSTREAM_VERSION)
        net_session, metrics = session_metrics()
        wait = max(0, request.get("max_wait_ms", 0)) / 1000
        key = (SpliceLanes, node)
        timeout = self.cluster.request_timeout + wait
        body = self._upstream_request(view, upstream_version, version, request, wanted,
                                      capped=False)
        asked = _asked(upstream_version, body)
        data = b""
        try:
            conn = await session.connection(node)
            if not conn.serves(fetch.SPEC.key, upstream_version):
                return None
            lanes: SpliceLanes | None = session.extras.get(key)
            if lanes is None:
                lanes = session.extras[key] = SpliceLanes(view.address_of(node), session.client_id,
                                                          budget=self.ahead_budget)
            started = time.perf_counter()
            size = None
            lane = lanes.with_ahead()
            if lane is not None:
                min_bytes = request.get("min_bytes", 0)
                waiting = lane

                async def usable(n: int) -> bool:
                    # an eager answer (asked with no wait) serves a client that would not wait,
                    # or that would wait for a first byte and is seen to have records (framing
                    # too long to tell is not: an empty answer would make it spin without its
                    # wait); one that waits for more is asked as it asks
                    if min_bytes > 1:
                        return False
                    return wait <= 0 or min_bytes <= 0 or \
                        await _answer_shows_records(waiting, version, n, timeout)

                size = await lane.take_ahead(asked, timeout, usable)
                if size is not None:
                    self.ahead_hits += 1
                else:
                    self.ahead_misses += 1
            if size is None:
                lane = next((each for each in lanes.lanes if not each.closed), lanes.lanes[0])
                if lane.closed:
                    await lane.open(self.cluster.request_timeout)
                pending, data = lane.encoder.send_request(fetch.SPEC, upstream_version, body,
                                                          expect_response=False)
                size = await lane.ask(data, pending.correlation_id, timeout)
            assert lane is not None
            other = lanes.other(lane)
            if self.ahead_budget is not None and other.closed:
                try:
                    await other.open(self.cluster.request_timeout)
                except UpstreamError as exc:  # no fetch ahead then
                    log.debug("fetch: no second lane to %s: %s", other.address, exc)
        except UpstreamError as exc:
            log.debug("fetch: not spliced (answered the usual way): %s", exc)
            return None
        if metrics is not None:
            if data:
                metrics.upstream_sent(fetch.SPEC.key, upstream_version, len(data))
            metrics.upstream_answered(fetch.SPEC.key, time.perf_counter() - started)
            metrics.upstream_received_bytes += size + 4
        self.spliced_fetches += 1
        self.relayed_partitions += len(wanted)
        me = net_session.listener.node_id if net_session is not None else -1
        errors = []

        def rewrite(step: ScanStep, framing: bytearray) -> None:
            if step.error_code:
                errors.append(step.error_code)
                _INT16.pack_into(framing, step.error_at,
                                 downstream_error(fetch.SPEC.key, version, step.error_code))
            for part in step.partitions:
                if part.error_code:
                    errors.append(part.error_code)
                    if part.error_code in RETRIABLE_ROUTING_ERRORS:
                        name = part.topic if isinstance(part.topic, str) else \
                            view.topic_name(uuid.UUID(bytes=part.topic))
                        if name:
                            view.invalidate(name)
                    _INT16.pack_into(framing, part.error_at,
                                     downstream_error(fetch.SPEC.key, version, part.error_code))
                if part.preferred_read_replica >= 0:  # another upstream broker: not ours to name
                    _INT32.pack_into(framing, part.preferred_read_replica_at, -1)
            for at in step.leader_ids_at:  # the gateway leads every partition it names
                if _INT32.unpack_from(framing, at)[0] >= 0:
                    _INT32.pack_into(framing, at, me)

        def ahead(done: SplicedFetchSend) -> None:
            """The client's next fetch, as a sequential consumer asks it, sent now (see
            :meth:`SpliceLane.send_ahead`): each partition from after its last whole batch."""
            if self.ahead_budget is None or errors or other.closed or \
                    request.get("min_bytes", 0) > 1:  # an answer without waiting would not do
                return
            nxt = _predicted(body, done.next_offsets, upstream_version)
            pending, data = other.encoder.send_request(fetch.SPEC, upstream_version, nxt,
                                                       expect_response=False)
            reserve = min(nxt["max_bytes"], sum(p["partition_max_bytes"] for t in nxt["topics"]
                                                for p in t["partitions"]))
            if other.send_ahead(data, _asked(upstream_version, nxt), pending.correlation_id,
                                reserve) and metrics is not None:
                metrics.upstream_sent(fetch.SPEC.key, upstream_version, len(data))

        send = SplicedFetchSend(lane, FetchResponseScanner(version, size), size, correlation_id,
                                rewrite, self.cluster.request_timeout, on_known=ahead)
        answer = Response(send, resources=[send])
        if metrics is not None and net_session is not None:
            counted = net_session

            def written() -> None:
                counted.records_out += send.records_out

            answer.written = written
        return answer

    @staticmethod
    def _rotated(session: UpstreamSession, items: list[_Wanted]) -> list[_Wanted]:
        """``items`` in the order the upstream is asked for them, starting one partition later
        at each fetch of the connection. The upstream fills partitions in request order up to
        the response's MaxBytes, which the gateway caps; an old client (Fetch v0-2 has no
        response limit, so it never rotates) would otherwise see its first partition answered
        and the others empty until the first is read to its end. The downstream response keeps
        the client's order."""
        if len(items) < 2:
            return items
        turn = session.extras.get(_ROTATION, 0)
        session.extras[_ROTATION] = turn + 1
        start = turn % len(items)
        return items[start:] + items[:start]

    # -- fetch-ahead --------------------------------------------------------------------------

    def _fetch_ahead(self, session: UpstreamSession) -> FetchAhead | None:
        if self.ahead_budget is None:
            return None
        ahead: FetchAhead | None = session.extras.get(FetchAhead)
        if ahead is None:
            ahead = session.extras[FetchAhead] = FetchAhead(self.ahead_budget)
        return ahead

    def _shape(self, item: _Wanted, isolation: int) -> tuple[Any, ...]:
        return (min(item.partition["partition_max_bytes"], self.upstream_fetch_max_bytes), isolation)

    def _take_ahead(self, ahead: FetchAhead, item: _Wanted, isolation: int) -> bool:
        misses = ahead.misses
        got = ahead.take(item.name, item.partition["partition"], item.partition["fetch_offset"],
                         self._shape(item, isolation))
        self.ahead_misses += ahead.misses - misses
        if got is None:
            return False
        item.ahead = got[0]
        return True

    async def _use_ahead(self, ahead: FetchAhead, item: _Wanted) -> None:
        """The prefetched answer of ``item``, with the tail before it when the client asks from
        inside it; left unset (a miss) when the ask failed or answered an error."""
        entry = item.ahead
        assert entry is not None
        try:
            part = await entry.future
        except asyncio.CancelledError:
            part = None
        finally:
            ahead.release(entry)
        if part is None or part["error_code"] or not part.get("records"):
            self.ahead_misses += 1
            return  # an empty answer is a miss too: the client's own fetch may wait for data
        self.ahead_hits += 1
        item.throttle_ms = entry.throttle_ms
        fetch_offset = item.partition["fetch_offset"]
        if fetch_offset < entry.start:
            records = part.get("records") or b""
            limit = max(len(entry.tail), item.partition["partition_max_bytes"])
            # one copy: the client's cut-off last batch, then as much of the answer as fits
            part = dict(part, records=b"".join((entry.tail,
                                                memoryview(records)[:limit - len(entry.tail)])))
        item.upstream = part

    def _fetch_next(self, session: UpstreamSession, ahead: FetchAhead, version: int,
                    request: dict[str, Any], isolation: int, wanted: list[_Wanted]) -> None:
        """Ask each partition's next range of its leader now, while this answer is written."""
        by_leader: dict[int, list[Prefetched]] = {}
        for item in wanted:
            part = item.upstream
            if part is None or part["error_code"]:
                continue
            records = part.get("records") or b""
            last = last_complete_batch(records)
            if last is None:
                continue  # caught up (or a batch larger than the limit): nothing to guess
            position, size, start = last
            leader = session.cluster.leader(item.name, item.partition["partition"])
            if leader is None:
                continue
            tail = bytes(memoryview(records)[position:position + size])
            shape = self._shape(item, isolation)
            entry = ahead.start(item.name, item.partition["partition"], start, shape, tail,
                                int.from_bytes(tail[:8], "big", signed=True), shape[0])
            if entry is not None:
                by_leader.setdefault(leader, []).append(entry)
        # no waiting upstream: a prefetch must never hold up a fetch queued behind it on the
        # connection (a miss); an empty answer is a miss, and the client's own fetch then waits
        eager = dict(request, max_wait_ms=0, min_bytes=0)
        for node, entries in by_leader.items():
            ahead.run(entries, functools.partial(self._fetch_ahead_from, session, node, version,
                                                 eager))

    async def _fetch_ahead_from(self, session: UpstreamSession, node: int, version: int,
                                request: dict[str, Any], entries: list[Prefetched]
                                ) -> dict[tuple[str, int], dict[str, Any]]:
        conn = await session.connection(node)
        items = [_Wanted(e.topic, None, {"partition": e.partition, "fetch_offset": e.start,
                                         "partition_max_bytes": e.shape[0]}) for e in entries]
        await self._fetch_from(session.cluster, conn, items, version, request)
        for entry, item in zip(entries, items, strict=True):
            entry.throttle_ms = item.throttle_ms
        return {(item.name, item.partition["partition"]): item.upstream
                for item in items if item.upstream is not None}

    async def _resolve(self, view: ClusterView, version: int,
                       request: dict[str, Any]) -> list[_Wanted]:
        """The request's partitions with topic names (v13+ names topics by id)."""
        wanted: list[_Wanted] = []
        for topic in request["topics"]:
            topic_id = topic.get("topic_id") if version >= _FIRST_TOPIC_ID_VERSION else None
            name = topic.get("topic") or ""
            if topic_id is not None:
                name = view.topic_name(topic_id) or ""
                if not name:
                    try:
                        await view.refresh(None)
                    except UpstreamError as exc:
                        log.debug("fetch: metadata refresh failed: %s", exc)
                    name = view.topic_name(topic_id) or ""
            for part in topic["partitions"]:
                item = _Wanted(name, topic_id, part)
                if not name:
                    item.entry = error_partition(part["partition"], ErrorCode.UNKNOWN_TOPIC_ID)
                wanted.append(item)
        names = list(dict.fromkeys(w.name for w in wanted if w.entry is None))
        if names:
            try:
                known = await view.topics_for(names)
            except UpstreamError as exc:
                log.debug("fetch: no metadata from the cluster: %s", exc)
                known = {}
            for item in wanted:
                if item.entry is not None:
                    continue
                info = known.get(item.name)
                index = item.partition["partition"]
                if info is None:
                    item.entry = error_partition(index, UNREACHABLE)
                elif info.error_code or index not in info.partitions:
                    code = topic_error(info.error_code or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    item.entry = error_partition(index, downstream_error(fetch.SPEC.key, version, code))
        return wanted

    async def _fetch_from(self, view: ClusterView, conn: UpstreamConnection, items: list[_Wanted],
                          version: int, request: dict[str, Any]) -> None:
        """One upstream Fetch for the partitions ``conn``'s broker leads; fills each item."""
        upstream_version = conn.version(fetch.SPEC)
        body = self._upstream_request(view, upstream_version, version, request, items)
        wait = max(0, request.get("max_wait_ms", 0)) / 1000
        answer = await conn.request(fetch.SPEC, upstream_version, body,
                                    timeout=self.cluster.request_timeout + wait)
        node = conn.node_id
        throttle = max(0, answer.get("throttle_time_ms", 0))
        for item in items:
            item.throttle_ms = throttle
        if answer.get("error_code"):
            code = downstream_error(fetch.SPEC.key, version, answer["error_code"])
            self.cluster.state.warn(f"fetch at upstream broker {node}", f"error {answer['error_code']}")
            for item in items:
                item.entry = error_partition(item.partition["partition"], code)
            return
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for topic in answer["responses"]:
            name = topic.get("topic") or ""
            if upstream_version >= _FIRST_TOPIC_ID_VERSION:
                name = view.topic_name(topic.get("topic_id") or ZERO_UUID) or ""
            for part in topic["partitions"]:
                results[(name, part["partition_index"])] = part
        for item in items:
            index = item.partition["partition"]
            part = results.get((item.name, index))
            if part is None:
                item.entry = error_partition(index, UNREACHABLE)
                continue
            item.upstream = part

    def _finish(self, view: ClusterView, version: int, wanted: list[_Wanted]) -> None:
        """The downstream partitions from the upstream ones (converting first batches)."""
        for item in wanted:
            if item.entry is None and item.upstream is not None:
                item.entry = self._downstream_partition(view, version, item, item.upstream)
                item.upstream = None

    def _upstream_request(self, view: ClusterView, upstream_version: int, version: int,
                          request: dict[str, Any], items: list[_Wanted], *,
                          capped: bool = True) -> dict[str, Any]:
        """The upstream Fetch for ``items``; ``capped``: its sizes within
        ``upstream_fetch_max_bytes`` (what the gateway holds of it), else the client's own."""
        cap = self.upstream_fetch_max_bytes if capped else _INT32_MAX
        max_bytes = request.get("max_bytes", _INT32_MAX) if version >= 3 else _INT32_MAX
        topics = []
        for name, parts in group_by_topic((item.name, item.partition) for item in items):
            info = view.topics.get(name)
            topics.append({"topic": name, "topic_id": info.topic_id if info is not None else ZERO_UUID,
                           "partitions": [{
                               "partition": part["partition"],
                               "current_leader_epoch": -1,
                               "fetch_offset": part["fetch_offset"],
                               "last_fetched_epoch": -1,
                               "log_start_offset": -1,
                               "partition_max_bytes": min(part["partition_max_bytes"], cap),
                           } for part in parts]})
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

    def _downstream_partition(self, view: ClusterView, version: int, item: _Wanted,
                              part: dict[str, Any]) -> dict[str, Any]:
        index = item.partition["partition"]
        fetch_offset = item.partition["fetch_offset"]
        code = part["error_code"]
        if code in RETRIABLE_ROUTING_ERRORS:
            view.invalidate(item.name)
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
        # in these records and the fetch offset, which fixes where the records start. Sharing
        # across principals leaks nothing: a hit needs the very input bytes, which this client
        # got from the cluster as its own identity (docs/guide/gateway.md#secured-clusters).
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
            item.undecodable = f"fetch {name}-{index} at {fetch_offset}: upstream records do not decode: {exc}"
            return error_partition(index, ErrorCode.CORRUPT_MESSAGE)


def _asked(upstream_version: int, body: dict[str, Any]) -> tuple[Any, ...]:
    """What an upstream Fetch asks, but for how long it waits: an answer fetched ahead serves
    the client's fetch only when this is the same."""
    return (upstream_version, body["max_bytes"], body["isolation_level"],
            tuple((t["topic"], t["topic_id"], tuple(
                (p["partition"], p["fetch_offset"], p["partition_max_bytes"])
                for p in t["partitions"])) for t in body["topics"]))


def _predicted(body: dict[str, Any], next_offsets: dict[tuple[str | bytes, int], int],
               upstream_version: int) -> dict[str, Any]:
    """``body`` asked again from each partition's next offset (unchanged where its answer had
    no whole batch), without waiting."""
    topics = []
    for topic in body["topics"]:
        named: str | bytes = topic["topic"] if upstream_version < _FIRST_TOPIC_ID_VERSION \
            else topic["topic_id"].bytes
        topics.append(dict(topic, partitions=[
            dict(p, fetch_offset=next_offsets.get((named, p["partition"]), p["fetch_offset"]))
            for p in topic["partitions"]]))
    return dict(body, topics=topics, max_wait_ms=0, min_bytes=0)


async def _answer_shows_records(lane: SpliceLane, version: int, size: int, timeout: float) -> bool:
    """Whether the answer of ``size`` bytes the lane is reading (its head read) is seen to hold
    records, from its framing peeked as soon as it shows; empty, undecided (more framing than
    one peek) or unreadable is not."""

    def decide(data: bytes) -> bool | None:
        scanner = FetchResponseScanner(version, size)
        position = 0
        while True:
            try:
                step = scanner.scan(memoryview(data)[position:])
            except RemoteProtocolError:  # the send that passes it on says so, and ends it
                return False
            if step is None:
                return None
            if step.records:
                return True
            if step.done:
                return False
            position += step.framing

    return await lane.peek_until(min(size - 4, 16 << 10), timeout, decide)


def _before_first_zstd(records: bytes | memoryview) -> int | None:
    """The byte position of the first zstd batch (``None``: there is none)."""
    if not records:
        return None
    for batch in MemoryRecords(records).batches():
        if batch.compression == Compression.ZSTD:
            return batch.position
    return None

