"""Two gateways behind HAProxy (Debian's ``haproxy``) in TCP mode, as docs/guide/gateway.md
sets them up ("Two gateways behind a TCP load balancer": the test reads the two gateway commands
and haproxy.cfg from the page and runs them on 127.0.0.1 with free ports), in front of Kafka
4.0.1; one gateway is drained (SIGTERM) and started again while 8 old consumers (kafka-python
pinned to the 0.10 protocol: Fetch v2, JoinGroup v0; two groups of 4) and 2 old producers
(Produce v2, acks=all) run. Each group reads every record; a record is read twice in a group
only after a rebalance of that group (at-least-once redelivery of what was not committed yet);
no client meets a corrupt response; every acknowledged record is in Kafka; the drained gateway
exits 0 within its drain bound. Markers ``kafka`` and ``slow``."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from kafka_broker import KafkaBroker, consume_all, create_topic, produce_records, unique_topic

from tests.docs.blocks import REPO, page_blocks
from tests.gateway.test_service import http_get

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

PAGE = "docs/guide/gateway.md"
PARTITIONS = 8
PREFILL = 400
GROUPS = ("lb-group-a", "lb-group-b")
DRAIN_BOUND_S = 20 + 5  # --drain-timeout-ms's default, and the process's start and stop


def documented_setup() -> tuple[list[str], str]:
    """The page's two gateway command lines and its haproxy.cfg, as written."""
    blocks = page_blocks(PAGE)
    config = [b for b in blocks if b.title == "haproxy.cfg"]
    commands = [b for b in blocks if b.lang == "text" and b.text.startswith("lazyconv gateway ")]
    assert len(config) == 1 and len(commands) == 1, "the page's balancer setup is not one block each"
    lines = [line for line in commands[0].text.splitlines() if line.strip()]
    assert len(lines) == 2
    return lines, config[0].text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _substitute(text: str, ports: dict[int, int], upstream: str) -> str:
    text = text.replace("127.0.0.1:9092 ", f"{upstream} ")
    for old, new in ports.items():
        text = re.sub(rf"(?<!\d){old}(?!\d)", str(new), text)
    return text


class Gateway:
    def __init__(self, command: str, log: Path) -> None:
        argv = shlex.split(command)
        assert argv[:2] == ["lazyconv", "gateway"]
        self.argv = [sys.executable, "-m", "lazyconv", *argv[1:]]
        self.metrics_port = int(argv[argv.index("--metrics-port") + 1])
        self.log = log
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with self.log.open("a") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                         cwd=REPO)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("gateway to "), f"{line!r}: {self.log.read_text()[-2000:]}"
        deadline = time.monotonic() + 30
        while http_get(self.metrics_port, "/health/ready")[0] != 200:
            assert time.monotonic() < deadline, "the gateway never got ready"
            time.sleep(0.2)

    def stop(self, timeout: float = DRAIN_BOUND_S) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None


def test_a_gateway_drained_and_restarted_behind_haproxy_cuts_no_client(
        kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    kafka = pytest.importorskip("kafka")
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if haproxy is None:
        pytest.skip("no haproxy (Debian: apt-get install haproxy; .ci/setup.sh installs it)")
    commands, config = documented_setup()
    ports = {p: _free_port() for p in (19092, 19093, 19094, 19193, 19194)}
    front = ports[19092]
    (tmp_path / "haproxy.cfg").write_text(_substitute(config, ports, kafka_broker.bootstrap))
    gateways = [Gateway(_substitute(c, ports, kafka_broker.bootstrap), tmp_path / f"gw{i}.log")
                for i, c in enumerate(commands)]
    topic = unique_topic("lb")
    create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
    produce_records(kafka_broker.bootstrap, topic, [(i % PARTITIONS, b"pre-%d" % i, b"x" * 200, None, None)
                                                   for i in range(PREFILL)])
    balancer = None
    stop_producing = threading.Event()
    stop_consuming = threading.Event()
    errors: list[str] = []
    acked: set[bytes] = set()
    deliveries: dict[str, dict[tuple[int, int], list[float]]] = {g: defaultdict(list) for g in GROUPS}
    rebalances: dict[str, list[float]] = {g: [] for g in GROUPS}
    lock = threading.Lock()
    threads: list[threading.Thread] = []
    try:
        for gateway in gateways:
            gateway.start()
        balancer = subprocess.Popen([haproxy, "-f", str(tmp_path / "haproxy.cfg"), "-db"],
                                    stdout=subprocess.DEVNULL, stderr=(tmp_path / "haproxy.log").open("w"))
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", front), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "haproxy.log").read_text()
                time.sleep(0.2)
        time.sleep(3)  # both servers up for HAProxy (rise 2, inter 1 s)
        bootstrap = f"127.0.0.1:{front}"

        def produce(n: int) -> None:
            producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, api_version=(0, 10), acks=-1,
                                           retries=20, retry_backoff_ms=300, request_timeout_ms=15000,
                                           max_in_flight_requests_per_connection=1,
                                           client_id=f"lb-producer-{n}")
            i = 0
            while not stop_producing.is_set():
                key = b"p%d-%d" % (n, i)
                i += 1

                def done(_meta, key=key) -> None:
                    with lock:
                        acked.add(key)

                producer.send(topic, key=key, value=b"y" * 200).add_callback(done)
                time.sleep(0.02)
            producer.flush(60)
            producer.close(30)

        def consume(group: str, n: int) -> None:
            class Listener(kafka.ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked) -> None:
                    pass

                def on_partitions_assigned(self, assigned) -> None:
                    with lock:
                        rebalances[group].append(time.monotonic())

            consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10),
                                           group_id=group, client_id=f"{group}-{n}",
                                           enable_auto_commit=False, auto_offset_reset="earliest",
                                           fetch_max_wait_ms=200, request_timeout_ms=20000,
                                           session_timeout_ms=10000, heartbeat_interval_ms=1000,
                                           reconnect_backoff_ms=200, max_partition_fetch_bytes=64 << 10)
            consumer.subscribe([topic], listener=Listener())
            while not stop_consuming.is_set():
                try:
                    batches = consumer.poll(timeout_ms=200)
                except Exception as exc:  # a corrupt response raises here (CRC, decoding)
                    errors.append(f"{group}-{n} poll: {exc!r}")
                    time.sleep(0.2)
                    continue
                now = time.monotonic()
                with lock:
                    for tp, messages in batches.items():
                        for m in messages:
                            deliveries[group][(tp.partition, m.offset)].append(now)
                if batches:
                    try:
                        consumer.commit()
                    except kafka.errors.CommitFailedError:
                        pass  # a rebalance took its partitions: redelivered, accounted below
                    except Exception as exc:
                        errors.append(f"{group}-{n} commit: {exc!r}")
            consumer.close()

        for n in range(2):
            threads.append(threading.Thread(target=produce, args=(n,), daemon=True))
        for group in GROUPS:
            for n in range(4):
                threads.append(threading.Thread(target=consume, args=(group, n), daemon=True))
        for t in threads:
            t.start()
        time.sleep(12)
        from tests.gateway.test_service import scrape, value

        carried = value(scrape(gateways[0].metrics_port), "lazyconv_gateway_connections",
                        listener="PLAINTEXT")
        assert carried > 0, "the gateway to drain carries no client: the test would prove nothing"
        drained_at = time.monotonic()
        status = gateways[0].stop()
        assert status == 0, f"the drained gateway exited with {status}: {gateways[0].log.read_text()[-2000:]}"
        assert time.monotonic() - drained_at < DRAIN_BOUND_S
        drained = [line for line in gateways[0].log.read_text().splitlines() if ": drained" in line]
        assert drained and drained[-1].endswith(": drained"), "requests were cut"
        gateways[0].start()  # the same command again: a restart
        time.sleep(12)
        stop_producing.set()
        for t in threads[:2]:
            t.join(90)
        assert len(acked) > 100, f"only {len(acked)} records acknowledged"
        stored = consume_all(kafka_broker.bootstrap, topic, PARTITIONS)
        wanted = {(p, o) for p, o, *_ in stored}
        deadline = time.monotonic() + 120
        while any(not wanted <= set(deliveries[g]) for g in GROUPS):
            assert time.monotonic() < deadline, {
                g: len(wanted - set(deliveries[g])) for g in GROUPS}
            time.sleep(0.5)
        stop_consuming.set()
        for t in threads[2:]:
            t.join(60)
    finally:
        stop_producing.set()
        stop_consuming.set()
        if balancer is not None:
            balancer.terminate()
            balancer.wait(10)
        for gateway in gateways:
            gateway.stop(30)
    assert not errors, errors[:5]
    # every acknowledged record is in Kafka
    keys = {k for _p, _o, k, *_ in stored}
    assert acked <= keys, sorted(acked - keys)[:10]
    # each group read every record; twice only after a rebalance of that group
    for group in GROUPS:
        assert wanted <= set(deliveries[group])
        for where, times in deliveries[group].items():
            for first, again in zip(times, times[1:], strict=False):
                assert any(first < t <= again for t in rebalances[group]), (
                    f"{group}: {where} read again without a rebalance in between")
