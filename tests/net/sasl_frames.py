"""Building and reading the frames of a SASL exchange in tests (requests as a client sends them,
responses as the exchange replies)."""

from __future__ import annotations

from typing import Any

from lazyconv.protocol import _api_versions, _metadata, _sasl_authenticate, _sasl_handshake
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader

HANDSHAKE = _sasl_handshake.SPEC
AUTHENTICATE = _sasl_authenticate.SPEC
API_VERSIONS = _api_versions.SPEC
METADATA = _metadata.SPEC


def request(spec: ApiSpec, version: int, body: dict[str, Any], correlation_id: int = 1,
            client_id: str | None = "test") -> bytes:
    """A request frame without its size prefix (what the exchange is fed)."""
    return (encode_request_header(spec.request_header_version(version), spec.key, version,
                                  correlation_id, client_id)
            + spec.encode_request(version, body))


def handshake(mechanism: str, version: int = 1, correlation_id: int = 1) -> bytes:
    return request(HANDSHAKE, version, {"mechanism": mechanism}, correlation_id)


def authenticate(token: bytes, version: int = 2, correlation_id: int = 2) -> bytes:
    return request(AUTHENTICATE, version, {"auth_bytes": token}, correlation_id)


def api_versions(version: int = 3) -> bytes:
    return request(API_VERSIONS, version, {"client_software_name": "t",
                                           "client_software_version": "1"})


def metadata(version: int = 1) -> bytes:
    return request(METADATA, version, {"topics": None} if version >= 1 else {"topics": []})


def unframe(reply: bytes | None) -> bytes:
    assert reply is not None, "no reply"
    size = int.from_bytes(reply[:4], "big")
    assert size == len(reply) - 4, "the reply's size prefix is wrong"
    return reply[4:]


def response(spec: ApiSpec, version: int, reply: bytes | None,
             correlation_id: int | None = None) -> dict[str, Any]:
    """Decode a reply (size-prefixed) as ``spec``'s response of ``version``."""
    reader = Reader(unframe(reply))
    header = decode_response_header(reader, spec.response_header_version(version))
    if correlation_id is not None:
        assert header["correlation_id"] == correlation_id
    return spec.decode_response(version, reader)
