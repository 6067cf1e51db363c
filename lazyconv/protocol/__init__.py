"""Kafka wire protocol for fetches, sans-IO: primitives, headers, FetchRequest, FetchResponse.

Nothing here touches a socket: requests are decoded from bytes, responses become
:class:`~lazyconv.send.Send` objects that the caller writes to its own channel.
"""

from lazyconv.protocol.decision import (
    FetchBudget,
    broker_partition_response,
    conversion_target_magic,
    error_partition,
    fetch_replica_id,
    is_follower_fetch,
    readable_magic,
)
from lazyconv.protocol.error_codes import ErrorCode
from lazyconv.protocol.fetch import (
    FETCH_API_KEY,
    MAX_FETCH_VERSION,
    MIN_FETCH_VERSION,
    FetchRequest,
    FetchResponse,
    is_flexible,
    request_header_version,
    response_header_version,
)

__all__ = [
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
