"""Heartbeat (API key 12), versions 0–4, sans-IO (HeartbeatRequest/Response.json).

v1 adds throttle time; v3 ``GroupInstanceId``; v4 is the first flexible version.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "HeartbeatRequest",
    (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable_versions="3+", null_default=True),
    ),
)

RESPONSE = Struct(
    "HeartbeatResponse",
    (Field("throttle_time_ms", INT32, "1+", ignorable=True), Field("error_code", INT16)),
)

SPEC = ApiSpec(12, "Heartbeat", 0, 4, 4, REQUEST, RESPONSE, first_client_throttled=2)
