"""Produce (API key 0), versions 0–11, sans-IO.

Request: v0–1 carry magic v0 records, v2 magic v1; v3 adds ``TransactionalId`` (and requires
magic v2 records); v9 is the first flexible version. ``Acks`` 0 means the client expects no
response at all. Response: ``ThrottleTimeMs`` (v1+) comes *after* the responses; v2 adds
``LogAppendTimeMs`` (−1 unless the topic uses LogAppendTime), v5 ``LogStartOffset``, v8
per-batch ``RecordErrors`` and an ``ErrorMessage``, v10 (KIP-951) the tagged ``CurrentLeader``
and ``NodeEndpoints`` (left at their defaults: this server is always the leader). v12 (KIP-890
part 2) changes no field: with transactions V2 a Produce also adds its partitions to the
transaction (no AddPartitionsToTxn).

A Produce with acks=0 that fails in any partition gets no answer: the broker closes the
connection so that the client notices (Kafka's ``handleProduceRequest``); :func:`unanswered_failure`
says why, from the answer it would have had.

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 3–12 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.errors import ErrorCode, UnansweredRequestError
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import (
    BYTES,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    Field,
    Struct,
)

__all__ = ["SPEC", "KAFKA_SPEC", "API_KEY", "MIN_VERSION", "MAX_VERSION", "decode_request", "encode_response",
           "unanswered_failure"]


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

_LEADER_ID_AND_EPOCH = Struct(
    "LeaderIdAndEpoch",
    (Field("leader_id", INT32, "10+", default=-1), Field("leader_epoch", INT32, "10+", default=-1)),
)

_NODE_ENDPOINT = Struct(
    "NodeEndpoint",
    (
        Field("node_id", INT32, "10+"),
        Field("host", STRING, "10+"),
        Field("port", INT32, "10+"),
        Field("rack", STRING, "10+", nullable_versions="10+", null_default=True),
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
        Field("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0, tagged_versions="10+"),
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
        Field("node_endpoints", ArrayOf(_NODE_ENDPOINT), "10+", tag=0, tagged_versions="10+"),
    ),
)


SPEC = ApiSpec(0, "Produce", 0, 11, 9, REQUEST, RESPONSE, first_client_throttled=6)
KAFKA_SPEC = ApiSpec(0, "Produce", 0, 12, 9, REQUEST, RESPONSE, first_client_throttled=6)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a Produce request body of ``version`` (0–11); records come back as bytes."""
    return SPEC.decode_request(version, data, exact=False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a Produce response body of ``version`` (0–11)."""
    return SPEC.encode_response(version, body)


def unanswered_failure(body: Mapping[str, Any], shown: int = 5) -> UnansweredRequestError | None:
    """Why an acks=0 Produce whose answer would be ``body`` (a response body) closes its
    connection: its failed partitions and their errors (the first ``shown``); ``None`` when
    every partition succeeded (nothing to say: no answer, the connection stays open)."""
    failed = [f"{topic['name']}-{part['index']} {_error_name(part['error_code'])}"
              for topic in body["responses"] for part in topic["partition_responses"]
              if part["error_code"]]
    if not failed:
        return None
    more = f" and {len(failed) - shown} more" if len(failed) > shown else ""
    return UnansweredRequestError(
        f"Produce with acks=0 failed in {len(failed)} partition(s): {', '.join(failed[:shown])}{more}")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
