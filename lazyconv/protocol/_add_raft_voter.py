"""AddRaftVoter (API key 80), version 0, sans-IO.

An admin client adds a controller to the KRaft voter set (KIP-853), with its listeners; brokers
forward it to the active controller.

Declared as in Kafka 4.0.1's AddRaftVoterRequest.json and AddRaftVoterResponse.json; field names
in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, UINT16, UUID, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_LISTENER = Struct(
    "Listener",
    (
        Field("name", STRING),
        Field("host", STRING),
        Field("port", UINT16),
    ),
)

REQUEST = Struct(
    "AddRaftVoterRequest",
    (
        Field("cluster_id", STRING, nullable_versions="0+"),
        Field("timeout_ms", INT32),
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
        Field("listeners", ArrayOf(_LISTENER)),
    ),
)

RESPONSE = Struct(
    "AddRaftVoterResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", ignorable=True),
    ),
)

SPEC = ApiSpec(80, "AddRaftVoter", 0, 0, 0, REQUEST, RESPONSE)
