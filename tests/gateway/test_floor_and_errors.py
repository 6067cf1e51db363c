"""The gateway's version choice (never below Kafka 4.0's floor) and its error-code table."""

from __future__ import annotations

import pytest

from lazyconv.errors import ConfigurationError, ErrorCode, UpstreamError
from lazyconv.gateway._error_map import downstream_error
from lazyconv.gateway._floor import KAFKA_4_FLOOR, choose_upstream_version
from lazyconv.gateway._upstream import BrokerAddress, parse_bootstrap
from lazyconv.protocol import (
    _fetch as fetch,
)
from lazyconv.protocol import (
    _join_group as join_group,
)
from lazyconv.protocol import (
    _list_offsets as list_offsets,
)
from lazyconv.protocol import (
    _metadata as metadata,
)
from lazyconv.protocol import (
    _offset_commit as offset_commit,
)
from lazyconv.protocol import (
    _offset_fetch as offset_fetch,
)
from lazyconv.protocol import (
    _produce as produce,
)


def test_the_floor_is_kafka_4s() -> None:
    assert KAFKA_4_FLOOR == {produce.SPEC.key: 3, fetch.SPEC.key: 4, list_offsets.SPEC.key: 1,
                             offset_commit.SPEC.key: 2, offset_fetch.SPEC.key: 1,
                             join_group.SPEC.key: 2}


@pytest.mark.parametrize("key,broker,chosen", [
    (produce.SPEC.key, (0, 12), produce.SPEC.max_version),   # Kafka 4.0 advertises v0-12
    (produce.SPEC.key, (0, 9), 9),                           # a 3.x broker: its max
    (fetch.SPEC.key, (4, 17), 17),
    (fetch.SPEC.key, (0, 5), 5),
    (list_offsets.SPEC.key, (0, 9), list_offsets.SPEC.max_version),
    (metadata.SPEC.key, (0, 13), metadata.SPEC.max_version),
    (metadata.SPEC.key, (0, 1), 1),                          # no floor for Metadata
])
def test_the_highest_common_version(key: int, broker: tuple[int, int], chosen: int) -> None:
    assert choose_upstream_version(key, broker) == chosen


@pytest.mark.parametrize("key,broker", [
    (produce.SPEC.key, (0, 2)),       # only versions below the floor offered
    (fetch.SPEC.key, (0, 3)),
    (list_offsets.SPEC.key, (0, 0)),
])
def test_no_version_below_the_floor_even_if_offered(key: int, broker: tuple[int, int]) -> None:
    with pytest.raises(UpstreamError, match="the Kafka 4.0 floor is"):
        choose_upstream_version(key, broker)


def test_an_api_the_broker_lacks() -> None:
    with pytest.raises(UpstreamError, match="does not offer Fetch"):
        choose_upstream_version(fetch.SPEC.key, None)


@pytest.mark.parametrize("key,version,code,sent", [
    (fetch.SPEC.key, 2, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 6, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR),
    (fetch.SPEC.key, 12, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (fetch.SPEC.key, 13, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID),
    (fetch.SPEC.key, 11, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 1, ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.OFFSET_OUT_OF_RANGE),
    (fetch.SPEC.key, 2, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, ErrorCode.UNKNOWN_SERVER_ERROR),
    (produce.SPEC.key, 2, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE),
    (produce.SPEC.key, 8, ErrorCode.INVALID_RECORD, ErrorCode.INVALID_RECORD),
    (produce.SPEC.key, 2, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.MESSAGE_TOO_LARGE),
    (produce.SPEC.key, 0, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (produce.SPEC.key, 3, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (produce.SPEC.key, 4, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR),
    (produce.SPEC.key, 2, ErrorCode.INVALID_TIMESTAMP, ErrorCode.INVALID_TIMESTAMP),
    (list_offsets.SPEC.key, 0, ErrorCode.OFFSET_NOT_AVAILABLE, 5),
    (list_offsets.SPEC.key, 5, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.OFFSET_NOT_AVAILABLE),
    (metadata.SPEC.key, 0, 0, 0),
    # a leader without the gateway's listener: Kafka answers LEADER_NOT_AVAILABLE below v6
    (metadata.SPEC.key, 5, 72, 5),
    (metadata.SPEC.key, 0, 72, 5),
    (metadata.SPEC.key, 6, 72, 72),
])
def test_error_codes_an_old_version_knows(key: int, version: int, code: int, sent: int) -> None:
    assert downstream_error(key, version, int(code)) == int(sent)


def test_bootstrap_lists() -> None:
    assert parse_bootstrap("a:1, b:9092,[::1]:3") == [
        BrokerAddress("a", 1), BrokerAddress("b", 9092), BrokerAddress("::1", 3)]
    for bad in ("", "a", "a:", ":1", "a:70000", "a:x"):
        with pytest.raises(ConfigurationError, match="is not HOST:PORT"):
            parse_bootstrap(bad)
