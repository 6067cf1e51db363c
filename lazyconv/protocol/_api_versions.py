"""ApiVersions (API key 18), versions 0–4, sans-IO.

Quirks a server must honour (KIP-511, ApiVersionsResponse.json):

- The response header is always v0 (no tagged fields), even for the flexible versions 3+, so a
  client that does not yet know what the broker speaks can always read it.
- A request whose version is newer than the server knows cannot be parsed (its header may be
  v2, its body unknown): the server answers with a **v0** response carrying error 35
  UNSUPPORTED_VERSION and its full ApiKeys list, and the client retries with the highest
  version the list allows (:func:`unsupported_version_response`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lazyconv.errors import ErrorCode
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = [
    "SPEC",
    "API_KEY",
    "MIN_VERSION",
    "MAX_VERSION",
    "is_flexible",
    "decode_request",
    "encode_response",
    "unsupported_version_response",
]

REQUEST = Struct(
    "ApiVersionsRequest",
    (
        Field("client_software_name", STRING, "3+", ignorable=True),
        Field("client_software_version", STRING, "3+", ignorable=True),
    ),
)

_API_VERSION = Struct(
    "ApiVersion",
    (
        Field("api_key", INT16),
        Field("min_version", INT16),
        Field("max_version", INT16),
    ),
)

_SUPPORTED_FEATURE = Struct(
    "SupportedFeatureKey",
    (
        Field("name", STRING, "3+"),
        Field("min_version", INT16, "3+"),
        Field("max_version", INT16, "3+"),
    ),
)

_FINALIZED_FEATURE = Struct(
    "FinalizedFeatureKey",
    (
        Field("name", STRING, "3+"),
        Field("max_version_level", INT16, "3+"),
        Field("min_version_level", INT16, "3+"),
    ),
)

RESPONSE = Struct(
    "ApiVersionsResponse",
    (
        Field("error_code", INT16),
        Field("api_keys", ArrayOf(_API_VERSION)),
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        # A Kafka broker's feature levels (metadata.version, transaction.version, ...): read from
        # a broker's answer; a server that leaves them out writes none of them (defaults).
        Field("supported_features", ArrayOf(_SUPPORTED_FEATURE), "3+", tag=0, tagged_versions="3+",
              ignorable=True),
        Field("finalized_features_epoch", INT64, "3+", default=-1, tag=1, tagged_versions="3+",
              ignorable=True),
        Field("finalized_features", ArrayOf(_FINALIZED_FEATURE), "3+", tag=2, tagged_versions="3+",
              ignorable=True),
        Field("zk_migration_ready", BOOL, "3+", tag=3, tagged_versions="3+", ignorable=True),
    ),
)

SPEC = ApiSpec(18, "ApiVersions", 0, 4, 3, REQUEST, RESPONSE, first_client_throttled=2)
API_KEY = SPEC.key
MIN_VERSION = SPEC.min_version
MAX_VERSION = SPEC.max_version


def is_flexible(version: int) -> bool:
    """Whether ``version`` uses request header v2 and compact encodings."""
    return SPEC.is_flexible(version)


def decode_request(version: int, data: bytes | memoryview | Reader) -> dict[str, Any]:
    """Decode an ApiVersions request body of ``version`` (0–4)."""
    return SPEC.decode_request(version, data, exact=False)


def encode_response(version: int, body: Mapping[str, Any]) -> bytes:
    """Encode an ApiVersions response body; ``body['api_keys']`` is a list of
    ``{"api_key", "min_version", "max_version"}`` dicts."""
    return SPEC.encode_response(version, body)


def unsupported_version_response(api_keys: Sequence[Mapping[str, int]]) -> bytes:
    """The v0 body answering an ApiVersions request of an unknown version (KIP-511)."""
    return encode_response(
        0, {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "api_keys": list(api_keys)}
    )
