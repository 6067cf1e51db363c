"""EndTxn (API key 26), versions 0–3, sans-IO.

Commits or aborts the producer's transaction: the coordinator writes a COMMIT or ABORT marker
into every partition of the transaction. v3 is the first flexible version; v4 (KIP-890) changes
no field; v5 (KIP-890 part 2) bumps the epoch with every transaction and answers with the
producer id and epoch (``serve`` answers up to v3).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–5 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

REQUEST = Struct(
    "EndTxnRequest",
    (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),
    ),
)

RESPONSE = Struct(
    "EndTxnResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, "5+", default=-1, ignorable=True),
        Field("producer_epoch", INT16, "5+", default=-1, ignorable=True),
    ),
)

SPEC = ApiSpec(26, "EndTxn", 0, 3, 3, REQUEST, RESPONSE, first_client_throttled=1)
KAFKA_SPEC = ApiSpec(26, "EndTxn", 0, 5, 3, REQUEST, RESPONSE, first_client_throttled=1)
