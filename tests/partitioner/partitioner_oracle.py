"""Kafka's own partitioning code as an oracle: ``PartitionerOracle.java`` (beside this file),
compiled at run time against the kafka-clients jar of a Kafka distribution and driven through
stdin/stdout, one request line, one answer line (the protocol is in the Java file's header).

Also the Python side of the same requests: lazyconv's answer to each line, so that a test is
"make requests, ask both, compare line by line". Draws come from ``java.util.Random`` with a
known seed on both sides (:func:`java_random_source` is its Python twin).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyconv.partitioner import (
    UNKNOWN_PARTITION,
    BuiltInPartitioner,
    ProducerConfig,
    RecordAccumulator,
    StaticCluster,
    SwitchRule,
)
from lazyconv.partitioner._accumulator import AppendResult, Batch
from lazyconv.partitioner._murmur2 import murmur2, partition_for_key, to_positive
from lazyconv.partitioner._sizes import headers_size

SOURCE = Path(__file__).with_name("PartitionerOracle.java")
MAIN = "org.apache.kafka.clients.producer.internals.PartitionerOracle"
TOPIC = "t"


def _jar(dist: Path, prefix: str) -> Path:
    found = sorted(p for p in (dist / "libs").glob(f"{prefix}-*.jar")
                   if not p.name.endswith(("-sources.jar", "-javadoc.jar", "-test.jar")))
    if not found:
        raise FileNotFoundError(f"{dist}/libs has no {prefix}-*.jar")
    return found[-1]


def classpath(dist: Path, *prefixes: str) -> str:
    """The named jars of a distribution (``kafka-clients``, ``slf4j-api`` …) as a class path."""
    return ":".join(str(_jar(dist, p)) for p in prefixes)


def compile_java(source: Path, cp: str, build: Path) -> None:
    """``javac`` one driver into ``build`` (class files stay in the test's tmp folder)."""
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise RuntimeError("the Kafka oracle needs java and javac (a JDK 17) on PATH")
    build.mkdir(parents=True, exist_ok=True)
    subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", str(build), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)


def run_java(main: str, cp: str, build: Path, lines: Sequence[str], timeout: float = 600) -> list[str]:
    """Feed ``lines`` to the driver in one JVM and return its answers (as many, in order)."""
    done = subprocess.run(
        [shutil.which("java") or "java", "-Xss16m", "-cp", f"{build}:{cp}", main],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{main} exited with {done.returncode}:\n{done.stderr[-4000:]}")
    answers = done.stdout.splitlines()
    if len(answers) != len(lines):
        raise RuntimeError(f"{main} answered {len(answers)} of {len(lines)} requests:\n"
                           f"{done.stderr[-4000:]}")
    return answers


@dataclass
class Oracle:
    """A compiled PartitionerOracle."""

    cp: str
    build: Path

    @classmethod
    def compile(cls, dist: Path, build: Path) -> Oracle:
        cp = classpath(dist, "kafka-clients", "slf4j-api")
        compile_java(SOURCE, cp, build)
        return cls(cp, build)

    def ask(self, lines: Sequence[str]) -> list[str]:
        return run_java(MAIN, self.cp, self.build, lines)


# -- java.util.Random, for identical draws on both sides -------------------------------------

class JavaRandom:
    """``java.util.Random``'s 48-bit linear congruential generator, ``nextInt()`` only."""

    _MULT = 0x5DEECE66D
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ self._MULT) & self._MASK

    def next_int(self) -> int:
        self._seed = (self._seed * self._MULT + 0xB) & self._MASK
        value = self._seed >> 16
        return value - (1 << 32) if value & 0x80000000 else value


def java_random_source(seed: int):
    """Kafka's draw, ``Utils.toPositive(random.nextInt())``, from ``new Random(seed)``."""
    rng = JavaRandom(seed)
    return lambda: to_positive(rng.next_int())


# -- encoding --------------------------------------------------------------------------------

def csv(values: Iterable[object]) -> str:
    text = ",".join(str(v) for v in values)
    return text or "_"


def key_token(key: bytes | None) -> str:
    if key is None:
        return "~"
    return key.hex() or "-"


def cluster_of(leaders: Sequence[int | None]) -> StaticCluster:
    return StaticCluster.single_topic(TOPIC, list(leaders))


def stats_text(bp: BuiltInPartitioner | None) -> str:
    stats = bp.load_stats if bp is not None else None
    if stats is None:
        return "null"
    n = stats.length
    return f"{csv(stats.cumulative_frequency_table[:n])}|{csv(stats.partition_ids[:n])}|{n}"


# -- keyed partitioning, load stats, draws: lazyconv's answers --------------------------------

def murmur_answer(key: bytes, n: int) -> str:
    return f"{murmur2(key)} {partition_for_key(key, n)}"


def load_stats_answer(sizes: Sequence[int], ids: Sequence[int], length: int) -> str:
    bp = BuiltInPartitioner(TOPIC, 1)
    bp.update_partition_load_stats(list(sizes), list(ids), length)
    return stats_text(bp)


def draws_answer(all_count: int, available: Sequence[int], stats: tuple | None,
                 draws: Sequence[int]) -> str:
    leaders: list[int | None] = [0 if p in set(available) else None for p in range(all_count)]
    cluster = cluster_of(leaders)
    bp = BuiltInPartitioner(TOPIC, 1, iter(draws).__next__)
    if stats is None:
        bp.update_partition_load_stats(None, None, 0)
    else:
        bp.update_partition_load_stats(list(stats[0]), list(stats[1]), stats[2])
    return csv(bp.next_partition(cluster) for _ in draws)


# -- switching sequences ---------------------------------------------------------------------

@dataclass
class SwitchSequence:
    """A built-in partitioner fed a sequence of updates (``("U", bytes, enable)`` and
    ``("W", sizes, ids, length)``) under one switch rule."""

    sticky: int
    all_count: int
    available: tuple[int, ...]
    seed: int
    rule: SwitchRule
    steps: list[tuple]

    def requests(self) -> list[str]:
        lines = [f"S {self.sticky} {self.all_count} {csv(self.available)} {self.seed}"]
        for step in self.steps:
            if step[0] == "U":
                # Kafka has one rule; the immediate one is "switching always enabled"
                enable = 1 if self.rule is SwitchRule.IMMEDIATE else int(step[2])
                lines.append(f"U {step[1]} {enable}")
            else:
                lines.append(f"W {csv(step[1])} {csv(step[2])} {step[3]}")
        return lines

    def answers(self) -> list[str]:
        avail = set(self.available)
        cluster = cluster_of([0 if p in avail else None for p in range(self.all_count)])
        bp = BuiltInPartitioner(TOPIC, self.sticky, java_random_source(self.seed), self.rule)
        out = [str(bp.peek_current_partition_info(cluster).partition)]
        for step in self.steps:
            if step[0] == "U":
                bp.update_partition_info(bp.peek_current_partition_info(cluster), step[1], cluster,
                                         bool(step[2]))
                now = bp.peek_current_partition_info(cluster)
                out.append(f"{now.partition} {now.produced_bytes}")
            else:
                bp.update_partition_load_stats(list(step[1]), list(step[2]), step[3])
                out.append("ok")
        return out


# -- accumulator scenarios -------------------------------------------------------------------

@dataclass(frozen=True)
class AccumulatorSetup:
    batch_size: int
    linger_ms: int
    buffer_memory: int
    adaptive: bool
    availability_timeout_ms: int
    max_request_size: int
    seed: int
    leaders: tuple[int | None, ...]

    def request(self) -> str:
        leaders = ",".join("n" if x is None else str(x) for x in self.leaders)
        return (f"A {self.batch_size} {self.linger_ms} {self.buffer_memory} {int(self.adaptive)} "
                f"{self.availability_timeout_ms} {self.max_request_size} {self.seed} {leaders}")

    def config(self) -> ProducerConfig:
        return ProducerConfig(
            batch_size=self.batch_size, linger_ms=self.linger_ms, buffer_memory=self.buffer_memory,
            max_request_size=self.max_request_size,
            partitioner_adaptive_partitioning_enable=self.adaptive,
            partitioner_availability_timeout_ms=self.availability_timeout_ms,
            switch_rule=SwitchRule.DEFERRED,
        )


def append_answer(result: AppendResult) -> str:
    if result.blocked:
        return "blocked"
    return (f"{result.partition} {result.appended_bytes} {int(result.batch_is_full)} "
            f"{int(result.new_batch_created)}")


def drain_answer(batches: Sequence[Batch]) -> str:
    return csv(f"{b.partition}:{b.record_count}:{b.estimated_size}" for b in batches)


class ScenarioRunner:
    """lazyconv's accumulator fed the requests of one scenario (the ops after its ``A`` line)."""

    def __init__(self, setup: AccumulatorSetup) -> None:
        self.cluster = cluster_of(setup.leaders)
        self.acc = RecordAccumulator(self.cluster, setup.config(), java_random_source(setup.seed))
        self.drained: list[Batch] = []

    def answer(self, op: tuple) -> str:
        kind = op[0]
        acc = self.acc
        if kind == "P":
            _, partition, key, value_size, header_size, timestamp, now = op
            if partition < 0 and key is not None:
                partition = partition_for_key(key, len(self.cluster.partitions_for_topic(TOPIC)))
            elif partition < 0:
                partition = UNKNOWN_PARTITION
            headers = headers_size([("h", bytes(header_size))]) if header_size >= 0 else 1
            key_size = -1 if key is None else len(key)
            return append_answer(acc.append(TOPIC, partition, key_size, value_size, headers,
                                            timestamp, now))
        if kind == "R":
            _, now, waiters = op
            acc.memory_waiters = waiters
            nodes = acc.ready(now)
            return f"{csv(sorted(nodes))}|{stats_text(acc.partitioners.get(TOPIC))}"
        if kind == "T":
            _, node, now, can_drain = op
            acc.update_node_latency_stats(node, now, bool(can_drain))
            return "ok"
        if kind == "G":
            _, node, _now = op
            batches = acc.drain(node, self.cluster.partitions_led_by(node))
            self.drained.extend(batches)
            return drain_answer(batches)
        if kind == "F":
            acc.deallocate(self.drained[op[1]])
            return "ok"
        raise ValueError(f"unknown op {op!r}")


def op_request(op: tuple) -> str:
    kind = op[0]
    if kind == "P":
        _, partition, key, value_size, header_size, timestamp, now = op
        return f"P {partition} {key_token(key)} {value_size} {header_size} {timestamp} {now}"
    return " ".join(str(x) for x in op)


# -- a simulation recorded for replay ---------------------------------------------------------

class RecordingAccumulator(RecordAccumulator):
    """lazyconv's accumulator that writes down every call the simulator makes, as oracle
    requests, with lazyconv's own answers: a whole simulation becomes one scenario."""

    trace: list[tuple[str, str]]  # (request, lazyconv's answer)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace = []
        self._drained_index: dict[int, int] = {}
        self._drained: list[Batch] = []

    @staticmethod
    def _ms(value: float) -> int:
        if value != int(value):
            raise ValueError(f"time {value} ms is not whole: replay needs integer-timed configs")
        return int(value)

    def append(self, topic: str, partition: int, key_size: int, value_size: int,  # type: ignore[override]
               headers_bytes: int = 1, timestamp: int = 0, now: float = 0.0,
               abort_on_new_batch: bool = False, token: Any = None) -> AppendResult:
        if key_size >= 0 or headers_bytes != 1 or abort_on_new_batch:
            raise ValueError("the replay covers keyless, header-less appends without abort")
        result = super().append(topic, partition, key_size, value_size, headers_bytes, timestamp,
                                now, abort_on_new_batch, token)
        request = f"P {-1 if partition == UNKNOWN_PARTITION else partition} ~ {value_size} -1 " \
                  f"{timestamp} {self._ms(now)}"
        self.trace.append((request, append_answer(result)))
        return result

    def ready(self, now: float) -> set[int]:
        nodes = super().ready(now)
        if len(self.partitioners) > 1:
            raise ValueError("the replay covers one topic (the oracle calls it 't')")
        partitioner = next(iter(self.partitioners.values()), None)
        self.trace.append((f"R {self._ms(now)} {self.memory_waiters}",
                           f"{csv(sorted(nodes))}|{stats_text(partitioner)}"))
        return nodes

    def update_node_latency_stats(self, node: int, now: float, can_drain: bool) -> None:
        super().update_node_latency_stats(node, now, can_drain)
        self.trace.append((f"T {node} {self._ms(now)} {int(can_drain)}", "ok"))

    def drain(self, node: int, partitions: Iterable[tuple[str, int]]) -> list[Batch]:
        batches = super().drain(node, partitions)
        for batch in batches:  # kept alive so that no later batch reuses its id()
            self._drained_index[id(batch)] = len(self._drained)
            self._drained.append(batch)
        # the simulator drains at the time of its last ready pass
        now = next((r for r, _ in reversed(self.trace) if r.startswith("R ")), "R 0").split()[1]
        self.trace.append((f"G {node} {now}", drain_answer(batches)))
        return batches

    def deallocate(self, batch: Batch) -> None:
        super().deallocate(batch)
        self.trace.append((f"F {self._drained_index[id(batch)]}", "ok"))
