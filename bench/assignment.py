"""Run time of KIP-925 rack-aware active-task optimization as tasks x clients grow.

Usage::

    python bench/assignment.py                       # both strategies, up to 1000 tasks x 100 clients
    python bench/assignment.py --strategy min_traffic --budget 60

Instances: T tasks in T/20 subtopologies of 20 partitions, each partition with replicas on 2
of 3 racks (random, seeded), C clients spread round-robin over the 3 racks, the current
assignment a shuffled round-robin (balanced, T/C tasks per client), HighAvailability weights
(traffic 10, non-overlap 1). Timed: graph construction + Kafka's cycle canceling + applying
the result (``optimize_active_tasks``). For reference, the same run reports scipy's
``linear_sum_assignment`` on the equivalent task-to-slot matrix (optimal cost, but not Kafka's
choice among equal-cost optima, and no subtopology caps). Sizes whose previous size took longer
than ``--budget`` seconds are skipped.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lazyconv.assignment._fast_min_traffic  # noqa: E402,F401  (import numpy before timing)
from lazyconv.assignment._assignor import active_tasks_cost, optimize_active_tasks  # noqa: E402
from lazyconv.assignment._cost import CostModel, CostWeights  # noqa: E402
from lazyconv.assignment._ids import TaskId, TopicPartition  # noqa: E402
from lazyconv.assignment._state import ClientState  # noqa: E402

SIZES = [(50, 5), (100, 10), (200, 20), (300, 30), (500, 50), (700, 70), (1000, 100)]
WEIGHTS = CostWeights(10, 1)


def instance(tasks: int, clients: int, seed: int = 1):
    rng = random.Random(seed)
    racks = ["az1", "az2", "az3"]
    ids = [TaskId(i // 20, i % 20) for i in range(tasks)]
    partitions = {t: {TopicPartition(f"input{t.subtopology}", t.partition)} for t in ids}
    replica_racks = {tp: set(rng.sample(racks, 2)) for parts in partitions.values() for tp in parts}
    states = [ClientState(f"{n:08x}-0000-4000-8000-000000000000", racks[n % 3]) for n in range(clients)]
    order = ids[:]
    rng.shuffle(order)
    for k, t in enumerate(order):
        states[k % clients].active.add(t)
    groups: dict[tuple, set[TaskId]] = {}
    for t in ids:
        groups.setdefault(t.subtopology_key, set()).add(t)
    model = CostModel({c.process_id: c.rack for c in states}, partitions, {}, replica_racks)
    return ids, states, model, groups


def lsa_seconds(ids, states, model) -> float:
    from scipy.optimize import linear_sum_assignment

    start = time.perf_counter()
    owner = {t: c.process_id for c in states for t in c.active}
    slots = [c for c in states for _ in range(len(c.active))]
    matrix = [[model.cost(t, c.process_id, owner[t] == c.process_id, WEIGHTS, False) for c in slots] for t in ids]
    linear_sum_assignment(matrix)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", choices=("min_traffic", "balance_subtopology", "both"), default="both")
    parser.add_argument("--budget", type=float, default=60.0, help="skip larger sizes once one run exceeds this (s)")
    parser.add_argument("--max-tasks", type=int, default=1000, help="largest task count to try")
    parser.add_argument(
        "--engine",
        choices=("fast", "generic"),
        default="fast",
        help="fast: vectorized engines; generic: the edge-by-edge port of Kafka's Graph (same results)",
    )
    args = parser.parse_args(argv)
    strategies = ["min_traffic", "balance_subtopology"] if args.strategy == "both" else [args.strategy]
    print(f"engine: {args.engine}")
    print("| strategy | tasks | clients | seconds | cost before | cost after | moved | scipy LSA s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for strategy in strategies:
        for tasks, clients in SIZES:
            if tasks > args.max_tasks:
                break
            ids, states, model, groups = instance(tasks, clients)
            before_owner = {t: c.process_id for c in states for t in c.active}
            before = active_tasks_cost(ids, states, model, WEIGHTS)
            start = time.perf_counter()
            after = optimize_active_tasks(ids, states, model, WEIGHTS, strategy, groups, engine=args.engine)
            seconds = time.perf_counter() - start
            moved = sum(1 for c in states for t in c.active if before_owner[t] != c.process_id)
            ids, states, model, _ = instance(tasks, clients)
            reference = lsa_seconds(ids, states, model)
            print(f"| {strategy} | {tasks} | {clients} | {seconds:.2f} | {before} | {after} | {moved} | {reference:.2f} |", flush=True)
            if seconds > args.budget:
                print(f"| {strategy} | larger sizes skipped: last run exceeded {args.budget:.0f} s | | | | | | |")
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
