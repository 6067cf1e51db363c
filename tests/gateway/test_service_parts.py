"""The parts of the gateway's service side, alone: the implied Kafka releases against
kafka-python's table of what each broker release answered to ApiVersions, the cluster's state
logged once per change, the log formats, the batch-header count, the client records' bounds,
and the conversion workers carrying the connection's context into their threads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

import pytest

from lazyconv._commands._log_format import (
    JsonFormatter,
    ReopenableFileHandler,
    SessionContext,
    TextFormatter,
    use_log_format,
)
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import UpstreamError
from lazyconv.gateway._clients import ClientRegistry, software_label
from lazyconv.gateway._cluster_state import ClusterState
from lazyconv.gateway._metrics import (
    GatewayMetrics,
    count_v2_records,
    fetch_written,
)
from lazyconv.gateway._metrics import _api as metrics_api_name
from lazyconv.gateway._releases import FIRST_RELEASE, implied_release, kafka_4_refuses
from lazyconv.net._model import Listener
from lazyconv.net._session import Session, current_session
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol._connection import ApiVersionsFallback
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from lazyconv.records._entries import summarize_entries


@pytest.mark.slow  # importing kafka-python takes most of a second
def test_first_releases_are_the_brokers_own() -> None:
    """Each version's first release is the first broker release whose ApiVersions answer
    (kafka-python's table, copied from real brokers) reaches it."""
    data = pytest.importorskip("kafka.protocol.broker_version_data")
    brokers = data.BROKER_API_VERSIONS
    for key, releases in FIRST_RELEASE.items():
        for version, release in enumerate(releases):
            first = min((r for r in brokers if key in brokers[r] and brokers[r][key][1] >= version),
                        default=None)
            assert first is not None, (key, version)
            assert ".".join(map(str, first)) == release, (key, version)


def test_the_implied_release_of_known_clients() -> None:
    # kafka-python at api_version (0, 10): Fetch v2, Produce v2, Metadata v1, ApiVersions v0
    assert implied_release([(1, 2), (0, 2), (3, 1), (18, 0)]) == "0.10.0"
    # Java 0.10.2: Fetch v3, OffsetFetch v2
    assert implied_release([(1, 3), (9, 2), (0, 2)]) == "0.10.2"
    assert implied_release([(3, 0)]) == "0.8.0"
    assert implied_release([(1, 99)]) == FIRST_RELEASE[1][-1]  # newer than the table: its latest
    assert implied_release([(42, 0)]) is None
    assert kafka_4_refuses(1, 3) and not kafka_4_refuses(1, 4) and not kafka_4_refuses(3, 0)


def test_the_cluster_state_logs_each_change_once(caplog: pytest.LogCaptureFixture) -> None:
    state = ClusterState(max_age=30)
    caplog.set_level(logging.INFO, logger="lazyconv.gateway._cluster_state")
    state.ok()
    for _ in range(500):
        state.failed("metadata", "connection refused")
    for _ in range(100):
        state.broker_failed(2, "fetch", "connection refused")
    assert not state.fresh
    state.ok()
    state.broker_ok(2)
    state.broker_ok(2)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 4, lines
    assert lines[0].startswith("upstream cluster unreachable (metadata): connection refused")
    assert lines[1].startswith("upstream broker 2 failed (fetch)")
    assert lines[2].startswith("upstream cluster reachable again after") and "(499 more" in lines[2]
    assert lines[3] == "upstream broker 2 answers again (99 more failures while it did not)"
    assert state.fresh and state.outages == 1


def test_a_repeated_warning_is_counted(caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    state = ClusterState(max_age=30)
    monkeypatch.setattr(state._warned, "interval", 0.05)
    for _ in range(10):
        state.warn("JoinGroup at a group coordinator", "no connection")
    time.sleep(0.06)
    state.warn("JoinGroup at a group coordinator", "no connection")
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == ["JoinGroup at a group coordinator failed: no connection",
                     "JoinGroup at a group coordinator failed: no connection (9 more since the "
                     "last such line)"]


def _record(message: str) -> logging.LogRecord:
    record = logging.LogRecord("lazyconv.net._server", logging.WARNING, __file__, 1, message, (), None)
    SessionContext().filter(record)
    return record


def test_log_lines_name_their_connection() -> None:
    session = Session(Listener(0, "127.0.0.1", 9092), "/10.0.0.7", client_id="billing")
    token = current_session.set(session)
    try:
        inside = _record("closing: idle")
    finally:
        current_session.reset(token)
    outside = _record("listening")
    line = json.loads(JsonFormatter().format(inside))
    assert line["message"] == "closing: idle" and line["level"] == "warning"
    assert {k: line[k] for k in ("connection_id", "client_id", "principal", "listener", "peer")} == {
        "connection_id": session.connection_id, "client_id": "billing",
        "principal": "User:ANONYMOUS", "listener": "127.0.0.1:9092", "peer": "10.0.0.7"}
    assert line["time"].endswith("+00:00")
    assert "connection_id" not in json.loads(JsonFormatter().format(outside))
    text = TextFormatter("gateway", False).format(inside)
    assert text.endswith(f"lazyconv gateway: warning: closing: idle [connection "
                         f"{session.connection_id}, client 'billing', User:ANONYMOUS, 127.0.0.1:9092]")
    assert text[:4].isdigit() and "T" in text.split()[0]  # an ISO timestamp first


def test_a_clients_line_end_does_not_forge_a_log_line() -> None:
    """A client's own string quoted in a message (here its ApiVersions v3 software name, as the
    new-client line quotes it) stays on its line: control characters escaped."""
    from lazyconv._cli import _CommandFormatter

    forged = "x\n2026-01-01T00:00:00.000+00:00 lazyconv gateway: error: forged\r\x1b[2K"
    record = logging.LogRecord("lazyconv.gateway._clients", logging.INFO, __file__, 1,
                               "new client %r: %s", ("c1", forged), None)
    SessionContext().filter(record)
    for formatter in (TextFormatter("gateway", False), _CommandFormatter("serve", True)):
        text = formatter.format(record)
        assert text.splitlines() == [text], text
        assert "x\\n2026-01-01" in text and "forged\\r\\x1b[2K" in text
    assert json.loads(JsonFormatter().format(record))["message"].endswith(forged)


def test_a_log_file_that_cannot_be_opened_again_keeps_the_one_in_use(tmp_path) -> None:
    """SIGHUP's reopen after the file's directory went away: the lines go on to the file
    open, with one saying why, instead of to a closed stream (each line lost)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    handler = use_log_format("gateway", "text", False, str(folder / "gateway.log"))
    try:
        logging.getLogger("lazyconv.test").warning("before")
        folder.rename(tmp_path / "moved")
        assert isinstance(handler, ReopenableFileHandler)
        handler.reopen()
        logging.getLogger("lazyconv.test").warning("after")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    lines = (tmp_path / "moved" / "gateway.log").read_text().splitlines()
    assert [line.split(": ", 2)[2] for line in lines[:1] + lines[2:]] == ["before", "after"]
    assert "cannot open the log file again" in lines[1]


def test_batch_headers_are_counted_without_reading_records() -> None:
    data = b""
    for codec, n in ((Compression.LZ4, 5), (Compression.NONE, 3)):
        builder = RecordsBuilder(2, codec, base_offset=len(data))
        for i in range(n):
            builder.append(timestamp=1, key=None, value=b"v%d" % i)
        data += builder.build()
    assert count_v2_records(data) == (2, 8, "lz4")
    assert count_v2_records(data[:-1]) == (1, 5, "lz4")  # a partial last batch is not counted
    assert count_v2_records(b"") == (0, 0, "none")
    # the metrics' batch count and first codec come from the relay's summary of the headers
    lz4 = int(Compression.LZ4)
    assert summarize_entries(data)[:2] == (2, lz4) and summarize_entries(data[:-1])[:2] == (1, lz4)
    assert summarize_entries(b"")[:2] == (0, 0)


def test_a_fetch_counts_the_same_with_the_relays_summary_or_its_own() -> None:
    data = b""
    for codec, n, base in ((Compression.LZ4, 5, 0), (Compression.NONE, 3, 5), (Compression.NONE, 2, 8)):
        builder = RecordsBuilder(2, codec, base_offset=base)
        for i in range(n):
            builder.append(timestamp=1, key=None, value=b"v%d" % i)
        data += builder.build()
    counted = []
    for summary in (None, summarize_entries(data)):
        metrics = GatewayMetrics()
        session = Session(Listener(0, "127.0.0.1", 9092), "/10.0.0.1", client_id="c")
        lazy = LazyDownConvertedRecords(MemoryRecords(data), 1, 0)
        fetch_written(session, metrics, [({"records": lazy}, summary), ({"records": None}, None)])()
        counted.append((dict(metrics.down_batches.values), dict(metrics.down_bytes.values),
                        session.records_out))
    assert counted[0] == counted[1]
    assert counted[0][0] == {(1, "lz4"): 3}  # three upstream batches, named by the first's codec
    assert counted[0][1] == {1: lazy.size_in_bytes}


def test_software_names_are_labels_only_as_kafka_accepts_them() -> None:
    assert software_label("apache-kafka-java") == "apache-kafka-java"
    assert software_label("3.9.0") == "3.9.0"
    for bad in ("", "-x", "a b", "x" * 65, "naïve", None):
        assert software_label(bad) is None


def test_client_records_are_bounded_and_open_ones_kept() -> None:
    registry = ClientRegistry(max_clients=3)
    listener = Listener(0, "127.0.0.1", 9092)
    sessions = []
    for i in range(6):
        session = Session(listener, f"/10.0.0.{i}", client_id=f"c{i}")
        session.api_versions[(1, 2)] += 1
        registry.request_done(session, 0.001, 10, 20)
        sessions.append(session)
    assert len(registry) == 6  # every one has an open connection: none forgotten
    for session in sessions[:5]:
        registry.connection_closed(session, "client")
    registry.request_done(Session(listener, "/10.0.0.9", client_id="late"), 0.001, 1, 1)
    kept = {r.client_id for r in registry.records()}
    assert kept == {"c5", "c4", "late"} and registry.forgotten == 4
    c5 = next(r for r in registry.records() if r.client_id == "c5").to_json()
    assert c5["connections_open"] == 1 and c5["requests"][0]["kafka_4_refuses"]


def test_a_clients_long_strings_are_cut_in_the_report(caplog: pytest.LogCaptureFixture) -> None:
    """A client id and software name of 32 KiB (what the wire allows): the record keeps 256
    characters of each, so 10,000 records stay a few MiB, and is found again at each request."""
    from lazyconv.gateway._clients import MAX_REPORTED_CHARS

    caplog.set_level(logging.INFO, logger="lazyconv")
    registry = ClientRegistry(max_clients=3)
    session = Session(Listener(0, "127.0.0.1", 9092), "/10.0.0.1", client_id="c" * 32767)
    session.client_software_name, session.client_software_version = "s" * 32767, "1" * 32767
    for _ in range(3):
        registry.request_done(session, 0.001, 10, 20)
    (record,) = registry.records()
    assert record.connections == 1
    assert record.client_id == "c" * (MAX_REPORTED_CHARS - 1) + "…"
    assert len(record.software_name or "") == len(record.software_version or "") == MAX_REPORTED_CHARS
    assert max(len(r.getMessage()) for r in caplog.records) < 4 * MAX_REPORTED_CHARS


def test_relayed_apis_are_named_in_the_report_and_the_metrics() -> None:
    """The APIs the gateway only relays (serve does not declare them) are named, not numbered."""
    registry = ClientRegistry(max_clients=3, metrics=GatewayMetrics())
    session = Session(Listener(0, "127.0.0.1", 9092), "/10.0.0.1", client_id="admin")
    session.api_versions[(19, 7)] += 1  # CreateTopics
    session.api_versions[(68, 0)] += 1  # ConsumerGroupHeartbeat
    registry.request_done(session, 0.001, 10, 20)
    names = {r["api"] for r in registry.records()[0].to_json()["requests"]}
    assert names == {"CreateTopics", "ConsumerGroupHeartbeat"}
    assert metrics_api_name(19) == "CreateTopics" and metrics_api_name(9999) == "9999"


def test_conversion_steps_run_in_their_connection_context() -> None:
    workers = ConversionWorkers(1)
    session = Session(Listener(0, "h", 1))

    async def step() -> Session | None:
        current_session.set(session)
        return await workers.run(current_session.get)

    try:
        assert asyncio.run(step()) is session
    finally:
        workers.close()


@pytest.mark.slow  # over half a second: kept out of the quick look
def test_the_pools_cpu_seconds_are_its_threads_cpu_time() -> None:
    """The pool's threads' CPU clocks, read when asked: a busy step adds its CPU time, an idle
    pool adds nothing, and the total survives the pool's close."""
    workers = ConversionWorkers(2)
    try:
        asyncio.run(workers.run(sum, range(10)))
        idle = workers.cpu_seconds
        time.sleep(0.2)
        assert workers.cpu_seconds - idle < 0.05
        spent = asyncio.run(workers.run(_burn, 0.3))
        used = workers.cpu_seconds - idle
        assert spent * 0.8 <= used <= spent + 0.1
    finally:
        workers.close()
    assert workers.cpu_seconds >= used + idle - 0.001


def _burn(seconds: float) -> float:
    """Spin for ``seconds`` of this thread's CPU time; returns what it used."""
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        sum(range(1000))
    return time.thread_time() - started


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_cluster_watch_ends_after_close_even_when_its_cancel_is_lost(monkeypatch) -> None:
    """Python 3.11's asyncio.wait_for can swallow a cancel that arrives as the awaited request
    fails; the watch must still end once the cluster is closed, or asyncio.run's shutdown waits
    for it forever (a gateway that does not stop on Ctrl-C)."""
    from lazyconv.gateway._upstream import UpstreamCluster, parse_bootstrap

    async def scenario() -> bool:
        cluster = UpstreamCluster(parse_bootstrap("127.0.0.1:1"))
        probes = []

        async def probe() -> None:
            probes.append(time.monotonic())

        monkeypatch.setattr(cluster, "watch_interval", lambda: 0.05)
        monkeypatch.setattr(cluster, "probe", probe)
        watch = asyncio.get_running_loop().create_task(cluster.watch())
        while len(probes) < 2:  # it is watching
            await asyncio.sleep(0.01)
        cluster.close()  # and no cancel at all: the lost one
        await asyncio.wait_for(watch, 2)
        return watch.done()

    assert asyncio.run(scenario())


class _StandInBroker:
    """A broker of one node on 127.0.0.1 that answers ApiVersions, and Metadata (one topic
    ``t`` of one partition) only when ``answer_metadata`` is true and after ``delay`` seconds;
    ``metadata_requests`` counts what it was asked."""

    def __init__(self, *, answer_metadata: bool = True, delay: float = 0.0) -> None:
        self.answer_metadata = answer_metadata
        self.delay = delay
        self.api_versions_delay = 0.0
        self.metadata_requests = 0
        self.open_connections = 0
        self.port = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> _StandInBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.server.close()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.sleep(0.01)  # the connections' tasks end

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from lazyconv.protocol._connection import ApiTable, parse_request
        from lazyconv.protocol._kafka_apis import KAFKA_APIS
        from lazyconv.protocol._schema import ZERO_UUID

        table = ApiTable(KAFKA_APIS)
        self.open_connections += 1
        self._writers.append(writer)
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                request = parse_request(await reader.readexactly(size), table)
                assert not isinstance(request, ApiVersionsFallback)
                if request.api_key == 18:
                    await asyncio.sleep(self.api_versions_delay)
                    writer.write(request.reply(table.api_versions_response()))
                elif request.api_key == 3:
                    self.metadata_requests += 1
                    await asyncio.sleep(self.delay)
                    if not self.answer_metadata:
                        continue
                    writer.write(request.reply({
                        "throttle_time_ms": 0, "cluster_id": "stand-in", "controller_id": 1,
                        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port,
                                     "rack": None}],
                        "topics": [{"error_code": 0, "name": "t", "topic_id": ZERO_UUID,
                                    "is_internal": False, "partitions": [{
                                        "error_code": 0, "partition_index": 0, "leader_id": 1,
                                        "leader_epoch": 0, "replica_nodes": [1],
                                        "isr_nodes": [1], "offline_replicas": []}]}]}))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_connections -= 1
            writer.close()


def test_clients_waiting_for_a_metadata_refresh_share_its_failure() -> None:
    """A refresh that gets no answer fails every caller that waited for it: they are not
    queued each a request timeout behind the other's (the fifth client waited five)."""
    from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, UpstreamSession

    async def scenario() -> tuple[float, list[object], int]:
        broker = await _StandInBroker(answer_metadata=False).start()
        cluster = UpstreamCluster([BrokerAddress("127.0.0.1", broker.port)], request_timeout=0.5)
        sessions = [UpstreamSession(cluster) for _ in range(5)]
        started = time.monotonic()
        outcomes = await asyncio.gather(*(s.cluster.refresh(["t"]) for s in sessions),
                                        return_exceptions=True)
        took = time.monotonic() - started
        for session in sessions:
            session.close()
        await broker.close()
        return took, outcomes, broker.metadata_requests

    took, outcomes, asked = asyncio.run(scenario())
    assert all(isinstance(o, UpstreamError) for o in outcomes), outcomes
    assert took < 1.5 and asked == 1


def test_a_burst_of_lookups_after_an_invalidation_asks_the_cluster_at_most_twice() -> None:
    """The lookups queued behind a refresh take its answer (the one already under way when
    they came is not trusted: it may predate what invalidated the cache)."""
    from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, UpstreamSession

    async def scenario() -> int:
        broker = await _StandInBroker(delay=0.05).start()
        cluster = UpstreamCluster([BrokerAddress("127.0.0.1", broker.port)])
        await cluster.start()
        sessions = [UpstreamSession(cluster) for _ in range(20)]
        before = broker.metadata_requests
        sessions[0].cluster.invalidate()
        found = await asyncio.gather(*(s.cluster.topics_for(["t"]) for s in sessions))
        assert all(f["t"].partitions[0].leader == 1 for f in found)
        for session in sessions:
            session.close()
        cluster.close()
        await broker.close()
        return broker.metadata_requests - before

    assert asyncio.run(scenario()) <= 2


def test_a_connection_whose_client_left_while_it_opened_is_closed() -> None:
    """A client's task that opens an upstream connection is cancelled (its fetch-ahead when
    the client disconnects), or its session closes before the connection is open: the socket
    to the broker is closed, not left open for the broker's idle timeout."""
    from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, UpstreamSession

    async def scenario() -> list[int]:
        broker = await _StandInBroker().start()
        cluster = UpstreamCluster([BrokerAddress("127.0.0.1", broker.port)])
        await cluster.start()
        broker.api_versions_delay = 0.2
        left = []
        for cancel in (True, False):
            session = UpstreamSession(cluster)
            task = asyncio.get_running_loop().create_task(session.connection(1))
            await asyncio.sleep(0.1)  # connected, ApiVersions under way
            if cancel:
                task.cancel()
            session.close()
            with contextlib.suppress(asyncio.CancelledError, UpstreamError):
                await task
            await asyncio.sleep(0.3)
            left.append(broker.open_connections)
        cluster.close()
        await broker.close()
        return left

    assert asyncio.run(scenario()) == [1, 1]  # the cluster's own (metadata) connection only


@pytest.mark.parametrize("host", ["a..b", "a" * 64 + ".example"])
def test_a_broker_host_name_that_cannot_be_encoded_is_an_upstream_error(host: str) -> None:
    """Kafka accepts such an advertised host; the connection to it fails like one that cannot
    be made (an UpstreamError: the client gets a retriable error), not with a UnicodeError
    that closed the client's connection as an internal error."""
    from lazyconv.gateway._upstream import BrokerAddress, UpstreamCluster, UpstreamSession

    async def scenario() -> None:
        cluster = UpstreamCluster([BrokerAddress(host, 9092)])
        cluster.brokers = {1: BrokerAddress(host, 9092)}
        session = UpstreamSession(cluster)
        try:
            with pytest.raises(UpstreamError, match="idna"):
                await session.connection(1)
            with pytest.raises(UpstreamError, match="no upstream broker reachable"):
                await cluster.open_any(session.identity)
        finally:
            session.close()

    asyncio.run(scenario())
