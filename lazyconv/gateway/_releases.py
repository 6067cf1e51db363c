"""Which Kafka release a client's requests imply, and which of them Kafka 4 refuses.

A client that sends ApiVersions v3+ names its software and version; an older one does not, but
the versions it uses say how old its protocol is: each version of each API first appeared in a
known Kafka release, so a client that sends Fetch v2 and Produce v2 speaks (at least) Kafka
0.10.0's protocol. :func:`implied_release` is that release, the latest of the releases its
versions first appeared in. The table holds, per API the gateway answers, the release in which
each version first appeared (read from the brokers' own ApiVersions answers of each release;
``tests/gateway/test_releases.py`` compares it with kafka-python's table of them).
:func:`kafka_4_refuses` says whether a Kafka 4 broker refuses a version (KIP-896, the floor of
:mod:`lazyconv.gateway._floor`): what the clients report marks.
"""

from __future__ import annotations

from collections.abc import Iterable

from lazyconv.gateway._floor import upstream_floor

__all__ = ["FIRST_RELEASE", "implied_release", "kafka_4_refuses", "release_key"]

# api key -> the release each version first appeared in (index = version)
FIRST_RELEASE: dict[int, tuple[str, ...]] = {
    0: ("0.8.0", "0.9", "0.10.0", "0.11", "1.0", "1.0", "2.0", "2.1", "2.4", "2.8", "3.7",
        "3.8", "4.0"),  # Produce
    1: ("0.8.0", "0.9", "0.10.0", "0.10.1", "0.11", "0.11", "1.0", "1.1", "2.0", "2.1", "2.1",
        "2.3", "2.7", "3.1", "3.5", "3.5", "3.7", "3.9"),  # Fetch
    2: ("0.8.0", "0.10.1", "0.11", "2.0", "2.1", "2.2", "2.8", "3.0", "3.5", "3.9",
        "4.0"),  # ListOffsets
    3: ("0.8.0", "0.10.0", "0.10.1", "0.11", "0.11", "1.0", "2.0", "2.1", "2.3", "2.4", "2.8",
        "2.8", "3.1", "4.0"),  # Metadata
    8: ("0.8.1", "0.8.2", "0.9", "0.11", "2.0", "2.1", "2.1", "2.3", "2.4", "3.7"),  # OffsetCommit
    9: ("0.8.1", "0.8.2", "0.10.2", "0.11", "2.0", "2.1", "2.4", "2.5", "3.0", "3.7"),  # OffsetFetch
    10: ("0.8.2", "0.11", "2.0", "2.4", "3.0", "3.8", "3.9"),  # FindCoordinator
    11: ("0.9", "0.10.1", "0.11", "2.0", "2.2", "2.3", "2.4", "2.5", "3.2", "3.2"),  # JoinGroup
    12: ("0.9", "0.11", "2.0", "2.3", "2.4"),  # Heartbeat
    13: ("0.9", "0.11", "2.0", "2.4", "2.4", "3.2"),  # LeaveGroup
    14: ("0.9", "0.11", "2.0", "2.3", "2.4", "2.5"),  # SyncGroup
    15: ("0.9", "0.11", "2.0", "2.3", "2.4", "2.4", "4.0"),  # DescribeGroups
    16: ("0.9", "0.11", "2.0", "2.4", "2.6", "3.8"),  # ListGroups
    18: ("0.10.0", "0.11", "2.0", "2.4", "3.9"),  # ApiVersions
}


def release_key(release: str) -> tuple[int, ...]:
    """``"0.10.1"`` -> ``(0, 10, 1)``, for comparing releases."""
    return tuple(int(part) for part in release.split("."))


def implied_release(used: Iterable[tuple[int, int]]) -> str | None:
    """The latest release among those in which each (API key, version) of ``used`` first
    appeared: the oldest Kafka whose protocol has every one of them (``None`` when none is in
    the table). A version newer than the table's knows is taken for the table's latest."""
    best: str | None = None
    for api_key, version in used:
        releases = FIRST_RELEASE.get(api_key)
        if not releases:
            continue
        release = releases[min(version, len(releases) - 1)]
        if best is None or release_key(release) > release_key(best):
            best = release
    return best


def kafka_4_refuses(api_key: int, version: int) -> bool:
    """Whether a Kafka 4.0 broker refuses ``version`` of ``api_key`` (below its floor)."""
    return version < upstream_floor(api_key)
