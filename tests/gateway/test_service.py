"""The gateway run as a service, in front of ``lazyconv serve`` (no JVM): its metrics (scraped
and parsed with prometheus_client's own parser), health, the clients report and its table,
draining, and the clear errors of a misconfigured gateway. The same against Kafka 4 with old
clients of four families: tests/gateway/test_service_kafka.py."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lazyconv._cli import main
from lazyconv.errors import ConfigurationError, UpstreamError
from lazyconv.gateway import Gateway
from lazyconv.gateway import _upstream as upstream_module
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, MemoryRecords
from tests.gateway.conftest import GatewayThread
from tests.gateway.test_gateway_over_serve import legacy_set, produce_request
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, parsed by prometheus_client: (name, sorted labels) -> value."""
    status, text = http_get(port, "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def fetch_v2(client: WireClient, topic: str, offset: int, max_bytes: int = 1) -> list[tuple]:
    """One Fetch v2 of one partition: its (offset, key, value) records (partition_max_bytes 1:
    the first batch only, whole, as KIP-74 allows)."""
    answer = client.call(fetch.SPEC, 2, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}]})
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == 0
    return [(r.offset, r.key, r.value) for b in MemoryRecords(part["records"] or b"").batches()
            for r in b if r.offset >= offset]


@pytest.fixture
def sink_upstream(served_fixtures):
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    yield upstream
    upstream.stop()


def test_metrics_count_what_the_clients_did(sink_upstream: ServerThread, gateway_factory) -> None:
    gateway = gateway_factory(sink_upstream.bootstrap, metrics_port=0)
    port = gateway.gateway.metrics_port
    before = scrape(port)
    assert value(before, "lazyconv_gateway_requests_total", api="Fetch", version="2") == 0
    with WireClient(gateway.port, "old-producer") as client:
        for version, magic, codec, count in ((0, 0, Compression.GZIP, 5), (2, 1, Compression.NONE, 3)):
            answer = client.call(produce.SPEC, version, produce_request(
                version, "sink", legacy_set(magic, codec, count)))
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    with WireClient(gateway.port, "old-consumer") as client:
        got = fetch_v2(client, "sink", 0) + fetch_v2(client, "sink", 5)
        assert fetch_v2(client, "sink", 8) == []
    assert [r[0] for r in got] == list(range(8))
    after = scrape(port)
    # downstream requests, per API version, as sent
    assert value(after, "lazyconv_gateway_requests_total", api="Produce", version="0") == 1
    assert value(after, "lazyconv_gateway_requests_total", api="Produce", version="2") == 1
    assert value(after, "lazyconv_gateway_requests_total", api="Fetch", version="2") == 3
    # upstream: only Kafka 4's versions (serve's highest here)
    upstream_produce = {labels: v for (name, labels), v in after.items()
                        if name == "lazyconv_gateway_upstream_requests_total"
                        and ("api", "Produce") in labels}
    assert sum(upstream_produce.values()) == 2
    assert all(int(dict(labels)["version"]) >= 3 for labels in upstream_produce)
    # up-converted: 5 gzip records of magic 0, 3 plain of magic 1, one v2 batch each
    assert value(after, "lazyconv_gateway_up_converted_records_total", from_magic="0", codec="gzip") == 5
    assert value(after, "lazyconv_gateway_up_converted_records_total", from_magic="1", codec="none") == 3
    assert value(after, "lazyconv_gateway_up_converted_batches_total", from_magic="0", codec="gzip") == 1
    # down-converted to magic 1: each fetch got one whole batch, so every record was read
    assert value(after, "lazyconv_gateway_down_converted_records_total", to_magic="1", codec="gzip") == 5
    assert value(after, "lazyconv_gateway_down_converted_records_total", to_magic="1", codec="none") == 3
    assert value(after, "lazyconv_gateway_down_converted_batches_total", to_magic="1", codec="gzip") == 1
    assert value(after, "lazyconv_gateway_down_converted_bytes_total", to_magic="1") > 0
    # latency histograms, downstream and upstream
    assert value(after, "lazyconv_gateway_request_duration_seconds_count", api="Fetch") == 3
    assert value(after, "lazyconv_gateway_request_duration_seconds_bucket", api="Fetch", le="+Inf") == 3
    assert value(after, "lazyconv_gateway_upstream_request_duration_seconds_count", api="Produce") == 2
    assert value(after, "lazyconv_gateway_request_bytes_total", api="Produce") > 0
    assert value(after, "lazyconv_gateway_connections_closed_total",
                 listener=gateway.gateway.listener.label, reason="client") == 2
    assert value(after, "process_resident_memory_bytes") > 0
    assert value(after, "lazyconv_gateway_upstream_up") == 1
    # the clients report: both clients, their versions, what Kafka 4 refuses, records each way
    report = json.loads(http_get(port, "/clients")[1])
    by_id = {c["client_id"]: c for c in report["clients"]}
    producer, consumer = by_id["old-producer"], by_id["old-consumer"]
    assert {(r["api"], r["version"], r["kafka_4_refuses"]) for r in producer["requests"]} == {
        ("Produce", 0, True), ("Produce", 2, True)}
    assert producer["records_in"] == 8 and producer["records_out"] == 0
    assert consumer["records_out"] == 8 and consumer["implied_release"] == "0.10.0"
    assert consumer["needs_gateway"] and report["clients_needing_gateway"] == 2
    assert consumer["bytes_in"] > 0 and consumer["bytes_out"] > 0


def test_two_gateways_keep_their_metrics_apart(serve_upstream: ServerThread, gateway_factory) -> None:
    one = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    two = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    with WireClient(one.port) as client:
        client.call(metadata.SPEC, 1, {"topics": None})
    assert value(scrape(one.gateway.metrics_port), "lazyconv_gateway_requests_total",
                 api="Metadata", version="1") == 1
    assert value(scrape(two.gateway.metrics_port), "lazyconv_gateway_requests_total",
                 api="Metadata", version="1") == 0


def test_health_and_the_clients_table(serve_upstream: ServerThread, gateway_factory,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    port = gateway.gateway.metrics_port
    assert http_get(port, "/health/live") == (200, "live\n")
    status, why = http_get(port, "/health/ready")
    assert status == 200 and why.startswith("ready")
    assert http_get(port, "/nothing")[0] == 404
    with WireClient(gateway.port, "table-client") as client:
        client.call(metadata.SPEC, 0, {"topics": [{"name": "tiny"}]})
        fetch_v2_high_watermark(client, "tiny")
        assert main(["gateway", "clients", f"http://127.0.0.1:{port}"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[:2] == ["CLIENT", "ID"]
        row = next(line for line in table if line.startswith("table-client"))
        # Fetch v2 came with Kafka 0.10.0 and Kafka 4 refuses it; Metadata v0 it still answers
        assert "(Kafka 0.10.0 protocol)" in row and " 1/1 " in row
        assert row.endswith("Fetch v2! Metadata v0")
        assert main(["gateway", "clients", f"127.0.0.1:{port}", "--json", "--needs-gateway"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert [c["client_id"] for c in shown["clients"]] == ["table-client"]


def test_the_clients_command_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["gateway", "clients", f"http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "lazyconv gateway clients: error: cannot read" in err and "--metrics-port" in err
    assert main(["gateway", "--port", "0"]) == 2
    assert "no upstream brokers: give --upstream" in capsys.readouterr().err
    # a password in the URL is never printed back (found by a review)
    assert main(["gateway", "clients", f"http://admin:S3cret@127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "S3cret" not in err and "[hidden]@127.0.0.1" in err


def test_the_clients_command_refuses_json_that_is_no_clients_report(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Well-formed JSON that is not a gateway's report: one line, not an internal KeyError."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"clients": [{"name": "x"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        assert main(["gateway", "clients", f"http://127.0.0.1:{server.server_port}"]) == 2
    finally:
        thread.join(10)
        server.server_close()
    err = capsys.readouterr().err
    assert "did not answer a clients report" in err and "internal error" not in err


def test_the_clients_command_at_a_server_that_is_not_http(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A URL naming another service (an SSH banner, a Kafka port that answers garbage): one
    line and status 2, not an internal error (found by a review)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        assert main(["gateway", "clients", f"127.0.0.1:{server.getsockname()[1]}"]) == 2
        thread.join(10)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "lazyconv gateway clients: error: cannot read" in err and "not an HTTP answer" in err


@pytest.mark.slow
def test_ready_turns_503_when_the_upstream_stops(served_fixtures, gateway_factory) -> None:
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap, metrics_port=0, metadata_max_age_ms=1500)
        port = gateway.gateway.metrics_port
        assert http_get(port, "/health/ready")[0] == 200
    finally:
        upstream.stop()
    deadline = time.monotonic() + 1.5 + 2
    while http_get(port, "/health/ready")[0] == 200:
        assert time.monotonic() < deadline, "still ready after the metadata's max age"
        time.sleep(0.1)
    assert http_get(port, "/health/ready") == (503, "upstream cluster unreachable\n")
    assert http_get(port, "/health/live")[0] == 200
    assert value(scrape(port), "lazyconv_gateway_upstream_up") == 0


@pytest.mark.slow
def test_drain_finishes_requests_in_flight_and_closes_idle_connections(
        serve_upstream: ServerThread, gateway_factory) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    idle = socket.create_connection(("127.0.0.1", gateway.port))
    busy = WireClient(gateway.port, "long-poll")
    answers: list[dict] = []
    high = fetch_v2_high_watermark(busy, "tiny")

    def long_poll() -> None:  # waits upstream for data that never comes: its max wait
        answers.append(busy.call(fetch.SPEC, 4, {
            "replica_id": -1, "max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": "tiny", "partitions": [
                {"partition": 0, "fetch_offset": high, "partition_max_bytes": 1 << 20}]}]}))

    polling = threading.Thread(target=long_poll)
    polling.start()
    time.sleep(0.4)  # the fetch is in flight
    started = time.monotonic()
    drained = asyncio.run_coroutine_threadsafe(gateway.gateway.drain(10), gateway.loop)
    time.sleep(0.2)
    assert http_get(gateway.gateway.metrics_port, "/health/ready") == (503, "draining\n")
    with pytest.raises(OSError):  # the listener is closed: a balancer's next try goes elsewhere
        socket.create_connection(("127.0.0.1", gateway.port), timeout=2).close()
    idle.settimeout(5)
    assert idle.recv(1) == b""  # the idle connection was closed at once
    assert drained.result(10) is True
    polling.join(10)
    assert answers and answers[0]["responses"][0]["partitions"][0]["error_code"] == 0
    assert time.monotonic() - started < 5
    with pytest.raises((OSError, AssertionError), match="closed|reset|pipe"):  # answered, then closed
        busy.call(metadata.SPEC, 0, {"topics": []})
    idle.close()


def fetch_v2_high_watermark(client: WireClient, topic: str) -> int:
    answer = client.call(fetch.SPEC, 2, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}]})
    return answer["responses"][0]["partitions"][0]["high_watermark"]


def test_a_wildcard_host_needs_an_advertised_host_and_the_advertised_port_is_named() -> None:
    with pytest.raises(ConfigurationError, match="--advertised-host"):
        Gateway("127.0.0.1:9092", host="0.0.0.0")
    Gateway("127.0.0.1:9092", host="0.0.0.0", advertised_host="gw.example")  # fine


def test_metadata_names_the_advertised_host_and_port(serve_upstream: ServerThread, gateway_factory) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap, advertised_host="lb.example",
                              advertised_port=19999)
    with WireClient(gateway.port) as client:
        answer = client.call(metadata.SPEC, 1, {"topics": []})
    assert [(b["host"], b["port"]) for b in answer["brokers"]] == [("lb.example", 19999)]


def _silent_or_http_server(reply: bytes | None) -> tuple[socket.socket, threading.Thread]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            if reply is not None:
                conn.sendall(reply)
            else:
                time.sleep(3)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                                   pytest.param(None, marks=pytest.mark.slow)], ids=["http", "silent"])
def test_an_upstream_that_is_not_kafka_fails_fast_and_says_so(monkeypatch, reply) -> None:
    monkeypatch.setattr(upstream_module, "HANDSHAKE_TIMEOUT", 0.5)
    server, _thread = _silent_or_http_server(reply)
    port = server.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(UpstreamError, match="does not answer like a Kafka broker") as info:
        GatewayThread(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 3
    assert "--upstream must name a Kafka broker's PLAINTEXT listener" in str(info.value)
    server.close()


def test_the_metrics_reference_lists_every_metric(serve_upstream: ServerThread, gateway_factory) -> None:
    """docs/guide/gateway.md's metrics table names every family /metrics serves (the process
    and Python collectors' by their row), and nothing that is not served."""
    from tests.docs.blocks import REPO

    gateway = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    with WireClient(gateway.port) as client:  # a request, so that labelled families have samples
        client.call(metadata.SPEC, 1, {"topics": None})
    _status, text = http_get(gateway.gateway.metrics_port, "/metrics")
    served = {family.name for family in text_string_to_metric_families(text)
              if family.name.startswith("lazyconv_gateway") and not family.name.endswith("_created")}
    page = (REPO / "docs" / "guide" / "gateway.md").read_text(encoding="utf-8")
    section = page.split("### Metrics", 1)[1].split("### Health", 1)[0]
    documented = set()
    for row in section.splitlines():
        if row.startswith("| `lazyconv_gateway_"):
            cell = row.split("|")[1]
            names = [n.strip("` ") for n in cell.split(",")]
            base = names[0].rsplit("_", 2)[0]
            for name in names:  # `_misses_total` continues the row's first name
                full = name if name.startswith("lazyconv_gateway_") else f"{base}{name}"
                documented.add(full.removesuffix("_total"))
    assert served <= documented, f"served but not in the table: {sorted(served - documented)}"
    # labelled families without samples yet are not in the text: the table may hold more
    assert documented - served <= {"lazyconv_gateway_authentications", "lazyconv_gateway_rewritten_errors",
                                   "lazyconv_gateway_upstream_errors",
                                   "lazyconv_gateway_down_converted_records",
                                   "lazyconv_gateway_down_converted_batches",
                                   "lazyconv_gateway_down_converted_bytes",
                                   "lazyconv_gateway_up_converted_records",
                                   "lazyconv_gateway_up_converted_batches",
                                   "lazyconv_gateway_up_converted_bytes",
                                   "lazyconv_gateway_request_throttle_seconds",
                                   "lazyconv_gateway_connections_closed"}, sorted(documented - served)
    assert "process_resident_memory_bytes" in text


def test_authentications_are_counted_by_listener_mechanism_and_result(
        sink_upstream: ServerThread, tmp_path) -> None:
    """A SASL_PLAINTEXT listener in front of serve: one good PLAIN login, one wrong password and
    one client that sends Metadata first are three samples of
    ``lazyconv_gateway_authentications_total``; the failures are also connections closed for
    ``authentication``."""
    from lazyconv.gateway._settings import GatewaySettings
    from tests.net.secure_support import RawClient

    config = tmp_path / "gateway.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security."
        'plain.PlainLoginModule required user_alice="alice-secret";\n'
        "gateway.identity=gateway\n"
        "gateway.metrics.listener=127.0.0.1:0\n")
    upstream = tmp_path / "upstream.properties"
    upstream.write_text(f"bootstrap.servers={sink_upstream.bootstrap}\nsecurity.protocol=PLAINTEXT\n")
    gateway = GatewayThread(None, settings=GatewaySettings.load(config, upstream))
    try:
        server, port = gateway.gateway.server, gateway.gateway.listeners[0].port
        with RawClient(port) as client:
            assert client.authenticate("PLAIN", "alice", "alice-secret")
        with RawClient(port) as client:
            assert not client.authenticate("PLAIN", "alice", "not-her-password")
        with RawClient(port) as client:
            assert client.metadata() is None
        deadline = time.monotonic() + 5
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.01)
        samples = scrape(gateway.gateway.metrics_port)
        label = gateway.gateway.listeners[0].label
        counted = {labels: v for (name, labels), v in samples.items()
                   if name == "lazyconv_gateway_authentications_total"}
        assert counted == {
            (("listener", label), ("mechanism", "PLAIN"), ("result", "success")): 1,
            (("listener", label), ("mechanism", "PLAIN"), ("result", "failure")): 1,
            (("listener", label), ("mechanism", "SASL"), ("result", "failure")): 1}
        assert value(samples, "lazyconv_gateway_connections_closed_total",
                     listener=label, reason="authentication") == 2
    finally:
        gateway.stop()


def test_a_malformed_accept_header_gets_the_text_format(serve_upstream: ServerThread,
                                                        gateway_factory, caplog) -> None:
    """prometheus_client's content negotiation raises on a malformed OpenMetrics version: the
    scrape is answered in the text format, not closed with a traceback in the log."""
    gateway = gateway_factory(serve_upstream.bootstrap, metrics_port=0)
    request = urllib.request.Request(
        f"http://127.0.0.1:{gateway.gateway.metrics_port}/metrics",
        headers={"Accept": "application/openmetrics-text; version=x"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        assert b"lazyconv_gateway_upstream_up" in answer.read()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_metrics_listener_that_cannot_listen_is_named_with_its_address(
        serve_upstream: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    """A --metrics-host that does not resolve said only "Name or service not known", naming
    neither the metrics listener nor its address, where a bad --host names its address (found
    by a review): one line names both, and a busy metrics port is still "port busy", exit 2."""
    start = ["gateway", "--upstream", serve_upstream.bootstrap, "--port", "0"]
    assert main([*start, "--metrics-host", "bad host", "--metrics-port", "0"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1, errors
    assert "the metrics listener cannot listen on 'bad host' port 0: " in errors[0], errors
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main([*start, "--metrics-port", str(port)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "error: port busy: the metrics listener cannot listen on " \
        f"'127.0.0.1' port {port}: " in errors[0], errors
