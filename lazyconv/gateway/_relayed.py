"""One downstream request on its way upstream, and its way back: what every relay of
:mod:`~lazyconv.gateway._api_relay` does with it.

A request the cluster serves at the client's version is relayed as it came: its body's bytes go
upstream after a header of the upstream connection's (a correlation id of its own, the client's
id), and the answer's bytes come back with the client's correlation id — nothing decoded or
re-encoded, so unknown tagged fields pass too. Only what must change is decoded: the request
where it is split between brokers (its parts re-encoded at the same version), the answer where
it names brokers (:mod:`~lazyconv.gateway._rewrite`) or is merged from several; what is
decoded keeps the tagged fields lazyconv does not know and writes them back as they came
(:class:`~lazyconv.protocol._schema.UnknownTags`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lazyconv._send import BytesSend
from lazyconv.errors import LazyconvError
from lazyconv.gateway._rewrite import names_brokers, rewrite_brokers
from lazyconv.gateway._throttle import holds_throttled_answers, throttle_of
from lazyconv.gateway._upstream import ClusterView, UpstreamConnection, UpstreamSession
from lazyconv.net._model import Listener, Response, reply
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._connection import ClientConnection, Pending, Request, relabel_response
from lazyconv.protocol._error_response import error_response
from lazyconv.protocol._routing import ApiRoute, route_of
from lazyconv.protocol._sync_group import SPEC as SYNC_GROUP

log = logging.getLogger(__name__)

__all__ = ["Relayed"]

# Fields of a request that say how long the broker may take to answer it (beyond the gateway's
# own request timeout): a produce's or an admin request's timeout, a fetch's wait, a rebalance.
_WAIT_FIELDS = ("timeout_ms", "max_wait_ms", "rebalance_timeout_ms", "session_timeout_ms")
# A SyncGroup follower waits for the leader's assignment, up to the group's rebalance timeout,
# which the request does not carry: Kafka's default max.poll.interval.ms.
_SYNC_GROUP_WAIT_MS = 300_000


@dataclass
class Relayed:
    """A downstream request (``body``: decoded), the client's upstream connections and the
    listener it came in on (the broker the gateway is)."""

    request: Request
    body: dict[str, Any]
    session: UpstreamSession
    listener: Listener

    @property
    def spec(self) -> ApiSpec:
        return self.request.spec

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def route(self) -> ApiRoute:
        return route_of(self.request.api_key)

    @property
    def cluster(self) -> ClusterView:
        """The cluster as the client's upstream identity sees it."""
        return self.session.cluster

    def timeout(self) -> float:
        """How long the upstream may take to answer (seconds)."""
        waits = [v for name in _WAIT_FIELDS if isinstance(v := self.body.get(name), int) and v > 0]
        if self.request.api_key == SYNC_GROUP.key:
            waits.append(_SYNC_GROUP_WAIT_MS)
        return self.cluster.request_timeout + max(waits, default=0) / 1000

    async def send(self, conn: UpstreamConnection, body: dict[str, Any] | None = None) -> bytes | bytearray:
        """The request (its own bytes, or ``body`` encoded at the client's version) sent on
        ``conn``; the answer's frame."""
        payload = self.request.body if body is None else self.spec.encode_request(self.version, body)
        return await conn.relay(self.spec, self.version, payload, timeout=self.timeout())

    def decode(self, frame: bytes | bytearray) -> dict[str, Any]:
        """An upstream answer's body, decoded (raises a LazyconvError when it does not)."""
        return ClientConnection.decode_response(Pending(0, self.spec, self.version), frame,
                                                records_as_views=False)

    def answer(self, frame: bytes | bytearray, decoded: dict[str, Any] | None = None) -> Response:
        """The client's answer from an upstream answer: its bytes as they came, or decoded and
        re-encoded with the brokers it names replaced by the gateway. Its throttle time is read
        where the gateway holds it (:mod:`~lazyconv.gateway._throttle`): a version older than
        KIP-219."""
        if names_brokers(self.route):
            body = decoded if decoded is not None else self.decode(frame)
            return self.reply(body)
        response = Response(BytesSend(relabel_response(frame, self.request.correlation_id)))
        if holds_throttled_answers(self.request.api_key, self.version):
            try:
                response.throttle_ms = throttle_of(decoded if decoded is not None
                                                   else self.decode(frame))
            except LazyconvError:
                pass  # passed on as it came; the client's next request finds its broker muted
        return response

    def reply(self, body: dict[str, Any]) -> Response:
        """The client's answer from a body of the gateway's (merged answers, refusals)."""
        if names_brokers(self.route):
            body = rewrite_brokers(self.route, body, self.listener)
        response = reply(self.request, body)
        response.throttle_ms = throttle_of(body)
        return response

    def refuse(self, code: int, request: dict[str, Any] | None = None,
               message: str | None = None) -> Response:
        """The request (or the part ``request`` of it) answered with ``code`` everywhere a
        code goes."""
        return reply(self.request, self.refusal(code, request, message))

    def refusal(self, code: int, request: dict[str, Any] | None = None,
                message: str | None = None) -> dict[str, Any]:
        """The body of :meth:`refuse`'s answer."""
        return error_response(self.spec, self.version, self.body if request is None else request,
                              code, message=message)
