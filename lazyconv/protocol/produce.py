"""Produce (API key 0), versions 2–8 (the non-flexible ones from magic v1 on), sans-IO.

Request: v3 adds ``TransactionalId`` (and requires magic v2 records). ``Acks`` 0 means the
client expects no response at all. Response: ``ThrottleTimeMs`` comes *after* the responses;
v2 adds ``LogAppendTimeMs`` (−1 unless the topic uses LogAppendTime), v5 ``LogStartOffset``,
v8 per-batch ``RecordErrors`` and an ``ErrorMessage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol.primitives import Reader
from lazyconv.protocol.schema import (
    BYTES,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    Field,
    Struct,
    decode_message,
    encode_message,
)

__all__ = ["API_KEY", "MIN_VERSION", "MAX_VERSION", "decode_request", "encode_response"]

API_KEY = 0
MIN_VERSION = 2
MAX_VERSION = 8

_PARTITION_DATA = Struct(
    "PartitionProduceData",
    # The records arrive as bytes: the request has been read whole, and the server validates
    # and rewrites offsets before anything is appended.
    (Field("index", INT32), Field("records", BYTES, nullable_versions="0+")),
)

_TOPIC_DATA = Struct(
    "TopicProduceData",
    (Field("name", STRING), Field("partition_data", ArrayOf(_PARTITION_DATA))),
)

REQUEST = Struct(
    "ProduceRequest",
    (
        Field("transactional_id", STRING, "3+", nullable_versions="3+", null_default=True),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field("topic_data", ArrayOf(_TOPIC_DATA)),
    ),
)

_BATCH_INDEX_AND_ERROR = Struct(
    "BatchIndexAndErrorMessage",
    (
        Field("batch_index", INT32),
        Field("batch_index_error_message", STRING, nullable_versions="8+", null_default=True),
    ),
)

_PARTITION_RESPONSE = Struct(
    "PartitionProduceResponse",
    (
        Field("index", INT32),
        Field("error_code", INT16),
        Field("base_offset", INT64),
        Field("log_append_time_ms", INT64, "2+", default=-1, ignorable=True),
        Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
        Field("record_errors", ArrayOf(_BATCH_INDEX_AND_ERROR), "8+", ignorable=True),
        Field("error_message", STRING, "8+", nullable_versions="8+", null_default=True, ignorable=True),
    ),
)

_TOPIC_RESPONSE = Struct(
    "TopicProduceResponse",
    (Field("name", STRING), Field("partition_responses", ArrayOf(_PARTITION_RESPONSE))),
)

RESPONSE = Struct(
    "ProduceResponse",
    (
        Field("responses", ArrayOf(_TOPIC_RESPONSE)),
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
    ),
)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a Produce request body of ``version`` (2–8); records come back as bytes."""
    reader = data if isinstance(data, Reader) else Reader(data)
    return decode_message(REQUEST, reader, version, False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a Produce response body of ``version`` (2–8)."""
    return encode_message(RESPONSE, body, version, False).to_bytes()
