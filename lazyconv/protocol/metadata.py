"""Metadata (API key 3), versions 0–8 (the non-flexible ones), sans-IO.

Request: v0 ``Topics`` is a non-nullable array (empty = every topic); v1+ null = every topic,
empty = none; v4 adds ``AllowAutoTopicCreation``; v8 adds the two "include authorized
operations" flags. Response: v1 adds broker racks, ``ControllerId`` and ``IsInternal``; v2
``ClusterId``; v3 ``ThrottleTimeMs``; v5 ``OfflineReplicas``; v7 ``LeaderEpoch``; v8 the
authorized-operations bit fields (−2147483648 = not requested).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol.primitives import Reader
from lazyconv.protocol.schema import (
    BOOL,
    INT16,
    INT32,
    STRING,
    ArrayOf,
    Field,
    Struct,
    decode_message,
    encode_message,
)

__all__ = ["API_KEY", "MIN_VERSION", "MAX_VERSION", "decode_request", "encode_response"]

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 8
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

_REQUEST_TOPIC = Struct("MetadataRequestTopic", (Field("name", STRING),))

REQUEST = Struct(
    "MetadataRequest",
    (
        Field("topics", ArrayOf(_REQUEST_TOPIC), nullable_versions="1+"),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    ),
)

_BROKER = Struct(
    "MetadataResponseBroker",
    (
        Field("node_id", INT32),
        Field("host", STRING),
        Field("port", INT32),
        Field("rack", STRING, "1+", nullable_versions="1+", null_default=True, ignorable=True),
    ),
)

_PARTITION = Struct(
    "MetadataResponsePartition",
    (
        Field("error_code", INT16),
        Field("partition_index", INT32),
        Field("leader_id", INT32),
        Field("leader_epoch", INT32, "7+", default=-1, ignorable=True),
        Field("replica_nodes", ArrayOf(INT32)),
        Field("isr_nodes", ArrayOf(INT32)),
        Field("offline_replicas", ArrayOf(INT32), "5+", ignorable=True),
    ),
)

_TOPIC = Struct(
    "MetadataResponseTopic",
    (
        Field("error_code", INT16),
        Field("name", STRING),
        Field("is_internal", BOOL, "1+", ignorable=True),
        Field("partitions", ArrayOf(_PARTITION)),
        Field("topic_authorized_operations", INT32, "8+", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)

RESPONSE = Struct(
    "MetadataResponse",
    (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("brokers", ArrayOf(_BROKER)),
        Field("cluster_id", STRING, "2+", nullable_versions="2+", null_default=True, ignorable=True),
        Field("controller_id", INT32, "1+", default=-1, ignorable=True),
        Field("topics", ArrayOf(_TOPIC)),
        Field("cluster_authorized_operations", INT32, "8-10", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a Metadata request body. ``topics`` is None when every topic is asked for
    (v1+ null, or an empty v0 list)."""
    reader = data if isinstance(data, Reader) else Reader(data)
    body = decode_message(REQUEST, reader, version, False)
    if version == 0 and not body["topics"]:
        body["topics"] = None
    return body


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a Metadata response body (fields a version lacks are dropped)."""
    return encode_message(RESPONSE, body, version, False).to_bytes()
