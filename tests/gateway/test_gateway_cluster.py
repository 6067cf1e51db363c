"""The gateway in front of a 3-node Kafka 4 cluster (marker ``kafka``): a partition leader
stopped in the middle of a group consume and of an acks=all produce by old clients; the
clients see errors their versions know, recover, and no acknowledged record is lost."""

from __future__ import annotations

import threading
import time

import pytest
from kafka_broker import KafkaCluster, consume_all, create_topic, produce_records

from tests.gateway.conftest import GatewayThread

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

PARTITIONS = 4
TOTAL = 2000


def _leaders(gateway: GatewayThread, topic: str) -> dict[int, int]:
    """partition -> the node id of its upstream leader, as the gateway's cache has it."""
    info = gateway.gateway.cluster.topics[topic]
    return {p: part.leader for p, part in info.partitions.items()}


def test_a_leader_stopped_mid_consume_and_mid_produce(kafka_cluster: KafkaCluster) -> None:
    kafka = pytest.importorskip("kafka")
    bootstrap = kafka_cluster.bootstrap
    topic = group = "gw-failover"
    create_topic(bootstrap, topic, PARTITIONS, replication_factor=3)
    produce_records(bootstrap, topic, [(i % PARTITIONS, b"%d" % i, b"x" * 300, None, None)
                                       for i in range(TOTAL)], "snappy")
    gateway = GatewayThread(bootstrap, metadata_max_age_ms=2000)
    consumed: set[bytes] = set()
    acked: list[bytes] = []
    failed: list[str] = []
    stopped = threading.Event()
    victim = None
    try:
        consumer = kafka.KafkaConsumer(
            topic, bootstrap_servers=gateway.bootstrap, api_version=(0, 10), group_id=group,
            enable_auto_commit=True, auto_commit_interval_ms=500, auto_offset_reset="earliest",
            max_partition_fetch_bytes=16 << 10, fetch_max_wait_ms=50, request_timeout_ms=20000,
            session_timeout_ms=10000, heartbeat_interval_ms=1000, reconnect_backoff_ms=200)
        producer = kafka.KafkaProducer(bootstrap_servers=gateway.bootstrap, api_version=(0, 10),
                                       acks=-1, retries=100, retry_backoff_ms=300,
                                       request_timeout_ms=15000,
                                       max_in_flight_requests_per_connection=1)

        def produce_loop() -> None:
            for i in range(300):
                key = b"p%d" % i
                try:
                    producer.send(topic, key=key, value=b"y" * 100, partition=i % PARTITIONS).get(90)
                    acked.append(key)
                except Exception as exc:  # not acknowledged: allowed to be missing
                    failed.append(f"{key!r}: {exc!r}")
                time.sleep(0.01)

        producing = threading.Thread(target=produce_loop, daemon=True)
        producing.start()
        deadline = time.monotonic() + 300
        wanted = {b"%d" % i for i in range(TOTAL)}
        while not wanted <= consumed and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                consumed.update(m.key for m in batch)
            if len(consumed) >= TOTAL // 3 and not stopped.is_set():
                leader = _leaders(gateway, topic)[0]
                victim = next(b for b in kafka_cluster.brokers if b.node_id == leader)
                victim.stop()  # partition 0's leader, mid-consume and mid-produce
                stopped.set()
        producing.join(300)
        assert stopped.is_set()
        missing = wanted - consumed
        assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"
        assert not producing.is_alive()
        assert len(acked) >= 250, f"only {len(acked)} of 300 acknowledged: {failed[:3]}"
        assert _leaders(gateway, topic)[0] != victim.node_id  # the gateway follows the new leader
        live = ",".join(b.bootstrap for b in kafka_cluster.brokers if b is not victim)
        stored = {r[2] for r in consume_all(live, topic, range(PARTITIONS))}
        lost = [k for k in acked if k not in stored]
        assert not lost, f"acknowledged but not in Kafka: {lost[:10]}"
        consumer.close()
        producer.close()
    finally:
        gateway.stop()
        if victim is not None and not victim.is_running():
            victim.start()  # the session's cluster is whole again for the next test


def test_every_partition_is_routed_to_its_own_leader(kafka_cluster: KafkaCluster) -> None:
    """Partitions led by different nodes, one old fetch naming them all: each part went to its
    leader (one upstream connection per node) and came back in the client's order."""
    from lazyconv.protocol import fetch
    from tests.serve.wire import WireClient

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "gw-spread", 6, replication_factor=3)
    produce_records(bootstrap, "gw-spread", [(p, b"k%d" % p, b"v", None, None) for p in range(6)])
    gateway = GatewayThread(bootstrap)
    try:
        with WireClient(gateway.port) as client:
            order = [5, 0, 3, 1, 4, 2]
            answer = client.call(fetch.SPEC, 2, {
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 0, "topics": [
                    {"topic": "gw-spread", "partitions": [
                        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        for p in order]}]})
        parts = answer["responses"][0]["partitions"]
        assert [p["partition_index"] for p in parts] == order
        assert all(p["error_code"] == 0 and p["records"] for p in parts)
        assert len(set(_leaders(gateway, "gw-spread").values())) == 3
    finally:
        gateway.stop()
