"""UnregisterBroker (API key 64), version 0, sans-IO.

An admin client removes a broker that is gone for good from the KRaft cluster's registrations
(KIP-631); brokers forward it to the controller.

Declared as in Kafka 4.0.1's UnregisterBrokerRequest.json and UnregisterBrokerResponse.json;
field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct("UnregisterBrokerRequest", (Field("broker_id", INT32),))

RESPONSE = Struct(
    "UnregisterBrokerResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

SPEC = ApiSpec(64, "UnregisterBroker", 0, 0, 0, REQUEST, RESPONSE)
