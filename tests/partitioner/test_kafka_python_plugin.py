"""A real kafka-python KafkaProducer with our KIP-794 plug-in, against a listener on 127.0.0.1."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from kafka import KafkaProducer

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner import SwitchRule, partition_for_key
from lazyconv.partitioner.kafka_python import KIP794Partitioner

TOPIC = "landing"


def make_producer(server, partitioner, **overrides):
    config = dict(
        bootstrap_servers=server.bootstrap,
        partitioner=partitioner,
        batch_size=1024,
        linger_ms=5000,  # batches leave only when full (or on flush): stints are deterministic
        acks=1,
        enable_idempotence=False,
        max_block_ms=10000,
        request_timeout_ms=10000,
    )
    config.update(overrides)
    return KafkaProducer(**config)


def send_all(producer, records):
    futures = [producer.send(TOPIC, key=key, value=value) for key, value in records]
    producer.flush(timeout=20)
    return [f.get(timeout=10).partition for f in futures]


def stints(partitions):
    return [(p, len(list(group))) for p, group in itertools.groupby(partitions)]


@pytest.mark.parametrize("brokers", [3, 1])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_deferred_rule_lands_two_full_batches_per_partition_in_turn(mini_kafka_factory, brokers):
    """100-byte values (108-byte records), batch_size 1024: 8 records per kafka-python batch.

    The 9th record opens a second batch (1 094 bytes produced, but that batch is not full), so
    the switch waits until the 17th record finds both batches full: stints of 16 records,
    visiting partitions 0, 1, 2, 0, ... with a sequential random source and adaptive off.
    """
    server = mini_kafka_factory(TOPIC, partitions=3, brokers=brokers)
    partitioner = KIP794Partitioner(
        batch_size=1024, adaptive_partitioning_enable=False,
        switch_rule=SwitchRule.DEFERRED, random=itertools.count().__next__,
    )
    producer = make_producer(server, partitioner)
    partitioner.bind(producer)
    try:
        partitions = send_all(producer, [(None, bytes(100))] * 96)
    finally:
        producer.close(timeout=5)
    assert not server.errors
    if brokers == 1:
        # One broker leads every partition: once a batch is full the node is ready, and the
        # sender drains every partition's first batch with it, full or not (as Kafka's
        # RecordAccumulator.drain does). When the sender thread runs between two sends (a busy
        # machine) it takes a half-full batch and the stint ends early, so only the order of
        # the stints and their bound are the rule's
        seen = stints(partitions)
        assert [p for p, _ in seen] == [i % 3 for i in range(len(seen))], seen
        assert all(n <= 16 for _, n in seen) and sum(n for _, n in seen) == 96, seen
        return
    assert stints(partitions) == [(0, 16), (1, 16), (2, 16), (0, 16), (1, 16), (2, 16)]
    # The listener saw exactly that: 32 records per partition, in batches of at most 8.
    assert server.records_per_partition() == {0: 32, 1: 32, 2: 32}
    assert max(len(b.values) for b in server.produced) == 8
    assert {b.node for b in server.produced} == set(range(brokers))


def test_immediate_rule_switches_after_batch_size_bytes(mini_kafka_factory):
    """KIP-794's original rule: the 9th record (1 094 bytes produced) ends the stint."""
    server = mini_kafka_factory(TOPIC, partitions=3, brokers=3)
    partitioner = KIP794Partitioner(
        batch_size=1024, adaptive_partitioning_enable=False,
        switch_rule=SwitchRule.IMMEDIATE, random=itertools.count().__next__,
    )
    producer = make_producer(server, partitioner)
    partitioner.bind(producer)
    try:
        partitions = send_all(producer, [(None, bytes(100))] * 54)
    finally:
        producer.close(timeout=5)
    assert stints(partitions) == [(0, 9), (1, 9), (2, 9), (0, 9), (1, 9), (2, 9)]
    assert server.records_per_partition() == {0: 18, 1: 18, 2: 18}


def test_keys_hash_with_murmur2_unless_ignored(mini_kafka_factory):
    server = mini_kafka_factory(TOPIC, partitions=3, brokers=3)
    keys = [f"user-{i}".encode() for i in range(30)] + [b""]
    partitioner = KIP794Partitioner(batch_size=1024, random=itertools.count().__next__)
    producer = make_producer(server, partitioner, linger_ms=0)
    try:
        partitions = send_all(producer, [(k, b"v") for k in keys])
        ignoring = KIP794Partitioner(batch_size=1024, ignore_keys=True, random=lambda: 2)
        producer.config["partitioner"] = ignoring
        ignored = send_all(producer, [(k, b"v") for k in keys[:5]])
    finally:
        producer.close(timeout=5)
    assert partitions == [partition_for_key(k, 3) for k in keys]
    assert set(partitions) == {0, 1, 2}
    assert ignored == [2] * 5  # keys ignored: the sticky partition (draw 2)
    landed = Counter()
    for batch in server.produced:
        landed[batch.partition] += len(batch.values)
    assert sum(landed.values()) == len(keys) + 5


def test_unbound_plugin_still_switches_through_on_new_batch(mini_kafka_factory):
    """Without bind() the plug-in learns of new batches only through kafka-python's hook."""
    server = mini_kafka_factory(TOPIC, partitions=3, brokers=3)
    partitioner = KIP794Partitioner(batch_size=1024, random=itertools.count().__next__)
    producer = make_producer(server, partitioner)
    try:
        partitions = send_all(producer, [(None, bytes(100))] * 48)
    finally:
        producer.close(timeout=5)
    assert stints(partitions) == [(0, 16), (1, 16), (2, 16)]


def test_bind_refuses_objects_without_an_accumulator():
    with pytest.raises(ConfigurationError, match="cannot bind"):
        KIP794Partitioner().bind(object())


class _FakeBuilder:
    """The three things the plug-in reads of a kafka-python MemoryRecordsBuilder."""

    def __init__(self, size: int, records: int, full: bool) -> None:
        self._size, self._records, self._full = size, records, full

    def is_full(self) -> bool:
        return self._full

    def size_in_bytes(self) -> int:
        return self._size

    def next_offset(self) -> int:
        return self._records


class _FakeBatch:
    def __init__(self) -> None:
        self.records = _FakeBuilder(5000, 20, True)


def test_bound_plugin_weights_switches_by_kafka_python_queue_sizes():
    """Queues [1, 7, 2] in kafka-python's accumulator give cft [7, 8, 14]."""
    from collections import deque
    from types import SimpleNamespace

    from kafka.cluster import ClusterMetadata
    from kafka.structs import TopicPartition

    cluster = ClusterMetadata()
    cluster._partitions[TOPIC] = {
        p: SimpleNamespace(leader_id=p, partition_index=p) for p in range(3)
    }
    cluster.partitions_for_topic = lambda topic: {0, 1, 2}
    cluster.available_partitions_for_topic = lambda topic: {0, 1, 2}
    batches = {TopicPartition(TOPIC, p): deque(_FakeBatch() for _ in range(n))
               for p, n in enumerate([1, 7, 2])}
    producer = SimpleNamespace(_accumulator=SimpleNamespace(_batches=batches))
    partitioner = KIP794Partitioner(batch_size=100, random=itertools.count().__next__)
    partitioner.bind(producer)

    def send_like_kafka_python():
        first = partitioner.partition(TOPIC, None, None, None, bytes(200), cluster)
        # Every queued batch is full, so kafka-python's append aborts for a new batch.
        partitioner.on_new_batch(TOPIC, cluster, first)
        return partitioner.partition(TOPIC, None, None, None, bytes(200), cluster)

    frequencies = [0, 0, 0]
    for _ in range(28):
        frequencies[send_like_kafka_python()] += 1
    stats = partitioner.built_in_partitioner(TOPIC).load_stats
    assert stats.cumulative_frequency_table == (7, 8, 14)
    assert frequencies == [14, 2, 12]

    unweighted = KIP794Partitioner(batch_size=100, adaptive_partitioning_enable=False)
    unweighted.bind(producer)
    unweighted.partition(TOPIC, None, None, None, bytes(200), cluster)
    assert unweighted.built_in_partitioner(TOPIC).load_stats is None


@pytest.mark.parametrize("cluster", [None, 5], ids=["None", "int"])
@pytest.mark.parametrize("key", [None, b"k"], ids=["keyless", "keyed"])
def test_a_cluster_that_is_not_kafka_pythons_metadata_is_a_configuration_error(cluster, key) -> None:
    """partition(..., cluster=None) was an AttributeError of the adapter's first call."""
    with pytest.raises(ConfigurationError) as refused:
        KIP794Partitioner().partition("t", key, key, b"v", b"v", cluster)
    assert str(refused.value) == (
        "the cluster must be kafka-python's ClusterMetadata (partitions_for_topic, "
        f"available_partitions_for_topic, leader_for_partition), got {type(cluster).__name__}")
