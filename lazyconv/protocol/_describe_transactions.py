"""DescribeTransactions (API key 65), version 0, sans-IO.

An admin client describes transactions by transactional id (KIP-664): state, producer id and
epoch, timeout, the partitions they hold; sent to each id's transaction coordinator.

Declared as in Kafka 4.0.1's DescribeTransactionsRequest.json and
DescribeTransactionsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct("DescribeTransactionsRequest", (Field("transactional_ids", ArrayOf(STRING)),))

_TOPIC_DATA = Struct("TopicData", (Field("topic", STRING), Field("partitions", ArrayOf(INT32))))

_TRANSACTION_STATE = Struct(
    "TransactionState",
    (
        Field("error_code", INT16),
        Field("transactional_id", STRING),
        Field("transaction_state", STRING),
        Field("transaction_timeout_ms", INT32),
        Field("transaction_start_time_ms", INT64),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("topics", ArrayOf(_TOPIC_DATA)),
    ),
)

RESPONSE = Struct(
    "DescribeTransactionsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("transaction_states", ArrayOf(_TRANSACTION_STATE)),
    ),
)

SPEC = ApiSpec(65, "DescribeTransactions", 0, 0, 0, REQUEST, RESPONSE)
