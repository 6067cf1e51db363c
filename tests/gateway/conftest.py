"""The gateway in a background thread, in front of ``lazyconv serve`` (fast tests, no JVM) or a
real Kafka broker (marker ``kafka``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.gateway import Gateway
from tests.server_thread import ServerThread


class GatewayThread:
    """A :class:`Gateway` on its own event loop in a daemon thread."""

    def __init__(self, upstream: str, **kwargs) -> None:
        kwargs.setdefault("port", 0)
        self.gateway = Gateway(upstream, **kwargs)
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("the gateway did not start")
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.gateway.start())
        except BaseException as exc:  # reported to the constructor
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self.loop.run_forever()

    @property
    def port(self) -> int:
        return self.gateway.bound_port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def handler(self):
        return self.gateway.handler

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        if self._error is None:
            asyncio.run_coroutine_threadsafe(self.gateway.close(), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()


@pytest.fixture
def serve_upstream(served_fixtures: Path) -> Iterator[ServerThread]:
    """``lazyconv serve`` over the fixture copy: a stand-in upstream cluster of one broker."""
    server = ServerThread(served_fixtures)
    yield server
    server.stop()


@pytest.fixture
def gateway_factory() -> Iterator:
    """``gateway_factory(upstream_bootstrap, **Gateway kwargs)``; every gateway is stopped at
    teardown."""
    gateways: list[GatewayThread] = []

    def start(upstream: str, **kwargs) -> GatewayThread:
        gateway = GatewayThread(upstream, **kwargs)
        gateways.append(gateway)
        return gateway

    yield start
    for gateway in gateways:
        gateway.stop()


@pytest.fixture
def gateway_over_serve(serve_upstream: ServerThread, gateway_factory) -> GatewayThread:
    return gateway_factory(serve_upstream.bootstrap)


@pytest.fixture(scope="session")
def kafka_cluster(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory):
    """Three Kafka 4 nodes (broker + controller each, one JVM each), internal topics with
    replication factor 3 and three partitions (groups' and transactions' coordinators spread
    over the nodes), for the whole session. Tests that stop a node start it again."""
    from kafka_broker import KafkaCluster

    cluster = KafkaCluster(kafka_dist, tmp_path_factory.mktemp("kafka-cluster"), 3,
                           extra_props={"min.insync.replicas": "2",
                                        "offsets.topic.num.partitions": "3",
                                        "transaction.state.log.num.partitions": "3"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_topic_retrying(bootstrap: str, topic: str, partitions: int, **kwargs) -> None:
    """``create_topic``, tried again when the admin client loses a node (right after a node of
    the cluster was restarted, or on a loaded machine); an earlier try that did create the
    topic counts."""
    import time

    from kafka_broker import create_topic

    for attempt in range(5):
        try:
            create_topic(bootstrap, topic, partitions, **kwargs)
            return
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                time.sleep(1)  # its leaders: create_topic would have waited for them
                return
            if attempt == 4:
                raise
            time.sleep(2)
