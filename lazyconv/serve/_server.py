"""``LogServer``: a log directory served over the Kafka protocol, as an asyncio server — the
façade ``lazyconv serve`` runs, beside the gateway's :class:`~lazyconv.gateway.Gateway`.

    server = LogServer("/var/lib/kafka-copy", port=9092)
    await server.start()          # binds, then listens
    await server.serve_forever()  # until cancelled; then await server.close()

It puts together what a served log directory needs: the :class:`LogDirectory`, the
:class:`~lazyconv.serve._broker.Broker` answering every listener, the shared connection loop
(:class:`~lazyconv.net._server.KafkaServer`), the conversion worker pool (one thread per core)
and, when asked for, the sender processes that write converting responses
(:mod:`lazyconv.net._sender_pool`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazyconv.logdir._directory import LogDirectory
from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._model import Listener
from lazyconv.net._sender_pool import SenderPool
from lazyconv.net._server import DEFAULT_SEND_BUFFER, KafkaServer, ListenerSpec
from lazyconv.net._workers import ConversionWorkers
from lazyconv.serve._broker import Broker

log = logging.getLogger(__name__)

__all__ = ["LogServer"]


class LogServer:
    """Serves ``logdir`` (a path or a :class:`LogDirectory`) on ``listeners`` (default: one,
    ``host``:``port``); each listener plays one broker in Metadata.

    ``sender_processes``: processes that down-convert and write Fetch v0–3 responses (0: the
    worker threads of this process do it); ``limits``: connection limits and timeouts;
    ``broker_options``: the :class:`~lazyconv.serve._broker.Broker`'s keyword arguments
    (chunk size, topic settings, group settings, ...). Settings are checked here, before anything
    binds (:class:`~lazyconv.errors.ConfigurationError`).
    """

    def __init__(self, logdir: str | Path | LogDirectory, *, host: str = "127.0.0.1",
                 port: int = 9092, advertised_host: str | None = None,
                 listeners: Sequence[ListenerSpec] | None = None,
                 limits: ConnectionLimits | None = None,
                 send_buffer_bytes: int = DEFAULT_SEND_BUFFER,
                 workers: ConversionWorkers | None = None,
                 sender_processes: int = 0,
                 **broker_options: Any) -> None:
        self.logdir = logdir if isinstance(logdir, LogDirectory) else LogDirectory(Path(logdir))
        self._broker_options = broker_options
        # Fail on bad settings now, not when the first client connects.
        Broker(self.logdir, [Listener(0, host, port)], **broker_options)
        self.workers = workers if workers is not None else ConversionWorkers()
        self.senders = SenderPool(sender_processes) if sender_processes else None
        specs = list(listeners) if listeners else [ListenerSpec(host, port, 0, advertised_host)]
        self.broker: Broker | None = None
        self.server = KafkaServer(self._make_broker, specs, limits=limits,
                                  send_buffer_bytes=send_buffer_bytes, workers=self.workers,
                                  senders=self.senders)

    def _make_broker(self, listeners: list[Listener]) -> Broker:
        self.broker = Broker(self.logdir, listeners, workers=self.workers,
                             remote_sends=self.senders is not None, **self._broker_options)
        return self.broker

    @property
    def listeners(self) -> list[Listener]:
        """Where the server listens (after :meth:`start`)."""
        return self.server.listeners

    async def start(self) -> None:
        """Bind every listener and start accepting."""
        await self.server.start()

    async def serve_forever(self) -> None:
        await self.server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every connection (a response in flight is cut, never
        half-appended), then flush the log, producer snapshots and recovery points."""
        await self.server.close()
