"""The gateway's request handler: old versions downstream, Kafka 4 versions upstream.

:class:`GatewayHandler` plays :class:`~lazyconv.net._model.RequestHandler` for the shared
connection loop (:mod:`lazyconv.net._server`), like ``serve``'s broker does, but answers from a
real cluster. Each downstream connection gets an :class:`~lazyconv.gateway._upstream.UpstreamSession`
(its own upstream connections), so no client's long poll or mistake reaches another's stream.

Routing: the gateway presents itself as the whole cluster, a single broker that leads every
partition (docs/guide/gateway.md says why), and sends each partition's requests to its real
leader. Served downstream: ApiVersions, Metadata, Fetch, ListOffsets, Produce and the group
APIs (:mod:`lazyconv.gateway._group_relay`) at every version lazyconv speaks; anything else closes
the connection, as a broker does with a request it does not know.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from lazyconv.errors import RemoteProtocolError, UpstreamError
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, downstream_error
from lazyconv.gateway._fetch_relay import DEFAULT_UPSTREAM_FETCH_MAX_BYTES, FetchRelay
from lazyconv.gateway._group_relay import DOWNSTREAM_CAPS, GROUP_APIS, GroupRelay
from lazyconv.gateway._produce_relay import ProduceRelay
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.net._model import Listener, Response, reply
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._error_codes import ErrorCode
from lazyconv.protocol._headers import decode_request_header
from lazyconv.protocol._primitives import Reader

log = logging.getLogger(__name__)

__all__ = ["GatewayHandler", "GATEWAY_APIS"]

# What the gateway answers downstream, at every version the protocol layer declares (but
# DOWNSTREAM_CAPS).
GATEWAY_APIS: tuple[ApiSpec, ...] = (produce.SPEC, fetch.SPEC, list_offsets.SPEC, metadata.SPEC,
                                     api_versions.SPEC, *GROUP_APIS)
_LEADER_NOT_AVAILABLE = 5


class GatewayHandler:
    """Answers downstream requests through an :class:`UpstreamCluster`."""

    def __init__(self, cluster: UpstreamCluster, listeners: list[Listener], *,
                 chunk_size: int = 131072,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 workers: ConversionWorkers | None = None) -> None:
        if not listeners:
            raise ValueError("a gateway needs at least one listener")
        self.cluster = cluster
        self.listeners = listeners
        self.apis = {spec.key: spec for spec in GATEWAY_APIS}
        self.fetches = FetchRelay(cluster, chunk_size=chunk_size,
                                  upstream_fetch_max_bytes=upstream_fetch_max_bytes, workers=workers)
        self.produces = ProduceRelay(cluster, workers=workers)
        self.groups = GroupRelay(cluster)
        self.max_versions = {spec.key: DOWNSTREAM_CAPS.get(spec.key, spec.max_version)
                             for spec in GATEWAY_APIS}
        self.request_counts: Counter[tuple[int, int]] = Counter()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Nothing runs in the background: metadata is refreshed when requests need it."""

    def close(self) -> None:
        self.cluster.close()

    def new_session(self, peer: str) -> UpstreamSession:
        """The upstream connections of one downstream connection (closed with it)."""
        return UpstreamSession(self.cluster)

    def api_version_table(self) -> list[dict[str, int]]:
        return [{"api_key": key, "min_version": spec.min_version,
                 "max_version": self.max_versions[key]}
                for key, spec in sorted(self.apis.items())]

    async def handle(self, frame: bytes | memoryview, listener: Listener, peer: str = "",
                     session: UpstreamSession | None = None) -> Response | None:
        """Answer one request frame (header + body); raises :class:`RemoteProtocolError` for a request
        that must close the connection."""
        if session is None:  # a caller without sessions: one for this request only
            session = self.new_session(peer)
            try:
                return await self.handle(frame, listener, peer, session)
            finally:
                session.close()
        reader = Reader(frame)
        if reader.remaining < 8:
            raise RemoteProtocolError(f"request of {reader.remaining} bytes is shorter than a header", 0)
        api_key = reader.int16("request_api_key")
        version = reader.int16("request_api_version")
        reader.pos = 0
        spec = self.apis.get(api_key)
        if spec is None:
            raise RemoteProtocolError(f"API key {api_key} is not served by the gateway", 0)
        if not spec.min_version <= version <= self.max_versions[api_key]:
            if api_key == api_versions.API_KEY:
                header = decode_request_header(reader, 1)
                fallback = api_versions.unsupported_version_response(self.api_version_table())
                return reply(header["correlation_id"], 0, fallback)
            raise RemoteProtocolError(f"unsupported version {version} of {spec.name} (the gateway speaks "
                                f"{spec.min_version}-{self.max_versions[api_key]})", 2)
        self.request_counts[(api_key, version)] += 1
        header = decode_request_header(reader, spec.request_header_version(version))
        correlation_id = header["correlation_id"]
        body_at = reader.pos
        body = reader.view[body_at:]
        if api_key == fetch.SPEC.key:
            return await self.fetches.fetch(session, version, correlation_id, body)
        request = spec.decode_request(version, Reader(body, base=body_at), exact=False)
        answer: dict[str, Any] | None
        if api_key == produce.SPEC.key:
            answer = await self.produces.produce(session, version, request)
            if answer is None:
                return None
        elif api_key == metadata.SPEC.key:
            answer = await self.metadata(version, request, listener)
        elif api_key == list_offsets.SPEC.key:
            answer = await self.list_offsets(session, version, request)
        elif api_key == find_coordinator.SPEC.key:
            answer = await self.groups.find_coordinator(session, version, request, listener)
        elif api_key != api_versions.API_KEY:
            answer = await self.groups.relay(session, spec, version, request)
        else:
            answer = {"error_code": 0, "api_keys": self.api_version_table(), "throttle_time_ms": 0}
        return reply(correlation_id, spec.response_header_version(version),
                      spec.encode_response(version, answer))

    # -- Metadata -------------------------------------------------------------------------

    async def metadata(self, version: int, request: dict[str, Any],
                       listener: Listener) -> dict[str, Any]:
        """The cluster as one broker, the gateway itself, leading every partition."""
        names: list[str] | None = None
        asked_ids: list[Any] = []
        if not metadata.asks_for_every_topic(version, request["topics"]):
            names = []
            for topic in request["topics"]:
                if topic.get("name"):
                    names.append(topic["name"])
                elif topic.get("topic_id") is not None:
                    asked_ids.append(topic["topic_id"])
        auto_create = request.get("allow_auto_topic_creation", True) if version >= 4 else True
        try:
            if asked_ids:
                await self.cluster.topics_for(None)
                names = (names or []) + [self.cluster.topic_name(i) or "" for i in asked_ids]
            if names is not None:
                names = list(dict.fromkeys(names))  # a topic asked twice is answered once
            known = await self.cluster.topics_for(names, allow_auto_create=auto_create)
        except UpstreamError as exc:
            log.warning("metadata: the cluster did not answer: %s", exc)
            known = {n: self.cluster.topics[n] for n in (names or self.cluster.topics)
                     if n in self.cluster.topics}
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
                           "partitions": partitions})
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": me, "host": listener.host, "port": listener.port}],
                "cluster_id": self.cluster.cluster_id, "controller_id": me, "topics": topics}

    # -- ListOffsets ----------------------------------------------------------------------

    async def list_offsets(self, session: UpstreamSession, version: int,
                           request: dict[str, Any]) -> dict[str, Any]:
        """Each partition asked of its leader with ListOffsets ≥ v1; a v0 client gets the one
        offset as its ``old_style_offsets`` list (docs/guide/gateway.md)."""
        asked = [(t["name"], p) for t in request["topics"] for p in t["partitions"]]
        answers: dict[tuple[str, int], dict[str, Any]] = {}
        names = list(dict.fromkeys(name for name, _ in asked))
        try:
            await self.cluster.topics_for(names)
        except UpstreamError as exc:
            log.warning("list offsets: no metadata from the cluster: %s", exc)
        by_leader: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        for name, part in asked:
            leader = self.cluster.leader(name, part["partition_index"])
            info = self.cluster.topics.get(name)
            if info is not None and (info.error_code or part["partition_index"] not in info.partitions):
                answers[(name, part["partition_index"])] = {
                    "error_code": info.error_code or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
            elif leader is None:
                answers[(name, part["partition_index"])] = {"error_code": UNREACHABLE}
            else:
                by_leader.setdefault(leader, []).append((name, part))
        isolation = request.get("isolation_level", 0) if version >= 2 else 0

        async def ask(node: int, items: list[tuple[str, dict[str, Any]]]) -> None:
            topics: list[dict[str, Any]] = []
            for name, part in items:
                if not topics or topics[-1]["name"] != name:
                    topics.append({"name": name, "partitions": []})
                topics[-1]["partitions"].append({"partition_index": part["partition_index"],
                                                 "current_leader_epoch": -1,
                                                 "timestamp": part["timestamp"]})
            try:
                conn = await session.connection(node)
                uv = conn.version(list_offsets.SPEC)
                answer = await conn.request(list_offsets.SPEC, uv, {
                    "replica_id": -1, "isolation_level": isolation, "topics": topics})
            except UpstreamError as exc:
                log.warning("list offsets at upstream broker %d failed: %s", node, exc)
                self.cluster.invalidate()
                for name, part in items:
                    answers[(name, part["partition_index"])] = {"error_code": UNREACHABLE}
                return
            for topic in answer["topics"]:
                for p in topic["partitions"]:
                    answers[(topic["name"], p["partition_index"])] = p

        await asyncio.gather(*(ask(node, items) for node, items in by_leader.items()))
        topics_out: list[dict[str, Any]] = []
        for name, part in asked:
            got = answers.get((name, part["partition_index"]), {"error_code": UNREACHABLE})
            code = got.get("error_code", 0)
            if code in RETRIABLE_ROUTING_ERRORS:
                self.cluster.invalidate(name)
            offset = got.get("offset", -1) if not code else -1
            entry = {"partition_index": part["partition_index"],
                     "error_code": downstream_error(list_offsets.SPEC.key, version, code),
                     "timestamp": got.get("timestamp", -1) if not code else -1,
                     "offset": offset, "leader_epoch": got.get("leader_epoch", -1),
                     "old_style_offsets": [offset] if offset >= 0 and part.get("max_num_offsets", 1) > 0 else []}
            if not topics_out or topics_out[-1]["name"] != name:
                topics_out.append({"name": name, "partitions": []})
            topics_out[-1]["partitions"].append(entry)
        return {"throttle_time_ms": 0, "topics": topics_out}
