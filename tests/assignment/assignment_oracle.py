"""Kafka Streams' rack-aware optimizers as an oracle: ``AssignmentOracle.java`` (beside this
file), compiled at run time against the kafka-streams and kafka-clients jars of a Kafka
distribution and fed many instances through stdin in one JVM (the protocol is in the Java
file's header), plus the random instances and lazyconv's answer in the same text form.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lazyconv.assignment import (
    AssignmentError,
    AssignmentInput,
    Client,
    ClientTasks,
    PartitionRacks,
    Task,
    assign,
)
from lazyconv.assignment._ids import TaskId, process_sort_key

SOURCE = Path(__file__).with_name("AssignmentOracle.java")
MAIN = "org.apache.kafka.streams.processor.internals.assignment.AssignmentOracle"


def _jar(dist: Path, prefix: str) -> Path:
    found = sorted(p for p in (dist / "libs").glob(f"{prefix}-*.jar")
                   if not p.name.endswith(("-sources.jar", "-javadoc.jar", "-test.jar")))
    if not found:
        raise FileNotFoundError(f"{dist}/libs has no {prefix}-*.jar")
    return found[-1]


@dataclass
class Oracle:
    """A compiled AssignmentOracle."""

    cp: str
    build: Path

    @classmethod
    def compile(cls, dist: Path, build: Path) -> Oracle:
        javac = shutil.which("javac")
        if javac is None or shutil.which("java") is None:
            raise RuntimeError("the Kafka oracle needs java and javac (a JDK 17) on PATH")
        cp = ":".join(str(_jar(dist, p)) for p in ("kafka-streams", "kafka-clients", "slf4j-api"))
        build.mkdir(parents=True, exist_ok=True)
        subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", str(build), str(SOURCE)],
                       check=True, capture_output=True, text=True, timeout=300)
        return cls(cp, build)

    def ask(self, instances: Sequence[Instance]) -> list[str]:
        """Kafka's assignment of each instance (one JVM for all of them)."""
        lines: list[str] = []
        ends: list[int] = []
        for instance in instances:
            lines += instance.requests()
            ends.append(len(lines) - 1)
        done = subprocess.run(
            [shutil.which("java") or "java", "-cp", f"{self.build}:{self.cp}", MAIN],
            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=900,
        )
        if done.returncode != 0:
            raise RuntimeError(f"AssignmentOracle exited with {done.returncode}:\n{done.stderr[-4000:]}")
        answers = done.stdout.splitlines()
        if len(answers) != len(lines):
            raise RuntimeError(f"AssignmentOracle answered {len(answers)} of {len(lines)} lines:\n"
                               f"{done.stderr[-4000:]}")
        bad = [a for i, a in enumerate(answers) if i not in set(ends) and a != "ok"]
        if bad:
            raise RuntimeError(f"AssignmentOracle refused a request: {bad[0]}")
        return [answers[i] for i in ends]


@dataclass(frozen=True)
class Instance:
    """One problem, one strategy, one of the two semantics."""

    problem: AssignmentInput
    strategy: str
    semantics: str
    origin: str

    def requests(self) -> list[str]:
        p = self.problem
        cost = ["-" if c is None else str(c) for c in (p.traffic_cost, p.non_overlap_cost)]
        if self.semantics == "internal":  # the high-availability assignor's defaults, resolved here
            cost = [str(10 if p.traffic_cost is None else p.traffic_cost),
                    str(1 if p.non_overlap_cost is None else p.non_overlap_cost)]
        lines = [f"I {self.semantics} {self.strategy} {cost[0]} {cost[1]} {p.num_standby_replicas}"]
        lines += [f"C {c.id} {c.rack or '~'}" for c in p.clients]
        for t in p.tasks:
            lines.append(f"K {t.id} {int(t.stateful)} {_parts(t.partitions)} {_parts(t.changelog_partitions)}")
        for client_id, held in p.current.items():
            lines.append(f"A {client_id} {','.join(held.active) or '_'} {','.join(held.standby) or '_'}")
        lines.append("E")
        return lines

    def ours(self) -> str:
        """lazyconv's assignment, in the oracle's text form (Kafka's behaviour on missing racks)."""
        try:
            result = assign(self.problem, self.strategy, semantics=self.semantics, missing_racks="keep")
        except AssignmentError as exc:
            return f"error {type(exc).__name__}: {exc}"
        return as_text(result.assignment)


def as_text(assignment: Mapping[str, ClientTasks]) -> str:
    """An assignment as the oracle prints it: clients in ProcessId order, tasks in TaskId order."""

    def ids(names: Sequence[str]) -> str:
        return ",".join(str(t) for t in sorted(TaskId.parse(n) for n in names)) or "_"

    return ";".join(f"{c}={ids(assignment[c].active)}/{ids(assignment[c].standby)}"
                    for c in sorted(assignment, key=process_sort_key))


def _parts(parts: Sequence[PartitionRacks]) -> str:
    text = ";".join(f"{p.topic}:{p.partition}:{'/'.join('~' if r is None else r for r in p.replica_racks)}"
                    for p in parts)
    return text or "_"


# -- random instances --------------------------------------------------------------------------

def _client_id(rng: random.Random) -> str:
    # both halves' sign bits vary: Java compares ProcessIds as signed longs
    return str(uuid.UUID(int=rng.getrandbits(128)))


def random_problem(rng: random.Random, semantics: str, gaps: bool) -> AssignmentInput:
    """Clients on 2-4 racks, 1-4 subtopologies of 1-6 tasks (some stateless; sometimes all in
    named topologies, whose subtopology ids may collide), input partitions on 1-3 racks,
    changelogs for stateful tasks (sometimes the input partition itself), a random current
    assignment with 0-2 standbys per stateful task; with ``gaps``, one piece of rack
    information missing."""
    rack_pool = [f"r{i}" for i in range(rng.randint(2, 4))]
    clients = [Client(_client_id(rng), rng.choice(rack_pool)) for _ in range(rng.randint(2, 7))]

    def racks() -> tuple[str | None, ...]:
        chosen: list[str | None] = list(rng.sample(rack_pool, rng.randint(1, min(3, len(rack_pool)))))
        # a broker without rack among others: only the internal optimizer gives up on it
        if rng.random() < (0.1 if semantics == "kip924" else 0.01):
            chosen.insert(rng.randrange(len(chosen) + 1), None)
        return tuple(chosen)

    tasks: list[Task] = []
    # Kafka cannot order tasks of named topologies among unnamed ones: all or none are named
    named = rng.random() < 0.15
    for s in range(rng.randint(1, 4)):
        topology = rng.choice(["app", "web"]) if named else None
        stateful = rng.random() < 0.7
        prefix = f"{topology}_" if topology else ""
        for p in range(rng.randint(1, 6)):
            inputs = tuple(PartitionRacks(f"{prefix}in{s}{x}", p, racks()) for x in "ab"[: rng.randint(1, 2)])
            changelogs: tuple[PartitionRacks, ...] = ()
            if stateful:
                changelogs = (inputs[0],) if rng.random() < 0.1 else (PartitionRacks(f"{prefix}ch{s}", p, racks()),)
            tasks.append(Task(f"{prefix}{s}_{p}", s, inputs, changelogs, stateful))
    standbys = rng.choice([0, 0, 1, 2])
    active: dict[str, list[str]] = {c.id: [] for c in clients}
    standby: dict[str, list[str]] = {c.id: [] for c in clients}
    for t in tasks:
        owner = rng.choice(clients).id
        active[owner].append(t.id)
        if t.stateful and standbys:
            others = [c.id for c in clients if c.id != owner]
            for c in rng.sample(others, min(len(others), rng.randint(0, standbys))):
                standby[c].append(t.id)
    if semantics == "kip924":
        cost = (None, None) if rng.random() < 0.1 else rng.choice([(10, 1), (1, 10), (5, 5), (3, 0), (0, 2)])
    else:
        cost = rng.choice([(None, None), (10, 1), (1, 10), (None, 5), (3, None), (0, 1), (5, 0)])
    problem = AssignmentInput(
        tuple(clients), tuple(tasks),
        {c: ClientTasks(tuple(active[c]), tuple(standby[c])) for c in active},
        standbys, cost[0], cost[1],
    )
    return _with_gap(rng, problem) if gaps else problem


def _with_gap(rng: random.Random, problem: AssignmentInput) -> AssignmentInput:
    """``problem`` with one client's rack, or one partition's replica racks, missing."""
    kind = rng.choice(["client", "input", "changelog"])
    if kind == "client":
        i = rng.randrange(len(problem.clients))
        clients = list(problem.clients)
        clients[i] = replace(clients[i], rack=None)
        return replace(problem, clients=tuple(clients))
    candidates = [i for i, t in enumerate(problem.tasks) if kind == "input" or t.changelog_partitions]
    if not candidates:
        return problem
    i = rng.choice(candidates)
    task = problem.tasks[i]
    parts = task.partitions if kind == "input" else task.changelog_partitions
    missing = () if rng.random() < 0.5 else tuple(None for _ in parts[0].replica_racks)
    changed = (replace(parts[0], replica_racks=missing), *parts[1:])
    # the same topic partition elsewhere (a source changelog) loses its racks too
    tp = (parts[0].topic, parts[0].partition)

    def fix(ps: tuple[PartitionRacks, ...]) -> tuple[PartitionRacks, ...]:
        return tuple(replace(x, replica_racks=missing) if (x.topic, x.partition) == tp else x for x in ps)

    task = replace(task, partitions=fix(changed if kind == "input" else task.partitions),
                   changelog_partitions=fix(changed if kind == "changelog" else task.changelog_partitions))
    tasks = list(problem.tasks)
    tasks[i] = task
    return replace(problem, tasks=tuple(tasks))


def with_uuid_clients(problem: AssignmentInput) -> AssignmentInput:
    """A hand-written problem whose client ids are not UUIDs, with UUIDs in the same order."""
    order = sorted(c.id for c in problem.clients)
    ids = {cid: f"00000000-0000-0000-0000-{n + 1:012d}" for n, cid in enumerate(order)}
    return replace(
        problem,
        clients=tuple(replace(c, id=ids[c.id]) for c in problem.clients),
        current={ids[c]: held for c, held in problem.current.items()},
    )
