"""Consumer groups through the gateway, against a 3-node Kafka 4 cluster with topics of
replication factor 3 (marker ``kafka``): an old member
through the gateway and a modern member straight on Kafka form one group, split the partitions,
read to a midpoint and commit; the old client restarted resumes from the committed offsets, so
every record is read exactly once. A committed group moves from one gateway to another."""

from __future__ import annotations

import time

import pytest
from kafka_broker import KafkaCluster, produce_records, unique_topic

from lazyconv.protocol import _find_coordinator as find_coordinator
from tests.gateway.clients import BY_ID, Driver
from tests.gateway.conftest import GatewayThread, create_topic_retrying
from tests.interop.checks import received
from tests.interop.clients import BY_ID as MODERN
from tests.interop.harness import Events, stop_members
from tests.oldclients.clients import OldClientTools, Unavailable
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PARTITIONS = 4
PER_PARTITION = 30
PHASE_TIMEOUT_S = 45
GROUP_DRIVERS = [d.id for d in BY_ID.values() if d.groups]
# Every driver starts with the modern member at once ("together": the modern client, which starts
# faster, mostly joins first and the old one joins its group); the old member joining first and
# giving up half in a rebalance (REBALANCE_IN_PROGRESS relayed to an old Heartbeat, an old
# JoinGroup again) runs on purpose for one driver of each client family and group protocol
# (JoinGroup v0: kafka-python 0.9 and 0.10 modes, kafka-node, librdkafka's fallback; v1: Java
# 0.10.2; v3: Java 2.0; kafka-python 3's). Starting the modern member alone first would wait out
# a rebalance of librdkafka's (about 8 s more per case) for no path the "together" runs lack.
OLD_FIRST_DRIVERS = ["kafka-python-1.3.5-0.9", "kafka-python-1.4.7-0.10", "kafka-node-5.0.0",
                     "confluent-kafka-fallback-0.9.0", "java-0.10.2.2", "java-2.0.1",
                     "kafka-python-3.0-0.10.1"]
ORDERS = [(d, "together") for d in GROUP_DRIVERS] + [(d, "old") for d in OLD_FIRST_DRIVERS]


@pytest.fixture(scope="module")
def tools() -> OldClientTools:
    return OldClientTools()


def wait_for_group_coordinator(gateway: GatewayThread, timeout: float = 60) -> None:
    """Until the cluster has a group coordinator (a fresh cluster creates __consumer_offsets on
    the first FindCoordinator, which takes a few seconds): members then join at once."""
    deadline = time.monotonic() + timeout
    with WireClient(gateway.port) as client:
        while True:
            answer = client.call(find_coordinator.SPEC, 0, {"key": "warm-up"})
            if answer["error_code"] == 0:
                return
            assert time.monotonic() < deadline, f"no group coordinator: {answer}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def gateway(kafka_cluster: KafkaCluster):
    gateway = GatewayThread(kafka_cluster.bootstrap)
    wait_for_group_coordinator(gateway)
    yield gateway
    gateway.stop()


def _require(tools: OldClientTools, driver: Driver) -> None:
    if driver.old is not None:
        try:
            tools.require(driver.old)
        except Unavailable as exc:
            pytest.skip(str(exc))


def _topic(bootstrap: str, name: str) -> dict[tuple[str, int], list[tuple]]:
    """A 4-partition topic written by a modern producer: (offset, key, value) per partition."""
    create_topic_retrying(bootstrap, name, PARTITIONS, replication_factor=3)
    rows = [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), 1_700_000_000_000 + i, None)
            for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    offsets = produce_records(bootstrap, name, rows, "gzip")
    out: dict[tuple[str, int], list[tuple]] = {}
    for (p, k, v, _ts, _h), o in zip(rows, offsets, strict=True):
        out.setdefault((name, p), []).append((o, k, v))
    return out


def _assigned(events: Events) -> set[tuple[str, int]]:
    assigned = events.of("assigned")
    assert assigned, "the member never got an assignment"
    return {(t, p) for t, p in assigned[-1]["partitions"]}


@pytest.mark.parametrize(("driver_id", "first"), ORDERS)
def test_old_and_modern_members_share_a_group_commit_and_resume(
        tools: OldClientTools, kafka_cluster: KafkaCluster, gateway: GatewayThread,
        driver_id: str, first: str) -> None:
    """Both members read half the partitions each, commit, and the old one alone resumes.
    ``first="old"``: the old member joins the empty group alone and gets all 4 partitions
    (``expect_partitions`` keeps it from reading them); the modern one joins once that
    assignment is reported, and the old must give up half in a rebalance. ``"together"``: both
    start at once and either may be first (``ORDERS``)."""
    driver = BY_ID[driver_id]
    _require(tools, driver)
    safe = driver.id.replace(".", "_")
    topic = group = unique_topic(f"gw-group-{safe}")
    wants = _topic(kafka_cluster.bootstrap, topic)
    mid = {tp: rows[PER_PARTITION // 2][0] for tp, rows in wants.items()}
    key = {tp: f"{tp[0]}/{tp[1]}" for tp in wants}
    job = {"action": "consume", "mode": "subscribe", "topics": [topic], "group": group,
           "isolation": "read_uncommitted", "expect_partitions": PARTITIONS // 2,
           "last": {key[tp]: mid[tp] for tp in wants}, "commit": True, "hold": True}

    def start_old() -> Events:
        return driver.start(tools, gateway.bootstrap, job, timeout=PHASE_TIMEOUT_S + 30)

    def start_modern() -> Events:
        return MODERN["confluent-kafka-negotiated"].start({}, kafka_cluster.bootstrap, job,
                                                          timeout=PHASE_TIMEOUT_S + 30)

    members = [start_old()]
    try:
        if first == "old":
            members[0].wait_for("assigned", PHASE_TIMEOUT_S)
        members.append(start_modern())
        for member in members:
            member.wait_for("committed", PHASE_TIMEOUT_S)
    finally:
        stop_members(*members)
    owned = [_assigned(m) for m in members]
    assert len(owned[0]) == len(owned[1]) == PARTITIONS // 2, owned
    assert owned[0] | owned[1] == set(wants) and not owned[0] & owned[1], owned
    for member, mine in zip(members, owned, strict=True):
        got = received(member.events)
        assert set(got) <= mine
        for tp in mine:
            first_half = [r for r in wants[tp] if r[0] <= mid[tp]]
            assert [(o, k, v) for o, _ts, k, v, _h in got.get(tp, [])] == first_half, tp

    # the old client alone resumes from what both members committed
    job = dict(job, expect_partitions=PARTITIONS, hold=False,
               last={key[tp]: rows[-1][0] for tp, rows in wants.items()})
    restarted = driver.start(tools, gateway.bootstrap, job, timeout=PHASE_TIMEOUT_S)
    try:
        restarted.wait_for("done", PHASE_TIMEOUT_S + 10)
    finally:
        restarted.child.kill()
    got = received(restarted.events)
    for tp, rows in wants.items():
        assert [(o, k, v) for o, _ts, k, v, _h in got.get(tp, [])] == \
            [r for r in rows if r[0] > mid[tp]], tp


def test_a_group_moves_from_one_gateway_to_another(tools: OldClientTools,
                                                   kafka_cluster: KafkaCluster) -> None:
    driver = BY_ID["kafka-python-3.0-0.10"]
    topic = group = "gw-two-gateways"
    wants = _topic(kafka_cluster.bootstrap, topic)
    mid = {tp: rows[PER_PARTITION // 3][0] for tp, rows in wants.items()}
    key = {tp: f"{tp[0]}/{tp[1]}" for tp in wants}
    first, second = GatewayThread(kafka_cluster.bootstrap), GatewayThread(kafka_cluster.bootstrap)
    try:
        job = {"action": "consume", "mode": "subscribe", "topics": [topic], "group": group,
               "expect_partitions": PARTITIONS, "commit": True,
               "last": {key[tp]: mid[tp] for tp in wants}}
        driver.run(tools, first.bootstrap, job)
        first.stop()  # the client's gateway goes away; the next one knows nothing of it
        time.sleep(0.5)
        job["last"] = {key[tp]: rows[-1][0] for tp, rows in wants.items()}
        got = received(driver.run(tools, second.bootstrap, job).events)
        for tp, rows in wants.items():
            assert [o for o, *_ in got.get(tp, [])] == [r[0] for r in rows if r[0] > mid[tp]]
    finally:
        first.stop()
        second.stop()
