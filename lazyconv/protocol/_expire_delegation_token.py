"""ExpireDelegationToken (API key 40), versions 1–2, sans-IO.

A renewer changes a delegation token's expiry (a negative period expires it at once). v2 is the
first flexible version. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's ExpireDelegationTokenRequest.json and
ExpireDelegationTokenResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT32, INT64, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "ExpireDelegationTokenRequest",
    (
        Field("hmac", BYTES),
        Field("expiry_time_period_ms", INT64),
    ),
)

RESPONSE = Struct(
    "ExpireDelegationTokenResponse",
    (
        Field("error_code", INT16),
        Field("expiry_timestamp_ms", INT64),
        Field("throttle_time_ms", INT32),
    ),
)

SPEC = ApiSpec(40, "ExpireDelegationToken", 1, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
