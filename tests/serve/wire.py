"""A tiny blocking client for the serve tests: one request of any declared API, decoded."""

from __future__ import annotations

import socket
from typing import Any

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader


class WireClient:
    """One connection; :meth:`call` sends a request and returns the decoded response body."""

    def __init__(self, port: int, client_id: str = "wire-test", *, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def call(self, spec: ApiSpec, version: int, body: dict[str, Any]) -> dict[str, Any]:
        reader = Reader(self.call_frame(spec, version, body)[4:])
        got = decode_response_header(reader, spec.response_header_version(version))
        assert got["correlation_id"] == self.correlation_id
        return spec.decode_response(version, reader)

    def call_frame(self, spec: ApiSpec, version: int, body: dict[str, Any]) -> bytes:
        """The response to one request as it came, its size first."""
        self.send(spec, version, body)
        return self.receive_frame()

    def send(self, spec: ApiSpec, version: int, body: dict[str, Any]) -> int:
        """Send one request without waiting for its answer; its correlation id."""
        self.correlation_id += 1
        header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                       self.correlation_id, self.client_id)
        payload = header + spec.encode_request(version, body)
        self.sock.sendall(len(payload).to_bytes(4, "big") + payload)
        return self.correlation_id

    def receive(self, spec: ApiSpec, version: int) -> tuple[int, dict[str, Any]]:
        """The next response: (its correlation id, its decoded body)."""
        reader = Reader(self.receive_frame()[4:])
        got = decode_response_header(reader, spec.response_header_version(version))
        return got["correlation_id"], spec.decode_response(version, reader)

    def receive_frame(self) -> bytes:
        """The next response frame as it came, its size first."""
        size = self._recv(4)
        return size + self._recv(int.from_bytes(size, "big"))

    def _recv(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            piece = self.sock.recv(n - len(data))
            assert piece, "server closed the connection"
            data += piece
        return bytes(data)

    def closed_by_server(self, within: float = 5.0) -> bool:
        """The server closed the connection (``recv`` gives ``b""`` or a reset) within
        ``within`` seconds; False when it is still open then."""
        self.sock.settimeout(within)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
