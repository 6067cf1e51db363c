"""Modern clients through the gateway, against Kafka 4.0.1 — a single node (its request log on)
and the 3-node cluster (marker ``kafka``): the cut-over of one bootstrap name must leave every
application working.

- confluent-kafka's idempotent producer and a transactional one (init, produce to 3 partitions,
  send offsets, commit; a second transaction aborted): a read_committed consumer straight on
  Kafka sees exactly the committed records, also when a partition leader is stopped in the
  middle of a transaction (3 nodes);
- Kafka 4.0.1's own Java clients (``ModernClients.java``, compiled here against the
  distribution's ``libs/``): the producer with its defaults, a consumer with
  ``group.protocol=consumer`` (KIP-848) and the Admin client give through the gateway what they
  give straight on Kafka (the cluster seen as one broker, the gateway);
- kafka-python pinned to (0, 10) and confluent-kafka in one group through the gateway split the
  partitions and read every record once; DescribeGroups straight on Kafka shows each member's
  own client id, and the broker's request log shows the clients' ids (prefixed when the gateway
  is told to) on the gateway's upstream requests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import KafkaBroker, KafkaCluster, consume_all

from lazyconv.protocol import KAFKA_API_BY_KEY
from tests.gateway.conftest import GatewayThread, create_topic_retrying
from tests.interop.checks import received
from tests.interop.clients import Client
from tests.interop.harness import Events, stop_members
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

PARTITIONS = 3
JAVA_SOURCE = Path(__file__).with_name("ModernClients.java")


@dataclass
class Target:
    """A Kafka 4.0.1 cluster and a gateway in front of it."""

    name: str
    bootstrap: str
    gateway: GatewayThread
    brokers: list[KafkaBroker]

    @property
    def replication(self) -> int:
        return len(self.brokers)

    def topic(self, purpose: str, partitions: int = PARTITIONS) -> str:
        name = f"modern-{purpose}-{self.name}-{uuid.uuid4().hex[:6]}"
        create_topic_retrying(self.bootstrap, name, partitions, replication_factor=self.replication)
        return name

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.is_running())


@pytest.fixture(scope="module")
def logged_broker(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A single Kafka 4.0.1 node with its request log on, for this module."""
    broker = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("modern") / "broker", request_log=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def single(logged_broker: KafkaBroker) -> Iterator[Target]:
    gateway = GatewayThread(logged_broker.bootstrap)
    yield Target("single", logged_broker.bootstrap, gateway, [logged_broker])
    gateway.stop()


@pytest.fixture(scope="module")
def cluster(kafka_cluster: KafkaCluster) -> Iterator[Target]:
    gateway = GatewayThread(kafka_cluster.bootstrap, metadata_max_age_ms=2000)
    yield Target("cluster", kafka_cluster.bootstrap, gateway, kafka_cluster.brokers)
    gateway.stop()


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(request.param)


def _producer(bootstrap: str, **config: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                     "log_level": 3, **config})


def _deliver(producer: Any, topic: str, values: list[tuple[int, bytes]]) -> list[str]:
    """Produce ``(partition, value)`` records; the delivery errors."""
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for partition, value in values:
        producer.produce(topic, value=value, key=value, partition=partition, on_delivery=report)
        producer.poll(0)
    return errors


# -- idempotent and transactional producers ------------------------------------------------------


def test_an_idempotent_producer_writes_every_record_once(target: Target) -> None:
    topic = target.topic("idempotent")
    producer = _producer(target.gateway.bootstrap, **{"enable.idempotence": True,
                                                      "client.id": "idempotent-app"})
    values = [(i % PARTITIONS, b"i%d" % i) for i in range(300)]
    errors = _deliver(producer, topic, values)
    assert producer.flush(60) == 0 and not errors, errors
    stored = consume_all(target.bootstrap, topic, PARTITIONS)
    assert sorted(r[3] for r in stored) == sorted(v for _, v in values)
    # the batches carry the producer's id and sequences, relayed unchanged: the leaders know one
    # producer per partition whose last sequence is its 100th record (DescribeProducers through
    # the gateway, split per leader)
    with WireClient(target.gateway.port) as client:
        answer = client.call(KAFKA_API_BY_KEY[61], 0, {"topics": [
            {"name": topic, "partition_indexes": list(range(PARTITIONS))}]})
    parts = answer["topics"][0]["partitions"]
    assert [p["partition_index"] for p in parts] == list(range(PARTITIONS))
    for part in parts:
        assert part["error_code"] == 0
        assert [p["last_sequence"] for p in part["active_producers"]] == [99], part
    assert len({p["active_producers"][0]["producer_id"] for p in parts}) == 1


def _committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "broker.address.family": "v4", "log_level": 3})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def _transactions(target: Target, topic: str, transactional_id: str, *,
                  in_the_middle: Any = None) -> tuple[list[bytes], list[bytes], str]:
    """One committed transaction (``in_the_middle()`` called halfway through it) with the
    group's offsets, then one aborted; (committed values, aborted values, the group)."""
    from confluent_kafka import Consumer, TopicPartition

    group = f"{topic}-group"
    producer = _producer(target.gateway.bootstrap, **{
        "transactional.id": transactional_id, "client.id": "transactional-app",
        "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    producer.begin_transaction()
    committed = [(i % PARTITIONS, b"c%d" % i) for i in range(120)]
    errors = _deliver(producer, topic, committed[:60])
    assert producer.flush(60) == 0
    if in_the_middle is not None:
        in_the_middle()
    errors += _deliver(producer, topic, committed[60:])
    member = Consumer({"bootstrap.servers": target.gateway.bootstrap, "group.id": group,
                       "broker.address.family": "v4", "log_level": 3})
    offsets = [TopicPartition(topic, p, 10 * (p + 1)) for p in range(PARTITIONS)]
    producer.send_offsets_to_transaction(offsets, member.consumer_group_metadata(), 60)
    member.close()
    producer.commit_transaction(60)
    assert not errors, errors
    producer.begin_transaction()
    aborted = [(i % PARTITIONS, b"a%d" % i) for i in range(30)]
    errors = _deliver(producer, topic, aborted)
    assert producer.flush(60) == 0 and not errors, errors
    producer.abort_transaction(60)
    return [v for _, v in committed], [v for _, v in aborted], group


def test_a_transaction_committed_and_one_aborted(target: Target) -> None:
    topic = target.topic("transactions")
    committed, aborted, group = _transactions(target, topic, f"txn-{topic}")
    stored = consume_all(target.bootstrap, topic, PARTITIONS,
                         config={"isolation.level": "read_committed"})
    assert sorted(r[3] for r in stored) == sorted(committed)
    everything = consume_all(target.bootstrap, topic, PARTITIONS,
                             config={"isolation.level": "read_uncommitted"})
    assert sorted(r[3] for r in everything) == sorted(committed + aborted)
    assert _committed_offsets(target.bootstrap, group, topic) == {0: 10, 1: 20, 2: 30}


@pytest.mark.slow
def test_a_transaction_survives_a_partition_leader_stop(cluster: Target) -> None:
    """Partition 0's leader stopped (a controlled shutdown) halfway through a transaction: the
    producer retries through the gateway, which finds the new leader (and coordinator); every
    committed record is there exactly once (idempotence), the aborted ones are not visible."""
    topic = cluster.topic("txn-failover")
    victim: KafkaBroker | None = None

    def stop_a_leader() -> None:
        nonlocal victim
        cluster.gateway.gateway.cluster.views["-"].invalidate(topic)
        info = cluster.gateway.gateway.cluster.views["-"].topics[topic]
        victim = next(b for b in cluster.brokers if b.node_id == info.partitions[0].leader)
        victim.stop()

    try:
        committed, aborted, group = _transactions(cluster, topic, f"txn-{topic}",
                                                  in_the_middle=stop_a_leader)
        assert victim is not None and not victim.is_running()
        stored = consume_all(cluster.live_bootstrap(), topic, PARTITIONS,
                             config={"isolation.level": "read_committed"})
        values = [r[3] for r in stored]
        assert sorted(values) == sorted(committed), "records lost or duplicated"
        assert not set(values) & set(aborted)
        assert _committed_offsets(cluster.live_bootstrap(), group, topic) == {0: 10, 1: 20, 2: 30}
    finally:
        if victim is not None and not victim.is_running():
            victim.start()  # the session's cluster whole again for the next test


# -- Kafka 4.0.1's own Java clients ------------------------------------------------------------


@pytest.fixture(scope="module")
def java_clients(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs ModernClients (compiled against the distribution's jars)."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.skip("Kafka's Java clients need java and javac (a JDK 17) on PATH")
    build = tmp_path_factory.mktemp("modern-clients")
    classpath = f"{kafka_dist / 'libs'}/*"
    subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(build),
                    str(JAVA_SOURCE)], check=True, capture_output=True, text=True, timeout=300)
    return [java, "-cp", f"{build}:{classpath}", "ModernClients"]


def _java(command: list[str], *args: str) -> list[dict[str, Any]]:
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines and lines[-1] == {"ev": "done"}, \
        f"{args[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return lines[:-1]


def _java_run(command: list[str], target: Target, bootstrap: str, via: str) -> dict[str, Any]:
    topic = target.topic(f"java-{via}")
    group = f"{topic}-group"
    sent = _java(command, "produce", bootstrap, topic, "90", f"java-producer-{via}")
    read = _java(command, "consume", bootstrap, topic, group, "90", f"java-consumer-{via}")
    transacted = target.topic(f"java-txn-{via}")
    _java(command, "transact", bootstrap, transacted, "60", f"java-transactional-{via}",
          f"java-{transacted}")
    admin_topic = f"{topic}-admin"
    steps = {s.pop("step"): s for s in _java(command, "admin", bootstrap, admin_topic, group,
                                               f"java-admin-{via}")}
    return {"topic": topic, "group": group, "sent": sent, "read": read, "admin": steps,
            "stored": consume_all(target.bootstrap, topic, PARTITIONS),
            "transacted": consume_all(target.bootstrap, transacted, PARTITIONS,
                                      config={"isolation.level": "read_committed"}),
            "transaction offsets": _committed_offsets(target.bootstrap,
                                                      f"java-{transacted}-group", transacted)}


@pytest.mark.slow
def test_kafka_4_java_clients_work_through_the_gateway_as_directly(
        target: Target, java_clients: list[str]) -> None:
    direct = _java_run(java_clients, target, target.bootstrap, "direct")
    spliced = target.gateway.gateway.handler.fetches.spliced_fetches
    through = _java_run(java_clients, target, target.gateway.bootstrap, "gateway")
    if target.name == "single":  # one leader: the Java consumer's Fetch v17s went socket to socket
        assert target.gateway.gateway.handler.fetches.spliced_fetches > spliced
    for run in (direct, through):
        # a transaction committed (with the group's offsets), one aborted: read_committed sees
        # exactly the first
        assert sorted(r[3] for r in run["transacted"]) == sorted(b"t%d" % i for i in range(60))
        assert run["transaction offsets"] == {0: 10, 1: 20, 2: 30}
        # the producer's defaults (idempotent, acks=all): every record once, keys partitioned
        # by murmur2 as Kafka's producer does
        assert sorted((e["k"], e["p"], e["o"]) for e in run["sent"]) == \
            sorted((r[2].decode(), r[0], r[1]) for r in run["stored"])
        # the KIP-848 consumer read them all and committed the ends
        records = [e for e in run["read"] if e["ev"] == "record"]
        assert sorted((e["p"], e["o"], e["k"]) for e in records) == \
            sorted((e["p"], e["o"], e["k"]) for e in run["sent"])
    assert [(e["k"], e["p"]) for e in direct["sent"]] == [(e["k"], e["p"]) for e in through["sent"]]
    commits = [next(e for e in run["read"] if e["ev"] == "committed")["offsets"]
               for run in (direct, through)]
    assert commits[0] == commits[1]

    d, g = direct["admin"], through["admin"]
    assert d["topic configs"] == g["topic configs"] == {"retention.ms": "123456789",
                                                        "cleanup.policy": "delete"}
    assert d["broker configs"]["num.partitions"] == g["broker configs"]["num.partitions"]
    assert d["describe group"]["state"] == g["describe group"]["state"] == "Empty"
    assert d["describe group"]["type"] == g["describe group"]["type"] == "Consumer"
    for run, steps in ((direct, d), (through, g)):
        assert f"{run['group']}/Consumer" in steps["list groups"]["groups"]
        ends = {f"{run['topic']}/{p}": o for p, o in
                next(e for e in run["read"] if e["ev"] == "committed")["offsets"].items()}
        assert steps["group offsets"]["offsets"] == ends
    # straight on Kafka the cluster's brokers; through the gateway one broker, the gateway,
    # leading every partition, consistently with its Metadata
    assert sorted(b["id"] for b in d["describe cluster"]["brokers"]) == \
        sorted(b.node_id for b in target.brokers)
    me = target.gateway.gateway.listener
    assert g["describe cluster"]["brokers"] == [{"id": me.node_id, "host": me.host,
                                                 "port": me.port}]
    assert g["describe cluster"]["controller"] == me.node_id
    assert g["describe cluster"]["cluster id"] == d["describe cluster"]["cluster id"]
    assert g["describe topic"]["partitions"] == [
        {"partition": p, "leader": me.node_id, "replicas": 1, "isr": 1} for p in range(PARTITIONS)]
    assert g["describe group"]["coordinator"] == me.node_id
    # the cluster's transaction protocol reached the Java producer through the gateway's
    # ApiVersions: with transaction.version 2 (Kafka 4.0's default) it sends Produce v12, which
    # the gateway relays at v12 (the partition joins the transaction at its leader)
    features = {f["name"]: f["max_version_level"] for f in
                target.gateway.gateway.cluster.features.get("finalized_features") or []}
    if features.get("transaction.version", 0) >= 2:
        assert target.gateway.gateway.server.request_counts[(0, 12)] > 0


# -- old and modern members in one group; who the cluster sees ------------------------------------


LEGACY = Client("kafka-python-3.0-0.10-named", "kafka-python",
                {"api_version": [0, 10], "client_id": "legacy-app"}, 1, 1)
MODERN_NAMED = Client("confluent-kafka-named", "confluent-kafka",
                      {"config": {"client.id": "modern-app"}})


def _describe_group_on_kafka(bootstrap: str, group: str) -> dict[str, Any]:
    """DescribeGroups v5 at the group's coordinator, straight on Kafka."""
    find, describe = KAFKA_API_BY_KEY[10], KAFKA_API_BY_KEY[15]
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with WireClient(int(port)) as client:
        found = client.call(find, 3, {"key": group, "key_type": 0})
    assert found["error_code"] == 0, found
    with WireClient(found["port"]) as client:
        return client.call(describe, 5, {"groups": [group]})["groups"][0]


@pytest.mark.slow
def test_old_and_modern_members_share_a_group_through_the_gateway(target: Target) -> None:
    topic = target.topic("mixed-group", partitions=4)
    rows = [(p, b"m%d-%d" % (p, i)) for p in range(4) for i in range(25)]
    producer = _producer(target.bootstrap)
    errors = _deliver(producer, topic, rows)
    assert producer.flush(60) == 0 and not errors, errors
    stored = consume_all(target.bootstrap, topic, 4)
    assert len(stored) == len(rows)
    group = f"{topic}-group"
    last = {f"{topic}/{p}": max(r[1] for r in stored if r[0] == p) for p in range(4)}
    job = {"action": "consume", "mode": "subscribe", "topics": [topic], "group": group,
           "isolation": "read_uncommitted", "expect_partitions": 2, "last": last,
           "commit": True, "hold": True}
    members: list[Events] = []
    try:
        for client in (LEGACY, MODERN_NAMED):
            members.append(client.start({}, target.gateway.bootstrap, job, timeout=120))
        for member in members:
            member.wait_for("committed", 90)
        described = _describe_group_on_kafka(target.bootstrap, group)
    finally:
        stop_members(*members)
    owned = [{(t, p) for t, p in m.of("assigned")[-1]["partitions"]} for m in members]
    assert len(owned[0]) == len(owned[1]) == 2 and not owned[0] & owned[1]
    got: dict[tuple[str, int], list[int]] = {}
    for member in members:
        for tp, records in received(member.events).items():
            got.setdefault(tp, []).extend(r[0] for r in records)
    assert {tp: sorted(o) for tp, o in got.items()} == \
        {(topic, p): sorted(r[1] for r in stored if r[0] == p) for p in range(4)}
    # straight on Kafka the members are the applications, not the gateway
    assert described["group_state"] == "Stable"
    assert sorted(m["client_id"] for m in described["members"]) == ["legacy-app", "modern-app"]
    for member in described["members"]:
        assert member["member_id"].startswith(member["client_id"] + "-")


def _logged(broker: KafkaBroker, client_id: str, apis: set[str],
            timeout: float = 10) -> set[str]:
    """The APIs the request log shows from ``client_id`` (once ``apis`` are all there)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {e.api for e in broker.request_log_entries() if e.client_id == client_id}
        if apis <= seen or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_the_request_log_shows_each_clients_id(logged_broker: KafkaBroker, single: Target) -> None:
    kafka = pytest.importorskip("kafka")
    topic = single.topic("request-log", partitions=1)
    prefixed = GatewayThread(logged_broker.bootstrap, client_id_prefix="via-gw/")
    try:
        for gateway, name in ((single.gateway, "legacy-logged"), (prefixed, "legacy-prefixed")):
            producer = kafka.KafkaProducer(bootstrap_servers=gateway.bootstrap,
                                           api_version=(0, 10), client_id=name)
            producer.send(topic, b"from " + name.encode()).get(30)
            producer.close()
            consumer = kafka.KafkaConsumer(topic, bootstrap_servers=gateway.bootstrap,
                                           api_version=(0, 10), client_id=name, group_id=name,
                                           auto_offset_reset="earliest", consumer_timeout_ms=3000)
            assert len(list(consumer)) >= 1
            consumer.close()
        transactional = _producer(prefixed.bootstrap, **{"transactional.id": f"{topic}-txn",
                                                         "client.id": "modern-logged"})
        transactional.init_transactions(60)
        transactional.begin_transaction()
        transactional.produce(topic, b"in a transaction")
        transactional.commit_transaction(60)
    finally:
        prefixed.stop()
    old_apis = {"PRODUCE", "FETCH", "JOIN_GROUP", "SYNC_GROUP", "OFFSET_FETCH", "LIST_OFFSETS"}
    assert old_apis <= _logged(logged_broker, "legacy-logged", old_apis)
    assert old_apis <= _logged(logged_broker, "via-gw/legacy-prefixed", old_apis)
    assert not _logged(logged_broker, "legacy-prefixed", set(), timeout=0)
    txn_apis = {"INIT_PRODUCER_ID", "PRODUCE", "END_TXN", "FIND_COORDINATOR"}
    assert txn_apis <= _logged(logged_broker, "via-gw/modern-logged", txn_apis)
    # the gateway's own client id is left to its own requests (metadata for its cache)
    own = _logged(logged_broker, "lazyconv-gateway", set(), timeout=0)
    assert own <= {"API_VERSIONS", "METADATA"}, own


# -- requests spanning several coordinators, leaders or brokers -----------------------------------


def _until(probe: Any, what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := probe()):
        assert time.monotonic() < deadline, f"{what}: not seen after {timeout:.0f} s"
        time.sleep(0.2)
    return result


def test_requests_spanning_coordinators_leaders_and_brokers_are_split(cluster: Target) -> None:
    """On three nodes: groups with different coordinators in one DescribeGroups, OffsetFetch v8
    and DeleteGroups, partitions with different leaders in one ListOffsets and
    OffsetForLeaderEpoch — answered in the request's order, as Kafka answers each part; a broker
    config changed under the gateway's id is changed on every broker."""
    from confluent_kafka import Consumer, TopicPartition

    topic = cluster.topic("spread", partitions=6)
    producer = _producer(cluster.bootstrap)
    errors = _deliver(producer, topic, [(p, b"x") for p in range(6) for _ in range(p + 1)])
    assert producer.flush(60) == 0 and not errors
    groups = [f"{topic}-g{i}" for i in range(12)]
    for i, group in enumerate(groups):  # a committed offset makes each group exist (Empty)
        member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                           "broker.address.family": "v4", "log_level": 3})
        member.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
        member.close()
    gateway = cluster.gateway
    spec = {name: next(s for s in KAFKA_API_BY_KEY.values() if s.name == name)
            for name in ("DescribeGroups", "OffsetFetch", "DeleteGroups", "ListOffsets",
                         "OffsetForLeaderEpoch", "IncrementalAlterConfigs", "DescribeConfigs")}
    asked = [*groups[::-1], "no-such-group"]
    with WireClient(gateway.port) as client:
        described = client.call(spec["DescribeGroups"], 5, {"groups": asked})["groups"]
        assert [(g["group_id"], g["error_code"], g["group_state"]) for g in described] == \
            [(g, 0, "Empty") for g in groups[::-1]] + [("no-such-group", 0, "Dead")]
        coordinators = {gateway.handler.coordinators.cached(0, g) for g in groups}
        assert len(coordinators) > 1, "every group has one coordinator: nothing was split"

        fetched = client.call(spec["OffsetFetch"], 8, {"groups": [
            {"group_id": g, "topics": [{"name": topic, "partition_indexes": [0]}]} for g in asked]})
        assert [(g["group_id"], g["error_code"],
                 [p["committed_offset"] for t in g["topics"] for p in t["partitions"]])
                for g in fetched["groups"]] == \
            [(g, 0, [groups.index(g) + 1]) for g in groups[::-1]] + [("no-such-group", 0, [-1])]

        deleted = client.call(spec["DeleteGroups"], 2, {"groups_names": groups[:4]})["results"]
        assert [(r["group_id"], r["error_code"]) for r in deleted] == [(g, 0) for g in groups[:4]]

        order = [5, 0, 3, 1, 4, 2]
        client.call(KAFKA_API_BY_KEY[3], 12, {"topics": [{"name": topic}]})  # the gateway learns
        leaders = gateway.gateway.cluster.views["-"].topics[topic].partitions
        assert len({leaders[p].leader for p in order}) > 1
        offsets = client.call(spec["ListOffsets"], 7, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1}
                                           for p in order]}]})["topics"]
        assert [(p["partition_index"], p["error_code"], p["offset"])
                for p in offsets[0]["partitions"]] == [(p, 0, p + 1) for p in order]
        epochs = client.call(spec["OffsetForLeaderEpoch"], 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": leaders[p].leader_epoch,
                 "leader_epoch": leaders[p].leader_epoch} for p in order]}]})["topics"]
        assert [(p["partition"], p["error_code"], p["end_offset"])
                for p in epochs[0]["partitions"]] == [(p, 0, p + 1) for p in order]

        me = str(gateway.gateway.listener.node_id)

        def alter(operation: int) -> list[tuple[str, int]]:
            answer = client.call(spec["IncrementalAlterConfigs"], 1, {"resources": [
                {"resource_type": 4, "resource_name": me, "configs": [
                    {"name": "max.connections", "config_operation": operation,
                     "value": "100000"}]}]})
            return [(r["resource_name"], r["error_code"]) for r in answer["responses"]]

        assert alter(0) == [(me, 0)]  # SET, on every broker
        try:
            for broker in cluster.brokers:
                with WireClient(broker.port) as direct:
                    def value(node: int = broker.node_id, on: WireClient = direct) -> bool:
                        answer = on.call(spec["DescribeConfigs"], 4, {"resources": [
                            {"resource_type": 4, "resource_name": str(node),
                             "configuration_keys": ["max.connections"]}]})
                        return answer["results"][0]["configs"][0]["value"] == "100000"
                    _until(value, f"max.connections on broker {broker.node_id}")
            described_config = client.call(spec["DescribeConfigs"], 4, {"resources": [
                {"resource_type": 4, "resource_name": me,
                 "configuration_keys": ["max.connections"]}]})["results"]
            assert [(r["resource_name"], r["error_code"], r["configs"][0]["value"])
                    for r in described_config] == [(me, 0, "100000")]
        finally:
            assert alter(1) == [(me, 0)]  # DELETE: every broker back to its default
