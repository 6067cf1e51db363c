"""Partitions to their upstream leaders and back: the scatter-gather every partition-routed relay
(Fetch, Produce, ListOffsets) does the same way.

:func:`route_to_leaders` sorts a request's partitions by the broker that leads each (from the
metadata cache of the client's own upstream identity, ``session.cluster``), failing at once those whose topic has an error, that do not exist or
that have no leader (their metadata is forgotten, so the next request asks the cluster again;
a topic whose name is invalid does not exist, as Kafka's partition lookups answer it);
:func:`ask_leaders` asks each leader concurrently on the client's own upstream connections, and
fails every partition of a leader that cannot be reached with NOT_LEADER_OR_FOLLOWER, which every
client retries after refreshing its metadata (the gateway's whole cache is forgotten then: a
broker that vanished may have moved every leadership it had).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._error_map import UNREACHABLE
from lazyconv.gateway._upstream import ClusterView, UpstreamConnection, UpstreamSession

log = logging.getLogger(__name__)

__all__ = ["route_to_leaders", "ask_leaders", "leader_unreachable", "topic_error"]

T = TypeVar("T")
_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
# what Kafka's Metadata answers a topic named invalidly; the partition-routed APIs never look at
# the name (KafkaApis, ReplicaManager: Fetch, Produce, ListOffsets, OffsetForLeaderEpoch,
# DeleteRecords), so such a topic is one that does not exist there
_METADATA_ONLY = {int(ErrorCode.INVALID_TOPIC_EXCEPTION): _UNKNOWN_TOPIC_OR_PARTITION}


def topic_error(code: int) -> int:
    """What a partition-routed API answers a partition of a topic whose metadata error is
    ``code``: the same code, but an invalid name's (INVALID_TOPIC_EXCEPTION, Metadata's only)
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4.0.1 and 3.9.0 answer it."""
    return _METADATA_ONLY.get(code, code)


def route_to_leaders(cluster: ClusterView, items: Iterable[T],
                     where: Callable[[T], tuple[str, int]],
                     fail: Callable[[T, int], None]) -> dict[int, list[T]]:
    """``items`` by the node id of their partition's leader, in order; ``where(item)`` is its
    (topic, partition). An item whose topic has an error or lacks the partition is failed with
    that (upstream) code (an invalid name's: UNKNOWN_TOPIC_OR_PARTITION), one without a leader
    with :data:`UNREACHABLE`."""
    by_leader: dict[int, list[T]] = {}
    for item in items:
        topic, partition = where(item)
        info = cluster.topics.get(topic)
        leader = cluster.leader(topic, partition)
        if info is not None and (info.error_code or partition not in info.partitions):
            fail(item, topic_error(info.error_code or _UNKNOWN_TOPIC_OR_PARTITION))
            cluster.invalidate(topic)
        elif leader is None:
            fail(item, UNREACHABLE)
            cluster.invalidate(topic)
        else:
            by_leader.setdefault(leader, []).append(item)
    return by_leader


async def ask_leaders(session: UpstreamSession, by_leader: dict[int, list[T]],
                      ask: Callable[[UpstreamConnection, list[T]], Awaitable[None]],
                      fail: Callable[[T, int], None], what: str) -> None:
    """``ask(connection, items)`` for each leader concurrently; the items of a leader that
    cannot be reached (or that fails the request) are failed with :data:`UNREACHABLE`."""

    async def one(node: int, items: list[T]) -> None:
        try:
            await ask(await session.connection(node), items)
        except UpstreamError as exc:
            leader_unreachable(session, node, items, fail, what, exc)

    if len(by_leader) == 1:  # the common case: no task of its own
        await one(*next(iter(by_leader.items())))
    else:
        await asyncio.gather(*(one(node, items) for node, items in by_leader.items()))


def leader_unreachable(session: UpstreamSession, node: int, items: Iterable[T],
                       fail: Callable[[T, int], None], what: str, exc: UpstreamError) -> None:
    """Leader ``node`` could not be asked (or answer): its items fail with
    :data:`UNREACHABLE` and the cluster's metadata is asked again."""
    session.cluster.state.broker_failed(node, what, exc)
    session.cluster.invalidate()
    for item in items:
        fail(item, UNREACHABLE)
