"""An accumulator model that drives the built-in partitioner as Kafka's ``RecordAccumulator`` does.

:class:`RecordAccumulator` keeps one deque of :class:`Batch` per partition with Kafka's size model
(61-byte header, ``max(batch.size, upper bound)`` write limit, "full" only when closed for appends
or at the write limit), runs the append algorithm of ``RecordAccumulator.append`` (pending-switch
check, try the last batch, abort-on-new-batch for custom partitioners, new batch), the sender's
ready pass (queue sizes → adaptive load stats, availability exclusion), node latency stats and
drain. Time is whatever unit the caller uses consistently (ms in Kafka).

It is a *model* of the producer's bookkeeping (no record bytes are written): enough for the
partitioner to see exactly the events it sees in Kafka (bytes appended, batch created / full /
sent, queue sizes, readiness), and for :mod:`lazyconv.partitioner._simulator`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._builtin import BuiltInPartitioner, StickyPartitionInfo, SwitchRule
from lazyconv.partitioner._cluster import (
    ClusterView,
    RandomSource,
    check_cluster,
    default_random_source,
)
from lazyconv.partitioner._sizes import RECORD_BATCH_OVERHEAD, batch_size_upper_bound, record_size

__all__ = [
    "UNKNOWN_PARTITION",
    "ProducerConfig",
    "Batch",
    "AppendResult",
    "NodeLatencyStats",
    "RecordAccumulator",
]

UNKNOWN_PARTITION = -1
"""Partition value meaning "let the built-in partitioner choose"."""


@dataclass(frozen=True)
class ProducerConfig:
    """The producer settings that shape partitioning (Kafka's names in snake_case)."""

    batch_size: int = 16384
    linger_ms: float = 0.0
    max_in_flight_requests_per_connection: int = 5
    buffer_memory: int = 33554432
    max_request_size: int = 1048576
    partitioner_adaptive_partitioning_enable: bool = True
    partitioner_availability_timeout_ms: float = 0.0
    partitioner_ignore_keys: bool = False
    switch_rule: SwitchRule = SwitchRule.DEFERRED
    """Not a Kafka setting: which sticky switching rule to model (Kafka's own is ``DEFERRED``)."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_in_flight_requests_per_connection", "buffer_memory", "max_request_size"):
            if not isinstance(getattr(self, name), int):
                raise ConfigurationError(f"{name} must be an int, got {getattr(self, name)!r:.40}")
        for name in ("linger_ms", "partitioner_availability_timeout_ms"):
            if not isinstance(getattr(self, name), int | float):
                raise ConfigurationError(f"{name} must be a number of milliseconds, got {getattr(self, name)!r:.40}")
        SwitchRule(self.switch_rule)  # ConfigurationError for anything but a rule (or its name)
        if self.batch_size < 0:
            raise ConfigurationError(f"batch_size must be >= 0, got {self.batch_size}")
        if self.linger_ms < 0:
            raise ConfigurationError(f"linger_ms must be >= 0, got {self.linger_ms}")
        if self.max_in_flight_requests_per_connection < 1:
            raise ConfigurationError(
                "max_in_flight_requests_per_connection must be >= 1, got "
                f"{self.max_in_flight_requests_per_connection}"
            )
        if self.partitioner_availability_timeout_ms < 0:
            raise ConfigurationError(
                "partitioner_availability_timeout_ms must be >= 0, got "
                f"{self.partitioner_availability_timeout_ms}"
            )

    @property
    def effective_batch_size(self) -> int:
        """``batch.size`` with 0 treated as 1 (buffer floor and sticky byte limit)."""
        return max(1, self.batch_size)


class Batch:
    """Bookkeeping of one producer batch (uncompressed v2 size model)."""

    __slots__ = (
        "topic", "partition", "write_limit", "buffer_size", "estimated_size", "record_count",
        "closed", "base_timestamp", "created_at", "tokens",
    )

    def __init__(
        self, topic: str, partition: int, buffer_size: int, base_timestamp: int, created_at: float
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.buffer_size = buffer_size
        self.write_limit = buffer_size
        self.estimated_size = RECORD_BATCH_OVERHEAD
        self.record_count = 0
        self.closed = False
        self.base_timestamp = base_timestamp
        self.created_at = created_at
        self.tokens: list[Any] = []

    @property
    def is_full(self) -> bool:
        """Closed for appends, or holding records up to its write limit (Kafka's ``isFull``)."""
        return self.closed or (self.record_count > 0 and self.write_limit <= self.estimated_size)

    def next_record_size(
        self, key_size: int, value_size: int, headers_bytes: int, timestamp: int
    ) -> int:
        """Size the next record would take in this batch (its deltas depend on the batch)."""
        delta = timestamp - self.base_timestamp if self.record_count else 0
        return record_size(key_size, value_size, headers_bytes, self.record_count, delta)

    def try_append(
        self, key_size: int, value_size: int, headers_bytes: int, timestamp: int, token: Any
    ) -> int:
        """Append if there is room; returns the bytes added, or 0 when the record does not fit."""
        if self.closed:
            return 0
        size = self.next_record_size(key_size, value_size, headers_bytes, timestamp)
        if self.record_count and (
            self.write_limit <= self.estimated_size or self.write_limit < self.estimated_size + size
        ):
            return 0
        if not self.record_count:
            self.base_timestamp = timestamp
        self.estimated_size += size
        self.record_count += 1
        self.tokens.append(token)
        return size

    def close_for_appends(self) -> None:
        """Refuse further records (a record did not fit, or the batch is being sent)."""
        self.closed = True


@dataclass
class AppendResult:
    """What an append did (Kafka's ``RecordAppendResult`` plus the partition and bytes)."""

    partition: int
    batch: Batch | None
    appended_bytes: int
    batch_is_full: bool
    new_batch_created: bool
    abort_for_new_batch: bool = False
    blocked: bool = False
    """``buffer.memory`` is exhausted: nothing appended; retry after batches complete."""


@dataclass
class NodeLatencyStats:
    """When a node last had sendable data (ready) and last could take a request (drain)."""

    ready_time: float
    drain_time: float


class RecordAccumulator:
    """Per-partition batch deques, the built-in partitioners and their feeding (see module doc)."""

    def __init__(
        self,
        cluster: ClusterView,
        config: ProducerConfig | None = None,
        random: RandomSource | None = None,
        custom_partitioner: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, ProducerConfig):
            raise ConfigurationError(f"config must be a ProducerConfig or None, got {type(config).__name__}")
        check_cluster(cluster)  # kept for every record: refused here rather than at the first
        self.cluster = cluster
        self.config = config if config is not None else ProducerConfig()
        self.batch_size = self.config.effective_batch_size
        # A configured partitioner.class disables adaptive partitioning and its knobs.
        self.adaptive = self.config.partitioner_adaptive_partitioning_enable and not custom_partitioner
        self.availability_timeout = (
            self.config.partitioner_availability_timeout_ms if self.adaptive else 0.0
        )
        self._random = random if random is not None else default_random_source()
        self.free_memory = self.config.buffer_memory
        self.memory_waiters = 0
        # topic -> {partition -> deque}; insertion order is irrelevant, the ready pass sorts.
        self.batches: dict[str, dict[int, deque[Batch]]] = {}
        self.partitioners: dict[str, BuiltInPartitioner] = {}
        self.node_stats: dict[int, NodeLatencyStats] = {}
        self._drain_index: dict[int, int] = {}

    # -- partitioner plumbing -------------------------------------------------------------

    def built_in_partitioner(self, topic: str) -> BuiltInPartitioner:
        """The topic's built-in partitioner (created on first use)."""
        bp = self.partitioners.get(topic)
        if bp is None:
            bp = BuiltInPartitioner(topic, self.batch_size, self._random, self.config.switch_rule)
            self.partitioners[topic] = bp
        return bp

    def deque_for(self, topic: str, partition: int) -> deque[Batch]:
        """The partition's deque, created on first use (creation matters for load stats)."""
        topic_batches = self.batches.setdefault(topic, {})
        dq = topic_batches.get(partition)
        if dq is None:
            dq = topic_batches[partition] = deque()
        return dq

    @staticmethod
    def all_batches_full(dq: deque[Batch]) -> bool:
        """True when the deque is empty or its last batch is full."""
        return not dq or dq[-1].is_full

    def _pending_switch(
        self, bp: BuiltInPartitioner, info: StickyPartitionInfo | None, dq: deque[Batch]
    ) -> bool:
        """Kafka's ``partitionChanged``: complete a deferred switch once the batches are full."""
        if info is None:
            return False
        if info is not bp.current:
            return True
        if self.all_batches_full(dq):
            return bp.update_partition_info(info, 0, self.cluster, True)
        return False

    # -- append ----------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        key_size: int,
        value_size: int,
        headers_bytes: int = 1,
        timestamp: int = 0,
        now: float = 0.0,
        abort_on_new_batch: bool = False,
        token: Any = None,
    ) -> AppendResult:
        """Append one record (sizes: -1 = null) to ``partition`` or, if UNKNOWN, the sticky one."""
        if not isinstance(topic, str) or not all(isinstance(n, int) for n in (
                partition, key_size, value_size, headers_bytes, timestamp)):
            raise ConfigurationError(
                "append needs a str topic and int partition, key_size, value_size, headers_bytes and timestamp, "
                f"got {topic!r:.40}, {partition!r:.20}, {key_size!r:.20}, {value_size!r:.20}, "
                f"{headers_bytes!r:.20}, {timestamp!r:.20}")
        bp = self.built_in_partitioner(topic) if partition == UNKNOWN_PARTITION else None
        while True:
            if bp is not None:
                peeked = bp.peek_current_partition_info(self.cluster)
                info: StickyPartitionInfo | None = peeked
                effective = peeked.partition
            else:
                info = None
                effective = partition
            dq = self.deque_for(topic, effective)
            if bp is not None and self._pending_switch(bp, info, dq):
                continue
            if dq:
                last = dq[-1]
                appended = last.try_append(key_size, value_size, headers_bytes, timestamp, token)
                if appended:
                    if bp is not None:
                        bp.update_partition_info(
                            info, appended, self.cluster, self.all_batches_full(dq)
                        )
                    return AppendResult(effective, last, appended, len(dq) > 1 or last.is_full, False)
                last.close_for_appends()
            if abort_on_new_batch:
                return AppendResult(effective, None, 0, False, False, abort_for_new_batch=True)
            buffer_size = max(
                self.batch_size, batch_size_upper_bound(key_size, value_size, headers_bytes)
            )
            if buffer_size > self.free_memory:
                return AppendResult(effective, None, 0, False, False, blocked=True)
            # The last batch is closed now, so a deferred switch usually completes here.
            if bp is not None and self._pending_switch(bp, info, dq):
                continue
            self.free_memory -= buffer_size
            batch = Batch(topic, effective, buffer_size, timestamp, now)
            batch.try_append(key_size, value_size, headers_bytes, timestamp, token)
            dq.append(batch)
            appended = batch.estimated_size
            if bp is not None:
                bp.update_partition_info(info, appended, self.cluster, self.all_batches_full(dq))
            return AppendResult(effective, batch, appended, len(dq) > 1 or batch.is_full, True)

    def deallocate(self, batch: Batch) -> None:
        """Return a completed batch's buffer to ``buffer.memory``."""
        self.free_memory += batch.buffer_size

    # -- sender side -------------------------------------------------------------------------

    def ready(self, now: float) -> set[int]:
        """The ready pass: nodes with sendable data; refreshes every topic's load stats.

        Uses the node latency stats left by *previous* passes (Kafka's order).
        """
        ready_nodes: set[int] = set()
        exhausted = self.memory_waiters > 0
        timeout = self.availability_timeout
        for topic, topic_batches in self.batches.items():
            all_count = len(self.cluster.partitions_for_topic(topic))
            collect = self.adaptive and len(topic_batches) >= all_count
            sizes: list[int] | None = [0] * len(topic_batches) if collect else None
            ids: list[int] | None = [0] * len(topic_batches) if collect else None
            index = -1
            for pid in sorted(topic_batches):
                leader = self.cluster.leader_for(topic, pid)
                if leader is not None and sizes is not None and ids is not None:
                    index += 1
                    ids[index] = pid
                dq = topic_batches[pid]
                if not dq or leader is None:
                    continue
                if sizes is not None:
                    sizes[index] = len(dq)
                    if timeout > 0:
                        stats = self.node_stats.get(leader)
                        if stats is not None and stats.ready_time - stats.drain_time > timeout:
                            index -= 1  # excluded: the next included partition takes the slot
                full = len(dq) > 1 or dq[0].is_full
                if full or exhausted or now - dq[0].created_at >= self.config.linger_ms:
                    ready_nodes.add(leader)
            # Kafka creates the topic's partitioner with its first deque, explicit appends too.
            self.built_in_partitioner(topic).update_partition_load_stats(sizes, ids, index + 1)
        return ready_nodes

    def update_node_latency_stats(self, node: int, now: float, can_drain: bool) -> None:
        """Record that ``node`` had data at ``now`` and whether it could take a request."""
        if self.availability_timeout <= 0:
            return
        stats = self.node_stats.get(node)
        if stats is None:
            stats = self.node_stats[node] = NodeLatencyStats(now, now)
        stats.ready_time = now
        if can_drain:
            stats.drain_time = now

    def drain(self, node: int, partitions: Iterable[tuple[str, int]]) -> list[Batch]:
        """Take at most the head batch of each of ``node``'s partitions, up to max.request.size.

        ``partitions`` are the (topic, partition) pairs the node leads, in metadata order. As in
        Kafka's ``drainBatchesForOneNode``, the visit starts where the previous drain of this node
        left off: at the last partition it *visited* (the one whose batch did not fit, or the
        last of a full round), so a partition passed over for lack of room goes first next time.
        """
        parts = list(partitions)
        if not parts:
            return []
        start = index = self._drain_index.get(node, 0) % len(parts)
        drained: list[Batch] = []
        size = 0
        while True:
            topic, pid = parts[index]
            self._drain_index[node] = index
            index = (index + 1) % len(parts)
            dq = self.batches.get(topic, {}).get(pid)
            if dq:
                head = dq[0]
                if drained and size + head.estimated_size > self.config.max_request_size:
                    break
                dq.popleft()
                head.close_for_appends()
                drained.append(head)
                size += head.estimated_size
            if index == start:
                break
        return drained

    def queue_sizes(self, topic: str) -> dict[int, int]:
        """Batches queued per partition of ``topic`` (partitions that have a deque)."""
        return {pid: len(dq) for pid, dq in sorted(self.batches.get(topic, {}).items())}
