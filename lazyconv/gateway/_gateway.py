"""``Gateway``: old Kafka clients in front of a modern Kafka cluster, as an asyncio server.

    gateway = Gateway(["broker1:9092"], port=9092)
    await gateway.start()          # reaches the cluster once, then listens
    await gateway.serve_forever()  # until cancelled; then await gateway.close()

    # a secured cluster, configured like a broker and pointed at the cluster like a client
    settings = GatewaySettings.load("gateway.properties", "upstream.properties")
    gateway = Gateway(settings=settings)

Downstream it answers every version lazyconv speaks of the APIs old clients use (Produce v0–11,
Fetch v0–17, ListOffsets v0–8, Metadata v0–13, the group APIs) and relays every other API the
cluster serves at the client's own version; upstream it sends only versions Kafka 4 accepts, and
converts in the middle what Kafka 4 stopped converting (docs/guide/gateway.md). Each client's
own client id goes upstream (after ``client_id_prefix``).

Run as a service: with ``metrics_port`` it serves Prometheus metrics, health and the clients
report on its own HTTP listener (:mod:`lazyconv.gateway._admin`); :meth:`Gateway.drain` stops it
without cutting a request (what SIGTERM does in ``lazyconv gateway``), :meth:`Gateway.reload`
runs the reload hooks (SIGHUP).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from lazyconv.errors import ConfigurationError, LazyconvError
from lazyconv.gateway._admin import AdminServer
from lazyconv.gateway._clients import DEFAULT_MAX_CLIENTS, ClientRegistry
from lazyconv.gateway._fetch_relay import (
    DEFAULT_FETCH_AHEAD_BYTES,
    DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
)
from lazyconv.gateway._handler import GatewayHandler
from lazyconv.gateway._identity import GatewayIdentities
from lazyconv.gateway._metrics import GatewayMetrics
from lazyconv.gateway._settings import (
    DEFAULT_GATEWAY_CHUNK_SIZE,
    DEFAULT_GATEWAY_SEND_BUFFER,
    GatewaySettings,
    client_id_prefix_problem,
    refuse_a_wildcard_host,
)
from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, parse_bootstrap
from lazyconv.gateway._upstream_security import (
    ANONYMOUS_IDENTITY,
    UpstreamIdentity,
    UpstreamSecurity,
)
from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._listener_config import ListenerConfig
from lazyconv.net._model import Listener
from lazyconv.net._secure_connection import ListenerSecurity
from lazyconv.net._server import KafkaServer, ListenerSpec, send_buffer_problem
from lazyconv.net._workers import ConversionWorkers

log = logging.getLogger(__name__)

__all__ = ["Gateway", "DEFAULT_DRAIN_TIMEOUT_MS"]

# SIGTERM's bound: in-flight requests are a fetch's max wait (0.5 s for most clients) or a
# produce's timeout; Kubernetes kills a pod 30 s after SIGTERM by default.
DEFAULT_DRAIN_TIMEOUT_MS = 20000


class Gateway:
    """A Kafka endpoint that relays to ``upstream`` (``"host:port,…"`` or addresses), or to
    the cluster ``settings`` name (:class:`~lazyconv.gateway._settings.GatewaySettings`: the
    listeners with their TLS and SASL, the upstream's security, the identity mode, the limits;
    the keyword arguments that follow still apply)."""

    def __init__(self, upstream: str | Sequence[BrokerAddress] | None = None, *,
                 settings: GatewaySettings | None = None, host: str = "127.0.0.1",
                 port: int = 9092, advertised_host: str | None = None,
                 chunk_size: int = DEFAULT_GATEWAY_CHUNK_SIZE,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 fetch_ahead_bytes: int = DEFAULT_FETCH_AHEAD_BYTES, fetch_splice: bool = True,
                 request_timeout_ms: int = 30000, metadata_max_age_ms: int = 30000,
                 limits: ConnectionLimits | None = None, workers: int | None = None,
                 advertised_port: int | None = None, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1", max_clients: int = DEFAULT_MAX_CLIENTS,
                 drain_timeout_ms: int = DEFAULT_DRAIN_TIMEOUT_MS,
                 client_id_prefix: str = "", convert_on_loop: str = "quick",
                 socket_send_buffer_bytes: int = DEFAULT_GATEWAY_SEND_BUFFER) -> None:
        """``chunk_size``: input bytes down-converted per step (16 KiB – 1 MiB);
        ``upstream_fetch_max_bytes``: the most one upstream Fetch response may hold (what a
        connection holds besides one chunk); ``fetch_ahead_bytes``: what the answers fetched ahead
        for sequential consumers may hold over every connection (0: none fetched ahead);
        ``fetch_splice``: a Fetch v10+ that one upstream leader answers is passed on with
        splice(2) where nothing is TLS and the upstream is PLAINTEXT (see
        :mod:`~lazyconv.gateway._fetch_splice`);
        ``workers``: conversion threads (default: one per core); ``convert_on_loop``:
        ``quick`` converts what is cheaper to convert than to hand to a thread on the event
        loop, ``never`` every conversion on the threads (see :mod:`~lazyconv.gateway._on_loop`); ``limits``: request sizes and
        timeouts of client connections;
        ``advertised_host``/``advertised_port``: what Metadata names (default: ``host`` and the
        port listened on; a wildcard ``host`` needs ``advertised_host``); ``metrics_port``: the
        HTTP listener of /metrics, /health/live, /health/ready and /clients on ``metrics_host``
        (``None``: none, and no metrics are kept; 0 picks a free port); ``max_clients``: clients
        the report keeps; ``drain_timeout_ms``: how long :meth:`drain` lets requests finish;
        ``client_id_prefix`` (``gateway.client.id.prefix``): put before each client's own
        client id in the requests sent upstream; ``socket_send_buffer_bytes``
        (``socket.send.buffer.bytes``): SO_SNDBUF of client connections, -1 for the OS default.
        With ``settings``, the listeners, the
        timeouts, the fetch size, the limits, the metrics listener, the clients kept, the drain
        timeout, the client id prefix, the fetch-ahead budget, the splicing, where conversions
        run and the send buffer come from them."""
        if settings is not None:
            upstream = upstream or ",".join(settings.upstream.bootstrap_servers)
            upstream_fetch_max_bytes = settings.upstream.fetch_max_bytes
            request_timeout_ms = settings.upstream.request_timeout_ms
            metadata_max_age_ms = settings.upstream.metadata_max_age_ms
            limits = limits or settings.connection_limits()
            if settings.metrics_listener is not None:
                metrics_host, metrics_port = settings.metrics_listener
            max_clients = settings.max_clients
            drain_timeout_ms = settings.drain_timeout_ms
            client_id_prefix = settings.client_id_prefix
            fetch_ahead_bytes = settings.fetch_ahead_bytes
            fetch_splice = settings.fetch_splice
            convert_on_loop = settings.convert_on_loop
            socket_send_buffer_bytes = settings.socket_send_buffer_bytes
        if not upstream:
            raise ConfigurationError("no upstream brokers given")
        if settings is None:
            refuse_a_wildcard_host(host, advertised_host)
        # the port listened on too: out of range, binding it raised OverflowError in start()
        for name, port_value in (("port", None if settings is not None else port),
                                 ("advertised port", advertised_port), ("metrics port", metrics_port)):
            if port_value is not None and not 0 <= port_value <= 65535:
                raise ConfigurationError(f"{name} {port_value} is outside 0..65535")
        if drain_timeout_ms <= 0:
            raise ConfigurationError(f"drain timeout must be positive, got {drain_timeout_ms} ms")
        addresses = parse_bootstrap(upstream) if isinstance(upstream, str) else list(upstream)
        if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigurationError(f"chunk size must be between {MIN_CHUNK_SIZE} and "
                                     f"{MAX_CHUNK_SIZE} bytes, got {chunk_size}")
        problem = send_buffer_problem(socket_send_buffer_bytes)
        if problem is not None:
            raise ConfigurationError(f"socket send buffer {socket_send_buffer_bytes} {problem}")
        prefix_problem = client_id_prefix_problem(client_id_prefix)
        if prefix_problem is not None:
            raise ConfigurationError(f"client_id_prefix {prefix_problem}")
        if fetch_ahead_bytes < 0:
            raise ConfigurationError(f"fetch-ahead bytes must be 0 or more, got {fetch_ahead_bytes}")
        if upstream_fetch_max_bytes < 1024:
            raise ConfigurationError(
                f"upstream fetch max bytes must be at least 1024, got {upstream_fetch_max_bytes}")
        for name, value in (("request timeout", request_timeout_ms),
                            ("metadata max age", metadata_max_age_ms)):
            if value <= 0:
                raise ConfigurationError(f"{name} must be positive, got {value} ms")
        #: the Prometheus metrics (None unless metrics_port is given)
        self.metrics = GatewayMetrics() if metrics_port is not None else None
        self.settings = settings
        security = UpstreamSecurity.from_settings(settings.upstream) if settings else None
        self.cluster = UpstreamCluster(addresses, request_timeout=request_timeout_ms / 1000,
                                       metadata_max_age=metadata_max_age_ms / 1000,
                                       metrics=self.metrics, security=security,
                                       service_identity=_service_identity(settings))
        self.identities = (GatewayIdentities.from_settings(settings, self.cluster)
                           if settings is not None else GatewayIdentities(self.cluster))
        self.workers = ConversionWorkers(workers)
        self._chunk_size = chunk_size
        self._upstream_fetch_max_bytes = upstream_fetch_max_bytes
        self._client_id_prefix = client_id_prefix
        self._fetch_ahead_bytes = fetch_ahead_bytes
        self._fetch_splice = fetch_splice
        if convert_on_loop not in ("quick", "never"):
            raise ConfigurationError(f"convert_on_loop must be quick or never, not {convert_on_loop!r}")
        self._quick_on_loop = convert_on_loop == "quick"
        self.handler: GatewayHandler | None = None
        #: every client seen (the clients report), the server's observer
        self.clients = ClientRegistry(max_clients, self.metrics)
        specs = (_listener_specs(settings, advertised_host, advertised_port) if settings is not None
                 else [ListenerSpec(host, port, 0, advertised_host, advertised_port)])
        self.server = KafkaServer(self._make_handler, specs, limits=limits, workers=self.workers,
                                  observer=self.clients, authenticator=self.identities,
                                  send_buffer_bytes=socket_send_buffer_bytes)
        self.drain_timeout = drain_timeout_ms / 1000
        self.metrics_host = metrics_host
        self.admin: AdminServer | None = None
        if self.metrics is not None:
            self.metrics.bind(self.server, self.cluster, self.workers, self.clients)
            assert metrics_port is not None
            self.admin = AdminServer(self.metrics, self.clients, self.readiness, metrics_host,
                                     metrics_port)
        self._reload_hooks: list[Callable[[], object]] = []

    def _make_handler(self, listeners: list[Listener]) -> GatewayHandler:
        self.handler = GatewayHandler(self.cluster, listeners, chunk_size=self._chunk_size,
                                      upstream_fetch_max_bytes=self._upstream_fetch_max_bytes,
                                      fetch_ahead_bytes=self._fetch_ahead_bytes,
                                      fetch_splice=self._fetch_splice,
                                      quick_on_loop=self._quick_on_loop,
                                      workers=self.workers, identities=self.identities,
                                      client_id_prefix=self._client_id_prefix)
        return self.handler

    @property
    def listener(self) -> Listener:
        """Where the gateway listens (after :meth:`start`; the first listener)."""
        return self.server.listeners[0]

    @property
    def bound_port(self) -> int:
        """The port the gateway listens on (its listener may advertise another)."""
        return self.server.bound_ports[0]

    @property
    def metrics_port(self) -> int | None:
        """The port of the metrics and health listener (after :meth:`start`)."""
        return self.admin.port if self.admin is not None else None

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): ready when not draining and the upstream cluster answered within the
        metadata's max age (what ``/health/ready`` answers)."""
        if self.server.draining:
            return False, "draining"
        state = self.cluster.state
        if state.fresh:
            return True, f"ready: upstream cluster answered {state.metadata_age:.1f} s ago"
        if not state.reachable:
            return False, "upstream cluster unreachable"
        return False, f"upstream metadata older than {state.max_age:.0f} s"

    @property
    def listeners(self) -> list[Listener]:
        """Every listener (after :meth:`start`)."""
        return self.server.listeners

    async def start(self) -> None:
        """Reach the cluster (raises :class:`~lazyconv.errors.UpstreamError` when no broker
        answers), then listen (and serve metrics, with ``metrics_port``)."""
        await self.cluster.start()
        log.info("upstream cluster %s (%s%s): brokers %s", self.cluster.cluster_id or "?",
                 self.cluster.security.protocol,
                 f", {self.identities.mode} identity" if self.settings is not None else "",
                 ", ".join(f"{n}={a}" for n, a in sorted(self.cluster.brokers.items()))
                 or "learnt from the first client (no service identity)")
        if self.admin is not None:
            await self.admin.start()
        await self.server.start()

    async def serve_forever(self) -> None:
        """Until the gateway is closed or drained (or this is cancelled)."""
        await self.server.serve_forever()

    async def drain(self, timeout: float | None = None) -> bool:
        """Stop without cutting a request (what SIGTERM does): ``/health/ready`` answers 503,
        the listener closes, connections waiting for a request are closed and the others once
        their request is answered; after ``timeout`` seconds (default ``drain_timeout_ms``)
        the rest are cut. True when none had to be cut. :meth:`close` afterwards."""
        timeout = self.drain_timeout if timeout is None else timeout
        log.warning("draining: not accepting connections, closing each one once its request is "
                    "answered (at most %.0f s)", timeout)
        clean = await self.server.drain(timeout)
        log.warning("drained%s", "" if clean else " (some connections were cut)")
        return clean

    def on_reload(self, hook: Callable[[], object]) -> None:
        """Call ``hook()`` on each :meth:`reload` (SIGHUP), e.g. one that reads the settings'
        files again and gives them to :meth:`apply_settings`."""
        self._reload_hooks.append(hook)

    def reload(self) -> None:
        """What SIGHUP does: forget the upstream metadata (read again at the next request) and
        run every hook given to :meth:`on_reload`; connections stay open. A hook that fails is
        logged (one line for a :class:`~lazyconv.errors.LazyconvError`: a settings file that
        no longer loads keeps the settings in use) and the others still run."""
        self.cluster.invalidate()
        failed = 0
        for hook in self._reload_hooks:
            try:
                hook()
            except LazyconvError as exc:
                failed += 1
                log.error("reload: %s", exc.message)
            except Exception:
                failed += 1
                log.exception("a reload hook failed")
        log.warning("reloaded (%d hook(s)%s)", len(self._reload_hooks),
                    f", {failed} failed" if failed else "")

    def apply_settings(self, settings: GatewaySettings) -> None:
        """Apply what a reload changes without a restart, from ``settings`` read again: each
        listener's TLS key material and trust, its PLAIN users, the SCRAM credentials, the
        authentication bound, and the principals' upstream credentials (gateway identity
        mode). Connections accepted afterwards get them; open ones keep what they were
        accepted with until they reconnect. The listeners themselves (names, security
        protocols, addresses, SASL mechanisms, client authentication) must be as they were:
        otherwise nothing is applied and :class:`~lazyconv.errors.ConfigurationError` says
        what changed. Any other setting that differs is named in one warning: it takes a
        restart."""
        current = self.settings
        if current is None:
            raise ConfigurationError("this gateway was not started from settings: there is no "
                                     "security to reload")
        before, after = ([_listener_shape(c) for c in s.listeners] for s in (current, settings))
        if before != after:
            raise ConfigurationError(f"the listeners changed ({_shape_text(before)} -> "
                                     f"{_shape_text(after)}): that takes a restart; nothing was "
                                     "reloaded")
        # what the new users and credentials mean depends on these: applied under the old ones
        # they would refuse everyone, or map principals to an upstream that is not there
        grounds = [name for name in ("identity", "credentials_fallback")
                   if getattr(settings, name) != getattr(current, name)]
        if settings.upstream.security_protocol != current.upstream.security_protocol:
            grounds.append("the upstream's security.protocol")
        if grounds:
            raise ConfigurationError(f"{', '.join(grounds)} changed: that takes a restart; "
                                     "nothing was reloaded")
        securities = [_listener_security(settings, config) for config in settings.listeners]
        for index, security in enumerate(securities):
            self.server.replace_security(index, security)
        if current.upstream.uses_sasl:
            self.identities.replace_credentials(settings.principal_credentials)
        reloadable = {"listeners", "principal_credentials", "scram_credentials_file",
                      "authentication_timeout_ms", "gateway_properties", "upstream_properties"}
        fixed = [f.name for f in dataclasses.fields(settings)
                 if f.name not in reloadable and getattr(settings, f.name) != getattr(current, f.name)]
        self.settings = dataclasses.replace(
            current, listeners=settings.listeners, principal_credentials=settings.principal_credentials,
            scram_credentials_file=settings.scram_credentials_file,
            authentication_timeout_ms=settings.authentication_timeout_ms)
        log.warning("reloaded the security of %d listener(s)%s",
                    sum(s.protocol != "PLAINTEXT" for s in securities),
                    f" and the upstream credentials of {self.identities.mapped_principals} principal(s)"
                    if current.upstream.uses_sasl and self.identities.mode == "gateway" else "")
        if fixed:
            log.warning("changed settings that take a restart, not applied: %s", ", ".join(fixed))

    async def close(self) -> None:
        """Stop accepting, end every connection, close the upstream connections."""
        await self.server.close()
        if self.admin is not None:
            await self.admin.close()
        self.cluster.close()


def _service_identity(settings: GatewaySettings | None) -> UpstreamIdentity | None:
    """What the gateway reaches the cluster as by itself: its SASL credentials, its TLS
    identity (no SASL upstream), or none on a SASL cluster without credentials of its own
    (passthrough, or a principal → credentials map without a service identity)."""
    if settings is None or not settings.upstream.uses_sasl:
        return ANONYMOUS_IDENTITY
    credentials = settings.upstream.credentials
    return UpstreamIdentity(credentials) if credentials is not None else None


def _listener_specs(settings: GatewaySettings, advertised_host: str | None,
                    advertised_port: int | None) -> list[ListenerSpec]:
    """The settings' listeners; ``advertised_host``/``advertised_port`` (the command line's)
    stand in where advertised.listeners names none."""
    specs = []
    for config in settings.listeners:
        security = _listener_security(settings, config)
        specs.append(ListenerSpec(config.host or "0.0.0.0", config.port, 0,
                                  config.advertised_host or advertised_host,
                                  config.advertised_port or advertised_port, security=security))
    return specs


def _listener_security(settings: GatewaySettings, config: ListenerConfig) -> ListenerSecurity:
    """A listener's security as the settings give it (certificates and SCRAM credentials read
    now)."""
    return ListenerSecurity.from_config(config).with_handshake_timeout(
        settings.authentication_timeout_ms / 1000)


def _listener_shape(config: ListenerConfig) -> tuple[object, ...]:
    """What a reload may not change in a listener."""
    return (config.name, config.security_protocol, config.host, config.port,
            config.advertised_host, config.advertised_port,
            config.sasl.mechanisms if config.sasl is not None else (),
            config.ssl.client_auth if config.ssl is not None else "none")


def _shape_text(shapes: list[tuple[object, ...]]) -> str:
    return ", ".join(f"{s[0]} {s[1]} {s[2] or '0.0.0.0'}:{s[3]}" for s in shapes) or "none"
