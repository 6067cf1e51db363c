"""Integer-capacity min-cost flow with Kafka Streams' exact iteration order.

This is Kafka's ``Graph`` (``streams/.../processor/internals/assignment/Graph.java``): cycle
canceling with Bellman-Ford negative-cycle detection from a dummy node, and Edmonds-Karp max
flow. Which of several equal-cost optima comes out depends on iteration order, so the order is
Kafka's: nodes and each node's out-edges ascending, the dummy node first, Bellman-Ford runs
exactly ``|V|`` passes and returns the first node relaxed in the last pass.

Speed-ups that provably do not change a single relaxation (so results stay Kafka's):

* a node whose distance has not changed since it was last scanned cannot relax anything, so it
  is skipped; a pass that relaxes nothing ends the search (no negative cycle);
* Bellman-Ford passes become periodic: once the last ``p`` passes relaxed the same edges, in
  the same order, as the ``p`` before them, and the conditions of ``_find_period`` hold, every
  later pass repeats the pass ``p`` earlier (same relaxations, same order, same parents; each
  node's distance just moves by a fixed amount per period, and comparisons along the edges that
  matter do not see that). The last pass then behaves like the first later pass in the same
  phase of the period, so the search stops there instead of running all ``|V|`` passes.
  Without this, one negative-cycle search costs ``|V| * |E|`` steps.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

from lazyconv.assignment._errors import GraphError

__all__ = ["Edge", "Graph"]

log = logging.getLogger(__name__)


class Edge:
    """One edge: ``flow`` units of ``capacity`` used; ``residual_flow`` is what is left."""

    __slots__ = ("destination", "capacity", "cost", "residual_flow", "flow", "forward", "counter_edge")

    def __init__(
        self,
        destination: int,
        capacity: int,
        cost: int,
        residual_flow: int,
        flow: int,
        forward: bool = True,
    ) -> None:
        if capacity < 0:
            raise GraphError(f"edge capacity must be >= 0, got {capacity}")
        if flow < 0 or flow > capacity:
            raise GraphError(f"edge flow must be between 0 and capacity {capacity}, got {flow}")
        self.destination = destination
        self.capacity = capacity
        self.cost = cost
        self.residual_flow = residual_flow
        self.flow = flow
        self.forward = forward
        self.counter_edge: Edge | None = None

    def __repr__(self) -> str:
        return (
            f"Edge(destination={self.destination}, capacity={self.capacity}, cost={self.cost}, "
            f"residual_flow={self.residual_flow}, flow={self.flow}, forward={self.forward})"
        )


class Graph:
    """A flow network over integer nodes with a source and a sink.

    Build it with :meth:`add_edge` (an initial flow may be given per edge), set :attr:`source`
    and :attr:`sink`, then call :meth:`solve_min_cost_flow` (which needs a feasible flow already
    on the edges) or :meth:`calculate_max_flow`. Flows are written back to the edges.
    """

    def __init__(self, *, residual: bool = False) -> None:
        self._adjacency: dict[int, dict[int, Edge]] = {}
        self._nodes: set[int] = set()
        self.is_residual = residual
        self.source: int | None = None
        self.sink: int | None = None

    # -- building -------------------------------------------------------------------------

    def add_edge(self, u: int, v: int, capacity: int, cost: int, flow: int = 0) -> None:
        """Add the edge ``u -> v`` (replacing an earlier ``u -> v``); ``v -> u`` must not exist."""
        if u is None or v is None:
            raise GraphError("edge endpoints must not be None")
        if not all(isinstance(n, int) for n in (u, v, capacity, cost, flow)):
            raise GraphError(f"an edge's nodes, capacity, cost and flow are ints, got "
                             f"{u!r:.20}, {v!r:.20}, {capacity!r:.20}, {cost!r:.20}, {flow!r:.20}")
        self._add(u, Edge(v, capacity, cost, capacity - flow, flow))

    def _add(self, u: int, edge: Edge) -> None:
        if not self.is_residual:
            reverse = self._adjacency.get(edge.destination)
            if reverse is not None and u in reverse:
                raise GraphError(
                    f"there is already an edge from {edge.destination} to {u}: an edge from {u} "
                    f"to {edge.destination} would make a cycle between two nodes"
                )
        self._adjacency.setdefault(u, {})[edge.destination] = edge
        self._nodes.add(u)
        self._nodes.add(edge.destination)

    # -- reading --------------------------------------------------------------------------

    def nodes(self) -> list[int]:
        """All nodes, ascending."""
        return sorted(self._nodes)

    def edges(self, u: int) -> list[Edge]:
        """Out-edges of ``u`` in ascending destination order."""
        out = self._adjacency.get(u)
        if not out:
            return []
        return [out[v] for v in sorted(out)]

    def edge(self, u: int, v: int) -> Edge | None:
        """The edge ``u -> v`` or ``None``."""
        return self._adjacency.get(u, {}).get(v)

    def total_cost(self) -> int:
        """Sum of ``cost * flow`` over all edges."""
        return sum(e.cost * e.flow for out in self._adjacency.values() for e in out.values())

    def flow(self) -> int:
        """Flow out of the source."""
        if self.source is None:
            raise GraphError("the source node is not set")
        return sum(e.flow for e in self._adjacency.get(self.source, {}).values())

    # -- residual graph ---------------------------------------------------------------------

    def residual_graph(self) -> Graph:
        """The residual graph (a residual graph is its own residual graph)."""
        if self.is_residual:
            return self
        residual = Graph(residual=True)
        residual.source, residual.sink = self.source, self.sink
        for u, out in self._adjacency.items():
            for e in out.values():
                forward = Edge(e.destination, e.capacity, e.cost, e.residual_flow, e.flow)
                backward = Edge(u, e.capacity, -e.cost, e.flow, 0, forward=False)
                forward.counter_edge, backward.counter_edge = backward, forward
                residual._add(u, forward)
                residual._add(e.destination, backward)
        return residual

    # -- validation ---------------------------------------------------------------------------

    def _validate_for_min_cost_flow(self) -> None:
        if self.is_residual:
            raise GraphError("min-cost flow must be solved on the original graph, not a residual graph")
        inflow: dict[int, int] = {}
        outflow: dict[int, int] = {}
        for u, out in self._adjacency.items():
            if out and u == self.sink:
                raise GraphError(f"the sink node {u} must not have out-edges")
            for e in out.values():
                if e.destination == self.source:
                    raise GraphError(f"the source node {self.source} must not have in-edges (edge from {u})")
                outflow[u] = outflow.get(u, 0) + e.flow
                inflow[e.destination] = inflow.get(e.destination, 0) + e.flow
        for node in sorted(inflow):
            if node == self.source or node == self.sink:
                continue
            if outflow.get(node) != inflow[node]:
                raise GraphError(
                    f"node {node} has inflow {inflow[node]} but outflow {outflow.get(node)}: the "
                    "flow is not feasible"
                )
        source_out = outflow.get(self.source) if self.source is not None else None
        sink_in = inflow.get(self.sink) if self.sink is not None else None
        if source_out is None or source_out != sink_in:
            raise GraphError(f"source output {source_out} differs from sink input {sink_in}")

    # -- solving ----------------------------------------------------------------------------

    def solve_min_cost_flow(self) -> None:
        """Turn the feasible flow on the edges into a minimum-cost flow (cycle canceling)."""
        self._validate_for_min_cost_flow()
        solver = _ResidualArrays(self)
        cycles = solver.cancel_negative_cycles()
        solver.write_back()
        log.debug("min-cost flow: %d negative cycles cancelled", cycles)

    def calculate_max_flow(self) -> int:
        """Edmonds-Karp from the current flow; returns the flow out of the source."""
        if self.is_residual:
            raise GraphError("max flow must be computed on the original graph, not a residual graph")
        if self.source is None or self.sink is None:
            raise GraphError("source and sink must be set before computing a max flow")
        solver = _ResidualArrays(self)
        solver.edmonds_karp()
        solver.write_back()
        return self.flow()


# Longest period of the Bellman-Ford passes looked for (a longer one only costs speed).
_MAX_PERIOD = 64


class _ResidualArrays:
    """The residual graph as flat arrays (node index 0 is the dummy node of Bellman-Ford)."""

    def __init__(self, graph: Graph, detect_period: bool = True) -> None:
        self.detect_period = detect_period
        self.passes = 0
        nodes = graph.nodes()
        index = {node: i + 1 for i, node in enumerate(nodes)}
        self.graph = graph
        self.nodes = nodes
        self.index = index
        n = len(nodes) + 1
        dest: list[int] = []
        cost: list[int] = []
        residual: list[int] = []
        flow: list[int] = []
        forward: list[bool] = []
        counter: list[int] = []
        originals: list[Edge] = []
        out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for u, edges in graph._adjacency.items():
            ui = index[u]
            for e in edges.values():
                vi = index[e.destination]
                fid = len(dest)
                dest += (vi, ui)
                cost += (e.cost, -e.cost)
                residual += (e.residual_flow, e.flow)
                flow += (e.flow, 0)
                forward += (True, False)
                counter += (fid + 1, fid)
                originals.append(e)
                out[ui].append((vi, fid))
                out[vi].append((ui, fid + 1))
        self.dest, self.cost, self.residual, self.flow = dest, cost, residual, flow
        self.forward, self.counter, self.originals = forward, counter, originals
        self.out = [[eid for _, eid in sorted(adj)] for adj in out]
        self.size = n

    def write_back(self) -> None:
        for i, e in enumerate(self.originals):
            e.flow = self.flow[2 * i]
            e.residual_flow = self.residual[2 * i]

    def _push(self, eid: int, amount: int) -> None:
        self.residual[eid] -= amount
        if self.forward[eid]:
            self.flow[eid] += amount
        k = self.counter[eid]
        self.residual[k] += amount
        if self.forward[k] and self.flow[k] >= amount:
            self.flow[k] -= amount

    def _push_path(self, edges: Iterable[int]) -> None:
        path = list(edges)
        amount = min(self.residual[e] for e in path)
        for e in path:
            self._push(e, amount)

    def cancel_negative_cycles(self) -> int:
        cycles = 0
        while True:
            found = self._bellman_ford()
            if found is None:
                return cycles
            node, parent, parent_edge = found
            seen = set()
            while node not in seen:
                seen.add(node)
                node = parent[node]
                if node <= 0:  # cannot happen for a node relaxed in pass |V|; guard anyway
                    raise GraphError("internal error: Bellman-Ford parent chain left the cycle")
            start, cycle = node, []
            while True:
                cycle.append(parent_edge[node])
                node = parent[node]
                if node == start:
                    break
            self._push_path(cycle)
            cycles += 1

    def _bellman_ford(self) -> tuple[int, list[int], list[int]] | None:
        """Kafka's Bellman-Ford from the dummy node; returns (node, parent, parent_edge) or None."""
        n = self.size
        out, dest, cost, residual = self.out, self.dest, self.cost, self.residual
        # Pass 0 starts with the dummy node: every node gets distance 0 and parent "dummy".
        dist = [0] * n
        parent = [0] * n
        parent_edge = [-1] * n
        changed = [True] * n
        changed[0] = False
        last = n - 1  # passes 0 .. |V|-1, |V| counting the dummy node
        detect = self.detect_period
        # Per recent pass: distances at its end, edges it relaxed, and a hash of those edges.
        states: deque[list[int]] = deque(maxlen=_MAX_PERIOD + 1)
        relaxations: deque[list[int]] = deque(maxlen=_MAX_PERIOD + 1)
        signatures: deque[int] = deque(maxlen=_MAX_PERIOD + 1)
        pass_no = 0
        while pass_no <= last:
            self.passes += 1
            relaxed: list[int] = []
            for u in range(1, n):
                if not changed[u]:
                    continue
                changed[u] = False
                du = dist[u]
                for eid in out[u]:
                    if residual[eid] <= 0:
                        continue
                    v = dest[eid]
                    candidate = du + cost[eid]
                    if dist[v] > candidate:
                        dist[v] = candidate
                        parent[v] = u
                        parent_edge[v] = eid
                        changed[v] = True
                        relaxed.append(eid)
                        if pass_no == last:
                            return v, parent, parent_edge
            if not relaxed:
                return None
            if detect:
                states.append(dist[:])
                relaxations.append(relaxed)
                signatures.append(hash(tuple(relaxed)))
                period = self._find_period(states, relaxations, signatures)
                if period:
                    # Passes repeat with this period from here on: the real last pass behaves
                    # like the first later pass in the same phase.
                    equivalent_before_last = pass_no + (last - 1 - pass_no) % period
                    if equivalent_before_last < last - 1:
                        last = equivalent_before_last + 1
                    detect = False
                    states.clear()
                    relaxations.clear()
            pass_no += 1
        return None

    def _find_period(
        self, states: deque[list[int]], relaxations: deque[list[int]], signatures: deque[int]
    ) -> int:
        """A period p after which all later passes repeat pass-for-pass, or 0 if none is proven.

        With ``shift = dist(now) - dist(p passes ago)``, the passes repeat (each node's distance
        moving by its own shift every period) when (a) every relaxation of the last p passes
        joined two nodes with equal shift, and (b) no residual edge leads from a node with a
        smaller (more negative) shift to one with a larger shift: such an edge would relax
        eventually, while edges the other way can never relax again.
        """
        dest, counter, out, residual = self.dest, self.counter, self.out, self.residual
        k = len(states) - 1
        now = states[k]
        for period in range(1, k + 1):
            if signatures[k - period] != signatures[k]:
                continue
            then = states[k - period]
            shift = [a - b for a, b in zip(now, then, strict=True)]
            if not any(shift):
                continue
            same = all(
                shift[dest[counter[eid]]] == shift[dest[eid]]
                for r in range(k - period + 1, k + 1)
                for eid in relaxations[r]
            )
            if not same:
                continue
            closed = all(
                residual[eid] <= 0 or shift[u] >= shift[dest[eid]]
                for u in range(1, self.size)
                for eid in out[u]
            )
            if closed:
                return period
        return 0

    def edmonds_karp(self) -> None:
        source = self.index.get(self.graph.source) if self.graph.source is not None else None
        sink = self.index.get(self.graph.sink) if self.graph.sink is not None else None
        if source is None or sink is None:
            return
        out, dest, residual = self.out, self.dest, self.residual
        while True:
            parent_edge = [-1] * self.size
            visited = [False] * self.size
            visited[source] = True
            queue = deque([source])
            reached = False
            while queue and not reached:
                u = queue.popleft()
                for eid in out[u]:
                    v = dest[eid]
                    if visited[v] or residual[eid] <= 0:
                        continue
                    parent_edge[v] = eid
                    if v == sink:
                        reached = True
                        break
                    visited[v] = True
                    queue.append(v)
            if not reached:
                return
            path = []
            node = sink
            while node != source:
                eid = parent_edge[node]
                path.append(eid)
                node = dest[self.counter[eid]]
            self._push_path(reversed(path))
