"""OffsetCommit (API key 8), versions 0–8, sans-IO (OffsetCommitRequest/Response.json).

v1 adds the generation and member id (v0 commits are "simple", outside any generation) and a
per-partition commit timestamp (v1 only); v2–4 a retention time; v3 throttle time; v6 the
committed leader epoch; v7 ``GroupInstanceId``; v8 is the first flexible version. v9 changes no
field: it belongs to the KIP-848 consumer protocol (the member epoch in
``GenerationIdOrMemberEpoch``), which ``serve`` does not speak.

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 2–9 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

_REQUEST_PARTITION = Struct(
    "OffsetCommitRequestPartition",
    (
        Field("partition_index", INT32),
        Field("committed_offset", INT64),
        Field("committed_leader_epoch", INT32, "6+", default=-1, ignorable=True),
        Field("commit_timestamp", INT64, "1", default=-1),
        Field("committed_metadata", STRING, nullable_versions="0+"),
    ),
)

_REQUEST_TOPIC = Struct(
    "OffsetCommitRequestTopic",
    (Field("name", STRING), Field("partitions", ArrayOf(_REQUEST_PARTITION))),
)

REQUEST = Struct(
    "OffsetCommitRequest",
    (
        Field("group_id", STRING),
        Field("generation_id_or_member_epoch", INT32, "1+", default=-1, ignorable=True),
        Field("member_id", STRING, "1+", ignorable=True),
        Field("group_instance_id", STRING, "7+", nullable_versions="7+", null_default=True),
        Field("retention_time_ms", INT64, "2-4", default=-1, ignorable=True),
        Field("topics", ArrayOf(_REQUEST_TOPIC)),
    ),
)

_RESPONSE_PARTITION = Struct(
    "OffsetCommitResponsePartition", (Field("partition_index", INT32), Field("error_code", INT16))
)

_RESPONSE_TOPIC = Struct(
    "OffsetCommitResponseTopic",
    (Field("name", STRING), Field("partitions", ArrayOf(_RESPONSE_PARTITION))),
)

RESPONSE = Struct(
    "OffsetCommitResponse",
    (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("topics", ArrayOf(_RESPONSE_TOPIC)),
    ),
)

SPEC = ApiSpec(8, "OffsetCommit", 0, 8, 8, REQUEST, RESPONSE, first_client_throttled=4)
KAFKA_SPEC = ApiSpec(8, "OffsetCommit", 0, 9, 8, REQUEST, RESPONSE, first_client_throttled=4)
