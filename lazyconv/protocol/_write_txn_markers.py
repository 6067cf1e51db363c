"""WriteTxnMarkers (API key 27), version 1, sans-IO.

The transaction coordinator tells partition leaders to write COMMIT or ABORT markers:
broker-to-broker, served on the broker listener. Kafka 4.0 dropped v0; v1 is flexible.

Declared as in Kafka 4.0.1's WriteTxnMarkersRequest.json and WriteTxnMarkersResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_WRITABLE_TXN_MARKER_TOPIC = Struct(
    "WritableTxnMarkerTopic",
    (
        Field("name", STRING),
        Field("partition_indexes", ArrayOf(INT32)),
    ),
)

_WRITABLE_TXN_MARKER = Struct(
    "WritableTxnMarker",
    (
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("transaction_result", BOOL),
        Field("topics", ArrayOf(_WRITABLE_TXN_MARKER_TOPIC)),
        Field("coordinator_epoch", INT32),
    ),
)

REQUEST = Struct("WriteTxnMarkersRequest", (Field("markers", ArrayOf(_WRITABLE_TXN_MARKER)),))

_WRITABLE_TXN_MARKER_PARTITION_RESULT = Struct(
    "WritableTxnMarkerPartitionResult",
    (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    ),
)

_WRITABLE_TXN_MARKER_TOPIC_RESULT = Struct(
    "WritableTxnMarkerTopicResult",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_WRITABLE_TXN_MARKER_PARTITION_RESULT)),
    ),
)

_WRITABLE_TXN_MARKER_RESULT = Struct(
    "WritableTxnMarkerResult",
    (
        Field("producer_id", INT64),
        Field("topics", ArrayOf(_WRITABLE_TXN_MARKER_TOPIC_RESULT)),
    ),
)

RESPONSE = Struct(
    "WriteTxnMarkersResponse",
    (
        Field("markers", ArrayOf(_WRITABLE_TXN_MARKER_RESULT)),
    ),
)

SPEC = ApiSpec(27, "WriteTxnMarkers", 1, 1, 1, REQUEST, RESPONSE)
