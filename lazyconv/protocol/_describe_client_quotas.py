"""DescribeClientQuotas (API key 48), versions 0–1, sans-IO.

An admin client reads client quotas (user, client-id, ip entities) matching filter components
(KIP-546). v1 is the first flexible version.

Declared as in Kafka 4.0.1's DescribeClientQuotasRequest.json and
DescribeClientQuotasResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    STRING,
    ArrayOf,
    Field,
    Struct,
)

__all__ = ["SPEC"]

_COMPONENT_DATA = Struct(
    "ComponentData",
    (
        Field("entity_type", STRING),
        Field("match_type", INT8),
        Field("match", STRING, nullable_versions="0+"),
    ),
)

REQUEST = Struct(
    "DescribeClientQuotasRequest",
    (
        Field("components", ArrayOf(_COMPONENT_DATA)),
        Field("strict", BOOL),
    ),
)

_ENTITY_DATA = Struct(
    "EntityData",
    (
        Field("entity_type", STRING),
        Field("entity_name", STRING, nullable_versions="0+"),
    ),
)

_VALUE_DATA = Struct("ValueData", (Field("key", STRING), Field("value", FLOAT64)))

_ENTRY_DATA = Struct(
    "EntryData",
    (
        Field("entity", ArrayOf(_ENTITY_DATA)),
        Field("values", ArrayOf(_VALUE_DATA)),
    ),
)

RESPONSE = Struct(
    "DescribeClientQuotasResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("entries", ArrayOf(_ENTRY_DATA), nullable_versions="0+"),
    ),
)

SPEC = ApiSpec(48, "DescribeClientQuotas", 0, 1, 1, REQUEST, RESPONSE)
