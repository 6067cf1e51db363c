"""DescribeTopicPartitions (API key 75), version 0, sans-IO.

The topics' partitions with their leaders, replicas, eligible leader replicas (KIP-966) and
last known ELR, a page at a time (a ``Cursor`` to continue, a partition limit per response).

Declared as in Kafka 4.0.1's DescribeTopicPartitionsRequest.json and
DescribeTopicPartitionsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, STRING, UUID, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_TOPIC_REQUEST = Struct("TopicRequest", (Field("name", STRING),))

_CURSOR = Struct("Cursor", (Field("topic_name", STRING), Field("partition_index", INT32)))

REQUEST = Struct(
    "DescribeTopicPartitionsRequest",
    (
        Field("topics", ArrayOf(_TOPIC_REQUEST)),
        Field("response_partition_limit", INT32, default=2000),
        Field("cursor", _CURSOR, nullable_versions="0+", null_default=True),
    ),
)

_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_PARTITION = Struct(
    "DescribeTopicPartitionsResponsePartition",
    (
        Field("error_code", INT16),
        Field("partition_index", INT32),
        Field("leader_id", INT32),
        Field("leader_epoch", INT32, default=-1, ignorable=True),
        Field("replica_nodes", ArrayOf(INT32)),
        Field("isr_nodes", ArrayOf(INT32)),
        Field("eligible_leader_replicas", ArrayOf(INT32), nullable_versions="0+", null_default=True),
        Field("last_known_elr", ArrayOf(INT32), nullable_versions="0+", null_default=True),
        Field("offline_replicas", ArrayOf(INT32), ignorable=True),
    ),
)

_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_TOPIC = Struct(
    "DescribeTopicPartitionsResponseTopic",
    (
        Field("error_code", INT16),
        Field("name", STRING, nullable_versions="0+"),
        Field("topic_id", UUID, ignorable=True),
        Field("is_internal", BOOL, ignorable=True),
        Field("partitions", ArrayOf(_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_PARTITION)),
        Field("topic_authorized_operations", INT32, default=-2147483648),
    ),
)

RESPONSE = Struct(
    "DescribeTopicPartitionsResponse",
    (
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("topics", ArrayOf(_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_TOPIC)),
        Field("next_cursor", _CURSOR, nullable_versions="0+", null_default=True),
    ),
)

SPEC = ApiSpec(75, "DescribeTopicPartitions", 0, 0, 0, REQUEST, RESPONSE)
