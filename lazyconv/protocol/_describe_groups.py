"""DescribeGroups (API key 15), versions 0–5, sans-IO (DescribeGroupsRequest/Response.json).

v1 adds throttle time; v3 authorized operations; v4 ``GroupInstanceId`` per member; v5 is the
first flexible version; v6 (KIP-1043) answers an unknown group with GROUP_ID_NOT_FOUND and an
``ErrorMessage``.

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–6 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, BYTES, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC", "AUTHORIZED_OPERATIONS_OMITTED"]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

REQUEST = Struct(
    "DescribeGroupsRequest",
    (
        Field("groups", ArrayOf(STRING)),
        Field("include_authorized_operations", BOOL, "3+"),
    ),
)

_MEMBER = Struct(
    "DescribedGroupMember",
    (
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "4+", nullable_versions="4+", null_default=True,
              ignorable=True),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("member_metadata", BYTES),
        Field("member_assignment", BYTES),
    ),
)

_GROUP = Struct(
    "DescribedGroup",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, "6+", nullable_versions="6+", null_default=True),
        Field("group_id", STRING),
        Field("group_state", STRING),
        Field("protocol_type", STRING),
        Field("protocol_data", STRING),
        Field("members", ArrayOf(_MEMBER)),
        Field("authorized_operations", INT32, "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)

RESPONSE = Struct(
    "DescribeGroupsResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("groups", ArrayOf(_GROUP)),
    ),
)

SPEC = ApiSpec(15, "DescribeGroups", 0, 5, 5, REQUEST, RESPONSE, first_client_throttled=2)
KAFKA_SPEC = ApiSpec(15, "DescribeGroups", 0, 6, 5, REQUEST, RESPONSE, first_client_throttled=2)
