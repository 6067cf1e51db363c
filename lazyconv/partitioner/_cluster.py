"""The cluster view the partitioners read: partitions of a topic and who leads them.

:class:`ClusterView` is the minimal protocol (any metadata object can be adapted to it);
:class:`StaticCluster` is a plain in-memory implementation used by the simulator and tests.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._murmur2 import to_positive

__all__ = ["ClusterView", "StaticCluster", "RandomSource", "default_random_source", "check_cluster"]

RandomSource = Callable[[], int]
"""A callable returning a non-negative int (Kafka: ``toPositive(random 32-bit int)``)."""


def default_random_source(seed: int | None = None) -> RandomSource:
    """Kafka's draw: ``toPositive`` of a uniform 32-bit int, from a seeded ``random.Random``."""
    rng = _random.Random(seed)
    return lambda: to_positive(rng.getrandbits(32))


class ClusterView(Protocol):
    """What a partitioner needs to know about a topic."""

    def partitions_for_topic(self, topic: str) -> Sequence[int]:
        """All partition ids of ``topic`` (leaderless ones included), in metadata order."""
        ...

    def available_partitions_for_topic(self, topic: str) -> Sequence[int]:
        """Partition ids of ``topic`` that have a known leader, in metadata order."""
        ...

    def leader_for(self, topic: str, partition: int) -> int | None:
        """Node id leading ``partition`` of ``topic``, or ``None`` when unknown."""
        ...


def check_cluster(cluster: object) -> None:
    """Raise :class:`~lazyconv.errors.ConfigurationError` unless ``cluster`` has the methods of a
    :class:`ClusterView`. Called where a cluster is kept, and where one given per call failed
    with an AttributeError (then a cluster that has them re-raises its own error): never on the
    per-record path of a good cluster."""
    if not all(callable(getattr(cluster, name, None)) for name in _CLUSTER_VIEW_METHODS):
        raise ConfigurationError(f"the cluster must be a ClusterView ({', '.join(_CLUSTER_VIEW_METHODS)}), "
                                 f"got {type(cluster).__name__}") from None


_CLUSTER_VIEW_METHODS = ("partitions_for_topic", "available_partitions_for_topic", "leader_for")


class StaticCluster:
    """An immutable cluster: ``{topic: {partition: leader node id or None}}``.

    Partition order is the mapping's order (Kafka keeps metadata order; use ascending ids to
    match a broker's metadata response).
    """

    def __init__(self, topics: Mapping[str, Mapping[int, int | None]]) -> None:
        if not isinstance(topics, Mapping) or not all(isinstance(p, Mapping) for p in topics.values()):
            raise ConfigurationError("a StaticCluster needs {topic: {partition: leader or None}}, "
                                     f"got {topics!r:.60}")
        self._leaders: dict[str, dict[int, int | None]] = {t: dict(p) for t, p in topics.items()}
        self._all = {t: tuple(p) for t, p in self._leaders.items()}
        self._available = {
            t: tuple(pid for pid, leader in p.items() if leader is not None)
            for t, p in self._leaders.items()
        }

    @classmethod
    def single_topic(cls, topic: str, leaders: Sequence[int | None]) -> StaticCluster:
        """Topic with partitions ``0..len(leaders)-1``; ``leaders[i]`` leads partition i."""
        if not isinstance(topic, str) or not isinstance(leaders, Sequence):
            raise ConfigurationError(f"single_topic needs a str topic and a sequence of leaders, "
                                     f"got {topic!r:.40}, {leaders!r:.40}")
        return cls({topic: dict(enumerate(leaders))})

    def _check(self, topic: str) -> None:
        if topic not in self._leaders:
            raise ConfigurationError(f"topic {topic!r} is not in the cluster metadata")

    def partitions_for_topic(self, topic: str) -> Sequence[int]:
        self._check(topic)
        return self._all[topic]

    def available_partitions_for_topic(self, topic: str) -> Sequence[int]:
        self._check(topic)
        return self._available[topic]

    def leader_for(self, topic: str, partition: int) -> int | None:
        self._check(topic)
        return self._leaders[topic].get(partition)

    def partitions_led_by(self, node: int) -> list[tuple[str, int]]:
        """Every (topic, partition) whose leader is ``node``."""
        return [
            (t, pid) for t, parts in self._leaders.items() for pid, lead in parts.items() if lead == node
        ]
