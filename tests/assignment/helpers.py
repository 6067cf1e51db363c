"""Builders shared by the assignment tests (Kafka's AssignmentTestUtils, in miniature)."""

from __future__ import annotations

from lazyconv.assignment._assignor import RackAwareTaskAssignor
from lazyconv.assignment._ids import TaskId, TopicPartition
from lazyconv.assignment._state import ClientState


def pid(n: int) -> str:
    """Kafka's test process ids: UUID_1 = 00000000-0000-0000-0000-000000000001."""
    return f"00000000-0000-0000-0000-{n:012d}"


def task(text: str) -> TaskId:
    return TaskId.parse(text)


def tasks(*texts: str) -> list[TaskId]:
    return [task(t) for t in texts]


def groups_of(task_ids) -> dict[tuple, set[TaskId]]:
    groups: dict[tuple, set[TaskId]] = {}
    for t in task_ids:
        groups.setdefault(t.subtopology_key, set()).add(t)
    return groups


def input_topic(t: TaskId) -> TopicPartition:
    return TopicPartition(f"topic{t.subtopology}", t.partition)


def changelog_topic(t: TaskId) -> TopicPartition:
    return TopicPartition(f"store-{t.subtopology}-changelog", t.partition)


def assignor_for(
    client_racks: dict[str, str],
    input_racks: dict[TaskId, list[str]],
    changelog_racks: dict[TaskId, list[str]] | None = None,
    strategy: str = "min_traffic",
    num_standby_replicas: int = 0,
    enable: bool = True,
) -> RackAwareTaskAssignor:
    """An assignor whose every task reads one partition with the given replica racks."""
    changelog_racks = changelog_racks or {}
    cluster = {input_topic(t): racks for t, racks in input_racks.items()}
    described = {}
    for t, racks in changelog_racks.items():
        described.setdefault(changelog_topic(t).topic, {})[t.partition] = racks
    assignor = RackAwareTaskAssignor(
        consumer_racks={p: [r] for p, r in client_racks.items()},
        partitions_for_task={t: {input_topic(t)} for t in input_racks},
        changelog_partitions_for_task={t: {changelog_topic(t)} for t in changelog_racks},
        tasks_for_subtopology=groups_of(set(input_racks) | set(changelog_racks)),
        cluster_replica_racks=cluster,
        describe_topics=lambda topics: {tp: described[tp] for tp in topics},
        strategy=strategy,
        num_standby_replicas=num_standby_replicas,
    )
    if enable:
        assert assignor.can_enable()
    return assignor


def client(n: int, rack: str, active=(), standby=()) -> ClientState:
    return ClientState(pid(n), rack, 1, tasks(*active), tasks(*standby))


def snapshot(clients) -> dict[str, tuple[list[str], list[str]]]:
    return {
        c.process_id: (sorted(map(str, c.active)), sorted(map(str, c.standby))) for c in clients
    }
