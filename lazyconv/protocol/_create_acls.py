"""CreateAcls (API key 30), versions 1–3, sans-IO.

An admin client creates ACL bindings. v1 adds the pattern type; v2 is the first flexible
version; v3 the user resource type. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's CreateAclsRequest.json and CreateAclsResponse.json; field names in
snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_ACL_CREATION = Struct(
    "AclCreation",
    (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("resource_pattern_type", INT8, "1+", default=3),
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    ),
)

REQUEST = Struct("CreateAclsRequest", (Field("creations", ArrayOf(_ACL_CREATION)),))

_ACL_CREATION_RESULT = Struct(
    "AclCreationResult",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

RESPONSE = Struct(
    "CreateAclsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_ACL_CREATION_RESULT)),
    ),
)

SPEC = ApiSpec(30, "CreateAcls", 1, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
