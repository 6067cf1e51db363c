"""DeleteGroups (API key 42), versions 0–2, sans-IO.

An admin client deletes empty consumer groups; sent to each group's coordinator. v2 is the first
flexible version.

Declared as in Kafka 4.0.1's DeleteGroupsRequest.json and DeleteGroupsResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct("DeleteGroupsRequest", (Field("groups_names", ArrayOf(STRING)),))

_DELETABLE_GROUP_RESULT = Struct(
    "DeletableGroupResult",
    (
        Field("group_id", STRING),
        Field("error_code", INT16),
    ),
)

RESPONSE = Struct(
    "DeleteGroupsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_DELETABLE_GROUP_RESULT)),
    ),
)

SPEC = ApiSpec(42, "DeleteGroups", 0, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
