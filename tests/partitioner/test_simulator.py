"""The discrete-event simulation reproduces KIP-794's qualitative results."""

from __future__ import annotations

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner import SwitchRule
from lazyconv.partitioner._simulator import SimulationConfig, SimulationResult, percentile, simulate

SLOW = 0  # broker 0 leads partition 1 and answers 20 ms late


def run(variant: str, rate: float, records: int, seed: int = 1, **kw) -> SimulationResult:
    # The KIP's claims are about the rule it measured; the default is Kafka's own (deferred).
    kw.setdefault("switch_rule", SwitchRule.IMMEDIATE)
    return simulate(
        SimulationConfig(variant=variant, rate_records_per_s=rate, records=records, seed=seed, **kw)
    )


def offered_mb_s(rate: float) -> float:
    return rate * 512 / 2**20


def sustains(r: SimulationResult) -> bool:
    """Keeps up with the offered load: full throughput and bounded latency."""
    return r.throughput_mb_s >= 0.97 * offered_mb_s(r.rate_records_per_s) and r.p99_latency_ms < 500


def falls_behind(r: SimulationResult) -> bool:
    """Cannot keep up: throughput below the offered load and latency growing past 0.5 s."""
    return r.throughput_mb_s < 0.95 * offered_mb_s(r.rate_records_per_s) and r.p99_latency_ms > 500


def fast_brokers_max(r: SimulationResult) -> int:
    return max(n for b, n in r.bytes_per_broker.items() if b != SLOW)


def spread(r: SimulationResult) -> float:
    return max(r.bytes_per_broker.values()) / min(r.bytes_per_broker.values())


def assert_kip_claims(records: int, seed: int) -> None:
    sticky = run("kip480-sticky", 2048, records, seed)
    uniform_1 = run("uniform", 2048, records, seed)
    uniform_2 = run("uniform", 4096, records, seed)
    adaptive_2 = run("adaptive", 4096, records, seed)

    # KIP-480: >= 3x the bytes of any fast broker to the slow one, and cannot keep 1 MB/s.
    assert sticky.bytes_per_broker[SLOW] >= 3 * fast_brokers_max(sticky)
    assert falls_behind(sticky)
    # Uniform: bytes within ~10 %, keeps 1 MB/s, not 2 MB/s.
    assert spread(uniform_1) <= 1.10
    assert sustains(uniform_1)
    assert falls_behind(uniform_2)
    # Adaptive: keeps 2 MB/s, fewer bytes to the slow broker and lower p99 than uniform.
    assert sustains(adaptive_2)
    assert adaptive_2.bytes_per_broker[SLOW] < uniform_2.bytes_per_broker[SLOW]
    assert adaptive_2.p99_latency_ms < uniform_2.p99_latency_ms


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
def test_kip794_claims_on_a_shortened_run():
    assert_kip_claims(records=40000, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kip794_claims_on_the_kips_run(seed):
    assert_kip_claims(records=122880, seed=seed)


@pytest.mark.slow
def test_slow_broker_share_ordering_as_in_the_kip():
    """(A) > (B) > (C) > (D) at 1 MB/s; adaptive skews more at 2 MB/s than at 1 MB/s."""
    share = {v: run(v, 2048, 122880).slow_broker_share
             for v in ("kip480-sticky", "uniform", "adaptive", "adaptive-timeout-5ms")}
    assert share["kip480-sticky"] > share["uniform"] > share["adaptive"] > share["adaptive-timeout-5ms"]
    assert run("adaptive", 4096, 122880).slow_broker_share < share["adaptive"]
    # The timeout lowers latency further at 1 MB/s.
    assert run("adaptive-timeout-5ms", 2048, 122880).avg_latency_ms < run("adaptive", 2048, 122880).avg_latency_ms


@pytest.mark.slow
def test_deferred_rule_adaptive_still_keeps_up_but_uniform_skews():
    deferred = {"switch_rule": SwitchRule.DEFERRED}
    assert sustains(run("adaptive", 4096, 122880, **deferred))
    uniform = run("uniform", 2048, 122880, **deferred)
    assert sustains(uniform)
    # Two batches per stint on the backlogged partition: no longer an even split.
    assert uniform.slow_broker_share > 0.38


def test_every_record_completes_and_bytes_cover_the_records():
    r = run("adaptive", 2048, 3000)
    assert r.records == 3000
    total = sum(r.bytes_per_broker.values())
    requests = sum(r.requests_per_broker.values())
    assert total >= 3000 * 521 + requests * (61 + 100)
    assert r.p50_latency_ms <= r.p99_latency_ms <= r.p999_latency_ms <= r.max_latency_ms


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_same_seed_same_result_and_seed_changes_choices():
    a = run("uniform", 2048, 3000, seed=7)
    assert a == run("uniform", 2048, 3000, seed=7)
    assert a.bytes_per_broker != run("uniform", 2048, 3000, seed=8).bytes_per_broker


def test_buffer_memory_blocking_is_modelled():
    from lazyconv.partitioner import ProducerConfig

    small = ProducerConfig(buffer_memory=4 * 16384)
    r = run("kip480-sticky", 4096, 5000, producer=small)
    assert r.records == 5000  # blocked sends were retried, nothing lost


def test_percentile_uses_floor_index():
    values = list(range(1000))
    assert percentile(values, 0.99) == 990 and percentile(values, 0.999) == 999
    assert percentile([], 0.5) == 0.0


@pytest.mark.parametrize(
    "bad",
    [{"variant": "nope"}, {"rate_records_per_s": 0}, {"records": 0}, {"sender_delay_ms": -1},
     {"rate_records_per_s": float("nan")}, {"rate_records_per_s": float("inf")},
     {"sender_delay_ms": float("nan")}, {"base_service_ms": float("inf")}],
)
def test_bad_configuration_is_refused(bad):
    with pytest.raises(ConfigurationError):
        SimulationConfig(**bad)


def test_default_switch_rule_is_kafkas_deferred_rule():
    """Kafka 4.0.1's producer switches with the deferred rule (KAFKA-14156): so does the default."""
    assert SimulationConfig().switch_rule is SwitchRule.DEFERRED
    result = simulate(SimulationConfig(variant="uniform", records=2000))
    assert result.switch_rule == "deferred"
    assert result == simulate(SimulationConfig(variant="uniform", records=2000,
                                               switch_rule=SwitchRule.DEFERRED))
