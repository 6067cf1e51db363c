"""Request and response headers (RequestHeader.json, ResponseHeader.json).

Request header v0: api_key, api_version, correlation_id. v1 adds client_id (a nullable string
with an int16 length, even in v2). v2 (flexible APIs) adds a tagged-field section.
Response header v0: correlation_id; v1 adds a tagged-field section. Fetch v0–11 use request
header v1 / response header v0, Fetch v12+ request header v2 / response header v1.
"""

from __future__ import annotations

from typing import Any

from lazyconv.errors import LocalProtocolError
from lazyconv.protocol._primitives import Reader, Writer

__all__ = [
    "RequestHeader",
    "encode_request_header",
    "decode_request_header",
    "encode_response_header",
    "decode_response_header",
]

RequestHeader = dict[str, Any]


def encode_request_header(
    header_version: int,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None = None,
) -> bytes:
    """Encode a request header of version 0, 1 or 2 (no unknown tagged fields)."""
    if header_version not in (0, 1, 2):
        raise LocalProtocolError(f"request header version {header_version} does not exist (0..2)")
    w = Writer()
    w.int16(api_key)
    w.int16(api_version)
    w.int32(correlation_id)
    if header_version >= 1:
        # Kafka keeps the int16 length here even in header v2, so old brokers can read it.
        try:
            w.string(client_id, compact=False, nullable=True)
        except LocalProtocolError as exc:
            raise LocalProtocolError(f"request header client_id: {exc.message}") from None
    if header_version >= 2:
        w.uvarint(0)
    return w.getvalue()


def decode_request_header(reader: Reader, header_version: int) -> RequestHeader:
    """Decode a request header from ``reader``; returns a dict with Kafka's field names."""
    if header_version not in (0, 1, 2):
        raise LocalProtocolError(f"request header version {header_version} does not exist (0..2)")
    header: RequestHeader = {
        "request_api_key": reader.int16("request_api_key"),
        "request_api_version": reader.int16("request_api_version"),
        "correlation_id": reader.int32("correlation_id"),
    }
    if header_version >= 1:
        header["client_id"] = reader.string("client_id", compact=False, nullable=True)
    if header_version >= 2:
        header["_unknown_tagged_fields"] = _skip_tags(reader, "request header")
    return header


def encode_response_header(header_version: int, correlation_id: int) -> bytes:
    """Encode a response header of version 0 or 1."""
    if header_version not in (0, 1):
        raise LocalProtocolError(f"response header version {header_version} does not exist (0..1)")
    w = Writer()
    w.int32(correlation_id)
    if header_version == 1:
        w.uvarint(0)
    return w.getvalue()


def decode_response_header(reader: Reader, header_version: int) -> dict[str, Any]:
    """Decode a response header of version 0 or 1."""
    if header_version not in (0, 1):
        raise LocalProtocolError(f"response header version {header_version} does not exist (0..1)")
    header: dict[str, Any] = {"correlation_id": reader.int32("correlation_id")}
    if header_version == 1:
        header["_unknown_tagged_fields"] = _skip_tags(reader, "response header")
    return header


def _skip_tags(reader: Reader, where: str) -> dict[int, bytes]:
    # Neither header defines a tagged field in the versions we speak: keep them all as unknown.
    count = reader.uvarint(f"tagged field count of the {where}")
    tags: dict[int, bytes] = {}
    for _ in range(count):
        tag = reader.uvarint(f"tag in the {where}")
        size = reader.uvarint(f"size of tag {tag} in the {where}")
        tags[tag] = reader.raw(size, f"tag {tag} of the {where}")
    return tags
