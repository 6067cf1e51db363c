"""``Gateway``: old Kafka clients in front of a modern Kafka cluster, as an asyncio server.

    gateway = Gateway(["broker1:9092"], port=9092)
    await gateway.start()          # reaches the cluster once, then listens
    await gateway.serve_forever()  # until cancelled; then await gateway.close()

Downstream it answers every version lazyconv speaks (Produce v0–11, Fetch v0–17, ListOffsets
v0–8, Metadata v0–12, ApiVersions v0–4); upstream it sends only versions Kafka 4 accepts, and
converts in the middle what Kafka 4 stopped converting (docs/guide/gateway.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lazyconv._lazy import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from lazyconv.errors import ConfigurationError
from lazyconv.gateway._fetch_relay import DEFAULT_UPSTREAM_FETCH_MAX_BYTES
from lazyconv.gateway._handler import GatewayHandler
from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, parse_bootstrap
from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._model import Listener
from lazyconv.net._server import KafkaServer, ListenerSpec
from lazyconv.net._workers import ConversionWorkers

log = logging.getLogger(__name__)

__all__ = ["Gateway"]


class Gateway:
    """A Kafka endpoint that relays to ``upstream`` (``"host:port,…"`` or addresses)."""

    def __init__(self, upstream: str | Sequence[BrokerAddress], *, host: str = "127.0.0.1",
                 port: int = 9092, advertised_host: str | None = None,
                 chunk_size: int = 131072,
                 upstream_fetch_max_bytes: int = DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
                 request_timeout_ms: int = 30000, metadata_max_age_ms: int = 30000,
                 limits: ConnectionLimits | None = None, workers: int | None = None) -> None:
        """``chunk_size``: input bytes down-converted per step (16 KiB – 1 MiB);
        ``upstream_fetch_max_bytes``: the most one upstream Fetch response may hold (what a
        connection holds besides one chunk); ``workers``: conversion threads (default: one per
        core)."""
        addresses = parse_bootstrap(upstream) if isinstance(upstream, str) else list(upstream)
        if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigurationError(f"chunk size must be between {MIN_CHUNK_SIZE} and "
                                     f"{MAX_CHUNK_SIZE} bytes, got {chunk_size}")
        if upstream_fetch_max_bytes < 1024:
            raise ConfigurationError(
                f"upstream fetch max bytes must be at least 1024, got {upstream_fetch_max_bytes}")
        for name, value in (("request timeout", request_timeout_ms),
                            ("metadata max age", metadata_max_age_ms)):
            if value <= 0:
                raise ConfigurationError(f"{name} must be positive, got {value} ms")
        self.cluster = UpstreamCluster(addresses, request_timeout=request_timeout_ms / 1000,
                                       metadata_max_age=metadata_max_age_ms / 1000)
        self.workers = ConversionWorkers(workers)
        self._chunk_size = chunk_size
        self._upstream_fetch_max_bytes = upstream_fetch_max_bytes
        self.handler: GatewayHandler | None = None
        self.server = KafkaServer(self._make_handler,
                                  [ListenerSpec(host, port, 0, advertised_host)],
                                  limits=limits, workers=self.workers)

    def _make_handler(self, listeners: list[Listener]) -> GatewayHandler:
        self.handler = GatewayHandler(self.cluster, listeners, chunk_size=self._chunk_size,
                                      upstream_fetch_max_bytes=self._upstream_fetch_max_bytes,
                                      workers=self.workers)
        return self.handler

    @property
    def listener(self) -> Listener:
        """Where the gateway listens (after :meth:`start`)."""
        return self.server.listeners[0]

    async def start(self) -> None:
        """Reach the cluster (raises :class:`~lazyconv.errors.UpstreamError` when no broker
        answers), then listen."""
        await self.cluster.start()
        log.info("upstream cluster %s: brokers %s", self.cluster.cluster_id,
                 ", ".join(f"{n}={a}" for n, a in sorted(self.cluster.brokers.items())))
        await self.server.start()

    async def serve_forever(self) -> None:
        await self.server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every connection, close the upstream connections."""
        await self.server.close()
        self.cluster.close()
