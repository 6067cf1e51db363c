"""ConsumerGroupDescribe (API key 69), versions 0–1, sans-IO.

An admin client describes KIP-848 consumer groups (members, assignments, epochs); sent to each
group's coordinator. v1 answers with each member's type (KIP-1099).

Declared as in Kafka 4.0.1's ConsumerGroupDescribeRequest.json and
ConsumerGroupDescribeResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, UUID, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "ConsumerGroupDescribeRequest",
    (
        Field("group_ids", ArrayOf(STRING)),
        Field("include_authorized_operations", BOOL),
    ),
)

_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    (
        Field("topic_id", UUID),
        Field("topic_name", STRING),
        Field("partitions", ArrayOf(INT32)),
    ),
)

_ASSIGNMENT = Struct("Assignment", (Field("topic_partitions", ArrayOf(_TOPIC_PARTITIONS)),))

_MEMBER = Struct(
    "Member",
    (
        Field("member_id", STRING),
        Field("instance_id", STRING, nullable_versions="0+", null_default=True),
        Field("rack_id", STRING, nullable_versions="0+", null_default=True),
        Field("member_epoch", INT32),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("subscribed_topic_names", ArrayOf(STRING)),
        Field("subscribed_topic_regex", STRING, nullable_versions="0+", null_default=True),
        Field("assignment", _ASSIGNMENT),
        Field("target_assignment", _ASSIGNMENT),
        Field("member_type", INT8, "1+", default=-1, ignorable=True),
    ),
)

_DESCRIBED_GROUP = Struct(
    "DescribedGroup",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", null_default=True),
        Field("group_id", STRING),
        Field("group_state", STRING),
        Field("group_epoch", INT32),
        Field("assignment_epoch", INT32),
        Field("assignor_name", STRING),
        Field("members", ArrayOf(_MEMBER)),
        Field("authorized_operations", INT32, default=-2147483648),
    ),
)

RESPONSE = Struct(
    "ConsumerGroupDescribeResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("groups", ArrayOf(_DESCRIBED_GROUP)),
    ),
)

SPEC = ApiSpec(69, "ConsumerGroupDescribe", 0, 1, 0, REQUEST, RESPONSE)
