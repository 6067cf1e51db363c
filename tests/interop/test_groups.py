"""subscribe(): two members of a group split the partitions, read up to a midpoint and commit;
a restarted consumer of the group resumes from the committed offsets, so that together they
deliver every record exactly once."""

from __future__ import annotations

import base64
import os
import signal
import time

import pytest

from tests.interop.checks import assert_same_records, received
from tests.interop.clients import Client, client_ids, scratch_topic
from tests.interop.conftest import Served, ServerPool, Tools, fixture_topic, not_applicable, require
from tests.interop.expected import FixturePartition, Record, expected
from tests.interop.harness import Events, stop_members

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

GROUP_TOPICS = ("headers", "idempotent")  # 4 partitions, magic v2 only, no zstd
PHASE_TIMEOUT_S = 40  # a rebalance waits up to the 10 s rebalance timeout for slow members
SESSION_TIMEOUT_S = 10  # session.timeout.ms the drivers set


def _parts(served: Served) -> list[FixturePartition]:
    return [p for p in served.manifest.values() if fixture_topic(p) in GROUP_TOPICS]


def _final_assignment(events: Events) -> set[tuple[str, int]]:
    assigned = events.of("assigned")
    assert assigned, "the member never got an assignment"
    return {(t, p) for t, p in assigned[-1]["partitions"]}


@pytest.mark.parametrize("client_id", client_ids())
def test_group_split_commit_and_resume(servers: ServerPool, tools: Tools, client_id: str) -> None:
    client = require(client_id, tools)
    served = servers.for_client(client)
    not_applicable(client, "groups")
    if client.family == "kcat":
        return _kcat_group(served, tools, client)
    parts = _parts(served)
    topics = sorted({p.topic for p in parts})
    group = f"interop-group-{client.id}"
    wants: dict[tuple[str, int], list[Record]] = {
        (p.topic, p.partition): expected(served.folder(p), client.magic, read_committed=False)
        for p in parts}
    mid = {tp: want[len(want) // 2][0] for tp, want in wants.items()}
    key = {tp: f"{tp[0]}/{tp[1]}" for tp in wants}

    # Phase 1: two members, each reading its half of the partitions up to the midpoint.
    job = {"action": "consume", "mode": "subscribe", "topics": topics, "group": group,
           "isolation": "read_uncommitted", "expect_partitions": len(parts) // 2,
           "last": {key[tp]: mid[tp] for tp in wants}, "commit": True, "hold": True}
    members = [client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S + 30)
               for _ in range(2)]
    try:
        for m in members:
            m.wait_for("committed", PHASE_TIMEOUT_S)
    finally:
        stop_members(*members)
    owned = [_final_assignment(m) for m in members]
    assert len(owned[0]) == len(owned[1]) == len(parts) // 2, owned
    assert owned[0] | owned[1] == set(wants) and not owned[0] & owned[1], owned
    for m, mine in zip(members, owned, strict=True):
        got = received(m.events)
        assert set(got) <= mine, f"records from partitions not owned: {set(got) - mine}"
        for tp in mine:
            first_half = [r for r in wants[tp] if r[0] <= mid[tp]]
            assert_same_records(got.get(tp, []), first_half, f"{client.id} member, {tp}")
        committed = {(t, p): o for t, p, o in m.of("committed")[-1]["offsets"]}
        assert committed == {tp: mid[tp] + 1 for tp in mine}

    # Phase 2: a restarted consumer of the group resumes from the committed offsets.
    job = dict(job, expect_partitions=len(parts), hold=False,
               last={key[tp]: wants[tp][-1][0] for tp in wants})
    restarted = client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S)
    try:
        restarted.wait_for("done", PHASE_TIMEOUT_S + 10)
    finally:
        restarted.child.kill()
    got = received(restarted.events)
    for tp, want in wants.items():
        assert_same_records(got.get(tp, []), [r for r in want if r[0] > mid[tp]],
                            f"{client.id} restarted consumer, {tp}")


@pytest.mark.parametrize("client_id", ["kafka-python-0.9", "kafka-python-negotiated",
                                       "confluent-kafka-negotiated", "aiokafka-negotiated",
                                       "kafkajs"])
def test_committed_offsets_survive_a_server_restart(servers: ServerPool, tools: Tools,
                                                    client_id: str) -> None:
    """A consumer commits at the midpoint, the server restarts over the same log directory, and
    a new consumer of the group resumes there (offsets are kept in the log directory)."""
    client = require(client_id, tools)
    served = servers.for_client(client)
    parts = _parts(served)
    wants = {(p.topic, p.partition): expected(served.folder(p), client.magic, read_committed=False)
             for p in parts}
    mid = {tp: want[len(want) // 3][0] for tp, want in wants.items()}
    job = {"action": "consume", "mode": "subscribe", "topics": sorted({p.topic for p in parts}),
           "group": f"interop-restart-{client.id}", "isolation": "read_uncommitted",
           "expect_partitions": len(parts), "commit": True,
           "last": {f"{t}/{p}": mid[(t, p)] for t, p in wants}}
    first = client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S)
    try:
        first.wait_for("done", PHASE_TIMEOUT_S + 10)
    finally:
        stop_members(first)
    served = servers.restart(client)
    job = dict(job, last={f"{t}/{p}": w[-1][0] for (t, p), w in wants.items()})
    second = client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S)
    try:
        second.wait_for("done", PHASE_TIMEOUT_S + 10)
    finally:
        second.child.kill()
    got = received(second.events)
    for tp, want in wants.items():
        assert_same_records(got.get(tp, []), [r for r in want if r[0] > mid[tp]],
                            f"{client.id} after the restart, {tp}")


@pytest.mark.parametrize("client_id", ["kafka-python-negotiated", "confluent-kafka-negotiated"])
def test_dead_member_is_evicted_after_its_session_timeout(servers: ServerPool, tools: Tools,
                                                          client_id: str) -> None:
    """A member killed without LeaveGroup stops heartbeating; once its session times out
    (10 s in the drivers) the coordinator evicts it and the survivor gets every partition."""
    client = require(client_id, tools)
    served = servers.for_client(client)
    parts = _parts(served)
    job = {"action": "consume", "mode": "subscribe", "topics": sorted({p.topic for p in parts}),
           "group": f"interop-evict-{client.id}", "isolation": "read_uncommitted",
           "expect_partitions": len(parts) // 2, "hold": True,
           "last": {f"{p.topic}/{p.partition}": -1 for p in parts}}
    members = [client.start(tools, served.bootstrap, job, timeout=SESSION_TIMEOUT_S + 40)
               for _ in range(2)]
    try:
        for m in members:
            m.wait_for("done", PHASE_TIMEOUT_S)
        dead, survivor = members
        os.killpg(dead.child.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        while True:
            event = survivor.wait_for("assigned", SESSION_TIMEOUT_S + 20)
            if len(event["partitions"]) == len(parts):
                break
        waited = time.monotonic() - killed
    finally:
        stop_members(*members)
    # Not before the session timeout (the member might only be slow), not long after it.
    assert SESSION_TIMEOUT_S - 1 <= waited <= SESSION_TIMEOUT_S + 15, waited


def _kcat_group(served: Served, tools: Tools, client: Client) -> None:
    """kcat -G can neither pause nor commit chosen offsets, and reads a fixture topic faster
    than a second member can join. So its members join on an empty topic of 4 partitions,
    and only once they have split it are records produced (by kcat -P); each member reads a
    count of records (half of what its partitions get) and commits what it consumed when it
    exits; a restarted member then reads the rest (-e). Together: every record exactly once."""
    topic = scratch_topic(client, "group")
    per_partition = 40
    records = [{"partition": p, "key": _b64(f"k{p}-{i}".encode()),
                "value": _b64(f"value {i} of partition {p}".encode()), "headers": []}
               for p in range(4) for i in range(per_partition)]
    job = {"action": "consume", "mode": "subscribe", "topics": [topic],
           "group": f"interop-group-{client.id}", "isolation": "read_uncommitted",
           "last": {f"{topic}/{p}": per_partition - 1 for p in range(4)},
           "count": per_partition}  # half of what 2 partitions get
    members = [client.start(tools, served.bootstrap, job, timeout=PHASE_TIMEOUT_S)
               for _ in range(2)]
    try:
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while True:
            owned = [_final_assignment(m) if m.of("assigned") else set() for m in members]
            if len(owned[0]) == len(owned[1]) == 2 and not owned[0] & owned[1]:
                break
            assert time.monotonic() < deadline, f"the kcat members never split: {owned}"
            for m in members:
                m.next(time.monotonic() + 0.05)
        producer = client.start(tools, served.bootstrap,
                                {"action": "produce", "topic": topic, "records": records},
                                timeout=PHASE_TIMEOUT_S)
        producer.wait_for("done", PHASE_TIMEOUT_S)
        for m in members:
            m.wait_for("done", PHASE_TIMEOUT_S)
    finally:
        stop_members(*members)
    restarted = client.start(tools, served.bootstrap, dict(job, count=None), timeout=PHASE_TIMEOUT_S)
    try:
        restarted.wait_for("done", PHASE_TIMEOUT_S + 10)
    finally:
        restarted.child.kill()
    for m in members:
        assert len(m.of("record")) == per_partition
    delivered: dict[tuple[str, int], list[Record]] = {}
    for events in (*members, restarted):
        for tp, got in received(events.events).items():
            delivered.setdefault(tp, []).extend(got)
    for p in range(4):
        got = sorted(delivered.get((topic, p), []), key=lambda r: r[0])
        assert [(r[0], r[2], r[3]) for r in got] == [
            (i, f"k{p}-{i}".encode(), f"value {i} of partition {p}".encode())
            for i in range(per_partition)], f"kcat group, partition {p}: each record exactly once"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
