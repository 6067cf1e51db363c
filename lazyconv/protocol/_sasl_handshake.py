"""SaslHandshake (API key 17), versions 0–1, sans-IO (SaslHandshakeRequest/Response.json).

The client names a mechanism; the broker answers with the mechanisms it enables. After v0 the
SASL tokens follow as raw size-prefixed frames without Kafka headers (0.10 clients); after v1
they travel in SaslAuthenticate requests (:mod:`lazyconv.protocol._sasl_authenticate`). No
version is flexible (KAFKA-9577: clients up to 2.4 negotiate this API wrongly, so it never got
a v2).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "API_KEY"]

REQUEST = Struct("SaslHandshakeRequest", (Field("mechanism", STRING),))

RESPONSE = Struct(
    "SaslHandshakeResponse",
    (Field("error_code", INT16), Field("mechanisms", ArrayOf(STRING))),
)

SPEC = ApiSpec(17, "SaslHandshake", 0, 1, None, REQUEST, RESPONSE)
API_KEY = SPEC.key
