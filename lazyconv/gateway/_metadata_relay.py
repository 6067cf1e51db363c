"""Metadata through the gateway: the cluster as one broker, the gateway itself, leading every
partition (docs/guide/gateway.md says why), answered from the upstream cluster's metadata cache.

Topics asked by id (Metadata v12) are named from the cache (refreshed once when an id is not in
it); a topic the cluster did not answer for is LEADER_NOT_AVAILABLE (retriable), an id nobody
knows UNKNOWN_TOPIC_ID. Partition errors reach the client as codes its version knows
(:mod:`lazyconv.gateway._error_map`); when the cluster cannot be reached, what the cache still
holds is answered, topics asked by id included (an id not in it is LEADER_NOT_AVAILABLE then).
The authorized operations a v8+ request asks for are the cluster's answer to the client's
upstream identity: a topic's from the cluster's Metadata (which the cache always asks for), the
cluster's (v8-10) from its DescribeCluster.
"""

from __future__ import annotations

import logging
from typing import Any

from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, downstream_error
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.net._model import Listener
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._schema import ZERO_UUID

log = logging.getLogger(__name__)

_FIRST_BY_ID_VERSION = 12  # Metadata asks for topics by id (a null name) from v12 on

__all__ = ["MetadataRelay"]

_LEADER_NOT_AVAILABLE = 5
_OMITTED = metadata.AUTHORIZED_OPERATIONS_OMITTED  # an authorized-operations field not asked for
_LAST_CLUSTER_OPERATIONS_VERSION = 10  # Metadata v8-10 answer the cluster's operations


class MetadataRelay:
    """Answers downstream Metadata requests from the upstream cluster's metadata."""

    def __init__(self, cluster: UpstreamCluster) -> None:
        self.cluster = cluster

    async def metadata(self, session: UpstreamSession, version: int, request: dict[str, Any],
                       listener: Listener) -> dict[str, Any]:
        """The response body: ``listener`` is the only broker and leads every partition; the
        topics are those the cluster describes to the client's upstream identity."""
        cluster = session.cluster
        names: list[str] | None = None
        asked_ids: list[Any] = []
        if not metadata.asks_for_every_topic(version, request["topics"]):
            names = []
            for topic in request["topics"]:
                topic_id = topic.get("topic_id")
                if topic.get("name"):
                    names.append(topic["name"])
                elif version >= _FIRST_BY_ID_VERSION and topic_id is not None and topic_id != ZERO_UUID:
                    asked_ids.append(topic_id)
                else:  # an empty name (or the zero id): asked as such, as before ids
                    names.append("")
        auto_create = request.get("allow_auto_topic_creation", True) if version >= 4 else True
        id_names: dict[Any, str | None] = {}
        answered = True  # whether the cluster answered (else the cache does)
        try:
            if asked_ids:
                await cluster.topics_for(None)
                if any(cluster.topic_name(i) is None for i in asked_ids):
                    await cluster.refresh(None)  # a topic created since the last listing
                id_names = {i: cluster.topic_name(i) for i in asked_ids}
                names = (names or []) + [n for n in id_names.values() if n]
            if names is not None:
                names = list(dict.fromkeys(names))  # a topic asked twice is answered once
            known = await cluster.topics_for(names, allow_auto_create=auto_create)
        except UpstreamError as exc:
            log.debug("metadata: the cluster did not answer: %s", exc)
            answered = False
            if asked_ids and not id_names:  # the ids asked are named from the cache too
                id_names = {i: cluster.topic_name(i) for i in asked_ids}
                names = list(dict.fromkeys((names or []) + [n for n in id_names.values() if n]))
            # every topic: the cache as a list of every topic names them (not a name a lookup
            # found missing)
            known = cluster.listed() if names is None else \
                {n: cluster.topics[n] for n in names if n in cluster.topics}
        me = listener.node_id
        topics: list[dict[str, Any]] = []
        for name in (names if names is not None else sorted(known)):
            info = known.get(name)
            if info is None:
                # no answer from the cluster for it: retriable; an id nobody knows: unknown
                code = _LEADER_NOT_AVAILABLE if name else int(ErrorCode.UNKNOWN_TOPIC_ID)
                topics.append({"error_code": code, "name": name or None, "partitions": []})
                continue
            partitions = []
            for index, part in sorted(info.partitions.items()):
                leader = me if part.leader >= 0 else -1
                code = part.error_code
                if code in RETRIABLE_ROUTING_ERRORS and version < 1:
                    code = _LEADER_NOT_AVAILABLE
                partitions.append({"error_code": downstream_error(metadata.SPEC.key, version, code),
                                   "partition_index": index, "leader_id": leader,
                                   "leader_epoch": part.leader_epoch,
                                   "replica_nodes": [me], "isr_nodes": [me] if leader >= 0 else []})
            topics.append({"error_code": downstream_error(metadata.SPEC.key, version, info.error_code),
                           "name": name, "topic_id": info.topic_id, "is_internal": info.is_internal,
                           "partitions": partitions,
                           "topic_authorized_operations": info.authorized_operations if
                           request.get("include_topic_authorized_operations") else _OMITTED})
        for topic_id, found in id_names.items():  # ids nobody knows: never asked by an empty name
            if found is None:  # unknown to the cache while the cluster is away: retriable
                code = int(ErrorCode.UNKNOWN_TOPIC_ID) if answered else _LEADER_NOT_AVAILABLE
                topics.append({"error_code": code, "name": None, "topic_id": topic_id,
                               "partitions": []})
        answer = {"throttle_time_ms": 0,
                  "brokers": [{"node_id": me, "host": listener.host, "port": listener.port}],
                  "cluster_id": cluster.cluster_id, "controller_id": me, "topics": topics}
        if version <= _LAST_CLUSTER_OPERATIONS_VERSION and \
                request.get("include_cluster_authorized_operations"):
            answer["cluster_authorized_operations"] = await cluster.cluster_authorized_operations()
        return answer
