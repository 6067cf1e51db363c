"""Kafka's GraphTest scenarios for the min-cost-flow engine."""

from __future__ import annotations

import random
import re

import pytest

from lazyconv.assignment import ClientState, process_sort_key
from lazyconv.assignment._errors import GraphError
from lazyconv.assignment._graph import Graph, _ResidualArrays
from lazyconv.errors import ConfigurationError

FIXTURE_EDGES = [
    (0, 1, 1, 3, 1),
    (0, 3, 1, 1, 0),
    (2, 1, 1, 1, 0),
    (2, 3, 1, 2, 1),
    (-1, 0, 1, 0, 1),
    (-1, 2, 1, 0, 1),
    (1, 99, 1, 0, 1),
    (3, 99, 1, 0, 1),
]

RETURNED_OFF_CYCLE_EDGES = [
    (-1, 0, 1, 0, 1),
    (-1, 1, 1, 0, 1),
    (0, 2, 1, 1, 0),
    (0, 3, 1, 1, 0),
    (0, 4, 1, 10, 1),
    (1, 2, 1, 1, 0),
    (1, 3, 1, 10, 1),
    (1, 4, 1, 1, 0),
    (2, 99, 0, 0, 0),
    (3, 99, 1, 0, 1),
    (4, 99, 1, 0, 1),
]


def build(edges, source=-1, sink=99) -> Graph:
    graph = Graph()
    for edge in edges:
        graph.add_edge(*edge)
    graph.source, graph.sink = source, sink
    return graph


def flows(graph: Graph) -> dict[tuple[int, int], int]:
    return {(u, e.destination): e.flow for u in graph.nodes() for e in graph.edges(u)}


def bellman_ford_node(graph: Graph) -> int:
    arrays = _ResidualArrays(graph)
    found = arrays._bellman_ford()
    assert found is not None
    return arrays.nodes[found[0] - 1]


def test_fixture_structure_and_residual_graph():
    graph = build(FIXTURE_EDGES)
    assert graph.nodes() == [-1, 0, 1, 2, 3, 99]
    assert [e.destination for e in graph.edges(0)] == [1, 3]
    assert graph.total_cost() == 5
    residual = graph.residual_graph()
    assert residual.is_residual and residual.residual_graph() is residual
    for node in (0, 1, 2, 3):
        assert len(residual.edges(node)) == 3
    back0, back2, to_sink = residual.edges(1)
    assert (back0.destination, back0.cost, back0.residual_flow, back0.forward) == (0, -3, 1, False)
    assert (back2.destination, back2.cost, back2.residual_flow, back2.forward) == (2, -1, 0, False)
    assert (to_sink.destination, to_sink.forward) == (99, True)
    assert back0.counter_edge is residual.edge(0, 1)


def test_fixture_min_cost_flow_5_to_2():
    graph = build(FIXTURE_EDGES)
    assert bellman_ford_node(graph) == 3  # on the cycle 2->1->0->3->2
    graph.solve_min_cost_flow()
    assert graph.total_cost() == 2
    assert graph.edge(0, 3).flow == 1 and graph.edge(2, 1).flow == 1
    assert graph.edge(0, 1).flow == 0 and graph.edge(2, 3).flow == 0
    assert graph.edge(0, 1).residual_flow == 1 and graph.edge(0, 3).residual_flow == 0
    assert graph.flow() == 2


def test_returned_node_not_on_cycle_20_to_2():
    graph = build(RETURNED_OFF_CYCLE_EDGES)
    assert bellman_ford_node(graph) == -1  # Kafka returns the source; the cycle is 3->1->4->0->3
    graph.solve_min_cost_flow()
    assert graph.total_cost() == 2
    assert graph.edge(0, 3).flow == 1 and graph.edge(1, 4).flow == 1


@pytest.mark.parametrize("seed", range(10))
def test_deterministic_tie_break_through_node_2(seed):
    edges = [(0, 1, 1, 2, 1), (0, 2, 1, 1, 0), (0, 3, 1, 1, 0), (0, 4, 1, 1, 0)]
    edges += [(1, 5, 1, 1, 1), (2, 5, 1, 1, 0), (3, 5, 1, 1, 0), (4, 5, 1, 1, 0)]
    random.Random(seed).shuffle(edges)
    graph = build(edges, source=0, sink=5)
    assert graph.total_cost() == 3
    graph.solve_min_cost_flow()
    assert graph.total_cost() == 2
    assert graph.edge(0, 2).flow == 1 and graph.edge(2, 5).flow == 1
    assert graph.edge(0, 3).flow == 0 and graph.edge(0, 4).flow == 0 and graph.edge(0, 1).flow == 0


def test_single_edge_keeps_cost():
    graph = build([(0, 1, 1, 1, 1)], source=0, sink=1)
    graph.solve_min_cost_flow()
    assert graph.total_cost() == 1


def test_invalid_operations():
    graph = Graph()
    with pytest.raises(GraphError, match="capacity"):
        graph.add_edge(0, 1, -1, 0)
    with pytest.raises(GraphError, match="flow"):
        graph.add_edge(0, 1, 1, 0, 2)
    graph.add_edge(0, 1, 1, 1, 0)
    with pytest.raises(GraphError, match="already an edge from 0 to 1"):
        graph.add_edge(1, 0, 1, 1, 0)
    with pytest.raises(GraphError, match="residual"):
        build(FIXTURE_EDGES).residual_graph().solve_min_cost_flow()


def test_validation_failures():
    graph = build([(0, 1, 1, 0, 1), (1, 2, 1, 0, 1), (2, 0, 1, 0, 0)], source=0, sink=2)
    with pytest.raises(GraphError, match="sink node 2 must not have out-edges"):
        graph.solve_min_cost_flow()
    graph = build([(0, 1, 1, 0, 1), (1, 2, 1, 0, 1), (3, 0, 1, 0, 0)], source=0, sink=2)
    with pytest.raises(GraphError, match="source node 0 must not have in-edges"):
        graph.solve_min_cost_flow()
    graph = build([(0, 1, 2, 0, 2), (1, 2, 2, 0, 0)], source=0, sink=2)
    with pytest.raises(GraphError, match="node 1 has inflow 2 but outflow 0"):
        graph.solve_min_cost_flow()
    graph = build([(0, 1, 3, 0, 3), (1, 2, 3, 0, 3)], source=None, sink=2)
    with pytest.raises(GraphError, match="source output None differs from sink input 3"):
        graph.solve_min_cost_flow()
    # disconnected: node 3 receives flow and has no out-edges
    graph = build([(0, 1, 1, 0, 1), (1, 2, 1, 0, 1), (0, 3, 1, 0, 1)], source=0, sink=2)
    with pytest.raises(GraphError, match="node 3 has inflow 1 but outflow None"):
        graph.solve_min_cost_flow()


def test_max_flow_single_edge():
    graph = build([(0, 1, 100, 0, 0)], source=0, sink=1)
    assert graph.calculate_max_flow() == 100


def test_max_flow_bounded_at_sink_side():
    edges = []
    for mid in (1, 2, 3):
        edges += [(0, mid, 10, 0, 0), (mid, 4, 2, 0, 0)]
    graph = build(edges, source=0, sink=4)
    assert graph.calculate_max_flow() == 6
    assert [graph.edge(0, m).flow for m in (1, 2, 3)] == [2, 2, 2]


def test_max_flow_bounded_at_source_side():
    edges = []
    for mid, cap in ((1, 1), (2, 2), (3, 3)):
        edges += [(0, mid, cap, 0, 0), (mid, 4, 10, 0, 0)]
    graph = build(edges, source=0, sink=4)
    assert graph.calculate_max_flow() == 6
    assert [graph.edge(m, 4).flow for m in (1, 2, 3)] == [1, 2, 3]


def _random_min_traffic_graph(rng: random.Random) -> Graph:
    tasks, clients = rng.randint(1, 14), rng.randint(1, 5)
    owners = [rng.randrange(clients) for _ in range(tasks)]
    graph = Graph()
    for i in range(tasks):
        for j in range(clients):
            graph.add_edge(i, tasks + j, 1, rng.randint(0, 12), 1 if owners[i] == j else 0)
        graph.add_edge(-1, i, 1, 0, 1)
    for j in range(clients):
        graph.add_edge(tasks + j, tasks + clients, owners.count(j), 0, owners.count(j))
    graph.source, graph.sink = -1, tasks + clients
    return graph


@pytest.mark.parametrize("seed", range(150))
def test_period_shortcut_gives_the_flows_of_all_v_passes(seed):
    """Stopping Bellman-Ford once passes repeat changes no flow versus running all |V| passes."""
    results = []
    for detect in (True, False):
        graph = _random_min_traffic_graph(random.Random(seed))
        arrays = _ResidualArrays(graph, detect_period=detect)
        arrays.cancel_negative_cycles()
        arrays.write_back()
        results.append(flows(graph))
    assert results[0] == results[1]


def test_validation_ignores_nodes_without_inflow():
    """Only nodes with inflow are checked; a node with out-edges and no inflow passes."""
    graph = build([(0, 1, 1, 5, 1), (1, 2, 1, 0, 1), (3, 1, 1, 0, 0), (3, 2, 1, 0, 0)], source=0, sink=2)
    graph.solve_min_cost_flow()
    assert graph.total_cost() == 5 and graph.flow() == 1


# each: a public assignment call given a wrong type -> its typed error (was: a TypeError from
# '-', 'unhashable type' or 'not iterable', or re's 'expected string')
WRONG_ARGUMENTS = {
    "add_edge capacity None": (lambda: Graph().add_edge(0, 1, None, 1), GraphError,  # type: ignore[arg-type]
                               "an edge's nodes, capacity, cost and flow are ints"),
    "add_edge u [1]": (lambda: Graph().add_edge([1], 1, 1, 1), GraphError,  # type: ignore[arg-type]
                       "an edge's nodes, capacity, cost and flow are ints"),
    "add_edge flow '0'": (lambda: Graph().add_edge(0, 1, 1, 1, "0"), GraphError,  # type: ignore[arg-type]
                          "an edge's nodes, capacity, cost and flow are ints"),
    "ClientState active 5": (lambda: ClientState("p", "r", active=5), ConfigurationError,  # type: ignore[arg-type]
                             "client p: active and standby must be iterables of task ids"),
    "ClientState standby None": (lambda: ClientState("p", "r", standby=None), ConfigurationError,  # type: ignore[arg-type]
                                 "client p: active and standby must be iterables of task ids"),
    "process_sort_key None": (lambda: process_sort_key(None), ConfigurationError,  # type: ignore[arg-type]
                              "a process id is a str"),
    "process_sort_key b'p'": (lambda: process_sort_key(b"p"), ConfigurationError,  # type: ignore[arg-type]
                              "a process id is a str"),
}


@pytest.mark.parametrize("case", list(WRONG_ARGUMENTS))
def test_wrong_argument_types_are_typed_errors(case: str) -> None:
    call, error, says = WRONG_ARGUMENTS[case]
    with pytest.raises(error, match=re.escape(says)):
        call()
