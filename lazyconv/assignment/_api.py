"""Optimize a whole assignment, in plain Python types.

:func:`assign` takes clients (rack, threads), tasks (input and changelog partitions with their
replica racks), and the current, already balanced assignment, and returns the rack-aware
assignment Kafka Streams' HighAvailabilityTaskAssignor (or the legacy sticky one) would make
from it:

1. stateful active tasks: ``optimize_active_tasks`` with the configured weights (unset ones
   default by caller: high availability 10/1, sticky 1/10);
2. stateless active tasks: ``optimize_active_tasks`` with weights 1/0;
3. standby tasks (when ``num_standby_replicas > 0``): pairwise swaps, same weights as 1.

Kafka optimizes actives *before* it places standbys. Here the standbys come with the input, so
they are set aside while actives move; a standby whose client then runs the same task as
active is handed to the client that active left (a role swap), and the standby optimization
starts from there.

Costs reported (``before``/``after``) use the issue's definition for every placement:
``traffic_cost * cross-rack partitions + non_overlap_cost * (task not on that client before, in
that role)``, with each phase's weights, summed over phases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lazyconv.assignment._assignor import optimize_active_tasks, optimize_standby_tasks
from lazyconv.assignment._cost import (
    CALLER_DEFAULTS,
    STATELESS_COSTS,
    CostModel,
    CostWeights,
    resolve_weights,
)
from lazyconv.assignment._errors import AssignmentInputError
from lazyconv.assignment._ids import TaskId, TopicPartition, process_sort_key
from lazyconv.assignment._state import ClientState, sorted_clients

__all__ = [
    "PartitionRacks",
    "Client",
    "Task",
    "ClientTasks",
    "AssignmentInput",
    "PhaseCost",
    "AssignmentResult",
    "assign",
    "validate_input",
    "PHASES",
]


@dataclass(frozen=True)
class PartitionRacks:
    """A topic partition and the racks its replicas are on."""

    topic: str
    partition: int
    replica_racks: tuple[str, ...]


@dataclass(frozen=True)
class Client:
    """A Kafka Streams client (process): its id, rack and stream-thread count."""

    id: str
    rack: str
    threads: int = 1


@dataclass(frozen=True)
class Task:
    """A task (``"0_1"`` = subtopology 0, partition 1), the partitions it reads and its changelogs."""

    id: str
    subtopology: int
    partitions: tuple[PartitionRacks, ...]
    changelog_partitions: tuple[PartitionRacks, ...] = ()
    stateful: bool = True


@dataclass(frozen=True)
class ClientTasks:
    """Task ids a client runs as active and keeps as standby."""

    active: tuple[str, ...] = ()
    standby: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssignmentInput:
    """Everything :func:`assign` needs; ``None`` weights mean the caller's defaults."""

    clients: tuple[Client, ...]
    tasks: tuple[Task, ...]
    current: Mapping[str, ClientTasks]
    num_standby_replicas: int = 0
    traffic_cost: int | None = None
    non_overlap_cost: int | None = None


@dataclass(frozen=True)
class PhaseCost:
    """Cost of one optimization phase (``stateful_active``, ``stateless_active``, ``standby``)."""

    phase: str
    weights: CostWeights
    before: int
    after: int
    moved: int


@dataclass(frozen=True)
class AssignmentResult:
    """The new assignment (clients in Kafka's order, task ids sorted) and its costs."""

    assignment: dict[str, ClientTasks]
    cost_before: int
    cost_after: int
    phases: tuple[PhaseCost, ...] = field(default_factory=tuple)


def validate_input(problem: AssignmentInput) -> None:
    """Check references and consistency; errors name the JSON path of the bad field."""
    if not problem.clients:
        raise AssignmentInputError("$.clients", "at least one client is needed")
    client_ids: set[str] = set()
    for i, client in enumerate(problem.clients):
        if client.id in client_ids:
            raise AssignmentInputError(f"$.clients[{i}].id", f"duplicate client id {client.id!r}")
        client_ids.add(client.id)
    task_by_id: dict[str, Task] = {}
    canonical: dict[TaskId, str] = {}
    racks: dict[tuple[str, int], tuple[frozenset[str], str]] = {}
    for i, task in enumerate(problem.tasks):
        path = f"$.tasks[{i}]"
        if task.id in task_by_id:
            raise AssignmentInputError(f"{path}.id", f"duplicate task id {task.id!r}")
        try:
            task_id = TaskId.parse(task.id)
        except Exception as exc:
            raise AssignmentInputError(f"{path}.id", str(exc)) from None
        if task_id in canonical:
            raise AssignmentInputError(f"{path}.id", f"task {task.id!r} is the same task as {canonical[task_id]!r}")
        canonical[task_id] = task.id
        if task_id.subtopology != task.subtopology:
            raise AssignmentInputError(
                f"{path}.subtopology",
                f"{task.subtopology} does not match the subtopology {task_id.subtopology} in id {task.id!r}",
            )
        if not task.partitions:
            raise AssignmentInputError(f"{path}.partitions", "a task needs at least one input partition")
        for kind, parts in (("partitions", task.partitions), ("changelog_partitions", task.changelog_partitions)):
            for k, part in enumerate(parts):
                where = f"{path}.{kind}[{k}]"
                if not part.replica_racks:
                    raise AssignmentInputError(f"{where}.replica_racks", "at least one replica rack is needed")
                key = (part.topic, part.partition)
                seen = racks.get(key)
                if seen is not None and seen[0] != frozenset(part.replica_racks):
                    raise AssignmentInputError(
                        f"{where}.replica_racks",
                        f"racks of {part.topic}-{part.partition} differ from those given at {seen[1]}",
                    )
                racks.setdefault(key, (frozenset(part.replica_racks), f"{where}.replica_racks"))
        task_by_id[task.id] = task
    active_on: dict[str, str] = {}
    for client_id, tasks in problem.current.items():
        path = f"$.current.{client_id}"
        if client_id not in client_ids:
            raise AssignmentInputError(path, f"unknown client {client_id!r} (not in $.clients)")
        for role, ids in (("active", tasks.active), ("standby", tasks.standby)):
            seen_here: set[str] = set()
            for k, listed_id in enumerate(ids):
                where = f"{path}.{role}[{k}]"
                listed = task_by_id.get(listed_id)
                if listed is None:
                    raise AssignmentInputError(where, f"unknown task {listed_id!r} (not in $.tasks)")
                if listed_id in seen_here:
                    raise AssignmentInputError(where, f"task {listed_id!r} is listed twice")
                seen_here.add(listed_id)
                if role == "active":
                    if listed_id in active_on:
                        raise AssignmentInputError(
                            where, f"task {listed_id!r} is already active on client {active_on[listed_id]!r}"
                        )
                    active_on[listed_id] = client_id
                else:
                    if listed_id in tasks.active:
                        raise AssignmentInputError(where, f"task {listed_id!r} is also active on this client")
                    if problem.num_standby_replicas == 0:
                        raise AssignmentInputError(where, "standby tasks given but num_standby_replicas is 0")
                    if not listed.stateful or not listed.changelog_partitions:
                        raise AssignmentInputError(
                            where, f"standby task {listed_id!r} must be stateful and have changelog_partitions"
                        )
    for i, listed in enumerate(problem.tasks):
        if listed.id not in active_on:
            raise AssignmentInputError(f"$.tasks[{i}]", f"task {listed.id!r} is not active on any client in $.current")
    if problem.num_standby_replicas < 0:
        raise AssignmentInputError("$.num_standby_replicas", "must be >= 0")
    for name in ("traffic_cost", "non_overlap_cost"):
        value = getattr(problem, name)
        if value is not None and not 0 <= value < 2**31:
            raise AssignmentInputError(f"$.{name}", f"must be null or an integer in [0, 2^31), got {value}")


def _placement_cost(
    clients: list[ClientState],
    original: Mapping[str, set[TaskId]],
    role: str,
    tasks: set[TaskId],
    model: CostModel,
    weights: CostWeights,
) -> tuple[int, int]:
    """(cost, moved) of the placements of ``tasks`` in ``role`` relative to ``original``."""
    total = moved = 0
    for client in clients:
        held = client.active if role == "active" else client.standby
        for task in held & tasks:
            current = task in original[client.process_id]
            total += model.cost(task, client.process_id, current, weights, role == "standby")
            moved += not current
    return total, moved


PHASES = ("stateful_active", "stateless_active", "standby")


def assign(
    problem: AssignmentInput,
    strategy: str = "min_traffic",
    assignor: str = "high_availability",
    on_phase_done: Callable[[str], None] | None = None,
) -> AssignmentResult:
    """Rack-aware assignment of ``problem`` with ``strategy`` (min_traffic or balance_subtopology).

    ``assignor`` picks the default weights for unset costs: ``high_availability`` (traffic 10,
    non-overlap 1) or ``sticky`` (1, 10). ``on_phase_done`` is called with each name in
    :data:`PHASES` as that phase ends (for progress display).
    """
    done = on_phase_done or (lambda phase: None)
    validate_input(problem)
    if strategy not in ("min_traffic", "balance_subtopology"):
        raise AssignmentInputError("strategy", f"{strategy!r} is not min_traffic or balance_subtopology")
    if assignor not in CALLER_DEFAULTS:
        raise AssignmentInputError("assignor", f"{assignor!r} is not one of {sorted(CALLER_DEFAULTS)}")
    weights = resolve_weights(problem.traffic_cost, problem.non_overlap_cost, CALLER_DEFAULTS[assignor])

    ids = {task.id: TaskId.parse(task.id) for task in problem.tasks}
    names = {task_id: name for name, task_id in ids.items()}
    racks_for_partition: dict[TopicPartition, set[str]] = {}
    inputs: dict[TaskId, set[TopicPartition]] = {}
    changelogs: dict[TaskId, set[TopicPartition]] = {}
    groups: dict[tuple, set[TaskId]] = {}
    for task in problem.tasks:
        task_id = ids[task.id]
        for target, parts in ((inputs, task.partitions), (changelogs, task.changelog_partitions)):
            entry = target.setdefault(task_id, set())
            for part in parts:
                tp = TopicPartition(part.topic, part.partition)
                entry.add(tp)
                racks_for_partition.setdefault(tp, set()).update(part.replica_racks)
        groups.setdefault(task_id.subtopology_key, set()).add(task_id)
    model = CostModel({c.id: c.rack for c in problem.clients}, inputs, changelogs, racks_for_partition)

    clients = sorted_clients(ClientState(c.id, c.rack, c.threads) for c in problem.clients)
    by_id = {c.process_id: c for c in clients}
    standbys: dict[str, set[TaskId]] = {c.process_id: set() for c in clients}
    for client_id, tasks in problem.current.items():
        by_id[client_id].active.update(ids[t] for t in tasks.active)
        standbys[client_id].update(ids[t] for t in tasks.standby)
    original_active = {c.process_id: set(c.active) for c in clients}
    original_standby = {c: set(s) for c, s in standbys.items()}
    stateful = {ids[t.id] for t in problem.tasks if t.stateful}
    stateless = {ids[t.id] for t in problem.tasks if not t.stateful}

    # The input's standby cost, before the role swaps below can change any standby.
    standby_before = sum(
        model.cost(tid, client_id, True, weights, True)
        for client_id, held in original_standby.items()
        for tid in held
    )
    phases: list[PhaseCost] = []
    for phase, phase_tasks, phase_weights in (
        ("stateful_active", stateful, weights),
        ("stateless_active", stateless, STATELESS_COSTS),
    ):
        before, _ = _placement_cost(clients, original_active, "active", phase_tasks, model, phase_weights)
        optimize_active_tasks(phase_tasks, clients, model, phase_weights, strategy, groups)
        after, moved = _placement_cost(clients, original_active, "active", phase_tasks, model, phase_weights)
        phases.append(PhaseCost(phase, phase_weights, before, after, moved))
        done(phase)

    # Put the standbys back; a standby now colliding with its own active swaps roles with it.
    previous_owner = {tid: cid for cid, held in original_active.items() for tid in held}
    for client in clients:
        for tid in sorted(standbys[client.process_id]):
            owner = by_id[previous_owner[tid]] if tid in client.active else client
            owner.assign_standby(tid)
    if problem.num_standby_replicas > 0:
        all_standby = {tid for held in original_standby.values() for tid in held}
        optimize_standby_tasks(clients, model, weights)
        after, moved = _placement_cost(clients, original_standby, "standby", all_standby, model, weights)
        phases.append(PhaseCost("standby", weights, standby_before, after, moved))
    done("standby")

    assignment = {
        c.process_id: ClientTasks(
            tuple(names[t] for t in sorted(c.active)), tuple(names[t] for t in sorted(c.standby))
        )
        for c in sorted(clients, key=lambda c: process_sort_key(c.process_id))
    }
    return AssignmentResult(
        assignment,
        sum(p.before for p in phases),
        sum(p.after for p in phases),
        tuple(phases),
    )
