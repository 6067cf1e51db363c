"""CreatePartitions (API key 37), versions 0–3, sans-IO.

An admin client adds partitions to topics, optionally with their replica assignment. v2 is the
first flexible version; v3 may answer THROTTLING_QUOTA_EXCEEDED (KIP-599).

Declared as in Kafka 4.0.1's CreatePartitionsRequest.json and CreatePartitionsResponse.json;
field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_CREATE_PARTITIONS_ASSIGNMENT = Struct(
    "CreatePartitionsAssignment",
    (
        Field("broker_ids", ArrayOf(INT32)),
    ),
)

_CREATE_PARTITIONS_TOPIC = Struct(
    "CreatePartitionsTopic",
    (
        Field("name", STRING),
        Field("count", INT32),
        Field("assignments", ArrayOf(_CREATE_PARTITIONS_ASSIGNMENT), nullable_versions="0+"),
    ),
)

REQUEST = Struct(
    "CreatePartitionsRequest",
    (
        Field("topics", ArrayOf(_CREATE_PARTITIONS_TOPIC)),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL),
    ),
)

_CREATE_PARTITIONS_TOPIC_RESULT = Struct(
    "CreatePartitionsTopicResult",
    (
        Field("name", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", null_default=True),
    ),
)

RESPONSE = Struct(
    "CreatePartitionsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_CREATE_PARTITIONS_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(37, "CreatePartitions", 0, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
