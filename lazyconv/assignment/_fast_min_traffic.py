"""Kafka's cycle canceling on a min_traffic graph, vectorized with numpy, same results.

The generic engine (:mod:`~lazyconv.assignment._graph`) scans edge by edge in Python. A
min_traffic residual graph has a fixed shape, so one Bellman-Ford pass in Kafka's order
(dummy, source, tasks ascending, clients ascending, sink) reduces to three array steps:

1. every task t relaxes the source (edge cost 0) and every client c it is not on
   (``dist[t] + cost[t, c]``); task distances do not change during this phase, so each client ends
   with the minimum candidate and, as parent, the *first* task reaching it (``argmin``);
2. every client relaxes its own tasks (backward edges, ``dist[c] - cost[t, c]``); each task has
   exactly one such in-edge, from its current client;
3. the sink never relaxes anything (nothing enters it, its distance stays 0 >= every client's).

The source has no residual out-edge, so no cycle goes through it and every cycle alternates
tasks and clients, each edge with residual 1: cancelling it moves each task on it to the next
client. Passes are cut short exactly as in the generic engine once they provably repeat (see
``_find_period``); the node Bellman-Ford returns in its last pass is found the way the
sequential scan finds it. Tests compare every flow with the generic engine.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from lazyconv.assignment._cycle_canceling import BIG as _BIG
from lazyconv.assignment._cycle_canceling import MAX_PERIOD as _MAX_PERIOD
from lazyconv.assignment._cycle_canceling import CycleCancelingSolver
from lazyconv.assignment._cycle_canceling import PeriodMismatch as _PeriodMismatch
from lazyconv.assignment._errors import GraphError

__all__ = ["MinTrafficSolver"]

if TYPE_CHECKING:
    from lazyconv.assignment._cycle_canceling import BoolArray, IntArray

    #: A node: ("s", 0) the source, ("t", task) or ("c", client).
    _Node = tuple[str, int]
    #: What a search finds (the arguments of ``_cancel``): the node relaxed first in the last
    #: pass, then the parents of the source, of each task and of each client.
    _Found = tuple[_Node, int, IntArray, IntArray]
    #: One pass, for the period search: distances, signature, and what relaxed
    #: (source?, its parent, improved clients, their parent tasks, improved tasks).
    _Pass = tuple[IntArray, int, tuple[bool, int, BoolArray, IntArray, BoolArray]]



class MinTrafficSolver(CycleCancelingSolver):
    """Minimize ``sum(cost[t, owner[t]])`` keeping each client's task count, as Kafka would.

    ``costs`` is the T x C matrix of the min_traffic graph (task rows in node order, clients in
    node order), ``owner`` each task's current client index.
    """

    _period_shift: IntArray | None  # per-node distance change over the period found, if any

    def __init__(self, costs: list[list[int]], owner: list[int]) -> None:
        self.costs = np.asarray(costs, dtype=np.int64).reshape(len(owner), -1)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.tasks, self.clients = self.costs.shape
        self.rows = np.arange(self.tasks)
        # Kafka's |V| counts source, tasks, clients, sink and the dummy: passes 0 .. |V| - 1.
        self.last_pass = self.tasks + self.clients + 2
        self.cycles = 0
        self.passes = 0

    def total_cost(self) -> int:
        return int(self.costs[self.rows, self.owner].sum())

    # -- one negative-cycle search ------------------------------------------------------------

    def _bellman_ford(self, detect_period: bool) -> _Found | None:
        T, C = self.tasks, self.clients
        masked = self.costs.copy()
        masked[self.rows, self.owner] = _BIG  # the edge to the current client has no residual
        own_cost = self.costs[self.rows, self.owner]
        owner = self.owner
        x_source = np.int64(0)
        x_task = np.zeros(T, dtype=np.int64)
        x_client = np.zeros(C, dtype=np.int64)
        p_source = -1
        p_task = np.full(T, -1, dtype=np.int64)  # parent client (or -1 = dummy)
        p_client = np.full(C, -1, dtype=np.int64)  # parent task (or -1 = dummy)
        last = self.last_pass
        detect = detect_period
        self._period_shift = None
        history: deque[_Pass] = deque(maxlen=_MAX_PERIOD + 1)
        pass_no = 0
        while pass_no <= last:
            self.passes += 1
            if pass_no == last:
                return self._first_relaxation(masked, own_cost, x_source, x_task, x_client, p_source, p_task, p_client)
            # tasks: the source, then the clients they are not on
            relaxed_source = False
            if T and x_task.min() < x_source:
                p_source = int(x_task.argmin())
                x_source = x_task[p_source]
                relaxed_source = True
            candidates = x_task[:, None] + masked
            best = candidates.min(axis=0)
            best_task = candidates.argmin(axis=0)
            improved_client = best < x_client
            x_client = np.where(improved_client, best, x_client)
            p_client = np.where(improved_client, best_task, p_client)
            # clients: their own tasks
            via_owner = x_client[owner] - own_cost
            improved_task = via_owner < x_task
            x_task = np.where(improved_task, via_owner, x_task)
            p_task = np.where(improved_task, owner, p_task)
            if not (relaxed_source or improved_client.any() or improved_task.any()):
                return None
            if detect:
                state = np.concatenate(([x_source], x_task, x_client))
                signature = hash(
                    (
                        relaxed_source,
                        p_source if relaxed_source else -1,
                        improved_client.tobytes(),
                        best_task[improved_client].tobytes(),
                        improved_task.tobytes(),
                    )
                )
                relaxations = (relaxed_source, p_source, improved_client.copy(), best_task.copy(), improved_task.copy())
                history.append((state, signature, relaxations))
                period = self._find_period(history, masked)
                if period:
                    equivalent_before_last = pass_no + (last - 1 - pass_no) % period
                    if equivalent_before_last < last - 1:
                        # Run up to the equivalent pass; _first_relaxation then checks that the
                        # edge it relaxes joins two nodes that move together (so the real last
                        # pass relaxes it first too).
                        last = equivalent_before_last + 1
                    else:
                        self._period_shift = None
                    detect = False
                    history.clear()
            pass_no += 1
        return None

    def _find_period(self, history: deque[_Pass], masked: IntArray) -> int:
        """Same proof obligations as the generic engine's, on the vectorized passes."""
        k = len(history) - 1
        now, signature, _ = history[k]
        T = self.tasks
        for period in range(1, k + 1):
            then, other, _ = history[k - period]
            if other != signature:
                continue
            shift = now - then
            if not shift.any():
                continue
            s_source, s_task, s_client = shift[0], shift[1 : T + 1], shift[T + 1 :]
            same = True
            for r in range(k - period + 1, k + 1):
                relaxed_source, p_source, improved_client, best_task, improved_task = history[r][2]
                if relaxed_source and s_source != s_task[p_source]:
                    same = False
                elif (s_client[improved_client] != s_task[best_task[improved_client]]).any():
                    same = False
                elif (s_task[improved_task] != s_client[self.owner[improved_task]]).any():
                    same = False
                if not same:
                    break
            if not same:
                continue
            # no residual edge from a faster-falling node to a slower one
            if (s_task < s_source).any():
                continue
            if (s_client[self.owner] < s_task).any():
                continue
            off_owner = masked < _BIG
            if ((s_task[:, None] < s_client[None, :]) & off_owner).any():
                continue
            self._period_shift = shift
            return period
        return 0

    def _first_relaxation(
        self,
        masked: IntArray,
        own_cost: IntArray,
        x_source: np.int64,
        x_task: IntArray,
        x_client: IntArray,
        p_source: int,
        p_task: IntArray,
        p_client: IntArray,
    ) -> _Found | None:
        """The node Kafka's last pass relaxes first, with the parent arrays at that moment."""
        shift = self._period_shift
        T = self.tasks
        source_ok = x_task < x_source
        client_ok = (x_task[:, None] + masked) < x_client[None, :]
        rows = source_ok | client_ok.any(axis=1)
        if rows.any():
            t = int(rows.argmax())
            if source_ok[t]:
                node, edge_ends = ("s", 0), (1 + t, 0)
                p_source = t
            else:
                c = int(client_ok[t].argmax())
                node, edge_ends = ("c", c), (1 + t, 1 + T + c)
                p_client = p_client.copy()
                p_client[c] = t
        else:
            task_ok = (x_client[self.owner] - own_cost) < x_task
            if not task_ok.any():
                return None
            c = int(self.owner[task_ok].min())
            t = int(np.flatnonzero(task_ok & (self.owner == c))[0])
            node, edge_ends = ("t", t), (1 + T + c, 1 + t)
            p_task = p_task.copy()
            p_task[t] = c
        if shift is not None and shift[edge_ends[0]] != shift[edge_ends[1]]:
            raise _PeriodMismatch
        return node, p_source, p_task, p_client

    # -- cancelling -------------------------------------------------------------------------------

    def _cancel(self, node: _Node, p_source: int, p_task: IntArray, p_client: IntArray) -> None:
        def parent(n: _Node) -> _Node | None:
            kind, i = n
            if kind == "t":
                j = int(p_task[i])
                return None if j < 0 else ("c", j)
            j = int(p_client[i]) if kind == "c" else int(p_source)
            return None if j < 0 else ("t", j)

        seen = set()
        while node not in seen:
            seen.add(node)
            up = parent(node)
            if up is None:
                raise GraphError("internal error: Bellman-Ford parent chain left the cycle")
            node = up
        start, moves = node, []
        while True:
            up = parent(node)
            assert up is not None  # every node on the cycle had its parent in the walk above
            if node[0] == "c":  # edge task -> client: the task moves there
                moves.append((up[1], node[1]))
            node = up
            if node == start:
                break
        for task, client in moves:
            self.owner[task] = client
