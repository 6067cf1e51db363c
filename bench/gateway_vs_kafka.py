"""``lazyconv gateway`` in front of Kafka 4 against Kafka 3.9's own down-conversion, with real
brokers.

Old consumers cannot read from Kafka 4 (it refuses Fetch v0–3); Kafka 3.9 still serves them by
down-converting in the broker. This benchmark reads the same topics both ways, with one broker
up at a time so that the machine's cores are shared alike:

- **old consumer**: raw Fetch v2 requests (records down-converted to magic 1) to the gateway in
  front of Kafka 4 (``4.x + gw``), and to Kafka 3.9 itself (``3.9``), one consumer, then
  ``--consumers`` concurrent ones (each its own connection, each reading the whole topic from
  offset 0);
- **v2 client**: raw Fetch v12 requests (records passed through) to the gateway and to Kafka 4
  directly;
- **gateway memory**: the gateway's RSS while consumers read with 1 MiB and 50 MiB fetch sizes.

The client is the same small raw client in every case (``lazyconv.protocol`` requests, a scan
of the records for the next offset, nothing decompressed), so its own cost is the same on both
sides. Each topic holds ``--size`` of 1 KiB JSON-like values (16-byte keys) written by a
confluent-kafka producer (``linger.ms=5``, ``batch.size=64K``, acks=all), one partition, one
topic per codec. Throughput is MiB of these records (key + value bytes as produced) per second of
wall time; the consumer counts the record bytes it received too (``wire`` in the JSON). CPU is
``psutil`` user+sys seconds of the broker's JVM and of the gateway process, measured around each
read, per GiB of records. Passes alternate between the brokers (3.9 first in odd rounds, 4.x
first in even ones); every figure is the median over ``--rounds`` and every ratio a ratio of
medians.

    python bench/gateway_vs_kafka.py --kafka-dist DIR_4 --kafka-dist-3 DIR_3_9 --size 32M
    # distribution folders default to $LAZYCONV_KAFKA_DIST and $LAZYCONV_KAFKA_DIST_3

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
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Measure the checkout this script is in; the brokers come from the tests' fixture module.
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from lazyconv.commands._common import parse_size  # noqa: E402
from lazyconv.protocol.fetch import FetchRequest, FetchResponse, response_header_version  # noqa: E402
from lazyconv.protocol.headers import decode_response_header  # noqa: E402
from lazyconv.protocol.primitives import Reader  # noqa: E402
from tests.kafka_broker import (  # noqa: E402
    KafkaBroker,
    _die_with_parent,
    create_topic,
    delete_topic,
    dist_version,
    produce_records,
)

CODECS = ("lz4", "gzip", "snappy", "none")
VALUE_SIZE = 1024
KEY_SIZE = 16
RECORD_PAYLOAD = VALUE_SIZE + KEY_SIZE
OLD_VERSION = 2  # Fetch v2: magic 1, what 0.10.0–0.10.1 consumers send
NEW_VERSION = 12  # Fetch v12: the last version that names topics, magic 2
MIB = 1 << 20
GIB = 1 << 30
RSS_SAMPLE_S = 0.005
SOCKET_TIMEOUT_S = 120.0

TARGETS = {
    "cpu_gw_plus_broker_vs_39": ("<=", 1.5),
    "cpu_gw_vs_39": ("<=", 1.0),
    "throughput_old_vs_39": (">=", 1.0),
    "throughput_concurrent_vs_39": (">=", 1.0),
    "throughput_v12_gw_vs_direct": (">=", 0.8),
}


def topic_name(codec: str) -> str:
    return f"bench-{codec}"


# -- data -------------------------------------------------------------------------------

_WORDS = ("kafka", "record", "batch", "offset", "lazy", "convert", "fetch", "topic", "partition",
          "leader", "epoch", "consumer", "producer", "gateway", "broker", "segment")


def value_pool(count: int = 4096, seed: int = 2026) -> list[bytes]:
    """Distinct JSON-like bodies (4 MiB in all): no two records of a 64 KiB batch share one,
    so every codec compresses them about as it would real payloads."""
    rng = random.Random(seed)
    pool = []
    body = VALUE_SIZE - len(b'{"seq":0000000000,') - 2
    for _ in range(count):
        fields = []
        size = 0
        while size <= body:
            key = rng.choice(_WORDS)
            value = (f'"{rng.choice(_WORDS)}-{rng.getrandbits(20)}"' if rng.random() < 0.6
                     else str(rng.getrandbits(rng.choice((8, 16, 32)))))
            item = f'"{key}":{value}'
            fields.append(item)
            size += len(item) + 1
        pool.append(",".join(fields).encode()[:body] + b'"}')
    return pool


def records(count: int) -> Iterator[tuple[int, bytes, bytes, None, None]]:
    pool = value_pool()
    for i in range(count):
        value = b'{"seq":%010d,' % i + pool[i % len(pool)]
        assert len(value) == VALUE_SIZE
        yield 0, b"key-%012d" % i, value, None, None


def fill(broker: KafkaBroker, count: int, codecs: Sequence[str]) -> None:
    """Writes each codec's topic, unless it is there already with ``count`` records (a
    ``--workdir`` of an earlier run with the same ``--size``)."""
    for codec in codecs:
        t0 = time.monotonic()
        existing = high_watermark(broker.port, topic_name(codec))
        if existing == count:
            print(f"  {broker.version}: {topic_name(codec)} has its {count} records", flush=True)
            continue
        if existing is not None:
            delete_topic(broker.bootstrap, topic_name(codec))
        create_topic(broker.bootstrap, topic_name(codec))
        produce_records(broker.bootstrap, topic_name(codec), records(count), compression=codec,
                        config={"linger.ms": 5, "batch.size": 65536}, timeout=600)
        print(f"  {broker.version}: {topic_name(codec)} {count} records in "
              f"{time.monotonic() - t0:.1f} s", flush=True)


# -- the raw client ----------------------------------------------------------------------

_I32 = struct.Struct(">i")
_OFFSET_SIZE = struct.Struct(">qi")


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    while view:
        n = sock.recv_into(view)
        if n == 0:
            raise ConnectionError("the server closed the connection")
        view = view[n:]


def next_offset_legacy(data: memoryview) -> tuple[int, int, int]:
    """(offset after the last complete message, bytes of complete messages, first magic)."""
    pos = 0
    last = -1
    end = len(data)
    magic = -1
    while pos + 12 <= end:
        offset, size = _OFFSET_SIZE.unpack_from(data, pos)
        if pos + 12 + size > end:
            break
        if magic < 0 and size >= 5:
            magic = data[pos + 12 + 4]
        last = offset  # a compressed wrapper carries the offset of its last inner message
        pos += 12 + size
    return last + 1, pos, magic


def next_offset_v2(data: memoryview) -> tuple[int, int, int]:
    """(offset after the last complete batch, bytes of complete batches, first magic)."""
    pos = 0
    nxt = 0
    end = len(data)
    magic = -1
    while pos + 61 <= end:
        base, length = _OFFSET_SIZE.unpack_from(data, pos)
        if pos + 12 + length > end:
            break
        if magic < 0:
            magic = data[pos + 16]
        nxt = base + _I32.unpack_from(data, pos + 23)[0] + 1
        pos += 12 + length
    return nxt, pos, magic


def high_watermark(port: int, topic: str) -> int | None:
    """The topic's high watermark (partition 0), None when the broker does not know it."""
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as sock:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}]}
        sock.sendall(FetchRequest.encode_framed(NEW_VERSION, body, 1, "bench-setup"))
        size_buf = bytearray(4)
        _recv_exact(sock, memoryview(size_buf))
        frame = bytearray(_I32.unpack(size_buf)[0])
        _recv_exact(sock, memoryview(frame))
    reader = Reader(frame)
    decode_response_header(reader, response_header_version(NEW_VERSION))
    answer = FetchResponse.decode(NEW_VERSION, memoryview(frame)[reader.pos:])
    parts = [p for t in answer["responses"] for p in t["partitions"]]
    if not parts or parts[0]["error_code"]:
        return None
    return parts[0]["high_watermark"]


@dataclass
class ReadResult:
    records: int = 0
    wire_bytes: int = 0
    fetches: int = 0
    seconds: float = 0.0


def read_topic(port: int, topic: str, version: int, fetch_size: int, until: int,
               client_id: str = "bench") -> ReadResult:
    """Reads partition 0 of ``topic`` from offset 0 up to offset ``until`` (or its end)."""
    expect_magic = 1 if version in (2, 3) else (0 if version < 2 else 2)
    scan = next_offset_v2 if expect_magic == 2 else next_offset_legacy
    header_version = response_header_version(version)
    result = ReadResult()
    offset = 0
    correlation = 0
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        size_buf = bytearray(4)
        while offset < until:
            correlation += 1
            body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                    "max_bytes": max(fetch_size, 50 * MIB), "isolation_level": 0,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": 0, "fetch_offset": offset,
                         "partition_max_bytes": fetch_size}]}]}
            sock.sendall(FetchRequest.encode_framed(version, body, correlation, client_id))
            _recv_exact(sock, memoryview(size_buf))
            (size,) = _I32.unpack(size_buf)
            frame = bytearray(size)
            _recv_exact(sock, memoryview(frame))
            reader = Reader(frame)
            header = decode_response_header(reader, header_version)
            if header["correlation_id"] != correlation:
                raise RuntimeError(f"correlation id {header['correlation_id']} != {correlation}")
            answer = FetchResponse.decode(version, memoryview(frame)[reader.pos:])
            if answer.get("error_code"):
                raise RuntimeError(f"fetch error {answer['error_code']}")
            (part,) = answer["responses"][0]["partitions"]
            if part["error_code"]:
                raise RuntimeError(f"{topic} at {offset}: partition error {part['error_code']}")
            until = min(until, part["high_watermark"])
            data = memoryview(part["records"] or b"")
            nxt, used, magic = scan(data)
            result.fetches += 1
            if used == 0:
                if offset >= until:
                    break
                raise RuntimeError(f"{topic} at {offset}: no complete record in "
                                   f"{len(data)} bytes (high watermark {until})")
            if magic != expect_magic:
                raise RuntimeError(f"{topic}: Fetch v{version} got magic {magic}")
            result.wire_bytes += used
            offset = nxt
    result.seconds = time.perf_counter() - started
    result.records = offset
    return result


# -- processes ---------------------------------------------------------------------------


class Gateway:
    """``lazyconv gateway`` as a subprocess (``python -m lazyconv gateway``)."""

    def __init__(self, upstream: str, log_path: Path, extra: Sequence[str] = ()) -> None:
        self.log = open(log_path, "ab")
        argv = [sys.executable, "-m", "lazyconv", "gateway", "--upstream", upstream,
                "--port", "0", *extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL, cwd=REPO,
                                     preexec_fn=_die_with_parent())
        _LIVE_GATEWAYS.add(self)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("gateway to "):
            self.stop()
            raise RuntimeError(f"the gateway did not start: {line!r} (log {log_path})")
        self.port = int(line.split(" on ", 1)[1].split()[0].rsplit(":", 1)[1])
        self.process = psutil.Process(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()
        _LIVE_GATEWAYS.discard(self)


_LIVE_GATEWAYS: set[Gateway] = set()


def cpu_seconds(process: psutil.Process | None) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core, every process)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


class RssSampler:
    """The peak RSS of a process while the ``with`` block runs, sampled every 5 ms."""

    def __init__(self, process: psutil.Process | None) -> None:
        self.process = process
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        assert self.process is not None
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self) -> RssSampler:
        if self.process is not None:
            self.peak = self.process.memory_info().rss
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.peak = max(self.peak, self.process.memory_info().rss)  # type: ignore[union-attr]


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

    @property
    def payload_gib(self) -> float:
        return self.records * RECORD_PAYLOAD / GIB

    @property
    def mib_s(self) -> float:
        return self.records * RECORD_PAYLOAD / MIB / self.seconds

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mib_s"] = self.mib_s
        d["broker_cpu_s_per_gib"] = self.broker_cpu / self.payload_gib
        d["gateway_cpu_s_per_gib"] = self.gateway_cpu / self.payload_gib
        return d


def timed_read(case: str, codec: str, port: int, version: int, fetch_size: int, until: int,
               consumers: int, broker: KafkaBroker, gateway: Gateway | None,
               expect_records: int) -> Measure:
    """``consumers`` connections each reading the topic from 0, timed together."""
    broker_proc = psutil.Process(broker.pid)
    gw_proc = gateway.process if gateway is not None else None
    me = psutil.Process()
    results: list[ReadResult | BaseException] = [ReadResult()] * consumers
    barrier = threading.Barrier(consumers + 1)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = read_topic(port, topic_name(codec), version, fetch_size, until,
                                    f"bench-{case}-{i}")
        except BaseException as exc:  # reported below
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(consumers)]
    for t in threads:
        t.start()
    idle = gw_proc.memory_info().rss if gw_proc is not None else 0
    with RssSampler(gw_proc) as rss:
        b0, g0, c0 = cpu_seconds(broker_proc), cpu_seconds(gw_proc), cpu_seconds(me)
        s0 = _busy_seconds()
        t0 = time.perf_counter()
        barrier.wait()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        s1 = _busy_seconds()
        b1, g1, c1 = cpu_seconds(broker_proc), cpu_seconds(gw_proc), cpu_seconds(me)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{case} {codec}: {errors[0]!r}") from errors[0]
    done = [r for r in results if isinstance(r, ReadResult)]
    for r in done:
        if r.records != expect_records if until >= expect_records else r.records < until:
            raise RuntimeError(f"{case} {codec}: read {r.records} records, expected {expect_records}")
    return Measure(case, codec, consumers, fetch_size, sum(r.records for r in done),
                   sum(r.wire_bytes for r in done), sum(r.fetches for r in done), seconds,
                   b1 - b0, g1 - g0, c1 - c0,
                   max(0.0, (s1 - s0) - (b1 - b0) - (g1 - g0) - (c1 - c0)), rss.peak, idle)


# -- passes ------------------------------------------------------------------------------


@dataclass
class Run:
    args: dict[str, Any]
    versions: dict[str, str]
    records_per_topic: int
    measures: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)

    def add(self, m: Measure, round_: int) -> None:
        d = m.as_dict()
        d["round"] = round_
        self.measures.append(d)
        print(f"    {m.case:<14} {m.codec:<6} x{m.consumers} {m.mib_s:8.1f} MiB/s  "
              f"broker {d['broker_cpu_s_per_gib']:6.2f}  gateway {d['gateway_cpu_s_per_gib']:6.2f}"
              f" CPU s/GiB  {m.seconds:6.2f} s  others {m.other_cpu / m.seconds:.2f} cores" + (f"  gw RSS peak {m.gateway_rss_peak / MIB:.0f} MiB"
                                                  if m.gateway_rss_peak else ""), flush=True)


def warm_up(port: int, version: int, codecs: Sequence[str], records_: int) -> None:
    for codec in codecs:
        read_topic(port, topic_name(codec), version, MIB, records_, "bench-warm-up")


def pass_39(run: Run, broker: KafkaBroker, args: argparse.Namespace, round_: int) -> None:
    n = run.records_per_topic
    broker.start()
    try:
        warm_up(broker.port, OLD_VERSION, args.codecs, args.warm_records)
        for codec in args.codecs:
            run.add(timed_read("old/3.9", codec, broker.port, OLD_VERSION, args.fetch_size, n,
                               1, broker, None, n), round_)
        if args.consumers > 1:
            for codec in args.codecs:
                run.add(timed_read("old-conc/3.9", codec, broker.port, OLD_VERSION,
                                   args.fetch_size, n, args.consumers, broker, None, n), round_)
    finally:
        broker.stop()


def pass_4(run: Run, broker: KafkaBroker, args: argparse.Namespace, round_: int,
           workdir: Path) -> None:
    n = run.records_per_topic
    broker.start()
    gateway = None
    try:
        gateway = Gateway(broker.bootstrap, workdir / "gateway.log", args.gateway_arg)
        warm_up(gateway.port, OLD_VERSION, args.codecs, args.warm_records)
        warm_up(gateway.port, NEW_VERSION, args.codecs, args.warm_records)
        warm_up(broker.port, NEW_VERSION, args.codecs, args.warm_records)
        for codec in args.codecs:
            run.add(timed_read("old/gw", codec, gateway.port, OLD_VERSION, args.fetch_size, n,
                               1, broker, gateway, n), round_)
        if args.consumers > 1:
            for codec in args.codecs:
                run.add(timed_read("old-conc/gw", codec, gateway.port, OLD_VERSION,
                                   args.fetch_size, n, args.consumers, broker, gateway, n), round_)
        for i, codec in enumerate(args.codecs):
            sides = [("v12/gw", gateway.port, gateway), ("v12/direct", broker.port, None)]
            if (i + round_) % 2:
                sides.reverse()
            for case, port, gw in sides:
                run.add(timed_read(case, codec, port, NEW_VERSION, args.fetch_size, n, 1, broker,
                                   gw, n), round_)
        if round_ == args.rounds - 1 and args.memory_size:
            gateway.stop()
            gateway = None
            memory_pass(run, broker, args, workdir)
    finally:
        if gateway is not None:
            gateway.stop()
        broker.stop()


def memory_pass(run: Run, broker: KafkaBroker, args: argparse.Namespace, workdir: Path) -> None:
    """A fresh gateway per (fetch size, consumers): its RSS before any request, and its peak
    while the consumers read ``--memory-size`` of every codec's topic."""
    until = min(run.records_per_topic, max(1, args.memory_size // RECORD_PAYLOAD))
    for fetch_size in args.memory_fetch_sizes:
        for consumers in sorted({1, args.consumers}):
            gateway = Gateway(broker.bootstrap, workdir / "gateway.log", args.gateway_arg)
            try:
                time.sleep(0.5)
                idle = gateway.process.memory_info().rss
                peak = idle
                for codec in args.codecs:
                    m = timed_read("memory/gw", codec, gateway.port, OLD_VERSION, fetch_size,
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
        })
    verdicts = []
    for row in rows:
        for key, (op, target) in TARGETS.items():
            value = row[key]
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
    out = [f"# gateway vs Kafka: {run.versions['kafka_4']} + lazyconv gateway against "
           f"{run.versions['kafka_3']}; {size} MiB per topic ({run.records_per_topic} records of "
           f"{VALUE_SIZE} B values), fetch size {args.fetch_size // MIB} MiB, medians of "
           f"{args.rounds} round(s); other processes used a median "
           f"{summary['other_cores_median']:.2f} cores during the timed reads", ""]
    out.append("old consumer (Fetch v2 -> magic 1), one connection; CPU in s per GiB of records")
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
    missed = [v for v in summary["targets"] if not v["met"]]
    out += ["", f"targets: {len(summary['targets']) - len(missed)} of {len(summary['targets'])} met"]
    for v in missed:
        out.append(f"  missed: {v['codec']} {v['target']} = {v['value']:.2f} (want {v['bound']})")
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
    p.add_argument("--fetch-size", type=parse_size, default=MIB,
                   help="partition max bytes of the timed reads (default 1M)")
    p.add_argument("--memory-fetch-sizes", default="1M,50M",
                   help="fetch sizes of the memory pass (default 1M,50M)")
    p.add_argument("--memory-size", type=parse_size, default=None,
                   help="records each consumer reads per topic in the memory pass (default: "
                        "--size, at most 64M; 0 skips the memory pass)")
    p.add_argument("--chunk-size", type=parse_size, default=128 * 1024,
                   help="the gateway's --chunk-size (default 128K)")
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="one more argument for lazyconv gateway (repeatable)")
    p.add_argument("--heap", default="1g", help="JVM heap of each broker (default 1g)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="brokers' data and logs (default: a temporary folder, removed)")
    p.add_argument("--json", type=Path, default=None, help="write every measure here")
    args = p.parse_args(argv)
    for name in ("kafka_dist", "kafka_dist_3"):
        if getattr(args, name) is None:
            p.error(f"--{name.replace('_', '-')} is needed (or $LAZYCONV_"
                    f"{name.upper()})")
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
    args = parse_args(argv)
    count = args.size // VALUE_SIZE
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gateway-vs-kafka-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    b3 = KafkaBroker(args.kafka_dist_3, workdir / "kafka-3", heap=args.heap)
    b4 = KafkaBroker(args.kafka_dist, workdir / "kafka-4", heap=args.heap)
    if b4.version_info[0] < 4 or b3.version_info[0] >= 4:
        raise SystemExit(f"--kafka-dist must be Kafka 4+ ({b4.version}) and --kafka-dist-3 older "
                         f"({b3.version})")
    run = Run(args={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              versions={"kafka_4": dist_version(b4.dist), "kafka_3": dist_version(b3.dist),
                        "python": platform.python_version(), "cpus": str(os.cpu_count())},
              records_per_topic=count)
    run.args["argv"] = sys.argv
    failed = True
    try:
        print(f"writing {len(args.codecs)} topics of {count} records into each broker", flush=True)
        for broker in (b3, b4):
            broker.start()
            try:
                fill(broker, count, args.codecs)
            finally:
                broker.stop()
        os.sync()
        for round_ in range(args.rounds):
            order = ["3", "4"] if round_ % 2 == 0 else ["4", "3"]
            for which in order:
                print(f"  round {round_ + 1}: Kafka {b3.version if which == '3' else b4.version}"
                      + ("" if which == "3" else " + gateway"), flush=True)
                if which == "3":
                    pass_39(run, b3, args, round_)
                else:
                    pass_4(run, b4, args, round_, workdir)
        failed = False
    finally:
        for gw in list(_LIVE_GATEWAYS):
            gw.stop()
        for broker in (b3, b4):
            broker.stop()
        if owned and not failed:
            shutil.rmtree(workdir, ignore_errors=True)
        elif failed:
            print(f"the brokers' and gateway's logs are in {workdir}", file=sys.stderr)
    summary = summarize(run, args)
    print()
    print(format_tables(summary, run, args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"versions": run.versions, "args": run.args,
                                         "records_per_topic": count, "summary": summary,
                                         "measures": run.measures, "memory": run.memory},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
