"""``lazyconv serve`` against Kafka 3.9 on the same log files, read by raw Fetch clients of
several versions, one and several at a time: throughput, cores, CPU per GiB and memory.

The topics are written by a real Kafka 3.9 broker (confluent-kafka producer, 1 KiB values, one
partition per codec; bench/kafka_bench_common.py); the broker is stopped cleanly and its
partition folders (and recovery checkpoint) are copied into a log directory for ``lazyconv
serve``, so both serve byte-identical segment files (checked by hash after the run). Then, one
server up at a time and alternating which goes first, ``--consumers`` connections each read a
whole topic from offset 0 with raw Fetch requests of each ``--versions`` (v0: magic 0, what
0.8–0.9 consumers send; v2: magic 1, 0.10.0–0.10.1; v4: magic 2 as stored, nothing converts),
released together; each consumer is a process of its own (``--client-threads``: threads of
the benchmark's process, which share one interpreter lock). Per Fetch version, codec, consumer count and side:

- aggregate throughput: MiB of records (key + value as produced) per second of wall time, all
  consumers together;
- cores used by the server: its CPU seconds (user + system, every thread) / wall seconds;
- CPU seconds per GiB of records;
- the busiest thread's share of the server's CPU (1/N when N threads share the work evenly);
- the share of the time the server's threads wanted a CPU that they spent waiting for one in
  the run queue (Linux schedstat): how much other processes held the server back;
- the cores other processes used meanwhile (the machine's noise);
- the server's peak RSS during the read (sampled every 5 ms), and its RSS when idle before it.

Kafka runs with its default thread counts (``num.network.threads=3``, ``num.io.threads=8``)
and ``--heap``; serve with its defaults (one conversion worker per core). Every figure is the
median over ``--rounds``. A read during which other processes used more than
``--max-other-cores`` is made again (``--retries``), and the least disturbed one counts; the
table says how busy the machine still was. Targets (issue 23, for the largest consumer count and
Fetch v2): serve's throughput >= 1.2x Kafka's, serve uses more than 1.2 cores, serve's CPU per
GiB <= Kafka's.

    python bench/serve_vs_kafka.py --kafka-dist-3 /path/to/kafka_2.13-3.9.0 --size 128M \
        --versions 0,2,4 --consumers 1,8
    # the distribution defaults to $LAZYCONV_KAFKA_DIST_3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Measure the checkout this script is in; the broker comes from the tests' fixture module.
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from bench.bench_common import HostProbe, host_probe, host_probes_line, process_tree  # noqa: E402
from bench.kafka_bench_common import (  # noqa: E402
    GIB,
    LIVE_PROCESSES,
    MIB,
    RECORD_PAYLOAD,
    VALUE_SIZE,
    ConcurrentRead,
    LazyconvProcess,
    add_client_options,
    apply_client_options,
    concurrent_reads,
    fill,
    high_watermark,
    least_disturbed,
    read_topic,
    topic_name,
)
from lazyconv._commands._common import parse_size  # noqa: E402
from tests.kafka_broker import KafkaBroker, dist_version  # noqa: E402

CODECS = ("lz4", "none", "gzip", "snappy")
KAFKA_THREADS = {"num.network.threads": "3", "num.io.threads": "8"}  # Kafka's defaults
TARGETS = {
    "throughput_serve_vs_kafka": (">=", 1.2),
    "serve_cores": (">", 1.2),
    "cpu_per_gib_serve_vs_kafka": ("<=", 1.0),
}
# Kafka's files in a log directory that serve reads too; the rest (meta.properties, the
# metadata log) is the broker's own.
CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint")


class Serve(LazyconvProcess):
    """``lazyconv serve LOGDIR`` as a subprocess."""

    def __init__(self, logdir: Path, log_path: Path, extra: Sequence[str] = ()) -> None:
        super().__init__(["serve", str(logdir), "--port", "0", *extra], "serving ", log_path)


@dataclass
class Measure:
    """One timed read by ``consumers`` connections of one side."""

    side: str  # "kafka" or "serve"
    version: int  # of the Fetch requests
    codec: str
    consumers: int
    round: int
    records: int
    wire_bytes: int
    fetches: int
    seconds: float
    server_cpu: float
    client_cpu: float
    other_cpu: float
    server_rss_peak: int
    server_rss_idle: int

    @property
    def payload_gib(self) -> float:
        return self.records * RECORD_PAYLOAD / GIB

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mib_s"] = self.records * RECORD_PAYLOAD / MIB / self.seconds
        d["cores"] = self.server_cpu / self.seconds
        d["cpu_s_per_gib"] = self.server_cpu / self.payload_gib
        d["other_cores"] = self.other_cpu / self.seconds
        d["client_cores"] = self.client_cpu / self.seconds
        return d


def timed(side: str, version: int, codec: str, port: int, process: psutil.Process,
          args: argparse.Namespace, consumers: int, count: int, round_: int) -> dict[str, Any]:
    busiest: dict[int, float] = {}

    starved: dict[int, float] = {}

    def once() -> ConcurrentRead:
        before, sched_before = thread_cpu(process), run_queue_times(process.pid)
        read = concurrent_reads(port, topic_name(codec), version, args.fetch_size, count,
                                consumers, {"server": process}, f"bench-{side}", rss_of="server",
                                client_processes=not args.client_threads)
        after, sched_after = thread_cpu(process), run_queue_times(process.pid)
        spent = [cpu - before.get(tid, 0.0) for tid, cpu in after.items()]
        busiest[id(read)] = max(spent) / max(sum(spent), 1e-9)
        ran = waited = 0.0
        for tid, (run, wait) in sched_after.items():
            run0, wait0 = sched_before.get(tid, (0.0, 0.0))
            ran, waited = ran + run - run0, waited + wait - wait0
        starved[id(read)] = waited / (ran + waited) if ran + waited > 0 else float("nan")
        return read

    label = f"{side} v{version} {codec}"
    read, attempts = least_disturbed(once, args.retries, args.max_other_cores, label)
    if read.errors:
        raise RuntimeError(f"{label}: {read.errors[0]!r}") from read.errors[0]
    for r in read.results:
        if r.records != count:
            raise RuntimeError(f"{label}: a consumer read {r.records} records of {count}")
    m = Measure(side, version, codec, consumers, round_, sum(r.records for r in read.results),
                sum(r.wire_bytes for r in read.results), sum(r.fetches for r in read.results),
                read.seconds, read.cpu["server"], read.client_cpu, read.other_cpu, read.rss_peak,
                read.rss_idle)
    d = m.as_dict()
    d["attempts"] = attempts
    # The share of the server's CPU its busiest thread spent: near 1 when one thread does the
    # work (one core at most, however many are free), 1/N when N threads share it.
    d["busiest_thread_share"] = busiest[id(read)]
    # Of the time the server's threads wanted a CPU, the share they waited in the run queue for
    # one (Linux schedstat): high when other processes keep the cores busy, whatever the server.
    d["run_queue_wait_share"] = starved[id(read)]
    print(f"    {side:<5} v{version} {codec:<6} x{consumers} {d['mib_s']:8.1f} MiB/s  {d['cores']:4.2f} cores  "
          f"{d['cpu_s_per_gib']:5.2f} CPU s/GiB  busiest thread {d['busiest_thread_share']:.0%}  "
          f"waiting for a CPU {d['run_queue_wait_share']:.0%}  "
          f"{m.seconds:6.2f} s  clients {d['client_cores']:.2f} cores  others "
          f"{d['other_cores']:.2f} cores  RSS {m.server_rss_peak / MIB:.0f} MiB", flush=True)
    return d


def run_queue_times(pid: int) -> dict[str, tuple[float, float]]:
    """Seconds each thread of ``pid`` ran and waited runnable for a CPU (``/proc/PID/task/TID/
    schedstat``; empty where there is none)."""
    times = {}
    for member in process_tree(psutil.Process(pid)):
        try:
            tids = os.listdir(f"/proc/{member.pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{member.pid}/task/{tid}/schedstat") as f:
                    run, wait = f.read().split()[:2]
            except (OSError, ValueError):
                continue  # the thread ended meanwhile, or no schedstat
            times[tid] = (int(run) / 1e9, int(wait) / 1e9)
    return times


def thread_cpu(process: psutil.Process) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``process`` and of its child processes."""
    threads = {}
    for member in process_tree(process):
        try:
            threads.update({t.id: t.user_time + t.system_time for t in member.threads()})
        except psutil.Error:
            continue
    return threads


def wait_readable(port: int, codecs: Sequence[str], count: int, timeout: float = 120.0) -> None:
    """Until every topic answers Fetch with its ``count`` records: a restarted KRaft broker
    accepts connections before it leads its partitions again (NOT_LEADER_OR_FOLLOWER)."""
    deadline = time.monotonic() + timeout
    for codec in codecs:
        while high_watermark(port, topic_name(codec)) != count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic_name(codec)} not readable with {count} records "
                                   f"after {timeout:.0f} s")
            time.sleep(0.2)


def one_pass(side: str, port: int, process: psutil.Process, args: argparse.Namespace, count: int,
             round_: int, measures: list[dict[str, Any]]) -> None:
    wait_readable(port, args.codecs, count)
    for version in args.versions:  # warm-up: the JVM's JIT, serve's page cache and imports
        for codec in args.codecs:
            read_topic(port, topic_name(codec), version, args.fetch_size,
                       min(count, args.warm_records), "bench-warm-up")
    for version in args.versions:
        for consumers in args.consumer_counts:
            for codec in args.codecs:
                # Each read is made once untimed first: the JVM's JIT then has compiled the
                # paths of this very read (with only the short warm-up above, Kafka read about
                # a fifth slower when a run timed Fetch v2 alone than after other versions).
                concurrent_reads(port, topic_name(codec), version, args.fetch_size, count, consumers,
                                 {"server": process}, "bench-warm-up", rss_of="server",
                                 client_processes=not args.client_threads)
                measures.append(timed(side, version, codec, port, process, args, consumers,
                                      count, round_))


def copy_logdir(broker: KafkaBroker, codecs: Sequence[str], target: Path) -> dict[str, str]:
    """The broker's partition folders of ``codecs`` and its checkpoints, copied into ``target``
    (the broker stopped); returns the SHA-256 of every copied ``.log`` file."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for codec in codecs:
        shutil.copytree(broker.data_dir / f"{topic_name(codec)}-0", target / f"{topic_name(codec)}-0")
    for name in CHECKPOINTS:
        if (broker.data_dir / name).is_file():
            shutil.copy2(broker.data_dir / name, target / name)
    return segment_hashes(target)


def segment_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.glob("*/*.log"))}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


MAGIC_OF_VERSION = {0: 0, 1: 0, 2: 1, 3: 1}  # Fetch v4 and later: magic 2 as stored
TARGET_VERSION = 2  # the targets are for Fetch v2 (magic 1)


def summarize(measures: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for version in args.versions:
        for consumers in args.consumer_counts:
            for codec in args.codecs:
                def pick(side: str, key: str, codec: str = codec, consumers: int = consumers,
                         version: int = version) -> float:
                    return _median([m[key] for m in measures if m["side"] == side
                                    and m["codec"] == codec and m["consumers"] == consumers
                                    and m["version"] == version])

                row: dict[str, Any] = {"version": version, "codec": codec, "consumers": consumers}
                for side in ("kafka", "serve"):
                    for key in ("mib_s", "cores", "cpu_s_per_gib", "other_cores",
                                "busiest_thread_share", "run_queue_wait_share", "server_rss_peak",
                                "server_rss_idle"):
                        row[f"{side}_{key}"] = pick(side, key)
                row["throughput_serve_vs_kafka"] = row["serve_mib_s"] / row["kafka_mib_s"]
                row["cpu_per_gib_serve_vs_kafka"] = (row["serve_cpu_s_per_gib"]
                                                     / row["kafka_cpu_s_per_gib"])
                rows.append(row)
    verdicts = []
    for row in rows:
        if row["consumers"] != max(args.consumer_counts) or row["version"] != TARGET_VERSION:
            continue  # the targets are for the concurrent old (v2) consumers
        for key, (op, bound) in TARGETS.items():
            value = row[key]
            met = {">=": value >= bound, ">": value > bound, "<=": value <= bound}[op]
            verdicts.append({"codec": row["codec"], "target": key, "value": value,
                             "bound": f"{op} {bound}", "met": bool(met)})
    return {"rows": rows, "targets": verdicts}


def format_tables(summary: dict[str, Any], versions: dict[str, str], args: argparse.Namespace,
                  count: int, probes: dict[str, HostProbe] | None = None) -> str:
    out = [f"# lazyconv serve vs Kafka {versions['kafka']} on the same segment files: "
           f"{args.size // MIB} MiB per topic ({count} records of {VALUE_SIZE} B values), "
           f"fetch size {args.fetch_size // MIB} MiB, medians of {args.rounds} round(s), "
           f"{versions['cpus']} cores", ""]
    host = host_probes_line(probes or {})
    if host is not None:
        out[-1:-1] = [host]
    out.append("| Fetch | codec | consumers | Kafka MiB/s | serve MiB/s | × thr | Kafka cores "
               "| serve cores | Kafka CPU s/GiB | serve CPU s/GiB | Kafka RSS MiB | serve RSS MiB "
               "(idle) | busiest thread Kafka / serve | waiting for a CPU Kafka / serve "
               "| others (cores) Kafka / serve |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        magic = MAGIC_OF_VERSION.get(r["version"], 2)
        out.append(f"| v{r['version']} (magic {magic}) | {r['codec']} | {r['consumers']} "
                   f"| {r['kafka_mib_s']:.1f} | {r['serve_mib_s']:.1f} "
                   f"| {r['throughput_serve_vs_kafka']:.2f} | {r['kafka_cores']:.2f} | "
                   f"{r['serve_cores']:.2f} | {r['kafka_cpu_s_per_gib']:.2f} | "
                   f"{r['serve_cpu_s_per_gib']:.2f} | {r['kafka_server_rss_peak'] / MIB:.0f} | "
                   f"{r['serve_server_rss_peak'] / MIB:.0f} ({r['serve_server_rss_idle'] / MIB:.0f}) | "
                   f"{r['kafka_busiest_thread_share']:.0%} / "
                   f"{r['serve_busiest_thread_share']:.0%} | {r['kafka_run_queue_wait_share']:.0%} / "
                   f"{r['serve_run_queue_wait_share']:.0%} | {r['kafka_other_cores']:.2f} / "
                   f"{r['serve_other_cores']:.2f} |")
    missed = [v for v in summary["targets"] if not v["met"]]
    out += ["", f"targets ({max(args.consumer_counts)} consumers, Fetch v{TARGET_VERSION}): "
            f"{len(summary['targets']) - len(missed)} of {len(summary['targets'])} met"]
    for v in summary["targets"]:
        out.append(f"  {'met   ' if v['met'] else 'MISSED'} {v['codec']} {v['target']} = "
                   f"{v['value']:.2f} (want {v['bound']})")
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/serve_vs_kafka.py",
                                description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kafka-dist-3", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST_3"),
                   help="a Kafka 3.x distribution folder (default $LAZYCONV_KAFKA_DIST_3)")
    p.add_argument("--size", type=parse_size, default=128 * MIB,
                   help="values per topic (default 128M)")
    p.add_argument("--codecs", default="lz4,none",
                   help=f"comma-separated, of {', '.join(CODECS)} (default lz4,none)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--versions", default="2",
                   help="comma-separated Fetch versions of the consumers (0, 2 or 4: magic 0, 1, "
                        "2; default 2)")
    p.add_argument("--consumers", default="8",
                   help="comma-separated numbers of concurrent consumers (default 8)")
    p.add_argument("--client-threads", action="store_true",
                   help="run the consumers as threads of this process instead of one process "
                        "each (threads share one interpreter lock: together they read at most "
                        "what one core of Python can)")
    p.add_argument("--single", action="store_true",
                   help="also time one consumer alone (the same as adding 1 to --consumers)")
    p.add_argument("--fetch-size", type=parse_size, default=MIB,
                   help="partition max bytes of each Fetch (default 1M, an old consumer's "
                        "max.partition.fetch.bytes)")
    p.add_argument("--max-other-cores", type=float, default=0.5,
                   help="a read during which other processes used more cores than this is made "
                        "again (default 0.5)")
    p.add_argument("--retries", type=int, default=2,
                   help="at most this many more reads of a disturbed one; the least disturbed "
                        "counts (default 2)")
    add_client_options(p)
    p.add_argument("--serve-arg", action="append", default=[],
                   help="one more argument for lazyconv serve (repeatable)")
    p.add_argument("--heap", default="1g", help="the broker's JVM heap (default 1g)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="the broker's data, serve's copy and the logs (default: a temporary "
                        "folder, removed); an earlier run's topics of the same --size are reused")
    p.add_argument("--json", type=Path, default=None, help="write every measure here")
    args = p.parse_args(argv)
    if args.kafka_dist_3 is None:
        p.error("--kafka-dist-3 is needed (or $LAZYCONV_KAFKA_DIST_3)")
    args.codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if unknown := set(args.codecs) - set(CODECS):
        p.error(f"unknown codecs: {sorted(unknown)}")
    try:
        args.versions = [int(v) for v in args.versions.split(",") if v.strip()]
        counts = {int(c) for c in args.consumers.split(",") if c.strip()}
    except ValueError:
        p.error("--versions and --consumers take comma-separated integers")
    if not args.versions or set(args.versions) - {0, 2, 4}:
        p.error(f"--versions: each of 0, 2, 4, got {args.versions}")
    if args.single:
        counts.add(1)
    if args.rounds < 1 or not counts or min(counts) < 1:
        p.error("--rounds and --consumers must be at least 1")
    args.consumer_counts = sorted(counts)
    args.warm_records = max(1, min(args.size, 64 * MIB) // RECORD_PAYLOAD)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    apply_client_options(args)
    count = args.size // VALUE_SIZE
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="serve-vs-kafka-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(args.kafka_dist_3, workdir / "kafka", heap=args.heap,
                         extra_props=KAFKA_THREADS)
    versions = {"kafka": dist_version(broker.dist), "python": platform.python_version(),
                "cpus": str(os.cpu_count())}
    logdir = workdir / "serve-logdir"
    measures: list[dict[str, Any]] = []
    failed = True
    try:
        print(f"writing {len(args.codecs)} topics of {count} records into Kafka {broker.version}",
              flush=True)
        broker.start()
        try:
            fill(broker, count, args.codecs)
        finally:
            broker.stop()  # a clean stop: the segments and checkpoints are final
        hashes = copy_logdir(broker, args.codecs, logdir)
        os.sync()
        probes = {"before": host_probe()}
        for round_ in range(args.rounds):
            for side in (("kafka", "serve") if round_ % 2 == 0 else ("serve", "kafka")):
                print(f"  round {round_ + 1}: {side}", flush=True)
                if side == "kafka":
                    broker.start()
                    try:
                        assert broker.pid is not None
                        one_pass(side, broker.port, psutil.Process(broker.pid), args, count,
                                 round_, measures)
                    finally:
                        broker.stop()
                else:
                    serve = Serve(logdir, workdir / "serve.log", args.serve_arg)
                    try:
                        one_pass(side, serve.port, serve.process, args, count, round_, measures)
                    finally:
                        serve.stop()
        probes["after"] = host_probe()
        if segment_hashes(logdir) != hashes:
            raise RuntimeError("serve's copy of the segment files changed during the run")
        failed = False
    finally:
        for process in list(LIVE_PROCESSES):
            process.stop()
        broker.stop()
        if owned and not failed:
            shutil.rmtree(workdir, ignore_errors=True)
        elif failed:
            print(f"the broker's and serve's logs are in {workdir}", file=sys.stderr)
    summary = summarize(measures, args)
    print()
    print(format_tables(summary, versions, args, count, probes))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"versions": versions, "argv": sys.argv,
                                         "records_per_topic": count, "summary": summary,
                                         "host_probe": {k: asdict(v) for k, v in probes.items()},
                                         "measures": measures}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
