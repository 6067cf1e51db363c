"""Optimality against independent solvers, determinism, Java's orders of clients, tasks, nodes and edges."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from helpers import groups_of, pid
from scipy.optimize import linear_sum_assignment

from lazyconv.assignment._api import (
    AssignmentInput,
    Client,
    ClientTasks,
    PartitionRacks,
    Task,
    assign,
)
from lazyconv.assignment._assignor import optimize_active_tasks
from lazyconv.assignment._constructors import balance_capacity
from lazyconv.assignment._cost import CostModel, CostWeights
from lazyconv.assignment._ids import TaskId, TopicPartition, process_sort_key
from lazyconv.assignment._state import ClientState


def random_case(seed: int, max_tasks: int = 30, max_clients: int = 6):
    """Random racks, replica racks, weights and a current assignment (some clients empty)."""
    rng = random.Random(seed)
    racks = [f"r{i}" for i in range(rng.randint(2, 4))]
    n_tasks, n_clients = rng.randint(1, max_tasks), rng.randint(1, max_clients)
    ids = sorted({TaskId(rng.randrange(4), p) for p in range(n_tasks)})
    partitions = {t: [TopicPartition(f"in{t.subtopology}", t.partition + 100 * k) for k in range(rng.randint(1, 2))] for t in ids}
    replica_racks = {tp: set(rng.sample(racks, rng.randint(1, 2))) for parts in partitions.values() for tp in parts}
    clients = [ClientState(pid(n), rng.choice(racks)) for n in range(1, n_clients + 1)]
    usable = clients[: max(1, n_clients - rng.randint(0, 1))]
    for t in ids:
        rng.choice(usable).active.add(t)
    weights = CostWeights(rng.choice([0, 1, 10]), rng.choice([0, 1, 10]))
    model = CostModel({c.process_id: c.rack for c in clients}, {t: set(p) for t, p in partitions.items()}, {}, replica_racks)
    return ids, clients, model, weights


def cost_of(model, weights, t, c, original_owner):
    return model.cost(t, c.process_id, c.process_id == original_owner[t], weights, False)


def lsa_optimum(ids, clients, model, weights) -> int:
    """Same per-client counts: a task-to-slot assignment problem, solved by scipy."""
    owner = {t: c.process_id for c in clients for t in c.active}
    slots = [c for c in clients for _ in range(len(c.active))]
    matrix = [[cost_of(model, weights, t, c, owner) for c in slots] for t in ids]
    rows, cols = linear_sum_assignment(matrix)
    return int(sum(matrix[r][k] for r, k in zip(rows, cols, strict=True)))


def networkx_balance_optimum(ids, clients, model, weights) -> int:
    """Same counts and the same per-(subtopology, client) caps, solved by networkx."""
    owner = {t: c.process_id for c in clients for t in c.active}
    graph = nx.DiGraph()
    total = len(ids)
    groups = groups_of(ids)
    graph.add_node("s", demand=-total)
    graph.add_node("t", demand=total)
    for key, members in groups.items():
        for t in members:
            graph.add_edge("s", ("task", t), capacity=1, weight=0)
            for c in clients:
                graph.add_edge(("task", t), ("g", key, c.process_id), capacity=1, weight=cost_of(model, weights, t, c, owner))
        for c in clients:
            cap = balance_capacity(len(c.active), total, len(members))
            graph.add_edge(("g", key, c.process_id), ("c", c.process_id), capacity=cap, weight=0)
    for c in clients:
        graph.add_edge(("c", c.process_id), "t", capacity=len(c.active), weight=0)
    return nx.min_cost_flow_cost(graph)


@pytest.mark.parametrize("seed", range(60))
def test_min_traffic_total_cost_is_the_assignment_optimum(seed):
    ids, clients, model, weights = random_case(seed)
    expected = lsa_optimum(ids, clients, model, weights)
    counts = [len(c.active) for c in clients]
    cost = optimize_active_tasks(ids, clients, model, weights, "min_traffic", groups_of(ids))
    assert cost == expected
    assert [len(c.active) for c in clients] == counts
    assert sorted(t for c in clients for t in c.active) == ids


@pytest.mark.parametrize("seed", range(40))
def test_balance_subtopology_total_cost_is_the_capped_optimum(seed):
    ids, clients, model, weights = random_case(1000 + seed, max_tasks=20, max_clients=5)
    expected = networkx_balance_optimum(ids, clients, model, weights)
    counts = [len(c.active) for c in clients]
    cost = optimize_active_tasks(ids, clients, model, weights, "balance_subtopology", groups_of(ids))
    assert cost == expected
    assert [len(c.active) for c in clients] == counts
    total = len(ids)
    for _key, members in groups_of(ids).items():
        for c, count in zip(clients, counts, strict=True):
            assert len(c.active & members) <= balance_capacity(count, total, len(members))


def problem_from_case(seed: int) -> AssignmentInput:
    rng = random.Random(seed)
    racks = ["a", "b", "c"]
    ids = [f"{s}_{p}" for s in range(3) for p in range(rng.randint(2, 6))]
    tasks = []
    for k, task_id in enumerate(ids):
        s, p = map(int, task_id.split("_"))
        parts = (PartitionRacks(f"t{s}", p, tuple(rng.sample(racks, rng.randint(1, 2)))),)
        changelog = (PartitionRacks(f"store{s}-changelog", p, tuple(rng.sample(racks, rng.randint(1, 2)))),)
        stateful = k % 4 != 0
        tasks.append(Task(task_id, s, parts, changelog if stateful else (), stateful))
    clients = []
    for n in range(rng.randint(2, 5)):
        raw = f"{rng.getrandbits(128):032x}"
        clients.append(Client(f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}", racks[n % 3]))
    active: dict[str, list[str]] = {c.id: [] for c in clients}
    standby: dict[str, list[str]] = {c.id: [] for c in clients}
    for k, task in enumerate(tasks):
        owner = clients[k % len(clients)].id
        active[owner].append(task.id)
        if task.stateful:
            others = [c.id for c in clients if c.id != owner]
            standby[rng.choice(others)].append(task.id)
    current = {c.id: ClientTasks(tuple(active[c.id]), tuple(standby[c.id])) for c in clients}
    return AssignmentInput(tuple(clients), tuple(tasks), current, 1, None, None)


def shuffled(problem: AssignmentInput, seed: int) -> AssignmentInput:
    rng = random.Random(seed)
    clients, tasks = list(problem.clients), list(problem.tasks)
    rng.shuffle(clients)
    rng.shuffle(tasks)
    items = list(problem.current.items())
    rng.shuffle(items)
    current = {}
    for client_id, held in items:
        active, standby = list(held.active), list(held.standby)
        rng.shuffle(active)
        rng.shuffle(standby)
        current[client_id] = ClientTasks(tuple(active), tuple(standby))
    return AssignmentInput(tuple(clients), tuple(tasks), current, problem.num_standby_replicas)


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_result_does_not_depend_on_input_order(strategy, seed):
    problem = problem_from_case(seed)
    expected = assign(problem, strategy)
    for k in range(3):
        again = assign(shuffled(problem, 100 * seed + k), strategy)
        assert again.assignment == expected.assignment
        assert list(again.assignment) == list(expected.assignment)
        assert (again.cost_before, again.cost_after) == (expected.cost_before, expected.cost_after)


def test_java_uuid_order_differs_from_python():
    low = "00000000-0000-0000-0000-000000000001"
    high = "80000000-0000-0000-0000-000000000000"
    assert sorted([low, high], key=process_sort_key) == [high, low]  # Java: signed halves
    lsb_low = "00000000-0000-0000-0000-000000000002"
    lsb_high = "00000000-0000-0000-8000-000000000000"
    assert sorted([lsb_low, lsb_high], key=process_sort_key) == [lsb_high, lsb_low]
    assert sorted(["c2", "c10", low], key=process_sort_key) == [low, "c10", "c2"]


def test_client_order_decides_ties_like_java():
    """All placements cost the same; balance_subtopology's max flow fills the first client first."""
    low = "00000000-0000-0000-0000-000000000001"
    high = "80000000-0000-0000-0000-000000000000"
    part = lambda p: (PartitionRacks("t", p, ("x",)),)  # noqa: E731
    problem = AssignmentInput(
        (Client(low, "r1"), Client(high, "r2")),
        (Task("0_0", 0, part(0), (), False), Task("0_1", 0, part(1), (), False)),
        {low: ClientTasks(("0_0",)), high: ClientTasks(("0_1",))},
    )
    result = assign(problem, "balance_subtopology")
    assert list(result.assignment) == [high, low]
    assert result.assignment[high].active == ("0_0",)  # Python's UUID order would pick `low`
    assert result.cost_before == result.cost_after == 2
