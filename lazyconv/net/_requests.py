"""The front door every server shares: what happens to a request frame before its handler.

:class:`FrontDoor` takes one request frame of a connection and its
:class:`~lazyconv.net._session.Session`: the frame is parsed against the handler's
:class:`~lazyconv.protocol._connection.ApiTable` (an API or version it does not serve ends the
connection, as a Kafka broker ends it; an ApiVersions version it does not know is answered with
Kafka's v0 fallback), the session learns who the client says it is (client id; software name
and version from ApiVersions v3+) and what it used, ApiVersions is answered from the table (on
a SASL listener with SaslHandshake and SaslAuthenticate added, which the connection's SASL
exchange answers before a frame reaches this door), and every other request goes to the
handler. The connection loop (:mod:`lazyconv.net._server`)
calls it; so can anything that has frames without sockets (the fuzzers). :class:`RequestHandler`
is the contract of what answers the requests (``serve``'s broker over a log directory, the
gateway in front of a real cluster).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Protocol

from lazyconv.errors import LazyconvError
from lazyconv.net._model import Deferred, Response, reply, reply_frame
from lazyconv.net._session import Session
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _sasl_authenticate, _sasl_handshake
from lazyconv.protocol._connection import ApiTable, ApiVersionsFallback, Request, parse_request

log = logging.getLogger(__name__)

__all__ = ["FrontDoor", "RequestHandler"]


class RequestHandler(Protocol):
    """Answers requests for :class:`~lazyconv.net._server.KafkaServer` (``serve``'s broker over
    a log directory, the gateway in front of a real cluster).

    ``apis`` is the table of what it answers, built once: the :class:`FrontDoor` checks every
    request against it and answers ApiVersions
    from it, so a handler only sees requests it serves, at versions it serves.
    """

    apis: ApiTable

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start timers and background tasks on the serving loop."""

    def close(self) -> None:
        """Release everything; no request is handled afterwards."""

    def open_session(self, session: Session) -> None:
        """A client connected: attach what the handler keeps per connection to
        ``session.state`` (released with :meth:`Session.close` when it ends). Raising
        :class:`~lazyconv.errors.AuthenticationError` refuses the principal: the connection
        loop closes the connection as one its authenticator refused."""

    async def handle(self, request: Request, session: Session) -> Response | Deferred | None:
        """Answer one request; ``None`` when no response is due (acks=0 Produce). Raises a
        :class:`~lazyconv.errors.LazyconvError` for a request that must close the
        connection (:class:`~lazyconv.errors.UnansweredRequestError`: one with no answer that
        failed, closed after the answers owed before it). A handler with a ``deferrable_keys`` attribute (a set of API keys) may
        answer those with a :class:`~lazyconv.net._model.Deferred` when ``session.may_defer``
        is set: the connection loop then goes on with the client's next request of those keys
        and writes the answers in order."""


class FrontDoor:
    """Parses and dispatches the request frames of one server's connections to its handler."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler
        #: (API key, version) -> requests answered, over every connection of the server
        self.request_counts: Counter[tuple[int, int]] = Counter()
        self._sasl_table: ApiTable | None = None
        self._sasl_base: ApiTable | None = None

    def table_for(self, session: Session) -> ApiTable:
        """What ApiVersions announces to ``session``: the handler's table, with the SASL APIs
        on a SASL listener (Kafka lists them; a client picks its SaslHandshake version, and
        whether it may re-authenticate, from them)."""
        table = self.handler.apis
        if not session.listener.uses_sasl:
            return table
        if self._sasl_table is None or self._sasl_base is not table:
            self._sasl_base = table
            self._sasl_table = ApiTable([*table.specs.values(), _sasl_handshake.SPEC,
                                         _sasl_authenticate.SPEC], table.max_versions)
        return self._sasl_table

    async def answer(self, frame: bytes | bytearray | memoryview,
                     session: Session) -> Response | Deferred | None:
        """The response to one request frame (``None``: none is due). Raises
        :class:`~lazyconv.errors.RemoteProtocolError` (or another
        :class:`~lazyconv.errors.LazyconvError`) when the connection must end."""
        table = self.handler.apis
        request = parse_request(frame, table)
        if isinstance(request, ApiVersionsFallback):
            session.client_id = request.client_id
            session.request = (api_versions.API_KEY, request.api_version)
            return reply_frame(request.reply(self.table_for(session)))
        key_version = (request.api_key, request.api_version)
        self.request_counts[key_version] += 1
        session.api_versions[key_version] += 1
        session.request = key_version
        session.client_id = request.client_id
        log.debug("request %s v%d corr=%d from %r", request.spec.name, request.api_version,
                  request.correlation_id, session)
        if request.api_key == api_versions.API_KEY:
            return self._api_versions(request, session)
        return await self.handler.handle(request, session)

    def _api_versions(self, request: Request, session: Session) -> Response:
        if request.api_version >= 3:
            try:
                body = request.decode()
            except LazyconvError as exc:  # a client's name is not worth its connection
                log.debug("ApiVersions v%d from %r: %s", request.api_version, session, exc)
            else:
                session.client_software_name = body.get("client_software_name")
                session.client_software_version = body.get("client_software_version")
        return reply(request, self.table_for(session).api_versions_response(request.api_version))
