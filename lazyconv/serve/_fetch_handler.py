"""Fetch on the server side: read each partition under KIP-74's budget, decide per partition as
a broker does (docs/guide/fetch-response.md), and build the lazily streamed FetchResponse.

Partitions that need no conversion go out as file slices (``os.sendfile``); the others through
:class:`~lazyconv.conversion._lazy_records.LazyDownConvertedRecords`. Transactions: every Fetch v4+ carries the last
stable offset, and a read_committed fetch stops there and lists the aborted transactions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import ErrorCode, RecordsError, RemoteProtocolError
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._partition import OffsetOutOfRange, PartitionLog, Region
from lazyconv.net._model import Response
from lazyconv.net._remote_send import SendReport
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol._decision import (
    FetchBudget,
    broker_partition_response,
    error_partition,
    is_follower_fetch,
)
from lazyconv.protocol._fetch import FetchRequest, FetchResponse, fetch_response_send
from lazyconv.protocol._grouping import group_by_topic
from lazyconv.protocol._schema import RecordsSlot
from lazyconv.records import Compression
from lazyconv.serve._model import BrokerStats, TopicConfig
from lazyconv.serve._remote_fetch import fetch_send_job, lazy_recipe, slice_recipe
from lazyconv.serve._segment_files import CachedFileRecords, SegmentFileCache, SegmentSlice
from lazyconv.serve._tracked_records import (
    TrackedFileRecords,
    TrackedLazyRecords,
    add_send_counts,
    report_corrupt_send,
)

log = logging.getLogger(__name__)

__all__ = ["FetchHandler", "FETCH_POLL_INTERVAL_S", "DEFAULT_MAX_PARTITIONS_PER_REQUEST",
           "OFF_LOOP_PARTITIONS"]

# A Fetch naming more partitions closes the connection (an invalid request).
DEFAULT_MAX_PARTITIONS_PER_REQUEST = 200000
# Fetches naming at least this many partitions (or with a body of OFF_LOOP_BYTES or more) are
# decoded and planned on the fetch thread pool, so the event loop keeps serving other clients.
OFF_LOOP_PARTITIONS = 64
OFF_LOOP_BYTES = 16384
# With sender processes a converting fetch of at most this many partitions is planned on the
# event loop (each partition's first batch converted there), larger ones on the workers; so is
# one whose first batches to convert weigh more than LOOP_CONVERT_BUDGET: stored bytes times
# the codec's weight (gzip and zstd: never on the loop). A compressed batch may inflate to
# --max-decompressed-batch-bytes: 32 MiB of lz4 (254 KB stored) takes about 50 ms to convert,
# of gzip (163 KB) about 150 ms; 1 MiB uncompressed about 3 ms.
PLAN_ON_LOOP_PARTITIONS = 8
LOOP_CONVERT_BUDGET = 1 << 20
LOOP_CONVERT_WEIGHT = {int(Compression.NONE): 1, int(Compression.LZ4): 4, int(Compression.SNAPPY): 4}
# One thread: planning is Python that holds the GIL, and a second planner would compete with the
# event loop for it (measured: a fresh consumer waited longer). Raise it once conversion runs in
# code that releases the GIL.
FETCH_THREADS = 1
# A fetch planned on the pool hands the GIL back this often (in partitions), so the event loop
# keeps answering other clients promptly while a 100k-partition fetch is being planned.
_YIELD_EVERY = 32
# Bound on one batch's decompressed payload on the conversion path: a larger one (a compression
# bomb) is unreadable data, answered as that partition's storage error or ended in padding.
DEFAULT_MAX_DECOMPRESSED_BATCH = 32 << 20

# A fetch waiting for MinBytes is woken by every append made through this server (Produce,
# transaction markers); it also looks at the log again this often, for data written into the
# log directory by another process.
FETCH_POLL_INTERVAL_S = 0.25


class FetchHandler:
    """Answers Fetch requests from a :class:`LogDirectory`."""

    def __init__(self, logdir: LogDirectory, stats: BrokerStats, chunk_size: int,
                 topic_config: Callable[[str], TopicConfig],
                 segment_files: SegmentFileCache | None = None,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS_PER_REQUEST,
                 max_decompressed_batch: int = DEFAULT_MAX_DECOMPRESSED_BATCH,
                 workers: ConversionWorkers | None = None, remote_sends: bool = False) -> None:
        """``segment_files``: the shared cache of open segment files (a private one if None);
        ``max_partitions``: the most partitions one Fetch may name; ``max_decompressed_batch``:
        the largest decompressed batch payload down-conversion inflates; ``workers``: the
        conversion worker pool, where fetches that convert are planned (None: on the loop);
        ``remote_sends``: the server has sender processes, so converting responses are
        described for them (``Response.remote``), and the fetches of a few partitions planned
        on the loop."""
        self.logdir = logdir
        self.segment_files = segment_files or SegmentFileCache()
        self.max_partitions = max_partitions
        self.max_decompressed_batch = max_decompressed_batch
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.workers = workers
        self.remote_sends = remote_sends
        self._closing = False  # set by close(): fetches being planned stop at their next step
        self.stats = stats
        self.chunk_size = chunk_size
        self.topic_config = topic_config
        self._append_waiters: set[asyncio.Future[None]] = set()
        self._appends = 0  # appends notified so far: a fetch planned meanwhile looks again

    def notify_append(self) -> None:
        """Wake every fetch waiting for MinBytes (called on the serving loop after an append)."""
        self._appends += 1
        waiters, self._append_waiters = self._append_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_for_append(self, timeout: float) -> None:
        """Until the next append through this server, or ``timeout`` seconds."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._append_waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._append_waiters.discard(waiter)

    def close(self) -> None:
        """Stop the fetch thread pool: queued fetches are dropped and one being planned stops
        at its next step, so a shutdown never waits for a 100k-partition fetch to be planned."""
        self._closing = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    async def off_loop(self, fn: Callable[..., Any], *args: Any,
                        cleanup: Callable[[Any], None] | None = None,
                        on_workers: bool = False) -> Any:
        """``fn(*args)`` on the fetch thread pool (``on_workers``: on the conversion worker
        pool); if the caller is cancelled meanwhile (its client went away), ``cleanup`` releases
        what ``fn`` returns once it is done."""
        if on_workers and self.workers is not None:
            future = self.workers.submit(fn, *args)
        else:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(FETCH_THREADS, "lazyconv-fetch")
            future = self._pool.submit(fn, *args)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if cleanup is not None:
                future.add_done_callback(lambda done: _cleanup_result(done, cleanup))
            raise

    def _decode(self, version: int, body: memoryview) -> dict[str, Any]:
        announced = _announced_partitions(version, body)
        if announced is not None and announced > self.max_partitions:  # refused before decoding
            raise RemoteProtocolError(f"Fetch names {announced} partitions, more than this server's limit "
                                f"of {self.max_partitions} (--max-partitions-per-request)", 0)
        request = FetchRequest.decode(version, body)
        count = sum(len(topic["partitions"]) for topic in request["topics"])
        if count > self.max_partitions:
            raise RemoteProtocolError(f"Fetch names {count} partitions, more than this server's limit of "
                                f"{self.max_partitions} (--max-partitions-per-request)", 0)
        request["partition_count"] = count
        return request

    async def fetch(self, version: int, correlation_id: int, body: memoryview) -> Response:
        large = len(body) >= OFF_LOOP_BYTES
        request = await self.off_loop(self._decode, version, body) if large else self._decode(version, body)
        large = large or request["partition_count"] >= OFF_LOOP_PARTITIONS
        # Fetch v0-3 reads magic 0/1, so every v2 batch it reaches is converted, the first of
        # each partition while the fetch is planned (that fixes the response's size): such a
        # fetch is planned and sized on the conversion workers, leaving the loop to move bytes.
        # A many-partition fetch stays on the fetch thread, which hands the GIL back as it goes.
        # With sender processes the loop plans a fetch of a few partitions (one batch each
        # converted to size it) and a sender converts the rest: no thread to hand the GIL to
        # (measured: 1.3 against 0.95 CPU s/GiB when the workers planned them too).
        converting = not large and self.workers is not None and version <= 3 and \
            (not self.remote_sends or request["partition_count"] > PLAN_ON_LOOP_PARTITIONS)
        session_epoch = request.get("session_epoch", -1)
        if version >= 7 and session_epoch not in (-1, 0):
            # Sessions are never created here (we answer SessionId 0), so an incremental fetch
            # refers to a session this server does not know: FETCH_SESSION_ID_NOT_FOUND, as
            # Kafka's FetchManager answers any id its cache lacks (0 included)
            code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            return self._fetch_response(version, correlation_id, int(code), [], [])[0]
        min_bytes = request.get("min_bytes", 0)
        deadline = time.monotonic() + max(0, request.get("max_wait_ms", 0)) / 1000
        while True:
            appends = self._appends
            if large or converting:
                plan = await self.off_loop(self._plan_fetch, version, request, cleanup=_FetchPlan.close,
                                           on_workers=converting)
            else:
                storage_errors = self.stats.storage_errors
                try:
                    plan = self._plan_fetch(version, request, on_loop=True)
                except _CostlyOnLoop:
                    # planned again, from the start, by the workers (the abandoned plan closed
                    # what it opened; the partitions it read are counted once)
                    self.stats.storage_errors = storage_errors
                    converting = self.workers is not None
                    plan = await self.off_loop(self._plan_fetch, version, request,
                                               cleanup=_FetchPlan.close, on_workers=True)
            # As Kafka's fetchMessages: answered at once when enough bytes are readable, when no
            # partition named could be read (all unknown) or when reading one failed (offset out
            # of range, storage error), so the client learns of it now, not after MaxWaitMs.
            if plan.bytes_read >= min(min_bytes, plan.limit) or not plan.partitions or \
                    plan.read_errors or time.monotonic() >= deadline:
                break
            if plan.converted and version <= 3 and self.workers is not None:
                converting = True  # a fetch that waits for more is planned again by the workers
            plan.close()
            if self._appends != appends:
                continue  # an append came while the plan was made off the loop: it may have data
            await self._wait_for_append(min(FETCH_POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))
        self.stats.fetch_partitions += plan.partitions
        self.stats.converted_partitions += plan.converted
        self.stats.zero_copy_partitions += plan.zero_copy
        self.stats.partial_tail_responses += plan.partial_tails
        try:
            if large or (converting and plan.converted):  # sizing takes a while too
                response, parts = await self.off_loop(
                    self._fetch_response, version, correlation_id, 0, plan.topics, plan.resources,
                    cleanup=lambda done: done[0].close(), on_workers=converting)
            else:
                response, parts = self._fetch_response(version, correlation_id, 0, plan.topics,
                                                       plan.resources)
            response.off_loop = plan.converted > 0  # conversion runs on the worker pool
            if self.remote_sends and plan.converted and not large:
                self._describe_for_sender(plan, response, parts)
            return response
        except BaseException:
            plan.close()
            raise

    def _describe_for_sender(self, plan: _FetchPlan, response: Response,
                             parts: list[bytes | RecordsSlot]) -> None:
        """Attach the description of a response (its :meth:`FetchResponse.framed_parts`) for a
        sender process (none when a partition's records are of a kind it cannot rebuild)."""
        labels: list[str] = []  # where each described partition's records start, for logs
        lazies: list[LazyDownConvertedRecords] = []

        def recipe_of(records: Any) -> Any:
            inner = getattr(records, "records", None)
            if isinstance(inner, SegmentSlice):
                labels.append(inner.path.parent.name)
                return slice_recipe(inner.path, inner.start, inner.size_in_bytes)
            if isinstance(inner, LazyDownConvertedRecords) and isinstance(inner.records, CachedFileRecords):
                labels.append(f"{inner.records.cached_path.parent.name} at {inner.first_offset}")
                lazies.append(inner)
                return lazy_recipe(inner, inner.records)
            return None

        job = fetch_send_job(parts, response.send.size, recipe_of, self.segment_files.capacity)
        if job is None:
            return
        for lazy in lazies:
            lazy.release_first_batch()  # the sender converts it again; if not, so do we
        stats = self.stats

        def done(report: SendReport) -> None:
            if report.details is None:
                return
            add_send_counts(stats, report.details.counts)
            for position, error in report.details.corrupt:
                report_corrupt_send(stats, labels[position], error)

        response.remote = job
        response.remote_done = done

    def _fetch_response(self, version: int, correlation_id: int, error_code: int,
                        topics: list[dict[str, Any]], resources: list[Any]
                        ) -> tuple[Response, list[bytes | RecordsSlot]]:
        """The response to write, and its parts (to describe it for a sender)."""
        response = FetchResponse(version, _fetch_body(error_code, topics))
        parts = response.framed_parts(correlation_id)
        return Response(fetch_response_send(parts, 4 + response.size_in_bytes), list(resources)), parts

    def _plan_fetch(self, version: int, request: dict[str, Any], on_loop: bool = False) -> _FetchPlan:
        """Read every partition of a fetch in request order under KIP-74's budget (``on_loop``:
        on the event loop, which converts no costly batch: :class:`_CostlyOnLoop`)."""
        plan = _FetchPlan()
        plan.on_loop = on_loop
        # A many-partition response keeps no converted bytes while it waits for its reader: each
        # partition's first converted batch is converted again when its turn comes.
        plan.release_first = request.get("partition_count", 0) >= OFF_LOOP_PARTITIONS
        max_bytes = request.get("max_bytes") if version >= 3 else None
        if max_bytes is not None and max_bytes < 0:
            # Kafka reads the first partition under the negative MaxBytes (that read fails,
            # see _read_partition) and every later one under what is left of it: nothing
            plan.negative_limit = max_bytes
            max_bytes = 0
        budget = FetchBudget(version, max_bytes)
        plan.limit = budget.limit
        # Followers are exempt from message.downconversion.enable (docs/guide/fetch-response.md).
        is_follower = is_follower_fetch(version, request)
        read: list[tuple[tuple[str, Any], dict[str, Any]]] = []
        rejected: list[tuple[tuple[str, Any], dict[str, Any]]] = []
        try:
            names: dict[Any, str] = {}  # topic id -> name (v13+), each looked up once
            for topic, part in _distinct_partitions(version, request["topics"]):
                name, topic_id = topic["topic"], topic.get("topic_id")
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if version >= 13:  # topics are named by id
                    if topic_id not in names:
                        names[topic_id] = self.logdir.topic_name(topic["topic_id"]) or ""
                    name = names[topic_id]
                    if not name:  # a known id with a partition it lacks is UNKNOWN_TOPIC_OR_PARTITION
                        unknown = ErrorCode.UNKNOWN_TOPIC_ID
                plan.seen += 1
                if plan.seen % _YIELD_EVERY == 0:
                    time.sleep(0)  # let the event loop's thread take the GIL now and then
                    if self._closing:
                        raise _ShuttingDown("the server is stopping")
                plog = self.logdir.partition(name, part["partition"]) if name else None
                if plog is None:
                    rejected.append(((name, topic_id), error_partition(part["partition"], unknown)))
                    continue
                before = budget.remaining
                entry = self._read_partition_guarded(version, name, plog, part, budget, plan,
                                                     is_follower, request.get("isolation_level", 0))
                read.append(((name, topic_id), entry))
                plan.negative_limit = None
                plan.bytes_read += before - budget.remaining
                plan.partitions += 1
        except BaseException:
            plan.close()
            raise
        plan.topics = _topic_entries(read + rejected)
        return plan

    def _read_partition_guarded(self, version: int, topic: str, plog: PartitionLog,
                                part: dict[str, Any], budget: FetchBudget, plan: _FetchPlan,
                                is_follower: bool, isolation_level: int) -> dict[str, Any]:
        """:meth:`_read_partition`, with unreadable log data (or a segment file that cannot be
        opened) answered as that partition's
        KAFKA_STORAGE_ERROR (NOT_LEADER_OR_FOLLOWER below Fetch v6) instead of failing the fetch.

        What the partition had already opened is closed; its share of the budget is returned."""
        resources_before = len(plan.resources)
        remaining_before, min_one_before = budget.remaining, budget.min_one
        counts_before = (plan.converted, plan.zero_copy, plan.partial_tails)
        try:
            return self._read_partition(version, topic, plog, part, budget, plan, is_follower,
                                        isolation_level)
        except (RecordsError, OSError) as exc:  # corrupt data, or a segment gone / unreadable
            log.error("fetch %s-%d at %d: unreadable log data: %s", topic, part["partition"],
                      part["fetch_offset"], exc)
            for resource in plan.resources[resources_before:]:
                resource.close()
            del plan.resources[resources_before:]
            budget.remaining, budget.min_one = remaining_before, min_one_before
            plan.converted, plan.zero_copy, plan.partial_tails = counts_before
            self.stats.storage_errors += 1
            plan.read_errors += 1
            return broker_partition_response(
                version, part["partition"], None, fetch_offset=part["fetch_offset"],
                error_code=int(ErrorCode.KAFKA_STORAGE_ERROR), high_watermark=-1,
                last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None)

    def _read_partition(self, version: int, topic: str, plog: PartitionLog, part: dict[str, Any],
                        budget: FetchBudget, plan: _FetchPlan,
                        is_follower: bool = False, isolation_level: int = 0) -> dict[str, Any]:
        """One partition of a fetch, as the response partition dict (docs/guide/fetch-response.md)."""
        index = part["partition"]
        fetch_offset = part["fetch_offset"]
        config = self.topic_config(topic)
        records: Any
        size = 0
        region: Region | None = None
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
            plan.read_errors += 1
        else:
            limit = min(part["partition_max_bytes"],
                        budget.remaining if plan.negative_limit is None else plan.negative_limit)
            if limit < 0 and region.path is not None and region.end > region.position:
                # Kafka's log read refuses a negative size (an IllegalArgumentException, answered
                # as UNKNOWN_SERVER_ERROR) once there is something to read; at the high
                # watermark or last stable offset the answer is empty, as for any size
                log.info("fetch %s-%d at %d: negative byte limit %d", topic, index, fetch_offset, limit)
                plan.read_errors += 1
                return broker_partition_response(
                    version, index, None, fetch_offset=fetch_offset,
                    error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR), high_watermark=-1,
                    last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None)
            error, hw, start = ErrorCode.NONE, region.high_watermark, region.log_start_offset
            records = b""
            size = _consume_budget(budget, region, part["partition_max_bytes"])
            if size > 0:
                assert region.path is not None and region.segment is not None
                records = CachedFileRecords(self.segment_files, region.path, region.position,
                                            region.position + size,
                                            max_decompressed_size=self.max_decompressed_batch)
                plan.resources.append(records)
                plan.partial_tails += not region.segment.is_entry_boundary(region.position + size)
        chunk_size = self.chunk_size
        # Kafka's aborted transactions: a list (maybe empty) for a read_committed fetch that
        # found its offset, null otherwise (read_uncommitted, errors)
        aborted: list[dict[str, int]] | None = None
        if hw < 0 or txns is None:
            lso = hw
        elif read_committed:
            found = txns.aborted_between(fetch_offset, lso)
            if found and region is not None:
                upper = _aborted_upper_bound(plog, region, size)
                found = [t for t in found if t.first_offset < upper]
            aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                       for t in found]

        def corrupt_after_commit(exc: RecordsError) -> None:
            report_corrupt_send(self.stats, f"{topic}-{index} at {fetch_offset}", exc)

        def lazy(records_in: Any, to_magic: int, first_offset: int) -> Any:
            if plan.on_loop and region is not None:
                weight = LOOP_CONVERT_WEIGHT.get(region.first_entry_codec)
                plan.loop_cost += region.first_entry_size * (weight or 0)
                if weight is None or plan.loop_cost > LOOP_CONVERT_BUDGET:
                    raise _CostlyOnLoop(f"{topic}-{index} at {fetch_offset}")
            converted = LazyDownConvertedRecords(
                records_in, to_magic, first_offset, chunk_size=chunk_size, on_error=corrupt_after_commit,
                # the first batch's size lets an uncompressed one be read and converted in one
                # step (any other would be read twice)
                first_batch_size=region.first_entry_size
                if region is not None and region.first_entry_codec == 0 else None)
            if plan.release_first:
                converted.release_first_batch()
            tracked = TrackedLazyRecords(converted, self.stats)
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
        if isinstance(records, CachedFileRecords) and entry["records"] is records:
            # Sent as stored: no descriptor is held until the send reaches this partition.
            plan.zero_copy += 1
            region_slice = SegmentSlice(self.segment_files, records.cached_path, records.start,
                                        records.size_in_bytes)
            plan.resources.remove(records)
            records.close()
            entry["records"] = tracked = TrackedFileRecords(region_slice, self.stats)
            plan.resources.append(tracked)
        return entry


_FIXED_HEAD = struct.Struct(">iii")  # replica id, max wait, min bytes


def _distinct_partitions(version: int, topics: list[dict[str, Any]]
                         ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The partitions a fetch names, each once, as ``(topic entry, partition entry)``: Kafka
    reads them into a map (FetchRequest.fetchData) keyed by topic (its name, or its id from v13)
    and partition, so a partition named again is answered once, where it was first named, with
    what it was named with last."""
    distinct: dict[tuple[Any, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for topic in topics:
        key = topic["topic"] if version < 13 else topic.get("topic_id")
        for part in topic["partitions"]:
            distinct[(key, part["partition"])] = (topic, part)
    return list(distinct.values())


def _fetch_body(error_code: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    """The FetchResponse body this server answers (no throttling, no fetch sessions)."""
    return {"throttle_time_ms": 0, "error_code": error_code, "session_id": 0, "responses": topics}


def _announced_partitions(version: int, body: memoryview) -> int | None:
    """The partition count a non-flexible Fetch (v0-11) announces, read from its array counts
    without decoding it (None for flexible versions or a body too short to say)."""
    if version >= 12:
        return None
    at = _FIXED_HEAD.size + (4 if version >= 3 else 0) + (1 if version >= 4 else 0) + \
        (8 if version >= 7 else 0)
    entry = 16 + (8 if version >= 5 else 0) + (4 if version >= 9 else 0)
    try:
        (topics,) = struct.unpack_from(">i", body, at)
        at += 4
        total = 0
        for _ in range(max(0, topics)):
            (name_length,) = struct.unpack_from(">h", body, at)
            at += 2 + max(0, name_length)
            (partitions,) = struct.unpack_from(">i", body, at)
            at += 4 + max(0, partitions) * entry
            total += max(0, partitions)
        return total
    except struct.error:
        return None  # shorter than announced: the decoder says what is wrong


def _cleanup_result(done: concurrent.futures.Future[Any], cleanup: Callable[[Any], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        cleanup(done.result())


def _aborted_upper_bound(plog: PartitionLog, region: Region, size: int) -> int:
    """Where Kafka stops looking for the aborted transactions of a read_committed read of
    ``size`` bytes from ``region``: the offset of the first offset index entry at or after the
    end of the read (the segment's ``.index`` file, sparse), else the next segment's base
    offset, else the log end offset (LocalLog.addAbortedTransactions). Transactions that start
    at or after it are not listed, even when the read reaches them (the consumer skips the
    records of a transaction it was not told about only via its abort marker)."""
    from lazyconv.logdir._index import parse_offset_index

    segment = region.segment
    if segment is None:
        return plog.high_watermark
    target = region.position + size
    try:
        data = segment.index_path.read_bytes()
    except OSError:
        data = b""
    data = data[: len(data) - len(data) % 8]
    for i, entry in enumerate(parse_offset_index(data, segment.base_offset)):
        if i > 0 and entry.offset == segment.base_offset:
            break  # the zero-filled, pre-allocated tail of an active segment's index
        if entry.position >= target:
            return entry.offset
    later = [s.base_offset for s in plog.segments if s.base_offset > segment.base_offset]
    return min(later) if later else plog.high_watermark


def _consume_budget(budget: FetchBudget, region: Region, partition_max_bytes: int) -> int:
    """Bytes of ``region`` this partition gets under KIP-74 (docs/guide/fetch-response.md).

    The rules are :meth:`FetchBudget.take`'s; the region already starts at the batch holding
    the fetch offset, so finding it costs a bisect of the entry index rather than reading every
    batch header of the segment.
    """
    if region.path is None or region.end <= region.position:
        return 0
    return budget.take(region.first_entry_size, region.end - region.position, partition_max_bytes)


class _ShuttingDown(Exception):
    """A fetch being planned when the server stops (nobody waits for its answer)."""


class _CostlyOnLoop(Exception):
    """A fetch being planned on the event loop must convert a batch too costly for it there."""


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
        self.read_errors = 0  # partitions whose read failed (offset out of range, storage error)
        self.seen = 0
        self.release_first = False
        self.on_loop = False
        self.loop_cost = 0  # weighted stored bytes of the first batches converted on the loop
        # a negative request MaxBytes, until the first partition is read under it
        self.negative_limit: int | None = None

    def close(self) -> None:
        for resource in self.resources:
            resource.close()
        self.resources.clear()


def _topic_entries(partitions: list[tuple[tuple[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """The response's topics: each partition comes with its topic's ``(name, id)`` as the
    request named it (the id is what Fetch v13+ sends back)."""
    topics: list[dict[str, Any]] = []
    for (name, topic_id), entries in group_by_topic(partitions):
        topic: dict[str, Any] = {"topic": name, "partitions": entries}
        if topic_id is not None:
            topic["topic_id"] = topic_id
        topics.append(topic)
    return topics
