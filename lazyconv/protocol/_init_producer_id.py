"""InitProducerId (API key 22), versions 0–5, sans-IO.

An idempotent or transactional producer asks for a producer id before its first Produce. v2
makes the API flexible; v3 adds the current ``ProducerId``/``ProducerEpoch`` to the request (for
epoch bumps); v4 and v5 change only error semantics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, Field, Struct

__all__ = ["SPEC", "API_KEY", "MIN_VERSION", "MAX_VERSION", "decode_request", "encode_response"]

REQUEST = Struct(
    "InitProducerIdRequest",
    (
        Field("transactional_id", STRING, nullable_versions="0+", null_default=True),
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, "3+", default=-1),
        Field("producer_epoch", INT16, "3+", default=-1),
    ),
)

RESPONSE = Struct(
    "InitProducerIdResponse",
    (
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("error_code", INT16),
        Field("producer_id", INT64, default=-1),
        Field("producer_epoch", INT16),
    ),
)

SPEC = ApiSpec(22, "InitProducerId", 0, 5, 2, REQUEST, RESPONSE, first_client_throttled=1)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version
FLEXIBLE_FROM = 2


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode an InitProducerId request body of ``version`` (0–5)."""
    return SPEC.decode_request(version, data, exact=False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode an InitProducerId response body of ``version`` (0–5)."""
    return SPEC.encode_response(version, body)
