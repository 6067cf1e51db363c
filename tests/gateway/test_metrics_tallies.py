"""The metrics' plain-number tallies are exposed exactly as prometheus_client's own counters and
histograms fed the same values would be (both text formats), so a scraper sees no difference."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector

from lazyconv.gateway._metrics import LATENCY_BUCKETS
from lazyconv.gateway._tallies import LatencyTally, Tally

_CREATED = re.compile(r"(_created(\{[^}]*\})?) \S+")


class _Families(Collector):
    def __init__(self, *tallies: Tally | LatencyTally) -> None:
        self.tallies = tallies

    def collect(self) -> Iterator[Metric]:
        for tally in self.tallies:
            yield tally.family()


def _texts(registry: CollectorRegistry) -> tuple[str, str]:
    """Both formats, the ``_created`` timestamps (which differ by when each was made) blanked."""
    return tuple(_CREATED.sub(r"\1 T", generate(registry).decode())  # type: ignore[return-value]
                 for generate in (generate_latest, generate_openmetrics))


def _names(key: object) -> tuple[str, str]:
    api, version = key  # type: ignore[misc]
    return f"api{api}", str(version)


keys = st.tuples(st.integers(0, 3), st.integers(0, 2))
durations = st.one_of(st.sampled_from([b for b in LATENCY_BUCKETS if b != float("inf")]),
                      st.floats(0, 100, allow_nan=False))


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys, durations), max_size=40))
def test_a_latency_tally_is_exposed_as_prometheus_clients_histogram(observed: Iterable[tuple[tuple[int, int], float]]) -> None:
    """Every bucket (a value on a bound counts in that bound's bucket: ``le``), count, sum and
    series equal to a prometheus_client Histogram given the same observations."""
    tally = LatencyTally("t_seconds", "what", ["api", "version"], _names, LATENCY_BUCKETS)
    ours = CollectorRegistry()
    ours.register(_Families(tally))
    theirs = CollectorRegistry()
    histogram = Histogram("t_seconds", "what", ["api", "version"], buckets=LATENCY_BUCKETS,
                          registry=theirs)
    for key, seconds in sorted(observed, key=lambda o: o[0]):  # series in first-seen order alike
        tally.observe(key, seconds)
        histogram.labels(*_names(key)).observe(seconds)
    assert _texts(ours) == _texts(theirs)


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys, st.integers(0, 1 << 40)), max_size=40))
def test_a_tally_is_exposed_as_prometheus_clients_counter(added: Iterable[tuple[tuple[int, int], int]]) -> None:
    tally = Tally("t_bytes", "what", ["api", "version"], _names)
    ours = CollectorRegistry()
    ours.register(_Families(tally))
    theirs = CollectorRegistry()
    counter = Counter("t_bytes", "what", ["api", "version"], registry=theirs)
    for key, amount in sorted(added, key=lambda a: a[0]):
        tally.add(key, amount)
        counter.labels(*_names(key)).inc(amount)
    assert _texts(ours) == _texts(theirs)


def test_a_duration_on_a_bound_is_in_that_bound_and_the_buckets_are_cumulative() -> None:
    tally = LatencyTally("t_seconds", "what", ["api"], lambda k: (str(k),), (0.1, 1.0, float("inf")))
    for seconds in (0.1, 0.5, 1.0, 7.0):
        tally.observe(1, seconds)
    samples = {(s.name, s.labels.get("le")): s.value for s in tally.family().samples}
    assert samples[("t_seconds_bucket", "0.1")] == 1
    assert samples[("t_seconds_bucket", "1.0")] == 3
    assert samples[("t_seconds_bucket", "+Inf")] == samples[("t_seconds_count", None)] == 4
    assert samples[("t_seconds_sum", None)] == pytest.approx(8.6)


@pytest.mark.parametrize("bounds", [(), (1.0, 0.5, float("inf")), (0.5, 1.0)])
def test_bounds_that_do_not_ascend_to_inf_are_refused(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="ascend to inf"):
        LatencyTally("t", "what", [], lambda k: (), bounds)
