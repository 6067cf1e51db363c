"""KIP-794 against Kafka's own code: lazyconv's partitioner and accumulator answer the same
requests as Kafka 4.0's ``BuiltInPartitioner`` and ``RecordAccumulator`` (``PartitionerOracle.java``
over the kafka-clients jar of ``LAZYCONV_KAFKA_DIST``), line by line.

Compared (counts per run; the cases are random but seeded, so a failure reproduces):

* murmur2 and the key's partition: 2,000 keys;
* the adaptive frequency table (``updatePartitionLoadStats``) from queue sizes, with partitions
  excluded: 2,000 tables;
* weighted and uniform draws (``nextPartition``): 300 tables x 40 draws;
* switching sequences (``updatePartitionInfo`` and load-stats updates, both switch rules; the
  immediate one is Kafka's with switching always enabled): 600 sequences;
* accumulator scenarios (append with explicit, keyed and built-in partitions, headers, null
  values, full batches, buffer exhaustion; the ready pass with its load stats and availability
  exclusion; node latency stats; drains cut by ``max.request.size``; deallocation): 400;
* whole simulations (``lazyconv simulate``'s calls on the accumulator, replayed through
  Kafka's): 12.

The one decided difference, load-stats sums past 2**31 (Kafka's ``int`` table wraps), is
compared too and must differ exactly there (docs/differences.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from partitioner_oracle import (
    AccumulatorSetup,
    Oracle,
    RecordingAccumulator,
    ScenarioRunner,
    SwitchSequence,
    csv,
    draws_answer,
    java_random_source,
    load_stats_answer,
    murmur_answer,
    op_request,
)

from lazyconv.partitioner import SwitchRule

pytestmark = pytest.mark.kafka

INT_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def oracle(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    return Oracle.compile(kafka_dist, tmp_path_factory.mktemp("partitioner-oracle"))


def compare(requests: Sequence[str], ours: Sequence[str], theirs: Sequence[str],
            what: Callable[[int], str]) -> list[str]:
    """The lines where lazyconv and Kafka answer differently, described."""
    return [f"{what(i)}: request {requests[i]!r}: lazyconv {ours[i]!r}, Kafka {theirs[i]!r}"
            for i in range(len(requests)) if ours[i] != theirs[i]]


# -- keys ------------------------------------------------------------------------------------

def test_murmur2_and_key_partition_equal_kafkas(oracle: Oracle) -> None:
    rng = random.Random(794)
    keys = [b"", b"\x00", b"\xff\xff\xff\xff", b"key1", b"foobar", "é".encode()]
    keys += [rng.randbytes(rng.choice([1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 64, 255]))
             for _ in range(2000 - len(keys))]
    cases = [(k, rng.choice([1, 2, 3, 7, 10, 100, 1000, INT_MAX])) for k in keys]
    requests = [f"M {k.hex() or '-'} {n}" for k, n in cases]
    ours = [murmur_answer(k, n) for k, n in cases]
    assert len(cases) >= 2000
    assert not compare(requests, ours, oracle.ask(requests), lambda i: f"key {i}")


# -- the frequency table and the draws --------------------------------------------------------

def random_stats(rng: random.Random) -> tuple[list[int], list[int], int]:
    n = rng.choice([1, 2, 2, 3, 3, 4, 5, 8, 12])
    shape = rng.random()
    if shape < 0.2:
        sizes = [rng.randint(0, 5)] * n  # all equal: uniform unless something is excluded
    elif shape < 0.3:
        sizes = [rng.randint(0, 10**6) for _ in range(n)]
    else:
        sizes = [rng.randint(0, 12) for _ in range(n)]
    ids = sorted(rng.sample(range(n + 3), n))
    length = n if rng.random() < 0.6 else rng.randint(0, n)  # the rest excluded
    return sizes, ids, length


def test_load_stats_equal_kafkas(oracle: Oracle) -> None:
    rng = random.Random(7941)
    cases = [random_stats(rng) for _ in range(2000)]
    requests = [f"L {csv(s)} {csv(i)} {n}" for s, i, n in cases]
    ours = [load_stats_answer(s, i, n) for s, i, n in cases]
    assert sum(a != "null" for a in ours) > 1000  # most cases build a table
    assert not compare(requests, ours, oracle.ask(requests), lambda i: f"table {i}")


def test_draws_equal_kafkas(oracle: Oracle) -> None:
    rng = random.Random(7942)
    requests, ours = [], []
    for _ in range(300):
        all_count = rng.randint(1, 10)
        available = sorted(rng.sample(range(all_count), rng.randint(0, all_count)))
        stats = None if rng.random() < 0.3 else random_stats(rng)
        if stats is not None and load_stats_answer(*stats) == "null":
            stats = None
        draws = [rng.randint(0, INT_MAX) for _ in range(36)] + [0, 1, 2, INT_MAX]
        if stats is not None:  # the edges of the weighted draw: total - 1, total, 2 * total
            total = int(load_stats_answer(*stats).split("|")[0].split(",")[-1])
            draws[:3] = [min(d, INT_MAX) for d in (total - 1, total, 2 * total)]
        table = "none _ 0" if stats is None else f"{csv(stats[0])} {csv(stats[1])} {stats[2]}"
        requests.append(f"D {all_count} {csv(available)} {table} {csv(draws)}")
        ours.append(draws_answer(all_count, available, stats, draws))
    assert sum(len(r.split()[-1].split(",")) for r in requests) >= 12000
    assert not compare(requests, ours, oracle.ask(requests), lambda i: f"draw set {i}")


def test_load_stats_past_java_int_differ_as_decided(oracle: Oracle) -> None:
    """The overflow decision: Kafka's running sums wrap, lazyconv's stay exact."""
    cases = [([0, 0, 0, 1_500_000_000], [0, 1, 2, 3], 4), ([0, 0, INT_MAX - 1], [0, 1, 2], 3)]
    requests = [f"L {csv(s)} {csv(i)} {n}" for s, i, n in cases]
    theirs = oracle.ask(requests)
    for (sizes, ids, length), answer in zip(cases, theirs, strict=True):
        kafka_table = [int(x) for x in answer.split("|")[0].split(",")]
        ours = [int(x) for x in load_stats_answer(sizes, ids, length).split("|")[0].split(",")]
        exact, total = [], 0
        for size in sizes[:length]:
            total += max(sizes[:length]) + 1 - size
            exact.append(total)
        assert ours == exact and ours[-1] > INT_MAX
        assert kafka_table != exact and min(kafka_table) < 0  # wrapped to negative


# -- switching ---------------------------------------------------------------------------------

def random_sequence(rng: random.Random, index: int) -> SwitchSequence:
    sticky = rng.choice([1, 2, 10, 100, 1000, 16384])
    all_count = rng.randint(1, 8)
    available = tuple(sorted(rng.sample(range(all_count), rng.randint(0, all_count))))
    if not available and rng.random() < 0.8:
        available = (0,)
    steps: list[tuple] = []
    for _ in range(rng.randint(20, 120)):
        if rng.random() < 0.1:
            sizes, ids, length = random_stats(rng)
            steps.append(("W", sizes, ids, length))
        else:
            appended = rng.choice([0, rng.randint(1, max(1, sticky)), rng.randint(0, 3 * sticky)])
            steps.append(("U", appended, rng.random() < 0.5))
    rule = SwitchRule.DEFERRED if index % 2 == 0 else SwitchRule.IMMEDIATE
    return SwitchSequence(sticky, all_count, available, rng.randint(0, 2**40), rule, steps)


def test_switching_sequences_equal_kafkas(oracle: Oracle) -> None:
    rng = random.Random(7943)
    sequences = [random_sequence(rng, i) for i in range(600)]
    requests: list[str] = []
    ours: list[str] = []
    owner: list[int] = []
    for n, seq in enumerate(sequences):
        lines = seq.requests()
        requests += lines
        ours += seq.answers()
        owner += [n] * len(lines)
    assert len(requests) > 30000
    differ = compare(requests, ours, oracle.ask(requests),
                     lambda i: f"sequence {owner[i]} ({sequences[owner[i]].rule.value})")
    assert not differ, differ[:5]


# -- the accumulator ---------------------------------------------------------------------------

def random_scenario(rng: random.Random) -> tuple[AccumulatorSetup, list[tuple]]:
    nodes = rng.randint(1, 3)
    partitions = rng.randint(1, 6)
    leaders = tuple(None if rng.random() < 0.1 else rng.randrange(nodes) for _ in range(partitions))
    if all(x is None for x in leaders):
        leaders = (0, *leaders[1:])
    batch_size = rng.choice([1, 100, 512, 1024, 4096, 16384])
    small_memory = rng.random() < 0.15
    setup = AccumulatorSetup(
        batch_size=batch_size,
        linger_ms=rng.choice([0, 0, 5, 50]),
        buffer_memory=(3 * max(batch_size, 2200)) if small_memory else 1 << 25,
        adaptive=rng.random() < 0.7,
        availability_timeout_ms=rng.choice([0, 0, 5, 20]),
        max_request_size=rng.choice([1000, 2048, 5000, 1 << 20]),
        seed=rng.randint(0, 2**40),
        leaders=leaders,
    )
    leading = sorted({x for x in leaders if x is not None})
    now, base_ts = 0, rng.randint(0, 10**6)
    ops: list[tuple] = []
    for _ in range(rng.randint(40, 120)):
        now += rng.choice([0, 0, 1, 3, 10])
        roll = rng.random()
        if roll < 0.65:
            kind = rng.random()
            key = rng.randbytes(rng.randint(0, 8)) if kind < 0.25 else None
            partition = rng.randrange(partitions) if 0.25 <= kind < 0.4 else -1
            value = rng.choice([-1, 0, 5, 100, 300, 512, 1000, 2000])
            header = -1 if rng.random() < 0.8 else rng.randint(0, 20)
            ops.append(("P", partition, key, value, header, base_ts + now + rng.randint(-5, 80), now))
        elif roll < 0.77:
            ops.append(("R", now, 1 if small_memory and rng.random() < 0.3 else 0))
        elif roll < 0.85:
            ops.append(("T", rng.randrange(nodes), now, int(rng.random() < 0.5)))
        elif roll < 0.95:
            ops.append(("G", rng.choice(leading), now))
        else:
            ops.append(("F",))  # deallocate the oldest drained batch not yet freed, if any
    return setup, ops


def run_scenarios(oracle: Oracle, scenarios: Sequence[tuple[AccumulatorSetup, list[tuple]]]
                  ) -> tuple[list[str], list[str], list[str], list[int]]:
    requests: list[str] = []
    ours: list[str] = []
    owner: list[int] = []
    for n, (setup, ops) in enumerate(scenarios):
        runner = ScenarioRunner(setup)
        requests.append(setup.request())
        ours.append("ok")
        owner.append(n)
        freed = 0
        for op in ops:
            if op == ("F",):
                if freed >= len(runner.drained):
                    continue
                op, freed = ("F", freed), freed + 1
            requests.append(op_request(op))
            ours.append(runner.answer(op))
            owner.append(n)
    return requests, ours, oracle.ask(requests), owner


def test_accumulator_scenarios_equal_kafkas(oracle: Oracle) -> None:
    rng = random.Random(7944)
    scenarios = [random_scenario(rng) for _ in range(400)]
    requests, ours, theirs, owner = run_scenarios(oracle, scenarios)
    kinds = {r[0] for r in requests}
    assert kinds == {"A", "P", "R", "T", "G", "F"}
    assert sum(a.startswith("blocked") for a in ours) > 0  # buffer exhaustion was exercised
    assert sum("," in a and ":" in a for a in ours) > 50  # multi-batch drains were exercised
    differ = compare(requests, ours, theirs, lambda i: f"scenario {owner[i]} {scenarios[owner[i]][0]}")
    assert not differ, differ[:5]


def test_drain_order_example_equals_kafkas(oracle: Oracle) -> None:
    """The issue's example: leaders [0, 0, 0], batch.size 1024, max.request.size 2048."""
    setup = AccumulatorSetup(1024, 0, 1 << 25, True, 0, 2048, 1, (0, 0, 0))
    ops: list[tuple] = [("P", p, None, 1024, -1, 0, 0) for p in range(3)]
    ops += [("G", 0, 1)] * 3 + [("P", p, None, 1024, -1, 0, 2) for p in range(3)] + [("G", 0, 3)]
    requests, ours, theirs, _ = run_scenarios(oracle, [(setup, ops)])
    assert theirs[-1] == "1:1:1094"  # Kafka drains partition 1 first
    assert ours == theirs


# -- whole simulations ---------------------------------------------------------------------------

SIMULATIONS = [(variant, rate, seed) for variant in ("uniform", "adaptive", "adaptive-timeout-5ms")
               for rate in (2000.0, 4000.0) for seed in (1, 2)]


def test_simulations_replayed_through_kafkas_accumulator(oracle: Oracle, monkeypatch) -> None:
    """Every call ``lazyconv simulate`` makes on the accumulator (appends, ready passes with
    their load stats, latency stats, drains, deallocations) answered by Kafka's accumulator
    the same way. Times are whole milliseconds (rates of 2000 and 4000 records/s arrive in
    bursts every 2 ms; 1 ms sender and network delays) so that Java's ``long`` clock is exact."""
    import lazyconv.partitioner._producer as producer_module
    import lazyconv.partitioner._simulator as sim

    made: list[RecordingAccumulator] = []

    def recording(*args, **kwargs) -> RecordingAccumulator:
        acc = RecordingAccumulator(*args, **kwargs)
        made.append(acc)
        return acc

    monkeypatch.setattr(producer_module, "RecordAccumulator", recording)
    monkeypatch.setattr(sim, "default_random_source", java_random_source)
    requests: list[str] = []
    ours: list[str] = []
    owner: list[int] = []
    for n, (variant, rate, seed) in enumerate(SIMULATIONS):
        cfg = sim.SimulationConfig(variant=variant, rate_records_per_s=rate, records=3000, seed=seed,
                                   sender_delay_ms=1.0, network_delay_ms=1.0,
                                   switch_rule=SwitchRule.DEFERRED)
        sim.simulate(cfg)
        acc = made[-1]
        setup = AccumulatorSetup(
            acc.config.batch_size, int(acc.config.linger_ms), acc.config.buffer_memory,
            acc.adaptive, int(acc.availability_timeout), acc.config.max_request_size, seed,
            tuple(cfg.leaders))
        requests.append(setup.request())
        ours.append("ok")
        owner.append(n)
        for request, answer in acc.trace:
            requests.append(request)
            ours.append(answer)
            owner.append(n)
    assert len(SIMULATIONS) == 12 and len(requests) > 40000
    differ = compare(requests, ours, oracle.ask(requests), lambda i: f"simulation {SIMULATIONS[owner[i]]}")
    assert not differ, differ[:5]
