"""DeleteTopics (API key 20), versions 1–6, sans-IO.

An admin client deletes topics. v4 is the first flexible version; v5 adds a per-topic
``ErrorMessage`` and the THROTTLING_QUOTA_EXCEEDED error (KIP-599); v6 names topics by name or by
id (``Topics`` replaces ``TopicNames``) and returns topic ids. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DeleteTopicsRequest.json and DeleteTopicsResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, UUID, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DELETE_TOPIC_STATE = Struct(
    "DeleteTopicState",
    (
        Field("name", STRING, "6+", nullable_versions="6+", null_default=True),
        Field("topic_id", UUID, "6+"),
    ),
)

REQUEST = Struct(
    "DeleteTopicsRequest",
    (
        Field("topics", ArrayOf(_DELETE_TOPIC_STATE), "6+"),
        Field("topic_names", ArrayOf(STRING), "0-5", ignorable=True),
        Field("timeout_ms", INT32),
    ),
)

_DELETABLE_TOPIC_RESULT = Struct(
    "DeletableTopicResult",
    (
        Field("name", STRING, nullable_versions="6+"),
        Field("topic_id", UUID, "6+", ignorable=True),
        Field("error_code", INT16),
        Field("error_message", STRING, "5+", nullable_versions="5+", null_default=True,
              ignorable=True),
    ),
)

RESPONSE = Struct(
    "DeleteTopicsResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("responses", ArrayOf(_DELETABLE_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(20, "DeleteTopics", 1, 6, 4, REQUEST, RESPONSE, first_client_throttled=2)
