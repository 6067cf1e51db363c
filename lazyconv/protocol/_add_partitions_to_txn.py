"""AddPartitionsToTxn (API key 24), versions 0–3 (the client versions), sans-IO.

A transactional producer names the partitions it is about to write before its first Produce to
each. v1 and v2 change only error semantics; v3 is the first flexible version. (v4+ batch
several transactions and are sent by brokers only.)
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_TOPIC = Struct(
    "AddPartitionsToTxnTopic", (Field("name", STRING), Field("partitions", ArrayOf(INT32)))
)

REQUEST = Struct(
    "AddPartitionsToTxnRequest",
    (
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        Field("v3_and_below_topics", ArrayOf(_TOPIC), "0-3"),
    ),
)

_PARTITION_RESULT = Struct(
    "AddPartitionsToTxnPartitionResult",
    (Field("partition_index", INT32), Field("partition_error_code", INT16)),
)

_TOPIC_RESULT = Struct(
    "AddPartitionsToTxnTopicResult",
    (Field("name", STRING), Field("results_by_partition", ArrayOf(_PARTITION_RESULT))),
)

RESPONSE = Struct(
    "AddPartitionsToTxnResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results_by_topic_v3_and_below", ArrayOf(_TOPIC_RESULT), "0-3"),
    ),
)

SPEC = ApiSpec(24, "AddPartitionsToTxn", 0, 3, 3, REQUEST, RESPONSE)
