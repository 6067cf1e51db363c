"""Kafka's RackAwareGraphConstructorTest scenarios and the capacities Java computes in doubles."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from helpers import groups_of, pid

from lazyconv.assignment._constructors import (
    SOURCE_ID,
    BalanceSubtopologyGraphConstructor,
    MinTrafficGraphConstructor,
    balance_capacity,
)
from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._ids import TaskId
from lazyconv.assignment._state import ClientState

TASKS = [TaskId(s, p) for s in range(40) for p in range(3)]


def _clients(seed: int = 0) -> list[ClientState]:
    """20 clients; each first gets 2 tasks, the other 80 go out with probability 1/3 per visit."""
    rng = random.Random(seed)
    clients = [ClientState(pid(n), f"rack{n % 3}") for n in range(1, 21)]
    remaining = TASKS[:]
    rng.shuffle(remaining)
    for c in clients:
        c.active.update(remaining[:2])
        del remaining[:2]
    while remaining:
        for c in clients:
            if remaining and rng.random() < 1 / 3:
                c.active.add(remaining.pop())
    return clients


def _unit_cost(task, client, current):
    return 1


def test_min_traffic_graph_structure():
    clients = _clients()
    tg = MinTrafficGraphConstructor().construct(clients, TASKS, ClientState.has_active, _unit_cost)
    graph = tg.graph
    assert graph.flow() == 120
    assert len(graph.nodes()) == 142
    for e in graph.edges(SOURCE_ID):
        assert (e.capacity, e.flow, e.residual_flow, e.cost) == (1, 1, 0, 0)
    for i in range(120):
        edges = graph.edges(i)
        assert len(edges) == 20 and all(e.capacity == 1 and e.cost == 1 for e in edges)
        assert sum(e.flow for e in edges) == 1
    for j, c in enumerate(clients):
        edge = graph.edge(120 + j, 140)
        assert edge.capacity == edge.flow == len(c.active)
    assert sum(graph.edge(120 + j, 140).flow for j in range(20)) == 120


def test_balance_graph_structure_after_max_flow():
    clients = _clients()
    counts = [len(c.active) for c in clients]
    constructor = BalanceSubtopologyGraphConstructor(groups_of(TASKS))
    tg = constructor.construct(clients, TASKS, ClientState.has_active, _unit_cost)
    graph = tg.graph
    assert graph.flow() == 120
    assert len(graph.nodes()) == 120 + 40 * 20 + 20 + 2
    for i in range(120):
        assert sum(e.flow for e in graph.edges(i)) == 1
    second_stage = 120 + 40 * 20
    for g in range(40):
        for j in range(20):
            assert graph.edge(120 + 20 * g + j, second_stage + j).capacity == math.ceil(counts[j] / 120 * 3)
    assert [graph.edge(second_stage + j, second_stage + 20).capacity for j in range(20)] == counts
    assert sum(counts) == 120


@pytest.mark.parametrize("name", ["min_traffic", "balance_subtopology"])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_solved_graph_gives_a_valid_assignment(name):
    clients = _clients(1)
    counts = [len(c.active) for c in clients]
    if name == "min_traffic":
        constructor = MinTrafficGraphConstructor()
    else:
        constructor = BalanceSubtopologyGraphConstructor(groups_of(TASKS))
    rng = random.Random(2)
    costs = {(t, c.process_id): rng.randint(0, 3) for t in TASKS for c in clients}
    tg = constructor.construct(clients, TASKS, ClientState.has_active, lambda t, c, cur: costs[(t, c.process_id)])
    tg.graph.solve_min_cost_flow()
    constructor.assign(tg, ClientState.assign_active, ClientState.unassign_active, ClientState.has_active)
    assert sorted(t for c in clients for t in c.active) == sorted(TASKS)
    assert [len(c.active) for c in clients] == counts
    if name == "balance_subtopology":
        for g in range(40):
            per_client = Counter(t.subtopology for c in clients for t in c.active if t.subtopology == g)
            held = [sum(1 for t in c.active if t.subtopology == g) for c in clients]
            assert per_client[g] == 3
            for j in range(len(clients)):
                assert held[j] <= math.ceil(counts[j] / 120 * 3)


def test_balance_rejects_task_outside_subtopologies():
    clients = _clients()
    constructor = BalanceSubtopologyGraphConstructor(groups_of(TASKS[:-1]))
    with pytest.raises(AssignmentError, match="task 39_2 is not in any subtopology"):
        constructor.construct(clients, TASKS, ClientState.has_active, _unit_cost)


@pytest.mark.parametrize(
    ("count", "total", "group", "java", "exact"),
    [(7, 25, 25, 8, 7), (14, 25, 25, 15, 14), (15, 29, 29, 16, 15), (21, 38, 38, 22, 21), (7, 41, 41, 8, 7)],
)
def test_balance_capacity_uses_java_doubles(count, total, group, java, exact):
    assert balance_capacity(count, total, group) == java
    assert math.ceil(Fraction(count, total) * group) == exact


def test_balance_capacity_kip_example_and_empty_client():
    assert [balance_capacity(c, 6, 3) for c in (1, 2, 3)] == [1, 1, 2]
    assert balance_capacity(0, 6, 3) == 0
