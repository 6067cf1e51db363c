"""JoinGroup (API key 11), versions 0–9, sans-IO (JoinGroupRequest/Response.json).

v1 adds ``RebalanceTimeoutMs``; v2 throttle time; v4 makes a member without an id come back
with the id the coordinator assigned (error 79 MEMBER_ID_REQUIRED, KIP-394); v5 static
membership (``GroupInstanceId``); v6 is the first flexible version; v7 echoes ``ProtocolType``
and lets ``ProtocolName`` be null; v8 adds a ``Reason``; v9 ``SkipAssignment``.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, BYTES, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_PROTOCOL = Struct("JoinGroupRequestProtocol", (Field("name", STRING), Field("metadata", BYTES)))

REQUEST = Struct(
    "JoinGroupRequest",
    (
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, "1+", default=-1, ignorable=True),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "5+", nullable_versions="5+", null_default=True),
        Field("protocol_type", STRING),
        Field("protocols", ArrayOf(_PROTOCOL)),
        Field("reason", STRING, "8+", nullable_versions="8+", null_default=True, ignorable=True),
    ),
)

_MEMBER = Struct(
    "JoinGroupResponseMember",
    (
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "5+", nullable_versions="5+", null_default=True,
              ignorable=True),
        Field("metadata", BYTES),
    ),
)

RESPONSE = Struct(
    "JoinGroupResponse",
    (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("error_code", INT16),
        Field("generation_id", INT32, default=-1),
        Field("protocol_type", STRING, "7+", nullable_versions="7+", null_default=True, ignorable=True),
        Field("protocol_name", STRING, nullable_versions="7+"),
        Field("leader", STRING),
        Field("skip_assignment", BOOL, "9+"),
        Field("member_id", STRING),
        Field("members", ArrayOf(_MEMBER)),
    ),
)

SPEC = ApiSpec(11, "JoinGroup", 0, 9, 6, REQUEST, RESPONSE, first_client_throttled=3)
