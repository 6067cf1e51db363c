"""ListGroups (API key 16), versions 0–5, sans-IO (ListGroupsRequest/Response.json).

v1 adds throttle time; v3 is the first flexible version; v4 a states filter and each group's
state; v5 a types filter and each group's type.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "ListGroupsRequest",
    (
        Field("states_filter", ArrayOf(STRING), "4+"),
        Field("types_filter", ArrayOf(STRING), "5+"),
    ),
)

_GROUP = Struct(
    "ListedGroup",
    (
        Field("group_id", STRING),
        Field("protocol_type", STRING),
        Field("group_state", STRING, "4+", ignorable=True),
        Field("group_type", STRING, "5+", ignorable=True),
    ),
)

RESPONSE = Struct(
    "ListGroupsResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("groups", ArrayOf(_GROUP)),
    ),
)

SPEC = ApiSpec(16, "ListGroups", 0, 5, 3, REQUEST, RESPONSE, first_client_throttled=2)
