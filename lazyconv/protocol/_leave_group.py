"""LeaveGroup (API key 13), versions 0–5, sans-IO (LeaveGroupRequest/Response.json).

v0–2 name one ``MemberId``; v3 (KIP-345) a batch of ``Members`` with a per-member answer; v4 is
the first flexible version; v5 adds a ``Reason`` per member.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_MEMBER_IDENTITY = Struct(
    "MemberIdentity",
    (
        Field("member_id", STRING, "3+"),
        Field("group_instance_id", STRING, "3+", nullable_versions="3+", null_default=True),
        Field("reason", STRING, "5+", nullable_versions="5+", null_default=True, ignorable=True),
    ),
)

REQUEST = Struct(
    "LeaveGroupRequest",
    (
        Field("group_id", STRING),
        Field("member_id", STRING, "0-2"),
        Field("members", ArrayOf(_MEMBER_IDENTITY), "3+"),
    ),
)

_MEMBER_RESPONSE = Struct(
    "MemberResponse",
    (
        Field("member_id", STRING, "3+"),
        Field("group_instance_id", STRING, "3+", nullable_versions="3+", null_default=True),
        Field("error_code", INT16, "3+"),
    ),
)

RESPONSE = Struct(
    "LeaveGroupResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("members", ArrayOf(_MEMBER_RESPONSE), "3+"),
    ),
)

SPEC = ApiSpec(13, "LeaveGroup", 0, 5, 4, REQUEST, RESPONSE, first_client_throttled=2)
