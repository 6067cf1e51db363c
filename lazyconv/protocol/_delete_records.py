"""DeleteRecords (API key 21), versions 0–2, sans-IO.

An admin client moves partitions' log start offsets forward (records before them are deleted);
sent to each partition's leader. v2 is the first flexible version.

Declared as in Kafka 4.0.1's DeleteRecordsRequest.json and DeleteRecordsResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DELETE_RECORDS_PARTITION = Struct(
    "DeleteRecordsPartition",
    (
        Field("partition_index", INT32),
        Field("offset", INT64),
    ),
)

_DELETE_RECORDS_TOPIC = Struct(
    "DeleteRecordsTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_DELETE_RECORDS_PARTITION)),
    ),
)

REQUEST = Struct(
    "DeleteRecordsRequest",
    (
        Field("topics", ArrayOf(_DELETE_RECORDS_TOPIC)),
        Field("timeout_ms", INT32),
    ),
)

_DELETE_RECORDS_PARTITION_RESULT = Struct(
    "DeleteRecordsPartitionResult",
    (
        Field("partition_index", INT32),
        Field("low_watermark", INT64),
        Field("error_code", INT16),
    ),
)

_DELETE_RECORDS_TOPIC_RESULT = Struct(
    "DeleteRecordsTopicResult",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_DELETE_RECORDS_PARTITION_RESULT)),
    ),
)

RESPONSE = Struct(
    "DeleteRecordsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("topics", ArrayOf(_DELETE_RECORDS_TOPIC_RESULT)),
    ),
)

SPEC = ApiSpec(21, "DeleteRecords", 0, 2, 2, REQUEST, RESPONSE, first_client_throttled=1)
