"""OffsetDelete (API key 47), version 0, sans-IO.

An admin client deletes a group's committed offsets for some partitions (the group must not be
subscribed to them); sent to the group's coordinator. Never flexible.

Declared as in Kafka 4.0.1's OffsetDeleteRequest.json and OffsetDeleteResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_OFFSET_DELETE_REQUEST_PARTITION = Struct(
    "OffsetDeleteRequestPartition",
    (
        Field("partition_index", INT32),
    ),
)

_OFFSET_DELETE_REQUEST_TOPIC = Struct(
    "OffsetDeleteRequestTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_OFFSET_DELETE_REQUEST_PARTITION)),
    ),
)

REQUEST = Struct(
    "OffsetDeleteRequest",
    (
        Field("group_id", STRING),
        Field("topics", ArrayOf(_OFFSET_DELETE_REQUEST_TOPIC)),
    ),
)

_OFFSET_DELETE_RESPONSE_PARTITION = Struct(
    "OffsetDeleteResponsePartition",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    ),
)

_OFFSET_DELETE_RESPONSE_TOPIC = Struct(
    "OffsetDeleteResponseTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_OFFSET_DELETE_RESPONSE_PARTITION)),
    ),
)

RESPONSE = Struct(
    "OffsetDeleteResponse",
    (
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("topics", ArrayOf(_OFFSET_DELETE_RESPONSE_TOPIC)),
    ),
)

SPEC = ApiSpec(47, "OffsetDelete", 0, 0, None, REQUEST, RESPONSE)
