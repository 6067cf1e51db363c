"""The pluggable partitioners KIP-794 replaced, kept for comparison.

* :class:`StickyPartitionCache` — KIP-480's sticky choice: keep one partition per topic until the
  producer reports a new batch, then force a *different* available partition.
* :class:`DefaultPartitioner` (keyed ⇒ murmur2, keyless ⇒ sticky) and
  :class:`UniformStickyPartitioner` (always sticky) built on it.
* :class:`RoundRobinPartitioner` — per-topic counter over the available partitions.

They implement :class:`Partitioner`, the contract of Kafka's ``partitioner.class``: the producer
calls :meth:`~Partitioner.partition` and, when the append would need a new batch,
:meth:`~Partitioner.on_new_batch` followed by a second :meth:`~Partitioner.partition` call
(which is why a round-robin counter skips values, KAFKA-9965).
"""

from __future__ import annotations

from typing import Protocol

from lazyconv.partitioner._cluster import (
    ClusterView,
    RandomSource,
    check_cluster,
    default_random_source,
)
from lazyconv.partitioner._murmur2 import partition_for_key, to_positive

__all__ = [
    "Partitioner",
    "StickyPartitionCache",
    "DefaultPartitioner",
    "UniformStickyPartitioner",
    "RoundRobinPartitioner",
]


class Partitioner(Protocol):
    """A pluggable partitioner (Kafka's ``org.apache.kafka.clients.producer.Partitioner``)."""

    def partition(
        self, topic: str, key: bytes | None, value: bytes | None, cluster: ClusterView
    ) -> int:
        """Partition for a record with serialized ``key``/``value`` (``None`` = null)."""
        ...

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        """The record that was just given ``prev_partition`` would need a new batch."""
        ...


class StickyPartitionCache:
    """KIP-480's sticky partition per topic (Kafka's ``StickyPartitionCache``)."""

    def __init__(self, random: RandomSource | None = None) -> None:
        self._random = random if random is not None else default_random_source()
        self._cache: dict[str, int] = {}

    def partition(self, topic: str, cluster: ClusterView) -> int:
        """The topic's sticky partition, chosen on first use."""
        cached = self._cache.get(topic)
        if cached is not None:
            return cached
        return self.next_partition(topic, cluster, -1)

    def next_partition(self, topic: str, cluster: ClusterView, prev_partition: int) -> int:
        """Move off ``prev_partition`` if it is still the sticky one; a stale ``prev`` is a no-op.

        With at least two available partitions the new one always differs from the old.
        """
        old = self._cache.get(topic)
        if old is not None and old != prev_partition:
            return old
        try:
            available = cluster.available_partitions_for_topic(topic)
            if not available:
                new = self._random() % len(cluster.partitions_for_topic(topic))
            elif len(available) == 1:
                new = available[0]
            else:
                new = available[self._random() % len(available)]
                while new == old:
                    new = available[self._random() % len(available)]
        except AttributeError:  # not a ClusterView (None, a dict): a ConfigurationError
            check_cluster(cluster)
            raise
        self._cache[topic] = new
        return new


class DefaultPartitioner:
    """Kafka's deprecated ``DefaultPartitioner``: keyed ⇒ murmur2, keyless ⇒ KIP-480 sticky."""

    def __init__(self, random: RandomSource | None = None) -> None:
        self.sticky = StickyPartitionCache(random)

    def partition(
        self, topic: str, key: bytes | None, value: bytes | None, cluster: ClusterView
    ) -> int:
        if key is None:
            return self.sticky.partition(topic, cluster)
        try:
            all_partitions = cluster.partitions_for_topic(topic)
        except AttributeError:  # not a ClusterView (None, a dict): a ConfigurationError
            check_cluster(cluster)
            raise
        return partition_for_key(key, len(all_partitions))

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        self.sticky.next_partition(topic, cluster, prev_partition)


class UniformStickyPartitioner:
    """Kafka's deprecated ``UniformStickyPartitioner``: sticky for every record, keys ignored."""

    def __init__(self, random: RandomSource | None = None) -> None:
        self.sticky = StickyPartitionCache(random)

    def partition(
        self, topic: str, key: bytes | None, value: bytes | None, cluster: ClusterView
    ) -> int:
        return self.sticky.partition(topic, cluster)

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        self.sticky.next_partition(topic, cluster, prev_partition)


class RoundRobinPartitioner:
    """Kafka's ``RoundRobinPartitioner``: a per-topic counter, incremented on every call."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, value: bytes | None, cluster: ClusterView
    ) -> int:
        counter = self._counters.get(topic, 0)
        # Java's AtomicInteger wraps; toPositive keeps the index non-negative.
        self._counters[topic] = (counter + 1) & 0xFFFFFFFF
        index = to_positive(counter)
        try:
            available = cluster.available_partitions_for_topic(topic)
            if available:
                return available[index % len(available)]
            return index % len(cluster.partitions_for_topic(topic))
        except AttributeError:  # not a ClusterView (None, a dict): a ConfigurationError
            check_cluster(cluster)
            raise

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        """Nothing to do: the producer's second ``partition()`` call advances the counter."""
