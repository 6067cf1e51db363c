"""DescribeProducers (API key 61), version 0, sans-IO.

An admin client lists the active producers (ids, epochs, last sequence and timestamp, open
transaction start offset) of partitions (KIP-664); sent to each partition's leader.

Declared as in Kafka 4.0.1's DescribeProducersRequest.json and DescribeProducersResponse.json;
field names in snake_case. :func:`topic_error_message`: the message a broker gives with an error
that refuses a whole topic.
"""

from __future__ import annotations

from lazyconv.errors import ErrorCode
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._error_messages import kafka_message
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "invalid_topic_reason", "topic_error_message"]

_TOPIC_REQUEST = Struct(
    "TopicRequest",
    (
        Field("name", STRING),
        Field("partition_indexes", ArrayOf(INT32)),
    ),
)

REQUEST = Struct("DescribeProducersRequest", (Field("topics", ArrayOf(_TOPIC_REQUEST)),))

_PRODUCER_STATE = Struct(
    "ProducerState",
    (
        Field("producer_id", INT64),
        Field("producer_epoch", INT32),
        Field("last_sequence", INT32, default=-1),
        Field("last_timestamp", INT64, default=-1),
        Field("coordinator_epoch", INT32),
        Field("current_txn_start_offset", INT64, default=-1),
    ),
)

_PARTITION_RESPONSE = Struct(
    "PartitionResponse",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", null_default=True),
        Field("active_producers", ArrayOf(_PRODUCER_STATE)),
    ),
)

_TOPIC_RESPONSE = Struct(
    "TopicResponse",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_PARTITION_RESPONSE)),
    ),
)

RESPONSE = Struct(
    "DescribeProducersResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("topics", ArrayOf(_TOPIC_RESPONSE)),
    ),
)

SPEC = ApiSpec(61, "DescribeProducers", 0, 0, 0, REQUEST, RESPONSE)

# the codes a broker refuses a whole topic with (their messages: Errors.java's)
_TOPIC_ERRORS = frozenset({int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                           int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                           int(ErrorCode.INVALID_TOPIC_EXCEPTION)})
_MAX_TOPIC_NAME = 249  # Topic.MAX_NAME_LENGTH, in UTF-16 units (Java's String.length)
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_error_message(topic: str, code: int) -> str | None:
    """The ``error_message`` a broker (Kafka 3.9 and 4.0, KafkaApis.handleDescribeProducersRequest)
    puts on every partition of ``topic`` when it refuses the whole topic with ``code``: an
    invalid name (Topic.validate's reason), a topic the client may not read, one that does not
    exist; ``None`` for any other code (a partition's own error carries no message)."""
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        reason = invalid_topic_reason(topic)
        if reason is not None:
            return f"Topic name is invalid: {reason}"
    return kafka_message(code) if code in _TOPIC_ERRORS else None


def invalid_topic_reason(name: str) -> str | None:
    """Why Kafka's Topic.validate refuses ``name`` (its words), ``None`` when it does not. A
    broker answers DescribeProducers for such a name INVALID_TOPIC_EXCEPTION before it checks
    anything else (the client's authorization included)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name.encode("utf-16-le")) // 2 > _MAX_TOPIC_NAME:
        return f"the length of '{name}' is longer than the max allowed length {_MAX_TOPIC_NAME}"
    if not set(name) <= _TOPIC_CHARS:
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None
