"""ListOffsets through the gateway: each partition asked of its leader with a version Kafka 4
accepts (≥ v1); a v0 client gets the one offset as its ``old_style_offsets`` list
(docs/guide/gateway.md); a partition named twice is asked once per timestamp (v1+ refuses it
named twice in one request: a further timestamp takes one more request), so each entry gets
the answer for its own timestamp, as Kafka 3.9 answered v0. v1+ (converted when the cluster
does not serve the client's version) refuses a partition named twice on each entry without
asking the leader, as Kafka 3.9 does (KafkaApis, its ``duplicatePartitions``):
:func:`named_twice_error`, TOPIC_AUTHORIZATION_FAILED in a topic the client may not describe
(Kafka checks that first), INVALID_REQUEST otherwise; the relayed versions get the cluster's
own answer, or the same refusal where the gateway cannot route the partition. A negative
timestamp the client's version does not define (v0 knows -1 and -2 only; -3 came with v7, -4
with v8, -5 with v9) is answered UNSUPPORTED_VERSION without asking, as Kafka answers it, since
the upstream version would read it as something else (the largest timestamp, the local or
tiered log's offsets).
Errors reach the client as codes its version knows (:mod:`lazyconv.gateway._error_map`).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, downstream_error
from lazyconv.gateway._routing import ask_leaders, route_to_leaders
from lazyconv.gateway._upstream import (
    ClusterView,
    UpstreamCluster,
    UpstreamConnection,
    UpstreamSession,
)
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol._grouping import group_by_topic

log = logging.getLogger(__name__)

__all__ = ["ListOffsetsRelay", "named_twice_error"]

_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def named_twice_error(cluster: ClusterView, topic: str) -> int | None:
    """What Kafka answers each entry of a partition of ``topic`` that a ListOffsets v1+ names
    twice: it checks first that the client may describe the topic (TOPIC_AUTHORIZATION_FAILED,
    as the Metadata of the client's identity says), then partitions named twice
    (INVALID_REQUEST), before it looks for the partition or its leader (3.9 KafkaApis, 4.0
    ReplicaManager.fetchOffset). ``None`` while that metadata is not known."""
    info = cluster.topics.get(topic)
    if info is None:
        return None
    return _TOPIC_AUTHORIZATION_FAILED if info.error_code == _TOPIC_AUTHORIZATION_FAILED \
        else _INVALID_REQUEST


@dataclass
class _Asked:
    """One partition of the downstream request, in request order, and its upstream answer."""

    topic: str
    partition: dict[str, Any]
    answer: dict[str, Any] = field(default_factory=lambda: {"error_code": UNREACHABLE})


class ListOffsetsRelay:
    """Answers downstream ListOffsets requests through the partitions' leaders."""

    def __init__(self, cluster: UpstreamCluster) -> None:
        self.cluster = cluster

    async def list_offsets(self, session: UpstreamSession, version: int,
                           request: dict[str, Any]) -> dict[str, Any]:
        asked = [_Asked(t["name"], p) for t in request["topics"] for p in t["partitions"]]
        named = Counter((a.topic, a.partition["partition_index"]) for a in asked)

        def named_twice(item: _Asked) -> bool:
            return version >= 1 and named[(item.topic, item.partition["partition_index"])] > 1

        twice = [a for a in asked if named_twice(a)]
        to_ask = []
        for item in asked:
            if named_twice(item):
                continue
            if list_offsets.timestamp_supported(item.partition["timestamp"], version):
                to_ask.append(item)
            else:
                item.answer = {"error_code": _UNSUPPORTED_VERSION}
        try:
            await session.cluster.topics_for(list(dict.fromkeys(a.topic for a in twice + to_ask)))
        except UpstreamError as exc:
            log.debug("list offsets: no metadata from the cluster: %s", exc)
        for item in twice:  # refused before the timestamp is looked at, as Kafka does
            code = named_twice_error(session.cluster, item.topic)
            item.answer = {"error_code": UNREACHABLE if code is None else code}
        isolation = request.get("isolation_level", 0) if version >= 2 else 0

        def fail(item: _Asked, code: int) -> None:
            item.answer = {"error_code": code}

        throttles: list[int] = []  # the leaders' quota throttle times

        async def ask(conn: UpstreamConnection, items: list[_Asked]) -> None:
            # v1+ refuses a partition named twice in one request with INVALID_REQUEST, which v0
            # (that answered each entry for its own timestamp) predates: each request names a
            # partition once, and a further timestamp asked of it takes a round of its own
            rounds: list[dict[tuple[str, int], int]] = []  # (topic, partition) -> timestamp
            for a in items:
                key, timestamp = (a.topic, a.partition["partition_index"]), a.partition["timestamp"]
                free = next((r for r in rounds if r.get(key, timestamp) == timestamp), None)
                if free is None:
                    free = {}
                    rounds.append(free)
                free[key] = timestamp
            got: dict[tuple[str, int, int], dict[str, Any]] = {}
            for asking in rounds:
                topics = [{"name": name, "partitions": parts} for name, parts in group_by_topic(
                    (topic, {"partition_index": index, "current_leader_epoch": -1,
                             "timestamp": timestamp})
                    for (topic, index), timestamp in asking.items())]
                answer = await conn.request(list_offsets.SPEC, conn.version(list_offsets.SPEC), {
                    "replica_id": -1, "isolation_level": isolation, "topics": topics})
                throttles.append(answer.get("throttle_time_ms", 0))
                for t in answer["topics"]:
                    for p in t["partitions"]:
                        timestamp = asking.get((t["name"], p["partition_index"]))
                        if timestamp is not None:
                            got[(t["name"], p["partition_index"], timestamp)] = p
            for item in items:
                item.answer = got.get((item.topic, item.partition["partition_index"],
                                       item.partition["timestamp"]), {"error_code": UNREACHABLE})

        by_leader = route_to_leaders(session.cluster, to_ask,
                                     lambda a: (a.topic, a.partition["partition_index"]), fail)
        await ask_leaders(session, by_leader, ask, fail, "list offsets")
        # the longest of the leaders' throttle times: the field is v2's, but the gateway holds
        # an older client's answer for it (lazyconv.gateway._throttle)
        return {"throttle_time_ms": max(throttles, default=0), "topics": [
            {"name": name, "partitions": entries}
            for name, entries in group_by_topic((a.topic, self._entry(session, version, a))
                                                for a in asked)]}

    def _entry(self, session: UpstreamSession, version: int, item: _Asked) -> dict[str, Any]:
        got, part = item.answer, item.partition
        code = got.get("error_code", 0)
        if code in RETRIABLE_ROUTING_ERRORS:
            session.cluster.invalidate(item.topic)
        offset = got.get("offset", -1) if not code else -1
        return {"partition_index": part["partition_index"],
                "error_code": downstream_error(list_offsets.SPEC.key, version, code),
                "timestamp": got.get("timestamp", -1) if not code else -1,
                "offset": offset, "leader_epoch": got.get("leader_epoch", -1),
                "old_style_offsets": [offset] if offset >= 0 and part.get("max_num_offsets", 1) > 0 else []}
