"""SaslAuthenticate (API key 36), versions 0–2, sans-IO (SaslAuthenticateRequest/Response.json).

One SASL token each way per round trip, after a SaslHandshake v1. v1 adds the session lifetime
to the response (KIP-368: a client that sees a positive lifetime re-authenticates before it
ends); v2 is the first flexible version.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT64, STRING, Field, Struct

__all__ = ["SPEC", "API_KEY"]

REQUEST = Struct("SaslAuthenticateRequest", (Field("auth_bytes", BYTES),))

RESPONSE = Struct(
    "SaslAuthenticateResponse",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("auth_bytes", BYTES),
        Field("session_lifetime_ms", INT64, "1+", ignorable=True),
    ),
)

SPEC = ApiSpec(36, "SaslAuthenticate", 0, 2, 2, REQUEST, RESPONSE)
API_KEY = SPEC.key
