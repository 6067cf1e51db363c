"""RenewDelegationToken (API key 39), versions 1–2, sans-IO.

A renewer extends a delegation token's expiry, identified by its HMAC. v2 is the first flexible
version. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's RenewDelegationTokenRequest.json and
RenewDelegationTokenResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT32, INT64, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "RenewDelegationTokenRequest",
    (
        Field("hmac", BYTES),
        Field("renew_period_ms", INT64),
    ),
)

RESPONSE = Struct(
    "RenewDelegationTokenResponse",
    (
        Field("error_code", INT16),
        Field("expiry_timestamp_ms", INT64),
        Field("throttle_time_ms", INT32),
    ),
)

SPEC = ApiSpec(39, "RenewDelegationToken", 1, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
