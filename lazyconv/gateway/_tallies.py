"""Counters and histograms the gateway's per-request hooks add to as plain numbers, turned into
Prometheus families only when ``/metrics`` is scraped.

prometheus_client's own ``Counter`` and ``Histogram`` take a lock and check their state at every
increment (four to six Python calls each); a Fetch runs about a dozen of them, and a profile of
the gateway under one uncompressed old consumer found them the larger part of what its metrics
cost. The hooks run on the event loop's thread, as the scrape does (the HTTP listener is on the
loop too), so a dict of numbers needs no lock: :class:`Tally` and :class:`LatencyTally` are
those dicts. Their series are keyed by the raw label values the hooks have at hand (an API key,
a magic value) and named at scrape time by ``label_names``. Exposition is prometheus_client's:
the families it builds here are what its encoders write, ``_created`` samples included, as its
own counters and histograms would have them.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["Tally", "LatencyTally", "families"]

LabelNames = Callable[[Hashable], Sequence[str]]


class Tally:
    """A counter family: an amount per key, each key's label values given by ``label_names``
    at scrape time. Only the event loop's thread adds to it."""

    __slots__ = ("name", "documentation", "labels", "label_names", "values", "created")

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 label_names: LabelNames) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self.label_names = label_names
        self.values: dict[Hashable, float] = {}
        self.created: dict[Hashable, float] = {}

    def add(self, key: Hashable, amount: float = 1) -> None:
        """``amount`` (not negative) more for the series of ``key``."""
        values = self.values
        if key in values:
            values[key] += amount
        else:
            values[key] = amount
            self.created[key] = time.time()

    def family(self) -> Metric:
        """The family as it is now, one sample per key seen (in key order)."""
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, value in sorted(self.values.items(), key=_by_text):
            family.add_metric(list(self.label_names(key)), value, created=self.created[key])
        return family


class LatencyTally:
    """A histogram family of durations in seconds, one series per key (see :class:`Tally`):
    per key a count per bucket (not cumulative) and their sum, made cumulative at scrape time.
    ``bounds`` are the buckets' upper bounds, ascending, the last ``inf``."""

    __slots__ = ("name", "documentation", "labels", "label_names", "bounds", "bound_texts",
                 "series", "created")

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 label_names: LabelNames, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(bounds) or not bounds or bounds[-1] != float("inf"):
            raise ValueError(f"bucket bounds must ascend to inf, got {list(bounds)}")
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self.label_names = label_names
        self.bounds = tuple(bounds)
        self.bound_texts = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        # per key: the buckets' counts, then the sum of what was observed (the last item)
        self.series: dict[Hashable, list[float]] = {}
        self.created: dict[Hashable, float] = {}

    def observe(self, key: Hashable, seconds: float) -> None:
        """One duration for the series of ``key`` (its bucket: the first bound at or above it,
        as Prometheus's ``le`` means)."""
        counts = self.series.get(key)
        if counts is None:
            counts = self.series[key] = [0.0] * (len(self.bounds) + 1)
            self.created[key] = time.time()
        counts[bisect_left(self.bounds, seconds)] += 1
        counts[-1] += seconds

    def family(self) -> Metric:
        """The family as it is now: cumulative buckets, count and sum per key seen."""
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, counts in sorted(self.series.items(), key=_by_text):
            names = list(self.label_names(key))
            buckets: list[tuple[str, float]] = []
            total = 0.0
            for bound, count in zip(self.bound_texts, counts[:-1], strict=True):
                total += count
                buckets.append((bound, total))
            family.add_metric(names, buckets, counts[-1])
            family.samples.append(Sample(f"{self.name}_created", dict(zip(self.labels, names, strict=True)),
                                         self.created[key]))
        return family


def _by_text(item: tuple[Hashable, object]) -> str:
    return repr(item[0])


def families(*tallies: Tally | LatencyTally) -> Iterator[Metric]:
    """Each tally's family, in the order given."""
    for tally in tallies:
        yield tally.family()
