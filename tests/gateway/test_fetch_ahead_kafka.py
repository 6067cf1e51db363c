"""Fetch-ahead against a 3-node Kafka 4 cluster (marker ``kafka``): a raw old consumer that reads
only some of a topic's partitions, seeks back, and keeps reading while a partition's leader is
stopped gets exactly the records Kafka holds, many of them answered from the ranges fetched
ahead; a deleted topic is never answered from what was fetched ahead for it."""

from __future__ import annotations

import time

import pytest
from kafka_broker import KafkaCluster, consume_all, delete_topic, produce_records, unique_topic

from lazyconv.errors import ErrorCode
from lazyconv.protocol import _fetch as fetch
from lazyconv.records import MemoryRecords
from tests.gateway.conftest import GatewayThread, create_topic_retrying
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

PARTITIONS = 3
PER_PARTITION = 1500


def _fetch(client: WireClient, topic: str, partition: int, offset: int) -> tuple[int, list[tuple], int | None]:
    """One Fetch v2 (magic 1) of 8 KiB: (error code, records at or after ``offset``, the offset
    after the last complete message)."""
    answer = client.call(fetch.SPEC, 2, {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                    "partition_max_bytes": 8192}]}]})
    part = answer["responses"][0]["partitions"][0]
    if part["error_code"]:
        return part["error_code"], [], None
    records: list[tuple] = []
    after = None
    for batch in MemoryRecords(part["records"] or b"").batches():
        records += [(r.offset, r.key, r.value) for r in batch if r.offset >= offset]
        after = batch.last_offset + 1
    return 0, records, after


def test_a_partial_seeking_consumer_through_a_leader_stop_reads_what_kafka_holds(
        kafka_cluster: KafkaCluster) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique_topic("gw-fetch-ahead")
    create_topic_retrying(bootstrap, topic, PARTITIONS, replication_factor=3)
    produce_records(bootstrap, topic, [(i % PARTITIONS, b"k%d" % i, b"v%d-" % i + b"x" * 200, None, None)
                                       for i in range(PARTITIONS * PER_PARTITION)],
                    config={"batch.size": 8192, "linger.ms": 0})  # batches of at most one fetch
    kafka = {p: [(o, k, v) for (_p, o, k, v, *_rest) in consume_all(bootstrap, topic, [p])]
             for p in (0, 2)}
    gateway = GatewayThread(bootstrap, metadata_max_age_ms=2000)
    victim = None
    try:
        read: dict[int, list[tuple]] = {0: [], 2: []}
        offsets = {0: 0, 2: 0}
        done: set[int] = set()
        rounds = 0
        with WireClient(gateway.port) as client:
            while done != {0, 2}:
                rounds += 1
                assert rounds < 2000, "the consumer did not finish"
                for partition in (0, 2):  # partition 1 is never read
                    if partition in done:
                        continue
                    code, records, after = _fetch(client, topic, partition, offsets[partition])
                    if code:  # the leader moved: the client asks again, as old clients do
                        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, code
                        time.sleep(0.2)
                        continue
                    read[partition] += records
                    if after is None:
                        done.add(partition)
                        continue
                    offsets[partition] = after
                if rounds == 10:  # a seek back, as after a rebalance
                    read[0] = [r for r in read[0] if r[0] < 5]
                    offsets[0] = 5
                if rounds == 20:
                    leader = gateway.gateway.cluster.views["-"].topics[topic].partitions[2].leader
                    victim = next(b for b in kafka_cluster.brokers if b.node_id == leader)
                    victim.stop()
        assert read == kafka
        relay = gateway.handler.fetches
        # at least one answer from memory (a busy machine misses more: its prefetches come late)
        assert relay.ahead_hits >= 1, (relay.ahead_hits, relay.ahead_misses, rounds)
        assert relay.ahead_misses >= 1  # the seek
    finally:
        gateway.stop()
        if victim is not None and not victim.is_running():
            victim.start()


def test_a_deleted_topic_is_not_answered_from_what_was_fetched_ahead(kafka_cluster: KafkaCluster) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique_topic("gw-fetch-ahead-deleted")
    create_topic_retrying(bootstrap, topic, 1, replication_factor=3)
    produce_records(bootstrap, topic, [(0, b"k%d" % i, b"x" * 500, None, None) for i in range(300)])
    gateway = GatewayThread(bootstrap, metadata_max_age_ms=2000)
    try:
        with WireClient(gateway.port) as client:
            code, records, after = _fetch(client, topic, 0, 0)
            assert code == 0 and records and after
            hits = gateway.handler.fetches.ahead_hits
            delete_topic(bootstrap, topic)
            cluster = gateway.gateway.cluster
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # once the gateway's metadata no longer has it
                info = cluster.views["-"].topics.get(topic)
                if info is None or info.error_code:
                    break
                time.sleep(0.2)
            code, records, _ = _fetch(client, topic, 0, after)
            assert records == [] and code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                              ErrorCode.NOT_LEADER_OR_FOLLOWER), code
            assert gateway.handler.fetches.ahead_hits == hits
    finally:
        gateway.stop()
