"""CreateTopics (API key 19), versions 2–7, sans-IO.

An admin client creates topics: partitions and replication factor, or an explicit replica
assignment, and topic configs. v1 adds ``ValidateOnly``; v4 (KIP-464) lets partitions and
replication factor be −1 (the broker's defaults); v5 is the first flexible version and returns
each topic's configs (KIP-525); v6 may answer THROTTLING_QUOTA_EXCEEDED (KIP-599); v7 returns topic
ids. Kafka 4.0 dropped v0–1.

Declared as in Kafka 4.0.1's CreateTopicsRequest.json and CreateTopicsResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, UUID, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_CREATABLE_REPLICA_ASSIGNMENT = Struct(
    "CreatableReplicaAssignment",
    (
        Field("partition_index", INT32),
        Field("broker_ids", ArrayOf(INT32)),
    ),
)

_CREATABLE_TOPIC_CONFIG = Struct(
    "CreatableTopicConfig",
    (
        Field("name", STRING),
        Field("value", STRING, nullable_versions="0+"),
    ),
)

_CREATABLE_TOPIC = Struct(
    "CreatableTopic",
    (
        Field("name", STRING),
        Field("num_partitions", INT32),
        Field("replication_factor", INT16),
        Field("assignments", ArrayOf(_CREATABLE_REPLICA_ASSIGNMENT)),
        Field("configs", ArrayOf(_CREATABLE_TOPIC_CONFIG)),
    ),
)

REQUEST = Struct(
    "CreateTopicsRequest",
    (
        Field("topics", ArrayOf(_CREATABLE_TOPIC)),
        Field("timeout_ms", INT32, default=60000),
        Field("validate_only", BOOL, "1+"),
    ),
)

_CREATABLE_TOPIC_CONFIGS = Struct(
    "CreatableTopicConfigs",
    (
        Field("name", STRING, "5+"),
        Field("value", STRING, "5+", nullable_versions="5+"),
        Field("read_only", BOOL, "5+"),
        Field("config_source", INT8, "5+", default=-1, ignorable=True),
        Field("is_sensitive", BOOL, "5+"),
    ),
)

_CREATABLE_TOPIC_RESULT = Struct(
    "CreatableTopicResult",
    (
        Field("name", STRING),
        Field("topic_id", UUID, "7+", ignorable=True),
        Field("error_code", INT16),
        Field("error_message", STRING, "1+", nullable_versions="0+", ignorable=True),
        Field("topic_config_error_code", INT16, "5+", tag=0, tagged_versions="5+", ignorable=True),
        Field("num_partitions", INT32, "5+", default=-1, ignorable=True),
        Field("replication_factor", INT16, "5+", default=-1, ignorable=True),
        Field("configs", ArrayOf(_CREATABLE_TOPIC_CONFIGS), "5+", nullable_versions="5+",
              ignorable=True),
    ),
)

RESPONSE = Struct(
    "CreateTopicsResponse",
    (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", ArrayOf(_CREATABLE_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(19, "CreateTopics", 2, 7, 5, REQUEST, RESPONSE, first_client_throttled=3)
