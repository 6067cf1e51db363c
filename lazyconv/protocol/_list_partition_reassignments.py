"""ListPartitionReassignments (API key 46), version 0, sans-IO.

An admin client lists the ongoing partition reassignments (null topics: all).

Declared as in Kafka 4.0.1's ListPartitionReassignmentsRequest.json and
ListPartitionReassignmentsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_LIST_PARTITION_REASSIGNMENTS_TOPICS = Struct(
    "ListPartitionReassignmentsTopics",
    (
        Field("name", STRING),
        Field("partition_indexes", ArrayOf(INT32)),
    ),
)

REQUEST = Struct(
    "ListPartitionReassignmentsRequest",
    (
        Field("timeout_ms", INT32, default=60000),
        Field("topics", ArrayOf(_LIST_PARTITION_REASSIGNMENTS_TOPICS), nullable_versions="0+",
              null_default=True),
    ),
)

_ONGOING_PARTITION_REASSIGNMENT = Struct(
    "OngoingPartitionReassignment",
    (
        Field("partition_index", INT32),
        Field("replicas", ArrayOf(INT32)),
        Field("adding_replicas", ArrayOf(INT32)),
        Field("removing_replicas", ArrayOf(INT32)),
    ),
)

_ONGOING_TOPIC_REASSIGNMENT = Struct(
    "OngoingTopicReassignment",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_ONGOING_PARTITION_REASSIGNMENT)),
    ),
)

RESPONSE = Struct(
    "ListPartitionReassignmentsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("topics", ArrayOf(_ONGOING_TOPIC_REASSIGNMENT)),
    ),
)

SPEC = ApiSpec(46, "ListPartitionReassignments", 0, 0, 0, REQUEST, RESPONSE)
