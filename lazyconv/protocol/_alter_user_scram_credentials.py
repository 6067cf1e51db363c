"""AlterUserScramCredentials (API key 51), version 0, sans-IO.

An admin client creates, updates or deletes users' SCRAM credentials (KIP-554): salt and salted
password, never the password itself.

Declared as in Kafka 4.0.1's AlterUserScramCredentialsRequest.json and
AlterUserScramCredentialsResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BYTES, INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_SCRAM_CREDENTIAL_DELETION = Struct(
    "ScramCredentialDeletion",
    (
        Field("name", STRING),
        Field("mechanism", INT8),
    ),
)

_SCRAM_CREDENTIAL_UPSERTION = Struct(
    "ScramCredentialUpsertion",
    (
        Field("name", STRING),
        Field("mechanism", INT8),
        Field("iterations", INT32),
        Field("salt", BYTES),
        Field("salted_password", BYTES),
    ),
)

REQUEST = Struct(
    "AlterUserScramCredentialsRequest",
    (
        Field("deletions", ArrayOf(_SCRAM_CREDENTIAL_DELETION)),
        Field("upsertions", ArrayOf(_SCRAM_CREDENTIAL_UPSERTION)),
    ),
)

_ALTER_USER_SCRAM_CREDENTIALS_RESULT = Struct(
    "AlterUserScramCredentialsResult",
    (
        Field("user", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
    ),
)

RESPONSE = Struct(
    "AlterUserScramCredentialsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_ALTER_USER_SCRAM_CREDENTIALS_RESULT)),
    ),
)

SPEC = ApiSpec(51, "AlterUserScramCredentials", 0, 0, 0, REQUEST, RESPONSE)
