"""Which API version the gateway sends upstream: the highest both sides speak, never below
Kafka 4.0's floor.

Kafka 4.0 removed the protocol versions older than Kafka 2.1 (KIP-896). Its message definitions
(``clients/src/main/resources/common/message/*.json``, ``validVersions``) accept Produce ≥ 3,
Fetch ≥ 4, ListOffsets ≥ 1, OffsetCommit ≥ 2, OffsetFetch ≥ 1 and JoinGroup ≥ 2; the other APIs
the gateway uses start at 0. A 4.0 broker still *advertises* Produce 0–12 in ApiVersions (a
librdkafka workaround, KAFKA-18659) but refuses v0–2, so the floor is a fact of this module, not
something read from the broker: a 3.x broker offering older versions is never sent them either,
which keeps the gateway's traffic valid for every Kafka 4 cluster it may later be pointed at.
"""

from __future__ import annotations

from lazyconv.errors import UpstreamError
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _offset_commit as offset_commit
from lazyconv.protocol import _offset_fetch as offset_fetch
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._registry import API_BY_KEY

__all__ = ["KAFKA_4_FLOOR", "upstream_floor", "choose_upstream_version"]

# api key -> the lowest version a Kafka 4.0 broker accepts (absent: 0)
KAFKA_4_FLOOR: dict[int, int] = {
    produce.SPEC.key: 3,
    fetch.SPEC.key: 4,
    list_offsets.SPEC.key: 1,
    offset_commit.SPEC.key: 2,
    offset_fetch.SPEC.key: 1,
    join_group.SPEC.key: 2,
}


def upstream_floor(api_key: int) -> int:
    """The lowest version of ``api_key`` the gateway ever sends upstream."""
    return KAFKA_4_FLOOR.get(api_key, 0)


def choose_upstream_version(api_key: int, broker_range: tuple[int, int] | None) -> int:
    """The highest version of ``api_key`` that this library speaks, the broker accepts
    (``broker_range``: its ApiVersions entry, ``None`` if it lists none) and that is not below
    the Kafka 4.0 floor. Raises :class:`UpstreamError` when there is none."""
    spec = API_BY_KEY[api_key]
    if broker_range is None:
        raise UpstreamError(f"the upstream broker does not offer {spec.name} (api key {api_key})")
    low = max(spec.min_version, broker_range[0], upstream_floor(api_key))
    high = min(spec.max_version, broker_range[1])
    if high < low:
        raise UpstreamError(
            f"no common {spec.name} version: the broker offers {broker_range[0]}-{broker_range[1]}, "
            f"lazyconv speaks {spec.min_version}-{spec.max_version}, the Kafka 4.0 floor is "
            f"{upstream_floor(api_key)}")
    return high
