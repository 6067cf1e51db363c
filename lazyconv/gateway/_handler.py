"""The gateway's request handler: old versions downstream, Kafka 4 versions upstream.

:class:`GatewayHandler` plays :class:`~lazyconv.net._model.RequestHandler` for the shared
connection loop (:mod:`lazyconv.net._server`), like ``serve``'s broker does, but answers from a
real cluster. Each downstream connection's session gets an
:class:`~lazyconv.gateway._upstream.UpstreamSession` (its own upstream connections, as the
upstream identity :mod:`~lazyconv.gateway._identity` gives its principal, with that identity's
view of the cluster's topics, carrying the client's own client id, optionally prefixed), so no
client's long poll or mistake reaches another's stream, no client sees what its principal may
not, and the cluster's quotas, request logs and group tooling see the applications.

Routing: the gateway presents itself as the whole cluster, a single broker that leads every
partition and coordinates every group and transaction (docs/guide/gateway.md says why). What it
answers at which version is :mod:`~lazyconv.gateway._apis`' table, built once the cluster's
versions are known: a request the cluster serves at the client's version is relayed where Kafka
routes it (:mod:`~lazyconv.gateway._api_relay`); Fetch, Produce, Metadata and FindCoordinator
are the gateway's own (:mod:`~lazyconv.gateway._fetch_relay`,
:mod:`~lazyconv.gateway._produce_relay`, :mod:`~lazyconv.gateway._metadata_relay`,
:mod:`~lazyconv.gateway._group_relay`); the old versions of ListOffsets and the group APIs are
converted (:mod:`~lazyconv.gateway._list_offsets_relay`, :mod:`~lazyconv.gateway._group_relay`);
anything the table does not advertise is answered with UNSUPPORTED_VERSION. ApiVersions is the
front door's (:mod:`lazyconv.net._requests`).

A throttled answer to a client of a version older than KIP-219 is held for its throttle time,
as the broker did (:mod:`~lazyconv.gateway._throttle`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lazyconv.errors import ErrorCode
from lazyconv.gateway._api_relay import ApiRelay
from lazyconv.gateway._apis import gateway_api_table, relays
from lazyconv.gateway._coordinators import Coordinators
from lazyconv.gateway._fetch_relay import (
    DEFAULT_FETCH_AHEAD_BYTES,
    DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
    FetchRelay,
)
from lazyconv.gateway._group_relay import GROUP_APIS, GroupRelay
from lazyconv.gateway._identity import GatewayIdentities
from lazyconv.gateway._list_offsets_relay import ListOffsetsRelay
from lazyconv.gateway._metadata_relay import MetadataRelay
from lazyconv.gateway._produce_relay import ProduceRelay
from lazyconv.gateway._settings import DEFAULT_GATEWAY_CHUNK_SIZE, MAX_CLIENT_ID_BYTES
from lazyconv.gateway._throttle import ThrottleHold, holds_throttled_answers, throttle_of
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.net._model import Deferred, Listener, Response, reply
from lazyconv.net._session import Session
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._connection import Request
from lazyconv.protocol._error_response import error_response

log = logging.getLogger(__name__)

__all__ = ["GatewayHandler", "upstream_client_id"]

_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)


def upstream_client_id(prefix: str, client_id: str | None) -> str | None:
    """The client id the gateway sends upstream for a client that sent ``client_id``: its
    own, after ``prefix`` (``gateway.client.id.prefix``), cut to what a client id may hold
    (32767 bytes of UTF-8); null stays null without a prefix."""
    if client_id is None and not prefix:
        return None
    full = prefix + (client_id or "")
    encoded = full.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_CLIENT_ID_BYTES:
        return full
    return encoded[:MAX_CLIENT_ID_BYTES].decode("utf-8", "ignore")  # a character cut: dropped

_Handler = Callable[[Request, Session], Awaitable[Response | Deferred | None]]



class GatewayHandler:
    """Answers downstream requests through an :class:`UpstreamCluster`."""

    def __init__(self, cluster: UpstreamCluster, listeners: list[Listener], *,
                 chunk_size: int = DEFAULT_GATEWAY_CHUNK_SIZE,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 fetch_ahead_bytes: int = DEFAULT_FETCH_AHEAD_BYTES, fetch_splice: bool = True,
                 workers: ConversionWorkers | None = None,
                 identities: GatewayIdentities | None = None, client_id_prefix: str = "",
                 quick_on_loop: bool = True) -> None:
        """``fetch_ahead_bytes``: the budget of fetch-ahead over every connection (0: off);
        ``fetch_splice``: splice the records of the v10+ fetches that allow it;
        ``identities``: who each client is upstream (default: everyone connects as the
        cluster's anonymous or TLS identity, the gateway's own); ``client_id_prefix``: put
        before each client's id upstream; ``quick_on_loop``: what is cheaper to convert than to
        hand to a thread is converted on the event loop (:mod:`~lazyconv.gateway._on_loop`). The table of what it answers is built from the
        cluster's ApiVersions answer: start the cluster first."""
        if not listeners:
            raise ValueError("a gateway needs at least one listener")
        self.cluster = cluster
        self.identities = identities or GatewayIdentities(cluster)
        self.listeners = listeners
        self.client_id_prefix = client_id_prefix
        # the cluster's versions as the table was built from them: relaying follows the table
        self._cluster_versions = dict(cluster.api_versions)
        self.apis = gateway_api_table(self._cluster_versions, cluster.features)
        self.fetches = FetchRelay(cluster, chunk_size=chunk_size,
                                  upstream_fetch_max_bytes=upstream_fetch_max_bytes, workers=workers,
                                  fetch_ahead_bytes=fetch_ahead_bytes, splice=fetch_splice,
                                  quick_on_loop=quick_on_loop)
        self.produces = ProduceRelay(cluster, workers=workers, quick_on_loop=quick_on_loop)
        self.metadata = MetadataRelay(cluster)
        self.offsets = ListOffsetsRelay(cluster)
        self.coordinators = Coordinators(cluster)
        self.groups = GroupRelay(cluster, self.coordinators)
        self.relay = ApiRelay(cluster, self.coordinators)
        self._handlers = self._handler_table()
        #: answered by a Deferred (see RequestHandler.handle): a producer's requests in flight
        #: stay in flight upstream
        self.deferrable_keys = frozenset({produce.SPEC.key})
        self._watch: asyncio.Task[None] | None = None

    def _handler_table(self) -> dict[int, _Handler]:
        """API key -> what answers or converts it (ApiVersions is the front door's; what the
        cluster serves at the client's version goes to the relay)."""
        table: dict[int, _Handler] = {
            fetch.SPEC.key: self._fetch,
            produce.SPEC.key: self._produce,
            metadata.SPEC.key: self._metadata,
            list_offsets.SPEC.key: self._list_offsets,
            find_coordinator.SPEC.key: self._find_coordinator,
        }
        for spec in GROUP_APIS:
            table.setdefault(spec.key, functools.partial(self._group_request, spec))
        return table

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Ask the cluster for its brokers in the background (:meth:`UpstreamCluster.watch`):
        readiness, and the outage logged when no client asks; topics' metadata is refreshed
        when requests need it."""
        self._watch = loop.create_task(self.cluster.watch())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self.cluster.close()

    def open_session(self, session: Session) -> None:
        """The upstream connections of one downstream connection (closed with it), as its
        principal's upstream identity (called once the client has authenticated), under the
        client's own client id. Raises :class:`~lazyconv.errors.AuthenticationError` for a
        principal with no upstream identity (:meth:`GatewayIdentities.upstream_session`)."""
        upstream = self.identities.upstream_session(session)
        upstream.identify(upstream_client_id(self.client_id_prefix, session.client_id))
        session.state = upstream

    async def handle(self, request: Request, session: Session) -> Response | Deferred | None:
        """Answer one request; raises :class:`~lazyconv.errors.RemoteProtocolError` for a
        request that must close the connection. Without a connection loop (no session state
        yet) a principal with no upstream identity is refused:
        :class:`~lazyconv.errors.AuthenticationError`, nothing sent upstream."""
        if session.state is None:  # a caller without a connection loop: one for this request
            self.open_session(session)
            try:
                return await self._answer(request, session)
            finally:
                session.close()
        return await self._answer(request, session)

    async def _answer(self, request: Request, session: Session) -> Response | Deferred | None:
        key, version = request.api_key, request.api_version
        upstream = self._upstream(session)
        upstream.identify(upstream_client_id(self.client_id_prefix, session.client_id))
        if not self.apis.advertises(key, version):
            log.debug("%s v%d from %r: not routed, answered UNSUPPORTED_VERSION",
                      request.spec.name, version, session)
            return reply(request, error_response(request.spec, version, request.decode(),
                                                 _UNSUPPORTED_VERSION))
        # a client that does not back off itself (KIP-219): nothing of it is acted on while a
        # throttled answer of its is held, as a broker muted its connection (the connection
        # loop waits for session.muted_until before acting on a request, writing the answers
        # owed meanwhile: this wait is for the callers without one)
        hold: ThrottleHold | None = upstream.extras.get(ThrottleHold)
        if hold is not None:
            await hold.wait()
        if relays(key, version, self._cluster_versions):
            response: Response | Deferred | None = await self.relay.relay(request, upstream,
                                                                          session.listener)
        else:
            response = await self._handlers[key](request, session)
        if response is None or not holds_throttled_answers(key, version):
            return response
        if isinstance(response, Response) and response.throttle_ms <= 0:
            return response  # the usual answer: nothing to hold, no timer, no await
        if hold is None:
            hold = upstream.extras[ThrottleHold] = ThrottleHold(session=session)
        if isinstance(response, Deferred):
            return Deferred(hold.hold_when_answered(response.answer))
        return await hold.hold(response)

    @staticmethod
    def _upstream(session: Session) -> UpstreamSession:
        upstream = session.state
        assert isinstance(upstream, UpstreamSession)
        return upstream

    async def _fetch(self, request: Request, session: Session) -> Response:
        return await self.fetches.fetch(self._upstream(session), request.api_version,
                                        request.correlation_id, request.body)

    async def _produce(self, request: Request, session: Session) -> Response | Deferred | None:
        answer = await self.produces.send(self._upstream(session), request.api_version,
                                          request.decode())
        if answer is None:
            return None
        header = request.without_body()  # the frame is not kept while the answer is awaited
        deferred = Deferred.when_done(answer, functools.partial(_reply, header))
        if session.may_defer:  # the connection loop goes on with the next Produce meanwhile
            return deferred
        return await deferred.answer

    async def _metadata(self, request: Request, session: Session) -> Response:
        return _reply(request, await self.metadata.metadata(
            self._upstream(session), request.api_version, request.decode(), session.listener))

    async def _list_offsets(self, request: Request, session: Session) -> Response:
        return _reply(request, await self.offsets.list_offsets(
            self._upstream(session), request.api_version, request.decode()))

    async def _find_coordinator(self, request: Request, session: Session) -> Response:
        return _reply(request, await self.groups.find_coordinator(
            self._upstream(session), request.api_version, request.decode(), session.listener))

    async def _group_request(self, spec: ApiSpec, request: Request, session: Session) -> Response:
        answer: dict[str, Any] = await self.groups.relay(self._upstream(session), spec,
                                                          request.api_version, request.decode())
        return _reply(request, answer)


def _reply(request: Request, body: dict[str, Any]) -> Response:
    """``reply``, knowing the throttle time ``body`` carries (also where the client's version
    has no field for it: a converted answer, held all the same)."""
    response = reply(request, body)
    response.throttle_ms = throttle_of(body)
    return response
