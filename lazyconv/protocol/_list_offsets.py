"""ListOffsets (API key 2), versions 0–8, sans-IO.

Timestamps with a meaning: −1 latest (the high watermark, or the last stable offset for
isolation level 1), −2 earliest (the log start offset), −3 (v7+, KIP-734) the record with the
largest timestamp, −4 (v8+, KIP-405) the earliest local offset (the log start offset here).
v0 answers with ``OldStyleOffsets`` (a list, at most ``MaxNumOffsets`` long); v1+ with one
``Timestamp``/``Offset`` pair; v2 adds ``IsolationLevel`` and throttle time; v4 the leader epochs;
v6 is the first flexible version; v9 (KIP-1005) allows the timestamp −5 (the last offset
uploaded to tiered storage); v10 (KIP-1075) adds ``TimeoutMs``, how long a
timestamp search may wait for the remote log. Any other negative timestamp, or one asked
below the version that defines it, is answered UNSUPPORTED_VERSION (:func:`timestamp_supported`).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 1–10 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    Field,
    Struct,
)

__all__ = [
    "SPEC",
    "KAFKA_SPEC",
    "API_KEY",
    "MIN_VERSION",
    "MAX_VERSION",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "timestamp_supported",
    "decode_request",
    "encode_response",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

# The first version that defines each negative timestamp, as Kafka's ReplicaManager
# (timestampMinSupportedVersion, 3.9 and 4.0; v0 took -1 and -2 and refused any other negative one).
_TIMESTAMP_SINCE = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7,
                    EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9}

_REQUEST_PARTITION = Struct(
    "ListOffsetsPartition",
    (
        Field("partition_index", INT32),
        Field("current_leader_epoch", INT32, "4+", default=-1, ignorable=True),
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
        Field("timeout_ms", INT32, "10+", ignorable=True),
    ),
)

_RESPONSE_PARTITION = Struct(
    "ListOffsetsPartitionResponse",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("old_style_offsets", ArrayOf(INT64), "0"),
        Field("timestamp", INT64, "1+", default=-1),
        Field("offset", INT64, "1+", default=-1),
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


SPEC = ApiSpec(2, "ListOffsets", 0, 8, 6, REQUEST, RESPONSE, first_client_throttled=3)
KAFKA_SPEC = ApiSpec(2, "ListOffsets", 0, 10, 6, REQUEST, RESPONSE, first_client_throttled=3)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version


def timestamp_supported(timestamp: int, version: int) -> bool:
    """Whether ListOffsets ``version`` defines ``timestamp``: any timestamp of 0 or more, and
    a negative one from the version that introduced it (−1 and −2 always, −3 from v7, −4 from
    v8, −5 from v9; no other). Kafka answers a partition asked with one it does not define
    ``UNSUPPORTED_VERSION`` before looking the partition up."""
    return timestamp >= 0 or version >= _TIMESTAMP_SINCE.get(timestamp, 1 << 15)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a ListOffsets request body of ``version`` (0–8)."""
    return SPEC.decode_request(version, data, exact=False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a ListOffsets response body of ``version`` (0–8)."""
    return SPEC.encode_response(version, body)
