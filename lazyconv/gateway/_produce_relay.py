"""Produce through the gateway: a downstream Produce of any version sent upstream as Produce ≥ v3
with record format v2 (docs/guide/gateway.md).

Produce v0–2 carry magic 0/1 message sets, which Kafka 4 refuses: each partition's set is
up-converted to one v2 batch as Kafka's LogValidator did before 4.0
(:func:`lazyconv.conversion._up.up_convert`: CreateTime timestamps kept, v0 messages without one, the
wrapper's codec kept, no producer id). A set that does not validate is refused to the client with
the error a 2.x/3.x broker gave (e.g. CORRUPT_MESSAGE), without reaching the cluster; the other
partitions of the request are not affected. Produce v3+ batches are relayed as they came, byte
for byte (an idempotent or transactional producer's ids, epochs and sequences included), at the
client's own version where the leader serves it.

The partitions are grouped by their upstream leader and each leader gets one request (the
client's acks and timeout kept; acks=0 requests are sent and not answered, as a broker does; one
with a partition the gateway fails itself raises UnansweredRequestError, which closes the
client's connection as a broker closes it).
:meth:`ProduceRelay.send` returns once those are written, so the connection loop can send a
client's next Produce upstream while this one's answers are on their way (a producer's
requests in flight stay in flight through the gateway); the answers go back in order.
Every upstream error reaches the client as a code its version knows
(:mod:`lazyconv.gateway._error_map`); a leader that cannot be reached answers
NOT_LEADER_OR_FOLLOWER, which every client retries after asking for metadata again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lazyconv._futures import chained
from lazyconv.conversion._up import kafka_error_code, up_convert
from lazyconv.errors import ErrorCode, LazyconvError, UpstreamError
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, downstream_error
from lazyconv.gateway._metrics import count_v2_records, session_metrics
from lazyconv.gateway._on_loop import quick_to_up_convert
from lazyconv.gateway._routing import ask_leaders, leader_unreachable, route_to_leaders
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamConnection, UpstreamSession
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._grouping import group_by_topic

log = logging.getLogger(__name__)

__all__ = ["ProduceRelay"]

_FIRST_V2_PRODUCE_VERSION = 3


@dataclass
class _Part:
    """One partition of the downstream request, in request order."""

    topic: str
    index: int
    records: bytes | None
    answer: dict[str, Any] = field(default_factory=dict)
    answered: bool = False  # answered by the gateway itself, not sent upstream
    # what its up-conversion made: (source magic, source codec, records, message set bytes)
    converted: tuple[int, str, int, int] | None = None
    refused: str | None = None  # why its up-conversion refused it (logged on the event loop)
    throttle_ms: int = 0  # the throttle time of its leader's answer (a quota's)


def _response_body(parts: list[_Part]) -> dict[str, Any]:
    """The downstream Produce response body: every partition's answer, by topic."""
    return {"responses": [{"name": topic, "partition_responses": answers}
                          for topic, answers in group_by_topic((p.topic, p.answer) for p in parts)],
            # the upstream's quotas reach the client: the longest throttle of its leaders
            "throttle_time_ms": max((p.throttle_ms for p in parts), default=0)}


class ProduceRelay:
    """Answers downstream Produce requests through the upstream cluster."""

    def __init__(self, cluster: UpstreamCluster, *, max_decompressed_batch: int = 32 << 20,
                 workers: ConversionWorkers | None = None, quick_on_loop: bool = True) -> None:
        """``workers``: where message sets are up-converted (decompressing and compressing
        them is the costly part), so the event loop keeps serving other clients; with
        ``quick_on_loop`` small sets of a quick codec are up-converted on the loop
        (:mod:`~lazyconv.gateway._on_loop`)."""
        self.cluster = cluster
        self.workers = workers
        self.quick_on_loop = quick_on_loop
        self.max_decompressed_batch = max_decompressed_batch
        self.up_converted_partitions = 0
        self.refused_partitions = 0

    async def send(self, session: UpstreamSession, version: int,
                   request: dict[str, Any]) -> asyncio.Future[dict[str, Any]] | None:
        """Up-convert and send the request's partitions to their leaders; returns once every
        upstream request is written (so a next Produce of this client reaches each leader
        after this one, as its sequence numbers require), with the future of the downstream
        response body (cancelling it abandons the answers); ``None`` for acks=0, which has no
        answer (:class:`~lazyconv.errors.UnansweredRequestError` when a partition of it failed
        here: the connection is closed, as Kafka closes it)."""
        parts = [_Part(t["name"], p["index"], p["records"])
                 for t in request["topic_data"] for p in t["partition_data"]]
        for part in parts:
            part.answer = {"index": part.index, "error_code": 0, "base_offset": -1,
                           "log_append_time_ms": -1, "log_start_offset": -1,
                           "record_errors": [], "error_message": None}
        if version >= _FIRST_V2_PRODUCE_VERSION:
            session_, metrics = session_metrics()
            if metrics is not None and session_ is not None:  # the client's records, for its report
                session_.records_in += sum(count_v2_records(p.records)[1] for p in parts if p.records)
        elif self.workers is not None and not (self.quick_on_loop and quick_to_up_convert(p.records for p in parts)):
            await self.workers.run(self._up_convert_all, parts, version)
        else:  # quicker than the trip to a worker and back (two wake-ups of a thread)
            self._up_convert_all(parts, version)
        if version < _FIRST_V2_PRODUCE_VERSION:
            self._count_up_converted(parts)
        pending = [p for p in parts if not p.answer["error_code"] and not p.answered]
        names = list(dict.fromkeys(p.topic for p in pending))
        if names:
            try:
                await session.cluster.topics_for(names, allow_auto_create=True)
            except UpstreamError as exc:
                log.debug("produce: no metadata from the cluster: %s", exc)

        def fail(part: _Part, code: int) -> None:
            part.answer["error_code"] = downstream_error(produce.SPEC.key, version, code)

        applied: list[asyncio.Future[None]] = []

        async def ask(conn: UpstreamConnection, items: list[_Part]) -> None:
            answer = await self._send_to(conn, items, version, request)
            if answer is not None:
                applied.append(self._applied(session, conn, items, version, answer, fail))

        by_leader = route_to_leaders(session.cluster, pending, lambda p: (p.topic, p.index), fail)
        await ask_leaders(session, by_leader, ask, fail, "produce")
        if request["acks"] == 0:
            # no answer is read: a partition the gateway failed itself (an unknown or refused
            # topic, no leader, a set that does not up-convert, a leader not reached) closes
            # the connection, as Kafka closes it, so that the client notices
            failure = produce.unanswered_failure(_response_body(parts))
            if failure is not None:
                raise failure
            return None
        # every leader's answer applied to its partitions, then the response: callbacks, no task
        return chained(asyncio.gather(*applied), lambda _: _response_body(parts))

    def _applied(self, session: UpstreamSession, conn: UpstreamConnection, items: list[_Part],
                 version: int, answer: asyncio.Future[dict[str, Any]],
                 fail: Callable[[_Part, int], None]) -> asyncio.Future[None]:
        """``answer`` applied to ``items`` once it comes; a leader that does not answer fails
        them as unreachable."""
        def unanswered(error: Exception) -> None:
            if not isinstance(error, UpstreamError):
                raise error
            assert conn.node_id is not None  # a session's connections know their broker
            leader_unreachable(session, conn.node_id, items, fail, "produce", error)

        return chained(answer, lambda got: self._answered(session, items, version, got),
                       on_error=unanswered)

    def _count_up_converted(self, parts: list[_Part]) -> None:
        """What the parts' up-conversions made (and refused), counted on the event loop (they may
        have run on a worker's thread; the metrics' plain numbers are the loop's alone)."""
        session, metrics = session_metrics()
        for part in parts:
            if part.refused is not None:
                # a producer retries what was refused (CORRUPT_MESSAGE is retriable): said
                # once, then at most once a minute with the count, not once per request
                self.cluster.state.warn("Produce up-conversion", part.refused)
            if part.converted is None:
                continue
            self.up_converted_partitions += 1
            if metrics is not None and session is not None:
                metrics.up_converted(*part.converted)
                session.records_in += part.converted[2]

    def _up_convert_all(self, parts: list[_Part], version: int) -> None:
        for part in parts:
            self._up_convert(part, version)

    def _up_convert(self, part: _Part, version: int) -> None:
        if part.records is None:
            part.answer["error_code"] = int(ErrorCode.CORRUPT_MESSAGE)
            return
        try:
            converted = up_convert(part.records, produce_version=version,
                                   max_decompressed_size=self.max_decompressed_batch)
        except LazyconvError as exc:
            self.refused_partitions += 1
            part.answer["error_code"] = downstream_error(produce.SPEC.key, version,
                                                         kafka_error_code(exc))
            part.refused = f"refused produce to {part.topic}-{part.index}: {exc}"
            return
        part.converted = (converted.source_magic or 0, converted.source_compression.name.lower(),
                          converted.record_count, len(part.records))
        part.records = converted.batch
        if not converted.record_count:
            part.answered = True  # Kafka appended nothing and answered NONE, base offset -1

    async def _send_to(self, conn: UpstreamConnection, items: list[_Part], version: int,
                       request: dict[str, Any]) -> asyncio.Future[dict[str, Any]] | None:
        """Send ``items`` to their leader; the future of its answer (``None`` for acks=0)."""
        acks = request["acks"]
        topics = [{"name": topic, "partition_data": data} for topic, data in group_by_topic(
            (part.topic, {"index": part.index, "records": part.records}) for part in items)]
        # the client's own version where the broker takes it: its semantics are the version's
        # (v12: a producer of transaction protocol 2, KIP-890); else the highest both speak
        if version >= _FIRST_V2_PRODUCE_VERSION and conn.serves(produce.SPEC.key, version):
            upstream_version = version
        else:
            upstream_version = conn.version(produce.SPEC)
        body = {"transactional_id": request.get("transactional_id"), "acks": acks,
                "timeout_ms": request["timeout_ms"], "topic_data": topics}
        if acks == 0:
            await conn.send_only(produce.KAFKA_SPEC, upstream_version, body)
            return None
        answer = await conn.ask(
            produce.KAFKA_SPEC, upstream_version, body,
            timeout=self.cluster.request_timeout + max(0, request["timeout_ms"]) / 1000)
        for part in items:
            part.records = None  # written upstream: not kept while the answer is awaited
        return answer

    @staticmethod
    def _answered(session: UpstreamSession, items: list[_Part], version: int,
                  answer: dict[str, Any]) -> None:
        results = {(t["name"], p["index"]): p for t in answer["responses"]
                   for p in t["partition_responses"]}
        throttle = max(0, answer.get("throttle_time_ms", 0))
        for part in items:
            part.throttle_ms = throttle
            got = results.get((part.topic, part.index))
            if got is None:
                part.answer["error_code"] = UNREACHABLE
                continue
            code = got["error_code"]
            if code in RETRIABLE_ROUTING_ERRORS:
                session.cluster.invalidate(part.topic)
            part.answer.update(
                error_code=downstream_error(produce.SPEC.key, version, code),
                base_offset=got["base_offset"],
                log_append_time_ms=got.get("log_append_time_ms", -1),
                log_start_offset=got.get("log_start_offset", -1),
                record_errors=got.get("record_errors") or [],
                error_message=got.get("error_message"),
            )
