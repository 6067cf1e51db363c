"""DescribeAcls (API key 29), versions 1–3, sans-IO.

An admin client lists the ACLs matching a filter (resource type, name, pattern type, principal,
host, operation, permission). v1 adds the pattern type; v2 is the first flexible version; v3
the user resource type. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DescribeAclsRequest.json and DescribeAclsResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "DescribeAclsRequest",
    (
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", STRING, nullable_versions="0+"),
        Field("pattern_type_filter", INT8, "1+", default=3),
        Field("principal_filter", STRING, nullable_versions="0+"),
        Field("host_filter", STRING, nullable_versions="0+"),
        Field("operation", INT8),
        Field("permission_type", INT8),
    ),
)

_ACL_DESCRIPTION = Struct(
    "AclDescription",
    (
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    ),
)

_DESCRIBE_ACLS_RESOURCE = Struct(
    "DescribeAclsResource",
    (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("pattern_type", INT8, "1+", default=3),
        Field("acls", ArrayOf(_ACL_DESCRIPTION)),
    ),
)

RESPONSE = Struct(
    "DescribeAclsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("resources", ArrayOf(_DESCRIBE_ACLS_RESOURCE)),
    ),
)

SPEC = ApiSpec(29, "DescribeAcls", 1, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
