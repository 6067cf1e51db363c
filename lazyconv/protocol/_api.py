"""One declaration per API: key, version range, first flexible version, request/response
schemas, first client-throttled version.

Every API module of :mod:`lazyconv.protocol` builds one :class:`ApiSpec` (``SPEC``) from the
facts of Kafka's message JSON (``validVersions``, ``flexibleVersions``, the fields). Everything
else is derived from it: header versions, compact encodings, the decoders and encoders, and the
server's ApiVersions table (:mod:`lazyconv.protocol._registry`). Nothing spells "is this version
flexible" anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lazyconv.errors import LocalProtocolError, RemoteProtocolError
from lazyconv.protocol._message_codec import decode_message, encode_message
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import EncodedMessage, Struct

__all__ = ["ApiSpec"]

API_VERSIONS_KEY = 18


@dataclass(frozen=True)
class ApiSpec:
    """The facts of one Kafka API as this library speaks it.

    ``first_flexible`` is the first version using compact encodings, tagged fields, request
    header v2 and response header v1 (``None``: no flexible version in the range).

    ``first_client_throttled`` is the first version whose client throttles itself (KIP-219):
    over a quota, a broker sends the answer at once, its throttle time in it, and the client
    waits that long before its next request; to the versions below it a broker held the
    answer for the throttle time instead, and their clients never wait themselves. 0: no
    version is held (an API newer than KIP-219, or one whose client never backs off). It is
    Kafka's ``shouldClientThrottle`` of the response class, which the response JSON says as
    "Starting in version N, on quota violation, brokers send out responses before throttling"
    (ProduceResponse.json does not say it: v6).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    first_flexible: int | None
    request: Struct
    response: Struct
    first_client_throttled: int = 0

    def __post_init__(self) -> None:
        if self.min_version > self.max_version:
            raise ValueError(f"{self.name}: min version {self.min_version} > max {self.max_version}")

    # -- versions and headers --------------------------------------------------------------

    def supports(self, version: int) -> bool:
        """Whether ``version`` is in this API's range (an int; anything else is not)."""
        return isinstance(version, int) and self.min_version <= version <= self.max_version

    def check_version(self, version: int, position: int | None = None, *,
                      remote: bool = False) -> None:
        """Raise unless ``version`` is in this API's range: :class:`RemoteProtocolError` when
        ``remote`` (the version came from the peer's bytes), else :class:`LocalProtocolError`
        (the caller asked for it)."""
        if not isinstance(version, int) or not self.supports(version):
            raise (RemoteProtocolError if remote else LocalProtocolError)(
                f"{self.name} version {version!r} is not supported "
                f"(supported: {self.min_version}..{self.max_version})",
                position,
            )

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses compact encodings and tagged fields."""
        return self.first_flexible is not None and version >= self.first_flexible

    def holds_throttled_answers(self, version: int) -> bool:
        """Whether a broker holds a throttled answer to ``version`` for its throttle time (the
        client predates KIP-219 there and does not back off itself)."""
        return version < self.first_client_throttled

    def request_header_version(self, version: int) -> int:
        """2 for flexible versions, else 1 (ApiVersions included: KIP-511)."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """1 for flexible versions, else 0; ApiVersions responses always use header v0."""
        if self.key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0

    # -- bodies ----------------------------------------------------------------------------

    def decode_request(self, version: int, data: bytes | bytearray | memoryview | Reader, *,
                       exact: bool = True) -> dict[str, Any]:
        """Decode a request body of ``version``; ``exact``: no bytes may follow it."""
        return self._decode(self.request, "request", version, data, exact)

    def decode_response(self, version: int, data: bytes | bytearray | memoryview | Reader, *,
                        exact: bool = True) -> dict[str, Any]:
        """Decode a response body of ``version`` (clients and tests)."""
        return self._decode(self.response, "response", version, data, exact)

    def encode_request(self, version: int, body: Mapping[str, Any], *, strict: bool = False) -> bytes:
        """Encode a request body of ``version`` (clients and tests)."""
        self.check_version(version)
        return encode_message(self.request, body, version, self.is_flexible(version), strict=strict,
                              allow_records_slots=False).to_bytes()

    def encode_response(self, version: int, body: Mapping[str, Any], *, strict: bool = False) -> bytes:
        """Encode a response body of ``version`` into bytes."""
        return self.encode_response_message(version, body, strict=strict).to_bytes()

    def encode_response_message(self, version: int, body: Mapping[str, Any], *,
                                strict: bool = False) -> EncodedMessage:
        """Encode a response body, leaving records values in slots (see :mod:`.schema`)."""
        self.check_version(version)
        return encode_message(self.response, body, version, self.is_flexible(version), strict=strict)

    def _decode(self, struct: Struct, what: str, version: int,
                data: bytes | bytearray | memoryview | Reader, exact: bool) -> dict[str, Any]:
        self.check_version(version, remote=True)
        reader = data if isinstance(data, Reader) else Reader(data)
        body = decode_message(struct, reader, version, self.is_flexible(version))
        if exact and reader.remaining:
            raise reader.error(f"{reader.remaining} unexpected bytes after a {self.name} v{version} {what}")
        return body
