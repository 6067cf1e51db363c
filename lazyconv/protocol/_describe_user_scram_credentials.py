"""DescribeUserScramCredentials (API key 50), version 0, sans-IO.

An admin client lists users' SCRAM mechanisms and iterations (never their salted passwords)
(KIP-554).

Declared as in Kafka 4.0.1's DescribeUserScramCredentialsRequest.json and
DescribeUserScramCredentialsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_USER_NAME = Struct("UserName", (Field("name", STRING),))

REQUEST = Struct(
    "DescribeUserScramCredentialsRequest",
    (
        Field("users", ArrayOf(_USER_NAME), nullable_versions="0+"),
    ),
)

_CREDENTIAL_INFO = Struct("CredentialInfo", (Field("mechanism", INT8), Field("iterations", INT32)))

_DESCRIBE_USER_SCRAM_CREDENTIALS_RESULT = Struct(
    "DescribeUserScramCredentialsResult",
    (
        Field("user", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("credential_infos", ArrayOf(_CREDENTIAL_INFO)),
    ),
)

RESPONSE = Struct(
    "DescribeUserScramCredentialsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("results", ArrayOf(_DESCRIBE_USER_SCRAM_CREDENTIALS_RESULT)),
    ),
)

SPEC = ApiSpec(50, "DescribeUserScramCredentials", 0, 0, 0, REQUEST, RESPONSE)
