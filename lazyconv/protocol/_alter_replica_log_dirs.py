"""AlterReplicaLogDirs (API key 34), versions 1–2, sans-IO.

An admin client moves replicas between log directories of the broker it asks (the answer
covers only that broker's replicas). v2 is the first flexible version. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's AlterReplicaLogDirsRequest.json and
AlterReplicaLogDirsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_ALTER_REPLICA_LOG_DIR_TOPIC = Struct(
    "AlterReplicaLogDirTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(INT32)),
    ),
)

_ALTER_REPLICA_LOG_DIR = Struct(
    "AlterReplicaLogDir",
    (
        Field("path", STRING),
        Field("topics", ArrayOf(_ALTER_REPLICA_LOG_DIR_TOPIC)),
    ),
)

REQUEST = Struct("AlterReplicaLogDirsRequest", (Field("dirs", ArrayOf(_ALTER_REPLICA_LOG_DIR)),))

_ALTER_REPLICA_LOG_DIR_PARTITION_RESULT = Struct(
    "AlterReplicaLogDirPartitionResult",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    ),
)

_ALTER_REPLICA_LOG_DIR_TOPIC_RESULT = Struct(
    "AlterReplicaLogDirTopicResult",
    (
        Field("topic_name", STRING),
        Field("partitions", ArrayOf(_ALTER_REPLICA_LOG_DIR_PARTITION_RESULT)),
    ),
)

RESPONSE = Struct(
    "AlterReplicaLogDirsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_ALTER_REPLICA_LOG_DIR_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(34, "AlterReplicaLogDirs", 1, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
