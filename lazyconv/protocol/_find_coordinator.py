"""FindCoordinator (API key 10; "GroupCoordinator" in v0), versions 0–4, sans-IO.

v1 adds ``KeyType`` (0 group, 1 transaction) to the request and throttle time plus an error
message to the response; v3 is the first flexible version; v4 (KIP-699) batches the keys: the
request carries ``CoordinatorKeys`` and the response one ``Coordinators`` entry per key instead
of the single top-level answer; v5 (KIP-890) and v6 (KIP-932: key type 2, a share group's
share-partition key) change no field.

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–6 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC", "API_KEY", "MIN_VERSION", "MAX_VERSION", "GROUP_KEY", "TRANSACTION_KEY",
           "decode_request", "encode_response"]

GROUP_KEY = 0
TRANSACTION_KEY = 1

REQUEST = Struct(
    "FindCoordinatorRequest",
    (
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+"),
        Field("coordinator_keys", ArrayOf(STRING), "4+"),
    ),
)

_COORDINATOR = Struct(
    "Coordinator",
    (
        Field("key", STRING, "4+"),
        Field("node_id", INT32, "4+"),
        Field("host", STRING, "4+"),
        Field("port", INT32, "4+"),
        Field("error_code", INT16, "4+"),
        Field("error_message", STRING, "4+", nullable_versions="4+", null_default=True, ignorable=True),
    ),
)

RESPONSE = Struct(
    "FindCoordinatorResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", nullable_versions="1-3", null_default=True, ignorable=True),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field("coordinators", ArrayOf(_COORDINATOR), "4+"),
    ),
)

SPEC = ApiSpec(10, "FindCoordinator", 0, 4, 3, REQUEST, RESPONSE, first_client_throttled=2)
KAFKA_SPEC = ApiSpec(10, "FindCoordinator", 0, 6, 3, REQUEST, RESPONSE, first_client_throttled=2)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a FindCoordinator request body of ``version`` (0–4)."""
    return SPEC.decode_request(version, data, exact=False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a FindCoordinator response body of ``version`` (0–4)."""
    return SPEC.encode_response(version, body)
