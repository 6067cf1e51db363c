"""ListOffsets (API key 2), versions 0–5 (the non-flexible ones), sans-IO.

Timestamps with a meaning: −1 latest (the high watermark), −2 earliest (the log start offset).
v0 answers with ``OldStyleOffsets`` (a list, at most ``MaxNumOffsets`` long); v1+ with one
``Timestamp``/``Offset`` pair; v2 adds ``IsolationLevel`` and throttle time; v4 the leader epochs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol.primitives import Reader
from lazyconv.protocol.schema import (
    INT8,
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

__all__ = [
    "API_KEY",
    "MIN_VERSION",
    "MAX_VERSION",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "decode_request",
    "encode_response",
]

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 5
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

_REQUEST_PARTITION = Struct(
    "ListOffsetsPartition",
    (
        Field("partition_index", INT32),
        Field("current_leader_epoch", INT32, "4+", default=-1),
        Field("timestamp", INT64),
        Field("max_num_offsets", INT32, "0", default=1),
    ),
)

_REQUEST_TOPIC = Struct(
    "ListOffsetsTopic",
    (Field("name", STRING), Field("partitions", ArrayOf(_REQUEST_PARTITION))),
)

REQUEST = Struct(
    "ListOffsetsRequest",
    (
        Field("replica_id", INT32),
        Field("isolation_level", INT8, "2+"),
        Field("topics", ArrayOf(_REQUEST_TOPIC)),
    ),
)

_RESPONSE_PARTITION = Struct(
    "ListOffsetsPartitionResponse",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("old_style_offsets", ArrayOf(INT64), "0", ignorable=True),
        Field("timestamp", INT64, "1+", default=-1, ignorable=True),
        Field("offset", INT64, "1+", default=-1, ignorable=True),
        Field("leader_epoch", INT32, "4+", default=-1),
    ),
)

_RESPONSE_TOPIC = Struct(
    "ListOffsetsTopicResponse",
    (Field("name", STRING), Field("partitions", ArrayOf(_RESPONSE_PARTITION))),
)

RESPONSE = Struct(
    "ListOffsetsResponse",
    (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", ArrayOf(_RESPONSE_TOPIC)),
    ),
)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a ListOffsets request body of ``version`` (0–5)."""
    reader = data if isinstance(data, Reader) else Reader(data)
    return decode_message(REQUEST, reader, version, False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a ListOffsets response body of ``version`` (0–5)."""
    return encode_message(RESPONSE, body, version, False).to_bytes()
