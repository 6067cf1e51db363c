"""DescribeDelegationToken (API key 41), versions 1–3, sans-IO.

An admin client lists the delegation tokens of some owners (null: all it may see). v2 is the
first flexible version; v3 answers with each token's requester. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DescribeDelegationTokenRequest.json and
DescribeDelegationTokenResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DESCRIBE_DELEGATION_TOKEN_OWNER = Struct(
    "DescribeDelegationTokenOwner",
    (
        Field("principal_type", STRING),
        Field("principal_name", STRING),
    ),
)

REQUEST = Struct(
    "DescribeDelegationTokenRequest",
    (
        Field("owners", ArrayOf(_DESCRIBE_DELEGATION_TOKEN_OWNER), nullable_versions="0+"),
    ),
)

_DESCRIBED_DELEGATION_TOKEN_RENEWER = Struct(
    "DescribedDelegationTokenRenewer",
    (
        Field("principal_type", STRING),
        Field("principal_name", STRING),
    ),
)

_DESCRIBED_DELEGATION_TOKEN = Struct(
    "DescribedDelegationToken",
    (
        Field("principal_type", STRING),
        Field("principal_name", STRING),
        Field("token_requester_principal_type", STRING, "3+"),
        Field("token_requester_principal_name", STRING, "3+"),
        Field("issue_timestamp", INT64),
        Field("expiry_timestamp", INT64),
        Field("max_timestamp", INT64),
        Field("token_id", STRING),
        Field("hmac", BYTES),
        Field("renewers", ArrayOf(_DESCRIBED_DELEGATION_TOKEN_RENEWER)),
    ),
)

RESPONSE = Struct(
    "DescribeDelegationTokenResponse",
    (
        Field("error_code", INT16),
        Field("tokens", ArrayOf(_DESCRIBED_DELEGATION_TOKEN)),
        Field("throttle_time_ms", INT32),
    ),
)

SPEC = ApiSpec(41, "DescribeDelegationToken", 1, 3, 2, REQUEST, RESPONSE, first_client_throttled=1)
