"""ListTransactions (API key 66), versions 0–1, sans-IO.

An admin client lists the transactions a broker coordinates (KIP-664), filtered by state and
producer id; every broker answers for its own coordinator partitions. v1 adds a duration filter
(KIP-994).

Declared as in Kafka 4.0.1's ListTransactionsRequest.json and ListTransactionsResponse.json;
field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "ListTransactionsRequest",
    (
        Field("state_filters", ArrayOf(STRING)),
        Field("producer_id_filters", ArrayOf(INT64)),
        Field("duration_filter", INT64, "1+", default=-1),
    ),
)

_TRANSACTION_STATE = Struct(
    "TransactionState",
    (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("transaction_state", STRING),
    ),
)

RESPONSE = Struct(
    "ListTransactionsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", ArrayOf(STRING)),
        Field("transaction_states", ArrayOf(_TRANSACTION_STATE)),
    ),
)

SPEC = ApiSpec(66, "ListTransactions", 0, 1, 0, REQUEST, RESPONSE)
