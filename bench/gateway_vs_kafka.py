"""``lazyconv gateway`` in front of Kafka 4 against Kafka 3.9's own down-conversion, with real
brokers.

Old consumers cannot read from Kafka 4 (it refuses Fetch v0–3); Kafka 3.9 still serves them by
down-converting in the broker. This benchmark reads the same topics both ways, with one broker
up at a time so that the machine's cores are shared alike:

- **old consumer**: raw Fetch v2 requests (records down-converted to magic 1; ``--old-version 0``:
  Fetch v0, magic 0) to the gateway in
  front of Kafka 4 (``4.x + gw``), and to Kafka 3.9 itself (``3.9``), one consumer, then
  ``--consumers`` concurrent ones (each its own connection, each reading the whole topic from
  offset 0);
- **v2 client**: raw Fetch v12 requests (records passed through) to the gateway and to Kafka 4
  directly;
- **gateway memory**: the gateway's RSS while consumers read with 1 MiB and 50 MiB fetch sizes;
- **metrics cost** (``--metrics-cost``): the same old-consumer reads through a second gateway
  started with ``--metrics-port`` and scraped every ``--scrape-interval`` seconds, beside the
  first one (no metrics), in the same round, in turn (which goes first alternates): the
  gateway's CPU per GiB with metrics on over off. ``--only-gateway`` leaves Kafka 3.9, the v2
  client and the memory pass out (no Kafka 3.x distribution needed) for a run that measures
  only that.

The client is the same small raw client in every case (``lazyconv.protocol`` requests, a scan
of the records for the next offset, nothing decompressed), so its own cost is the same on both
sides. Each topic holds ``--size`` of 1 KiB JSON-like values (16-byte keys) written by a
confluent-kafka producer (``linger.ms=5``, ``batch.size=64K``, acks=all), one partition, one
topic per codec. Throughput is MiB of these records (key + value bytes as produced) per second of
wall time; the consumer counts the record bytes it received too (``wire`` in the JSON). CPU is
``psutil`` user+sys seconds of the broker's JVM and of the gateway process, measured around each
read, per GiB of records. Passes alternate between the brokers (3.9 first in odd rounds, 4.x
first in even ones); every figure is the median over ``--rounds`` and every ratio a ratio of
medians. A read during which other processes used more than ``--max-other-cores`` (their CPU
seconds over the read's wall time) is made again, at most ``--retries`` times, and the least
disturbed one counts; the table's heading says how busy the machine was.

    python bench/gateway_vs_kafka.py --kafka-dist DIR_4 --kafka-dist-3 DIR_3_9 --size 32M
    python bench/gateway_vs_kafka.py --only-gateway --metrics-cost --size 128M --codecs lz4,none
    # distribution folders default to $LAZYCONV_KAFKA_DIST and $LAZYCONV_KAFKA_DIST_3

With ``--security sasl_ssl`` every consumer connection is SASL_SSL (TLS, SCRAM-SHA-512 as a user
the ACLs allow to read the topics): Kafka 3.9 serves them on its own SASL_SSL listener (TLS costs
it its zero-copy path), and the gateway on a SASL_SSL listener of its own (gateway identity
mode, the user mapped to its cluster credentials) connects to Kafka 4 over SASL_SSL too; the
brokers are ``tests.kafka_broker.SecuredKafka`` (certificates made per run, StandardAuthorizer).

Nothing is left running: the brokers and gateways are stopped on exit (and killed with this
process on Linux).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Measure the checkout this script is in; the brokers come from the tests' fixture module.
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from bench.bench_common import HostProbe, host_probe, host_probes_line  # noqa: E402
from bench.kafka_bench_common import (  # noqa: E402
    GIB,
    LIVE_PROCESSES,
    MIB,
    NEW_VERSION,
    RECORD_PAYLOAD,
    VALUE_SIZE,
    ClientAuth,
    ConcurrentRead,
    LazyconvProcess,
    add_client_options,
    apply_client_options,
    concurrent_reads,
    fill,
    high_watermark,
    least_disturbed,
    legacy_magic,
    parse_variants,
    read_topic,
    records_gib,
    records_mib_s,
    set_client_auth,
    topic_name,
)
from lazyconv._commands._common import parse_size  # noqa: E402
from tests.kafka_broker import KafkaBroker, SecuredKafka, dist_version  # noqa: E402

CODECS = ("lz4", "gzip", "snappy", "none")

TARGETS = {
    "cpu_gw_plus_broker_vs_39": ("<=", 1.5),
    "cpu_gw_vs_39": ("<=", 1.0),
    "throughput_old_vs_39": (">=", 1.0),
    "throughput_concurrent_vs_39": (">=", 1.0),
    "throughput_v12_gw_vs_direct": (">=", 0.8),
    "metrics_cpu_on_vs_off": ("<=", 1.03),
    "metrics_cpu_on_vs_off_conc": ("<=", 1.03),
}


# -- processes ---------------------------------------------------------------------------


class Gateway(LazyconvProcess):
    """``lazyconv gateway`` as a subprocess (``python -m lazyconv gateway``): in front of
    ``upstream`` over PLAINTEXT, or with ``configs`` (``--config``, ``--upstream-config``)."""

    def __init__(self, upstream: str, log_path: Path, extra: Sequence[str] = (),
                 configs: tuple[Path, Path] | None = None) -> None:
        where = (["--config", str(configs[0]), "--upstream-config", str(configs[1])]
                 if configs is not None else ["--upstream", upstream, "--port", "0"])
        super().__init__(["gateway", *where, *extra], "gateway to ", log_path)

    @property
    def metrics_url(self) -> str | None:
        """http://HOST:PORT/metrics when started with --metrics-port (from its ready line)."""
        if ", metrics on " not in self.ready_line:
            return None
        return self.ready_line.split(", metrics on ", 1)[1].split()[0] + "/metrics"


# -- security (--security sasl_ssl) ------------------------------------------------------

BENCH_USER = "alice"


@dataclass
class Secured:
    """A broker's security for the consumers: its SecuredKafka (None: PLAINTEXT) and, for
    Kafka 4, the gateway's two configuration files."""

    kafka: SecuredKafka | None = None
    gateway_configs: tuple[Path, Path] | None = None

    def client_port(self, broker: KafkaBroker) -> int:
        return self.kafka.sasl_ssl_port if self.kafka is not None else broker.port

    def use(self) -> None:
        """The consumers from now on speak to this broker's (and its gateway's) listeners."""
        kafka = self.kafka
        set_client_auth(None if kafka is None else ClientAuth(
            str(kafka.material.ca_pem), "SCRAM-SHA-512", BENCH_USER, kafka.users[BENCH_USER]))


def secured_broker(dist: Path, folder: Path, heap: str) -> tuple[KafkaBroker, Secured]:
    kafka = SecuredKafka(dist, folder, mtls=False, heap=heap)
    return kafka.broker, Secured(kafka)


def grant_reads(secured: Secured, codecs: Sequence[str]) -> None:
    if secured.kafka is not None:
        secured.kafka.create_acls([(f"User:{BENCH_USER}", "topic", topic_name(c), op)
                                   for c in codecs for op in ("read", "describe")])


def gateway_configs(kafka: SecuredKafka, folder: Path) -> tuple[Path, Path]:
    """The gateway on SASL_SSL (SCRAM-SHA-512, the bench user with the same password as on
    the cluster), mapped to the user's cluster credentials, to Kafka over SASL_SSL."""
    from lazyconv.net._scram_credentials import add_scram_user

    folder.mkdir(parents=True, exist_ok=True)
    password = kafka.users[BENCH_USER]
    scram = folder / "gateway-scram.json"
    if not scram.exists():
        add_scram_user(scram, BENCH_USER, password, ["SCRAM-SHA-512"])
    secret = folder / "upstream.password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    config, upstream = folder / "gateway.properties", folder / "upstream.properties"
    config.write_text("\n".join([
        "listeners=SASL_SSL://127.0.0.1:0", "ssl.keystore.type=PEM",
        f"ssl.keystore.location={kafka.material.broker_keystore_pem}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512", "gateway.identity=gateway",
        f"gateway.scram.credentials.file={scram}",
        f"gateway.upstream.credentials.{BENCH_USER}.sasl.mechanism=SCRAM-SHA-512",
        f"gateway.upstream.credentials.{BENCH_USER}.username={BENCH_USER}",
        f"gateway.upstream.credentials.{BENCH_USER}.password=${{file:{secret}}}"]) + "\n")
    upstream.write_text("\n".join([
        f"bootstrap.servers={kafka.sasl_ssl_bootstrap}", "security.protocol=SASL_SSL",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={kafka.material.ca_pem}",
        "sasl.mechanism=SCRAM-SHA-512"]) + "\n")
    return config, upstream


class Scraper:
    """What Prometheus does to a gateway with metrics: GET /metrics every ``interval`` seconds,
    in a thread of this process, while started. The first scrape comes at a random point of
    the first ``interval`` (Prometheus's phase has nothing to do with a read's start), and the
    time between a stop() and the next start() does not count: reads shorter than ``interval``
    get ``interval``'s share of a scrape on average (a wait begun afresh at every start() would
    scrape none of them)."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self._left = random.uniform(0.0, interval)  # the wait for the next scrape, kept over a stop()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            if self._stop.wait(self._left):
                self._left = max(0.0, self._left - (time.monotonic() - started))
                return
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                answer.read()
            self.scrapes += 1
            self._left = self.interval

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


@dataclass
class Measure:
    """One timed read: one or several consumers, their sum."""

    case: str
    codec: str
    consumers: int
    fetch_size: int
    records: int
    wire_bytes: int
    fetches: int
    seconds: float  # wall, first request to last answer
    broker_cpu: float
    gateway_cpu: float
    client_cpu: float
    other_cpu: float  # every other process on the machine meanwhile (a measure of the noise)
    gateway_rss_peak: int = 0
    gateway_rss_idle: int = 0
    attempts: int = 1  # reads made, the others too disturbed by other processes

    @property
    def payload_gib(self) -> float:
        return records_gib(self.records)

    @property
    def mib_s(self) -> float:
        return records_mib_s(self.records, self.seconds)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mib_s"] = self.mib_s
        d["broker_cpu_s_per_gib"] = self.broker_cpu / self.payload_gib
        d["gateway_cpu_s_per_gib"] = self.gateway_cpu / self.payload_gib
        return d


# A timed read during which other processes used more than MAX_OTHER_CORES cores (on average)
# is made again, up to RETRIES more times; the least disturbed one counts (--max-other-cores,
# --retries).
MAX_OTHER_CORES = 0.5
RETRIES = 1


def timed_read(case: str, codec: str, port: int, version: int, fetch_size: int, until: int,
               consumers: int, broker: KafkaBroker, gateway: Gateway | None,
               expect_records: int) -> Measure:
    """``consumers`` connections each reading the topic from 0, timed together (again when
    other processes disturbed it, see MAX_OTHER_CORES)."""
    gw_proc = gateway.process if gateway is not None else None
    processes = {"broker": psutil.Process(broker.pid), "gateway": gw_proc}

    def once() -> ConcurrentRead:
        return concurrent_reads(port, topic_name(codec), version, fetch_size, until, consumers,
                                processes, f"bench-{case}", rss_of="gateway")

    read, attempts = least_disturbed(once, RETRIES, MAX_OTHER_CORES, f"{case} {codec}")
    if read.errors:
        raise RuntimeError(f"{case} {codec}: {read.errors[0]!r}") from read.errors[0]
    for r in read.results:
        if r.records != expect_records if until >= expect_records else r.records < until:
            raise RuntimeError(f"{case} {codec}: read {r.records} records, expected {expect_records}")
    done = read.results
    return Measure(case, codec, consumers, fetch_size, sum(r.records for r in done),
                   sum(r.wire_bytes for r in done), sum(r.fetches for r in done), read.seconds,
                   read.cpu["broker"], read.cpu["gateway"], read.client_cpu, read.other_cpu,
                   read.rss_peak, read.rss_idle, attempts)


# -- passes ------------------------------------------------------------------------------


@dataclass
class Run:
    args: dict[str, Any]
    versions: dict[str, str]
    records_per_topic: int
    measures: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    host_probe: dict[str, HostProbe] = field(default_factory=dict)  # "before" / "after" the rounds

    def add(self, m: Measure, round_: int) -> None:
        d = m.as_dict()
        d["round"] = round_
        self.measures.append(d)
        print(f"    {m.case:<14} {m.codec:<6} x{m.consumers} {m.mib_s:8.1f} MiB/s  "
              f"broker {d['broker_cpu_s_per_gib']:6.2f}  gateway {d['gateway_cpu_s_per_gib']:6.2f}"
              f" CPU s/GiB  {m.seconds:6.2f} s  others {m.other_cpu / m.seconds:.2f} cores" + (f"  gw RSS peak {m.gateway_rss_peak / MIB:.0f} MiB"
                                                  if m.gateway_rss_peak else ""), flush=True)


def start(broker: KafkaBroker, codecs: Sequence[str], timeout: float = 120.0) -> None:
    """Starts the broker and waits until each of the topics it already holds answers a Fetch
    (after a restart, "Kafka Server started" comes before the partitions have their leader
    again: NOT_LEADER_OR_FOLLOWER until then)."""
    from confluent_kafka.admin import AdminClient

    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    existing = set(admin.list_topics(timeout=30).topics)
    deadline = time.monotonic() + timeout
    for codec in codecs:
        if topic_name(codec) not in existing:
            continue
        while high_watermark(broker.port, topic_name(codec)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka {broker.version}: {topic_name(codec)} still has no "
                                   f"leader {timeout:.0f} s after the start")
            time.sleep(0.2)


def warm_up(port: int, version: int, codecs: Sequence[str], records_: int) -> None:
    for codec in codecs:
        read_topic(port, topic_name(codec), version, MIB, records_, "bench-warm-up")


def pass_39(run: Run, broker: KafkaBroker, args: argparse.Namespace, round_: int,
            secured: Secured | None = None) -> None:
    n = run.records_per_topic
    secured = secured or Secured()
    port = secured.client_port(broker)
    start(broker, args.codecs)
    secured.use()
    try:
        warm_up(port, args.old_version, args.codecs, args.warm_records)
        for codec in args.codecs:
            run.add(timed_read("old/3.9", codec, port, args.old_version, args.fetch_size, n,
                               1, broker, None, n), round_)
        if args.consumers > 1:
            for codec in args.codecs:
                run.add(timed_read("old-conc/3.9", codec, port, args.old_version,
                                   args.fetch_size, n, args.consumers, broker, None, n), round_)
    finally:
        broker.stop()


def pass_4(run: Run, broker: KafkaBroker, args: argparse.Namespace, round_: int,
           workdir: Path, secured: Secured | None = None) -> None:
    n = run.records_per_topic
    secured = secured or Secured()
    direct = secured.client_port(broker)
    start(broker, args.codecs)
    secured.use()
    gateway = None
    metered = None
    scraper = None
    variants: list[Gateway] = []
    try:
        gateway = Gateway(broker.bootstrap, workdir / "gateway.log", args.gateway_arg,
                          secured.gateway_configs)
        warm_up(gateway.port, args.old_version, args.codecs, args.warm_records)
        if not args.only_gateway:
            warm_up(gateway.port, NEW_VERSION, args.codecs, args.warm_records)
            warm_up(direct, NEW_VERSION, args.codecs, args.warm_records)
        sides: list[tuple[str, Gateway]] = [("gw", gateway)]
        if args.metrics_cost:
            metered = Gateway(broker.bootstrap, workdir / "gateway-metrics.log",
                              [*args.gateway_arg, "--metrics-port", "0"], secured.gateway_configs)
            assert metered.metrics_url is not None
            scraper = Scraper(metered.metrics_url, args.scrape_interval)
            warm_up(metered.port, args.old_version, args.codecs, args.warm_records)
            sides.append(("gw+metrics", metered))
        for name, extra in args.variant:  # another gateway, read in turn in the same rounds
            variant = Gateway(broker.bootstrap, workdir / f"gateway-{name}.log", [*args.gateway_arg, *extra],
                              secured.gateway_configs)
            variants.append(variant)
            warm_up(variant.port, args.old_version, args.codecs, args.warm_records)
            sides.append((f"gw+{name}", variant))
        for consumers, kind in ((1, "old"), (args.consumers, "old-conc")):
            if consumers == 1 and kind == "old-conc":
                continue
            for i, codec in enumerate(args.codecs):
                order = sides if (i + round_) % 2 == 0 else sides[::-1]
                for name, gw in order:
                    if gw is metered and scraper is not None:
                        scraper.start()
                    try:
                        run.add(timed_read(f"{kind}/{name}", codec, gw.port, args.old_version,
                                           args.fetch_size, n, consumers, broker, gw, n), round_)
                    finally:
                        if gw is metered and scraper is not None:
                            scraper.stop()
        for i, codec in enumerate(args.codecs if not args.only_gateway else ()):
            for k in range(args.v12_repeat):
                sides = [("v12/gw", gateway.port, gateway), ("v12/direct", direct, None),
                         *((f"v12/gw+{name}", v.port, v)
                           for (name, _), v in zip(args.variant, variants, strict=True))]
                if (i + k + round_) % 2:
                    sides.reverse()
                for case, port, gw in sides:
                    run.add(timed_read(case, codec, port, NEW_VERSION, args.fetch_size, n,
                                       args.v12_consumers, broker, gw, n), round_)
        if round_ == args.rounds - 1 and args.memory_size and not args.only_gateway:
            gateway.stop()
            gateway = None
            memory_pass(run, broker, args, workdir, secured)
    finally:
        for variant in variants:
            variant.stop()
        if scraper is not None:
            scraper.stop()
        if metered is not None:
            metered.stop()
        if gateway is not None:
            gateway.stop()
        broker.stop()


def memory_pass(run: Run, broker: KafkaBroker, args: argparse.Namespace, workdir: Path,
                secured: Secured | None = None) -> None:
    """A fresh gateway per (fetch size, consumers): its RSS before any request, and its peak
    while the consumers read ``--memory-size`` of every codec's topic."""
    until = min(run.records_per_topic, max(1, args.memory_size // RECORD_PAYLOAD))
    for fetch_size in args.memory_fetch_sizes:
        for consumers in sorted({1, args.consumers}):
            gateway = Gateway(broker.bootstrap, workdir / "gateway.log", args.gateway_arg,
                              secured.gateway_configs if secured is not None else None)
            try:
                time.sleep(0.5)
                idle = gateway.process.memory_info().rss
                peak = idle
                for codec in args.codecs:
                    m = timed_read("memory/gw", codec, gateway.port, args.old_version, fetch_size,
                                   until, consumers, broker, gateway, run.records_per_topic)
                    peak = max(peak, m.gateway_rss_peak)
                    d = m.as_dict()
                    d["gateway_rss_idle"] = idle
                    run.memory.append(d)
                entry = {"fetch_size": fetch_size, "consumers": consumers, "idle": idle,
                         "peak": peak, "chunk_size": args.chunk_size}
                run.memory.append(entry)
                print(f"    memory: fetch size {fetch_size // MIB} MiB x{consumers}: idle "
                      f"{idle / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB "
                      f"(+{(peak - idle) / MIB:.1f})", flush=True)
            finally:
                gateway.stop()


# -- summary -----------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(run: Run, args: argparse.Namespace) -> dict[str, Any]:
    def pick(case: str, codec: str, key: Callable[[dict[str, Any]], float]) -> float:
        return _median([key(m) for m in run.measures if m["case"] == case and m["codec"] == codec])

    def per_gib(which: str) -> Callable[[dict[str, Any]], float]:
        return lambda m: m[which] * GIB / (m["records"] * RECORD_PAYLOAD)

    def reads(case: str, codec: str) -> dict[tuple[int, int], dict[str, Any]]:
        """``case``'s reads by (round, which of that round's reads): --v12-repeat makes several
        a round, each beside its counterpart of the other side."""
        out: dict[tuple[int, int], dict[str, Any]] = {}
        for m in run.measures:
            if m["case"] == case and m["codec"] == codec:
                out[(m["round"], sum(1 for r, _ in out if r == m["round"]))] = m
        return out

    def pairs(case: str, base: str, codec: str) -> list[tuple[float, float]]:
        """Each round's gateway CPU per record of ``case`` and of ``base``, the n-th read of one
        with the n-th of the other (not every read of a round with the base's last one)."""
        of_base = reads(base, codec)
        return [(m["gateway_cpu"] / m["records"], o["gateway_cpu"] / o["records"])
                for key, m in reads(case, codec).items() if (o := of_base.get(key)) is not None]

    def paired(case: str, base: str, codec: str) -> float:
        """The median over rounds of ``case``'s gateway CPU per record over ``base``'s in the same
        round: each pair read the same records minutes apart at most, so what the machine does
        over the run (another tenant, the host's clock) divides out."""
        return _median([on / off for on, off in pairs(case, base, codec) if off > 0])

    rows = []
    for codec in args.codecs:
        thr_39 = pick("old/3.9", codec, lambda m: m["mib_s"])
        thr_gw = pick("old/gw", codec, lambda m: m["mib_s"])
        cpu_39 = pick("old/3.9", codec, per_gib("broker_cpu"))
        cpu_gw = pick("old/gw", codec, per_gib("gateway_cpu"))
        cpu_40 = pick("old/gw", codec, per_gib("broker_cpu"))
        cpu_sum = pick("old/gw", codec, lambda m: (m["gateway_cpu"] + m["broker_cpu"]) * GIB
                       / (m["records"] * RECORD_PAYLOAD))
        conc_39 = pick("old-conc/3.9", codec, lambda m: m["mib_s"])
        conc_gw = pick("old-conc/gw", codec, lambda m: m["mib_s"])
        v12_gw = pick("v12/gw", codec, lambda m: m["mib_s"])
        v12_direct = pick("v12/direct", codec, lambda m: m["mib_s"])
        cpu_gw_m = pick("old/gw+metrics", codec, per_gib("gateway_cpu"))
        cpu_conc_gw = pick("old-conc/gw", codec, per_gib("gateway_cpu"))
        cpu_conc_gw_m = pick("old-conc/gw+metrics", codec, per_gib("gateway_cpu"))
        rows.append({
            "codec": codec,
            "old_39_mib_s": thr_39, "old_gw_mib_s": thr_gw,
            "throughput_old_vs_39": thr_gw / thr_39,
            "cpu_39_s_per_gib": cpu_39, "cpu_gw_s_per_gib": cpu_gw, "cpu_4_s_per_gib": cpu_40,
            "cpu_gw_plus_broker_s_per_gib": cpu_sum,
            "cpu_gw_plus_broker_vs_39": cpu_sum / cpu_39, "cpu_gw_vs_39": cpu_gw / cpu_39,
            "conc_39_mib_s": conc_39, "conc_gw_mib_s": conc_gw,
            "throughput_concurrent_vs_39": conc_gw / conc_39,
            "v12_direct_mib_s": v12_direct, "v12_gw_mib_s": v12_gw,
            "throughput_v12_gw_vs_direct": v12_gw / v12_direct,
            "client_cpu_39_s_per_gib": pick("old/3.9", codec, per_gib("client_cpu")),
            "client_cpu_gw_s_per_gib": pick("old/gw", codec, per_gib("client_cpu")),
            "wire_mib_39": pick("old/3.9", codec, lambda m: m["wire_bytes"] / MIB),
            "wire_mib_gw": pick("old/gw", codec, lambda m: m["wire_bytes"] / MIB),
            "cpu_gw_metrics_s_per_gib": cpu_gw_m, "metrics_cpu_on_vs_off": cpu_gw_m / cpu_gw,
            "cpu_conc_gw_s_per_gib": cpu_conc_gw, "cpu_conc_gw_metrics_s_per_gib": cpu_conc_gw_m,
            "metrics_cpu_on_vs_off_conc": cpu_conc_gw_m / cpu_conc_gw,
            "metrics_cpu_paired": paired("old/gw+metrics", "old/gw", codec),
            "metrics_cpu_paired_conc": paired("old-conc/gw+metrics", "old-conc/gw", codec),
            "variant_gateway_cpu_paired": {
                name: (paired(f"old/gw+{name}", "old/gw", codec),
                       paired(f"old-conc/gw+{name}", "old-conc/gw", codec),
                       paired(f"v12/gw+{name}", "v12/gw", codec))
                for name, _ in args.variant},
            "metrics_pairs": pairs("old/gw+metrics", "old/gw", codec),
        })
    verdicts = []
    for row in rows:
        for key, (op, target) in TARGETS.items():
            value = row[key]
            if value != value:  # not measured (--consumers 1, --codecs …)
                continue
            met = value <= target if op == "<=" else value >= target
            verdicts.append({"codec": row["codec"], "target": key, "value": value,
                             "bound": f"{op} {target}", "met": bool(met)})
    memory = []
    for entry in run.memory:
        if "peak" in entry:
            bound = 64 * MIB + entry["consumers"] * entry["chunk_size"]
            memory.append({**entry, "bound": bound, "met": entry["peak"] <= bound,
                           "met_above_idle": entry["peak"] - entry["idle"] <= bound})
    others = _median([m["other_cpu"] / m["seconds"] for m in run.measures])
    return {"rows": rows, "targets": verdicts, "memory": memory, "other_cores_median": others}


def _fmt(x: float, digits: int = 1) -> str:
    if x != x:
        return "n/a"
    return f"{x:,.{digits}f}"


def format_tables(summary: dict[str, Any], run: Run, args: argparse.Namespace) -> str:
    size = args.size // MIB
    over = " over SASL_SSL on both sides" if args.security == "sasl_ssl" else ""
    out = [f"# gateway vs Kafka{over}: {run.versions['kafka_4']} + lazyconv gateway against "
           f"{run.versions['kafka_3']}; {size} MiB per topic ({run.records_per_topic} records of "
           f"{VALUE_SIZE} B values), fetch size {args.fetch_size // MIB} MiB, medians of "
           f"{args.rounds} round(s); other processes used a median "
           f"{summary['other_cores_median']:.2f} cores during the timed reads", ""]
    host = host_probes_line(run.host_probe)
    if host is not None:
        out[-1:-1] = [host]
    out.append(f"old consumer (Fetch v{args.old_version} -> magic {legacy_magic(args.old_version)}), "
               "one connection; CPU in s per GiB of records")
    out.append("")
    out.append("| codec | 3.9 MiB/s | gw MiB/s | × thr | 3.9 broker CPU | gw CPU | 4.x broker CPU "
               "| (gw+4.x) / 3.9 | gw / 3.9 |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        out.append(f"| {r['codec']} | {_fmt(r['old_39_mib_s'])} | {_fmt(r['old_gw_mib_s'])} | "
                   f"{_fmt(r['throughput_old_vs_39'], 2)} | {_fmt(r['cpu_39_s_per_gib'], 2)} | "
                   f"{_fmt(r['cpu_gw_s_per_gib'], 2)} | {_fmt(r['cpu_4_s_per_gib'], 2)} | "
                   f"{_fmt(r['cpu_gw_plus_broker_vs_39'], 2)} | {_fmt(r['cpu_gw_vs_39'], 2)} |")
    out += ["", f"old consumers, {args.consumers} concurrent connections (aggregate), and a v2 "
            "client (Fetch v12)", ""]
    out.append(f"| codec | 3.9 x{args.consumers} MiB/s | gw x{args.consumers} MiB/s | × thr | "
               "v12 direct MiB/s | v12 gw MiB/s | × thr |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        out.append(f"| {r['codec']} | {_fmt(r['conc_39_mib_s'])} | {_fmt(r['conc_gw_mib_s'])} | "
                   f"{_fmt(r['throughput_concurrent_vs_39'], 2)} | {_fmt(r['v12_direct_mib_s'])} | "
                   f"{_fmt(r['v12_gw_mib_s'])} | {_fmt(r['throughput_v12_gw_vs_direct'], 2)} |")
    if summary["memory"]:
        out += ["", "gateway RSS (old consumers, every codec in turn, a fresh gateway per row)", ""]
        out.append("| fetch size | consumers | idle MiB | peak MiB | peak - idle MiB | bound MiB |")
        out.append("|---:|---:|---:|---:|---:|---:|")
        for m in summary["memory"]:
            out.append(f"| {m['fetch_size'] // MIB} MiB | {m['consumers']} | {_fmt(m['idle'] / MIB)} "
                       f"| {_fmt(m['peak'] / MIB)} | {_fmt((m['peak'] - m['idle']) / MIB)} | "
                       f"{_fmt(m['bound'] / MIB)} |")
    if any(r["metrics_cpu_on_vs_off"] == r["metrics_cpu_on_vs_off"] for r in summary["rows"]):
        out += ["", f"the metrics' cost: the gateway's CPU in s per GiB of records with --metrics-port "
                f"(scraped every {args.scrape_interval:g} s) and without, same round, in turn", ""]
        out.append(f"| codec | off, x1 | on, x1 | on / off | paired | off, x{args.consumers} | "
                   f"on, x{args.consumers} | on / off | paired |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in summary["rows"]:
            out.append(f"| {r['codec']} | {_fmt(r['cpu_gw_s_per_gib'], 3)} | "
                       f"{_fmt(r['cpu_gw_metrics_s_per_gib'], 3)} | "
                       f"{_fmt(r['metrics_cpu_on_vs_off'], 3)} | {_fmt(r['metrics_cpu_paired'], 3)} | "
                       f"{_fmt(r['cpu_conc_gw_s_per_gib'], 3)} | "
                       f"{_fmt(r['cpu_conc_gw_metrics_s_per_gib'], 3)} | "
                       f"{_fmt(r['metrics_cpu_on_vs_off_conc'], 3)} | "
                       f"{_fmt(r['metrics_cpu_paired_conc'], 3)} |")
        out.append("(on / off: the ratio of the medians, the target's measure; paired: the median of "
                   "each round's on / off)")
    for name, extra in args.variant:
        out += ["", f"variant {name} ({' '.join(extra)}): the same reads (old consumers, and the v2 "
                f"client: v12) through a second gateway, in turn with the first, same rounds "
                f"(medians; CPU of gateway + 4.x broker)", ""]
        out.append(f"| codec | consumers | gw MiB/s | {name} MiB/s | × thr | gw CPU s/GiB | {name} CPU s/GiB | × CPU "
                   f"| × gateway CPU, paired |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for codec in args.codecs:
            for index, (kind, consumers) in enumerate((("old", 1), ("old-conc", args.consumers),
                                                       ("v12", 1))):
                def med(case: str, key: str, kind: str = kind, codec: str = codec) -> float:
                    ms = [m for m in run.measures if m["case"] == f"{kind}/{case}" and m["codec"] == codec]
                    if key == "cpu":
                        return _median([(m["gateway_cpu"] + m["broker_cpu"]) * GIB
                                        / (m["records"] * RECORD_PAYLOAD) for m in ms])
                    return _median([m[key] for m in ms])
                base_t, var_t = med("gw", "mib_s"), med(f"gw+{name}", "mib_s")
                base_c, var_c = med("gw", "cpu"), med(f"gw+{name}", "cpu")
                if base_t != base_t:
                    continue
                row = next(r for r in summary["rows"] if r["codec"] == codec)
                gw_paired = row["variant_gateway_cpu_paired"][name][index]
                label = f"{consumers}" if kind != "v12" else f"{args.v12_consumers} (v12)"
                out.append(f"| {codec} | {label} | {_fmt(base_t)} | {_fmt(var_t)} | {_fmt(var_t / base_t, 2)} "
                           f"| {_fmt(base_c, 2)} | {_fmt(var_c, 2)} | {_fmt(var_c / base_c, 2)} "
                           f"| {_fmt(gw_paired, 3)} |")
    missed = [v for v in summary["targets"] if not v["met"]]
    out += ["", f"targets: {len(summary['targets']) - len(missed)} of {len(summary['targets'])} met"]
    for v in missed:
        out.append(f"  missed: {v['codec']} {v['target']} = {v['value']:.3f} (want {v['bound']})")
    return "\n".join(out)


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/gateway_vs_kafka.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kafka-dist", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST"),
                   help="a Kafka 4.x distribution folder (default $LAZYCONV_KAFKA_DIST)")
    p.add_argument("--kafka-dist-3", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST_3"),
                   help="a Kafka 3.x distribution folder, the baseline (default "
                        "$LAZYCONV_KAFKA_DIST_3)")
    p.add_argument("--size", type=parse_size, default=256 * MIB,
                   help="values per topic (default 256M; e.g. 32M for a quick run)")
    p.add_argument("--codecs", default=",".join(CODECS),
                   help=f"comma-separated, of {', '.join(CODECS)} (default all)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--consumers", type=int, default=8,
                   help="concurrent old consumers (default 8; 1 skips that part)")
    p.add_argument("--v12-consumers", type=int, default=1,
                   help="v2 clients reading at once in each v12 read (default 1)")
    p.add_argument("--v12-repeat", type=int, default=3,
                   help="v12 reads per codec and round, through the gateway and direct in turn "
                        "(default 3: they are short)")
    p.add_argument("--max-other-cores", type=float, default=MAX_OTHER_CORES,
                   help="a read during which other processes used more cores than this is made "
                        f"again (default {MAX_OTHER_CORES})")
    p.add_argument("--retries", type=int, default=RETRIES,
                   help=f"at most this many more reads then; the least disturbed counts "
                        f"(default {RETRIES})")
    p.add_argument("--old-version", type=int, choices=(0, 1, 2, 3), default=2,
                   help="the old consumers' Fetch version: 2 (the default; magic 1, what "
                        "0.10.0-0.10.1 consumers send) or 0 (magic 0, 0.8-0.9 consumers)")
    p.add_argument("--fetch-size", type=parse_size, default=MIB,
                   help="partition max bytes of the timed reads (default 1M)")
    p.add_argument("--memory-fetch-sizes", default="1M,50M",
                   help="fetch sizes of the memory pass (default 1M,50M)")
    p.add_argument("--memory-size", type=parse_size, default=None,
                   help="records each consumer reads per topic in the memory pass (default: "
                        "--size, at most 64M; 0 skips the memory pass)")
    p.add_argument("--chunk-size", type=parse_size, default=1 << 20,
                   help="the gateway's --chunk-size (default 1M, its own default)")
    add_client_options(p)
    p.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                   help="how consumers connect: plaintext (default), or sasl_ssl: TLS and "
                        "SCRAM-SHA-512 to Kafka 3.9's SASL_SSL listener and to the gateway's, "
                        "the gateway to Kafka 4 over SASL_SSL")
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="one more argument for lazyconv gateway (repeatable)")
    p.add_argument("--metrics-cost", action="store_true",
                   help="also read through a gateway with --metrics-port, scraped, in turn with "
                        "the one without: the metrics' CPU per GiB")
    p.add_argument("--scrape-interval", type=float, default=15.0,
                   help="seconds between scrapes of the gateway with metrics (default 15, "
                        "the interval of Prometheus's example configuration; its built-in default is 60)")
    p.add_argument("--only-gateway", action="store_true",
                   help="read only through the gateway(s) in front of Kafka 4: no Kafka 3.9, no v2 "
                        "client, no memory pass (with --metrics-cost: the metrics' cost alone)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARG[,ARG...]",
                   help="also read through a second gateway started with these extra arguments, in "
                        "turn with the first, same rounds: an A/B of a gateway setting "
                        "(e.g. noahead=--fetch-ahead-bytes=0); repeatable")
    p.add_argument("--heap", default="1g", help="JVM heap of each broker (default 1g)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="brokers' data and logs (default: a temporary folder, removed)")
    p.add_argument("--json", type=Path, default=None, help="write every measure here")
    args = p.parse_args(argv)
    for name in ("kafka_dist",) if args.only_gateway else ("kafka_dist", "kafka_dist_3"):
        if getattr(args, name) is None:
            p.error(f"--{name.replace('_', '-')} is needed (or $LAZYCONV_"
                    f"{name.upper()})")
    try:
        args.variant = parse_variants(args.variant)
    except ValueError as exc:
        p.error(str(exc))
    args.codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if unknown := set(args.codecs) - set(CODECS):
        p.error(f"unknown codecs: {sorted(unknown)}")
    args.memory_fetch_sizes = [parse_size(s) for s in args.memory_fetch_sizes.split(",") if s]
    if args.memory_size is None:
        args.memory_size = min(args.size, 64 * MIB)
    args.gateway_arg = ["--chunk-size", str(args.chunk_size), *args.gateway_arg]
    args.warm_records = max(1, min(args.size, 64 * MIB) // RECORD_PAYLOAD)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global MAX_OTHER_CORES, RETRIES
    args = parse_args(argv)
    apply_client_options(args)
    MAX_OTHER_CORES, RETRIES = args.max_other_cores, max(0, args.retries)
    count = args.size // VALUE_SIZE
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gateway-vs-kafka-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    secured3, secured4 = Secured(), Secured()
    b3: KafkaBroker | None = None
    if args.security == "sasl_ssl":
        if not args.only_gateway:
            b3, secured3 = secured_broker(args.kafka_dist_3, workdir / "kafka-3", args.heap)
        b4, secured4 = secured_broker(args.kafka_dist, workdir / "kafka-4", args.heap)
        assert secured4.kafka is not None
        secured4.gateway_configs = gateway_configs(secured4.kafka, workdir / "gateway-config")
    else:
        if not args.only_gateway:
            b3 = KafkaBroker(args.kafka_dist_3, workdir / "kafka-3", heap=args.heap)
        b4 = KafkaBroker(args.kafka_dist, workdir / "kafka-4", heap=args.heap)
    if b4.version_info[0] < 4 or (b3 is not None and b3.version_info[0] >= 4):
        raise SystemExit(f"--kafka-dist must be Kafka 4+ ({b4.version}) and --kafka-dist-3 older "
                         f"({b3.version if b3 is not None else '-'})")
    brokers = [b for b in (b3, b4) if b is not None]
    run = Run(args={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              versions={"kafka_4": dist_version(b4.dist),
                        "kafka_3": dist_version(b3.dist) if b3 is not None else "-",
                        "python": platform.python_version(), "cpus": str(os.cpu_count())},
              records_per_topic=count)
    run.args["argv"] = sys.argv
    failed = True
    try:
        print(f"writing {len(args.codecs)} topics of {count} records into each broker", flush=True)
        for broker, secured in [(b, s) for b, s in ((b3, secured3), (b4, secured4)) if b is not None]:
            start(broker, args.codecs)
            try:
                fill(broker, count, args.codecs)
                grant_reads(secured, args.codecs)
            finally:
                broker.stop()
        os.sync()
        run.host_probe["before"] = host_probe()
        for round_ in range(args.rounds):
            order = ["3", "4"] if round_ % 2 == 0 else ["4", "3"]
            for which in order if b3 is not None else ["4"]:
                print(f"  round {round_ + 1}: Kafka {b3.version if b3 is not None and which == '3' else b4.version}"
                      + ("" if which == "3" else " + gateway"), flush=True)
                if which == "3" and b3 is not None:
                    pass_39(run, b3, args, round_, secured3)
                else:
                    pass_4(run, b4, args, round_, workdir, secured4)
        run.host_probe["after"] = host_probe()
        failed = False
    finally:
        for gw in list(LIVE_PROCESSES):
            gw.stop()
        for broker in brokers:
            broker.stop()
        if owned and not failed:
            shutil.rmtree(workdir, ignore_errors=True)
        elif failed:
            print(f"the brokers' and gateway's logs are in {workdir} (--workdir {workdir} "
                  "reuses its topics)", file=sys.stderr)
            if args.json and run.measures:
                write_json(args.json, run, args, count, complete=False)
    summary = summarize(run, args)
    print()
    print(format_tables(summary, run, args))
    if args.json:
        write_json(args.json, run, args, count)
    return 0


def write_json(path: Path, run: Run, args: argparse.Namespace, count: int,
               complete: bool = True) -> None:
    """Every measure, the summary, the versions and arguments (``complete`` false: the run
    stopped on an error, with the measures made until then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"complete": complete, "versions": run.versions, "args": run.args,
                                "records_per_topic": count, "summary": summarize(run, args),
                                "measures": run.measures, "memory": run.memory,
                                "host_probe": {k: asdict(v) for k, v in run.host_probe.items()}},
                               indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
