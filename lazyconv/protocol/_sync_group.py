"""SyncGroup (API key 14), versions 0–5, sans-IO (SyncGroupRequest/Response.json).

The group leader sends every member's assignment; every member gets its own back. v1 adds
throttle time; v3 ``GroupInstanceId``; v4 is the first flexible version; v5 the protocol type
and name in both directions.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_ASSIGNMENT = Struct(
    "SyncGroupRequestAssignment", (Field("member_id", STRING), Field("assignment", BYTES))
)

REQUEST = Struct(
    "SyncGroupRequest",
    (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable_versions="3+", null_default=True),
        Field("protocol_type", STRING, "5+", nullable_versions="5+", null_default=True, ignorable=True),
        Field("protocol_name", STRING, "5+", nullable_versions="5+", null_default=True, ignorable=True),
        Field("assignments", ArrayOf(_ASSIGNMENT)),
    ),
)

RESPONSE = Struct(
    "SyncGroupResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("protocol_type", STRING, "5+", nullable_versions="5+", null_default=True, ignorable=True),
        Field("protocol_name", STRING, "5+", nullable_versions="5+", null_default=True, ignorable=True),
        Field("assignment", BYTES),
    ),
)

SPEC = ApiSpec(14, "SyncGroup", 0, 5, 4, REQUEST, RESPONSE, first_client_throttled=2)
