"""AlterPartitionReassignments (API key 45), version 0, sans-IO.

An admin client starts or cancels (null replicas) partition reassignments (KIP-455).

Declared as in Kafka 4.0.1's AlterPartitionReassignmentsRequest.json and
AlterPartitionReassignmentsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_REASSIGNABLE_PARTITION = Struct(
    "ReassignablePartition",
    (
        Field("partition_index", INT32),
        Field("replicas", ArrayOf(INT32), nullable_versions="0+", null_default=True),
    ),
)

_REASSIGNABLE_TOPIC = Struct(
    "ReassignableTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_REASSIGNABLE_PARTITION)),
    ),
)

REQUEST = Struct(
    "AlterPartitionReassignmentsRequest",
    (
        Field("timeout_ms", INT32, default=60000),
        Field("topics", ArrayOf(_REASSIGNABLE_TOPIC)),
    ),
)

_REASSIGNABLE_PARTITION_RESPONSE = Struct(
    "ReassignablePartitionResponse",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

_REASSIGNABLE_TOPIC_RESPONSE = Struct(
    "ReassignableTopicResponse",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_REASSIGNABLE_PARTITION_RESPONSE)),
    ),
)

RESPONSE = Struct(
    "AlterPartitionReassignmentsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("responses", ArrayOf(_REASSIGNABLE_TOPIC_RESPONSE)),
    ),
)

SPEC = ApiSpec(45, "AlterPartitionReassignments", 0, 0, 0, REQUEST, RESPONSE)
