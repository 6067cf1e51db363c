"""What the benchmarks against real Kafka brokers share (bench/gateway_vs_kafka.py,
bench/serve_vs_kafka.py): the topics they read, the raw old-consumer client, lazyconv
server processes, and how CPU and RSS are measured.

- **data**: ``--size`` of 1 KiB JSON-like values (16-byte keys) written into a broker by a
  confluent-kafka producer (``linger.ms=5``, ``batch.size=64K``, acks=all), one partition, one
  topic per codec (``bench-<codec>``);
- **client**: raw Fetch requests (``lazyconv.protocol``) on one connection, the next offset
  found by scanning the records' headers, nothing decompressed, so the client's own cost is the
  same whatever answers it; it asks the kernel to wake it once the rest of a response (up to
  1 MiB) has arrived (``SO_RCVLOWAT``), not at every piece of it; on a secured listener
  (:func:`set_client_auth`) it speaks TLS and authenticates with SASL first, and is woken at
  every piece (a TLS record cannot be read before it is whole); :func:`concurrent_reads`
  runs N of them at once, timed together, as threads of this process or
  (``client_processes``) one process each, as N real consumers are: threads share one
  interpreter lock, so N threaded clients are served at most what one core of Python can read;
- **measuring**: ``psutil`` user+sys CPU seconds of each measured process around the reads
  (every thread: a JVM's, a lazyconv server's workers), the machine's busy CPU meanwhile (the
  noise other processes made), and the peak RSS of a process and its children sampled every
  5 ms (the children are listed every 0.5 s: a listing walks all of ``/proc``).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.bench_common import cpu_seconds, members_rss, process_tree, tree_cpu_seconds, tree_rss
from lazyconv._commands._common import parse_size as _parse_size
from lazyconv.net._limits import tune_allocator
from lazyconv.protocol._fetch import FetchRequest, FetchResponse, response_header_version
from lazyconv.protocol._headers import decode_response_header
from lazyconv.protocol._primitives import Reader
from tests.kafka_broker import (
    KafkaBroker,
    _die_with_parent,
    create_topic,
    delete_topic,
    produce_records,
)

REPO = Path(__file__).resolve().parent.parent
VALUE_SIZE = 1024
KEY_SIZE = 16
RECORD_PAYLOAD = VALUE_SIZE + KEY_SIZE


def records_gib(records: int) -> float:
    """GiB of ``records`` as the benchmarks count them: key + value as produced."""
    return records * RECORD_PAYLOAD / GIB


def records_mib_s(records: int, seconds: float) -> float:
    """MiB/s of ``records`` (key + value) read or written in ``seconds`` of wall time."""
    return records * RECORD_PAYLOAD / MIB / seconds
OLD_VERSION = 2  # Fetch v2: magic 1, what 0.10.0–0.10.1 consumers send
NEW_VERSION = 12  # Fetch v12: the last version that names topics, magic 2
MIB = 1 << 20
GIB = 1 << 30
RSS_SAMPLE_S = 0.005
RSS_RELIST_S = 0.5
# The client is woken when this much of a response has arrived (or all of it, when less is
# left): one wake-up per 1 MiB response instead of one per piece the server writes (8
# clients of uncompressed records spent 0.44-0.49 CPU s/GiB woken at every piece, 0.32-0.46
# woken once: docs/guide/benchmarks.md). 0: at every arrival, as without SO_RCVLOWAT. Forked clients inherit it; the benchmarks' options set it.
CLIENT_WAKE_BYTES = MIB
SOCKET_TIMEOUT_S = 120.0


def parse_variants(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``--variant NAME=ARG[,ARG...]`` values as (name, extra gateway arguments); ValueError
    names the first that is not of that form (the name also names a topic: letters, digits,
    ``-`` and ``_``) or whose name is taken."""
    variants = []
    for item in items:
        name, sep, extra = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ValueError(f"--variant {item!r} is not NAME=ARG[,ARG...] (NAME of letters, digits, - and _)")
        if any(name == seen for seen, _ in variants):
            raise ValueError(f"--variant {name!r} is given twice")
        variants.append((name, [a for a in extra.split(",") if a]))
    return variants


def legacy_magic(fetch_version: int) -> int:
    """The message format a Fetch v0-3 answer carries: magic 0 for v0-1, magic 1 for v2-3."""
    return 0 if fetch_version < 2 else 1


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


@dataclass(frozen=True)
class ClientAuth:
    """How the consumers reach a SASL_SSL listener: the CA (PEM file) that signed its
    certificate (the host name 127.0.0.1 is verified), and the SASL mechanism and user."""

    ca_pem: str
    mechanism: str
    username: str
    password: str = field(repr=False)


CLIENT_AUTH: ClientAuth | None = None


def set_client_auth(auth: ClientAuth | None) -> None:
    """Every consumer started afterwards speaks TLS and SASL as ``auth`` (None: PLAINTEXT);
    forked clients inherit it."""
    global CLIENT_AUTH, CLIENT_WAKE_BYTES
    CLIENT_AUTH = auth
    if auth is not None:
        CLIENT_WAKE_BYTES = 0  # SO_RCVLOWAT under TLS could wait for bytes OpenSSL holds


def connect(port: int, auth: ClientAuth | None = None) -> Any:
    """A connection to 127.0.0.1:``port``: TLS and SASL as ``auth`` says (the handshake and
    the authentication done), else a plain socket."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if auth is None:
        return sock
    import ssl

    from lazyconv.net._sasl import SaslClientExchange

    context = ssl.create_default_context(cafile=auth.ca_pem)
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    correlation = iter(range(1 << 30, (1 << 30) + 16))
    exchange = SaslClientExchange(auth.mechanism, auth.username, auth.password,
                                  authenticate_version=1, client_id="bench",
                                  correlation_ids=correlation)
    frame: bytes | None = exchange.start(time.monotonic())
    size_buf = bytearray(4)
    while frame is not None:
        tls.sendall(frame)
        _recv_exact(tls, memoryview(size_buf))
        answer = bytearray(_I32.unpack(size_buf)[0])
        _recv_exact(tls, memoryview(answer))
        step = exchange.receive(answer, time.monotonic())
        if step.done:
            return tls
        frame = step.send
    raise RuntimeError("the SASL exchange ended early")

_I32 = struct.Struct(">i")
_OFFSET_SIZE = struct.Struct(">qi")


def add_client_options(parser: Any) -> None:
    """The client's options, the same in every benchmark against Kafka (an argparse parser)."""
    parser.add_argument(
        "--client-wake-bytes", type=_parse_size, default=CLIENT_WAKE_BYTES,
        help="each consumer is woken once this much of a response (or all that is left of it) "
             "has arrived, SO_RCVLOWAT (default 1M); 0: at every piece the server writes")


def apply_client_options(args: Any) -> None:
    """Set what :func:`add_client_options` read, before any client starts (forked clients
    inherit it)."""
    global CLIENT_WAKE_BYTES
    CLIENT_WAKE_BYTES = max(0, args.client_wake_bytes)


def _recv_exact(sock: Any, view: memoryview, wake_bytes: int = 0) -> None:
    """Fill ``view``; with ``wake_bytes``, woken only once ``min(rest, wake_bytes)`` bytes are
    there (SO_RCVLOWAT)."""
    low_water = wake_bytes > 0 and hasattr(socket, "SO_RCVLOWAT")
    try:
        while view:
            if low_water:  # set for each call: a mark above what is left would never be reached
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, min(len(view), wake_bytes))
            n = sock.recv_into(view)
            if n == 0:
                raise ConnectionError("the server closed the connection")
            view = view[n:]
    finally:
        if low_water:  # the next size field: 4 bytes
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


def _recv_frame(sock: Any, view: memoryview) -> None:
    """A response's bytes after its size field, woken as :data:`CLIENT_WAKE_BYTES` says."""
    _recv_exact(sock, view, CLIENT_WAKE_BYTES)


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


def high_watermark(port: int, topic: str, partition: int = 0) -> int | None:
    """The high watermark of the topic's ``partition``, None when the broker does not know it
    (or does not lead it yet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as sock:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1}]}]}
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
    expect_magic = legacy_magic(version) if version < 4 else 2
    scan = next_offset_v2 if expect_magic == 2 else next_offset_legacy
    header_version = response_header_version(version)
    result = ReadResult()
    offset = 0
    correlation = 0
    # The client's own costs are kept low, as they share the machine's cores with the server
    # measured: one receive buffer, and chunk-sized allocations that stay in the heap (glibc
    # otherwise maps and faults in every 1 MiB response afresh, the client's largest cost).
    tune_allocator()
    buffer = bytearray(fetch_size + 65536)
    started = time.perf_counter()
    with connect(port, CLIENT_AUTH) as sock:
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
            if size > len(buffer):
                buffer = bytearray(size)
            frame = memoryview(buffer)[:size]
            _recv_frame(sock, frame)
            reader = Reader(frame)
            header = decode_response_header(reader, header_version)
            if header["correlation_id"] != correlation:
                raise RuntimeError(f"correlation id {header['correlation_id']} != {correlation}")
            answer = FetchResponse.decode(version, frame[reader.pos:])
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


# -- lazyconv server processes ------------------------------------------------------------


class LazyconvProcess:
    """``python -m lazyconv ARGS`` as a subprocess: ready once it printed a line starting with
    ``ready_prefix`` that ends in ``on HOST:PORT ...``; stopped with SIGTERM (killed with this
    process on Linux)."""

    def __init__(self, args: Sequence[str], ready_prefix: str, log_path: Path) -> None:
        self.log = open(log_path, "ab")
        argv = [sys.executable, "-m", "lazyconv", *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL, cwd=REPO,
                                     preexec_fn=_die_with_parent())
        LIVE_PROCESSES.add(self)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith(ready_prefix):
            self.stop()
            raise RuntimeError(f"lazyconv {args[0]} did not start: {line!r} (log {log_path})")
        self.ready_line = line
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
        LIVE_PROCESSES.discard(self)


LIVE_PROCESSES: set[LazyconvProcess] = set()


# -- measuring ---------------------------------------------------------------------------


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core, every process)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


class RssSampler:
    """The peak RSS of a process and its children while the ``with`` block runs, sampled
    every 5 ms (the children listed every 0.5 s)."""

    def __init__(self, process: psutil.Process | None) -> None:
        self.process = process
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        assert self.process is not None
        # Listing the children walks all of /proc (about 0.8 ms here): done every 0.5 s, not
        # at every sample, so sampling costs the cores the servers and clients share little.
        members: list[psutil.Process] = []
        listed = float("-inf")
        while not self._stop.is_set():
            now = time.monotonic()
            if now - listed >= RSS_RELIST_S:
                members, listed = process_tree(self.process), now
            self.peak = max(self.peak, members_rss(members))
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self) -> RssSampler:
        if self.process is not None:
            self.peak = tree_rss(self.process)
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.peak = max(self.peak, tree_rss(self.process))  # type: ignore[arg-type]


@dataclass
class ConcurrentRead:
    """``consumers`` connections that each read a topic, timed together."""

    results: list[ReadResult]
    seconds: float  # wall, first request to last answer
    cpu: dict[str, float]  # CPU seconds of each measured process meanwhile
    client_cpu: float  # this process (the consumers)
    other_cpu: float  # every other process on the machine meanwhile (a measure of the noise)
    rss_peak: int = 0  # of the process named by ``rss_of``
    rss_idle: int = 0
    errors: list[BaseException] = field(default_factory=list)


def _read_in_child(port: int, topic: str, version: int, fetch_size: int, until: int,
                   client_id: str, barrier: Any, results: Any, i: int) -> None:
    try:
        barrier.wait()
        results.put((i, read_topic(port, topic, version, fetch_size, until, client_id)))
    except BaseException as exc:  # reported by the parent
        results.put((i, RuntimeError(f"{client_id}: {exc!r}")))


def children_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's children that have been waited for."""
    t = os.times()
    return t.children_user + t.children_system


def concurrent_reads(port: int, topic: str, version: int, fetch_size: int, until: int,
                     consumers: int, processes: Mapping[str, psutil.Process | None],
                     client_id: str = "bench", rss_of: str | None = None,
                     client_processes: bool = False) -> ConcurrentRead:
    """``consumers`` clients, each its own connection reading ``topic`` from offset 0 up to
    ``until`` (:func:`read_topic`), released together; the CPU of ``processes`` is measured
    around them, and the RSS of ``processes[rss_of]`` sampled. The clients are threads of this
    process, or with ``client_processes`` one forked process each (their CPU is counted as the
    client's when they have been waited for)."""
    me = psutil.Process()
    results: list[ReadResult | BaseException] = [ReadResult()] * consumers
    barrier: Any
    children: list[Any] = []
    threads: list[threading.Thread] = []
    if client_processes:
        context = multiprocessing.get_context("fork")
        barrier = context.Barrier(consumers + 1)
        queue = context.Queue()
        children = [context.Process(target=_read_in_child, daemon=True,
                                    args=(port, topic, version, fetch_size, until,
                                          f"{client_id}-{i}", barrier, queue, i))
                    for i in range(consumers)]
        for child in children:
            child.start()
    else:
        barrier = threading.Barrier(consumers + 1)

        def worker(i: int) -> None:
            try:
                barrier.wait()
                results[i] = read_topic(port, topic, version, fetch_size, until,
                                        f"{client_id}-{i}")
            except BaseException as exc:  # reported by the caller
                results[i] = exc

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(consumers)]
        for t in threads:
            t.start()
    sampled = processes.get(rss_of) if rss_of is not None else None
    idle = tree_rss(sampled) if sampled is not None else 0
    with RssSampler(sampled) as rss:
        before = {name: tree_cpu_seconds(p) for name, p in processes.items()}
        c0 = cpu_seconds(me) + children_cpu_seconds()
        s0 = busy_seconds()
        t0 = time.perf_counter()
        barrier.wait()
        if client_processes:
            for _ in children:
                i, outcome = queue.get(timeout=SOCKET_TIMEOUT_S * 10)
                results[i] = outcome
            seconds = time.perf_counter() - t0
            for child in children:
                child.join()  # waited for: its CPU is now in children_cpu_seconds()
        else:
            for t in threads:
                t.join()
            seconds = time.perf_counter() - t0
        s1 = busy_seconds()
        cpu = {name: tree_cpu_seconds(p) - before[name] for name, p in processes.items()}
        client = cpu_seconds(me) + children_cpu_seconds() - c0
    return ConcurrentRead([r for r in results if isinstance(r, ReadResult)], seconds, cpu, client,
                          max(0.0, (s1 - s0) - sum(cpu.values()) - client), rss.peak, idle,
                          [r for r in results if isinstance(r, BaseException)])


def least_disturbed(read: Callable[[], ConcurrentRead], retries: int, max_other_cores: float,
                    label: str) -> tuple[ConcurrentRead, int]:
    """``read()``, made again (at most ``retries`` more times) while other processes used more
    than ``max_other_cores`` cores during it; the least disturbed one and how many were made.
    On a shared machine this keeps another job's burst out of one side's figure."""
    best: ConcurrentRead | None = None
    attempts = 0
    for attempt in range(1 + retries):
        attempts = attempt + 1
        done = read()
        if done.errors:
            return done, attempts
        other = done.other_cpu / done.seconds
        if best is None or other < best.other_cpu / best.seconds:
            best = done
        if other <= max_other_cores:
            break
        if attempt < retries:
            print(f"    ({label}: other processes used {other:.2f} cores, again)", flush=True)
    assert best is not None
    return best, attempts
