"""Flow networks for a task set: ``min_traffic`` and ``balance_subtopology``.

Ports of Kafka's ``MinTrafficGraphConstructor`` and ``BalanceSubtopologyGraphConstructor``: the
node ids and the order edges are added in are Kafka's, because the min-cost-flow engine's
result among equal-cost optima depends on them.

min_traffic (T tasks, C clients): task i is node i, client j is node T + j, the sink T + C, the
source -1. Every task has an edge to every client (capacity 1, the task's cost there, flow 1 on
its current client); each client's edge to the sink has capacity = flow = its current count. The
current assignment is the initial flow.

balance_subtopology: tasks are numbered group by group (subtopologies in order, tasks in TaskId
order); client j has a first-stage node T + C*g + j per group g and a second-stage node
T + C*G + j; the sink is T + C*G + C. A first-stage node passes at most
``ceil(count_j * 1.0 / T * S_g)`` tasks of group g (IEEE doubles, as Java evaluates it), so each
client keeps about its share of every subtopology. The initial flow is a max flow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._graph import Edge, Graph
from lazyconv.assignment._ids import SubtopologyKey, TaskId
from lazyconv.assignment._state import ClientState

if TYPE_CHECKING:
    from lazyconv.assignment._fast_balance import BalanceSolver

__all__ = [
    "SOURCE_ID",
    "TaskGraph",
    "MinTrafficGraphConstructor",
    "BalanceSubtopologyGraphConstructor",
    "create_graph_constructor",
    "balance_capacity",
]

SOURCE_ID = -1

HasTask = Callable[[ClientState, TaskId], bool]
CostFunction = Callable[[TaskId, ClientState, bool], int]
Move = Callable[[ClientState, TaskId], None]


@dataclass
class TaskGraph:
    """A flow network for ``tasks`` over ``clients`` plus what is needed to read it back.

    ``costs[i][j]`` is the cost of the i-th task (node order) on client j; ``owner[i]`` the index
    of the client currently holding it; ``group_of[i]`` its group index (balance only).
    """

    graph: Graph
    tasks: list[TaskId]
    clients: list[ClientState]
    costs: list[list[int]]
    owner: list[int]
    original_count: list[int]
    group_of: list[int] = field(default_factory=list)
    group_count: int = 0
    fast_solver: BalanceSolver | None = None  # BalanceSolver holding the max flow, when used

    def client_index(self, task_index: int, destination: int) -> int:
        """The client j that ``task_index``'s edge to ``destination`` stands for."""
        t, c = len(self.tasks), len(self.clients)
        if self.group_of:
            return destination - t - c * self.group_of[task_index]
        return destination - t


def _owners_and_costs(
    clients: Sequence[ClientState],
    tasks: Sequence[TaskId],
    has_task: HasTask,
    cost_fn: CostFunction,
    has_replica: bool,
) -> tuple[list[int], list[list[int]]]:
    """Current owner index and cost row of each task, raising Kafka's errors in Kafka's order."""
    owners: list[int] = []
    costs: list[list[int]] = []
    for task in tasks:
        owner = -1
        row = []
        for j, client in enumerate(clients):
            current = has_task(client, task)
            row.append(cost_fn(task, client, current))
            if current:
                if owner >= 0 and not has_replica:
                    raise AssignmentError(
                        f"task {task} is assigned to multiple clients: {client.process_id}, "
                        f"{clients[owner].process_id}"
                    )
                owner = j
        if owner < 0:
            raise AssignmentError(f"task {task} is not assigned to any client")
        owners.append(owner)
        costs.append(row)
    return owners, costs


def _original_counts(
    clients: Sequence[ClientState], tasks: Sequence[TaskId], has_task: HasTask
) -> list[int]:
    return [sum(1 for task in tasks if has_task(client, task)) for client in clients]


def balance_capacity(original_count: int, total_tasks: int, group_tasks: int) -> int:
    """Kafka's per-(subtopology, client) cap, in doubles: ``ceil(count * 1.0 / T * S)``."""
    if original_count == 0:
        return 0
    return math.ceil(original_count * 1.0 / total_tasks * group_tasks)


class MinTrafficGraphConstructor:
    """Start from the current assignment; minimize cost keeping each client's task count."""

    name = "min_traffic"

    def construct(
        self,
        clients: Sequence[ClientState],
        tasks: Sequence[TaskId],
        has_task: HasTask,
        cost_fn: CostFunction,
        has_replica: bool = False,
    ) -> TaskGraph:
        t, c = len(tasks), len(clients)
        original_count = _original_counts(clients, tasks, has_task)
        owners, costs = _owners_and_costs(clients, tasks, has_task, cost_fn, has_replica)
        graph = Graph()
        for i, task in enumerate(tasks):
            for j, client in enumerate(clients):
                graph.add_edge(i, t + j, 1, costs[i][j], 1 if has_task(client, task) else 0)
            graph.add_edge(SOURCE_ID, i, 1, 0, 1)
        sink = t + c
        for j in range(c):
            graph.add_edge(t + j, sink, original_count[j], 0, original_count[j])
        graph.source, graph.sink = SOURCE_ID, sink
        return TaskGraph(graph, list(tasks), list(clients), costs, owners, original_count)

    def assign(self, task_graph: TaskGraph, assign: Move, unassign: Move, has_task: HasTask) -> bool:
        return _assign_from_flow(task_graph, assign, unassign, has_task)


class BalanceSubtopologyGraphConstructor:
    """Also cap, per subtopology, each client's share; start from a max flow."""

    name = "balance_subtopology"

    def __init__(self, tasks_for_subtopology: Mapping[SubtopologyKey, Set[TaskId]]) -> None:
        # Keys are subtopology sort keys (see ids.subtopology_key); groups go in that order.
        self.groups = [set(tasks_for_subtopology[key]) for key in sorted(tasks_for_subtopology)]

    def construct(
        self,
        clients: Sequence[ClientState],
        tasks: Sequence[TaskId],
        has_task: HasTask,
        cost_fn: CostFunction,
        has_replica: bool = False,
        fast: bool = True,
    ) -> TaskGraph:
        """Build the network and its initial max flow (``fast``: the vectorized replay of
        Kafka's Edmonds-Karp, same flow; otherwise the generic engine)."""
        t, c, g_count = len(tasks), len(clients), len(self.groups)
        task_set = set(tasks)
        grouped: set[TaskId] = set()
        for group in self.groups:
            grouped |= group & task_set
        missing = sorted(task_set - grouped)
        if missing:
            raise AssignmentError(f"task {missing[0]} is not in any subtopology")
        original_count = _original_counts(clients, tasks, has_task)
        ordered: list[TaskId] = []
        group_of: list[int] = []
        for g, group in enumerate(self.groups):
            for task in sorted(group & task_set):
                ordered.append(task)
                group_of.append(g)
        owners, costs = _owners_and_costs(clients, ordered, has_task, cost_fn, has_replica)
        graph = Graph()
        second_stage = t + c * g_count
        node = 0
        for g in range(g_count):
            valid = 0
            while node < t and group_of[node] == g:
                for j in range(c):
                    graph.add_edge(node, t + c * g + j, 1, costs[node][j], 0)
                graph.add_edge(SOURCE_ID, node, 1, 0, 0)
                node += 1
                valid += 1
            if valid > 0:
                for j in range(c):
                    capacity = balance_capacity(original_count[j], t, valid)
                    graph.add_edge(t + c * g + j, second_stage + j, capacity, 0, 0)
        sink = second_stage + c
        for j in range(c):
            graph.add_edge(second_stage + j, sink, original_count[j], 0, 0)
        graph.source, graph.sink = SOURCE_ID, sink
        task_graph = TaskGraph(graph, ordered, list(clients), costs, owners, original_count, group_of, g_count)
        if fast:
            from lazyconv.assignment._fast_balance import BalanceSolver

            sizes = {g: group_of.count(g) for g in set(group_of)}
            caps = {
                (g, j): balance_capacity(original_count[j], t, sizes[g]) for g in sizes for j in range(c)
            }
            solver = BalanceSolver(costs, group_of, caps, original_count)
            max_flow = solver.max_flow()
            task_graph.fast_solver = solver
            write_balance_flows(task_graph)
        else:
            max_flow = graph.calculate_max_flow()
        if max_flow != t:
            raise AssignmentError(f"max flow {max_flow} does not match the task count {t}")
        return task_graph

    def assign(self, task_graph: TaskGraph, assign: Move, unassign: Move, has_task: HasTask) -> bool:
        return _assign_from_flow(task_graph, assign, unassign, has_task)


def _existing_edge(graph: Graph, u: int, v: int) -> Edge:
    """The edge ``u -> v`` of a graph this module built (so it exists)."""
    edge = graph.edge(u, v)
    if edge is None:
        raise AssignmentError(f"the balance graph has no edge {u} -> {v}")
    return edge


def write_balance_flows(task_graph: TaskGraph) -> None:
    """Copy the fast solver's placement into the balance graph's edge flows."""
    solver = task_graph.fast_solver
    assert solver is not None, "write_balance_flows needs the fast solver's placement"
    graph, t, c, g_count = task_graph.graph, len(task_graph.tasks), len(task_graph.clients), task_graph.group_count
    owner = solver.owner.tolist()
    counts: dict[tuple[int, int], int] = {}
    for i, g in enumerate(task_graph.group_of):
        for edge in graph.edges(i):
            edge.flow = 1 if edge.destination == t + c * g + owner[i] else 0
            edge.residual_flow = edge.capacity - edge.flow
        source_edge = _existing_edge(graph, SOURCE_ID, i)
        source_edge.flow = 1 if owner[i] >= 0 else 0
        source_edge.residual_flow = source_edge.capacity - source_edge.flow
        if owner[i] >= 0:
            counts[(g, owner[i])] = counts.get((g, owner[i]), 0) + 1
    second_stage = t + c * g_count
    load = [0] * c
    for g in set(task_graph.group_of):
        for j in range(c):
            edge = _existing_edge(graph, t + c * g + j, second_stage + j)
            edge.flow = counts.get((g, j), 0)
            edge.residual_flow = edge.capacity - edge.flow
            load[j] += edge.flow
    for j in range(c):
        edge = _existing_edge(graph, second_stage + j, second_stage + c)
        edge.flow = load[j]
        edge.residual_flow = edge.capacity - edge.flow


def _assign_from_flow(task_graph: TaskGraph, assign: Move, unassign: Move, has_task: HasTask) -> bool:
    """Apply the solved flow: each task goes to the client of its first edge carrying flow."""
    graph, tasks, clients = task_graph.graph, task_graph.tasks, task_graph.clients
    assigned = 0
    moved = False
    for i, task in enumerate(tasks):
        for edge in graph.edges(i):
            if edge.flow > 0:
                assigned += 1
                new = clients[task_graph.client_index(i, edge.destination)]
                old = clients[task_graph.owner[i]]
                if new is not old:
                    unassign(old, task)
                    assign(new, task)
                    moved = True
                break
    _check_assignment(task_graph, assigned, has_task)
    return moved


def _check_assignment(task_graph: TaskGraph, assigned: int, has_task: HasTask) -> None:
    if assigned != len(task_graph.tasks):
        raise AssignmentError(
            f"computed assignment places {assigned} tasks, expected {len(task_graph.tasks)}"
        )
    counts = _original_counts(task_graph.clients, task_graph.tasks, has_task)
    if counts != task_graph.original_count:
        raise AssignmentError(
            f"computed assignment changed per-client task counts from {task_graph.original_count} "
            f"to {counts}"
        )


def create_graph_constructor(
    strategy: str, tasks_for_subtopology: Mapping[SubtopologyKey, Set[TaskId]]
) -> MinTrafficGraphConstructor | BalanceSubtopologyGraphConstructor:
    """The constructor for a strategy name (``min_traffic`` or ``balance_subtopology``)."""
    if strategy == "min_traffic":
        return MinTrafficGraphConstructor()
    if strategy == "balance_subtopology":
        return BalanceSubtopologyGraphConstructor(tasks_for_subtopology)
    raise AssignmentError(
        f"unknown rack-aware assignment strategy {strategy!r} (min_traffic or balance_subtopology)"
    )
