"""DescribeQuorum (API key 55), versions 0–2, sans-IO.

The KRaft metadata quorum: leader, epoch, high watermark, voters and observers with their log
end offsets (KIP-595); brokers forward it to the active controller. v1 adds fetch and caught-up
timestamps (KIP-836); v2 (KIP-853) replica directory ids, error messages and the voters' nodes
with their listeners.

Declared as in Kafka 4.0.1's DescribeQuorumRequest.json and DescribeQuorumResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    Field,
    Struct,
)

__all__ = ["SPEC"]

_PARTITION_DATA = Struct("PartitionData", (Field("partition_index", INT32),))

_TOPIC_DATA = Struct(
    "TopicData",
    (
        Field("topic_name", STRING),
        Field("partitions", ArrayOf(_PARTITION_DATA)),
    ),
)

REQUEST = Struct("DescribeQuorumRequest", (Field("topics", ArrayOf(_TOPIC_DATA)),))

_REPLICA_STATE = Struct(
    "ReplicaState",
    (
        Field("replica_id", INT32),
        Field("replica_directory_id", UUID, "2+"),
        Field("log_end_offset", INT64),
        Field("last_fetch_timestamp", INT64, "1+", default=-1, ignorable=True),
        Field("last_caught_up_timestamp", INT64, "1+", default=-1, ignorable=True),
    ),
)

_RESPONSE_PARTITION_DATA = Struct(
    "PartitionData",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, "2+", nullable_versions="2+", ignorable=True),
        Field("leader_id", INT32),
        Field("leader_epoch", INT32),
        Field("high_watermark", INT64),
        Field("current_voters", ArrayOf(_REPLICA_STATE)),
        Field("observers", ArrayOf(_REPLICA_STATE)),
    ),
)

_RESPONSE_TOPIC_DATA = Struct(
    "TopicData",
    (
        Field("topic_name", STRING),
        Field("partitions", ArrayOf(_RESPONSE_PARTITION_DATA)),
    ),
)

_LISTENER = Struct(
    "Listener",
    (
        Field("name", STRING, "2+"),
        Field("host", STRING, "2+"),
        Field("port", UINT16, "2+"),
    ),
)

_NODE = Struct(
    "Node",
    (
        Field("node_id", INT32, "2+"),
        Field("listeners", ArrayOf(_LISTENER), "2+"),
    ),
)

RESPONSE = Struct(
    "DescribeQuorumResponse",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, "2+", nullable_versions="2+", ignorable=True),
        Field("topics", ArrayOf(_RESPONSE_TOPIC_DATA)),
        Field("nodes", ArrayOf(_NODE), "2+"),
    ),
)

SPEC = ApiSpec(55, "DescribeQuorum", 0, 2, 0, REQUEST, RESPONSE)
