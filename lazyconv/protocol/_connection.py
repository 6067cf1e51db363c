"""Kafka connections, sans-IO (h11's shape): bytes in, frames, requests and responses out; no
socket is touched here, so the servers (:mod:`lazyconv.net._server`) and the gateway's upstream
client (:mod:`lazyconv.gateway._upstream`) are thin asyncio drivers around the same objects.

- :class:`FrameReader`: Kafka's framing (an int32 size, then that many bytes). The size is
  checked before any of the frame is read, so a driver can bound memory first; the rest of a
  frame that did not arrive with its size is read into the frame's own buffer
  (:meth:`FrameReader.buffer_for_rest`, for ``recv_into``), never joined from pieces.
- :class:`ApiTable`: the APIs one server answers and their version ranges, built once per
  server; its ApiVersions answer.
- :func:`parse_request`: one request frame against a table: the API key and version peeked and
  checked, Kafka's ApiVersions fallback (KIP-511: an ApiVersions version the server does not
  know is answered with a v0 response and error 35, the header read as v1 and the body
  ignored), the request header decoded, the body left as a view.
- :class:`ClientConnection`: the client side: requests encoded with fresh correlation ids,
  responses matched to what is pending (a response nobody asked for is the peer's error); a
  request encoded elsewhere (the SASL client exchange) takes a correlation id from the same
  counter and waits for its response frame undecoded.

Errors follow h11: :class:`~lazyconv.errors.RemoteProtocolError` when the peer's bytes are wrong
(the connection must end), :class:`~lazyconv.errors.LocalProtocolError` when we were asked to
send something invalid.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lazyconv.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from lazyconv.protocol._primitives import Reader

__all__ = [
    "FrameReader",
    "ApiTable",
    "Request",
    "ApiVersionsFallback",
    "parse_request",
    "response_frame",
    "ClientConnection",
    "Pending",
    "relabel_response",
]

_SIZE = struct.Struct(">i")
_KEY_AND_VERSION = struct.Struct(">hh")
SIZE_LENGTH = _SIZE.size
# A request header is at least its key, version and correlation id.
MIN_REQUEST_SIZE = 8
# A response frame is at least its correlation id.
MIN_RESPONSE_SIZE = 4


class FrameReader:
    """Size-prefixed frames out of a byte stream (one direction of one connection).

    The driver feeds what it received (:meth:`feed`); :meth:`next_size` says how large the next
    frame is once its size field is in (and refuses a size outside ``[min_size, max_size]``
    before anything of the frame is read); :meth:`next_frame` hands out a whole frame.
    When a frame did not arrive with its size, the driver reads the rest straight into the
    frame (:meth:`buffer_for_rest`, then :meth:`received`).
    """

    __slots__ = ("max_size", "min_size", "what", "_allocate", "_ahead", "_size", "_frame", "_filled")

    def __init__(self, max_size: int, *, min_size: int = MIN_REQUEST_SIZE,
                 what: str = "request", allocate: Callable[[int], bytearray] = bytearray) -> None:
        """``allocate(size)``: the buffer a frame that did not arrive with its size field is
        received into. It need not be zeroed: every byte of it is written before the frame is
        handed out, and a frame is never handed out before that."""
        self.max_size = max_size
        self.min_size = min_size
        self.what = what
        self._allocate = allocate
        self._ahead = b""  # received bytes not yet in a frame
        self._size: int | None = None  # the next frame's size, once read
        self._frame: bytearray | None = None  # the frame being filled
        self._filled = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out."""
        return len(self._ahead) + self._filled

    @property
    def missing(self) -> int:
        """Bytes the current frame still needs (0 when no frame is being filled)."""
        return len(self._frame) - self._filled if self._frame is not None else 0

    def feed(self, data: bytes) -> None:
        """Bytes the driver received, in order."""
        if not data:
            return
        if self._frame is not None:
            take = min(len(data), len(self._frame) - self._filled)
            self._frame[self._filled:self._filled + take] = data[:take]
            self._filled += take
            data = data[take:]
            if not data:
                return
        self._ahead = self._ahead + data if self._ahead else data

    def next_size(self) -> int | None:
        """The size of the next frame once its size field is in (``None`` before); raises
        :class:`~lazyconv.errors.RemoteProtocolError` for a size outside the bounds."""
        if self._size is None:
            if len(self._ahead) < SIZE_LENGTH:
                return None
            size = _SIZE.unpack_from(self._ahead)[0]
            if not self.min_size <= size <= self.max_size:
                raise RemoteProtocolError(
                    f"{self.what} size {size} outside [{self.min_size}, {self.max_size}]", 0)
            self._size = size
        return self._size

    def next_frame(self) -> bytes | bytearray | None:
        """The next whole frame (without its size field), or ``None`` when bytes are missing:
        then :meth:`buffer_for_rest` is where they go."""
        size = self.next_size()
        if size is None:
            return None
        if self._frame is None:
            end = SIZE_LENGTH + size
            if len(self._ahead) >= end:
                frame, self._ahead = self._ahead[SIZE_LENGTH:end], self._ahead[end:]
                self._size = None
                return frame
            self._frame = self._allocate(size)
            have = len(self._ahead) - SIZE_LENGTH
            self._frame[:have] = self._ahead[SIZE_LENGTH:]
            self._filled = have
            self._ahead = b""
            return None
        if self._filled < size:
            return None
        whole, self._frame, self._filled, self._size = self._frame, None, 0, None
        return whole

    def buffer_for_rest(self) -> memoryview:
        """Where the rest of the current frame goes (after :meth:`next_frame` returned
        ``None`` with the size known)."""
        if self._frame is None:
            raise RuntimeError("no frame is being filled")
        return memoryview(self._frame)[self._filled:]

    def received(self, n: int) -> None:
        """``n`` bytes were written into :meth:`buffer_for_rest`'s view."""
        if self._frame is None or not 0 <= n <= len(self._frame) - self._filled:
            raise RuntimeError(f"received {n} bytes that the frame has no room for")
        self._filled += n


class ApiTable:
    """The APIs one server answers, by key, with the version ranges it serves (a spec's own
    range, or less where ``max_versions`` caps it); built once per server.

    ``advertised``, when given, is what ApiVersions lists (key -> (min, max), each within the
    served range): a key or version served but not advertised is still parsed, so that the
    server can answer it with an error instead of closing the connection (the gateway answers
    UNSUPPORTED_VERSION for what it does not route). ``features``: ApiVersions v3+'s feature
    fields (``supported_features``, ``finalized_features_epoch``, ``finalized_features``, ...)
    added to the answer.
    """

    __slots__ = ("specs", "max_versions", "advertised", "features", "_table")

    def __init__(self, specs: Iterable[ApiSpec],
                 max_versions: Mapping[int, int] | None = None, *,
                 advertised: Mapping[int, tuple[int, int]] | None = None,
                 features: Mapping[str, Any] | None = None) -> None:
        self.specs: dict[int, ApiSpec] = {spec.key: spec for spec in sorted(specs, key=lambda s: s.key)}
        caps = max_versions or {}
        self.max_versions: dict[int, int] = {
            key: min(spec.max_version, caps.get(key, spec.max_version))
            for key, spec in self.specs.items()}
        if advertised is None:
            advertised = {key: (spec.min_version, self.max_versions[key])
                          for key, spec in self.specs.items()}
        for key, (low, high) in advertised.items():
            if key not in self.specs or not (self.specs[key].min_version <= low <= high
                                             <= self.max_versions[key]):
                raise ValueError(f"advertised range {low}-{high} of API {key} is not served")
        self.advertised: dict[int, tuple[int, int]] = dict(sorted(advertised.items()))
        self.features: dict[str, Any] = dict(features or {})
        self._table = [{"api_key": key, "min_version": low, "max_version": high}
                       for key, (low, high) in self.advertised.items()]

    def __contains__(self, api_key: object) -> bool:
        return api_key in self.specs

    def version_range(self, api_key: int) -> tuple[int, int]:
        """``(min, max)`` served for ``api_key`` (KeyError when it is not served)."""
        return self.specs[api_key].min_version, self.max_versions[api_key]

    def advertises(self, api_key: int, version: int) -> bool:
        """Whether ApiVersions lists ``version`` of ``api_key``."""
        entry = self.advertised.get(api_key)
        return entry is not None and entry[0] <= version <= entry[1]

    def version_table(self) -> list[dict[str, int]]:
        """ApiVersions' ``api_keys`` list."""
        return [dict(entry) for entry in self._table]

    def api_versions_response(self, version: int = api_versions.MAX_VERSION) -> dict[str, Any]:
        """The body of a successful ApiVersions response of ``version``: below v4 without the
        supported features whose minimum version is 0, as Kafka answers (KAFKA-17011: older
        clients refuse a minimum of 0)."""
        features = dict(self.features)
        supported = features.get("supported_features")
        if version < _FIRST_MIN_ZERO_FEATURES_VERSION and supported:
            features["supported_features"] = [f for f in supported if f.get("min_version") != 0]
        return {"error_code": 0, "api_keys": self.version_table(), "throttle_time_ms": 0,
                **features}


_NO_BODY = memoryview(b"")
# ApiVersions lists supported features of minimum version 0 from v4 on (KAFKA-17011)
_FIRST_MIN_ZERO_FEATURES_VERSION = 4


@dataclass(frozen=True, slots=True)
class Request:
    """One request frame, parsed: its API, version and header; ``body`` is a view of the frame
    from ``body_at`` (decoded by :meth:`decode` or by the API's own fast path)."""

    spec: ApiSpec
    api_version: int
    header: RequestHeader
    body: memoryview
    body_at: int

    @property
    def api_key(self) -> int:
        return self.spec.key

    @property
    def correlation_id(self) -> int:
        return int(self.header["correlation_id"])

    @property
    def client_id(self) -> str | None:
        return self.header.get("client_id")

    def decode(self, *, exact: bool = False) -> dict[str, Any]:
        """The body decoded with the API's schema (``exact``: no bytes may follow it)."""
        return self.spec.decode_request(self.api_version, Reader(self.body, base=self.body_at),
                                        exact=exact)

    def without_body(self) -> Request:
        """This request without its body: enough to :meth:`reply` to it later without keeping
        the frame's memory."""
        return replace(self, body=_NO_BODY)

    def reply(self, body: Mapping[str, Any]) -> bytes:
        """A whole response frame (size, header, ``body`` encoded) answering this request."""
        return response_frame(self.correlation_id, self.spec.response_header_version(self.api_version),
                              self.spec.encode_response(self.api_version, body))


@dataclass(frozen=True, slots=True)
class ApiVersionsFallback:
    """An ApiVersions request of a version the server does not know (KIP-511): the answer is a
    v0 response with UNSUPPORTED_VERSION and the server's table (:meth:`reply`)."""

    correlation_id: int
    api_version: int
    client_id: str | None

    def reply(self, table: ApiTable) -> bytes:
        return response_frame(self.correlation_id, 0,
                              api_versions.unsupported_version_response(table.version_table()))


def parse_request(frame: bytes | bytearray | memoryview, table: ApiTable) -> Request | ApiVersionsFallback:
    """One request frame (header and body, without the size field) checked against ``table``.

    Raises :class:`~lazyconv.errors.RemoteProtocolError` for a frame shorter than a header, an
    API the table does not have, a version outside its range (but ApiVersions), or a header
    that does not decode: the connection must end, as a Kafka broker ends it.
    """
    reader = Reader(frame)
    if reader.remaining < MIN_REQUEST_SIZE:
        raise RemoteProtocolError(f"request of {reader.remaining} bytes is shorter than a header", 0)
    api_key, version = _KEY_AND_VERSION.unpack_from(reader.view)
    spec = table.specs.get(api_key)
    if spec is None:
        raise RemoteProtocolError(f"unsupported API key {api_key}", 0)
    low, high = spec.min_version, table.max_versions[api_key]
    if not low <= version <= high:
        if api_key == api_versions.API_KEY:
            header = decode_request_header(reader, 1)  # the body is unknown: not read
            return ApiVersionsFallback(header["correlation_id"], version, header.get("client_id"))
        raise RemoteProtocolError(
            f"unsupported version {version} of {spec.name} (key {api_key}; this server speaks "
            f"{low}-{high})", 2)
    header = decode_request_header(reader, spec.request_header_version(version))
    return Request(spec, version, header, reader.view[reader.pos:], reader.pos)


def response_frame(correlation_id: int, header_version: int, body: bytes) -> bytes:
    """A whole response frame: size, response header of ``header_version``, ``body``."""
    header = encode_response_header(header_version, correlation_id)
    return _SIZE.pack(len(header) + len(body)) + header + body


def relabel_response(frame: bytes | bytearray | memoryview, correlation_id: int) -> bytes:
    """A whole response frame (size first) from a peer's response ``frame`` (without its size)
    answering another request: the correlation id replaced, the rest of the header (a flexible
    version's tagged fields) and the body kept byte for byte. What a relay that changed only
    the request's header sends back to its own client."""
    if len(frame) < MIN_RESPONSE_SIZE:
        raise RemoteProtocolError(f"a response of {len(frame)} bytes has no correlation id", 0)
    return _SIZE.pack(len(frame)) + _SIZE.pack(correlation_id) + bytes(memoryview(frame)[4:])


@dataclass(frozen=True, slots=True)
class Pending:
    """A request that waits for its response: what decodes it, and the caller's ``token``;
    ``raw``: its response frame is handed over undecoded (a request encoded elsewhere)."""

    correlation_id: int
    spec: ApiSpec | None
    api_version: int
    token: Any = None
    raw: bool = False


class ClientConnection:
    """The client side of one Kafka connection, sans-IO: requests become bytes with a fresh
    correlation id each; response frames (:attr:`frames`) are matched to what is pending, in
    any order the peer answers them."""

    def __init__(self, client_id: str | None, *, max_response_size: int,
                 allocate_frame: Callable[[int], bytearray] = bytearray) -> None:
        """``allocate_frame``: :class:`FrameReader`'s ``allocate``."""
        self.client_id = client_id
        self.frames = FrameReader(max_response_size, min_size=MIN_RESPONSE_SIZE, what="response",
                                  allocate=allocate_frame)
        # None: abandoned by its requester (its response is read and dropped)
        self._pending: dict[int, Pending | None] = {}
        self._next_correlation = 1

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered (nor abandoned)."""
        return sum(1 for p in self._pending.values() if p is not None)

    def send_request(self, spec: ApiSpec, version: int,
                     body: Mapping[str, Any] | bytes | bytearray | memoryview, *,
                     expect_response: bool = True, token: Any = None) -> tuple[Pending, bytes]:
        """The bytes of one request (raises :class:`~lazyconv.errors.LocalProtocolError` for
        a body that does not encode) and its pending entry (registered when a response is
        expected). A ``body`` given as bytes is an encoded body, sent as it is after a header
        of this connection's (a relayed request); its response is then handed over as a frame
        (:attr:`Pending.raw`), for the relay to pass on or decode."""
        correlation_id = self._next_correlation
        self._next_correlation = (correlation_id + 1) & 0x7FFFFFFF
        header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                       correlation_id, self.client_id)
        raw = isinstance(body, (bytes, bytearray, memoryview))
        if isinstance(body, (bytes, bytearray, memoryview)):
            spec.check_version(version)
            payload = bytes(body)
        else:
            payload = spec.encode_request(version, body)
        pending = Pending(correlation_id, spec, version, token, raw)
        if expect_response:
            self._pending[correlation_id] = pending
        return pending, _SIZE.pack(len(header) + len(payload)) + header + payload

    def reserve_correlation_id(self) -> int:
        """A correlation id for a request encoded elsewhere (see :meth:`expect_frame`)."""
        correlation_id = self._next_correlation
        self._next_correlation = (correlation_id + 1) & 0x7FFFFFFF
        return correlation_id

    def expect_frame(self, frame: bytes, *, token: Any = None) -> Pending:
        """Register a whole request frame encoded elsewhere (its correlation id from
        :meth:`reserve_correlation_id`): its response frame comes back undecoded."""
        if len(frame) < SIZE_LENGTH + MIN_REQUEST_SIZE:
            raise LocalProtocolError(f"a request frame of {len(frame)} bytes has no header")
        correlation_id = _SIZE.unpack_from(frame, SIZE_LENGTH + 4)[0]
        if correlation_id in self._pending:
            raise LocalProtocolError(f"correlation id {correlation_id} is already pending")
        pending = Pending(correlation_id, None, -1, token, raw=True)
        self._pending[correlation_id] = pending
        return pending

    def abandon(self, correlation_id: int) -> None:
        """Forget a pending request: its response is read and dropped when it comes."""
        if correlation_id in self._pending:
            self._pending[correlation_id] = None

    def next_response(self) -> tuple[Pending | None, bytes | bytearray] | None:
        """The next response frame and the request it answers (``None`` for one that was
        abandoned); ``None`` when no whole frame is buffered. A correlation id that was never
        sent raises :class:`~lazyconv.errors.RemoteProtocolError`."""
        frame = self.frames.next_frame()
        if frame is None:
            return None
        correlation_id = _SIZE.unpack_from(frame)[0]
        if correlation_id not in self._pending:
            raise RemoteProtocolError(
                f"a response for correlation id {correlation_id}, which is not pending", 0)
        return self._pending.pop(correlation_id), frame

    def take_pending(self) -> list[Pending]:
        """Every pending request, forgotten (the connection ended: fail them)."""
        pending, self._pending = self._pending, {}
        return [p for p in pending.values() if p is not None]

    @staticmethod
    def decode_response(pending: Pending, frame: bytes | bytearray, *,
                        records_as_views: bool = True) -> dict[str, Any]:
        """The body of ``frame`` decoded as ``pending``'s response (records fields as views
        into ``frame`` unless ``records_as_views`` is false); an ApiVersions answer that is
        the v0 fallback (KIP-511) is read as v0."""
        spec = pending.spec
        if spec is None:
            raise LocalProtocolError("a raw response frame is not decoded here")
        reader = Reader(frame, records_as_views=records_as_views)
        decode_response_header(reader, spec.response_header_version(pending.api_version))
        try:
            return spec.decode_response(pending.api_version, reader, exact=False)
        except ProtocolError:
            if spec.key != api_versions.API_KEY or pending.api_version == 0:
                raise
        # KIP-511: a server that does not know the ApiVersions version asked answers with a
        # v0 body (UNSUPPORTED_VERSION and its table), as Kafka's client reads it too
        reader = Reader(frame, records_as_views=records_as_views)
        decode_response_header(reader, 0)
        return spec.decode_response(0, reader, exact=False)

