"""Kafka wire protocol, sans-IO: primitives, headers, one declaration per API, FetchResponse.

Each API module (``metadata``, ``fetch``, ``join_group``, ...) declares its ``SPEC``
(:class:`~lazyconv.protocol._api.ApiSpec`: key, version range, first flexible version, request and
response schemas, first client-throttled version); :mod:`lazyconv.protocol._registry` lists the ones ``serve`` answers
(``ALL_APIS``) and derives the ApiVersions table; ``KAFKA_APIS`` declares every API a Kafka 4.0.1
broker serves (loaded on first use) and :mod:`lazyconv.protocol._routing` says how Kafka routes
each. Nothing here touches a socket: requests are decoded from bytes, responses become bytes or
:class:`~lazyconv._send.Send` objects that the caller writes to its own channel.
"""

from typing import TYPE_CHECKING, Any

from lazyconv.errors import ErrorCode
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._decision import (
    FetchBudget,
    broker_partition_response,
    conversion_target_magic,
    error_partition,
    fetch_replica_id,
    is_follower_fetch,
    readable_magic,
)
from lazyconv.protocol._fetch import (
    FETCH_API_KEY,
    MAX_FETCH_VERSION,
    MIN_FETCH_VERSION,
    FetchRequest,
    FetchResponse,
    is_flexible,
    request_header_version,
    response_header_version,
)
from lazyconv.protocol._registry import ALL_APIS, API_BY_KEY, api_versions_table

if TYPE_CHECKING:
    from lazyconv.protocol._kafka_apis import KAFKA_API_BY_KEY, KAFKA_APIS

__all__ = [
    "ALL_APIS",
    "API_BY_KEY",
    "ApiSpec",
    "api_versions_table",
    "ErrorCode",
    "KAFKA_APIS",
    "KAFKA_API_BY_KEY",
    "FETCH_API_KEY",
    "MAX_FETCH_VERSION",
    "MIN_FETCH_VERSION",
    "FetchBudget",
    "FetchRequest",
    "FetchResponse",
    "broker_partition_response",
    "conversion_target_magic",
    "error_partition",
    "fetch_replica_id",
    "is_flexible",
    "is_follower_fetch",
    "readable_magic",
    "request_header_version",
    "response_header_version",
]


def __getattr__(name: str) -> Any:
    """``KAFKA_APIS`` and ``KAFKA_API_BY_KEY``, imported on first use: ``import lazyconv`` does
    not load the forty-odd declaration modules only a relay needs."""
    if name in ("KAFKA_APIS", "KAFKA_API_BY_KEY"):
        from lazyconv.protocol import _kafka_apis

        return getattr(_kafka_apis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
