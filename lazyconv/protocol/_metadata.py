"""Metadata (API key 3), versions 0–12, sans-IO (MetadataRequest/Response.json).

Request: v0 ``Topics`` is a non-nullable array (empty = every topic); v1+ null = every topic,
empty = none; v4 adds ``AllowAutoTopicCreation``; v8 the two "include authorized operations"
flags (the cluster one until v10); v9 is the first flexible version; v10 adds a ``TopicId`` per
requested topic and lets ``Name`` be null (looked up by id from v12). Response: v1 adds broker
racks, ``ControllerId`` and ``IsInternal``; v2 ``ClusterId``; v3 ``ThrottleTimeMs``; v5
``OfflineReplicas``; v7 ``LeaderEpoch``; v8 the authorized-operations bit fields (−2147483648 =
not requested); v10 each topic's ``TopicId``; v12 a null ``Name`` for a topic asked by id; v13
(KIP-1102) a top-level ``ErrorCode`` (a client that gets REBOOTSTRAP_REQUIRED there starts again
from its bootstrap servers).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–13 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import (
    BOOL,
    INT16,
    INT32,
    STRING,
    UUID,
    ArrayOf,
    Field,
    Struct,
)

__all__ = ["SPEC", "KAFKA_SPEC", "API_KEY", "MIN_VERSION", "MAX_VERSION", "asks_for_every_topic", "decode_request", "encode_response"]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

_REQUEST_TOPIC = Struct(
    "MetadataRequestTopic",
    (
        Field("topic_id", UUID, "10+", ignorable=True),
        Field("name", STRING, nullable_versions="10+"),
    ),
)

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
        Field("name", STRING, nullable_versions="12+"),
        Field("topic_id", UUID, "10+", ignorable=True),
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
        Field("error_code", INT16, "13+", ignorable=True),
    ),
)

SPEC = ApiSpec(3, "Metadata", 0, 12, 9, REQUEST, RESPONSE, first_client_throttled=6)
KAFKA_SPEC = ApiSpec(3, "Metadata", 0, 13, 9, REQUEST, RESPONSE, first_client_throttled=6)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version


def asks_for_every_topic(version: int, topics: list[Any] | None) -> bool:
    """Whether a request's ``topics`` asks for every topic: null (v1+) or, in v0, which has no
    null array, an empty list (Kafka's ``MetadataRequest.isAllTopics``)."""
    return topics is None or (version == 0 and not topics)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode a Metadata request body. ``topics`` is None when every topic is asked for
    (:func:`asks_for_every_topic`)."""
    body = SPEC.decode_request(version, data, exact=False)
    if asks_for_every_topic(version, body["topics"]):
        body["topics"] = None
    return body


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a Metadata response body (fields a version lacks are dropped)."""
    return SPEC.encode_response(version, body)
