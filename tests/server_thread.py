"""Run ``lazyconv serve``'s server in a background thread for tests with blocking clients (the
``serve_logdir`` fixture, registered by ``tests/conftest.py`` for every folder)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

from lazyconv.net._workers import ConversionWorkers
from lazyconv.serve import Broker, KafkaServer, ListenerSpec, LogDirectory


class ServerThread:
    """A KafkaServer on its own event loop in a daemon thread."""

    def __init__(self, logdir: Path, *, listeners: int = 1, produce_delays: tuple[int, ...] = (),
                 max_request_size: int = 104857600, limits=None, log_config=None,
                 workers=None, senders=None, specs=None, authenticator=None,
                 **broker_kwargs) -> None:
        """``specs``: the listeners (ListenerSpec, with security) instead of ``listeners``
        plain ones; ``authenticator``: the KafkaServer's ClientAuthenticator."""
        self.logdir = LogDirectory(logdir, log_config)
        if specs is None:
            specs = [ListenerSpec("127.0.0.1", 0, produce_delays[i] if i < len(produce_delays) else 0)
                     for i in range(listeners)]
        # one pool for the conversion steps and the planning of converting fetches, as the CLI
        workers = workers if workers is not None else ConversionWorkers()
        # ``senders``: a SenderPool that writes the converting responses (--sender-processes)
        self.server = KafkaServer(lambda ls: Broker(self.logdir, ls, workers=workers,
                                                    remote_sends=senders is not None, **broker_kwargs),
                                  specs, max_request_size=max_request_size, limits=limits,
                                  workers=workers, senders=senders, authenticator=authenticator)
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("server did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        self._started.set()
        self.loop.run_forever()

    @property
    def port(self) -> int:
        return self.server.listeners[0].port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coro_fn, timeout: float = 10):
        """Run ``coro_fn()`` on the server loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro_fn(), self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return  # stopped already (a test restarting the server)
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def serve_logdir() -> Iterator:
    """Factory: ``serve_logdir(path, **broker_kwargs)`` starts a server, stopped at teardown."""
    servers: list[ServerThread] = []

    def start(path: Path, **kwargs) -> ServerThread:
        server = ServerThread(path, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
