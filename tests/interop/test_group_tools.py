"""Admin tools see the groups: ListGroups and DescribeGroups answered to kafka-python's and
confluent-kafka's admin clients while a two-member group is up, and the committed offsets
through OffsetFetch (what ``kafka-consumer-groups --describe`` shows)."""

from __future__ import annotations

import pytest

from tests.interop.conftest import ServerPool, Tools, fixture_topic, require
from tests.interop.harness import stop_members

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

PHASE_TIMEOUT_S = 40  # a rebalance waits up to the 10 s rebalance timeout for slow members

GROUP = "interop-tools-group"


def test_admin_clients_list_and_describe_a_live_group(servers: ServerPool, tools: Tools) -> None:
    client = require("kafka-python-negotiated", tools)
    kafka_admin = pytest.importorskip("kafka.admin")
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    served = servers.for_client(client)
    parts = [p for p in served.manifest.values() if fixture_topic(p) == "headers"]
    mid = {f"{p.topic}/{p.partition}": 9 for p in parts}
    job = {"action": "consume", "mode": "subscribe", "topics": [parts[0].topic], "group": GROUP,
           "isolation": "read_uncommitted", "expect_partitions": 1, "last": mid,
           "commit": True, "hold": True}
    members = [client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S + 30)
               for _ in range(2)]
    try:
        for m in members:
            m.wait_for("committed", PHASE_TIMEOUT_S)
        owned = sorted(tuple(m.of("assigned")[-1]["partitions"][0]) for m in members)

        admin = kafka_admin.KafkaAdminClient(bootstrap_servers=served.bootstrap,
                                             request_timeout_ms=10000)
        try:
            listed = admin.list_groups()
            described = admin.describe_groups([GROUP])
            offsets = admin.list_group_offsets({GROUP: None})
        finally:
            admin.close()

        confluent = confluent_admin.AdminClient({"bootstrap.servers": served.bootstrap})
        found = confluent.list_consumer_groups(request_timeout=10).result()
        description = confluent.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
    finally:
        stop_members(*members)
    topic = parts[0].topic
    assert owned == sorted((p.topic, p.partition) for p in parts)
    assert {"group_id": GROUP, "protocol_type": "consumer", "group_state": "Stable"}.items() \
        <= next(g for g in listed if g["group_id"] == GROUP).items()
    group = described[GROUP]
    assert group["group_state"] == "Stable" and group["protocol_type"] == "consumer"
    assert sorted((a["topic"], p) for m in group["members"]
                  for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"]) \
        == owned
    assert {(tp.topic, tp.partition): o.offset for tp, o in offsets[GROUP].items()} \
        == {(topic, 0): 10, (topic, 1): 10}
    assert GROUP in {g.group_id for g in found.valid}
    assert str(description.state).endswith("STABLE"), description.state
    assert len(description.members) == 2
    assert sorted((tp.topic, tp.partition) for m in description.members
                  for tp in m.assignment.topic_partitions) == owned
