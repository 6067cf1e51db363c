"""Kafka wire protocol, sans-IO: primitives, headers, one declaration per API, FetchResponse.

Each API module (``metadata``, ``fetch``, ``join_group``, ...) declares its ``SPEC``
(:class:`~lazyconv.protocol._api.ApiSpec`: key, version range, first flexible version, request and
response schemas); :mod:`lazyconv.protocol._registry` lists them all and derives the ApiVersions
table. Nothing here touches a socket: requests are decoded from bytes, responses become bytes or
:class:`~lazyconv._send.Send` objects that the caller writes to its own channel.
"""

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
from lazyconv.protocol._error_codes import ErrorCode
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

__all__ = [
    "ALL_APIS",
    "API_BY_KEY",
    "ApiSpec",
    "api_versions_table",
    "ErrorCode",
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
