"""TxnOffsetCommit (API key 28), versions 0–3, sans-IO.

Offsets committed inside a transaction: they become the group's committed offsets only when
the transaction commits. v2 adds the committed leader epoch; v3 is the first flexible version
and adds the member's generation, id and instance id; v4 and v5 (KIP-890) change no field (with
transactions V2, v5 also adds the group to the transaction: no AddOffsetsToTxn).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–5 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

_REQUEST_PARTITION = Struct(
    "TxnOffsetCommitRequestPartition",
    (
        Field("partition_index", INT32),
        Field("committed_offset", INT64),
        Field("committed_leader_epoch", INT32, "2+", default=-1, ignorable=True),
        Field("committed_metadata", STRING, nullable_versions="0+"),
    ),
)

_REQUEST_TOPIC = Struct(
    "TxnOffsetCommitRequestTopic",
    (Field("name", STRING), Field("partitions", ArrayOf(_REQUEST_PARTITION))),
)

REQUEST = Struct(
    "TxnOffsetCommitRequest",
    (
        Field("transactional_id", STRING),
        Field("group_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("generation_id", INT32, "3+", default=-1),
        Field("member_id", STRING, "3+"),
        Field("group_instance_id", STRING, "3+", nullable_versions="3+", null_default=True),
        Field("topics", ArrayOf(_REQUEST_TOPIC)),
    ),
)

_RESPONSE_PARTITION = Struct(
    "TxnOffsetCommitResponsePartition", (Field("partition_index", INT32), Field("error_code", INT16))
)

_RESPONSE_TOPIC = Struct(
    "TxnOffsetCommitResponseTopic",
    (Field("name", STRING), Field("partitions", ArrayOf(_RESPONSE_PARTITION))),
)

RESPONSE = Struct(
    "TxnOffsetCommitResponse",
    (Field("throttle_time_ms", INT32), Field("topics", ArrayOf(_RESPONSE_TOPIC))),
)

SPEC = ApiSpec(28, "TxnOffsetCommit", 0, 3, 3, REQUEST, RESPONSE, first_client_throttled=1)
KAFKA_SPEC = ApiSpec(28, "TxnOffsetCommit", 0, 5, 3, REQUEST, RESPONSE, first_client_throttled=1)
