"""CreateDelegationToken (API key 38), versions 1–3, sans-IO.

A client authenticated otherwise obtains a delegation token (KIP-48) with renewers and a
maximum lifetime. v2 is the first flexible version; v3 creates a token for another owner and
answers with the token requester. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's CreateDelegationTokenRequest.json and
CreateDelegationTokenResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_CREATABLE_RENEWERS = Struct(
    "CreatableRenewers",
    (
        Field("principal_type", STRING),
        Field("principal_name", STRING),
    ),
)

REQUEST = Struct(
    "CreateDelegationTokenRequest",
    (
        Field("owner_principal_type", STRING, "3+", nullable_versions="3+"),
        Field("owner_principal_name", STRING, "3+", nullable_versions="3+"),
        Field("renewers", ArrayOf(_CREATABLE_RENEWERS)),
        Field("max_lifetime_ms", INT64),
    ),
)

RESPONSE = Struct(
    "CreateDelegationTokenResponse",
    (
        Field("error_code", INT16),
        Field("principal_type", STRING),
        Field("principal_name", STRING),
        Field("token_requester_principal_type", STRING, "3+"),
        Field("token_requester_principal_name", STRING, "3+"),
        Field("issue_timestamp_ms", INT64),
        Field("expiry_timestamp_ms", INT64),
        Field("max_timestamp_ms", INT64),
        Field("token_id", STRING),
        Field("hmac", BYTES),
        Field("throttle_time_ms", INT32),
    ),
)

SPEC = ApiSpec(38, "CreateDelegationToken", 1, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
