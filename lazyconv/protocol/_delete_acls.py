"""DeleteAcls (API key 31), versions 1–3, sans-IO.

An admin client deletes the ACL bindings matching filters and gets back what each filter
matched. v1 adds the pattern type; v2 is the first flexible version; v3 the user resource type.
Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DeleteAclsRequest.json and DeleteAclsResponse.json; field names in
snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DELETE_ACLS_FILTER = Struct(
    "DeleteAclsFilter",
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

REQUEST = Struct("DeleteAclsRequest", (Field("filters", ArrayOf(_DELETE_ACLS_FILTER)),))

_DELETE_ACLS_MATCHING_ACL = Struct(
    "DeleteAclsMatchingAcl",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("pattern_type", INT8, "1+", default=3),
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    ),
)

_DELETE_ACLS_FILTER_RESULT = Struct(
    "DeleteAclsFilterResult",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("matching_acls", ArrayOf(_DELETE_ACLS_MATCHING_ACL)),
    ),
)

RESPONSE = Struct(
    "DeleteAclsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("filter_results", ArrayOf(_DELETE_ACLS_FILTER_RESULT)),
    ),
)

SPEC = ApiSpec(31, "DeleteAcls", 1, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
