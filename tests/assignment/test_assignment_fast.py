"""The vectorized min_traffic engine returns exactly the generic engine's flows."""

from __future__ import annotations

import random

import pytest

from lazyconv.assignment._fast_min_traffic import MinTrafficSolver
from lazyconv.assignment._graph import Graph


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
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
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


def _balance_case(seed: int, fast: bool, max_tasks: int, max_clients: int):
    from lazyconv.assignment._constructors import BalanceSubtopologyGraphConstructor
    from lazyconv.assignment._ids import TaskId
    from lazyconv.assignment._state import ClientState

    rng = random.Random(seed)
    n_tasks, n_clients, n_groups = rng.randint(1, max_tasks), rng.randint(1, max_clients), rng.randint(1, 6)
    ids = sorted({TaskId(rng.randrange(n_groups), i) for i in range(n_tasks)})
    clients = [ClientState(f"c{j}", "r") for j in range(n_clients)]
    usable = clients[: max(1, n_clients - rng.randint(0, 2))]  # some clients keep 0 tasks
    for t in ids:
        rng.choice(usable).active.add(t)
    high = rng.choice([1, 3, 20])
    costs = {(t, c.process_id): rng.randint(0, high) for t in ids for c in clients}
    groups: dict[tuple, set] = {}
    for t in ids:
        groups.setdefault(t.subtopology_key, set()).add(t)
    groups[TaskId(99, 0).subtopology_key] = {TaskId(99, 0)}  # a group with no task in the set
    constructor = BalanceSubtopologyGraphConstructor(groups)
    return constructor.construct(
        clients, ids, ClientState.has_active, lambda t, c, cur: costs[(t, c.process_id)] + (0 if cur else 1), fast=fast
    )


def _flows(graph):
    return [(u, e.destination, e.flow, e.residual_flow) for u in graph.nodes() for e in graph.edges(u)]


@pytest.mark.parametrize("block", range(3))
@pytest.mark.slow  # over a second: kept out of the quick look
def test_balance_max_flow_and_min_cost_flow_identical(block):
    from lazyconv.assignment._constructors import write_balance_flows

    for seed in range(60 * block, 60 * block + 60):
        fast, generic = _balance_case(seed, True, 25, 5), _balance_case(seed, False, 25, 5)
        assert _flows(fast.graph) == _flows(generic.graph), ("max flow", seed)
        fast.graph._validate_for_min_cost_flow()
        fast.fast_solver.solve()
        write_balance_flows(fast)
        generic.graph.solve_min_cost_flow()
        assert _flows(fast.graph) == _flows(generic.graph), ("min-cost flow", seed)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_vectorized_passes_without_the_shortcut_match_too(monkeypatch):
    """The fallback (all |V| passes, used when the shortcut's last check fails) is exact too."""
    from lazyconv.assignment import _fast_balance as fast_balance
    from lazyconv.assignment._constructors import write_balance_flows

    monkeypatch.setattr(MinTrafficSolver, "_find_period", lambda self, *args: 0)
    monkeypatch.setattr(fast_balance.BalanceSolver, "_find_period", lambda self, *args: 0)
    for seed in range(40):
        tasks, clients, owners, costs = _case(seed, 12, 4)
        solver = MinTrafficSolver(costs, owners)
        solver.solve()
        assert (solver.owner.tolist(), solver.total_cost()) == _generic(tasks, clients, owners, costs), seed
        fast, generic = _balance_case(seed, True, 12, 4), _balance_case(seed, False, 12, 4)
        fast.graph._validate_for_min_cost_flow()
        fast.fast_solver.solve()
        write_balance_flows(fast)
        generic.graph.solve_min_cost_flow()
        assert _flows(fast.graph) == _flows(generic.graph), seed
