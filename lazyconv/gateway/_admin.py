"""The gateway's own HTTP listener: ``/metrics``, ``/health/live``, ``/health/ready``, ``/clients``.

A small HTTP/1.1 server on the gateway's event loop (asyncio streams), apart from the Kafka
listener: one request per connection, ``GET`` (and ``HEAD``) only, a bounded request head read
within a timeout, ``Connection: close``. Serving it on the loop itself is what makes
``/health/live`` mean something: it answers only when the loop does. What it serves:

- ``/metrics``: the gateway's registry in Prometheus's text format (``prometheus_client``'s
  encoder; OpenMetrics when the scraper asks for it);
- ``/health/live``: 200 while the event loop answers;
- ``/health/ready``: 200 when the upstream cluster answered within the metadata's max age and
  the gateway is not draining, else 503 (the body says which);
- ``/clients``: the clients report as JSON (:meth:`ClientRegistry.report
  <lazyconv.gateway._clients.ClientRegistry.report>`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from prometheus_client.exposition import choose_encoder

from lazyconv.gateway._clients import ClientRegistry
from lazyconv.gateway._metrics import GatewayMetrics

log = logging.getLogger(__name__)

__all__ = ["AdminServer"]

_HEAD_LIMIT = 16384
_READ_TIMEOUT_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}


class AdminServer:
    """The HTTP listener (see the module docstring). ``readiness()`` returns (ready, why)."""

    def __init__(self, metrics: GatewayMetrics, clients: ClientRegistry,
                 readiness: Callable[[], tuple[bool, str]], host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.metrics = metrics
        self.clients = clients
        self.readiness = readiness
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen on ``host`` and ``port``; raises :class:`OSError` naming the metrics listener
        and its address (its errno kept) when it cannot."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            # asyncio's own message names no listener, and an address that does not resolve
            # not even the address: one line that says which listener, where and why
            # (a name that does not resolve is a gaierror, its errno negative and its own)
            reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else \
                exc.strerror or str(exc)
            raise OSError(exc.errno, f"the metrics listener cannot listen on {self.host!r} "
                                     f"port {self.port}: {reason}") from exc
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics and health on http://%s:%d/ (/metrics, /health/live, /health/ready, "
                 "/clients)", self.host, self.port)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                    ConnectionError):
                return
            if len(head) > _HEAD_LIMIT:
                return
            status, content_type, body, method = self._answer(head)
            lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}",
                     f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
                     "Connection: close", "", ""]
            writer.write("\r\n".join(lines).encode("latin-1"))
            if method != "HEAD":
                writer.write(body)
            await asyncio.wait_for(writer.drain(), _READ_TIMEOUT_S)
        except (ConnectionError, asyncio.TimeoutError):
            pass
        except Exception:  # a bug here must not take the listener down
            log.exception("the metrics listener failed to answer")
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[int, str, bytes, str]:
        try:
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _version = request_line.split(" ", 2)
        except ValueError:
            return 400, "text/plain", b"bad request\n", "GET"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"only GET and HEAD\n", method
        path = target.split("?", 1)[0]
        if path == "/metrics":
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            try:
                encoder, content_type = choose_encoder(headers.get("accept", ""))
            except (TypeError, ValueError):  # a malformed Accept: the text format, not a 500
                encoder, content_type = choose_encoder("")
            return 200, content_type, encoder(self.metrics.registry), method
        if path == "/health/live":
            return 200, "text/plain", b"live\n", method
        if path == "/health/ready":
            ready, why = self.readiness()
            return (200 if ready else 503), "text/plain", f"{why}\n".encode(), method
        if path == "/clients":
            report: dict[str, Any] = self.clients.report()
            return 200, "application/json", json.dumps(report, indent=1).encode(), method
        return 404, "text/plain", b"not found: /metrics, /health/live, /health/ready, /clients\n", method
