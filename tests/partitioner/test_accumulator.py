"""The built-in partitioner driven through the accumulator (Kafka's RecordAccumulatorTest cases)."""

from __future__ import annotations

import itertools

import pytest

from lazyconv.partitioner import (
    UNKNOWN_PARTITION,
    PartitioningProducer,
    ProducerConfig,
    RecordAccumulator,
    StaticCluster,
    SwitchRule,
)
from lazyconv.partitioner._sizes import batch_size_upper_bound, record_size

NULL = -1


def sequential():
    return itertools.count().__next__


def counted(source):
    """A random source that remembers how many draws were taken."""
    calls = []

    def draw():
        value = source()
        calls.append(value)
        return value

    return draw, calls


CLUSTER3 = StaticCluster.single_topic("t", [0, 1, 2])


def test_size_model_matches_the_spec():
    assert record_size(NULL, 512) == 521
    assert record_size(NULL, 512, offset_delta=64) == 522
    assert record_size(NULL, 512, timestamp_delta=64) == 522
    assert record_size(3, 5) == 15 and record_size(NULL, 5) == 12
    assert record_size(NULL, 32) == 39 and record_size(NULL, 128) == 137
    assert record_size(NULL, 1024) == 1033
    assert batch_size_upper_bound(NULL, 1024) == 1110


@pytest.mark.parametrize("rule", list(SwitchRule))
def test_uniform_builtin_partitioner(rule):
    """testUniformBuiltInPartitioner: batch.size 1024, sequential draws, 3 partitions."""
    draw, calls = counted(sequential())
    acc = RecordAccumulator(CLUSTER3, ProducerConfig(batch_size=1024, switch_rule=rule), draw)
    small = acc.append("t", UNKNOWN_PARTITION, NULL, 5)
    assert (small.partition, small.appended_bytes) == (0, 73)
    big = acc.append("t", UNKNOWN_PARTITION, NULL, 1024)
    if rule is SwitchRule.DEFERRED:
        # 73 + 1094 = 1167 >= 1024, but the new batch is not full and 1167 < 2048: stay.
        assert (big.partition, big.appended_bytes, big.new_batch_created) == (0, 1094, True)
        assert [acc.append("t", UNKNOWN_PARTITION, NULL, 1024).partition for _ in range(3)] == [1, 2, 0]
        assert calls == [0, 1, 2, 3]
    else:
        # The KIP's rule switches right after the bytes were produced.
        assert big.partition == 0
        assert acc.built_in_partitioner("t").current.partition == 1


def test_adaptive_builtin_partitioner_weights_and_availability_exclusion():
    """testAdaptiveBuiltInPartitioner: queues [1, 7, 2], then node 0 unavailable > 100 ms."""
    cluster = StaticCluster.single_topic("t", [0, 0, 1])  # partitions 0, 1 on node 0
    cfg = ProducerConfig(batch_size=128, partitioner_availability_timeout_ms=100)
    acc = RecordAccumulator(cluster, cfg, sequential())
    for partition, size in enumerate([1, 7, 2]):
        for _ in range(size):
            acc.append("t", partition, NULL, 128)
    assert acc.queue_sizes("t") == {0: 1, 1: 7, 2: 2}
    acc.ready(now=1000)
    assert acc.built_in_partitioner("t").load_stats.cumulative_frequency_table == (7, 8, 14)
    acc.append("t", UNKNOWN_PARTITION, NULL, 128)  # prime: every later append switches
    frequencies = [0, 0, 0]
    for _ in range(28):
        frequencies[acc.append("t", UNKNOWN_PARTITION, NULL, 128).partition] += 1
    assert frequencies == [14, 2, 12]

    acc.update_node_latency_stats(0, now=800, can_drain=True)
    acc.update_node_latency_stats(0, now=1000, can_drain=False)
    acc.ready(now=1000)
    stats = acc.built_in_partitioner("t").load_stats
    assert stats.partition_ids[: stats.length] == (2,)
    assert {acc.append("t", UNKNOWN_PARTITION, NULL, 128).partition for _ in range(10)} == {2}


def test_availability_exclusion_is_strictly_greater_than_timeout():
    cluster = StaticCluster.single_topic("t", [0, 1, 2])
    acc = RecordAccumulator(cluster, ProducerConfig(partitioner_availability_timeout_ms=5))
    for p in range(3):
        acc.append("t", p, NULL, 10)
    acc.update_node_latency_stats(0, now=0, can_drain=True)
    acc.update_node_latency_stats(0, now=5, can_drain=False)
    acc.ready(now=5)
    assert acc.built_in_partitioner("t").load_stats is None  # 5 - 0 is not > 5; sizes equal
    acc.update_node_latency_stats(0, now=5.5, can_drain=False)
    acc.ready(now=5.5)
    assert acc.built_in_partitioner("t").load_stats.partition_ids == (1, 2)


def test_latency_stats_only_kept_with_a_timeout():
    acc = RecordAccumulator(CLUSTER3, ProducerConfig())
    acc.update_node_latency_stats(0, 1.0, False)
    assert acc.node_stats == {}


def test_load_stats_wait_until_every_partition_has_a_deque():
    acc = RecordAccumulator(CLUSTER3, ProducerConfig())
    acc.append("t", 0, NULL, 10)
    acc.append("t", 0, NULL, 20000)  # does not fit: a second batch
    acc.append("t", 1, NULL, 10)
    acc.ready(now=0)
    assert acc.built_in_partitioner("t").load_stats is None
    acc.deque_for("t", 2)  # an empty deque counts (slot 0)
    acc.ready(now=0)
    assert acc.built_in_partitioner("t").load_stats.cumulative_frequency_table == (1, 3, 6)


def test_adaptive_off_or_custom_partitioner_keeps_stats_off():
    for acc in (
        RecordAccumulator(CLUSTER3, ProducerConfig(partitioner_adaptive_partitioning_enable=False)),
        RecordAccumulator(CLUSTER3, ProducerConfig(partitioner_availability_timeout_ms=5),
                          custom_partitioner=True),
    ):
        for p, n in enumerate([3, 1, 0]):
            for _ in range(n):
                acc.append("t", p, NULL, 20000)
        acc.deque_for("t", 2)
        acc.ready(now=0)
        assert acc.built_in_partitioner("t").load_stats is None
        assert acc.availability_timeout == 0


@pytest.mark.parametrize("rule", list(SwitchRule))
def test_fractional_batches(rule):
    """testBuiltInPartitionerFractionalBatches: 10 records per linger window, then a drain."""
    cluster = StaticCluster.single_topic("t", [0, 1, 2])
    acc = RecordAccumulator(cluster, ProducerConfig(batch_size=512, switch_rule=rule), sequential())
    sizes = set()
    for _ in range(10):
        for _ in range(10):
            acc.append("t", UNKNOWN_PARTITION, NULL, 32)
        for node in (0, 1, 2):
            sizes.update(b.estimated_size for b in acc.drain(node, [("t", node)]))
    if rule is SwitchRule.DEFERRED:
        assert sizes == {451}  # every drained batch between half and full
    else:
        assert 100 in sizes  # 451 + 100 >= 512 switches right after window 2's first record


def _stint(acc, drain_each):
    partitions = []
    for _ in range(200):
        partitions.append(acc.append("t", UNKNOWN_PARTITION, NULL, 512).partition)
        if drain_each:
            for node in (0, 1, 2):
                acc.drain(node, [("t", node)])
    return len(list(itertools.takewhile(lambda p: p == partitions[0], partitions)))


@pytest.mark.parametrize(
    ("rule", "drain_each", "stint"),
    [
        (SwitchRule.DEFERRED, True, 29),  # each record in its own batch
        (SwitchRule.IMMEDIATE, True, 29),
        (SwitchRule.DEFERRED, False, 62),  # backlogged: two batches per stint
        (SwitchRule.IMMEDIATE, False, 32),
    ],
)
def test_stint_lengths_for_512_byte_records(rule, drain_each, stint):
    acc = RecordAccumulator(CLUSTER3, ProducerConfig(switch_rule=rule), sequential())
    assert _stint(acc, drain_each) == stint


def test_batch_fullness_follows_kafka():
    acc = RecordAccumulator(CLUSTER3, ProducerConfig(), sequential())
    for _ in range(31):
        result = acc.append("t", 0, NULL, 512)
    batch = result.batch
    assert batch.estimated_size == 16212 and batch.record_count == 31
    assert not batch.is_full and not result.batch_is_full  # 16 212 < 16 384 is not full
    result = acc.append("t", 0, NULL, 512)
    assert result.new_batch_created and batch.is_full and result.batch_is_full


def test_oversized_record_gets_its_own_batch():
    acc = RecordAccumulator(CLUSTER3, ProducerConfig(batch_size=100))
    result = acc.append("t", 1, NULL, 5000)
    assert result.new_batch_created and result.batch.write_limit == batch_size_upper_bound(NULL, 5000)
    assert result.batch.record_count == 1


def test_buffer_memory_blocks_until_a_batch_completes():
    cfg = ProducerConfig(batch_size=1000, buffer_memory=2000)
    acc = RecordAccumulator(CLUSTER3, cfg)
    first = acc.append("t", 0, NULL, 900)
    acc.append("t", 1, NULL, 900)
    blocked = acc.append("t", 2, NULL, 900)
    assert blocked.blocked and blocked.batch is None
    acc.deallocate(first.batch)
    assert not acc.append("t", 2, NULL, 900).blocked


def test_drain_respects_max_request_size_and_rotates():
    cluster = StaticCluster.single_topic("t", [0, 0, 0])
    acc = RecordAccumulator(cluster, ProducerConfig(max_request_size=1500))
    for p in range(3):
        acc.append("t", p, NULL, 1000)
    parts = cluster.partitions_led_by(0)
    first = acc.drain(0, parts)
    assert [b.partition for b in first] == [0]  # the second would exceed 1500
    assert [b.partition for b in acc.drain(0, parts)] == [1]
    assert all(b.closed for b in first)


def test_drain_resumes_at_the_last_partition_visited():
    """Kafka's drain order: the next drain starts at the partition the last one visited last.

    Leaders [0, 0, 0], batch.size 1024, max.request.size 2048: every batch (1094 bytes) fills a
    request alone. Three drains take partitions 0, 1, 2; the third visits 0 and 1 too (empty),
    so the fourth starts at 1, not at 0 (one past the previous start).
    """
    cluster = StaticCluster.single_topic("t", [0, 0, 0])
    acc = RecordAccumulator(cluster, ProducerConfig(batch_size=1024, max_request_size=2048))
    parts = cluster.partitions_led_by(0)
    for p in range(3):
        acc.append("t", p, NULL, 1024)
    assert [[b.partition for b in acc.drain(0, parts)] for _ in range(3)] == [[0], [1], [2]]
    for p in range(3):
        acc.append("t", p, NULL, 1024)
    assert [b.partition for b in acc.drain(0, parts)] == [1]
    assert [b.partition for b in acc.drain(0, parts)] == [2]
    assert [b.partition for b in acc.drain(0, parts)] == [0]


def test_drain_of_a_full_round_starts_next_at_its_last_partition():
    cluster = StaticCluster.single_topic("t", [0, 0, 0, 0])
    acc = RecordAccumulator(cluster, ProducerConfig(batch_size=1024))
    parts = cluster.partitions_led_by(0)
    for p in range(4):
        acc.append("t", p, NULL, 10)
    assert [b.partition for b in acc.drain(0, parts)] == [0, 1, 2, 3]
    for p in range(4):
        acc.append("t", p, NULL, 10)
    assert [b.partition for b in acc.drain(0, parts)] == [3, 0, 1, 2]


def test_zero_batch_size_is_treated_as_one():
    acc = RecordAccumulator(CLUSTER3, ProducerConfig(batch_size=0), sequential())
    assert acc.built_in_partitioner("t").sticky_batch_size == 1
    assert [acc.append("t", UNKNOWN_PARTITION, NULL, 1).partition for _ in range(3)] == [0, 1, 2]


def test_producer_reports_effective_partition_for_each_path():
    producer = PartitioningProducer(CLUSTER3, ProducerConfig(), random=sequential())
    assert producer.send("t", b"key1", b"v").partition == 2  # murmur2 % 3
    assert producer.send("t", b"", b"v").partition == 0  # empty key is hashed (275646681 % 3)
    assert producer.send("t", b"key1", b"v", partition=1).partition == 1
    assert producer.send("t", None, b"v").partition == 0  # built-in, first draw 0
    ignoring = PartitioningProducer(
        CLUSTER3, ProducerConfig(partitioner_ignore_keys=True), random=lambda: 1
    )
    assert ignoring.send("t", b"key1", b"v").partition == 1


def test_keyed_records_hash_over_all_partitions_including_leaderless():
    cluster = StaticCluster({"t": {0: 0, 1: None, 2: 2}})
    producer = PartitioningProducer(cluster)
    assert producer.send("t", b"foobar", b"v").partition == 0
    assert producer.send("t", b"key", b"v").partition == 1  # leaderless, still its partition


def test_explicit_partition_must_exist():
    from lazyconv.errors import ConfigurationError

    producer = PartitioningProducer(CLUSTER3)
    with pytest.raises(ConfigurationError, match="partition 3"):
        producer.send("t", None, b"v", partition=3)
