"""UpdateFeatures (API key 57), versions 0–2, sans-IO.

An admin client upgrades or downgrades finalized feature levels such as metadata.version
(KIP-584, KIP-778); brokers forward it to the controller. v1 adds ``ValidateOnly``; v2 answers
without per-feature results.

Declared as in Kafka 4.0.1's UpdateFeaturesRequest.json and UpdateFeaturesResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_FEATURE_UPDATE_KEY = Struct(
    "FeatureUpdateKey",
    (
        Field("feature", STRING),
        Field("max_version_level", INT16),
        Field("allow_downgrade", BOOL, "0"),
        Field("upgrade_type", INT8, "1+", default=1),
    ),
)

REQUEST = Struct(
    "UpdateFeaturesRequest",
    (
        Field("timeout_ms", INT32, default=60000),
        Field("feature_updates", ArrayOf(_FEATURE_UPDATE_KEY)),
        Field("validate_only", BOOL, "1+"),
    ),
)

_UPDATABLE_FEATURE_RESULT = Struct(
    "UpdatableFeatureResult",
    (
        Field("feature", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

RESPONSE = Struct(
    "UpdateFeaturesResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("results", ArrayOf(_UPDATABLE_FEATURE_RESULT), "0-1", ignorable=True),
    ),
)

SPEC = ApiSpec(57, "UpdateFeatures", 0, 2, 0, REQUEST, RESPONSE)
