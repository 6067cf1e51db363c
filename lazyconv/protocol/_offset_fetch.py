"""OffsetFetch (API key 9), versions 0–8, sans-IO (OffsetFetchRequest/Response.json).

v1 reads Kafka-stored offsets (v0 read ZooKeeper's; here both read the same store); v2 lets
``Topics`` be null (= every partition the group committed) and adds a top-level error code; v3
throttle time; v5 the committed leader epoch; v6 is the first flexible version; v7
``RequireStable``; v8 (KIP-709) batches groups: ``Groups`` replaces the top-level fields; v9
(KIP-848) adds each group's ``MemberId`` and ``MemberEpoch`` (checked by the consumer protocol).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 1–9 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

_REQUEST_TOPIC = Struct(
    "OffsetFetchRequestTopic",
    (Field("name", STRING, "0-7"), Field("partition_indexes", ArrayOf(INT32), "0-7")),
)

_REQUEST_GROUP_TOPIC = Struct(
    "OffsetFetchRequestTopics",
    (Field("name", STRING, "8+"), Field("partition_indexes", ArrayOf(INT32), "8+")),
)

_REQUEST_GROUP = Struct(
    "OffsetFetchRequestGroup",
    (
        Field("group_id", STRING, "8+"),
        Field("member_id", STRING, "9+", nullable_versions="9+", null_default=True, ignorable=True),
        Field("member_epoch", INT32, "9+", default=-1, ignorable=True),
        Field("topics", ArrayOf(_REQUEST_GROUP_TOPIC), "8+", nullable_versions="8+"),
    ),
)

REQUEST = Struct(
    "OffsetFetchRequest",
    (
        Field("group_id", STRING, "0-7"),
        Field("topics", ArrayOf(_REQUEST_TOPIC), "0-7", nullable_versions="2-7"),
        Field("groups", ArrayOf(_REQUEST_GROUP), "8+"),
        Field("require_stable", BOOL, "7+"),
    ),
)

_RESPONSE_PARTITION = Struct(
    "OffsetFetchResponsePartition",
    (
        Field("partition_index", INT32, "0-7"),
        Field("committed_offset", INT64, "0-7"),
        Field("committed_leader_epoch", INT32, "5-7", default=-1, ignorable=True),
        Field("metadata", STRING, "0-7", nullable_versions="0-7"),
        Field("error_code", INT16, "0-7"),
    ),
)

_RESPONSE_TOPIC = Struct(
    "OffsetFetchResponseTopic",
    (Field("name", STRING, "0-7"), Field("partitions", ArrayOf(_RESPONSE_PARTITION), "0-7")),
)

_GROUP_PARTITION = Struct(
    "OffsetFetchResponsePartitions",
    (
        Field("partition_index", INT32, "8+"),
        Field("committed_offset", INT64, "8+"),
        Field("committed_leader_epoch", INT32, "8+", default=-1, ignorable=True),
        Field("metadata", STRING, "8+", nullable_versions="8+"),
        Field("error_code", INT16, "8+"),
    ),
)

_GROUP_TOPIC = Struct(
    "OffsetFetchResponseTopics",
    (Field("name", STRING, "8+"), Field("partitions", ArrayOf(_GROUP_PARTITION), "8+")),
)

_RESPONSE_GROUP = Struct(
    "OffsetFetchResponseGroup",
    (
        Field("group_id", STRING, "8+"),
        Field("topics", ArrayOf(_GROUP_TOPIC), "8+"),
        Field("error_code", INT16, "8+"),
    ),
)

RESPONSE = Struct(
    "OffsetFetchResponse",
    (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("topics", ArrayOf(_RESPONSE_TOPIC), "0-7"),
        Field("error_code", INT16, "2-7", ignorable=True),
        Field("groups", ArrayOf(_RESPONSE_GROUP), "8+"),
    ),
)

SPEC = ApiSpec(9, "OffsetFetch", 0, 8, 6, REQUEST, RESPONSE, first_client_throttled=4)
KAFKA_SPEC = ApiSpec(9, "OffsetFetch", 0, 9, 6, REQUEST, RESPONSE, first_client_throttled=4)
