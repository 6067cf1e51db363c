"""OffsetForLeaderEpoch (API key 23), versions 2–4, sans-IO.

The end offset of a leader epoch, per partition: a consumer (``ReplicaId`` −1) or follower uses
it to find where its log diverged after a leader change (KIP-101, KIP-320); sent to each
partition's leader. v2 adds the current leader epoch (fencing); v3 ``ReplicaId``; v4 is the first
flexible version. Kafka 4.0 dropped v0–1.

Declared as in Kafka 4.0.1's OffsetForLeaderEpochRequest.json and
OffsetForLeaderEpochResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_OFFSET_FOR_LEADER_PARTITION = Struct(
    "OffsetForLeaderPartition",
    (
        Field("partition", INT32),
        Field("current_leader_epoch", INT32, "2+", default=-1, ignorable=True),
        Field("leader_epoch", INT32),
    ),
)

_OFFSET_FOR_LEADER_TOPIC = Struct(
    "OffsetForLeaderTopic",
    (
        Field("topic", STRING),
        Field("partitions", ArrayOf(_OFFSET_FOR_LEADER_PARTITION)),
    ),
)

REQUEST = Struct(
    "OffsetForLeaderEpochRequest",
    (
        Field("replica_id", INT32, "3+", default=-2, ignorable=True),
        Field("topics", ArrayOf(_OFFSET_FOR_LEADER_TOPIC)),
    ),
)

_EPOCH_END_OFFSET = Struct(
    "EpochEndOffset",
    (
        Field("error_code", INT16),
        Field("partition", INT32),
        Field("leader_epoch", INT32, "1+", default=-1, ignorable=True),
        Field("end_offset", INT64, default=-1),
    ),
)

_OFFSET_FOR_LEADER_TOPIC_RESULT = Struct(
    "OffsetForLeaderTopicResult",
    (
        Field("topic", STRING),
        Field("partitions", ArrayOf(_EPOCH_END_OFFSET)),
    ),
)

RESPONSE = Struct(
    "OffsetForLeaderEpochResponse",
    (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", ArrayOf(_OFFSET_FOR_LEADER_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(23, "OffsetForLeaderEpoch", 2, 4, 4, REQUEST, RESPONSE)
