"""The vectorized min_traffic engine returns exactly the generic engine's flows."""

from __future__ import annotations

import random

import pytest

from lazyconv.assignment.fast_min_traffic import MinTrafficSolver
from lazyconv.assignment.graph import Graph


def _case(seed: int, max_tasks: int, max_clients: int):
    rng = random.Random(seed)
    tasks, clients = rng.randint(1, max_tasks), rng.randint(1, max_clients)
    owners = [rng.randrange(clients) for _ in range(tasks)]
    high = rng.choice([1, 2, 5, 20])
    costs = [[rng.randint(0, high) for _ in range(clients)] for _ in range(tasks)]
    return tasks, clients, owners, costs


def _generic(tasks, clients, owners, costs):
    graph = Graph()
    for i in range(tasks):
        for j in range(clients):
            graph.add_edge(i, tasks + j, 1, costs[i][j], 1 if owners[i] == j else 0)
        graph.add_edge(-1, i, 1, 0, 1)
    for j in range(clients):
        graph.add_edge(tasks + j, tasks + clients, owners.count(j), 0, owners.count(j))
    graph.source, graph.sink = -1, tasks + clients
    graph.solve_min_cost_flow()
    placed = [next(e.destination - tasks for e in graph.edges(i) if e.flow > 0) for i in range(tasks)]
    return placed, graph.total_cost()


@pytest.mark.parametrize("block", range(4))
def test_small_graphs_identical(block):
    for seed in range(100 * block, 100 * block + 100):
        tasks, clients, owners, costs = _case(seed, 15, 5)
        solver = MinTrafficSolver(costs, owners)
        solver.solve()
        assert (solver.owner.tolist(), solver.total_cost()) == _generic(tasks, clients, owners, costs), seed


@pytest.mark.parametrize("seed", range(10))
def test_larger_graphs_identical(seed):
    tasks, clients, owners, costs = _case(10_000 + seed, 80, 10)
    solver = MinTrafficSolver(costs, owners)
    solver.solve()
    assert (solver.owner.tolist(), solver.total_cost()) == _generic(tasks, clients, owners, costs)
