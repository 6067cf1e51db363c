"""What a server tells about its connections and requests, for metrics and per-client records.

:class:`~lazyconv.net._server.KafkaServer` calls a :class:`ServerObserver` when a connection
opens, when it authenticates or fails to (TLS listeners, SASL listeners), after each request is
answered (its response written) and when a connection ends, with
the connection's :class:`~lazyconv.net._session.Session` and, at the end, why it ended (one of
:data:`CLOSE_REASONS`: a bounded set, fit for a metric's label). The base class does nothing;
the gateway's observer (:mod:`lazyconv.gateway._metrics`) keeps its Prometheus metrics and its
clients report with it. The hooks run on the server's event loop, once per connection or per
request, never per record: they must stay cheap.
"""

from __future__ import annotations

from lazyconv.net._sasl import SUPPORTED_MECHANISMS
from lazyconv.net._session import Session

__all__ = ["ServerObserver", "CLOSE_REASONS", "AUTHENTICATION_MECHANISMS"]

#: Why a connection ended:
#: ``client`` (the client closed it), ``idle`` (connections.max.idle.ms), ``read_timeout`` (its
#: request's bytes stopped), ``write_timeout`` (it read none of its response), ``request_memory``
#: (its request did not fit in queued.max.request.bytes in time, or stalled above its share),
#: ``authentication`` (its TLS handshake or SASL exchange failed, was refused or took too long),
#: ``invalid_request`` (a size outside the bounds, a frame that does not parse, an API or version
#: not served), ``unanswered_error`` (a request with no answer, a Produce with acks=0, failed: closed
#: so that the client notices, as Kafka closes it), ``response_error`` (an answer that could not be
#: finished), ``internal_error`` (a lazyconv bug), ``draining`` (the server is draining),
#: ``shutdown`` (the server stopped).
CLOSE_REASONS = ("client", "idle", "read_timeout", "write_timeout", "request_memory",
                 "authentication", "invalid_request", "unanswered_error", "response_error",
                 "internal_error", "draining", "shutdown")


#: What authenticated a connection (or failed to), a bounded set fit for a metric's label: a SASL
#: mechanism the listener enables; ``SASL`` when a SASL listener's client failed before naming
#: one (a mechanism not enabled, another API first, a stall); ``TLS`` for the TLS handshake (its
#: failure, or a TLS-only listener's client without a certificate); ``mTLS`` for a TLS-only
#: listener's client that presented a certificate.
AUTHENTICATION_MECHANISMS = (*SUPPORTED_MECHANISMS, "SASL", "TLS", "mTLS")


class ServerObserver:
    """Hooks a server calls (see the module docstring); every one does nothing here."""

    def connection_opened(self, session: Session) -> None:
        """A client connected (before its first request)."""

    def request_done(self, session: Session, seconds: float, request_bytes: int,
                     response_bytes: int, throttled: float = 0.0) -> None:
        """A request of ``session`` was answered: ``session.request`` is its (API key,
        version), ``session.bytes_in``/``bytes_out`` already count it (``request_bytes`` and
        ``response_bytes``, size fields included; 0 for no response, acks=0); ``seconds`` from
        the whole request read to its response written, but for ``throttled``: the seconds
        its answer was held for a quota's throttle (Kafka's ThrottleTimeMs, apart from its
        TotalTimeMs)."""

    def authenticated(self, session: Session, mechanism: str, ok: bool) -> None:
        """``session`` authenticated (``ok``; a KIP-368 re-authentication too, its principal
        already on the session) or failed to (then its connection is closing, with reason
        ``authentication``). ``mechanism`` is one of :data:`AUTHENTICATION_MECHANISMS`, never
        what the client named."""

    def connection_closed(self, session: Session, reason: str) -> None:
        """The connection ended; ``reason`` is one of :data:`CLOSE_REASONS`."""
