"""AlterClientQuotas (API key 49), versions 0–1, sans-IO.

An admin client sets or removes client quotas per entity (KIP-546). v1 is the first flexible
version.

Declared as in Kafka 4.0.1's AlterClientQuotasRequest.json and AlterClientQuotasResponse.json;
field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, FLOAT64, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_ENTITY_DATA = Struct(
    "EntityData",
    (
        Field("entity_type", STRING),
        Field("entity_name", STRING, nullable_versions="0+"),
    ),
)

_OP_DATA = Struct("OpData", (Field("key", STRING), Field("value", FLOAT64), Field("remove", BOOL)))

_ENTRY_DATA = Struct(
    "EntryData",
    (
        Field("entity", ArrayOf(_ENTITY_DATA)),
        Field("ops", ArrayOf(_OP_DATA)),
    ),
)

REQUEST = Struct(
    "AlterClientQuotasRequest",
    (
        Field("entries", ArrayOf(_ENTRY_DATA)),
        Field("validate_only", BOOL),
    ),
)

_RESPONSE_ENTRY_DATA = Struct(
    "EntryData",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("entity", ArrayOf(_ENTITY_DATA)),
    ),
)

RESPONSE = Struct(
    "AlterClientQuotasResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("entries", ArrayOf(_RESPONSE_ENTRY_DATA)),
    ),
)

SPEC = ApiSpec(49, "AlterClientQuotas", 0, 1, 1, REQUEST, RESPONSE)
