"""The gateway's version choice (never below Kafka 4.0's floor) and its error-code table."""

from __future__ import annotations

import contextvars
from types import SimpleNamespace

import pytest

from lazyconv.errors import ConfigurationError, ErrorCode, UpstreamError
from lazyconv.gateway._error_map import downstream_error
from lazyconv.gateway._floor import KAFKA_4_FLOOR, choose_upstream_version
from lazyconv.gateway._metrics import GatewayMetrics
from lazyconv.gateway._upstream import BrokerAddress, parse_bootstrap
from lazyconv.net._model import Listener
from lazyconv.net._session import Session, current_session
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
    # KafkaApis.maybeDownConvertStorageError: Fetch v5 and older
    (fetch.SPEC.key, 5, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 6, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR),
    (fetch.SPEC.key, 12, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (fetch.SPEC.key, 13, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID),
    (fetch.SPEC.key, 12, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (fetch.SPEC.key, 13, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID),
    (fetch.SPEC.key, 11, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 17, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 17, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (list_offsets.SPEC.key, 1, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (fetch.SPEC.key, 1, ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.OFFSET_OUT_OF_RANGE),
    (fetch.SPEC.key, 2, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, ErrorCode.UNKNOWN_SERVER_ERROR),
    (fetch.SPEC.key, 3, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE),
    # the old era ends at UNSUPPORTED_FOR_MESSAGE_FORMAT (43), known since Kafka 0.10.1; the
    # sequence (45) and epoch (47) errors of idempotence came with 0.11 and Produce v3
    (produce.SPEC.key, 2, 43, 43),  # UNSUPPORTED_FOR_MESSAGE_FORMAT
    (produce.SPEC.key, 2, 45, ErrorCode.UNKNOWN_SERVER_ERROR),  # OUT_OF_ORDER_SEQUENCE_NUMBER
    (produce.SPEC.key, 2, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.UNKNOWN_SERVER_ERROR),
    # UNKNOWN_SERVER_ERROR is every client's: it stays an error
    (fetch.SPEC.key, 4, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR),
    (produce.SPEC.key, 0, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR),
    (produce.SPEC.key, 2, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE),
    (produce.SPEC.key, 7, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE),
    (produce.SPEC.key, 8, ErrorCode.INVALID_RECORD, ErrorCode.INVALID_RECORD),
    (produce.SPEC.key, 2, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.MESSAGE_TOO_LARGE),
    (produce.SPEC.key, 0, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (produce.SPEC.key, 3, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (produce.SPEC.key, 4, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR),
    (produce.SPEC.key, 2, ErrorCode.INVALID_TIMESTAMP, ErrorCode.INVALID_TIMESTAMP),
    # KafkaApis answers OffsetNotAvailableException LEADER_NOT_AVAILABLE below ListOffsets v5
    (list_offsets.SPEC.key, 0, ErrorCode.OFFSET_NOT_AVAILABLE, 5),
    (list_offsets.SPEC.key, 4, ErrorCode.OFFSET_NOT_AVAILABLE, 5),
    (list_offsets.SPEC.key, 5, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.OFFSET_NOT_AVAILABLE),
    (list_offsets.SPEC.key, 0, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (list_offsets.SPEC.key, 1, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (list_offsets.SPEC.key, 2, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR),
    # only Fetch and Produce below v3 lose the codes of later eras
    (list_offsets.SPEC.key, 1, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE),
    (metadata.SPEC.key, 0, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    (metadata.SPEC.key, 0, 0, 0),
    # a leader without the gateway's listener: Kafka answers LEADER_NOT_AVAILABLE below v6
    (metadata.SPEC.key, 5, 72, 5),
    (metadata.SPEC.key, 0, 72, 5),
    (metadata.SPEC.key, 6, 72, 72),
])
def test_error_codes_an_old_version_knows(key: int, version: int, code: int, sent: int) -> None:
    assert downstream_error(key, version, int(code)) == int(sent)


def test_upstream_errors_are_counted_with_what_they_became() -> None:
    metrics = GatewayMetrics()
    session = Session(Listener(0, "127.0.0.1", 9092), "/10.0.0.1", client_id="c")
    session.observer = SimpleNamespace(metrics=metrics)

    def answer() -> list[int]:
        current_session.set(session)
        return [downstream_error(fetch.SPEC.key, 4, 0), downstream_error(fetch.SPEC.key, 4, 0),
                downstream_error(fetch.SPEC.key, 4, int(ErrorCode.KAFKA_STORAGE_ERROR)),
                downstream_error(fetch.SPEC.key, 5, int(ErrorCode.KAFKA_STORAGE_ERROR)),
                downstream_error(fetch.SPEC.key, 5, int(ErrorCode.OFFSET_OUT_OF_RANGE))]

    assert contextvars.copy_context().run(answer) == [0, 0, 6, 6, 1]
    value = metrics.registry.get_sample_value
    # a partition without error is no upstream error
    assert value("lazyconv_gateway_upstream_errors_total", {"api": "Fetch", "error": "NONE"}) is None
    assert value("lazyconv_gateway_upstream_errors_total",
                 {"api": "Fetch", "error": "KAFKA_STORAGE_ERROR"}) == 2
    assert value("lazyconv_gateway_upstream_errors_total", {"api": "Fetch", "error": "OFFSET_OUT_OF_RANGE"}) == 1
    assert value("lazyconv_gateway_rewritten_errors_total", {
        "api": "Fetch", "upstream_error": "KAFKA_STORAGE_ERROR", "downstream_error": "NOT_LEADER_OR_FOLLOWER"}) == 2
    assert value("lazyconv_gateway_rewritten_errors_total", {
        "api": "Fetch", "upstream_error": "OFFSET_OUT_OF_RANGE", "downstream_error": "OFFSET_OUT_OF_RANGE"}) is None


def test_bootstrap_lists() -> None:
    assert parse_bootstrap("a:1, b:9092,[::1]:3") == [
        BrokerAddress("a", 1), BrokerAddress("b", 9092), BrokerAddress("::1", 3)]
    for bad in ("", "a", "a:", ":1", "a:70000", "a:x"):
        with pytest.raises(ConfigurationError, match="is not HOST:PORT"):
            parse_bootstrap(bad)
