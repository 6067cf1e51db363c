"""RemoveRaftVoter (API key 81), version 0, sans-IO.

An admin client removes a controller (id and directory id) from the KRaft voter set (KIP-853);
brokers forward it to the active controller.

Declared as in Kafka 4.0.1's RemoveRaftVoterRequest.json and RemoveRaftVoterResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, UUID, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "RemoveRaftVoterRequest",
    (
        Field("cluster_id", STRING, nullable_versions="0+"),
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
    ),
)

RESPONSE = Struct(
    "RemoveRaftVoterResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", ignorable=True),
    ),
)

SPEC = ApiSpec(81, "RemoveRaftVoter", 0, 0, 0, REQUEST, RESPONSE)
