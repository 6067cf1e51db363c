"""FindCoordinator (API key 10; "GroupCoordinator" in v0), versions 0–2, sans-IO.

v1 adds ``KeyType`` (0 group, 1 transaction) to the request and throttle time plus an error
message to the response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol.primitives import Reader
from lazyconv.protocol.schema import (
    INT8,
    INT16,
    INT32,
    STRING,
    Field,
    Struct,
    decode_message,
    encode_message,
)

__all__ = ["API_KEY", "MIN_VERSION", "MAX_VERSION", "decode_request", "encode_response"]

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 2

REQUEST = Struct(
    "FindCoordinatorRequest",
    (Field("key", STRING), Field("key_type", INT8, "1+")),
)

RESPONSE = Struct(
    "FindCoordinatorResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("error_message", STRING, "1+", nullable_versions="1+", null_default=True, ignorable=True),
        Field("node_id", INT32),
        Field("host", STRING),
        Field("port", INT32),
    ),
)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a FindCoordinator request body of ``version`` (0–2)."""
    reader = data if isinstance(data, Reader) else Reader(data)
    return decode_message(REQUEST, reader, version, False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a FindCoordinator response body of ``version`` (0–2)."""
    return encode_message(RESPONSE, body, version, False).to_bytes()
