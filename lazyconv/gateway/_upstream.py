"""The gateway's client side: connections to the real Kafka brokers and the cluster's metadata.

- :class:`UpstreamConnection`: one TCP connection to one broker (TLS and SASL as the
  :mod:`~lazyconv.gateway._upstream_security` settings say, authenticated as one upstream
  identity and re-authenticated before the broker's session lifetime ends). It negotiates
  ApiVersions when it opens, then carries pipelined requests (a broker answers one connection's
  requests in order); every version it sends is chosen by
  :func:`~lazyconv.gateway._floor.choose_upstream_version`, never below Kafka 4.0's floor. A
  request that times out closes the connection, as Kafka's clients do: its answer could still
  arrive and be taken for the next request's.
- :class:`UpstreamCluster`: the bootstrap list, how to connect, the brokers and the cluster id,
  shared by every downstream client; :class:`ClusterView`: the topic → partition → leader map
  (refreshed on demand and when stale) as one upstream identity sees it, shared by that
  identity's clients only (a principal never sees another's topics).
- :class:`UpstreamSession`: the connections one downstream client uses, one per broker, opened
  when first needed and closed with the client's connection, authenticated as its identity. A client's long-polling fetch
  therefore never delays another client's request, and a client's bytes never share a stream
  with another's.

When metrics are on (``metrics``, a :class:`~lazyconv.gateway._metrics.GatewayMetrics`), each
connection counts its requests by API key and version, their latency and the bytes each way.
The cluster's reachability is kept by :class:`~lazyconv.gateway._cluster_state.ClusterState`
(logged once per change; the gateway's readiness), refreshed in the background by
:meth:`UpstreamCluster.watch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lazyconv._version import __version__
from lazyconv.errors import (
    ConfigurationError,
    ErrorCode,
    LazyconvError,
    RemoteProtocolError,
    UpstreamAuthenticationError,
    UpstreamError,
)
from lazyconv.gateway._cluster_state import ClusterState
from lazyconv.gateway._floor import choose_upstream_version
from lazyconv.gateway._upstream_security import (
    ANONYMOUS_IDENTITY,
    UpstreamIdentity,
    UpstreamSecurity,
    authenticate,
    handshake_error,
)
from lazyconv.net._server import frame_buffer
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _describe_cluster as describe_cluster
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._connection import ClientConnection, Pending
from lazyconv.protocol._schema import ZERO_UUID

if TYPE_CHECKING:
    from lazyconv.gateway._metrics import GatewayMetrics

log = logging.getLogger(__name__)

__all__ = ["UpstreamConnection", "UpstreamCluster", "ClusterView", "UpstreamSession",
           "BrokerAddress", "TopicInfo", "PartitionInfo", "parse_bootstrap"]

# A response larger than this is taken for a broken stream (Kafka's fetch.max.bytes is 55 MiB).
MAX_RESPONSE_SIZE = 256 << 20
# Read at once when no response is being filled: sizes, headers and small responses. One buffer
# for every connection: the loop runs one callback at a time, and what a read brings is copied
# out of it at once (buffer_updated), so an idle connection holds none.
_READ_BUFFER = 64 << 10
_SHARED_READ_BUFFER = bytearray(_READ_BUFFER)
CLIENT_SOFTWARE_NAME = "lazyconv-gateway"
# v4 lists every supported feature (v3 leaves out those of minimum version 0); a cluster
# without v4 is asked v3, one without v3 v0
_API_VERSIONS_VERSIONS = (4, 3, 0)
# A Kafka broker answers ApiVersions at once; a port that is not Kafka's often waits for more
# bytes (an HTTP server for the end of a request line): it is given this long, not the request
# timeout.
HANDSHAKE_TIMEOUT = 5.0
_FIRST_AUTHORIZED_OPERATIONS_VERSION = 8  # Metadata asks for authorized operations from v8 on
# APIs only a KRaft controller listener offers (Vote, BeginQuorumEpoch, EndQuorumEpoch,
# BrokerRegistration, BrokerHeartbeat): such a listener has no Metadata, Produce or Fetch for
# clients.
_CONTROLLER_APIS = frozenset({52, 53, 54, 62, 63})
_NOT_A_BROKER_HINT = ("--upstream must name a Kafka broker's PLAINTEXT listener (Kafka's stock "
                      "configuration: 9092, not the controller's 9093)")
_FEATURE_FIELDS = ("supported_features", "finalized_features_epoch", "finalized_features",
                   "zk_migration_ready")


@dataclass(frozen=True)
class BrokerAddress:
    """Where an upstream broker listens."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_bootstrap(text: str) -> list[BrokerAddress]:
    """``"host:port[,host:port…]"`` as a list; :class:`ConfigurationError` for anything else."""
    addresses = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"upstream address {item!r} is not HOST:PORT")
        addresses.append(BrokerAddress(host.strip("[]"), int(port)))
    return addresses


# Every connection to the brokers of one cluster gets the same ApiVersions table: one dict for
# all of them (an idle client connection holds a reference, not its own copy).
_VERSION_TABLES: dict[tuple[tuple[int, int, int], ...], dict[int, tuple[int, int]]] = {}


def _shared_versions(entries: tuple[tuple[int, int, int], ...]) -> dict[int, tuple[int, int]]:
    table = _VERSION_TABLES.get(entries)
    if table is None:
        if len(_VERSION_TABLES) >= 64:  # brokers of other versions come and go: stay small
            _VERSION_TABLES.clear()
        table = _VERSION_TABLES[entries] = {key: (low, high) for key, low, high in entries}
    return table


class _UpstreamProtocol(asyncio.BufferedProtocol):
    """The asyncio side of an :class:`UpstreamConnection`: bytes go straight into the frame
    being read (a response larger than the read buffer is received into its own buffer, never
    joined from pieces); write pauses are honoured by :meth:`UpstreamConnection._send`."""

    def __init__(self, connection: UpstreamConnection) -> None:
        self.connection = connection

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.connection._receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.connection._received(nbytes)

    def pause_writing(self) -> None:
        self.connection._writable.clear()

    def resume_writing(self) -> None:
        self.connection._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection._lost(exc)


class UpstreamConnection:
    """One connection to one broker (see the module docstring): an asyncio driver around the
    sans-IO :class:`~lazyconv.protocol._connection.ClientConnection`."""

    def __init__(self, address: BrokerAddress, *, client_id: str | None = CLIENT_SOFTWARE_NAME,
                 request_timeout: float = 30.0, node_id: int | None = None,
                 metrics: GatewayMetrics | None = None,
                 security: UpstreamSecurity | None = None,
                 identity: UpstreamIdentity = ANONYMOUS_IDENTITY) -> None:
        self.address = address
        self.metrics = metrics
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.security = security or UpstreamSecurity()
        self.identity = identity
        self.authentications = 0
        # cleared while re-authenticating: no other request may be sent in between
        self._sendable = asyncio.Event()
        self._sendable.set()
        self._reauth: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        #: ApiVersions v3+'s feature fields as the broker answered them (tagged: maybe empty)
        self.features: dict[str, Any] = {}
        self._client = ClientConnection(client_id, max_response_size=MAX_RESPONSE_SIZE,
                                        allocate_frame=frame_buffer)
        self._transport: asyncio.Transport | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        self._chosen: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"UpstreamConnection({self.address}, node {self.node_id})"

    @property
    def closed(self) -> bool:
        return self._closed

    async def open(self, timeout: float = 10.0) -> None:
        """Connect (TLS when configured), negotiate ApiVersions and authenticate (SASL when
        configured); raises :class:`UpstreamError` on failure
        (:class:`~lazyconv.errors.UpstreamAuthenticationError`: the credentials were refused)."""
        loop = asyncio.get_running_loop()
        context = self.security.context
        tls: dict[str, Any] = {}
        if context is not None:
            tls = {"ssl": context, "ssl_handshake_timeout": timeout,
                   "server_hostname": self.address.host}
        try:
            transport, _protocol = await asyncio.wait_for(loop.create_connection(
                lambda: _UpstreamProtocol(self), self.address.host, self.address.port, **tls),
                timeout)
        except (OSError, asyncio.TimeoutError, UnicodeError) as exc:
            # UnicodeError: a host name IDNA cannot encode ("a..b", a label over 63 characters),
            # which a broker may advertise
            self._closed = True
            raise handshake_error(self.address, exc) from None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._transport = transport
        try:
            await self._negotiate()
        except BaseException:  # cancelled too (a client gone meanwhile): no socket left open
            self.close()
            raise

    async def _negotiate(self) -> None:
        """ApiVersions, then SASL when configured (see :meth:`open`)."""
        body: dict[str, Any] = {"client_software_name": CLIENT_SOFTWARE_NAME,
                                "client_software_version": __version__}
        handshake = min(self.request_timeout, HANDSHAKE_TIMEOUT)
        try:
            for version in _API_VERSIONS_VERSIONS:
                answer = await self.request(api_versions.SPEC, version,
                                            body if version >= 3 else {}, timeout=handshake)
                if answer["error_code"] != ErrorCode.UNSUPPORTED_VERSION:
                    break
        except UpstreamError as exc:
            self.close()
            raise UpstreamError(f"{self.address} does not answer like a Kafka broker: {exc} "
                                f"({_NOT_A_BROKER_HINT}; a TLS, SASL, HTTP or other port "
                                "closes the connection or waits)") from None
        if answer["error_code"] != 0:
            self.close()
            raise UpstreamError(f"upstream broker {self.address} refused ApiVersions with error "
                                f"{answer['error_code']}")
        self.versions = _shared_versions(tuple(
            (entry["api_key"], entry["min_version"], entry["max_version"]) for entry in answer["api_keys"]))
        if metadata.SPEC.key not in self.versions:
            self.close()
            why = ("it is a KRaft controller listener: it offers the quorum APIs, not Metadata, "
                   "Produce or Fetch" if _CONTROLLER_APIS & self.versions.keys()
                   else "it offers no Metadata API")
            raise UpstreamError(f"{self.address} is not a Kafka broker listener: {why} "
                                f"({_NOT_A_BROKER_HINT})")
        self.features = {name: answer[name] for name in _FEATURE_FIELDS if name in answer}
        credentials = self.identity.credentials
        if credentials is not None:
            try:
                self._schedule_reauthentication(await authenticate(self, credentials))
            except UpstreamError:
                self.close()
                raise
            self.authentications += 1

    # -- SASL: frames the exchange encodes, re-authentication -----------------------------------

    def correlation_ids(self) -> Iterator[int]:
        """Correlation ids from this connection's own counter (for the SASL exchange)."""
        while True:
            yield self._client.reserve_correlation_id()

    async def exchange_frame(self, frame: bytes) -> bytes:
        """Send one request frame encoded elsewhere (its correlation id from
        :meth:`correlation_ids`) and wait for its response frame."""
        transport = self._transport
        if self._closed or transport is None:
            raise UpstreamError(f"the connection to upstream broker {self.address} is closed")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._client.expect_frame(frame, token=future)
        transport.write(frame)
        try:
            return bytes(await asyncio.wait_for(future, self.request_timeout))
        except asyncio.TimeoutError:
            self.close()
            raise UpstreamError(f"SASL exchange with {self.address} got no answer within "
                                f"{self.request_timeout:.0f} s") from None

    def _schedule_reauthentication(self, at: float | None) -> None:
        if at is None or self._closed:
            return
        loop = asyncio.get_running_loop()
        self._reauth = loop.call_at(at, self._begin_reauthentication)

    def _begin_reauthentication(self) -> None:
        self._reauth = None
        if not self._closed:
            self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """KIP-368: authenticate again on this connection before the broker's session ends;
        requests wait meanwhile (a broker reads nothing but SASL frames during it)."""
        credentials = self.identity.credentials
        assert credentials is not None
        self._sendable.clear()
        try:
            at = await authenticate(self, credentials)
        except UpstreamError as exc:
            log.warning("re-authentication to %s as %s failed, closing the connection: %s",
                        self.address, self.identity.key, exc.message)
            self._fail(exc)
            return
        finally:
            self._sendable.set()
        self.authentications += 1
        log.debug("re-authenticated to %s as %s", self.address, self.identity.key)
        self._schedule_reauthentication(at)

    def set_client_id(self, client_id: str | None) -> None:
        """The client id of the requests sent from now on."""
        self.client_id = client_id
        self._client.client_id = client_id

    def serves(self, api_key: int, version: int) -> bool:
        """Whether this broker's ApiVersions answer lists ``version`` of ``api_key``."""
        served = self.versions.get(api_key)
        return served is not None and served[0] <= version <= served[1]

    def version(self, spec: ApiSpec) -> int:
        """The version of ``spec`` to send to this broker (see :mod:`lazyconv.gateway._floor`)."""
        chosen = self._chosen.get(spec.key)
        if chosen is None:
            chosen = self._chosen[spec.key] = choose_upstream_version(
                spec.key, self.versions.get(spec.key))
        return chosen

    async def request(self, spec: ApiSpec, version: int, body: Mapping[str, Any], *,
                      timeout: float | None = None) -> dict[str, Any]:
        """Send one request and wait for its decoded response body."""
        return await (await self.ask(spec, version, body, timeout=timeout))

    async def ask(self, spec: ApiSpec, version: int, body: Mapping[str, Any], *,
                  timeout: float | None = None) -> asyncio.Future[dict[str, Any]]:
        """Send one request; returns once it is written (a later request on this connection
        reaches the broker after it), with the future of its decoded response body. Without
        an answer within ``timeout`` seconds (default: the request timeout) the future fails
        with :class:`UpstreamError` and the connection ends, as Kafka's clients end it: a late
        answer could be taken for the next request's. Cancelling the future abandons the
        answer."""
        started = time.perf_counter()
        future = await self._send(spec, version, body, expect_response=True)
        assert future is not None
        wait = timeout if timeout is not None else self.request_timeout
        # a timer rather than wait_for: no task of its own for every request
        timer = asyncio.get_running_loop().call_later(wait, self._timed_out, future, spec,
                                                      version, wait)

        def answered(done: asyncio.Future[dict[str, Any]]) -> None:
            timer.cancel()
            if done.cancelled() or done.exception() is not None:  # read: never "unretrieved"
                return
            if self.metrics is not None:
                self.metrics.upstream_answered(spec.key, time.perf_counter() - started)

        future.add_done_callback(answered)
        return future

    def _timed_out(self, future: asyncio.Future[Any], spec: ApiSpec, version: int,
                   wait: float) -> None:
        if future.done():
            return
        future.set_exception(UpstreamError(
            f"{spec.name} v{version} to {self.address} got no answer within {wait:.0f} s"))
        self.close()

    async def relay(self, spec: ApiSpec, version: int, body: bytes | memoryview, *,
                    timeout: float | None = None) -> bytes | bytearray:
        """Send an encoded request body after a header of this connection's (correlation id,
        client id) and wait for the response frame (without its size), undecoded."""
        metrics = self.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        future = await self._send(spec, version, body, expect_response=True)
        assert future is not None
        try:
            frame: bytes | bytearray = await asyncio.wait_for(
                future, timeout if timeout is not None else self.request_timeout)
            if metrics is not None:
                metrics.upstream_answered(spec.key, time.perf_counter() - started)
            return frame
        except asyncio.TimeoutError:
            self.close()  # as in request(): a late answer must not be taken for another's
            raise UpstreamError(f"{spec.name} v{version} to {self.address} got no answer within "
                                f"{timeout or self.request_timeout:.0f} s") from None

    async def send_only(self, spec: ApiSpec, version: int, body: Mapping[str, Any]) -> None:
        """Send a request that has no response (Produce with acks=0)."""
        await self._send(spec, version, body, expect_response=False)

    async def _send(self, spec: ApiSpec, version: int,
                    body: Mapping[str, Any] | bytes | memoryview, *,
                    expect_response: bool) -> asyncio.Future[Any] | None:
        if not self._sendable.is_set():  # re-authenticating
            await self._sendable.wait()
        transport = self._transport
        if self._closed or transport is None:
            raise UpstreamError(f"the connection to upstream broker {self.address} is closed")
        future: asyncio.Future[Any] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
        _pending, data = self._client.send_request(spec, version, body,
                                                   expect_response=expect_response, token=future)
        transport.write(data)  # whole requests: the transport never interleaves two
        if self.metrics is not None:
            self.metrics.upstream_sent(spec.key, version, len(data))
        if not self._writable.is_set():  # the broker reads slowly: wait before the next one
            await self._writable.wait()
            if self._closed:
                raise UpstreamError(f"the connection to upstream broker {self.address} was closed")
        return future

    # -- the protocol's callbacks -------------------------------------------------------------

    def _receive_buffer(self) -> memoryview:
        frames = self._client.frames
        if frames.missing:
            return frames.buffer_for_rest()
        return memoryview(_SHARED_READ_BUFFER)

    def _received(self, nbytes: int) -> None:
        if self.metrics is not None:
            self.metrics.upstream_received_bytes += nbytes
        frames = self._client.frames
        try:
            if frames.missing:
                frames.received(nbytes)
            else:
                frames.feed(bytes(_SHARED_READ_BUFFER[:nbytes]))
            while (answered := self._client.next_response()) is not None:
                self._deliver(*answered)
        except RemoteProtocolError as exc:
            self._fail(UpstreamError(f"upstream broker {self.address} broke the protocol: "
                                     f"{exc.message}"))

    def _deliver(self, pending: Pending | None, frame: bytes | bytearray) -> None:
        if pending is None:
            return  # abandoned by its requester
        future: asyncio.Future[Any] = pending.token
        if future.done():  # its requester gave up
            return
        if pending.raw:  # a relayed request: its answer goes back as it came
            future.set_result(frame)
            return
        try:
            # Fetch records stay views into the frame: relayed without a copy.
            future.set_result(ClientConnection.decode_response(pending, frame))
        except LazyconvError as exc:
            assert pending.spec is not None
            future.set_exception(UpstreamError(
                f"malformed {pending.spec.name} v{pending.api_version} response from "
                f"{self.address}: {exc}"))

    def _lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc is not None else ""
        self._fail(UpstreamError(f"upstream broker {self.address} closed the connection{reason}"))

    def _fail(self, error: Exception) -> None:
        self._closed = True
        self._writable.set()
        self._sendable.set()
        if self._reauth is not None:
            self._reauth.cancel()
            self._reauth = None
        for pending in self._client.take_pending():
            future = pending.token
            if future is not None and not future.done():
                future.set_exception(error)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()

    def close(self) -> None:
        """Close the connection; pending requests fail with :class:`UpstreamError`."""
        self._fail(UpstreamError(f"the connection to {self.address} was closed"))


@dataclass
class PartitionInfo:
    """One partition as the cluster's metadata describes it."""

    partition: int
    leader: int
    leader_epoch: int = -1
    error_code: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    """One topic as the cluster's metadata describes it."""

    name: str
    error_code: int = 0
    topic_id: uuid.UUID = ZERO_UUID
    is_internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    fetched_at: float = 0.0
    # the operations the identity may perform on it, as the cluster's Metadata says (a bit field)
    authorized_operations: int = metadata.AUTHORIZED_OPERATIONS_OMITTED


# what a lookup by name answers for a topic that is not there for this identity
_NOT_A_TOPIC = frozenset({int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.INVALID_TOPIC_EXCEPTION),
                          int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), int(ErrorCode.UNKNOWN_TOPIC_ID)})


class UpstreamCluster:
    """The upstream cluster as every downstream client shares it: the bootstrap list, how to
    connect (TLS, SASL), the brokers and the cluster id. What topics exist is *not* shared:
    each upstream identity has its own :class:`ClusterView` (:meth:`view`), filled only with
    what the cluster answered that identity, so no client sees a topic its principal may not
    describe."""

    def __init__(self, bootstrap: list[BrokerAddress], *, client_id: str = CLIENT_SOFTWARE_NAME,
                 request_timeout: float = 30.0, metadata_max_age: float = 30.0,
                 metrics: GatewayMetrics | None = None,
                 security: UpstreamSecurity | None = None,
                 service_identity: UpstreamIdentity | None = ANONYMOUS_IDENTITY) -> None:
        """``metrics``: counted per upstream request when given; ``security``: TLS and SASL
        toward the brokers; ``service_identity``: the gateway's own (what :meth:`start` and
        :meth:`watch` reach the cluster as; None when it has none, in passthrough mode: then
        only TLS and ApiVersions are checked at start)."""
        if not bootstrap:
            raise ConfigurationError("no upstream address given")
        self.bootstrap = list(bootstrap)
        self.metrics = metrics
        self.state = ClusterState(metadata_max_age)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.metadata_max_age = metadata_max_age
        self.security = security or UpstreamSecurity()
        self.service_identity = service_identity
        self.brokers: dict[int, BrokerAddress] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._views: dict[str, ClusterView] = {}
        self._closed = False  # watch() ends at its next turn (a cancel can be lost: see watch)
        #: what the first broker reached answered in ApiVersions: its versions and features
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.features: dict[str, Any] = {}

    def connection(self, address: BrokerAddress, identity: UpstreamIdentity, *,
                   node_id: int | None = None, client_id: str | None = None) -> UpstreamConnection:
        """A new (unopened) connection to ``address`` as ``identity``."""
        return UpstreamConnection(address, client_id=client_id or self.client_id,
                                  request_timeout=self.request_timeout, node_id=node_id,
                                  metrics=self.metrics, security=self.security, identity=identity)

    async def open_any(self, identity: UpstreamIdentity, *,
                       client_id: str | None = None) -> UpstreamConnection:
        """An open connection as ``identity`` to the first broker that answers (known brokers,
        then the bootstrap list). A refusal of the credentials is raised at once
        (:class:`~lazyconv.errors.UpstreamAuthenticationError`: another broker would refuse
        them too)."""
        errors = []
        candidates = list(self.brokers.items()) + [(None, a) for a in self.bootstrap]
        for node_id, address in candidates:
            if node_id is None and address in self.brokers.values():
                continue
            conn = self.connection(address, identity, node_id=node_id, client_id=client_id)
            try:
                await conn.open()
            except UpstreamAuthenticationError:
                raise
            except UpstreamError as exc:
                errors.append(str(exc))
                continue
            if not self.api_versions:
                self.api_versions, self.features = dict(conn.versions), dict(conn.features)
            return conn
        raise UpstreamError("no upstream broker reachable: " + "; ".join(dict.fromkeys(errors)))

    def node_of(self, address: BrokerAddress) -> int | None:
        """The node id of the broker at ``address`` (None: not in the metadata)."""
        for node_id, known in self.brokers.items():
            if known == address:
                return node_id
        return None

    async def start(self) -> None:
        """Reach the cluster once (raises :class:`UpstreamError` when no broker answers, when
        a certificate does not verify or the service identity is refused). Without a service
        identity (passthrough) only TLS and ApiVersions can be checked before a client comes."""
        if self.service_identity is None:
            await self.probe()
            return
        view = self.view(self.service_identity)  # kept for the gateway's life
        try:
            await view.refresh(None)
        except BaseException:
            self.release(view)
            raise

    def watch_interval(self) -> float:
        """How often :meth:`watch` asks: a third of the metadata's max age, 0.5-10 s."""
        return min(10.0, max(0.5, self.metadata_max_age / 3))

    async def watch(self) -> None:
        """Ask the cluster for its brokers every :meth:`watch_interval` seconds, forever: its
        answers keep :attr:`state` current while no client asks anything (readiness), and the
        brokers' addresses fresh. Failures are the state's to log. It asks as the service
        identity; without one (passthrough) through any identity's live view, else not at all
        (no credentials to ask with)."""
        interval = self.watch_interval()
        # Ends when cancelled, and at the next turn after close(): on Python 3.11 a cancel that
        # arrives as the refresh fails with UpstreamError (close() cuts its connection) is lost
        # inside asyncio.wait_for, and the loop would go on probing a cluster it left.
        while True:
            await asyncio.sleep(interval)
            if self._closed:
                return
            view = (self._views.get(self.service_identity.key) if self.service_identity is not None
                    else next(iter(self._views.values()), None))
            with contextlib.suppress(UpstreamError):
                if view is not None:
                    await view.refresh([], timeout=min(self.request_timeout, self.metadata_max_age))
                else:
                    await self.probe()

    async def probe(self) -> None:
        """Reach a broker without credentials (TLS and ApiVersions only): what a gateway
        without a service identity can check while no client is connected."""
        try:
            conn = await self.open_any(ANONYMOUS_IDENTITY)
        except UpstreamError as exc:
            self.state.failed("connection", exc)
            raise
        conn.close()
        self.state.ok()

    def invalidate(self) -> None:
        """Forget every view's metadata: the next use asks the cluster again."""
        for view in self._views.values():
            view.invalidate()

    def close(self) -> None:
        self._closed = True
        for view in list(self._views.values()):
            view.close()
        self._views.clear()

    # -- per-identity views ---------------------------------------------------------------

    def view(self, identity: UpstreamIdentity) -> ClusterView:
        """The cluster as ``identity`` sees it (shared by that identity's sessions; give it
        back with :meth:`release`). Credentials other than the view's for the same key (a
        reload changed the password) get a view of their own, which takes the key: its
        connection logs in with them; the sessions that have the old view keep it."""
        view = self._views.get(identity.key)
        if view is None or view.identity != identity:
            view = self._views[identity.key] = ClusterView(self, identity)
        view.users += 1
        return view

    def release(self, view: ClusterView) -> None:
        """A session of the view's identity ended; the last one closes it (its connection,
        its cache and the credentials it held go)."""
        view.users -= 1
        if view.users <= 0:
            if self._views.get(view.identity.key) is view:
                del self._views[view.identity.key]
            view.close()

    @property
    def views(self) -> dict[str, ClusterView]:
        """The live views by identity key."""
        return dict(self._views)

    def note_brokers(self, answer: Mapping[str, Any]) -> None:
        """The brokers and the cluster id of a Metadata answer (the same for every identity)."""
        self.brokers = {b["node_id"]: BrokerAddress(b["host"], b["port"]) for b in answer["brokers"]}
        self.cluster_id = answer.get("cluster_id")
        self.controller_id = answer.get("controller_id", -1)

    def address_of(self, node_id: int) -> BrokerAddress:
        address = self.brokers.get(node_id)
        if address is None:
            raise UpstreamError(f"upstream broker {node_id} is not in the cluster's metadata")
        return address


class ClusterView:
    """The cluster's topics as one upstream identity sees them: the topic → partition → leader
    map (refreshed on demand and when stale) from Metadata requests made as that identity, on
    a connection of its own. The shared facts (brokers, cluster id, timeouts) are the
    :class:`UpstreamCluster`'s."""

    def __init__(self, cluster: UpstreamCluster, identity: UpstreamIdentity) -> None:
        self.shared = cluster
        self.identity = identity
        self.users = 0
        self.topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}  # Fetch v13+ names topics by id
        self._control: UpstreamConnection | None = None
        self._lock = asyncio.Lock()
        self._all_topics_at = 0.0
        # when the last refresh that was answered began, and when the last that failed failed
        # (with what): the callers that waited for the lock meanwhile take that outcome instead
        # of asking again
        self._answered_at = 0.0
        self._failed: tuple[float, UpstreamError] | None = None

    def __repr__(self) -> str:
        return f"ClusterView({self.identity.key}, {len(self.topics)} topics)"

    # the shared facts, read through the view so that relays need one object
    @property
    def brokers(self) -> dict[int, BrokerAddress]:
        return self.shared.brokers

    @property
    def cluster_id(self) -> str | None:
        return self.shared.cluster_id

    @property
    def controller_id(self) -> int:
        return self.shared.controller_id

    @property
    def request_timeout(self) -> float:
        return self.shared.request_timeout

    @property
    def metadata_max_age(self) -> float:
        return self.shared.metadata_max_age

    @property
    def bootstrap(self) -> list[BrokerAddress]:
        return self.shared.bootstrap

    @property
    def state(self) -> ClusterState:
        return self.shared.state

    @property
    def metrics(self) -> GatewayMetrics | None:
        return self.shared.metrics

    def address_of(self, node_id: int) -> BrokerAddress:
        return self.shared.address_of(node_id)

    # -- the control connection (metadata) ------------------------------------------------

    async def _control_connection(self) -> UpstreamConnection:
        if self._control is not None and not self._control.closed:
            return self._control
        self._control = await self.shared.open_any(self.identity)
        return self._control

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    # -- metadata -------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None, *, allow_auto_create: bool = False,
                      timeout: float | None = None) -> None:
        """Ask the cluster for ``topics`` (``None``: every topic; ``[]``: the brokers only)
        and update the cache; ``timeout`` bounds the request (default: the request timeout).
        One refresh runs at a time; a caller that waited for one takes its failure, or its
        answer when it was asked after the call (the topics the caller asks for), so that under
        an outage the clients' requests are not queued each a request timeout behind the
        other's, and a burst of them after a leader moved does not ask once per request."""
        called = time.monotonic()
        failed: tuple[float, UpstreamError] | None = None
        try:
            async with self._lock:
                failed = self._failed
                if failed is not None and failed[0] >= called:
                    shared = type(failed[1])(failed[1].message)
                    raise shared
                if topics is None and self._all_topics_at >= called or \
                        topics == [] and self._answered_at >= called:
                    return
                if topics:
                    topics = [name for name in topics if not self._answered_since(
                        name, called, allow_auto_create)]
                    if not topics:
                        return
                began = time.monotonic()
                try:
                    answer = await self._ask(topics, allow_auto_create, timeout)
                except UpstreamError as exc:
                    self._failed = (time.monotonic(), exc)
                    raise
                self._failed = None
                self._answered_at = began
                self._apply_metadata(answer, every_topic=topics is None, now=began)
        except UpstreamAuthenticationError:
            raise  # one identity's refusal says nothing of the cluster's health
        except UpstreamError as exc:
            if failed is None or failed[0] < called:  # its own attempt, not one it waited for
                self.state.failed("metadata", exc)
            raise
        self.state.ok()

    def _answered_since(self, name: str, since: float, allow_auto_create: bool) -> bool:
        """Whether a refresh begun at ``since`` or later described topic ``name`` (as one that
        exists, when it may be created)."""
        info = self.topics.get(name)
        return info is not None and info.fetched_at >= since and \
            (info.error_code == 0 or not allow_auto_create)

    async def _ask(self, topics: list[str] | None, allow_auto_create: bool,
                   timeout: float | None) -> dict[str, Any]:
        conn = await self._control_connection()
        version = conn.version(metadata.SPEC)
        body: dict[str, Any] = {
            "topics": None if topics is None else [{"topic_id": ZERO_UUID, "name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_create,
            # what a client's Metadata v8+ may ask for (the cluster answers for this identity)
            "include_topic_authorized_operations": version >= _FIRST_AUTHORIZED_OPERATIONS_VERSION,
        }
        try:
            return await conn.request(metadata.SPEC, version, body, timeout=timeout)
        except UpstreamError:
            conn.close()
            raise

    def _apply_metadata(self, answer: Mapping[str, Any], every_topic: bool, now: float) -> None:
        """``now``: when the request was sent (what the answer may be older than)."""
        self.shared.note_brokers(answer)
        seen = set()
        for topic in answer["topics"]:
            name = topic["name"]
            if name is None:
                continue
            seen.add(name)
            info = TopicInfo(name, topic["error_code"], topic.get("topic_id") or ZERO_UUID,
                             bool(topic.get("is_internal")), fetched_at=now,
                             authorized_operations=topic.get(
                                 "topic_authorized_operations", metadata.AUTHORIZED_OPERATIONS_OMITTED))
            for p in topic["partitions"]:
                info.partitions[p["partition_index"]] = PartitionInfo(
                    p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                    p["error_code"], list(p["replica_nodes"]), list(p["isr_nodes"]))
            self.topics[name] = info
            if info.topic_id != ZERO_UUID:
                self._names_by_id[info.topic_id] = name
        if every_topic:
            for name in list(self.topics):
                if name not in seen:
                    self._names_by_id.pop(self.topics.pop(name).topic_id, None)
            self._all_topics_at = now

    def _fresh(self, name: str) -> bool:
        info = self.topics.get(name)
        return (info is not None and info.error_code == 0 and
                time.monotonic() - info.fetched_at < self.metadata_max_age)

    async def topics_for(self, names: list[str] | None, *,
                         allow_auto_create: bool = False) -> dict[str, TopicInfo]:
        """Metadata of ``names`` (``None``: every topic), from the cache when fresh."""
        if names is None:
            if time.monotonic() - self._all_topics_at >= self.metadata_max_age:
                await self.refresh(None)
            return self.listed()
        missing = [n for n in dict.fromkeys(names) if not self._fresh(n)]
        if missing:
            await self.refresh(missing, allow_auto_create=allow_auto_create)
        return {n: self.topics[n] for n in names if n in self.topics}

    async def cluster_authorized_operations(self) -> int:
        """The operations this identity may perform on the cluster (a bit field), as the
        cluster's DescribeCluster answers it; ``AUTHORIZED_OPERATIONS_OMITTED`` when the cluster
        does not serve DescribeCluster or does not answer (the client then reads "not known")."""
        try:
            async with self._lock:  # the control connection: opened once
                conn = await self._control_connection()
                served = conn.versions.get(describe_cluster.SPEC.key)
                if served is None or served[0] > describe_cluster.SPEC.max_version:
                    return metadata.AUTHORIZED_OPERATIONS_OMITTED
                try:
                    answer = await conn.request(
                        describe_cluster.SPEC, min(served[1], describe_cluster.SPEC.max_version),
                        {"include_cluster_authorized_operations": True})
                except UpstreamError:
                    conn.close()
                    raise
        except UpstreamError as exc:
            log.debug("cluster authorized operations: the cluster did not answer: %s", exc)
            return metadata.AUTHORIZED_OPERATIONS_OMITTED
        if answer.get("error_code"):
            return metadata.AUTHORIZED_OPERATIONS_OMITTED
        return int(answer.get("cluster_authorized_operations", metadata.AUTHORIZED_OPERATIONS_OMITTED))

    def listed(self) -> dict[str, TopicInfo]:
        """Every topic in the cache, as a list of every topic names them: not the names looked
        up since that the cluster said do not exist (or may not be described)."""
        return {name: info for name, info in self.topics.items()
                if name and info.error_code not in _NOT_A_TOPIC}

    def leader(self, topic: str, partition: int) -> int | None:
        """The cached leader's node id (``None`` when unknown or leaderless)."""
        info = self.topics.get(topic)
        part = info.partitions.get(partition) if info else None
        if part is None or part.leader < 0:
            return None
        return part.leader

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id`` in the cache (``None`` if unknown)."""
        name = self._names_by_id.get(topic_id)
        info = self.topics.get(name) if name is not None else None
        return name if info is not None and info.topic_id == topic_id else None  # not a stale id

    def invalidate(self, topic: str | None = None) -> None:
        """Forget a topic's metadata (or all of it): the next use asks the cluster again."""
        if topic is None:
            for info in self.topics.values():
                info.fetched_at = 0.0
            self._all_topics_at = 0.0
        elif topic in self.topics:
            self.topics[topic].fetched_at = 0.0


class UpstreamSession:
    """The upstream connections of one downstream client (see the module docstring), all
    authenticated as its upstream ``identity``; :attr:`cluster` is the cluster as that identity
    sees it."""

    def __init__(self, cluster: UpstreamCluster, client_id: str | None = None, *,
                 identity: UpstreamIdentity = ANONYMOUS_IDENTITY) -> None:
        self.shared = cluster
        self.identity = identity
        self.cluster = cluster.view(identity)
        self.client_id: str | None = client_id or cluster.client_id
        self._connections: dict[int, UpstreamConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self._closed = False
        #: what relays keep per downstream connection, by their own key (closed with it when
        #: it has close(): the fetch-ahead entries)
        self.extras: dict[Any, Any] = {}

    def adopt(self, conn: UpstreamConnection) -> None:
        """Keep an open connection made for this client (the one that checked its password in
        passthrough mode) as its connection to that broker."""
        node = conn.node_id if conn.node_id is not None else self.shared.node_of(conn.address)
        if node is None or node in self._connections:
            conn.close()
            return
        conn.node_id = node
        self._connections[node] = conn

    async def connection(self, node_id: int) -> UpstreamConnection:
        """This client's connection to broker ``node_id`` (opened when missing or closed)."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._opening.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            conn = self.shared.connection(self.cluster.address_of(node_id), self.identity,
                                          node_id=node_id, client_id=self.client_id)
            await conn.open()
            if self._closed:  # the client left while it opened (a fetch-ahead's): not kept
                conn.close()
                raise UpstreamError(f"the client's session closed while connecting to "
                                    f"upstream broker {node_id}")
            self.cluster.state.broker_ok(node_id)
            self._connections[node_id] = conn
            return conn

    async def any_connection(self) -> UpstreamConnection:
        """A connection to any live broker (one this client has open, else the first that
        answers), for requests that any broker answers (FindCoordinator)."""
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        if not self.cluster.brokers:
            await self.cluster.refresh([])
        errors = []
        for node in sorted(self.cluster.brokers):
            try:
                return await self.connection(node)
            except UpstreamError as exc:
                errors.append(str(exc))
        raise UpstreamError("no upstream broker reachable: " + "; ".join(errors))

    def identify(self, client_id: str | None) -> None:
        """Send ``client_id`` upstream from now on (the downstream client's own, as the front
        door last read it), on the connections open and those still to open."""
        if client_id != self.client_id:
            self.client_id = client_id
            for conn in self._connections.values():
                conn.set_client_id(client_id)

    def close(self) -> None:
        extras, self.extras = self.extras, {}
        for extra in extras.values():
            close = getattr(extra, "close", None)
            if close is not None:
                close()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if not self._closed:
            self._closed = True
            self.shared.release(self.cluster)
