"""EndTxn (API key 26), versions 0–3, sans-IO.

Commits or aborts the producer's transaction: the coordinator writes a COMMIT or ABORT marker
into every partition of the transaction. v3 is the first flexible version. (v5, KIP-890, bumps
the epoch with every transaction and is not served.)
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "EndTxnRequest",
    (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),
    ),
)

RESPONSE = Struct("EndTxnResponse", (Field("throttle_time_ms", INT32), Field("error_code", INT16)))

SPEC = ApiSpec(26, "EndTxn", 0, 3, 3, REQUEST, RESPONSE)
