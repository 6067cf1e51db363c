"""What every Kafka-protocol endpoint of lazyconv shares: where it listens and what it answers.

:class:`Listener` is one advertised endpoint; :class:`Response` is a Send ready to be written
with what must be released once it is written (or abandoned). What answers the requests is a
:class:`~lazyconv.net._requests.RequestHandler`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lazyconv._futures import chained
from lazyconv._send import BytesSend, Send
from lazyconv.net._remote_send import RemoteJob, SendReport
from lazyconv.protocol._connection import Request, response_frame

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["Deferred", "Listener", "Response", "reply", "reply_frame", "response_frame"]


@dataclass(frozen=True)
class Listener:
    """One advertised endpoint; each listener plays one broker (node id) in Metadata.
    ``security_protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ``name``: the
    listener's name in the configuration (Kafka's listener name)."""

    node_id: int
    host: str
    port: int
    produce_delay_ms: int = 0
    security_protocol: str = "PLAINTEXT"
    #: how metrics and logs name it (default: ``HOST:PORT`` as advertised)
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.host}:{self.port}"

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class Response:
    """A response ready to be written, and what to release once it is written (or abandoned).

    ``off_loop``: writing it converts records (lazy down-conversion), so the connection loop
    runs its ``write_to`` steps on the conversion worker pool instead of the event loop.
    ``remote``: the same response described for a sender process
    (:mod:`lazyconv.net._sender_pool`), which writes it when the server has sender processes;
    ``remote_done`` is then called with the sender's report. ``written`` is called once the
    server wrote the whole response itself (what a handler counts of it: records converted).
    ``throttle_ms``: the quota throttle time the answer carries, where its handler must know it
    (the gateway holds it for a client that does not back off itself; 0: none, or not read);
    ``throttled_s``: how long its handler held it for that (seconds), which the request's
    duration leaves out, as Kafka counts a throttle apart from a request's total time.
    """

    send: Send
    resources: list[Any] = field(default_factory=list)
    off_loop: bool = False
    remote: RemoteJob | None = None
    remote_done: Callable[[SendReport], None] | None = None
    written: Callable[[], None] | None = None
    throttle_ms: int = 0
    throttled_s: float = 0.0

    def close(self) -> None:
        for resource in self.resources:
            try:
                resource.close()
            except Exception:  # closing must never mask the error that ended the response
                log.exception("closing %r failed", resource)
        self.resources.clear()


@dataclass
class Deferred:
    """A response still being worked out after its request was acted on (a Produce sent
    upstream, its answer awaited): the connection loop may read and act on the client's next
    request meanwhile, and writes the responses in request order, as the client expects.

    A handler returns one only for the API keys it lists in ``deferrable_keys`` and only to a
    session with ``may_defer`` set (the connection loop's), so a caller that answers one
    request at a time never sees one. ``answer`` ends with the response (``None``: none is
    due) or raises what would have ended the connection.
    """

    answer: asyncio.Future[Response | None]

    @classmethod
    def when_done(cls, worked_out: asyncio.Future[T],
                  respond: Callable[[T], Response | None]) -> Deferred:
        """The response ``respond(result)`` once ``worked_out`` has its result (its error, if it
        fails); letting the Deferred go (cancelling it) cancels ``worked_out``."""
        return cls(chained(worked_out, respond))


def reply(request: Request, body: dict[str, Any]) -> Response:
    """A whole response in memory answering ``request`` with ``body`` (encoded)."""
    return Response(BytesSend(request.reply(body)))


def reply_frame(frame: bytes) -> Response:
    """A whole response frame in memory (size, header and body)."""
    return Response(BytesSend(frame))

