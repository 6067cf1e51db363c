"""The gateway in front of a 3-node Kafka 4 cluster (marker ``kafka``): a partition leader
stopped in the middle of a group consume and of an acks=all produce by old clients; the
clients see errors their versions know, recover, and no acknowledged record is lost."""

from __future__ import annotations

import threading
import time

import pytest
from kafka_broker import KafkaCluster, consume_all, produce_records, unique_topic

from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY
from tests.gateway.conftest import GatewayThread, create_topic_retrying

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

PARTITIONS = 4
TOTAL = 2000


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    create_topic_retrying(bootstrap, topic, partitions, replication_factor=3)


def _leaders(gateway: GatewayThread, topic: str) -> dict[int, int]:
    """partition -> the node id of its upstream leader, as the gateway's cache has it (its
    clients' view: without security every client is the gateway's anonymous identity)."""
    info = gateway.gateway.cluster.views[ANONYMOUS_IDENTITY.key].topics[topic]
    return {p: part.leader for p, part in info.partitions.items()}


def test_a_leader_stopped_mid_consume_and_mid_produce(kafka_cluster: KafkaCluster) -> None:
    kafka = pytest.importorskip("kafka")
    bootstrap = kafka_cluster.bootstrap
    topic = group = unique_topic("gw-failover")
    _create(bootstrap, topic, PARTITIONS)
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
    from lazyconv.protocol import _fetch as fetch
    from tests.serve.wire import WireClient

    bootstrap = kafka_cluster.bootstrap
    spread = unique_topic("gw-spread")
    _create(bootstrap, spread, 6)
    produce_records(bootstrap, spread, [(p, b"k%d" % p, b"v", None, None) for p in range(6)])
    gateway = GatewayThread(bootstrap)
    try:
        with WireClient(gateway.port) as client:
            order = [5, 0, 3, 1, 4, 2]
            answer = client.call(fetch.SPEC, 2, {
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 0, "topics": [
                    {"topic": spread, "partitions": [
                        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        for p in order]}]})
        parts = answer["responses"][0]["partitions"]
        assert [p["partition_index"] for p in parts] == order
        assert all(p["error_code"] == 0 and p["records"] for p in parts)
        assert len(set(_leaders(gateway, spread).values())) == 3
    finally:
        gateway.stop()


# One configuration of each family the issue names (the others share their code paths).
FAILOVER_DRIVERS = ["kafka-python-1.4.7-0.10", "kafka-python-1.3.5-0.9",
                    "kafka-python-3.0-0.10", "confluent-kafka-fallback-0.9.0",
                    "kafka-node-5.0.0", "java-0.10.2.2", "java-0.11.0.3"]


@pytest.fixture(scope="module")
def tools():
    from tests.oldclients.clients import OldClientTools

    return OldClientTools()


@pytest.mark.parametrize("driver_id", FAILOVER_DRIVERS)
def test_an_old_group_consumer_survives_a_leader_stop(kafka_cluster: KafkaCluster, tools,
                                                      driver_id: str) -> None:
    """The driver consumes in a group through the gateway; partition 0's leader is stopped
    when a third is read; the driver still gets every record (at least once)."""
    _consume_through_a_stop(kafka_cluster, tools, driver_id, "leader")


@pytest.mark.parametrize("driver_id", ["kafka-python-1.4.7-0.10", "java-0.10.2.2"])
def test_an_old_group_consumer_survives_a_coordinator_stop(kafka_cluster: KafkaCluster, tools,
                                                           driver_id: str) -> None:
    """The same with the group's coordinator stopped: the gateway finds the new one."""
    _consume_through_a_stop(kafka_cluster, tools, driver_id, "coordinator")


def _consume_through_a_stop(kafka_cluster: KafkaCluster, tools, driver_id: str,
                            what: str) -> None:
    from tests.gateway.clients import BY_ID
    from tests.oldclients.clients import Unavailable

    driver = BY_ID[driver_id]
    if driver.old is not None:
        try:
            tools.require(driver.old)
        except Unavailable as exc:
            pytest.skip(str(exc))
    bootstrap = kafka_cluster.bootstrap
    topic = unique_topic(f"gw-{what}-stop-{driver_id.replace('.', '_')}")
    per_partition = 300
    _create(bootstrap, topic, PARTITIONS)
    offsets = produce_records(bootstrap, topic, [(p, b"k%d" % i, b"v" * 200, None, None)
                                                 for p in range(PARTITIONS)
                                                 for i in range(per_partition)], "gzip")
    last = {f"{topic}/{p}": max(offsets[p * per_partition:(p + 1) * per_partition])
            for p in range(PARTITIONS)}
    gateway = GatewayThread(bootstrap, metadata_max_age_ms=2000)
    victim = None
    events = None
    try:
        events = driver.start(tools, gateway.bootstrap, {
            "action": "consume", "mode": "subscribe", "topics": [topic], "group": topic,
            "commit": True, "last": last}, timeout=180)
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 180
        done = False
        while time.monotonic() < deadline:
            event = events.next(deadline)
            if event is None or event["ev"] == "error":
                raise AssertionError(f"{driver_id}: {event} {events.child.stderr_tail()}")
            if event["ev"] == "record":
                seen.add((event["p"], event["o"]))
            if event["ev"] == "done":
                done = True
                break
            if victim is None and len(seen) >= PARTITIONS * per_partition // 3:
                if what == "leader":
                    node = _leaders(gateway, topic)[0]
                else:
                    node = gateway.handler.coordinators.cached(0, topic)
                victim = next(b for b in kafka_cluster.brokers if b.node_id == node)
                victim.stop()
        assert victim is not None, f"{driver_id} read everything before the stop"
        assert done, f"{driver_id} did not finish after the leader stop"
        want = {(p, o) for p in range(PARTITIONS)
                for o in offsets[p * per_partition:(p + 1) * per_partition]}
        assert want <= seen, f"{driver_id} missed {len(want - seen)} records"
    finally:
        if events is not None:
            events.child.kill()
        gateway.stop()
        if victim is not None and not victim.is_running():
            victim.start()
