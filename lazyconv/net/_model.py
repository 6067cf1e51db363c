"""What every Kafka-protocol endpoint of lazyconv shares: where it listens and what it answers.

:class:`Listener` is one advertised endpoint; :class:`Response` is a Send ready to be written
with what must be released once it is written (or abandoned); :class:`RequestHandler` is the
contract between the connection loop (:mod:`lazyconv.net._server`) and whatever answers the
requests (``serve``'s broker over a log directory, the gateway in front of a real cluster).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lazyconv._send import BytesSend, Send
from lazyconv.net._remote_send import RemoteJob, SendReport
from lazyconv.protocol._headers import encode_response_header

log = logging.getLogger(__name__)

__all__ = ["Listener", "Response", "RequestHandler", "reply"]


@dataclass(frozen=True)
class Listener:
    """One advertised endpoint; each listener plays one broker (node id) in Metadata."""

    node_id: int
    host: str
    port: int
    produce_delay_ms: int = 0


@dataclass
class Response:
    """A response ready to be written, and what to release once it is written (or abandoned).

    ``off_loop``: writing it converts records (lazy down-conversion), so the connection loop
    runs its ``write_to`` steps on the conversion worker pool instead of the event loop.
    ``remote``: the same response described for a sender process
    (:mod:`lazyconv.net._sender_pool`), which writes it when the server has sender processes;
    ``remote_done`` is then called with the sender's report.
    """

    send: Send
    resources: list[Any] = field(default_factory=list)
    off_loop: bool = False
    remote: RemoteJob | None = None
    remote_done: Callable[[SendReport], None] | None = None

    def close(self) -> None:
        for resource in self.resources:
            try:
                resource.close()
            except Exception:  # closing must never mask the error that ended the response
                log.exception("closing %r failed", resource)
        self.resources.clear()


class RequestHandler(Protocol):
    """Answers request frames for :class:`~lazyconv.net._server.KafkaServer`.

    A handler that keeps state per connection also has ``new_session(peer) -> session`` (an
    object with ``close()``); the server then passes that connection's session to ``handle``
    as a fourth argument and closes it when the connection ends.
    """

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start timers and background tasks on the serving loop."""

    def close(self) -> None:
        """Release everything; no request is handled afterwards."""

    async def handle(self, frame: bytes | memoryview, listener: Listener,
                     peer: str = "") -> Response | None:
        """Answer one request frame (header + body); ``None`` when no response is due
        (acks=0 Produce). Raises a :class:`~lazyconv.errors.LazyconvError` for a request that
        must close the connection."""


def reply(correlation_id: int, header_version: int, body: bytes) -> Response:
    """A whole response in memory: size, response header of ``header_version``, ``body``."""
    header = encode_response_header(header_version, correlation_id)
    return Response(BytesSend((len(header) + len(body)).to_bytes(4, "big") + header + body))

