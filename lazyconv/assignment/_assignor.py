"""Kafka's ``RackAwareTaskAssignor``: enable check, active and standby optimization.

The optimizer never changes how many tasks a client has; it only chooses *which* tasks, to
lower cross-rack traffic (weighted by ``traffic_cost``) while paying ``non_overlap_cost`` for
every task it moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set

from lazyconv.assignment._constructors import (
    BalanceSubtopologyGraphConstructor,
    MinTrafficGraphConstructor,
    TaskGraph,
    create_graph_constructor,
    write_balance_flows,
)
from lazyconv.assignment._cost import CostModel, CostWeights
from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._ids import SubtopologyKey, TaskId, TopicPartition
from lazyconv.assignment._state import ClientState, sorted_clients

__all__ = [
    "STRATEGIES",
    "STANDBY_OPTIMIZER_MAX_ITERATION",
    "MoveStandbyPredicate",
    "always_allow_standby_move",
    "client_tag_aware_predicate",
    "RackAwareTaskAssignor",
    "optimize_active_tasks",
    "optimize_standby_tasks",
    "active_tasks_cost",
    "standby_tasks_cost",
]

log = logging.getLogger(__name__)

STRATEGIES = ("none", "min_traffic", "balance_subtopology")
STANDBY_OPTIMIZER_MAX_ITERATION = 4

#: ``(source, destination, task, all clients by process id) -> may the standby move?``
MoveStandbyPredicate = Callable[[ClientState, ClientState, TaskId, Mapping[str, ClientState]], bool]

#: Describes topics: ``{topic: {partition: [rack of each replica, None if the broker has none]}}``.
DescribeTopics = Callable[[Collection[str]], Mapping[str, Mapping[int, Sequence[str | None]]]]


def always_allow_standby_move(
    source: ClientState, destination: ClientState, task: TaskId, clients: Mapping[str, ClientState]
) -> bool:
    """The default (and legacy) standby assignor's predicate: every move is allowed."""
    return True


def client_tag_aware_predicate(
    tags_for_process: Mapping[str, Set[tuple[str, str]]],
) -> MoveStandbyPredicate:
    """The client-tag-aware standby assignor's predicate (KIP-708 tags, or the rack as a tag).

    A standby may move when the tags of the task's other holders plus the destination's are at
    least as many distinct (key, value) pairs as with the source's.
    """

    def can_move(
        source: ClientState, destination: ClientState, task: TaskId, clients: Mapping[str, ClientState]
    ) -> bool:
        others: set[tuple[str, str]] = set()
        for client in clients.values():
            if client is source or client is destination or not client.has_assigned(task):
                continue
            others |= tags_for_process.get(client.process_id, set())
        with_destination = others | tags_for_process.get(destination.process_id, set())
        with_source = others | tags_for_process.get(source.process_id, set())
        return len(with_destination) >= len(with_source)

    return can_move


def solve_min_traffic(task_graph: TaskGraph) -> None:
    """Solve a min_traffic graph with the vectorized engine and write the flows to its edges.

    Gives exactly the flows of ``task_graph.graph.solve_min_cost_flow()`` (tests compare them),
    in a fraction of the time on large graphs.
    """
    from lazyconv.assignment._fast_min_traffic import MinTrafficSolver

    graph = task_graph.graph
    graph._validate_for_min_cost_flow()
    solver = MinTrafficSolver(task_graph.costs, task_graph.owner)
    solver.solve()
    t = len(task_graph.tasks)
    for i, owner in enumerate(solver.owner.tolist()):
        for edge in graph.edges(i):
            edge.flow = 1 if edge.destination - t == owner else 0
            edge.residual_flow = edge.capacity - edge.flow
    log.debug("min_traffic: %d cycles cancelled in %d passes", solver.cycles, solver.passes)


def _weights(traffic_cost: int, non_overlap_cost: int) -> CostWeights:
    return CostWeights(traffic_cost, non_overlap_cost)


def active_tasks_cost(
    tasks: Iterable[TaskId], clients: Sequence[ClientState], model: CostModel, weights: CostWeights
) -> int:
    """Cost of the current active placement (Kafka builds a min_traffic graph for it, which
    also rejects a task on several clients or on none)."""
    ordered = sorted(tasks)
    if not ordered:
        return 0
    clients = sorted_clients(clients)
    task_graph = MinTrafficGraphConstructor().construct(
        clients,
        ordered,
        ClientState.has_active,
        lambda t, c, current: model.cost(t, c.process_id, current, weights, False),
    )
    return task_graph.graph.total_cost()


def standby_tasks_cost(clients: Sequence[ClientState], model: CostModel, weights: CostWeights) -> int:
    """Cost of the current standby placement (every placement counts as current)."""
    total = 0
    for client in sorted_clients(clients):
        for task in sorted(client.standby):
            total += model.cost(task, client.process_id, True, weights, True)
    return total


def optimize_active_tasks(
    tasks: Iterable[TaskId],
    clients: Sequence[ClientState],
    model: CostModel,
    weights: CostWeights,
    strategy: str,
    tasks_for_subtopology: Mapping[SubtopologyKey, Set[TaskId]],
    engine: str = "fast",
) -> int:
    """Move active ``tasks`` between ``clients`` (in place) to minimize cost; returns the cost.

    The returned cost is the solved flow's: traffic of the new placement plus
    ``non_overlap_cost`` for every task that moved. Per-client counts of ``tasks`` are kept.
    ``engine="generic"`` solves with the edge-by-edge engine instead of the vectorized one
    (same result, for checking and benchmarks).
    """
    if engine not in ("fast", "generic"):
        raise AssignmentError(f"unknown engine {engine!r}: fast or generic")
    ordered = sorted(tasks)
    if not ordered:
        return 0
    clients = sorted_clients(clients)
    before = active_tasks_cost(ordered, clients, model, weights)
    constructor = create_graph_constructor(strategy, tasks_for_subtopology)
    task_graph = constructor.construct(
        clients,
        ordered,
        ClientState.has_active,
        lambda t, c, current: model.cost(t, c.process_id, current, weights, False),
        **({"fast": engine == "fast"} if strategy == "balance_subtopology" else {}),
    )
    if strategy == "min_traffic" and engine == "fast":
        solve_min_traffic(task_graph)
    elif task_graph.fast_solver is not None:
        task_graph.graph._validate_for_min_cost_flow()
        task_graph.fast_solver.solve()
        write_balance_flows(task_graph)
    else:
        task_graph.graph.solve_min_cost_flow()
    cost = task_graph.graph.total_cost()
    constructor.assign(task_graph, ClientState.assign_active, ClientState.unassign_active, ClientState.has_active)
    log.info("active task optimization (%s, %s): cost %d -> %d", strategy, weights, before, cost)
    return cost


def optimize_standby_tasks(
    clients: Sequence[ClientState],
    model: CostModel,
    weights: CostWeights,
    can_move: MoveStandbyPredicate = always_allow_standby_move,
    *,
    strategy: str = "min_traffic",
    tasks_for_subtopology: Mapping[SubtopologyKey, Set[TaskId]] | None = None,
) -> int:
    """Swap standbys between pairs of clients on different racks (at most 4 rounds).

    Returns the traffic cost of the final standby placement (every placement is current then,
    so no non-overlap term), as Kafka does. Kafka's internal assignor always builds min_traffic
    graphs here; KIP-924's ``optimizeRackAwareStandbyTasks`` builds the configured ``strategy``'s
    (balance_subtopology needs ``tasks_for_subtopology``, the standby tasks by subtopology).
    """
    clients = sorted_clients(clients)
    by_id = {c.process_id: c for c in clients}
    if not any(c.standby for c in clients):
        return 0
    before = standby_tasks_cost(clients, model, weights)
    constructor: MinTrafficGraphConstructor | BalanceSubtopologyGraphConstructor
    if strategy == "balance_subtopology":
        if tasks_for_subtopology is None:
            raise AssignmentError("balance_subtopology standby optimization needs tasks_for_subtopology")
        constructor = BalanceSubtopologyGraphConstructor(tasks_for_subtopology)
    elif strategy == "min_traffic":
        constructor = MinTrafficGraphConstructor()
    else:
        raise AssignmentError(f"unknown rack-aware assignment strategy {strategy!r}: min_traffic or balance_subtopology")

    def movable(source: ClientState, destination: ClientState) -> list[TaskId]:
        return sorted(
            task
            for task in source.standby
            if not destination.has_assigned(task) and can_move(source, destination, task, by_id)
        )

    moved = True
    rounds = 0
    while moved and rounds < STANDBY_OPTIMIZER_MAX_ITERATION:
        moved = False
        rounds += 1
        for i, first in enumerate(clients):
            for second in clients[i + 1 :]:
                if model.racks_for_process.get(first.process_id) == model.racks_for_process.get(
                    second.process_id
                ):
                    continue
                from_first = movable(first, second)
                from_second = movable(second, first)
                if not from_first or not from_second:
                    continue
                task_graph = constructor.construct(
                    [first, second],
                    sorted(from_first + from_second),
                    ClientState.has_standby,
                    lambda t, c, current: model.cost(t, c.process_id, current, weights, True),
                    has_replica=True,
                    **({"fast": False} if strategy == "balance_subtopology" else {}),
                )
                task_graph.graph.solve_min_cost_flow()
                moved |= constructor.assign(
                    task_graph,
                    ClientState.assign_standby,
                    ClientState.unassign_standby,
                    ClientState.has_standby,
                )
    after = standby_tasks_cost(clients, model, weights)
    log.info("standby task optimization (%d rounds, %s): cost %d -> %d", rounds, weights, before, after)
    return after


class RackAwareTaskAssignor:
    """Kafka's ``RackAwareTaskAssignor`` over plain data.

    ``consumer_racks`` maps each process id to the racks its consumers report (``None`` for a
    consumer without ``client.rack``). ``cluster_replica_racks`` is what cluster metadata says
    per partition: the rack of each replica (``None`` for a broker without rack), ``None`` or an
    empty list when metadata has no replica list (the topic is then described with
    ``describe_topics``); a partition missing from it is unknown to metadata.
    """

    def __init__(
        self,
        *,
        consumer_racks: Mapping[str, Sequence[str | None]],
        partitions_for_task: Mapping[TaskId, Set[TopicPartition]],
        changelog_partitions_for_task: Mapping[TaskId, Set[TopicPartition]],
        tasks_for_subtopology: Mapping[SubtopologyKey, Set[TaskId]],
        cluster_replica_racks: Mapping[TopicPartition, Sequence[str | None] | None],
        describe_topics: DescribeTopics | None = None,
        strategy: str = "min_traffic",
        num_standby_replicas: int = 0,
    ) -> None:
        if strategy not in STRATEGIES:
            raise AssignmentError(f"unknown rack-aware assignment strategy {strategy!r}: one of {STRATEGIES}")
        self.strategy = strategy
        self.num_standby_replicas = num_standby_replicas
        self.partitions_for_task = partitions_for_task
        self.changelog_partitions_for_task = changelog_partitions_for_task
        self.tasks_for_subtopology = tasks_for_subtopology
        self.cluster_replica_racks = cluster_replica_racks
        self.describe_topics = describe_topics
        self.racks_for_partition: dict[TopicPartition, set[str]] = {}
        self.racks_for_process: dict[str, str] = {}
        self.describe_calls = 0
        self._can_enable: bool | None = None
        self.valid_client_racks = self._validate_client_racks(consumer_racks)
        self.model = CostModel(
            self.racks_for_process,
            partitions_for_task,
            changelog_partitions_for_task,
            self.racks_for_partition,
        )

    def _validate_client_racks(self, consumer_racks: Mapping[str, Sequence[str | None]]) -> bool:
        for process_id, racks in consumer_racks.items():
            if not racks:
                log.warning("process %s has no consumers: rack-aware assignment disabled", process_id)
                return False
            rack = racks[0]
            if rack is None or any(r != rack for r in racks):
                log.warning("consumers of process %s report missing or different racks", process_id)
                return False
            self.racks_for_process[process_id] = rack
        return True

    def can_enable(self) -> bool:
        """Kafka's ``canEnableRackAwareAssignor`` (the answer is cached after the first call)."""
        if self.strategy == "none":
            return False
        if self._can_enable is not None:
            return self._can_enable
        enabled = self.valid_client_racks and self._validate_input_partition_racks()
        if enabled and self.num_standby_replicas > 0:
            topics = {tp.topic for parts in self.changelog_partitions_for_task.values() for tp in parts}
            enabled = self._describe_for_racks(topics)
        self._can_enable = enabled
        return enabled

    def _validate_input_partition_racks(self) -> bool:
        to_describe: set[str] = set()
        for task in sorted(self.partitions_for_task):
            for tp in sorted(self.partitions_for_task[task]):
                if tp not in self.cluster_replica_racks:
                    log.warning("topic partition %s is not in cluster metadata", tp)
                    return False
                replicas = self.cluster_replica_racks[tp]
                if not replicas:
                    to_describe.add(tp.topic)
                    continue
                if any(rack is None for rack in replicas):
                    log.warning("a replica of %s has no rack", tp)
                    return False
                self.racks_for_partition.setdefault(tp, set()).update(r for r in replicas if r is not None)
        return self._describe_for_racks(to_describe) if to_describe else True

    def _describe_for_racks(self, topics: Set[str]) -> bool:
        if not topics:
            return True
        if self.describe_topics is None:
            log.warning("no way to describe topics %s for rack information", sorted(topics))
            return False
        self.describe_calls += 1
        try:
            description = self.describe_topics(sorted(topics))
        except Exception as exc:  # an admin-call failure just disables rack awareness
            log.warning("describing topics %s failed: %s", sorted(topics), exc)
            return False
        if len(description) < len(topics):
            return False
        for topic, partitions in description.items():
            for partition, replicas in partitions.items():
                if not replicas or any(rack is None for rack in replicas):
                    return False
                self.racks_for_partition.setdefault(TopicPartition(topic, partition), set()).update(
                    r for r in replicas if r is not None
                )
        return True

    def optimize_active_tasks(
        self, tasks: Iterable[TaskId], clients: Sequence[ClientState], traffic_cost: int, non_overlap_cost: int
    ) -> int:
        """See :func:`optimize_active_tasks` (with this assignor's strategy and racks)."""
        strategy = "min_traffic" if self.strategy == "none" else self.strategy
        return optimize_active_tasks(
            tasks, clients, self.model, _weights(traffic_cost, non_overlap_cost), strategy, self.tasks_for_subtopology
        )

    def optimize_standby_tasks(
        self,
        clients: Sequence[ClientState],
        traffic_cost: int,
        non_overlap_cost: int,
        can_move: MoveStandbyPredicate = always_allow_standby_move,
    ) -> int:
        """See :func:`optimize_standby_tasks`."""
        return optimize_standby_tasks(clients, self.model, _weights(traffic_cost, non_overlap_cost), can_move)

    def active_tasks_cost(
        self, tasks: Iterable[TaskId], clients: Sequence[ClientState], traffic_cost: int, non_overlap_cost: int
    ) -> int:
        return active_tasks_cost(tasks, clients, self.model, _weights(traffic_cost, non_overlap_cost))

    def standby_tasks_cost(self, clients: Sequence[ClientState], traffic_cost: int, non_overlap_cost: int) -> int:
        return standby_tasks_cost(clients, self.model, _weights(traffic_cost, non_overlap_cost))
