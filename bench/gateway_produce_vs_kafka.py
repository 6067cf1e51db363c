"""Old producers through ``lazyconv gateway`` + Kafka 4 against Kafka 3.9 up-converting them
itself, with real brokers.

An old producer sends Produce v0–2 with magic 0/1 message sets; Kafka 3.9 up-converts them to
v2 batches in the broker (``LogValidator``); Kafka 4 refuses them, and the gateway up-converts
them before it forwards Produce ≥ v3. This benchmark sends the same message sets both ways, one
broker up at a time:

- **producer**: raw Produce requests (``lazyconv.protocol``) on one connection, ``--in-flight``
  of them outstanding, each one message set of ``--batch-records`` records of 1 KiB JSON-like
  values (16-byte keys) for the producer's own partition, built before the clock starts
  (``--sets`` distinct sets per codec, sent in turn), so the client costs little and the same
  whoever answers; ``--producers`` of them at once, each its own process and partition;
- **cases**: every magic (1: Produce v2, what 0.10.x producers send; 0: Produce v0), codec and
  acks (``1``, ``all``) asked for;
- **checked**: every acknowledged record is read back from the broker (directly) and equals what
  was sent, in order, partition by partition; a refused or missing record fails the run.

Throughput is MiB of records (key + value as produced) per second of wall time, first request to
last acknowledgement; CPU is ``psutil`` user+sys seconds of the broker's JVM and of the gateway
process around the run, per GiB of records. Passes alternate between the brokers (3.9 first in
odd rounds); figures are medians over ``--rounds``, ratios ratios of medians. A run during which
other processes used more than ``--max-other-cores`` is made again once and the less disturbed
one counts.

    python bench/gateway_produce_vs_kafka.py --size 64M --rounds 2
    # distribution folders default to $LAZYCONV_KAFKA_DIST and $LAZYCONV_KAFKA_DIST_3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from bench.bench_common import cpu_seconds  # noqa: E402
from bench.kafka_bench_common import (  # noqa: E402
    GIB,
    KEY_SIZE,
    MIB,
    RECORD_PAYLOAD,
    LazyconvProcess,
    busy_seconds,
    high_watermark,
    parse_variants,
    value_pool,
)
from lazyconv._commands._common import parse_size  # noqa: E402
from lazyconv.conversion._up import up_convert  # noqa: E402
from lazyconv.protocol import _produce as produce  # noqa: E402
from lazyconv.protocol._headers import decode_response_header, encode_request_header  # noqa: E402
from lazyconv.protocol._primitives import Reader  # noqa: E402
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder  # noqa: E402
from tests.kafka_broker import KafkaBroker, create_topic, delete_topic, dist_version  # noqa: E402

_I32 = struct.Struct(">i")
PRODUCE_VERSION = {1: 2, 0: 0}  # magic -> the Produce version an old producer sends it with
# --direct-4: the sets up-converted before the clock starts, sent straight to Kafka 4 (the
# version the gateway forwards with, Kafka 4.0's highest non-flexible one)
DIRECT_4_PRODUCE_VERSION = 8
ACKS = {"1": 1, "all": -1}
TARGETS = {"throughput_vs_39": (">=", 1.0), "cpu_vs_39": ("<=", 1.2)}


class Gateway(LazyconvProcess):
    def __init__(self, upstream: str, log_path: Path, extra: Sequence[str] = ()) -> None:
        super().__init__(["gateway", "--upstream", upstream, "--port", "0", *extra],
                         "gateway to ", log_path)


# -- message sets ------------------------------------------------------------------------


def message_sets(magic: int, codec: str, count: int, records: int) -> list[bytes]:
    """``count`` distinct message sets of ``records`` 1 KiB values each (keys name the set
    and the record, so what is read back shows where it came from)."""
    pool = value_pool()
    sets = []
    for s in range(count):
        builder = RecordsBuilder(magic, Compression[codec.upper()], base_offset=0)
        for i in range(records):
            builder.append(i, 1_700_000_000_000 + i if magic else -1,
                           f"set{s:05d}rec{i:05d}".encode()[:KEY_SIZE].ljust(KEY_SIZE, b"."),
                           pool[(s * records + i) % len(pool)])
        sets.append(builder.build())
    return sets


def expected_digest(sets_records: list[list[tuple[bytes, bytes]]], sent: int) -> tuple[int, str]:
    """(record count, digest of keys and values in order) of the first ``sent`` sets sent in
    turn."""
    digest = hashlib.blake2b(digest_size=16)
    count = 0
    for n in range(sent):
        for key, value in sets_records[n % len(sets_records)]:
            digest.update(key)
            digest.update(value)
            count += 1
    return count, digest.hexdigest()


# -- the raw producer --------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    view = bytearray(n)
    got = 0
    while got < n:
        k = sock.recv_into(memoryview(view)[got:])
        if not k:
            raise ConnectionError("the server closed the connection")
        got += k
    return bytes(view)


def produce_sets(port: int, topic: str, partition: int, version: int, acks: int,
                 sets: list[bytes], requests: int, in_flight: int, client_id: str) -> int:
    """Sends ``requests`` Produce requests (the sets in turn), ``in_flight`` outstanding;
    returns how many were acknowledged without error (raises on the first error)."""
    frames = []
    for records in sets:
        body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": partition, "records": records}]}]}
        payload = produce.SPEC.encode_request(version, body)
        frames.append(payload)
    header_version = produce.SPEC.request_header_version(version)
    acked = 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        outstanding: list[int] = []
        sent = 0
        while acked < requests:
            while sent < requests and len(outstanding) < in_flight:
                header = encode_request_header(header_version, produce.SPEC.key, version, sent + 1,
                                               client_id)
                payload = frames[sent % len(frames)]
                sock.sendall(_I32.pack(len(header) + len(payload)) + header + payload)
                outstanding.append(sent + 1)
                sent += 1
            if acks == 0:
                acked = sent
                continue
            size = _I32.unpack(_recv_exact(sock, 4))[0]
            reader = Reader(_recv_exact(sock, size))
            correlation = decode_response_header(reader, produce.SPEC.response_header_version(version))
            if correlation["correlation_id"] != outstanding.pop(0):
                raise RuntimeError("answers out of order")
            answer = produce.SPEC.decode_response(version, reader, exact=False)
            code = answer["responses"][0]["partition_responses"][0]["error_code"]
            if code:
                raise RuntimeError(f"{client_id}: request {correlation['correlation_id']} refused with error {code}")
            acked += 1
    return acked


def _producer_child(port: int, topic: str, partition: int, version: int, acks: int,
                    sets: list[bytes], requests: int, in_flight: int, barrier: Any, queue: Any) -> None:
    try:
        barrier.wait()
        queue.put((partition, produce_sets(port, topic, partition, version, acks, sets, requests,
                                           in_flight, f"bench-producer-{partition}")))
    except BaseException as exc:  # reported by the parent
        queue.put((partition, RuntimeError(repr(exc))))


@dataclass
class Measure:
    side: str
    magic: int
    codec: str
    acks: str
    producers: int
    records: int
    seconds: float
    broker_cpu: float
    gateway_cpu: float
    other_cpu: float

    @property
    def mib_s(self) -> float:
        return self.records * RECORD_PAYLOAD / MIB / self.seconds

    def cpu_per_gib(self) -> float:
        return (self.broker_cpu + self.gateway_cpu) / (self.records * RECORD_PAYLOAD / GIB)


def timed_produce(side: str, port: int, broker: KafkaBroker, gateway: Gateway | None, magic: int,
                  codec: str, acks: str, producers: int, requests: int, args: argparse.Namespace,
                  sets: list[bytes]) -> tuple[Measure, str, list[int]]:
    version = DIRECT_4_PRODUCE_VERSION if side == "4.0" else PRODUCE_VERSION[magic]
    topic = f"produce-{side.replace('.', '').replace('+', '-')}-{magic}-{codec}-{acks}-{uuid.uuid4().hex[:6]}"
    # its files go as soon as it is deleted (after its check), not a minute later inside
    # another case's timed run (Kafka's default file.delete.delay.ms)
    create_topic(broker.bootstrap, topic, partitions=producers, configs={"file.delete.delay.ms": "0"})
    # a new topic's partitions answer NOT_LEADER_OR_FOLLOWER until their leader is in place:
    # the producers start once the broker leads each of them
    deadline = time.monotonic() + 60
    for partition in range(producers):
        while high_watermark(broker.port, topic, partition) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partition {partition} has no leader after 60 s")
            time.sleep(0.05)
    processes = {"broker": psutil.Process(broker.pid),
                 "gateway": gateway.process if gateway is not None else None}
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(producers + 1)
    queue = context.Queue()
    children = [context.Process(target=_producer_child, daemon=True, args=(
        port, topic, p, version, ACKS[acks], sets, requests, args.in_flight,
        barrier, queue)) for p in range(producers)]
    for child in children:
        child.start()
    before = {k: cpu_seconds(p) for k, p in processes.items() if p is not None}
    s0 = busy_seconds()
    t0 = time.perf_counter()
    barrier.wait()
    acked: list[int] = [0] * producers
    for _ in children:
        partition, outcome = queue.get(timeout=1200)
        if isinstance(outcome, BaseException):
            raise outcome
        acked[partition] = outcome
    seconds = time.perf_counter() - t0
    for child in children:
        child.join()
    s1 = busy_seconds()
    used = {k: cpu_seconds(p) - before[k] for k, p in processes.items() if p is not None}
    records = sum(acked) * args.batch_records
    other = max(0.0, (s1 - s0) - sum(used.values()))
    return (Measure(side, magic, codec, acks, producers, records, seconds, used.get("broker", 0.0),
                    used.get("gateway", 0.0), other), topic, acked)


def check_topic(bootstrap: str, topic: str, acked: list[int], sets_records: list[list[tuple[bytes, bytes]]]) -> None:
    """Every acknowledged record is in the topic, equal and in order, partition by partition."""
    from confluent_kafka import Consumer, TopicPartition

    for partition, sent in enumerate(acked):
        want_count, want = expected_digest(sets_records, sent)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "broker.address.family": "v4"})
        consumer.assign([TopicPartition(topic, partition, 0)])
        digest = hashlib.blake2b(digest_size=16)
        count = 0
        deadline = time.monotonic() + 300
        while count < want_count and time.monotonic() < deadline:
            for message in consumer.consume(10000, timeout=1.0):
                if message.error():
                    raise RuntimeError(f"{topic}-{partition}: {message.error()}")
                digest.update(message.key() or b"")
                digest.update(message.value() or b"")
                count += 1
        consumer.close()
        if (count, digest.hexdigest()) != (want_count, want):
            raise RuntimeError(f"{topic}-{partition}: read back {count} records (digest "
                               f"{digest.hexdigest()}), {want_count} acknowledged ({want})")


def run_side(side: str, broker: KafkaBroker, args: argparse.Namespace, workdir: Path,
             all_sets: dict[tuple[int, str], tuple[list[bytes], list[list[tuple[bytes, bytes]]]]],
             results: list[dict[str, Any]], round_: int) -> None:
    broker.start()
    gateway = None
    if side.startswith("gw"):  # "gw", or "gw+NAME": a --variant's gateway
        extra = dict(args.variant).get(side.removeprefix("gw+"), []) if side != "gw" else []
        gateway = Gateway(broker.bootstrap, workdir / f"gateway{side.removeprefix('gw')}.log",
                          [*args.gateway_arg, *extra])
    if side == "4.0":  # what the gateway would forward, sent without it
        all_sets = {case: ([up_convert(m, produce_version=PRODUCE_VERSION[case[0]]).batch for m in sets],
                           records) for case, (sets, records) in all_sets.items()}
    port = gateway.port if gateway is not None else broker.port
    try:
        for magic in args.magics:  # warm-up (the JVM's JIT, the gateway's codecs), not measured
            for codec in args.codecs:
                sets, _ = all_sets[(magic, codec)]
                warm = max(1, args.warm_up // (args.batch_records * RECORD_PAYLOAD))
                _, topic, _ = timed_produce(side, port, broker, gateway, magic, codec, "1", 1, warm,
                                            args, sets)
                delete_topic(broker.bootstrap, topic)
        for magic in args.magics:
            for codec in args.codecs:
                sets, sets_records = all_sets[(magic, codec)]
                per_request = len(sets[0])
                for acks in args.acks:
                    for producers in args.producers:
                        requests = max(1, args.size // producers // (args.batch_records * RECORD_PAYLOAD))
                        best = None
                        for _attempt in range(2):
                            measure, topic, acked = timed_produce(side, port, broker, gateway, magic, codec,
                                                                  acks, producers, requests, args, sets)
                            check_topic(broker.bootstrap, topic, acked, sets_records)
                            # checked: its log is let go, so many GiB of cases do not fill the
                            # disk
                            delete_topic(broker.bootstrap, topic)
                            if best is None or measure.other_cpu < best.other_cpu:
                                best = measure
                            if measure.other_cpu / measure.seconds <= args.max_other_cores:
                                break
                        assert best is not None
                        d = asdict(best)
                        d.update(round=round_, mib_s=best.mib_s, cpu_s_per_gib=best.cpu_per_gib(),
                                 request_bytes=per_request)
                        results.append(d)
                        print(f"    {side:<4} magic {magic} {codec:<5} acks {acks:<3} x{producers}: "
                              f"{best.mib_s:8.1f} MiB/s  CPU {best.cpu_per_gib():6.2f} s/GiB "
                              f"(broker {best.broker_cpu:.2f} s, gateway {best.gateway_cpu:.2f} s)  "
                              f"others {best.other_cpu / best.seconds:.2f} cores, checked", flush=True)
    finally:
        if gateway is not None:
            gateway.stop()
        broker.stop()


def _of(results: list[dict[str, Any]], side: str, case: tuple[Any, ...]) -> list[dict[str, Any]]:
    magic, codec, acks, producers = case
    return [r for r in results if r["side"] == side and r["magic"] == magic and r["codec"] == codec
            and r["acks"] == acks and r["producers"] == producers]


def _median(results: list[dict[str, Any]], side: str, case: tuple[Any, ...], key: str) -> float:
    return statistics.median(r[key] for r in _of(results, side, case))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka-dist", default=os.environ.get("LAZYCONV_KAFKA_DIST"),
                        help="a Kafka 4.x distribution folder (default $LAZYCONV_KAFKA_DIST)")
    parser.add_argument("--kafka-dist-3", default=os.environ.get("LAZYCONV_KAFKA_DIST_3"),
                        help="a Kafka 3.x distribution folder (default $LAZYCONV_KAFKA_DIST_3)")
    parser.add_argument("--size", type=parse_size, default=parse_size("128M"),
                        help="records per case, over all producers (default 128M)")
    parser.add_argument("--magics", default="1,0", help="message formats: 1 (Produce v2), 0 (Produce v0)")
    parser.add_argument("--codecs", default="none,gzip,lz4", help="of none, gzip, snappy, lz4")
    parser.add_argument("--acks", default="1,all", help="of 1, all")
    parser.add_argument("--producers", default="1,8", help="concurrent producers (each its own partition)")
    parser.add_argument("--batch-records", type=int, default=64, help="records per message set (default 64)")
    parser.add_argument("--sets", type=int, default=32, help="distinct message sets per codec (default 32)")
    parser.add_argument("--in-flight", type=int, default=4, help="requests outstanding per producer (default 4)")
    parser.add_argument("--warm-up", type=parse_size, default=parse_size("32M"),
                        help="records produced per magic and codec before the measured runs of a "
                             "pass, not measured (default 32M)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-other-cores", type=float, default=0.5)
    parser.add_argument("--gateway-arg", action="append", default=[])
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=ARG[,ARG...]",
                        help="also produce through a second gateway started with these extra "
                             "arguments, in turn with the first, same rounds: an A/B of a gateway "
                             "setting; repeatable")
    parser.add_argument("--only-gateway", action="store_true",
                        help="no Kafka 3.9 side: the gateway and its --variant gateways only")
    parser.add_argument("--direct-4", action="store_true",
                        help="a third side, \"4.0\": the same sets up-converted before the clock "
                             "starts and sent straight to the Kafka 4 broker (Produce v8): what the "
                             "broker alone costs of the gateway's side")
    args = parser.parse_args(argv)
    if not args.kafka_dist or not (args.kafka_dist_3 or args.only_gateway):
        parser.error("--kafka-dist and, unless --only-gateway, --kafka-dist-3 (or $LAZYCONV_KAFKA_DIST "
                     "and $LAZYCONV_KAFKA_DIST_3) are needed")
    try:
        args.variant = parse_variants(args.variant)
    except ValueError as exc:
        parser.error(str(exc))
    args.magics = [int(m) for m in args.magics.split(",")]
    args.codecs = args.codecs.split(",")
    args.acks = args.acks.split(",")
    args.producers = [int(p) for p in args.producers.split(",")]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="produce-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    all_sets = {}
    for magic in args.magics:
        for codec in args.codecs:
            sets = message_sets(magic, codec, args.sets, args.batch_records)
            records = [[(r.key or b"", r.value or b"") for b in MemoryRecords(s).batches() for r in b] for s in sets]
            all_sets[(magic, codec)] = (sets, records)
    b39 = None if args.only_gateway else KafkaBroker(Path(args.kafka_dist_3), workdir / "kafka-3", heap=args.heap)
    b4 = KafkaBroker(Path(args.kafka_dist), workdir / "kafka-4", heap=args.heap)
    print(f"Kafka {dist_version(Path(args.kafka_dist_3)) if b39 else '3.x (not run)'} direct vs lazyconv "
          f"gateway + Kafka {dist_version(Path(args.kafka_dist))}", flush=True)
    results: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        sides = ([("3.9", b39)] if b39 is not None else []) + [("gw", b4)] + \
            [(f"gw+{name}", b4) for name, _ in args.variant] + ([("4.0", b4)] if args.direct_4 else [])
        if round_ % 2:
            sides.reverse()
        for side, broker in sides:
            print(f"  round {round_ + 1}: {side}", flush=True)
            run_side(side, broker, args, workdir, all_sets, results, round_)
    cases = [(magic, codec, acks, producers) for magic in args.magics for codec in args.codecs
             for acks in args.acks for producers in args.producers]
    rows = []
    if b39 is not None:
        print("\n| magic | codec | acks | producers | 3.9 MiB/s | gateway MiB/s | × thr | 3.9 CPU s/GiB | (gw + 4.0.1) CPU s/GiB | × CPU |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for case in cases:
            magic, codec, acks, producers = case
            t39, tgw = _median(results, "3.9", case, "mib_s"), _median(results, "gw", case, "mib_s")
            c39 = _median(results, "3.9", case, "cpu_s_per_gib")
            cgw = _median(results, "gw", case, "cpu_s_per_gib")
            rows.append({"magic": magic, "codec": codec, "acks": acks, "producers": producers,
                         "mib_s_39": t39, "mib_s_gw": tgw, "throughput_vs_39": tgw / t39,
                         "cpu_39": c39, "cpu_gw": cgw, "cpu_vs_39": cgw / c39})
            print(f"| {magic} | {codec} | {acks} | {producers} | {t39:.1f} | {tgw:.1f} | "
                  f"{tgw / t39:.2f} | {c39:.2f} | {cgw:.2f} | {cgw / c39:.2f} |")
    if args.direct_4:
        print("\n| magic | codec | acks | producers | 4.0.1 direct MiB/s | × 3.9 | 4.0.1 CPU s/GiB | × 3.9 |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for index, case in enumerate(cases):
            t4, c4 = _median(results, "4.0", case, "mib_s"), _median(results, "4.0", case, "cpu_s_per_gib")
            vs = ((f"{t4 / rows[index]['mib_s_39']:.2f}", f"{c4 / rows[index]['cpu_39']:.2f}") if rows
                  else ("n/a", "n/a"))
            print(f"| {' | '.join(map(str, case))} | {t4:.1f} | {vs[0]} | {c4:.2f} | {vs[1]} |")
    for name, extra in args.variant:
        side = f"gw+{name}"
        print(f"\nvariant {name} ({' '.join(extra)}): the same sets through a second gateway, in turn "
              f"with the first, same rounds (medians; the gateway's own CPU per GiB, and its ratio "
              f"paired by round)\n")
        print(f"| magic | codec | acks | producers | gw MiB/s | {name} MiB/s | × thr | gw's own CPU s/GiB "
              f"| {name}'s own CPU s/GiB | × gateway CPU, paired |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for case in cases:
            tgw, tv = _median(results, "gw", case, "mib_s"), _median(results, side, case, "mib_s")
            own = {k: [r["gateway_cpu"] / (r["records"] * RECORD_PAYLOAD / GIB)
                       for r in sorted(_of(results, k, case), key=lambda r: r["round"])]
                   for k in ("gw", side)}
            paired = statistics.median(v / g for g, v in zip(own["gw"], own[side], strict=True))
            print(f"| {' | '.join(map(str, case))} | {tgw:.1f} | {tv:.1f} | {tv / tgw:.2f} | "
                  f"{statistics.median(own['gw']):.2f} | {statistics.median(own[side]):.2f} | {paired:.3f} |")
    met = sum(1 for r in rows for k, (op, want) in TARGETS.items()
              if (r[k] >= want if op == ">=" else r[k] <= want))
    print(f"\ntargets met: {met} of {len(rows) * len(TARGETS)}")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "measures": results, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
