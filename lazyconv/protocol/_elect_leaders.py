"""ElectLeaders (API key 43), versions 0–2, sans-IO.

An admin client triggers preferred (0) or unclean (1) leader election for partitions (null:
every partition); v1 adds the election type (KIP-460) and a top-level error code; v2 is the first
flexible version.

Declared as in Kafka 4.0.1's ElectLeadersRequest.json and ElectLeadersResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    (
        Field("topic", STRING),
        Field("partitions", ArrayOf(INT32)),
    ),
)

REQUEST = Struct(
    "ElectLeadersRequest",
    (
        Field("election_type", INT8, "1+"),
        Field("topic_partitions", ArrayOf(_TOPIC_PARTITIONS), nullable_versions="0+"),
        Field("timeout_ms", INT32, default=60000),
    ),
)

_PARTITION_RESULT = Struct(
    "PartitionResult",
    (
        Field("partition_id", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

_REPLICA_ELECTION_RESULT = Struct(
    "ReplicaElectionResult",
    (
        Field("topic", STRING),
        Field("partition_result", ArrayOf(_PARTITION_RESULT)),
    ),
)

RESPONSE = Struct(
    "ElectLeadersResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "1+"),
        Field("replica_election_results", ArrayOf(_REPLICA_ELECTION_RESULT)),
    ),
)

SPEC = ApiSpec(43, "ElectLeaders", 0, 2, 2, REQUEST, RESPONSE)
