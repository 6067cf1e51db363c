"""AddOffsetsToTxn (API key 25), versions 0–3, sans-IO.

A transactional producer that will commit a consumer group's offsets inside its transaction
(``send_offsets_to_transaction``) names the group first. v3 is the first flexible version; v4
(KIP-890) changes no field (a new error, TRANSACTION_ABORTABLE).

``SPEC`` is what ``serve`` answers; ``KAFKA_SPEC`` declares every version lazyconv knows,
Kafka 4.0.1's 0–4 included (:data:`lazyconv.protocol._kafka_apis.KAFKA_APIS`).
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, INT64, STRING, Field, Struct

__all__ = ["SPEC", "KAFKA_SPEC"]

REQUEST = Struct(
    "AddOffsetsToTxnRequest",
    (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("group_id", STRING),
    ),
)

RESPONSE = Struct(
    "AddOffsetsToTxnResponse", (Field("throttle_time_ms", INT32), Field("error_code", INT16))
)

SPEC = ApiSpec(25, "AddOffsetsToTxn", 0, 3, 3, REQUEST, RESPONSE, first_client_throttled=1)
KAFKA_SPEC = ApiSpec(25, "AddOffsetsToTxn", 0, 4, 3, REQUEST, RESPONSE, first_client_throttled=1)
