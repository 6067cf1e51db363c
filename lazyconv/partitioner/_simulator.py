"""KIP-794's experiment as a discrete-event simulation of a producer and three brokers.

The model (see docs/guide/partitioner.md): an application offers records on a throttle (bursts as
``ThroughputThrottler`` produces them, or uniform arrivals); ``send()`` places each record with a
:class:`~lazyconv.partitioner._producer.PartitioningProducer` (the exact accumulator and
partitioner logic) and blocks while ``buffer.memory`` is exhausted; a sender thread, woken by a
new or full batch and by every response after a reaction delay, runs the ready pass (load
stats), updates node latency stats and drains at most ``max.in.flight`` requests per broker; each
broker serves its connection's requests one at a time, FIFO, in ``base`` ms (``base + 20`` on the
slow one), with a one-way network delay on each leg. Every record of a batch completes when its
response arrives. Bytes per broker = Σ (batch size + request overhead).

Times are in ms (floats). Everything random comes from one seeded stream (partition choice).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._accumulator import ProducerConfig
from lazyconv.partitioner._builtin import SwitchRule
from lazyconv.partitioner._cluster import StaticCluster, default_random_source
from lazyconv.partitioner._legacy import DefaultPartitioner, Partitioner, RoundRobinPartitioner
from lazyconv.partitioner._producer import PartitioningProducer

__all__ = [
    "VARIANTS",
    "KIP_LEADERS",
    "SimulationConfig",
    "SimulationResult",
    "simulate",
    "simulate_many",
    "percentile",
]

TOPIC = "foo"
KIP_LEADERS: tuple[int, ...] = (1, 0, 2)
"""Leader broker of partitions 0, 1, 2 in the KIP's run (partition 1 is on the slow broker 0)."""

VARIANTS: tuple[str, ...] = (
    "kip480-sticky",
    "uniform",
    "adaptive",
    "adaptive-timeout-5ms",
    "round-robin",
)
"""Partitioner variants: (A) DefaultPartitioner / KIP-480, (B) built-in with adaptive off,
(C) built-in defaults, (D) adaptive with ``partitioner.availability.timeout.ms=5``, and the
``RoundRobinPartitioner`` for comparison (not in the KIP)."""

_ARRIVAL, _SENDER, _RESPONSE = 0, 1, 2


@dataclass(frozen=True)
class SimulationConfig:
    """Workload, producer and broker parameters (defaults: the KIP's setup, calibrated against its figures).

    ``switch_rule`` defaults to Kafka's own rule (``DEFERRED``); the KIP measured ``IMMEDIATE``.
    """

    variant: str = "adaptive"
    rate_records_per_s: float = 2048.0
    records: int = 122880
    value_size: int = 512
    leaders: Sequence[int] = KIP_LEADERS
    slow_broker: int = 0
    base_service_ms: float = 4.0
    slow_extra_ms: float = 20.0
    network_delay_ms: float = 0.1
    sender_delay_ms: float = 0.5
    request_overhead_bytes: int = 100
    bursty: bool = True
    switch_rule: SwitchRule = SwitchRule.DEFERRED
    seed: int = 1
    producer: ProducerConfig = field(default_factory=ProducerConfig)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigurationError(f"unknown variant {self.variant!r}; one of {', '.join(VARIANTS)}")
        # NaN passes every comparison and infinity stops the clock: both are refused.
        if not (math.isfinite(self.rate_records_per_s) and self.rate_records_per_s > 0):
            raise ConfigurationError(
                f"rate must be a finite number > 0 records/s, got {self.rate_records_per_s}")
        if self.records < 1:
            raise ConfigurationError(f"records must be >= 1, got {self.records}")
        for name in ("base_service_ms", "slow_extra_ms", "network_delay_ms", "sender_delay_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"{name} must be a finite number >= 0, got {value}")


@dataclass(frozen=True)
class SimulationResult:
    """Measurements of one run, defined as ``kafka-producer-perf-test`` defines them."""

    partitioner: str
    switch_rule: str
    seed: int
    rate_records_per_s: float
    records: int
    elapsed_ms: float
    throughput_records_per_s: float
    throughput_mb_s: float
    avg_latency_ms: float
    p50_latency_ms: float
    p99_latency_ms: float
    p999_latency_ms: float
    max_latency_ms: float
    bytes_per_broker: dict[int, int]
    requests_per_broker: dict[int, int]
    slow_broker: int

    @property
    def slow_broker_share(self) -> float:
        """Fraction of all bytes sent to the slow broker."""
        total = sum(self.bytes_per_broker.values())
        return self.bytes_per_broker[self.slow_broker] / total if total else 0.0

    def to_json(self) -> dict[str, object]:
        """The CLI's JSON object (exactly the documented keys; broker ids as strings)."""
        return {
            "partitioner": self.partitioner,
            "rate_records_per_s": (
                int(self.rate_records_per_s)
                if float(self.rate_records_per_s).is_integer()
                else self.rate_records_per_s
            ),
            "throughput_mb_s": round(self.throughput_mb_s, 4),
            "avg_latency_ms": round(self.avg_latency_ms, 2),
            "p99_latency_ms": round(self.p99_latency_ms, 2),
            "p999_latency_ms": round(self.p999_latency_ms, 2),
            "bytes_per_broker": {str(b): n for b, n in sorted(self.bytes_per_broker.items())},
        }


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Element at index ``floor(p * count)`` of ascending values (ProducerPerformance's rule)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def _make_producer(cfg: SimulationConfig, cluster: StaticCluster) -> PartitioningProducer:
    rng = default_random_source(cfg.seed)
    producer_cfg = replace(cfg.producer, switch_rule=cfg.switch_rule)
    partitioner: Partitioner | None = None
    if cfg.variant == "kip480-sticky":
        partitioner = DefaultPartitioner(rng)
    elif cfg.variant == "round-robin":
        partitioner = RoundRobinPartitioner()
    elif cfg.variant == "uniform":
        producer_cfg = replace(producer_cfg, partitioner_adaptive_partitioning_enable=False)
    elif cfg.variant == "adaptive":
        producer_cfg = replace(producer_cfg, partitioner_adaptive_partitioning_enable=True,
                               partitioner_availability_timeout_ms=0.0)
    else:  # adaptive-timeout-5ms
        producer_cfg = replace(producer_cfg, partitioner_adaptive_partitioning_enable=True,
                               partitioner_availability_timeout_ms=5.0)
    return PartitioningProducer(cluster, producer_cfg, partitioner, rng)


def simulate(cfg: SimulationConfig) -> SimulationResult:
    """Run one simulation to completion (every record acknowledged) and measure it."""
    cluster = StaticCluster.single_topic(TOPIC, list(cfg.leaders))
    producer = _make_producer(cfg, cluster)
    acc = producer.accumulator
    brokers = sorted(set(cfg.leaders))
    parts_of = {b: cluster.partitions_led_by(b) for b in brokers}
    service = {
        b: cfg.base_service_ms + (cfg.slow_extra_ms if b == cfg.slow_broker else 0.0)
        for b in brokers
    }
    max_in_flight = producer.config.max_in_flight_requests_per_connection
    in_flight = dict.fromkeys(brokers, 0)
    broker_free = dict.fromkeys(brokers, 0.0)
    bytes_sent = dict.fromkeys(brokers, 0)
    requests = dict.fromkeys(brokers, 0)
    value = bytes(cfg.value_size)
    overhead = cfg.request_overhead_bytes
    net = cfg.network_delay_ms

    rate_per_ms = cfg.rate_records_per_s / 1000.0
    burst = max(1, math.ceil(2.0 * rate_per_ms)) if cfg.bursty else 1

    def scheduled(i: int) -> float:
        return (i // burst) * burst / rate_per_ms

    events: list[tuple[float, int, int, object]] = []
    seq = 0

    def push(t: float, kind: int, payload: object = None) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, payload))

    latencies: list[float] = []
    sender_pending = False
    blocked_since: float | None = None  # send() call time of the record waiting for memory
    next_record = 0
    last_done = 0.0

    def wake_sender(t: float) -> None:
        nonlocal sender_pending
        if not sender_pending:
            sender_pending = True
            push(t + cfg.sender_delay_ms, _SENDER)

    def try_send(now: float, call_time: float) -> bool:
        result = producer.send(TOPIC, None, value, timestamp=int(now), now=now, token=call_time)
        if result.blocked:
            return False
        if result.new_batch_created or result.batch_is_full:
            wake_sender(now)
        return True

    def offer_records(now: float) -> None:
        """Send every record due by ``now`` (a burst arrives at one instant)."""
        nonlocal next_record, blocked_since
        while next_record < cfg.records and blocked_since is None:
            due = scheduled(next_record)
            if due > now:
                push(due, _ARRIVAL)
                return
            if not try_send(now, now):
                blocked_since = now
                acc.memory_waiters = 1
                wake_sender(now)
                return
            next_record += 1

    push(0.0, _ARRIVAL)
    while events:
        now, _, kind, payload = heapq.heappop(events)
        if kind == _ARRIVAL:
            offer_records(now)
        elif kind == _SENDER:
            sender_pending = False
            for node in acc.ready(now):
                can_send = in_flight[node] < max_in_flight
                acc.update_node_latency_stats(node, now, can_send)
                if not can_send:
                    continue
                batches = acc.drain(node, parts_of[node])
                if not batches:
                    continue
                in_flight[node] += 1
                requests[node] += 1
                bytes_sent[node] += sum(b.estimated_size for b in batches) + overhead
                start = max(now + net, broker_free[node])
                broker_free[node] = start + service[node]
                push(broker_free[node] + net, _RESPONSE, (node, batches))
        else:
            node, batches = payload  # type: ignore[misc]
            in_flight[node] -= 1
            for batch in batches:
                latencies.extend(now - call_time for call_time in batch.tokens)
                acc.deallocate(batch)
            last_done = now
            if blocked_since is not None:
                if try_send(now, blocked_since):
                    blocked_since = None
                    acc.memory_waiters = 0
                    next_record += 1
                    offer_records(now)
            wake_sender(now)

    if len(latencies) != cfg.records:
        raise RuntimeError(f"simulation lost records: {len(latencies)} of {cfg.records} completed")
    latencies.sort()
    elapsed = last_done
    per_s = cfg.records / (elapsed / 1000.0)
    return SimulationResult(
        partitioner=cfg.variant,
        switch_rule=SwitchRule(cfg.switch_rule).value,
        seed=cfg.seed,
        rate_records_per_s=cfg.rate_records_per_s,
        records=cfg.records,
        elapsed_ms=elapsed,
        throughput_records_per_s=per_s,
        throughput_mb_s=per_s * cfg.value_size / 2**20,
        avg_latency_ms=sum(latencies) / len(latencies),
        p50_latency_ms=percentile(latencies, 0.5),
        p99_latency_ms=percentile(latencies, 0.99),
        p999_latency_ms=percentile(latencies, 0.999),
        max_latency_ms=latencies[-1],
        bytes_per_broker=bytes_sent,
        requests_per_broker=requests,
        slow_broker=cfg.slow_broker,
    )


def simulate_many(
    configs: Sequence[SimulationConfig],
    progress: Callable[[SimulationResult], None] | None = None,
) -> list[SimulationResult]:
    """Run several simulations in order, calling ``progress`` after each."""
    results = []
    for cfg in configs:
        result = simulate(cfg)
        results.append(result)
        if progress is not None:
            progress(result)
    return results

