"""AddPartitionsToTxn (API key 24), versions 0–5, sans-IO (AddPartitionsToTxn*.json).

A transactional producer names the partitions it is about to write before its first Produce to
each. v1 and v2 change only error semantics; v3 is the first flexible version. v4 (KIP-890)
batches several transactions (``Transactions``, ``ResultsByTransaction``, a top-level error
code) and is sent by brokers only, to verify a transaction before they append to it; v5 changes
no field.

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows, Kafka
4.0.1's 0–5 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`). ``serve`` answers the
client versions, 0–3.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

_TOPIC = Struct(
    "AddPartitionsToTxnTopic", (Field("name", STRING), Field("partitions", ArrayOf(INT32)))
)

_TRANSACTION = Struct(
    "AddPartitionsToTxnTransaction",
    (
        Field("transactional_id", STRING, "4+"),
        Field("producer_id", INT64, "4+"),
        Field("producer_epoch", INT16, "4+"),
        Field("verify_only", BOOL, "4+"),
        Field("topics", ArrayOf(_TOPIC), "4+"),
    ),
)

REQUEST = Struct(
    "AddPartitionsToTxnRequest",
    (
        Field("transactions", ArrayOf(_TRANSACTION), "4+"),
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

_TRANSACTION_RESULT = Struct(
    "AddPartitionsToTxnResult",
    (
        Field("transactional_id", STRING, "4+"),
        Field("topic_results", ArrayOf(_TOPIC_RESULT), "4+"),
    ),
)

RESPONSE = Struct(
    "AddPartitionsToTxnResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "4+", ignorable=True),
        Field("results_by_transaction", ArrayOf(_TRANSACTION_RESULT), "4+"),
        Field("results_by_topic_v3_and_below", ArrayOf(_TOPIC_RESULT), "0-3"),
    ),
)

SPEC = ApiSpec(24, "AddPartitionsToTxn", 0, 3, 3, REQUEST, RESPONSE, first_client_throttled=1)
KAFKA_SPEC = ApiSpec(24, "AddPartitionsToTxn", 0, 5, 3, REQUEST, RESPONSE, first_client_throttled=1)
