"""How Kafka's requests and responses nest partitions under topics: consecutive partitions of one
topic share one topic entry, in the order they come (docs/guide/fetch-response.md). One helper
for every place that builds such a list, in ``serve`` and in the gateway alike.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["group_by_topic"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def group_by_topic(items: Iterable[tuple[K, V]]) -> list[tuple[K, list[V]]]:
    """``(topic key, partition)`` pairs as ``(topic key, [partitions])``: consecutive pairs with
    equal keys share an entry; a key that comes back later starts a new one, as in Kafka."""
    groups: list[tuple[K, list[V]]] = []
    for key, value in items:
        if groups and groups[-1][0] == key:
            groups[-1][1].append(value)
        else:
            groups.append((key, [value]))
    return groups
