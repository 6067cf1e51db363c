"""DescribeProducers (API key 61), version 0, sans-IO.

An admin client lists the active producers (ids, epochs, last sequence and timestamp, open
transaction start offset) of partitions (KIP-664); sent to each partition's leader.

Declared as in Kafka 4.0.1's DescribeProducersRequest.json and DescribeProducersResponse.json;
field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

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
