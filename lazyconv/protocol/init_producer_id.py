"""InitProducerId (API key 22), versions 0–4, sans-IO.

An idempotent producer asks for a producer id before its first Produce. v2 makes the API
flexible; v3 adds the current ``ProducerId``/``ProducerEpoch`` to the request (for epoch bumps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol.primitives import Reader
from lazyconv.protocol.schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    Field,
    Struct,
    decode_message,
    encode_message,
)

__all__ = ["API_KEY", "MIN_VERSION", "MAX_VERSION", "FLEXIBLE_FROM", "decode_request", "encode_response"]

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 2

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
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, default=-1),
        Field("producer_epoch", INT16),
    ),
)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode an InitProducerId request body of ``version`` (0–4)."""
    reader = data if isinstance(data, Reader) else Reader(data)
    return decode_message(REQUEST, reader, version, version >= FLEXIBLE_FROM)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode an InitProducerId response body of ``version`` (0–4)."""
    return encode_message(RESPONSE, body, version, version >= FLEXIBLE_FROM).to_bytes()
