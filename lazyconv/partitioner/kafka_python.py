"""KIP-794's built-in partitioner as a plug-in for kafka-python's ``KafkaProducer(partitioner=...)``.

Usage::

    from lazyconv.partitioner.kafka_python import KIP794Partitioner

    partitioner = KIP794Partitioner(batch_size=16384)
    producer = KafkaProducer(bootstrap_servers=..., batch_size=16384, partitioner=partitioner)
    partitioner.bind(producer)        # optional: queue sizes for adaptive switching

What kafka-python (3.0.x) gives a partitioner, and what this plug-in does with it:

* ``partition(topic, key, serialized_key, value, serialized_value, cluster)`` is called for every
  record without an explicit partition, *before* the append. Keyed records (unless
  ``ignore_keys``) get Kafka's murmur2 partition over all partitions. Keyless ones get the sticky
  partition, and the record's bytes are counted there, estimated from the serialized key and
  value: **headers are not passed to partitioners**, so header bytes are not counted, and the
  timestamp delta is taken as < 64 ms (a 1-byte varint).
* For keyless records kafka-python appends with "abort on new batch" and, when the record would
  need a new batch, calls the optional ``on_new_batch(topic, cluster, prev_partition)`` hook and
  then ``partition()`` again. The plug-in uses that hook as Kafka's accumulator uses its own
  signal: the record was not appended (its count is undone), every batch of the partition is now
  full, so a deferred switch completes, and the record is re-counted with the 61-byte batch
  header. Keyed records placed with ``ignore_keys=True`` get no such hook (kafka-python only
  aborts for null keys); without :meth:`KIP794Partitioner.bind` their batch headers are not
  counted.
* kafka-python passes no queue sizes to partitioners. :meth:`KIP794Partitioner.bind` lets the
  plug-in read the producer's accumulator (the private ``producer._accumulator._batches``
  deques) to get, on each keyless record, the number of batches queued per partition (adaptive
  weighting) and whether the sticky partition's last batch is full (deferred switch). Kafka
  recomputes load stats once per sender ready pass; here they are recomputed at each call, which
  sees the same queues. Unbound, or with ``adaptive_partitioning_enable=False``, switching is
  uniform. This relies on a private attribute of kafka-python 3.0.x.
* ``partitioner.availability.timeout.ms`` is **not supported**: it needs the sender's view of
  which brokers can take requests (ready vs drained times), which kafka-python does not expose.
* kafka-python's batches are full at ``batch_size`` bytes (it does not close a batch that refused
  a record); the plug-in follows kafka-python's notion, so pass the producer's ``batch_size``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.partitioner import Partitioner as _KafkaPartitioner
from kafka.structs import TopicPartition

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._builtin import BuiltInPartitioner, StickyPartitionInfo, SwitchRule
from lazyconv.partitioner._cluster import RandomSource, default_random_source
from lazyconv.partitioner._murmur2 import partition_for_key
from lazyconv.partitioner._sizes import RECORD_BATCH_OVERHEAD, record_size

__all__ = ["KIP794Partitioner", "KafkaPythonCluster"]


class KafkaPythonCluster:
    """Adapts kafka-python's ``ClusterMetadata`` to :class:`~lazyconv.partitioner.ClusterView`."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def partitions_for_topic(self, topic: str) -> Sequence[int]:
        try:
            partitions = self._cluster.partitions_for_topic(topic)
        except AttributeError:  # not kafka-python's metadata (None): a ConfigurationError
            self._check()
            raise
        if not partitions:
            raise ConfigurationError(f"topic {topic!r} has no partitions in kafka-python's metadata")
        return sorted(partitions)

    def available_partitions_for_topic(self, topic: str) -> Sequence[int]:
        try:
            return sorted(self._cluster.available_partitions_for_topic(topic) or ())
        except AttributeError:
            self._check()
            raise

    def leader_for(self, topic: str, partition: int) -> int | None:
        try:
            leader = self._cluster.leader_for_partition(TopicPartition(topic, partition))
        except AttributeError:
            self._check()
            raise
        return None if leader is None or leader < 0 else leader

    def _check(self) -> None:
        """Raise :class:`~lazyconv.errors.ConfigurationError` unless the adapted cluster has the
        methods of kafka-python's ``ClusterMetadata`` this adapter calls."""
        if not all(callable(getattr(self._cluster, name, None)) for name in _METADATA_METHODS):
            raise ConfigurationError(f"the cluster must be kafka-python's ClusterMetadata "
                                     f"({', '.join(_METADATA_METHODS)}), got {type(self._cluster).__name__}") from None


_METADATA_METHODS = ("partitions_for_topic", "available_partitions_for_topic", "leader_for_partition")


@dataclass
class _TopicState:
    partitioner: BuiltInPartitioner
    last_info: StickyPartitionInfo | None = None
    last_counted: int = 0
    new_batch_pending: bool = False


class KIP794Partitioner(_KafkaPartitioner):  # type: ignore[misc]  # kafka-python ships no types: its base is Any
    """Kafka's built-in (KIP-794) partitioner for kafka-python (see the module doc for limits).

    ``batch_size`` must be the producer's ``batch_size`` (it is the sticky byte limit).
    """

    def __init__(
        self,
        batch_size: int = 16384,
        adaptive_partitioning_enable: bool = True,
        ignore_keys: bool = False,
        switch_rule: SwitchRule = SwitchRule.DEFERRED,
        random: RandomSource | None = None,
    ) -> None:
        if batch_size < 0:
            raise ConfigurationError(f"batch_size must be >= 0, got {batch_size}")
        self.batch_size = max(1, batch_size)
        self.adaptive_partitioning_enable = adaptive_partitioning_enable
        self.ignore_keys = ignore_keys
        self.switch_rule = SwitchRule(switch_rule)
        self._random = random if random is not None else default_random_source()
        self._topics: dict[str, _TopicState] = {}
        self._lock = threading.RLock()
        self._batches: Any = None  # kafka-python's accumulator deques once bound

    def bind(self, producer: Any) -> KIP794Partitioner:
        """Read queue sizes and batch fullness from ``producer``'s accumulator (private API)."""
        accumulator = getattr(producer, "_accumulator", None)
        batches = getattr(accumulator, "_batches", None)
        if batches is None:
            raise ConfigurationError(
                "cannot bind: the producer has no _accumulator._batches (not kafka-python 3.0.x?)"
            )
        self._batches = batches
        return self

    def built_in_partitioner(self, topic: str) -> BuiltInPartitioner:
        """The topic's :class:`BuiltInPartitioner` (created on first use)."""
        return self._state(topic).partitioner

    def _state(self, topic: str) -> _TopicState:
        state = self._topics.get(topic)
        if state is None:
            bp = BuiltInPartitioner(topic, self.batch_size, self._random, self.switch_rule)
            state = self._topics[topic] = _TopicState(bp)
        return state

    def _deque(self, topic: str, partition: int) -> Any:
        if self._batches is None:
            return None
        # A partition without a deque has no batches (kafka-python creates deques lazily).
        return self._batches.get(TopicPartition(topic, partition), ())

    def _refresh_load_stats(self, topic: str, view: KafkaPythonCluster, bp: BuiltInPartitioner) -> None:
        if self._batches is None or not self.adaptive_partitioning_enable:
            bp.update_partition_load_stats(None, None, 0)
            return
        deques = {tp.partition: dq for tp, dq in list(self._batches.items()) if tp.topic == topic}
        if len(deques) < len(view.partitions_for_topic(topic)):
            bp.update_partition_load_stats(None, None, 0)
            return
        sizes = [0] * len(deques)
        ids = [0] * len(deques)
        index = -1
        for pid in sorted(deques):
            if view.leader_for(topic, pid) is None:
                continue
            index += 1
            ids[index] = pid
            sizes[index] = len(deques[pid])
        bp.update_partition_load_stats(sizes, ids, index + 1)

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        """Choose the partition of one record (called by ``KafkaProducer.send``)."""
        view = KafkaPythonCluster(cluster)
        if serialized_key is not None and not self.ignore_keys:
            all_partitions = view.partitions_for_topic(topic)
            return all_partitions[partition_for_key(serialized_key, len(all_partitions))]
        with self._lock:
            state = self._state(topic)
            bp = state.partitioner
            self._refresh_load_stats(topic, view, bp)
            info = bp.peek_current_partition_info(view)
            dq = self._deque(topic, info.partition)
            if dq is not None and (not dq or dq[-1].records.is_full()):
                # Pending (deferred) switch: the partition's batches are all full.
                if bp.update_partition_info(info, 0, view, True):
                    info = bp.peek_current_partition_info(view)
                    dq = self._deque(topic, info.partition)
            key_size = -1 if serialized_key is None else len(serialized_key)
            value_size = -1 if serialized_value is None else len(serialized_value)
            second_call = state.new_batch_pending
            state.new_batch_pending = False
            last = dq[-1] if dq else None
            offset_delta = 0
            if last is not None and not last.records.is_full():
                offset_delta = last.records.next_offset()
            size = record_size(key_size, value_size, 1, offset_delta)
            if dq is None:
                # Unbound: only the on_new_batch hook tells that this record opens a batch.
                new_batch = second_call
                all_full_after = False  # only a later pending check may switch
            else:
                new_batch = last is None or (
                    last.records.size_in_bytes() + size > self.batch_size
                    and last.records.next_offset() > 0
                )
                if new_batch and serialized_key is None and not second_call:
                    # kafka-python will abort this append, call on_new_batch and ask again:
                    # count the record then, as Kafka counts it once it is appended.
                    state.last_info = info
                    state.last_counted = 0
                    return info.partition
                if new_batch:
                    all_full_after = size + RECORD_BATCH_OVERHEAD >= self.batch_size
                else:
                    assert last is not None  # new_batch is False only with a last batch
                    all_full_after = last.records.size_in_bytes() + size >= self.batch_size
            appended = size + (RECORD_BATCH_OVERHEAD if new_batch else 0)
            state.last_info = info
            state.last_counted = appended
            bp.update_partition_info(info, appended, view, all_full_after)
            return info.partition

    def on_new_batch(self, topic: str, cluster: Any, prev_partition: int) -> None:
        """kafka-python's hook: the record given ``prev_partition`` needs a new batch there."""
        view = KafkaPythonCluster(cluster)
        with self._lock:
            state = self._state(topic)
            bp = state.partitioner
            info = state.last_info
            if info is None or info is not bp.current or info.partition != prev_partition:
                state.new_batch_pending = True
                return
            info.produced_bytes -= state.last_counted  # that record was not appended
            state.last_counted = 0
            bp.update_partition_info(info, 0, view, True)
            state.new_batch_pending = True
