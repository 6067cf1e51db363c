"""Whether fetch sessions (KIP-227) save a Kafka 4 broker's CPU for the fetches a gateway sends
upstream: the same reads with full fetches (no session, what the gateway sends) and with a
session (a full fetch that opens it, then incremental ones), against a real broker.

Two shapes of consumer, each reading one partition's records from offset 0 to its end with
Fetch v12 (1 MiB per partition):

- ``stream``: a topic of one partition, what the gateway's benchmarks read (an old consumer
  of one partition: each upstream fetch names it, at a new offset every time);
- ``sparse``: a topic of ``--partitions`` partitions, the records in partition 0 only, every
  partition asked for (a consumer assigned many partitions, most of them idle): a full fetch
  names them all and gets them all back; an incremental one names only the partition whose
  offset moved and gets back only those with news.

Both ways alternate within each round; each measure is the broker's CPU (user + system, every
thread) per GiB of records and per fetch, and the client's rate. Run from a clone::

    python bench/fetch_sessions.py --size 128M --partitions 100 --rounds 3

(``--kafka-dist`` or ``$LAZYCONV_KAFKA_DIST``: a Kafka 4.x distribution; a JDK and
confluent-kafka, as for the other benchmarks against Kafka.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kafka_bench_common import (  # noqa: E402
    MIB,
    VALUE_SIZE,
    _recv_exact,
    connect,
    high_watermark,
    next_offset_v2,
    records,
    records_gib,
    records_mib_s,
)
from lazyconv._commands._common import parse_size  # noqa: E402
from lazyconv.protocol._fetch import FetchRequest, FetchResponse, response_header_version  # noqa: E402
from lazyconv.protocol._headers import decode_response_header  # noqa: E402
from lazyconv.protocol._primitives import Reader  # noqa: E402
from tests.kafka_broker import KafkaBroker, create_topic, produce_records  # noqa: E402

VERSION = 12
FETCH_SIZE = MIB
SESSION_ERRORS = {70, 71}  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
_I32 = struct.Struct(">i")


@dataclass
class Read:
    """One read of a topic's partition 0 from offset 0 to its end."""

    shape: str
    mode: str
    round: int = 0
    records: int = 0
    fetches: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    records_bytes: int = 0  # of the responses' record sets, every partition
    seconds: float = 0.0
    broker_cpu: float = 0.0

    @property
    def payload_gib(self) -> float:
        """GiB of records read, key + value as produced (as the other benchmarks count them)."""
        return records_gib(self.records)

    @property
    def mib_s(self) -> float:
        return records_mib_s(self.records, self.seconds)


def _exchange(sock: socket.socket, body: dict, correlation: int, read: Read) -> dict:
    frame = FetchRequest.encode_framed(VERSION, body, correlation, "fetch-sessions-bench")
    sock.sendall(frame)
    read.request_bytes += len(frame)
    size_buf = bytearray(4)
    _recv_exact(sock, memoryview(size_buf))
    (size,) = _I32.unpack(size_buf)
    data = bytearray(size)
    _recv_exact(sock, memoryview(data))
    read.response_bytes += size + 4
    reader = Reader(data)
    header = decode_response_header(reader, response_header_version(VERSION))
    if header["correlation_id"] != correlation:
        raise RuntimeError(f"correlation id {header['correlation_id']} != {correlation}")
    return FetchResponse.decode(VERSION, memoryview(data)[reader.pos:])


def read_partition(port: int, topic: str, partitions: int, until: int, mode: str,
                   broker: psutil.Process, shape: str) -> Read:
    """Partition 0 of ``topic`` from 0 to ``until``, every partition of the topic asked for;
    ``mode`` ``full`` (session id 0, epoch -1: no session) or ``session``."""
    read = Read(shape, mode)
    offsets = dict.fromkeys(range(partitions), 0)
    session_id, epoch = 0, 0
    sent: dict[int, int] = {}  # what the session holds: partition -> fetch offset sent
    broker0 = sum(broker.cpu_times()[:2])
    started = time.perf_counter()
    with connect(port) as sock:
        correlation = 0
        stalled = 0
        while offsets[0] < until:
            correlation += 1
            if mode == "full" or epoch == 0:
                asked = list(offsets)
            else:  # incremental: only what changed since the last request
                asked = [p for p, o in offsets.items() if sent.get(p) != o]
            body = {
                "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 * MIB,
                "isolation_level": 0,
                "session_id": session_id if mode == "session" else 0,
                "session_epoch": epoch if mode == "session" else -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "fetch_offset": offsets[p], "log_start_offset": -1,
                     "partition_max_bytes": FETCH_SIZE, "current_leader_epoch": -1}
                    for p in asked]}] if asked else [],
                "forgotten_topics_data": [], "rack_id": ""}
            answer = _exchange(sock, body, correlation, read)
            read.fetches += 1
            error = answer.get("error_code", 0)
            if mode == "session" and error in SESSION_ERRORS:
                session_id, epoch, sent = 0, 0, {}  # start again with a full fetch
                continue
            if error:
                raise RuntimeError(f"fetch error {error}")
            if mode == "session":
                if epoch == 0:
                    session_id = answer["session_id"]
                    if session_id == 0:
                        raise RuntimeError("the broker opened no fetch session (its cache full?)")
                sent.update((p, offsets[p]) for p in asked)
                epoch = epoch + 1 if epoch < (1 << 31) - 1 else 1
            for topic_answer in answer["responses"]:
                for part in topic_answer["partitions"]:
                    read.records_bytes += len(part["records"] or b"")
                    if part["error_code"]:
                        raise RuntimeError(f"partition {part['partition_index']}: error "
                                           f"{part['error_code']}")
                    if part["partition_index"] != 0:
                        continue
                    until = min(until, part["high_watermark"])
                    data = memoryview(part["records"] or b"")
                    nxt, used, _magic = next_offset_v2(data)
                    if used:
                        offsets[0] = nxt
                        stalled = -1
            stalled += 1
            if stalled > 20:  # a session that lost partition 0 would otherwise spin for ever
                raise RuntimeError(f"{mode} fetches of {topic}: no progress at offset {offsets[0]}")
    read.seconds = time.perf_counter() - started
    read.broker_cpu = sum(broker.cpu_times()[:2]) - broker0
    read.records = offsets[0]
    return read


def fill(broker: KafkaBroker, topic: str, partitions: int, count: int) -> None:
    if high_watermark(broker.port, topic) == count:
        return
    t0 = time.monotonic()
    create_topic(broker.bootstrap, topic, partitions)
    produce_records(broker.bootstrap, topic, records(count),
                    config={"linger.ms": 5, "batch.size": 65536}, timeout=600)
    print(f"  {topic}: {partitions} partition(s), {count} records in partition 0 in "
          f"{time.monotonic() - t0:.1f} s", flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/fetch_sessions.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kafka-dist", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST"),
                   help="a Kafka 4.x distribution folder (default $LAZYCONV_KAFKA_DIST)")
    p.add_argument("--size", type=parse_size, default=128 * MIB,
                   help="records read per pass, of 1 KiB values (default 128M)")
    p.add_argument("--partitions", type=int, default=100,
                   help="partitions of the sparse topic, all asked for (default 100)")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds; each reads both shapes both ways, which way first alternating "
                        "(default 3)")
    p.add_argument("--heap", default="1g", help="the broker's JVM heap (default 1g)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="the broker's data and logs (default: a temporary folder, removed)")
    args = p.parse_args(argv)
    if args.kafka_dist is None:
        p.error("--kafka-dist is needed (or $LAZYCONV_KAFKA_DIST)")
    if args.rounds < 1 or args.partitions < 2:
        p.error("--rounds must be at least 1 and --partitions at least 2")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    count = args.size // VALUE_SIZE
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="fetch-sessions-")) if owned else args.workdir
    broker = KafkaBroker(args.kafka_dist, workdir / "kafka", heap=args.heap)
    reads: list[Read] = []
    try:
        broker.start()
        print(f"Kafka {broker.version} on port {broker.port}", flush=True)
        shapes = {"stream": ("sessions-stream", 1), "sparse": ("sessions-sparse", args.partitions)}
        for topic, partitions in shapes.values():
            fill(broker, topic, partitions, count)
        process = psutil.Process(broker.pid)
        for topic, partitions in shapes.values():  # warm-up: the JIT, the page cache
            for mode in ("full", "session"):
                read_partition(broker.port, topic, partitions, min(count, 16384), mode, process, "")
        for rnd in range(args.rounds):
            order = ("full", "session") if rnd % 2 == 0 else ("session", "full")
            for shape, (topic, partitions) in shapes.items():
                for mode in order:
                    read = read_partition(broker.port, topic, partitions, count, mode, process, shape)
                    read.round = rnd
                    reads.append(read)
                    print(f"  round {rnd + 1} {shape:6} {mode:7}: {read.mib_s:7.1f} MiB/s, "
                          f"{read.fetches} fetches, broker {read.broker_cpu:.2f} s CPU", flush=True)
    finally:
        broker.stop()
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print("| shape | fetch | MiB/s | broker CPU s/GiB | broker CPU µs per fetch | request bytes "
          "per fetch | response bytes per fetch (less records) | × broker CPU, session / full, paired "
          "by round: median (range) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for shape in ("stream", "sparse"):
        per_gib = {}
        for mode in ("full", "session"):
            mine = [r for r in reads if r.shape == shape and r.mode == mode]
            per_gib[mode] = statistics.median(r.broker_cpu / r.payload_gib for r in mine)
            rate = statistics.median(r.mib_s for r in mine)
            per_fetch = statistics.median(r.broker_cpu / r.fetches * 1e6 for r in mine)
            request = statistics.median(r.request_bytes / r.fetches for r in mine)
            overhead = statistics.median((r.response_bytes - r.records_bytes) / r.fetches for r in mine)
            ratio = ""
            if mode == "session":
                def cpu(r: Read) -> float:
                    return r.broker_cpu / r.records
                full = {r.round: cpu(r) for r in reads if r.shape == shape and r.mode == "full"}
                paired = sorted(cpu(r) / full[r.round] for r in mine if full.get(r.round))
                ratio = (f"{statistics.median(paired):.2f} ({paired[0]:.2f}–{paired[-1]:.2f})"
                         if paired else "")
            print(f"| {shape} | {mode} | {rate:.1f} | {per_gib[mode]:.2f} | {per_fetch:.0f} | "
                  f"{request:.0f} | {overhead:.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
