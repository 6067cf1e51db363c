"""The gateway as a service in front of Kafka 4 (markers ``kafka`` and ``slow``): old clients of
four families (kafka-python at (0, 10), librdkafka with fallback 0.10, kafka-node, Kafka's Java
client 0.10.2) produce and consume known amounts while /metrics is scraped and parsed with
prometheus_client before and after each; /clients and ``lazyconv gateway clients`` list each
family; /health/ready follows a broker stopped and started again; a 30 s broker outage under 8
old consumers logs a few timestamped lines per state change. The load-balancer test (two
gateways behind HAProxy) is tests/gateway/test_balancer.py."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from kafka_broker import KafkaBroker, create_topic, produce_records, unique_topic

from lazyconv._cli import main
from lazyconv.gateway._releases import release_key
from tests.gateway.clients import BY_ID, Driver
from tests.gateway.conftest import GatewayThread
from tests.gateway.test_service import http_get, scrape
from tests.interop.checks import received
from tests.oldclients.clients import OldClientTools, Unavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

# (driver, the magic it reads, the magic it produces, the Kafka release its protocol is)
FAMILIES = [("kafka-python-1.4.7-0.10", 1, 1, "0.10.0"), ("confluent-kafka-fallback-0.10.0", 2, 2, None),
            ("kafka-node-5.0.0", 0, 1, "0.10.0"), ("java-0.10.2.2", 1, 1, "0.10.2")]
RECORDS = 60
PRODUCED = 20
VALUE = b"v" * 700  # every batch > 512 bytes: with a 1 KiB upstream cap, one batch per response


@pytest.fixture(scope="module")
def tools() -> OldClientTools:
    return OldClientTools()


def _require(tools: OldClientTools, driver: Driver) -> None:
    assert driver.old is not None
    try:
        tools.require(driver.old)
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gateway(kafka_broker: KafkaBroker) -> Iterator[GatewayThread]:
    # upstream responses of at most 1 KiB: each holds one whole batch, so every converted
    # record is a record the client reads (no converted tail cut at a committed size)
    gateway = GatewayThread(kafka_broker.bootstrap, metrics_port=0, upstream_fetch_max_bytes=1024)
    yield gateway
    gateway.stop()


def _delta(before: dict, after: dict, name: str) -> dict[tuple, float]:
    out = {}
    for (n, labels), v in after.items():
        if n == name and v - before.get((n, labels), 0.0):
            out[labels] = v - before.get((n, labels), 0.0)
    return out


def _sum(delta: dict[tuple, float], **labels: str) -> float:
    return sum(v for k, v in delta.items() if all((key, val) in k for key, val in labels.items()))


def _versions(delta: dict[tuple, float], api: str) -> set[int]:
    return {int(dict(k)["version"]) for k in delta if ("api", api) in k}


def test_metrics_and_the_clients_report_follow_four_old_client_families(
        tools: OldClientTools, kafka_broker: KafkaBroker, gateway: GatewayThread,
        capsys: pytest.CaptureFixture[str]) -> None:
    port = gateway.gateway.metrics_port
    read_topic = unique_topic("svc-read")
    create_topic(kafka_broker.bootstrap, read_topic, 1)
    produce_records(kafka_broker.bootstrap, read_topic,
                    [(0, b"k%d" % i, VALUE, 1_700_000_000_000 + i, None) for i in range(RECORDS)])
    seen_clients: set[str] = set()
    for driver_id, read_magic, produce_magic, release in FAMILIES:
        driver = BY_ID[driver_id]
        _require(tools, driver)
        topic = unique_topic(f"svc-write-{driver_id.replace('.', '_')}")
        create_topic(kafka_broker.bootstrap, topic, 1)
        before = scrape(port)
        events = driver.run(tools, gateway.bootstrap, {
            "action": "consume", "mode": "assign", "partitions": [[read_topic, 0]],
            "last": {f"{read_topic}/0": RECORDS - 1}})
        got = received(events.events).get((read_topic, 0), [])
        assert len(got) == RECORDS, driver_id
        records = [{"partition": 0, "key": base64.b64encode(b"p%d" % i).decode(),
                    "value": base64.b64encode(b"w" * 300).decode()} for i in range(PRODUCED)]
        events = driver.run(tools, gateway.bootstrap, {"action": "produce", "topic": topic,
                                                       "records": records})
        assert len(events.of("produced")) == PRODUCED, driver_id
        after = scrape(port)
        requests = _delta(before, after, "lazyconv_gateway_requests_total")
        down = _delta(before, after, "lazyconv_gateway_down_converted_records_total")
        up = _delta(before, after, "lazyconv_gateway_up_converted_records_total")
        sends = driver.old.sends
        # the versions the client sends (tests/oldclients checked them against a broker's log)
        for api in ("Fetch", "Produce"):
            if sends.get(api) is not None:
                assert _versions(requests, api) == {sends[api]}, (driver_id, api, requests)
        if read_magic < 2:  # every record it read was down-converted, once
            assert _sum(down, to_magic=str(read_magic)) == RECORDS, (driver_id, down)
            assert _sum(_delta(before, after, "lazyconv_gateway_down_converted_bytes_total")) > 0
        else:
            assert not down, (driver_id, down)
            assert min(_versions(requests, "Fetch")) >= 4
        if produce_magic < 2:
            assert _sum(up, from_magic=str(produce_magic)) == PRODUCED, (driver_id, up)
            assert _sum(_delta(before, after, "lazyconv_gateway_up_converted_bytes_total")) > 0
        else:
            assert not up, (driver_id, up)
        for histogram in ("lazyconv_gateway_request_duration_seconds_count",
                          "lazyconv_gateway_upstream_request_duration_seconds_count"):
            latency = _delta(before, after, histogram)
            assert _sum(latency, api="Fetch") >= 1 and _sum(latency, api="Produce") >= 1, driver_id
        # the clients report: the family's new clients, with their software or release
        report = json.loads(http_get(port, "/clients")[1])
        mine = [c for c in report["clients"] if c["client_id"] not in seen_clients]
        seen_clients.update(c["client_id"] for c in mine)
        assert mine, driver_id
        used = {(r["api"], r["version"]) for c in mine for r in c["requests"]}
        for api in ("Fetch", "Produce"):
            if sends.get(api) is not None:
                assert (api, sends[api]) in used, (driver_id, used)
        if release is None:  # librdkafka sends ApiVersions v3: its name and version
            assert all(c["software_name"] == "confluent-kafka-python" for c in mine), mine
            assert all(c["software_version"] for c in mine)
        else:
            for c in mine:
                assert c["software_name"] is None
                implied = c["implied_release"]
                assert implied is not None and release_key(implied) <= release_key(release), c
            assert any(c["needs_gateway"] for c in mine)
            assert sum(c["records_out"] for c in mine) == RECORDS
            assert sum(c["records_in"] for c in mine) == PRODUCED
        assert main(["gateway", "clients", f"http://127.0.0.1:{port}"]) == 0
        table = capsys.readouterr().out
        for c in mine:
            assert any(line.startswith(c["client_id"]) for line in table.splitlines()), c["client_id"]


def test_ready_follows_the_broker(kafka_dist, kafka_broker_factory) -> None:
    broker: KafkaBroker = kafka_broker_factory(kafka_dist)
    gateway = GatewayThread(broker.bootstrap, metrics_port=0, metadata_max_age_ms=3000)
    try:
        port = gateway.gateway.metrics_port
        assert http_get(port, "/health/ready")[0] == 200
        broker.stop()
        stopped = time.monotonic()
        while http_get(port, "/health/ready")[0] == 200:
            assert time.monotonic() - stopped < 3 + 1, "still ready after the metadata's max age"
            time.sleep(0.1)
        assert http_get(port, "/health/live")[0] == 200
        broker.start()
        started = time.monotonic()
        while http_get(port, "/health/ready")[0] != 200:
            assert time.monotonic() - started < 30, http_get(port, "/health/ready")
            time.sleep(0.2)
        assert http_get(port, "/health/live")[0] == 200
    finally:
        gateway.stop()


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 lazyconv gateway: ")


def test_a_30_s_outage_under_8_old_consumers_logs_a_few_lines_per_state_change(
        kafka_dist, kafka_broker_factory, tmp_path) -> None:
    kafka = pytest.importorskip("kafka")
    broker: KafkaBroker = kafka_broker_factory(kafka_dist)
    create_topic(broker.bootstrap, "outage", 8)
    produce_records(broker.bootstrap, "outage", [(p, b"k", b"x" * 100, None, None)
                                                 for p in range(8) for _ in range(50)])
    log_path = tmp_path / "gateway.log"
    gateway = subprocess.Popen(
        [sys.executable, "-m", "lazyconv", "gateway", "--upstream", broker.bootstrap, "--port", "0",
         "--metadata-max-age-ms", "5000", "--log-file", str(log_path)],
        stdout=subprocess.PIPE, text=True)
    consumers = []
    threads: list[threading.Thread] = []
    stop = threading.Event()
    polled = [0] * 8
    try:
        line = gateway.stdout.readline() if gateway.stdout else ""
        assert line.startswith("gateway to "), line
        bootstrap = line.split(" on ", 1)[1].split()[0]

        def consume(i: int) -> None:
            consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10),
                                           auto_offset_reset="earliest", fetch_max_wait_ms=200,
                                           request_timeout_ms=15000, reconnect_backoff_ms=200,
                                           client_id=f"outage-{i}")
            consumer.assign([kafka.TopicPartition("outage", i)])
            consumers.append(consumer)
            while not stop.is_set():
                try:
                    polled[i] += sum(len(b) for b in consumer.poll(timeout_ms=200).values())
                except Exception:  # the outage: the client retries, as an application would
                    time.sleep(0.2)
            consumer.close()

        threads += [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while min(polled) < 50:
            assert time.monotonic() < deadline, polled
            time.sleep(0.2)
        before_outage = log_path.read_text().splitlines()
        broker.stop()
        time.sleep(30)
        broker.start()
        produce_records(broker.bootstrap, "outage", [(p, b"k", b"y" * 100, None, None) for p in range(8)])
        deadline = time.monotonic() + 90
        while min(polled) < 51:
            assert time.monotonic() < deadline, f"consumers did not resume: {polled}"
            time.sleep(0.5)
        time.sleep(2)
        outage = log_path.read_text().splitlines()[len(before_outage):]
    finally:
        stop.set()
        # each consumer closes while the gateway still answers: a kafka-python client left
        # open keeps a thread retrying (and logging) for the rest of this worker's tests
        for t in threads:
            t.join(30)
        gateway.terminate()
        gateway.wait(30)
    assert outage and all(_TIMESTAMP.match(line) for line in outage), outage
    text = "\n".join(outage)
    print(f"the outage's {len(outage)} log lines:\n{text}")  # shown with -s
    assert len(outage) <= 10, f"{len(outage)} lines for one outage:\n{text}"
    assert len(re.findall(r"upstream cluster unreachable", text)) == 1, text
    assert len(re.findall(r"upstream cluster reachable again after \d+\.\d s", text)) == 1, text
    for node in set(re.findall(r"upstream broker (\d+) failed", text)):
        assert text.count(f"upstream broker {node} failed") == 1, text
        assert text.count(f"upstream broker {node} answers again") <= 1, text


def test_a_controller_listener_as_upstream_is_named_as_such(kafka_broker: KafkaBroker) -> None:
    from lazyconv.errors import UpstreamError

    started = time.monotonic()
    with pytest.raises(UpstreamError, match="is a KRaft controller listener") as info:
        GatewayThread(f"127.0.0.1:{kafka_broker.controller_port}")
    assert "not the controller's 9093" in str(info.value)
    assert time.monotonic() - started < 10
