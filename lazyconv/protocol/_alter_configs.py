"""AlterConfigs (API key 33), versions 0–2, sans-IO.

An admin client replaces resources' whole configs (the legacy, non-incremental call: prefer
IncrementalAlterConfigs). Broker and broker-logger resources go to that broker. v2 is the first
flexible version.

Declared as in Kafka 4.0.1's AlterConfigsRequest.json and AlterConfigsResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_ALTERABLE_CONFIG = Struct(
    "AlterableConfig",
    (
        Field("name", STRING),
        Field("value", STRING, nullable_versions="0+"),
    ),
)

_ALTER_CONFIGS_RESOURCE = Struct(
    "AlterConfigsResource",
    (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", ArrayOf(_ALTERABLE_CONFIG)),
    ),
)

REQUEST = Struct(
    "AlterConfigsRequest",
    (
        Field("resources", ArrayOf(_ALTER_CONFIGS_RESOURCE)),
        Field("validate_only", BOOL),
    ),
)

_ALTER_CONFIGS_RESOURCE_RESPONSE = Struct(
    "AlterConfigsResourceResponse",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
    ),
)

RESPONSE = Struct(
    "AlterConfigsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("responses", ArrayOf(_ALTER_CONFIGS_RESOURCE_RESPONSE)),
    ),
)

SPEC = ApiSpec(33, "AlterConfigs", 0, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
