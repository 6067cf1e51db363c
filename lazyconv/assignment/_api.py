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

``semantics="kip924"`` runs the same three phases with the semantics of KIP-924's public
``TaskAssignmentUtils.optimizeRackAwareActiveTasks`` / ``optimizeRackAwareStandbyTasks``
instead of the internal ``RackAwareTaskAssignor``'s: an active task's traffic counts its
changelog partitions too, balance_subtopology groups tasks by subtopology id alone, the
standby phase uses the configured strategy, a replica without rack is left out of a
partition's racks, and unset costs mean no optimization (no defaults).

Without complete rack information Kafka logs why and leaves the assignment as it is;
``missing_racks="keep"`` does the same (the reason is in the result), ``"raise"`` (the
default) refuses the input instead, naming what is missing.

Costs reported (``before``/``after``) use the issue's definition for every placement:
``traffic_cost * cross-rack partitions + non_overlap_cost * (task not on that client before, in
that role)``, with each phase's weights, summed over phases; ``None`` for a phase that was not
optimized for lack of rack information or weights.
"""

from __future__ import annotations

import logging
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
from lazyconv.assignment._errors import AssignmentInputError, MissingRacksError
from lazyconv.assignment._ids import (
    SubtopologyKey,
    TaskId,
    TopicPartition,
    process_sort_key,
    subtopology_key,
)
from lazyconv.assignment._racks import ACTIVE, SEMANTICS, STANDBY, RackGap, known_racks, rack_gaps
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
    "SEMANTICS",
    "MISSING_RACKS",
]

MISSING_RACKS = ("raise", "keep")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionRacks:
    """A topic partition and the rack of each of its replicas (``None``: a broker without
    rack; no replicas: no replica information)."""

    topic: str
    partition: int
    replica_racks: tuple[str | None, ...]


@dataclass(frozen=True)
class Client:
    """A Kafka Streams client (process): its id, rack (``None``: no ``client.rack``) and
    stream-thread count."""

    id: str
    rack: str | None
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
    """Cost of one optimization phase (``stateful_active``, ``stateless_active``, ``standby``).

    ``skipped`` says why Kafka would not optimize this phase (missing rack information, or with
    KIP-924's semantics unset weights); the costs are ``None`` then (``weights`` too when they
    are unset) and nothing moved.
    """

    phase: str
    weights: CostWeights | None
    before: int | None
    after: int | None
    moved: int
    skipped: str | None = None


@dataclass(frozen=True)
class AssignmentResult:
    """The new assignment (clients in Kafka's order, task ids sorted) and its costs.

    ``skipped`` is set when no phase was optimized: the reason Kafka would log (the assignment
    is then the input's). The costs are ``None`` when a phase was skipped.
    """

    assignment: dict[str, ClientTasks]
    cost_before: int | None
    cost_after: int | None
    phases: tuple[PhaseCost, ...] = field(default_factory=tuple)
    skipped: str | None = None


def validate_input(
    problem: AssignmentInput, *, semantics: str = "internal", missing_racks: str = "raise"
) -> None:
    """Check references and consistency; errors name the JSON path of the bad field.

    With ``missing_racks="raise"``, rack information the ``semantics``' optimizer would lack
    is an error too (see :mod:`lazyconv.assignment._racks`); with ``"keep"`` it is allowed.
    """
    if semantics not in SEMANTICS:
        raise AssignmentInputError("semantics", f"{semantics!r} is not one of {', '.join(SEMANTICS)}")
    if missing_racks not in MISSING_RACKS:
        raise AssignmentInputError(
            "missing_racks", f"{missing_racks!r} is not one of {', '.join(MISSING_RACKS)}"
        )
    if not problem.clients:
        raise AssignmentInputError("$.clients", "at least one client is needed")
    client_ids: set[str] = set()
    for i, client in enumerate(problem.clients):
        if client.id in client_ids:
            raise AssignmentInputError(f"$.clients[{i}].id", f"duplicate client id {client.id!r}")
        client_ids.add(client.id)
    task_by_id: dict[str, Task] = {}
    canonical: dict[TaskId, str] = {}
    racks: dict[tuple[str, int], tuple[frozenset[str | None], str]] = {}
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
    if missing_racks == "raise":
        gaps = rack_gaps(problem, semantics)
        if gaps:
            raise MissingRacksError(gaps[0].path, gaps[0].message)


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


def _reason(gaps: list[RackGap], scope: str) -> str | None:
    """Kafka's log line for a phase it skips: the first gap in ``scope`` (and how many)."""
    found = [g for g in gaps if scope in g.scope]
    if not found:
        return None
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"rack-aware assignment skipped: {found[0].path}: {found[0].message}{more}"


def assign(
    problem: AssignmentInput,
    strategy: str = "min_traffic",
    assignor: str = "high_availability",
    on_phase_done: Callable[[str], None] | None = None,
    *,
    semantics: str = "internal",
    missing_racks: str = "raise",
) -> AssignmentResult:
    """Rack-aware assignment of ``problem`` with ``strategy`` (min_traffic or balance_subtopology).

    ``assignor`` picks the default weights for unset costs: ``high_availability`` (traffic 10,
    non-overlap 1) or ``sticky`` (1, 10); KIP-924's semantics have no defaults. ``semantics``:
    ``internal`` (Kafka's ``RackAwareTaskAssignor``, what its own assignors run) or ``kip924``
    (the public ``TaskAssignmentUtils``). ``missing_racks``: ``raise`` (refuse an input without
    complete rack information) or ``keep`` (Kafka's behaviour: the affected phases leave the
    assignment as it is, and the result says why). ``on_phase_done`` is called with each name in
    :data:`PHASES` as that phase ends (for progress display).
    """
    done = on_phase_done or (lambda phase: None)
    validate_input(problem, semantics=semantics, missing_racks=missing_racks)
    if strategy not in ("min_traffic", "balance_subtopology"):
        raise AssignmentInputError("strategy", f"{strategy!r} is not min_traffic or balance_subtopology")
    if assignor not in CALLER_DEFAULTS:
        raise AssignmentInputError("assignor", f"{assignor!r} is not one of {sorted(CALLER_DEFAULTS)}")
    kip924 = semantics == "kip924"
    weights: CostWeights | None
    if kip924:
        weights = None
        if problem.traffic_cost is not None and problem.non_overlap_cost is not None:
            weights = CostWeights(problem.traffic_cost, problem.non_overlap_cost)
    else:
        weights = resolve_weights(problem.traffic_cost, problem.non_overlap_cost, CALLER_DEFAULTS[assignor])
    gaps = rack_gaps(problem, semantics)
    skip_active = _reason(gaps, ACTIVE)
    skip_standby = _reason(gaps, STANDBY)
    if weights is None:
        unset = ("rack-aware assignment skipped: KIP-924's optimizers need "
                 "rack.aware.assignment.traffic_cost and rack.aware.assignment.non_overlap_cost "
                 "configured ($.traffic_cost, $.non_overlap_cost)")
        skip_active, skip_standby = skip_active or unset, skip_standby or unset

    ids = {task.id: TaskId.parse(task.id) for task in problem.tasks}
    names = {task_id: name for name, task_id in ids.items()}
    racks_for_partition: dict[TopicPartition, set[str]] = {}
    inputs: dict[TaskId, set[TopicPartition]] = {}
    changelogs: dict[TaskId, set[TopicPartition]] = {}
    groups: dict[SubtopologyKey, set[TaskId]] = {}
    for task in problem.tasks:
        task_id = ids[task.id]
        for target, parts in ((inputs, task.partitions), (changelogs, task.changelog_partitions)):
            entry = target.setdefault(task_id, set())
            for part in parts:
                tp = TopicPartition(part.topic, part.partition)
                entry.add(tp)
                racks_for_partition.setdefault(tp, set()).update(known_racks(part))
        # KIP-924's graph constructors group tasks by subtopology id alone (named topologies merge)
        key = subtopology_key(task_id.subtopology, None) if kip924 else task_id.subtopology_key
        groups.setdefault(key, set()).add(task_id)
    racks_for_process = {c.id: c.rack for c in problem.clients if c.rack is not None}
    standby_model = CostModel(racks_for_process, inputs, changelogs, racks_for_partition)
    if kip924:  # an active task's traffic counts all its partitions, changelogs included
        everything = {t: inputs[t] | changelogs[t] for t in inputs}
        active_model = CostModel(racks_for_process, everything, changelogs, racks_for_partition)
    else:
        active_model = standby_model

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
    standby_before = None
    if skip_standby is None and weights is not None:
        standby_before = sum(
            standby_model.cost(tid, client_id, True, weights, True)
            for client_id, held in original_standby.items()
            for tid in held
        )
    phases: list[PhaseCost] = []
    for phase, phase_tasks, phase_weights in (
        ("stateful_active", stateful, weights),
        ("stateless_active", stateless, STATELESS_COSTS),
    ):
        if skip_active is not None or weights is None or phase_weights is None:
            shown = phase_weights if weights is not None else None
            phases.append(PhaseCost(phase, shown, None, None, 0, skip_active))
        else:
            before, _ = _placement_cost(clients, original_active, "active", phase_tasks, active_model, phase_weights)
            optimize_active_tasks(phase_tasks, clients, active_model, phase_weights, strategy, groups)
            after, moved = _placement_cost(clients, original_active, "active", phase_tasks, active_model, phase_weights)
            phases.append(PhaseCost(phase, phase_weights, before, after, moved))
        done(phase)

    # Put the standbys back; a standby now colliding with its own active swaps roles with it.
    previous_owner = {tid: cid for cid, held in original_active.items() for tid in held}
    for client in clients:
        for tid in sorted(standbys[client.process_id]):
            owner = by_id[previous_owner[tid]] if tid in client.active else client
            owner.assign_standby(tid)
    if problem.num_standby_replicas > 0:
        if skip_standby is not None or weights is None:
            phases.append(PhaseCost("standby", weights, None, None, 0, skip_standby))
        else:
            all_standby = {tid for held in original_standby.values() for tid in held}
            standby_groups: dict[SubtopologyKey, set[TaskId]] = {}
            for tid in all_standby:
                standby_groups.setdefault(subtopology_key(tid.subtopology, None), set()).add(tid)
            optimize_standby_tasks(
                clients, standby_model, weights,
                strategy=strategy if kip924 else "min_traffic", tasks_for_subtopology=standby_groups,
            )
            after, moved = _placement_cost(clients, original_standby, "standby", all_standby, standby_model, weights)
            phases.append(PhaseCost("standby", weights, standby_before, after, moved))
    done("standby")

    assignment = {
        c.process_id: ClientTasks(
            tuple(names[t] for t in sorted(c.active)), tuple(names[t] for t in sorted(c.standby))
        )
        for c in sorted(clients, key=lambda c: process_sort_key(c.process_id))
    }
    for reason in sorted({p.skipped for p in phases if p.skipped}):
        log.warning("%s", reason)  # Kafka logs it too, and keeps the assignment
    befores = [p.before for p in phases]
    afters = [p.after for p in phases]
    skipped = [p.skipped for p in phases]
    return AssignmentResult(
        assignment,
        None if None in befores else sum(b for b in befores if b is not None),
        None if None in afters else sum(a for a in afters if a is not None),
        tuple(phases),
        skipped[0] if skipped and all(skipped) else None,
    )
