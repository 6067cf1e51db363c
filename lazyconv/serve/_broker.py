"""The request handler behind every listener: one Kafka "broker" over a log directory.

:class:`Broker` plays :class:`~lazyconv.net._model.RequestHandler`: the servers' front door
(:mod:`lazyconv.net._requests`) parses each frame against :attr:`Broker.apis` and answers
ApiVersions; :meth:`Broker.handle` answers the rest through a table of handlers built once, and
returns a :class:`~lazyconv.net._model.Response` (a Send plus what must be closed when it is
done) or ``None`` (acks=0 Produce; one that fails raises UnansweredRequestError, which closes the
connection as Kafka closes it). It does no socket I/O: :mod:`lazyconv.net._server` owns the
sockets. Fetch waits (a fetch below ``MinBytes`` waits up to ``MaxWaitMs`` for the log to grow,
as a broker does) and Produce may be delayed per listener. The group and transaction APIs are
:mod:`lazyconv.serve._group_apis`' and :mod:`lazyconv.serve._txn_apis`'.

Requests it cannot parse raise :class:`~lazyconv.errors.RemoteProtocolError`; the connection is
then closed, which is what a Kafka broker does with an invalid request.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from lazyconv.errors import (
    ConfigurationError,
    ErrorCode,
    RecordsError,
    RemoteProtocolError,
    StorageError,
)
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._partition import PartitionLog
from lazyconv.net._model import Listener, Response, reply
from lazyconv.net._session import Session
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _add_offsets_to_txn as add_offsets_to_txn
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _describe_groups as describe_groups
from lazyconv.protocol import _end_txn as end_txn
from lazyconv.protocol import _fetch as fetch_api
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _init_producer_id as init_producer_id
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _leave_group as leave_group
from lazyconv.protocol import _list_groups as list_groups
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _offset_commit as offset_commit
from lazyconv.protocol import _offset_fetch as offset_fetch
from lazyconv.protocol import _produce as produce
from lazyconv.protocol import _sync_group as sync_group
from lazyconv.protocol import _txn_offset_commit as txn_offset_commit
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._connection import ApiTable, Request
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._registry import ALL_APIS
from lazyconv.records import ControlRecordType, RecordsBuilder
from lazyconv.records._control import control_key, end_txn_marker_value
from lazyconv.serve._append_validation import (
    AppendConfig,
    opens_with_a_transactional_batch,
    transactional_producers,
    validate_produce,
)
from lazyconv.serve._fetch_handler import (
    DEFAULT_MAX_DECOMPRESSED_BATCH,
    DEFAULT_MAX_PARTITIONS_PER_REQUEST,
    OFF_LOOP_PARTITIONS,
    FetchHandler,
)
from lazyconv.serve._group_apis import GroupApis
from lazyconv.serve._group_coordinator import CoordinatorConfig
from lazyconv.serve._model import BrokerStats, TopicConfig
from lazyconv.serve._offset_store import OffsetStore
from lazyconv.serve._offsets import split_entries
from lazyconv.serve._producer_ids import ProducerIdManager
from lazyconv.serve._producer_state import ProducerStates
from lazyconv.serve._segment_files import DEFAULT_MAX_OPEN_SEGMENTS, SegmentFileCache
from lazyconv.serve._txn_apis import TransactionApis
from lazyconv.serve._txn_coordinator import TransactionConfig, TransactionCoordinator
from lazyconv.serve._txn_ids import TransactionalIdStore

log = logging.getLogger(__name__)

__all__ = ["Broker"]

FETCH_KEY = fetch_api.SPEC.key
FETCH_MIN_VERSION = fetch_api.SPEC.min_version
FETCH_MAX_VERSION = fetch_api.SPEC.max_version

# The APIs this broker answers: every API the protocol layer declares, with its version range,
# from the one table (lazyconv.protocol._registry) that ApiVersions is built from.
SERVED_APIS: tuple[ApiSpec, ...] = ALL_APIS

# Produce learnt KAFKA_STORAGE_ERROR in v4 (KIP-112); older clients get NOT_LEADER_OR_FOLLOWER,
# which they retry after refreshing metadata, as Kafka answers them.
_PRODUCE_STORAGE_ERROR_VERSION = 4
# How often --flush-ms is checked, at most (Kafka's log.flush.scheduler.interval.ms).
_FLUSH_CHECK_MAX_S = 1.0


def _partition_count(request: dict[str, Any]) -> int:
    return sum(len(topic.get("partitions") or ()) for topic in request.get("topics") or ())


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
        max_open_segments: int = DEFAULT_MAX_OPEN_SEGMENTS,
        max_partitions_per_request: int = DEFAULT_MAX_PARTITIONS_PER_REQUEST,
        max_decompressed_batch: int = DEFAULT_MAX_DECOMPRESSED_BATCH,
        workers: ConversionWorkers | None = None,
        remote_sends: bool = False,
        txn_config: TransactionConfig | None = None,
    ) -> None:
        """``group_config``: the coordinator's session limits and initial rebalance delay;
        ``offsets_in_memory``: do not persist committed offsets under the log directory;
        ``max_open_segments``: segment files kept open for reuse (the shared cache's size);
        ``max_partitions_per_request``: a Fetch naming more closes the connection;
        ``max_decompressed_batch``: the largest batch payload down-conversion inflates, and so
        the largest one Produce accepts (MESSAGE_TOO_LARGE beyond it); ``workers``: the
        server's conversion worker pool, where converting fetches are also planned;
        ``remote_sends``: the server has sender processes (:mod:`lazyconv.net._sender_pool`),
        which write the converting Fetch responses; ``txn_config``: when idle transactional
        ids expire (Kafka's defaults: after 7 days, looked for every hour) and when a transaction
        open in the log at the start that no transactional id holds is aborted (15 minutes)."""
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
        self.apis = ApiTable(SERVED_APIS, {FETCH_KEY: max_fetch_version})
        self.stats = BrokerStats()
        # Durable: ids are recorded in the log directory in blocks before use (never reused).
        self.producer_ids = ProducerIdManager(logdir.root, logdir.max_producer_id)
        self._pending_markers: list[tuple[str, int, int, int, bool]] = []
        self._flush_task: asyncio.Task[None] | None = None
        self.segment_files = SegmentFileCache(max_open_segments)
        self._fetch = FetchHandler(logdir, self.stats, chunk_size, self.topic_config, self.segment_files,
                                   max_partitions_per_request, max_decompressed_batch, workers,
                                   remote_sends)
        store = OffsetStore(None if offsets_in_memory else logdir.root)
        self.producer_states = ProducerStates()
        # One bound for both paths: Produce refuses a batch that Fetch could not down-convert.
        self.append_config = AppendConfig(max_decompressed_size=max_decompressed_batch)
        self.groups = GroupApis(store, lambda topic, p: logdir.partition(topic, p) is not None,
                                config=group_config)
        txn_ids = TransactionalIdStore(logdir.root)
        self.transactions = TransactionCoordinator(
            self._allocate_producer_id, self._write_marker, store.commit,
            lambda topic, p: logdir.partition(topic, p) is not None,
            restored=txn_ids.load(), prepared=txn_ids.prepared, save=txn_ids.save,
            open_transactions=self._open_transactions, config=txn_config)
        self.txn_apis = TransactionApis(self.transactions, self._allocate_producer_id)
        self._handlers = self._handler_table()
        self.transactions.complete_prepared()  # commits a restart interrupted
        self._recover_open_transactions()  # the transactions a stop or a crash left open

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the timers (group sessions, rebalance and transaction timeouts, transactional
        ids' expiration, markers to retry, ``flush_ms``) on the loop."""
        self.groups.start(loop, extra_tick=self._tick)
        if self.logdir.config.flush_ms is not None:
            self._flush_task = loop.create_task(self._flush_periodically())

    def open_session(self, session: Session) -> None:
        """Nothing is kept per connection: a broker's state is its log directory's."""

    def _tick(self, now: float) -> None:
        self._retry_markers()
        self.transactions.tick(now)

    def close(self) -> None:
        """Stop the timers, close the cached segment files and shut the log down cleanly:
        every write fsynced, producer snapshots at the log ends, the recovery points recorded."""
        self.groups.stop()
        if self._flush_task is not None:
            self._flush_task.cancel()
            self._flush_task = None
        self._fetch.close()
        self.segment_files.close()
        self.logdir.close(before_checkpoint=self.producer_states.write_snapshots)

    async def _flush_periodically(self) -> None:
        """Kafka's log.flush.interval.ms: fsync each partition whose oldest unflushed append is
        that old (on the flusher thread, so the loop keeps serving)."""
        flush_ms = self.logdir.config.flush_ms
        assert flush_ms is not None
        interval = min(flush_ms / 1000, _FLUSH_CHECK_MAX_S)
        while True:
            await asyncio.sleep(interval)
            due = self.logdir.flush_due()
            if not due:
                continue
            try:
                await asyncio.wrap_future(self.logdir.flusher.submit(functools.partial(_flush_all, due)))
            except StorageError as exc:
                log.error("timed flush failed: %s", exc)
            self.logdir.write_checkpoint()

    def topic_config(self, topic: str) -> TopicConfig:
        return self.topic_configs.get(topic, self.default_config)

    def leader_for(self, partition: int) -> Listener:
        return self.listeners[partition % len(self.listeners)]

    # -- dispatch --------------------------------------------------------------------------

    def _handler_table(self) -> dict[int, Callable[[Request, Session], Awaitable[Response | None]]]:
        """API key -> what answers it (ApiVersions is the front door's)."""
        groups, txns = self.groups, self.txn_apis
        answered: dict[int, Callable[[int, dict[str, Any], Session], Any]] = {
            metadata.API_KEY: self.metadata,
            find_coordinator.API_KEY: self.find_coordinator,
            init_producer_id.API_KEY: lambda v, r, s: txns.init_producer_id(v, r),
            join_group.SPEC.key: lambda v, r, s: groups.join_group(v, r, s.client_id, s.peer),
            sync_group.SPEC.key: lambda v, r, s: groups.sync_group(v, r),
            heartbeat.SPEC.key: lambda v, r, s: groups.heartbeat(v, r),
            leave_group.SPEC.key: lambda v, r, s: groups.leave_group(v, r),
            offset_commit.SPEC.key: lambda v, r, s: groups.offset_commit(v, r),
            offset_fetch.SPEC.key: lambda v, r, s: groups.offset_fetch(v, r),
            list_groups.SPEC.key: lambda v, r, s: groups.list_groups(v, r),
            describe_groups.SPEC.key: lambda v, r, s: groups.describe_groups(v, r),
            add_partitions_to_txn.SPEC.key: lambda v, r, s: txns.add_partitions_to_txn(v, r),
            add_offsets_to_txn.SPEC.key: lambda v, r, s: txns.add_offsets_to_txn(v, r),
            end_txn.SPEC.key: lambda v, r, s: txns.end_txn(v, r),
            txn_offset_commit.SPEC.key: lambda v, r, s: txns.txn_offset_commit(v, r),
        }
        table: dict[int, Callable[[Request, Session], Awaitable[Response | None]]] = {
            key: functools.partial(self._answer, method) for key, method in answered.items()}
        table[FETCH_KEY] = self._fetch_request
        table[produce.API_KEY] = self._produce_request
        table[list_offsets.API_KEY] = self._list_offsets_request
        return table

    async def handle(self, request: Request, session: Session) -> Response | None:
        """Answer one request (see :mod:`lazyconv.net._model`); raises RemoteProtocolError for
        an invalid one."""
        handler = self._handlers.get(request.api_key)
        if handler is None:  # in the table, but answered by the front door only (ApiVersions)
            raise RemoteProtocolError(f"{request.spec.name} is not answered here", 0)
        return await handler(request, session)

    async def _answer(self, method: Callable[[int, dict[str, Any], Session], Any],
                      request: Request, session: Session) -> Response:
        answer = method(request.api_version, self._decoded(request), session)
        if inspect.isawaitable(answer):
            answer = await answer
        return reply(request, answer)

    def _decoded(self, request: Request) -> dict[str, Any]:
        """The request body; bytes after it are ignored with a warning, as Kafka ignores them."""
        reader = Reader(request.body, base=request.body_at)
        body = request.spec.decode_request(request.api_version, reader, exact=False)
        if reader.remaining:
            log.warning("%s v%d from %r: ignoring %d bytes after the request body",
                        request.spec.name, request.api_version, request.client_id, reader.remaining)
        return body

    async def _fetch_request(self, request: Request, session: Session) -> Response:
        return await self.fetch(request.api_version, request.correlation_id, request.body)

    async def _produce_request(self, request: Request, session: Session) -> Response | None:
        version = request.api_version
        body = self._decoded(request)
        to_flush: dict[PartitionLog, list[dict[str, Any]]] = {}
        answer = self.produce(version, body, to_flush)
        if to_flush:
            await self._flush_before_answering(version, to_flush)
        if session.listener.produce_delay_ms > 0:
            await asyncio.sleep(session.listener.produce_delay_ms / 1000)
        if body["acks"] == 0:
            # no answer is read; a failure closes the connection (the answers before it first),
            # so that the client notices, as Kafka's handleProduceRequest closes it
            failure = produce.unanswered_failure(answer)
            if failure is not None:
                raise failure
            return None
        return reply(request, answer)

    async def _list_offsets_request(self, request: Request, session: Session) -> Response:
        body = self._decoded(request)
        if _partition_count(body) >= OFF_LOOP_PARTITIONS:
            # by-timestamp lookups over many partitions read the log: off the event loop
            answer = await self._fetch.off_loop(self.list_offsets, request.api_version, body)
        else:
            answer = self.list_offsets(request.api_version, body)
        return reply(request, answer)

    def api_version_table(self) -> list[dict[str, int]]:
        """ApiVersions' list: the registry's table (Fetch possibly capped)."""
        return self.apis.version_table()

    @property
    def supported_versions(self) -> dict[int, tuple[int, int, int | None]]:
        """api key -> (min version, max version, first flexible version) as served."""
        return {key: (spec.min_version, self.apis.max_versions[key], spec.first_flexible)
                for key, spec in self.apis.specs.items()}

    def find_coordinator(self, version: int, request: dict[str, Any],
                         session: Session) -> dict[str, Any]:
        """Every group and transactional id is coordinated by the listener that was asked."""
        listener = session.listener
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": [
                {"key": key, "node_id": listener.node_id, "host": listener.host, "port": listener.port,
                 "error_code": 0} for key in request["coordinator_keys"]]}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "node_id": listener.node_id, "host": listener.host, "port": listener.port}

    # -- Metadata, ListOffsets, Produce ----------------------------------------------------

    def metadata(self, version: int, request: dict[str, Any],
                 session: Session | None = None) -> dict[str, Any]:
        """Brokers (one per listener), the cluster id and every asked topic with its id."""
        self.logdir.refresh()
        known = self.logdir.topics()
        asked: list[tuple[str | None, Any]]
        if metadata.asks_for_every_topic(version, request["topics"]):
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
                plog = self.logdir.partition(name, p)
                epoch = plog.latest_epoch() if plog is not None else 0
                partitions.append({"error_code": 0, "partition_index": p, "leader_id": leader,
                                   "leader_epoch": epoch, "replica_nodes": [leader], "isr_nodes": [leader]})
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

    def list_offsets(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        # v1+: a partition named more than once is INVALID_REQUEST wherever it is named, as
        # Kafka 3.9 answers it (4.0 answers it once); v0 answers each entry
        named = Counter((topic["name"], part["partition_index"])
                        for topic in request["topics"] for part in topic["partitions"])
        topics = []
        for topic in request["topics"]:
            partitions = []
            for part in topic["partitions"]:
                if version >= 1 and named[topic["name"], part["partition_index"]] > 1:
                    partitions.append({"partition_index": part["partition_index"],
                                       "error_code": int(ErrorCode.INVALID_REQUEST), "timestamp": -1,
                                       "offset": -1, "leader_epoch": -1, "old_style_offsets": []})
                    continue
                try:
                    answer = self._list_offsets_partition(version, request, topic["name"], part)
                except (RecordsError, OSError) as exc:  # corrupt data, or a segment gone / unreadable
                    # that partition's error, as Fetch answers it: the others are still answered
                    log.error("list offsets %s-%d at %d: unreadable log data: %s", topic["name"],
                              part["partition_index"], part["timestamp"], exc)
                    self.stats.storage_errors += 1
                    answer = {"partition_index": part["partition_index"],
                              "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "timestamp": -1,
                              "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
                partitions.append(answer)
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def _list_offsets_partition(self, version: int, request: dict[str, Any], topic: str,
                                part: dict[str, Any]) -> dict[str, Any]:
        """One partition of a ListOffsets; raises RecordsError or OSError for unreadable data."""
        answer: dict[str, Any] = {"partition_index": part["partition_index"], "error_code": 0,
                                  "timestamp": -1, "offset": -1, "leader_epoch": 0}
        if not list_offsets.timestamp_supported(part["timestamp"], version):
            # a negative timestamp this version does not define (-3 before v7, -4 before v8,
            # -5 before v9, any other): Kafka refuses it before looking the partition up
            answer.update(error_code=int(ErrorCode.UNSUPPORTED_VERSION), leader_epoch=-1,
                          old_style_offsets=[])
            return answer
        plog = self.logdir.partition(topic, part["partition_index"])
        if plog is None:
            answer["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            answer["leader_epoch"] = -1
        else:
            plog.refresh()
            ts = part["timestamp"]
            # leader epochs as Kafka's: the checkpoint's latest for the log end, the
            # checkpoint's epoch of the log start, the batch's own for a record found
            # by timestamp (0 where serve's own log has no checkpoint)
            if ts == list_offsets.LATEST_TIMESTAMP:
                answer["offset"] = (self.last_stable_offset(plog)
                                    if request.get("isolation_level", 0) == 1
                                    else plog.high_watermark)
                answer["leader_epoch"] = plog.latest_epoch()
            elif ts in (list_offsets.EARLIEST_TIMESTAMP, list_offsets.EARLIEST_LOCAL_TIMESTAMP):
                answer["offset"] = plog.log_start_offset
                answer["leader_epoch"] = plog.epoch_for_offset(plog.log_start_offset)
            else:
                found = (plog.offset_of_max_timestamp() if ts == list_offsets.MAX_TIMESTAMP
                         else plog.offset_for_timestamp(ts))
                if found is not None:
                    answer["offset"], answer["timestamp"] = found
                    if plog.leader_epochs:
                        answer["leader_epoch"] = plog.batch_leader_epoch(found[0])
                else:
                    answer["leader_epoch"] = -1  # no such record: Kafka's "no offset"
        if version == 0 and plog is not None:
            answer["old_style_offsets"] = _legacy_offsets_before(
                plog, part["timestamp"], part.get("max_num_offsets", 1))
        else:
            answer["old_style_offsets"] = (
                [answer["offset"]] if answer["offset"] >= 0 and part.get("max_num_offsets", 1) > 0 else []
            )
        return answer

    def last_stable_offset(self, plog: PartitionLog) -> int:
        """The offset below which every transaction has ended (the high watermark without any)."""
        return plog.last_stable_offset()

    def _allocate_producer_id(self) -> int:
        return self.producer_ids.allocate()

    # -- transactions ----------------------------------------------------------------------

    def _open_transactions(self, producer_id: int) -> list[tuple[str, int]]:
        """The partitions where ``producer_id`` has a transaction open in the log."""
        self.logdir.refresh()
        return [key for key, plog in sorted(self.logdir.partitions.items())
                if producer_id in plog.transaction_state().ongoing]

    def _recover_open_transactions(self) -> None:
        """Give the coordinator the transactions open in the log at the start (each producer
        id's partitions and its epoch in each), to time them out as Kafka's coordinator does
        with the ones its transaction log holds. A log that cannot be read for it is logged:
        its ids' open transactions are then looked up when they come back."""
        open_in_log: dict[int, dict[tuple[str, int], int]] = {}
        try:
            self.logdir.refresh()
            for key, plog in sorted(self.logdir.partitions.items()):
                # from the log's headers only: what is served and not produced to stays as it is
                state = plog.transaction_state()
                for producer_id in state.ongoing:
                    open_in_log.setdefault(producer_id, {})[key] = state.ongoing_epochs.get(producer_id, -1)
        except (OSError, RecordsError) as exc:
            log.error("cannot look for the transactions left open in the log: %s", exc)
            return
        self.transactions.recover(open_in_log)

    def _write_marker(self, topic: str, partition: int, producer_id: int, epoch: int,
                      commit: bool) -> None:
        """Append a COMMIT/ABORT control batch to one partition (the coordinator's marker); an
        abort also goes into the segment's ``.txnindex``. A marker that cannot be written (a
        full disk) is retried every tick, as Kafka's marker channel keeps retrying: until then
        read_committed consumers stop before the transaction."""
        plog = self.logdir.partition(topic, partition)
        if plog is None:
            log.error("transaction marker for %s-%d: the partition is gone", topic, partition)
            return
        builder = RecordsBuilder(2, producer_id=producer_id, producer_epoch=epoch,
                                 is_transactional=True, is_control=True)
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        builder.append(offset=0, timestamp=int(time.time() * 1000), key=control_key(kind),
                       value=end_txn_marker_value(0))
        try:
            offset, _ = plog.append(split_entries(builder.build()))
        except StorageError as exc:
            log.error("transaction marker for %s-%d not written, will retry: %s", topic, partition, exc)
            self._pending_markers.append((topic, partition, producer_id, epoch, commit))
            return
        self.producer_states.end_transaction(plog, producer_id, epoch, offset)
        state = plog.transaction_state()
        if not commit and state.aborted and state.aborted[-1].last_offset == offset:
            plog.append_aborted_txn(state.aborted[-1])
        self._fetch.notify_append()

    def _retry_markers(self) -> None:
        pending, self._pending_markers = self._pending_markers, []
        for marker in pending:
            self._write_marker(*marker)

    def produce(self, version: int, request: dict[str, Any],
                to_flush: dict[PartitionLog, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
        """Validate each partition's records as a Kafka leader does, append the valid ones.

        A rejected partition appends nothing and answers with Kafka's error code (and, from
        Produce v8, the error message and record errors); the other partitions of the request
        are not affected (see :mod:`lazyconv.serve._append_validation`). A transactional batch
        that would open a transaction in its partition is verified first, as Kafka 3.6+ does
        (KIP-890 part 1, ``transaction.partition.verification.enable``): the request's
        transactional id must hold its producer id and epoch and its transaction include the
        partition (:meth:`TransactionApis.verify_produce`). A request without a transactional
        id whose partition opens with a transactional batch is refused as a whole, every
        partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's ``handleProduceRequest``
        refuses it before anything else; one whose transactional batches carry more than one
        producer id (or epoch), every partition INVALID_PRODUCER_ID_MAPPING, as Kafka's
        ``handleProduceAppend`` refuses it before it verifies them. A partition the log
        cannot take (a full disk, an I/O error) answers KAFKA_STORAGE_ERROR (below Produce v4:
        NOT_LEADER_OR_FOLLOWER) with nothing of it left on disk. Partitions due for an fsync
        (``flush_messages``) are added to ``to_flush`` with their answers, for the caller."""
        now_ms = int(time.time() * 1000)
        transactional_id = request.get("transactional_id")
        if transactional_id is None and any(
                opens_with_a_transactional_batch(part["records"])
                for topic in request["topic_data"] for part in topic["partition_data"]):
            return self._refuse_produce(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                        "transactional records without a transactional id")
        # each partition's log (None: unknown) and the (producer id, epoch) of its transactional batches
        targets: list[list[tuple[dict[str, Any], PartitionLog | None, list[tuple[int, int]]]]] = []
        for topic in request["topic_data"]:
            parts = []
            for part in topic["partition_data"]:
                plog = self.logdir.partition(topic["name"], part["index"])
                producers = transactional_producers(part["records"], version) if plog is not None else []
                parts.append((part, plog, producers))
            targets.append(parts)
        if len({pair for parts in targets for _, _, pairs in parts for pair in pairs}) > 1:
            return self._refuse_produce(request, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                                        "transactional records of several producers",
                                        "Transactional records contained more than one producer ID")
        responses = []
        for topic, parts in zip(request["topic_data"], targets, strict=True):
            partitions = []
            for part, plog, producers in parts:
                answer: dict[str, Any] = {"index": part["index"], "error_code": 0, "base_offset": -1,
                                          "log_append_time_ms": -1, "log_start_offset": -1,
                                          "record_errors": [], "error_message": None}
                if plog is None:
                    answer["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    answer.update(self._append(version, topic["name"], plog, part["records"], now_ms,
                                               transactional_id, producers))
                    flush_messages = self.logdir.config.flush_messages
                    # the count as this append left it: a flush that started since may have zeroed
                    # unflushed_messages with its fsync still running, and the flush asked here
                    # runs after it (the flusher runs its jobs in order)
                    if (to_flush is not None and flush_messages is not None and answer["error_code"] == 0
                            and answer["base_offset"] >= 0
                            and plog.unflushed_at_last_append >= flush_messages):
                        to_flush.setdefault(plog, []).append(answer)
                partitions.append(answer)
            responses.append({"name": topic["name"], "partition_responses": partitions})
        return {"responses": responses, "throttle_time_ms": 0}

    def _refuse_produce(self, request: dict[str, Any], code: ErrorCode, why: str,
                        message: str | None = None) -> dict[str, Any]:
        """The answer to a Produce refused as a whole (Kafka's ``ProduceRequest.getErrorResponse``):
        ``code`` and ``message`` in every partition, nothing appended."""
        count = sum(len(topic["partition_data"]) for topic in request["topic_data"])
        self.stats.rejected_produce_partitions += count
        log.warning("rejected produce to %d partitions: %s (%s)", count, why, code.name)
        return {"throttle_time_ms": 0, "responses": [
            {"name": topic["name"], "partition_responses": [
                {"index": part["index"], "error_code": int(code), "base_offset": -1,
                 "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [],
                 "error_message": message}
                for part in topic["partition_data"]]}
            for topic in request["topic_data"]]}

    def _append(self, version: int, topic: str, plog: PartitionLog, records: Any,
                now_ms: int, transactional_id: str | None,
                producers: list[tuple[int, int]]) -> dict[str, Any]:
        """One partition of a Produce, whose transactional batches are ``producers``'s: the
        response fields it answers with."""
        table = self.producer_states.table(plog)
        verified: set[int] = set()
        for producer_id, epoch in dict.fromkeys(producers):
            entry = table.entry(producer_id)
            if transactional_id is None or (entry is not None and entry.transaction_first_offset is not None):
                continue  # nothing to verify with, or its transaction is open here already
            code, message = self.txn_apis.verify_produce(version, transactional_id, producer_id, epoch,
                                                         (topic, plog.partition))
            if code:
                self.stats.rejected_produce_partitions += 1
                log.warning("rejected produce to %s-%d: producer %d of transactional id %r not "
                            "verified (%s)", topic, plog.partition, producer_id, transactional_id,
                            ErrorCode(code).name)
                return {"error_code": code, "error_message": message, "record_errors": []}
            verified.add(producer_id)
        decision = validate_produce(records, produce_version=version, producers=table,
                                    config=self.append_config, now_ms=now_ms,
                                    verified_producers=verified)
        fields = decision.response_fields()
        if not decision.accepted:
            self.stats.rejected_produce_partitions += 1
            log.warning("rejected produce to %s-%d: %s (%s)", topic, plog.partition,
                        decision.error_code.name, decision.error_message)
            return fields
        if decision.duplicate is not None:
            fields["base_offset"] = decision.duplicate.first_offset
            fields["log_start_offset"] = plog.log_start_offset
            return fields
        if not decision.entries:
            fields["log_start_offset"] = plog.log_start_offset
            return fields
        try:
            base, log_start = plog.append(decision.append_entries())
        except StorageError as exc:  # a full disk, an I/O error, a log that must not grow
            log.error("append to %s-%d failed: %s", topic, plog.partition, exc)
            self.stats.storage_errors += 1
            fields.update(error_code=_produce_storage_error(version), error_message=str(exc),
                          record_errors=[])
            return fields
        self.producer_states.appended(plog, decision, base)
        plog.transaction_state()  # keep the transaction state current
        self._fetch.notify_append()
        fields["base_offset"], fields["log_start_offset"] = base, log_start
        return fields

    async def _flush_before_answering(self, version: int,
                                      to_flush: dict[PartitionLog, list[dict[str, Any]]]) -> None:
        """Kafka's log.flush.interval.messages: fsync the partitions that reached it before the
        Produce is answered (on the flusher thread; the loop keeps serving). A partition that
        cannot be flushed answers a storage error: its data is written but may not survive a
        power loss."""
        for plog, answers in to_flush.items():
            try:
                await asyncio.wrap_future(self.logdir.flusher.submit(plog.flush))
            except StorageError as exc:
                log.error("%s", exc)
                for answer in answers:
                    answer.update(error_code=_produce_storage_error(version), error_message=str(exc),
                                  base_offset=-1)

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch(self, version: int, correlation_id: int, body: memoryview) -> Response:
        """Answer one Fetch request body (see :mod:`lazyconv.serve._fetch_handler`)."""
        return await self._fetch.fetch(version, correlation_id, body)


def _produce_storage_error(version: int) -> int:
    if version >= _PRODUCE_STORAGE_ERROR_VERSION:
        return int(ErrorCode.KAFKA_STORAGE_ERROR)
    return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


def _flush_all(plogs: list[PartitionLog]) -> None:
    """fsync each partition; the first failure is raised after the others were tried."""
    failure: StorageError | None = None
    for plog in plogs:
        try:
            plog.flush()
        except StorageError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


def _legacy_offsets_before(plog: PartitionLog, timestamp: int, max_num_offsets: int) -> list[int]:
    """ListOffsets v0's answer, as Kafka 3.x computes it (legacyFetchOffsetsBefore): each
    segment stands for its base offset (never below the log start offset) at the time its file
    was last modified, plus the log end offset now when the last segment is not empty; latest
    (-1) starts from the last of these, earliest (-2) from the first, a timestamp from the last
    one modified at or before it; then up to ``max_num_offsets`` of them going back, largest
    first. (Modification times: a copied log keeps them with ``cp -p``.)"""
    start = plog.log_start_offset
    points = []
    for segment in plog.segments:
        try:
            modified = os.stat(segment.path).st_mtime_ns // 1_000_000
        except OSError:
            modified = 0
        points.append((max(segment.base_offset, start), modified))
    if not points:  # no segment file yet: Kafka's log always has an (empty) active segment
        points.append((start, int(time.time() * 1000)))
    elif plog.segments[-1].scanned_bytes > 0:
        points.append((plog.high_watermark, int(time.time() * 1000)))
    if timestamp == list_offsets.LATEST_TIMESTAMP:
        index = len(points) - 1
    elif timestamp == list_offsets.EARLIEST_TIMESTAMP:
        index = 0 if points else -1
    else:
        index = len(points) - 1
        while index >= 0 and points[index][1] > timestamp:
            index -= 1
    count = min(max_num_offsets, index + 1)
    return sorted((points[index - j][0] for j in range(count)), reverse=True)

