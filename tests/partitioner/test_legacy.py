"""KIP-480's sticky cache and the pluggable partitioners (StickyPartitionCacheTest and friends)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner import (
    DefaultPartitioner,
    PartitioningProducer,
    ProducerConfig,
    RoundRobinPartitioner,
    StaticCluster,
    StickyPartitionCache,
    UniformStickyPartitioner,
    partition_for_key,
)

CLUSTER = StaticCluster({
    "t": {0: 0, 1: 1, 2: 2},
    "u": {0: 0, 1: 1},
    "single": {0: 0},
})


def test_sticky_partition_is_stable_and_moves_to_a_different_one():
    cache = StickyPartitionCache()
    for topic in ("t", "u"):
        first = cache.partition(topic, CLUSTER)
        assert all(cache.partition(topic, CLUSTER) == first for _ in range(10))
        moved = cache.next_partition(topic, CLUSTER, first)
        assert moved != first
        assert cache.partition(topic, CLUSTER) == moved
        # A stale onNewBatch (prev is no longer the sticky one) changes nothing.
        assert cache.next_partition(topic, CLUSTER, first) == moved
        assert cache.partition(topic, CLUSTER) == moved


def test_sticky_topics_are_independent():
    cache = StickyPartitionCache(itertools.count().__next__)
    assert cache.partition("t", CLUSTER) == 0
    assert cache.partition("u", CLUSTER) == 1  # second draw
    cache.next_partition("u", CLUSTER, 1)
    assert cache.partition("t", CLUSTER) == 0


def test_single_partition_topic_returns_its_only_partition():
    cache = StickyPartitionCache()
    assert cache.partition("single", CLUSTER) == 0
    assert cache.next_partition("single", CLUSTER, 0) == 0


def test_sticky_skips_leaderless_partitions():
    cluster = StaticCluster({"A": {0: 0, 1: None, 2: 2}, "B": {0: None, 1: 1}, "C": {0: None}})
    cache = StickyPartitionCache()
    seen = []
    part = cache.partition("A", cluster)
    for _ in range(100):
        seen.append(part)
        part = cache.next_partition("A", cluster, part)
    assert 1 not in seen and set(seen) == {0, 2}
    assert cache.partition("B", cluster) == 1 and cache.next_partition("B", cluster, 1) == 1
    assert cache.partition("C", cluster) == 0


def test_default_partitioner_hashes_keys_and_sticks_without():
    dp = DefaultPartitioner()
    assert {dp.partition("t", b"key1", b"v", CLUSTER) for _ in range(5)} == {
        partition_for_key(b"key1", 3)
    }
    sticky = dp.partition("t", None, b"v", CLUSTER)
    assert dp.partition("t", None, b"v", CLUSTER) == sticky
    dp.on_new_batch("t", CLUSTER, sticky)
    assert dp.partition("t", None, b"v", CLUSTER) != sticky


def test_uniform_sticky_ignores_keys_and_stale_new_batch():
    up = UniformStickyPartitioner()
    first = up.partition("t", b"key1", b"v", CLUSTER)
    assert {up.partition("t", k, b"v", CLUSTER) for k in (b"a", b"b", None)} == {first}
    up.on_new_batch("t", CLUSTER, first)
    second = up.partition("t", b"a", b"v", CLUSTER)
    assert second != first
    up.on_new_batch("t", CLUSTER, first)  # stale
    assert up.partition("t", b"a", b"v", CLUSTER) == second


def test_round_robin_counts_per_topic_over_available_partitions():
    rr = RoundRobinPartitioner()
    counts = Counter(rr.partition("t", None, b"v", CLUSTER) for _ in range(30))
    assert counts == {0: 10, 1: 10, 2: 10}
    cluster = StaticCluster({"x": {0: 0, 1: None, 2: 2}, "y": {0: 0}})
    rr = RoundRobinPartitioner()
    counts = Counter()
    for _ in range(100):
        counts[rr.partition("x", None, b"v", cluster)] += 1
        rr.partition("y", None, b"v", cluster)  # another topic does not disturb the counter
    assert counts == {0: 50, 2: 50}


def test_round_robin_skips_through_the_second_call_kafka_9965():
    cluster = StaticCluster.single_topic("t", [0, 1])
    producer = PartitioningProducer(cluster, ProducerConfig(batch_size=1), RoundRobinPartitioner())
    # batch.size 1 and 1000-byte values: every record needs a new batch, so partition() runs twice per record.
    assert {producer.send("t", None, bytes(1000)).partition for _ in range(20)} == {1}
    cluster3 = StaticCluster.single_topic("t", [0, 1, 2])
    producer = PartitioningProducer(cluster3, ProducerConfig(batch_size=1), RoundRobinPartitioner())
    assert [producer.send("t", None, bytes(1000)).partition for _ in range(4)] == [1, 0, 2, 1]


def test_sticky_batches_with_the_abort_on_new_batch_protocol():
    """testStickyBatches: one batch until the first abort, then a batch on another partition."""
    cluster = StaticCluster.single_topic("t", [0, 1, 2])
    per_batch = 3
    cfg = ProducerConfig(batch_size=61 + per_batch * 1033)
    producer = PartitioningProducer(cluster, cfg, DefaultPartitioner())
    acc = producer.accumulator

    def batch_count():
        return sum(acc.queue_sizes("t").values())

    results = [producer.send("t", None, bytes(1024)) for _ in range(per_batch)]
    assert batch_count() == 1 and len({r.partition for r in results}) == 1
    moved = producer.send("t", None, bytes(1024))  # aborts, on_new_batch, second partition()
    assert batch_count() == 2 and moved.new_batch_created
    assert moved.partition != results[0].partition
    appended = per_batch + 1
    while batch_count() == 2:
        producer.send("t", None, bytes(1024))
        appended += 1
    assert appended - 1 == 2 * per_batch


def test_custom_partitioner_disables_adaptive_and_must_return_non_negative():
    class Negative:
        def partition(self, topic, key, value, cluster):
            return -1

        def on_new_batch(self, topic, cluster, prev_partition):
            pass

    producer = PartitioningProducer(CLUSTER, ProducerConfig(), Negative())
    assert not producer.accumulator.adaptive
    with pytest.raises(ConfigurationError, match="returned partition -1"):
        producer.send("t", None, b"v")
