"""The request handler behind every listener: one Kafka "broker" over a log directory.

:class:`Broker.handle` takes one request frame (the bytes after the size prefix) and returns a
:class:`Response` (a Send plus what must be closed when it is done) or ``None`` (acks=0 Produce).
It does no socket I/O: :mod:`lazyconv.serve.server` owns the sockets. Fetch is async because a
fetch below ``MinBytes`` waits (up to ``MaxWaitMs``) for the log to grow, as a broker does, and
Produce may be delayed per listener.

Requests it cannot parse, API keys it does not speak and versions outside its ranges raise
:class:`~lazyconv.errors.ProtocolError`; the connection is then closed, which is what a Kafka
broker does with an invalid request. The one exception is ApiVersions, which answers an unknown
version with error 35 and its version table (KIP-511).
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lazyconv.errors import ConfigurationError, ProtocolError, RecordsError
from lazyconv.lazy import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, LazyDownConvertedRecords
from lazyconv.protocol import (
    api_versions,
    describe_groups,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
)
from lazyconv.protocol import fetch as fetch_api
from lazyconv.protocol.api import ApiSpec
from lazyconv.protocol.decision import (
    FetchBudget,
    broker_partition_response,
    error_partition,
    is_follower_fetch,
)
from lazyconv.protocol.error_codes import ErrorCode
from lazyconv.protocol.fetch import FetchRequest, FetchResponse
from lazyconv.protocol.headers import decode_request_header, encode_response_header
from lazyconv.protocol.primitives import Reader
from lazyconv.records import FileRecords
from lazyconv.send import BytesSend, Send
from lazyconv.serve.group_apis import GroupApis
from lazyconv.serve.group_coordinator import CoordinatorConfig
from lazyconv.serve.logdir import LogDirectory, OffsetOutOfRange, PartitionLog, Region
from lazyconv.serve.offset_store import OffsetStore
from lazyconv.serve.offsets import split_entries

log = logging.getLogger(__name__)

__all__ = ["Broker", "Listener", "TopicConfig", "Response", "SUPPORTED_VERSIONS"]

FETCH_KEY = fetch_api.SPEC.key
FETCH_MIN_VERSION = fetch_api.SPEC.min_version
FETCH_MAX_VERSION = fetch_api.SPEC.max_version

# The APIs this broker answers; their version ranges come from the protocol declarations.
SERVED_APIS: tuple[ApiSpec, ...] = (
    produce.SPEC,
    fetch_api.SPEC,
    list_offsets.SPEC,
    metadata.SPEC,
    find_coordinator.SPEC,
    api_versions.SPEC,
    init_producer_id.SPEC,
    join_group.SPEC,
    sync_group.SPEC,
    heartbeat.SPEC,
    leave_group.SPEC,
    offset_commit.SPEC,
    offset_fetch.SPEC,
    list_groups.SPEC,
    describe_groups.SPEC,
)
# api key -> (min version, max version, first flexible version or None), derived from SERVED_APIS
SUPPORTED_VERSIONS: dict[int, tuple[int, int, int | None]] = {
    spec.key: (spec.min_version, spec.max_version, spec.first_flexible) for spec in SERVED_APIS
}

# Transactions need a coordinator this server does not have: their InitProducerId is refused
# with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an error producers treat as fatal.
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
FIRST_PRODUCER_ID = 1000

# How often a waiting fetch looks at the log again.
FETCH_POLL_INTERVAL_S = 0.02


@dataclass(frozen=True)
class TopicConfig:
    """The topic settings that change what a fetch returns.

    ``compression_type`` is Kafka's ``compression.type`` ("producer", "zstd", ...): "zstd" makes
    fetches below v10 fail with UNSUPPORTED_COMPRESSION_TYPE. ``downconversion_enable`` is
    ``message.downconversion.enable``. The message format is always v2 (inter-broker protocol
    ≥ 3.0), so Fetch v0–1 get magic 0 and v2–3 magic 1.
    """

    compression_type: str = "producer"
    downconversion_enable: bool = True


@dataclass(frozen=True)
class Listener:
    """One advertised endpoint; each listener plays one broker (node id) in Metadata."""

    node_id: int
    host: str
    port: int
    produce_delay_ms: int = 0


@dataclass
class BrokerStats:
    """Counters over everything this broker answered (tests and logs read them)."""

    fetch_partitions: int = 0
    zero_copy_partitions: int = 0  # records sent straight from the file
    converted_partitions: int = 0  # records lazily down-converted
    partial_tail_responses: int = 0  # records that end inside a batch (cut by a byte limit)
    padded_bytes: int = 0  # overflow padding written by lazy sends (after they completed)
    converted_chunks: int = 0
    records_converted: int = 0
    zero_copy_bytes: int = 0  # bytes that went from a log file to a socket with os.sendfile


class _TrackedRecords(abc.ABC):
    """Wraps a partition's records so the broker learns what their send did.

    The send is accounted for by :meth:`close`, once the response is finished (or abandoned).
    """

    def __init__(self, records: Any, stats: BrokerStats) -> None:
        self._records = records
        self._stats = stats
        self._send: Any = None

    @property
    def size_in_bytes(self) -> int:
        return self._records.size_in_bytes

    def to_send(self) -> Send:
        self._send = self._records.to_send()
        return self._send

    def close(self) -> None:
        send, self._send = self._send, None
        if send is not None:
            self._account(send)

    @abc.abstractmethod
    def _account(self, send: Any) -> None:
        """Add what ``send`` did to the broker's stats."""


class _TrackedFileRecords(_TrackedRecords):
    """A file slice sent unconverted: how much went out zero-copy; closes the slice."""

    def _account(self, send: Any) -> None:
        self._stats.zero_copy_bytes += getattr(send, "zero_copy_bytes", 0)

    def close(self) -> None:
        super().close()
        self._records.close()


class _TrackedLazyRecords(_TrackedRecords):
    """Lazily converted records: padding, chunks and records converted by their send."""

    def _account(self, send: Any) -> None:
        self._stats.padded_bytes += getattr(send, "padding_bytes", 0)
        self._stats.converted_chunks += getattr(send, "chunks", 0)
        stats = getattr(send, "stats", None)
        if stats is not None:
            self._stats.records_converted += stats.records_converted


@dataclass(frozen=True)
class RequestContext:
    """Who asked: the client id from the request header and the listener it connected to."""

    client_id: str | None
    listener: Listener
    client_host: str = ""


@dataclass
class Response:
    """A response ready to be written, and what to release once it is written (or abandoned)."""

    send: Send
    resources: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for resource in self.resources:
            try:
                resource.close()
            except Exception:  # closing must never mask the error that ended the response
                log.exception("closing %r failed", resource)
        self.resources.clear()


class Broker:
    """Answers Kafka requests from a :class:`LogDirectory`."""

    def __init__(
        self,
        logdir: LogDirectory,
        listeners: list[Listener],
        *,
        chunk_size: int = 131072,
        downconversion_enable: bool = True,
        topic_configs: dict[str, TopicConfig] | None = None,
        cluster_id: str = "lazyconv",
        max_fetch_version: int = FETCH_MAX_VERSION,
        group_config: CoordinatorConfig | None = None,
        offsets_in_memory: bool = False,
    ) -> None:
        """``group_config``: the coordinator's session limits and initial rebalance delay;
        ``offsets_in_memory``: do not persist committed offsets under the log directory."""
        if not listeners:
            raise ValueError("a broker needs at least one listener")
        self.logdir = logdir
        self.listeners = list(listeners)
        self.chunk_size = chunk_size
        self.default_config = TopicConfig(downconversion_enable=downconversion_enable)
        self.topic_configs = dict(topic_configs or {})
        self.cluster_id = cluster_id
        if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigurationError(
                f"chunk size must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} bytes, got {chunk_size}"
            )
        if not FETCH_MIN_VERSION <= max_fetch_version <= FETCH_MAX_VERSION:
            raise ConfigurationError(
                f"max_fetch_version must be in {FETCH_MIN_VERSION}..{FETCH_MAX_VERSION}, got {max_fetch_version}"
            )
        # Capping Fetch makes the server look like an older broker to clients that negotiate
        # versions with ApiVersions (e.g. max 2 = a 0.10.0 broker: magic v1 for everyone).
        self.apis: dict[int, ApiSpec] = {spec.key: spec for spec in SERVED_APIS}
        self.max_versions: dict[int, int] = {spec.key: spec.max_version for spec in SERVED_APIS}
        self.max_versions[FETCH_KEY] = max_fetch_version
        self.stats = BrokerStats()
        self._next_producer_id = FIRST_PRODUCER_ID
        self.request_counts: Counter[tuple[int, int]] = Counter()  # (api key, version) -> requests
        store = OffsetStore(None if offsets_in_memory else logdir.root)
        self.groups = GroupApis(store, lambda topic, p: logdir.partition(topic, p) is not None,
                                config=group_config)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the timers (group sessions and rebalance timeouts) on the serving loop."""
        self.groups.start(loop)

    def close(self) -> None:
        """Stop the timers."""
        self.groups.stop()

    def topic_config(self, topic: str) -> TopicConfig:
        return self.topic_configs.get(topic, self.default_config)

    def leader_for(self, partition: int) -> Listener:
        return self.listeners[partition % len(self.listeners)]

    # -- dispatch --------------------------------------------------------------------------

    async def handle(self, frame: bytes | memoryview, listener: Listener,
                     peer: str = "") -> Response | None:
        """Answer one request frame (header + body). Raises ProtocolError for invalid ones."""
        reader = Reader(frame)
        if reader.remaining < 8:
            raise ProtocolError(f"request of {reader.remaining} bytes is shorter than a header", 0)
        api_key = reader.int16("request_api_key")
        version = reader.int16("request_api_version")
        reader.pos = 0
        spec = self.apis.get(api_key)
        if spec is None:
            raise ProtocolError(f"unsupported API key {api_key}", 0)
        low, high = spec.min_version, self.max_versions[api_key]
        if not low <= version <= high:
            if api_key == api_versions.API_KEY:
                header = decode_request_header(reader, 1)  # the body is unknown: not read
                fallback = api_versions.unsupported_version_response(self.api_version_table())
                return self._reply(header["correlation_id"], 0, fallback)
            raise ProtocolError(
                f"unsupported version {version} of {spec.name} (key {api_key}; this server speaks "
                f"{low}-{high})",
                2,
            )
        self.request_counts[(api_key, version)] += 1
        header = decode_request_header(reader, spec.request_header_version(version))
        correlation_id = header["correlation_id"]
        body_at = reader.pos
        body = reader.view[body_at:]
        log.debug("request %s v%d corr=%d client=%r", spec.name, version, correlation_id,
                  header.get("client_id"))
        if api_key == FETCH_KEY:
            return await self.fetch(version, correlation_id, body)
        request_reader = Reader(body, base=body_at)
        request = spec.decode_request(version, request_reader, exact=False)
        if request_reader.remaining:
            log.warning("%s v%d from %r: ignoring %d bytes after the request body", spec.name,
                        version, header.get("client_id"), request_reader.remaining)
        context = RequestContext(header.get("client_id"), listener, peer)
        if api_key == produce.API_KEY:
            answer = self.produce(version, request)
            if listener.produce_delay_ms > 0:
                await asyncio.sleep(listener.produce_delay_ms / 1000)
            if request["acks"] == 0:
                return None
        else:
            answer = self._handlers[api_key](version, request, context)
            if inspect.isawaitable(answer):
                answer = await answer
        encoded = spec.encode_response(version, answer)
        return self._reply(correlation_id, spec.response_header_version(version), encoded)

    @staticmethod
    def _reply(correlation_id: int, header_version: int, body: bytes) -> Response:
        header = encode_response_header(header_version, correlation_id)
        payload = len(header) + len(body)
        return Response(BytesSend(payload.to_bytes(4, "big") + header + body))

    def api_version_table(self) -> list[dict[str, int]]:
        """ApiVersions' list: every served API, from its declaration (Fetch possibly capped)."""
        return [
            {"api_key": key, "min_version": spec.min_version, "max_version": self.max_versions[key]}
            for key, spec in sorted(self.apis.items())
        ]

    @property
    def supported_versions(self) -> dict[int, tuple[int, int, int | None]]:
        """api key -> (min version, max version, first flexible version) as served."""
        return {key: (spec.min_version, self.max_versions[key], spec.first_flexible)
                for key, spec in self.apis.items()}

    @property
    def _handlers(self) -> dict[int, Any]:
        return {
            api_versions.API_KEY: self.api_versions,
            metadata.API_KEY: self.metadata,
            list_offsets.API_KEY: self.list_offsets,
            find_coordinator.API_KEY: self.find_coordinator,
            init_producer_id.API_KEY: self.init_producer_id,
            join_group.SPEC.key: lambda v, r, c: self.groups.join_group(v, r, c.client_id, c.client_host),
            sync_group.SPEC.key: lambda v, r, c: self.groups.sync_group(v, r),
            heartbeat.SPEC.key: lambda v, r, c: self.groups.heartbeat(v, r),
            leave_group.SPEC.key: lambda v, r, c: self.groups.leave_group(v, r),
            offset_commit.SPEC.key: lambda v, r, c: self.groups.offset_commit(v, r),
            offset_fetch.SPEC.key: lambda v, r, c: self.groups.offset_fetch(v, r),
            list_groups.SPEC.key: lambda v, r, c: self.groups.list_groups(v, r),
            describe_groups.SPEC.key: lambda v, r, c: self.groups.describe_groups(v, r),
        }

    def api_versions(self, version: int, request: dict[str, Any], context: RequestContext) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": self.api_version_table(), "throttle_time_ms": 0}

    def find_coordinator(self, version: int, request: dict[str, Any],
                         context: RequestContext) -> dict[str, Any]:
        """Every group and transactional id is coordinated by the listener that was asked."""
        listener = context.listener
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": [
                {"key": key, "node_id": listener.node_id, "host": listener.host, "port": listener.port,
                 "error_code": 0} for key in request["coordinator_keys"]]}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "node_id": listener.node_id, "host": listener.host, "port": listener.port}

    # -- Metadata, ListOffsets, Produce ----------------------------------------------------

    def metadata(self, version: int, request: dict[str, Any],
                 context: RequestContext | None = None) -> dict[str, Any]:
        """Brokers (one per listener), the cluster id and every asked topic with its id."""
        self.logdir.refresh()
        known = self.logdir.topics()
        asked: list[tuple[str | None, Any]]
        if request["topics"] is None:
            asked = [(name, None) for name in known]
        else:
            asked = [(t["name"], t.get("topic_id")) for t in request["topics"]]
        topics = []
        for name, topic_id in asked:
            if name is None:  # v12: asked by id
                name = self.logdir.topic_name(topic_id) if topic_id is not None else None
                if name is None:
                    topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "name": None,
                                   "topic_id": topic_id, "partitions": []})
                    continue
            if name not in known:
                topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "name": name,
                               "partitions": []})
                continue
            partitions = []
            for p in known[name]:
                leader = self.leader_for(p).node_id
                partitions.append({"error_code": 0, "partition_index": p, "leader_id": leader,
                                   "leader_epoch": 0, "replica_nodes": [leader], "isr_nodes": [leader]})
            entry: dict[str, Any] = {"error_code": 0, "name": name, "partitions": partitions}
            if version >= 10:
                entry["topic_id"] = self.logdir.topic_id(name)
            topics.append(entry)
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": li.node_id, "host": li.host, "port": li.port} for li in self.listeners],
            "cluster_id": self.cluster_id,
            "controller_id": self.listeners[0].node_id,
            "topics": topics,
        }

    def list_offsets(self, version: int, request: dict[str, Any],
                     context: RequestContext | None = None) -> dict[str, Any]:
        topics = []
        for topic in request["topics"]:
            partitions = []
            for part in topic["partitions"]:
                answer: dict[str, Any] = {"partition_index": part["partition_index"], "error_code": 0,
                                          "timestamp": -1, "offset": -1, "leader_epoch": 0}
                plog = self.logdir.partition(topic["name"], part["partition_index"])
                if plog is None:
                    answer["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    answer["leader_epoch"] = -1
                else:
                    plog.refresh()
                    ts = part["timestamp"]
                    if ts == list_offsets.LATEST_TIMESTAMP:
                        answer["offset"] = (self.last_stable_offset(plog)
                                            if request.get("isolation_level", 0) == 1
                                            else plog.high_watermark)
                    elif ts in (list_offsets.EARLIEST_TIMESTAMP, list_offsets.EARLIEST_LOCAL_TIMESTAMP):
                        answer["offset"] = plog.log_start_offset
                    elif ts == list_offsets.MAX_TIMESTAMP:
                        found = plog.offset_of_max_timestamp()
                        if found is not None:
                            answer["offset"], answer["timestamp"] = found
                    else:
                        found = plog.offset_for_timestamp(ts)
                        if found is not None:
                            answer["offset"], answer["timestamp"] = found
                answer["old_style_offsets"] = (
                    [answer["offset"]] if answer["offset"] >= 0 and part.get("max_num_offsets", 1) > 0 else []
                )
                partitions.append(answer)
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def last_stable_offset(self, plog: PartitionLog) -> int:
        """The offset below which every transaction has ended (the high watermark without any)."""
        return plog.last_stable_offset()

    def init_producer_id(self, version: int, request: dict[str, Any],
                         context: RequestContext | None = None) -> dict[str, Any]:
        """A fresh producer id for an idempotent producer (sequence numbers are not checked)."""
        if request["transactional_id"] is not None:
            return {"throttle_time_ms": 0, "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1, "producer_epoch": -1}
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}

    def produce(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        responses = []
        for topic in request["topic_data"]:
            partitions = []
            for part in topic["partition_data"]:
                answer: dict[str, Any] = {"index": part["index"], "error_code": 0, "base_offset": -1,
                                          "log_append_time_ms": -1, "log_start_offset": -1}
                plog = self.logdir.partition(topic["name"], part["index"])
                if plog is None:
                    answer["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif part["records"] is None:
                    answer["error_code"] = int(ErrorCode.CORRUPT_MESSAGE)
                else:
                    try:
                        entries = split_entries(part["records"])
                        if version >= 3 and any(data[16] != 2 for data, _count in entries):
                            answer["error_code"] = int(ErrorCode.INVALID_RECORD)
                            answer["error_message"] = "Produce v3+ carries magic v2 batches only"
                        else:
                            answer["base_offset"], answer["log_start_offset"] = plog.append(entries)
                            plog.transaction_state()  # keep the producer state current
                    except RecordsError as exc:
                        log.warning("rejected produce to %s-%d: %s", topic["name"], part["index"], exc)
                        answer["error_code"] = int(ErrorCode.CORRUPT_MESSAGE)
                        answer["error_message"] = str(exc)
                partitions.append(answer)
            responses.append({"name": topic["name"], "partition_responses": partitions})
        return {"responses": responses, "throttle_time_ms": 0}

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch(self, version: int, correlation_id: int, body: memoryview) -> Response:
        request = FetchRequest.decode(version, body)
        session_epoch = request.get("session_epoch", -1)
        session_id = request.get("session_id", 0)
        if version >= 7 and session_epoch not in (-1, 0):
            # Sessions are never created here (we answer SessionId 0), so an incremental fetch
            # refers to a session this server does not know.
            code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if session_id else ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return self._fetch_response(version, correlation_id, int(code), [], [])
        min_bytes = request.get("min_bytes", 0)
        deadline = time.monotonic() + max(0, request.get("max_wait_ms", 0)) / 1000
        while True:
            plan = self._plan_fetch(version, request)
            if plan.bytes_read >= min(min_bytes, plan.limit) or time.monotonic() >= deadline:
                break
            plan.close()
            await asyncio.sleep(FETCH_POLL_INTERVAL_S)
        self.stats.fetch_partitions += plan.partitions
        self.stats.converted_partitions += plan.converted
        self.stats.zero_copy_partitions += plan.zero_copy
        self.stats.partial_tail_responses += plan.partial_tails
        try:
            return self._fetch_response(version, correlation_id, 0, plan.topics, plan.resources)
        except BaseException:
            plan.close()
            raise

    def _fetch_response(self, version: int, correlation_id: int, error_code: int,
                        topics: list[dict[str, Any]], resources: list[Any]) -> Response:
        body = {"throttle_time_ms": 0, "error_code": error_code, "session_id": 0, "responses": topics}
        response = FetchResponse(version, body)
        return Response(response.to_send(correlation_id), list(resources))

    def _plan_fetch(self, version: int, request: dict[str, Any]) -> _FetchPlan:
        """Read every partition of a fetch in request order under KIP-74's budget."""
        plan = _FetchPlan()
        budget = FetchBudget(version, request.get("max_bytes") if version >= 3 else None)
        plan.limit = budget.limit
        # Followers are exempt from message.downconversion.enable (fetch-protocol.md §6 3a).
        is_follower = is_follower_fetch(version, request)
        read: list[tuple[tuple[str, Any], dict[str, Any]]] = []
        rejected: list[tuple[tuple[str, Any], dict[str, Any]]] = []
        try:
            for topic in request["topics"]:
                name, topic_id = topic["topic"], topic.get("topic_id")
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if version >= 13:  # topics are named by id
                    name = self.logdir.topic_name(topic_id) or ""
                    unknown = ErrorCode.UNKNOWN_TOPIC_ID
                for part in topic["partitions"]:
                    plog = self.logdir.partition(name, part["partition"]) if name else None
                    if plog is None:
                        rejected.append(((name, topic_id), error_partition(part["partition"], unknown)))
                        continue
                    before = budget.remaining
                    entry = self._read_partition(version, name, plog, part, budget, plan, is_follower,
                                                 request.get("isolation_level", 0))
                    read.append(((name, topic_id), entry))
                    plan.bytes_read += before - budget.remaining
                    plan.partitions += 1
        except BaseException:
            plan.close()
            raise
        plan.topics = _group_by_topic(read + rejected)
        return plan

    def _read_partition(self, version: int, topic: str, plog: PartitionLog, part: dict[str, Any],
                        budget: FetchBudget, plan: _FetchPlan,
                        is_follower: bool = False, isolation_level: int = 0) -> dict[str, Any]:
        """One partition of a fetch, as the response partition dict (fetch-protocol.md §6, §8)."""
        index = part["partition"]
        fetch_offset = part["fetch_offset"]
        config = self.topic_config(topic)
        records: Any
        # Transactions (Fetch v4+): the LSO is reported to everyone; a read_committed fetch
        # stops at it and learns which aborted transactions its records may contain.
        read_committed = version >= 4 and isolation_level == 1
        txns = plog.transaction_state() if version >= 4 else None
        lso = txns.last_stable_offset(plog.high_watermark) if txns is not None else -1
        try:
            region = plog.locate(fetch_offset, max_offset=lso if read_committed else None)
        except OffsetOutOfRange as exc:
            log.info("fetch: %s", exc)
            records, error, hw, start = None, ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1
        except RecordsError as exc:
            # Unreadable log data: Kafka's answer for a failed log is a storage error (sent as
            # NOT_LEADER_OR_FOLLOWER to Fetch v0-5 by the decision helper).
            log.error("fetch %s-%d at %d: %s", topic, index, fetch_offset, exc)
            records, error, hw, start = None, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
        else:
            error, hw, start = ErrorCode.NONE, region.high_watermark, region.log_start_offset
            records = b""
            size = _consume_budget(budget, region, part["partition_max_bytes"])
            if size > 0:
                assert region.path is not None and region.segment is not None
                records = FileRecords(region.path, start=region.position, end=region.position + size)
                plan.resources.append(records)
                plan.partial_tails += not region.segment.is_entry_boundary(region.position + size)
        chunk_size = self.chunk_size
        aborted: list[dict[str, int]] = []
        if hw < 0 or txns is None:
            lso = hw
        elif read_committed:
            aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                       for t in txns.aborted_between(fetch_offset, lso)]

        def lazy(records_in: Any, to_magic: int, first_offset: int) -> Any:
            tracked = _TrackedLazyRecords(
                LazyDownConvertedRecords(records_in, to_magic, first_offset, chunk_size=chunk_size),
                self.stats,
            )
            plan.resources.append(tracked)
            plan.converted += 1
            return tracked

        entry = broker_partition_response(
            version, index, records, fetch_offset=fetch_offset, error_code=int(error),
            high_watermark=hw, last_stable_offset=lso, log_start_offset=start,
            aborted_transactions=aborted,
            topic_compression=config.compression_type,
            downconversion_enable=config.downconversion_enable, is_follower=is_follower,
            lazy_records_factory=lazy,
        )
        if isinstance(records, FileRecords) and entry["records"] is records:
            plan.zero_copy += 1
            entry["records"] = tracked = _TrackedFileRecords(records, self.stats)
            plan.resources.append(tracked)
        return entry


def _consume_budget(budget: FetchBudget, region: Region, partition_max_bytes: int) -> int:
    """Bytes of ``region`` this partition gets under KIP-74 (fetch-protocol.md §8).

    The rules are :meth:`FetchBudget.take`'s; the region already starts at the batch holding
    the fetch offset, so finding it costs a bisect of the entry index rather than reading every
    batch header of the segment.
    """
    if region.path is None or region.end <= region.position:
        return 0
    return budget.take(region.first_entry_size, region.end - region.position, partition_max_bytes)


class _FetchPlan:
    """The partitions of one fetch and the files it opened."""

    def __init__(self) -> None:
        self.topics: list[dict[str, Any]] = []
        self.resources: list[Any] = []
        self.bytes_read = 0
        self.limit = 0
        self.partial_tails = 0
        self.converted = 0
        self.zero_copy = 0
        self.partitions = 0

    def close(self) -> None:
        for resource in self.resources:
            resource.close()
        self.resources.clear()


def _group_by_topic(partitions: list[tuple[tuple[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Consecutive partitions of one topic share a topic entry (fetch-protocol.md trap 12).

    Each partition comes with its topic's ``(name, id)`` as the request named it (the id is what
    Fetch v13+ sends back).
    """
    topics: list[dict[str, Any]] = []
    last: tuple[str, Any] | None = None
    for key, entry in partitions:
        if topics and last == key:
            topics[-1]["partitions"].append(entry)
        else:
            name, topic_id = key
            topic: dict[str, Any] = {"topic": name, "partitions": [entry]}
            if topic_id is not None:
                topic["topic_id"] = topic_id
            topics.append(topic)
            last = key
    return topics
