"""Where ``lazyconv gateway``'s CPU goes while old consumers read through it: a py-spy profile.

Starts a Kafka 4.x broker (``--kafka-dist``), writes one topic per codec as
``bench/gateway_vs_kafka.py`` does (the same ``--workdir`` reuses its topics), starts a gateway
in front of it with that benchmark's settings, and has ``--consumers`` old consumers (Fetch v2,
records down-converted to magic 1, 1 MiB per partition; ``--fetch-version 12`` for clients that
read magic 2, whose records are relayed) read each topic again and again while
``py-spy record`` samples the gateway (every thread, and its worker processes) for
``--seconds``. ``--security sasl_ssl`` secures both sides as ``gateway_vs_kafka.py
--security sasl_ssl`` does (the broker's SASL_SSL listener, the gateway's SASL_SSL listener
reaching it over SASL_SSL, SCRAM-SHA-512). Prints, per codec, the share of the samples each function was running in
itself, grouped by what it does, and writes py-spy's collapsed stacks beside (``--out``) for a
flame graph (``flamegraph.pl`` or speedscope read them as they are).

``--sampler perf`` samples with Linux ``perf record`` instead, which sees what py-spy cannot:
the time spent in the OS kernel (socket copies, TCP), in libc (memcpy, memset, malloc) and in
the interpreter itself, apart from lazyconv's compiled kernel. It prints the share of each
library, the most sampled symbols, and the gateway's user and system CPU seconds over the
window (``perf`` from the distribution's linux-tools; ``kernel.perf_event_paranoid`` at 1 or
lower, or root).

    python bench/gateway_profile.py --kafka-dist $LAZYCONV_KAFKA_DIST --codecs none,lz4
    python bench/gateway_profile.py --kafka-dist $LAZYCONV_KAFKA_DIST --codecs none --sampler perf
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from bench.gateway_vs_kafka import (  # noqa: E402
    Gateway,
    Secured,
    gateway_configs,
    grant_reads,
    secured_broker,
    start,
)
from bench.kafka_bench_common import (  # noqa: E402
    LIVE_PROCESSES,
    MIB,
    NEW_VERSION,
    OLD_VERSION,
    VALUE_SIZE,
    concurrent_reads,
    fill,
    legacy_magic,
    topic_name,
)
from lazyconv._commands._common import parse_size  # noqa: E402
from tests.kafka_broker import KafkaBroker  # noqa: E402

# What a leaf frame does, by where it is (first match wins): the rows of the summary.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("TLS: encrypting and decrypting", ("SSLObject.", "sslproto.py")),
    ("socket I/O (send, recv)", ("write_to_channel (", "_SelectorSocketTransport.write (", "_read_ready",
                                 "sock_recv", "sock_send", "recv_into", "_write_send (", "_write_ready (",
                                 "TlsChannel._flush (", "TlsChannel._read_socket (")),
    ("down-conversion (kernel and its Python driver)", ("conversion/", "records/", "_ckernel")),
    ("lz4 / compression", ("lz4", "compress", "zstd", "snappy", "gzip", "zlib")),
    ("fetch relay and fetch-ahead", ("gateway/_fetch", "gateway/_relay", "_fetch_ahead")),
    ("request and response framing", ("protocol/", "net/_frames", "_send.py")),
    ("event loop and threads", ("asyncio/", "threading.py", "selectors.py", "concurrent/", "queue.py")),
    ("the rest of the gateway", ("lazyconv/",)),
)


# Leaves where a thread waits (a worker for its queue, the event loop in epoll): py-spy samples
# them as running when it cannot tell a futex or epoll wait from work, so they are counted apart.
WAITING = ("_worker (", "EpollSelector.select (", "Condition.wait (", "Event.wait (", "Thread.join (",
           "_wait_for_tstate_lock (")


def leaf_group(frame: str) -> str:
    for name, marks in GROUPS:
        if any(mark in frame for mark in marks):
            return name
    return "other (interpreter, standard library)"


def summarize(collapsed: Path, top: int = 15) -> str:
    """The share of samples per group and per leaf function of py-spy's ``raw`` output."""
    by_leaf: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.split(";")[-1]
        by_leaf[leaf] += int(count)
        total += int(count)
    if total == 0:
        return "no samples (did py-spy have permission to read the gateway?)"
    waiting = sum(n for leaf, n in by_leaf.items() if leaf.startswith(WAITING))
    for leaf in [leaf for leaf in by_leaf if leaf.startswith(WAITING)]:
        del by_leaf[leaf]
    total -= waiting
    if total == 0:
        return "only waiting threads were sampled"
    by_group: collections.Counter[str] = collections.Counter()
    for leaf, n in by_leaf.items():
        by_group[leaf_group(leaf)] += n
    lines = [f"{total} samples of work (and {waiting} of threads waiting in a queue or epoll, left out)",
             "", "| where the samples were | share |", "|---|---:|"]
    lines += [f"| {name} | {100 * n / total:.1f} % |" for name, n in by_group.most_common()]
    lines += ["", f"| the {top} functions most often running | share |", "|---|---:|"]
    lines += [f"| `{leaf}` | {100 * n / total:.1f} % |" for leaf, n in by_leaf.most_common(top)]
    return "\n".join(lines)


# What a shared object is, by its name (first match wins): the rows of the perf summary.
# perf names the kernel and its modules in brackets ([kernel.kallsyms], [nf_conntrack]).
PERF_KERNEL = "the OS kernel (socket copies, TCP, scheduling, system calls)"
PERF_GROUPS = (
    ("the interpreter (libpython: bytecode, objects, asyncio in Python)", ("libpython", "python3")),
    ("libc (memcpy, memset, malloc)", ("libc.so", "libc-")),
    ("lazyconv's compiled kernel (conversion, CRC)", ("_ckernel",)),
    # python-lz4's C modules are lz4/block/_block and lz4/frame/_frame; cramjam holds the lz4
    # compressor and snappy
    ("compression libraries", ("lz4", "cramjam", "_block.", "_frame.", "snappy", "zstd", "libz",
                               "zlib")),
    ("TLS (libssl, libcrypto)", ("libssl", "libcrypto", "_ssl")),
)


def perf_group(dso: str) -> str:
    if dso.startswith("[") and dso not in ("[unknown]", "[vdso]"):
        return PERF_KERNEL
    for name, marks in PERF_GROUPS:
        if any(mark in dso for mark in marks):
            return name
    return "other extension modules"


def _perf_rows(perf: str, data: Path, sort: str) -> list[tuple[float, list[str]]]:
    """``perf report``'s lines for ``sort``: (share %, the columns after it)."""
    done = subprocess.run([perf, "report", "-i", str(data), "--stdio", "--no-children", "-g", "none",
                           "--sort", sort], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"perf report failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    rows = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.lstrip().startswith("#") and parts[0].endswith("%"):
            try:
                rows.append((float(parts[0][:-1]), parts[1:]))
            except ValueError:
                continue
    return rows


def summarize_perf(perf: str, data: Path, cpu: tuple[float, float], seconds: float,
                   top: int = 20) -> str:
    """The share of ``perf record``'s samples per kind of library and per symbol, and the
    gateway's (user, system) CPU seconds ``cpu`` over the ``seconds`` sampled."""
    by_dso = _perf_rows(perf, data, "dso")
    if not by_dso:
        return "no samples (may perf read the gateway? see kernel.perf_event_paranoid)"
    groups: collections.Counter[str] = collections.Counter()
    for share, cols in by_dso:
        groups[perf_group(" ".join(cols))] += share
    user, system = cpu
    lines = [f"the gateway used {user:.2f} s of user and {system:.2f} s of system CPU in the "
             f"{seconds:.1f} s sampled ({(user + system) / seconds:.2f} cores)", "",
             "| where the samples were | share |", "|---|---:|"]
    lines += [f"| {name} | {share:.1f} % |" for name, share in groups.most_common()]
    lines += ["", f"| the {top} symbols most often running | where | share |", "|---|---|---:|"]
    for share, cols in _perf_rows(perf, data, "dso,sym")[:top]:
        dso, symbol = cols[0], " ".join(c for c in cols[1:] if c not in ("[.]", "[k]"))
        lines.append(f"| `{symbol}` | {dso} | {share:.1f} % |")
    return "\n".join(lines)


def profile_codec(broker: KafkaBroker, codec: str, count: int, args: argparse.Namespace,
                  workdir: Path, py_spy: str,
                  secured: Secured) -> tuple[Path, tuple[float, float], float]:
    """Samples the gateway while the consumers read ``codec``'s topic: where the samples went,
    the gateway's (user, system) CPU seconds meanwhile, and the seconds that took."""
    out = args.out / f"gateway-{codec}.collapsed"
    gateway = Gateway(broker.bootstrap, workdir / f"gateway-profile-{codec}.log",
                      ["--chunk-size", str(args.chunk_size), *args.gateway_arg],
                      configs=secured.gateway_configs)
    try:
        processes = {"broker": psutil.Process(broker.pid), "gateway": gateway.process}
        concurrent_reads(gateway.port, topic_name(codec), args.fetch_version, MIB, count,
                         args.consumers, processes, "bench-profile-warm-up")
        if args.sampler == "perf":
            out = args.out / f"gateway-{codec}.perf.data"
            # one event (a hybrid CPU's default is one per core type: two tables)
            command = [args.perf, "record", "-e", "cpu-clock", "-F", str(args.rate),
                       "-p", str(gateway.process.pid), "-o", str(out), "--", "sleep", str(args.seconds)]
        else:
            command = [py_spy, "record", "--pid", str(gateway.process.pid), "--subprocesses",
                       "--rate", str(args.rate), "--duration", str(args.seconds), "--format", "raw",
                       "--output", str(out)]
        before = gateway.process.cpu_times()
        started = time.monotonic()
        sampler = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        reads = 0
        stop = threading.Event()

        def keep_reading() -> None:
            nonlocal reads
            while not stop.is_set():
                concurrent_reads(gateway.port, topic_name(codec), args.fetch_version, MIB, count,
                                 args.consumers, processes, "bench-profile")
                reads += 1

        reader = threading.Thread(target=keep_reading, daemon=True)
        reader.start()
        output, _ = sampler.communicate(timeout=args.seconds + 120)
        after = gateway.process.cpu_times()
        wall = time.monotonic() - started  # the sampler's start and end included, as in the CPU
        stop.set()
        reader.join(600)
        if sampler.returncode != 0:
            raise RuntimeError(f"{args.sampler} failed ({sampler.returncode}): {output.strip()[-500:]}")
        print(f"{codec}: {reads} reads of {args.consumers} consumers while sampling", flush=True)
        return out, (after.user - before.user, after.system - before.system), wall
    finally:
        gateway.stop()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/gateway_profile.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--kafka-dist", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST"),
                   help="a Kafka 4.x distribution folder (default $LAZYCONV_KAFKA_DIST)")
    p.add_argument("--size", type=parse_size, default=128 * MIB, help="values per topic (default 128M)")
    p.add_argument("--codecs", default="none,lz4", help="comma-separated, of lz4, gzip, snappy, none")
    p.add_argument("--consumers", type=int, default=8, help="concurrent old consumers (default 8)")
    p.add_argument("--fetch-version", type=int, choices=(0, OLD_VERSION, NEW_VERSION), default=OLD_VERSION,
                   help=f"the consumers' Fetch version: {OLD_VERSION} (magic 1, down-converted; "
                        f"the default), 0 (magic 0, down-converted) or {NEW_VERSION} (magic 2, relayed)")
    p.add_argument("--seconds", type=int, default=30, help="how long the sampler samples (default 30)")
    p.add_argument("--rate", type=int, default=200, help="samples per second (default 200)")
    p.add_argument("--sampler", choices=("py-spy", "perf"), default="py-spy",
                   help="py-spy (default: Python functions) or perf (libraries and symbols, the "
                        "OS kernel's share included)")
    p.add_argument("--perf", default=shutil.which("perf") or "perf",
                   help="the perf executable, for --sampler perf")
    p.add_argument("--chunk-size", type=parse_size, default=1 << 20,
                   help="the gateway's --chunk-size (default 1M, its own default, as gateway_vs_kafka)")
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="one more argument for lazyconv gateway (repeatable), e.g. "
                        "--gateway-arg=--metrics-port=0 to see what the metrics cost")
    p.add_argument("--py-spy", default=shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy")),
                   help="the py-spy executable (pip install py-spy)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results",
                   help="where the collapsed stacks go (default bench/results)")
    p.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                   help="plaintext (default), or sasl_ssl: TLS and SCRAM-SHA-512 between the "
                        "consumers and the gateway and between the gateway and Kafka")
    p.add_argument("--workdir", type=Path, default=None,
                   help="the broker's data (kept; gateway_vs_kafka's --workdir reuses the same topics)")
    args = p.parse_args(argv)
    if args.kafka_dist is None:
        p.error("a Kafka 4.x distribution is needed: --kafka-dist or LAZYCONV_KAFKA_DIST")
    if args.sampler == "py-spy" and not Path(args.py_spy).exists():
        p.error(f"py-spy not found at {args.py_spy}: pip install py-spy, or --py-spy PATH")
    if args.sampler == "perf":
        if shutil.which(args.perf) is None:
            p.error(f"perf not found ({args.perf}): install linux-tools (perf), or --perf PATH")
        paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
        level = int(paranoid.read_text()) if paranoid.exists() else 2
        if level > 1 and os.geteuid() != 0:  # perf would drop the kernel's samples silently
            p.error(f"kernel.perf_event_paranoid is {level}: perf would leave the OS kernel's "
                    "share out; run as root or sysctl kernel.perf_event_paranoid=1")
    args.codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if args.consumers < 1 or args.seconds < 1 or args.rate < 1:
        p.error("--consumers, --seconds and --rate must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    count = args.size // VALUE_SIZE
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gateway-profile-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    secured = Secured()
    if args.security == "sasl_ssl":
        broker, secured = secured_broker(args.kafka_dist, workdir / "kafka-4", "1G")
        assert secured.kafka is not None
        secured.gateway_configs = gateway_configs(secured.kafka, workdir / "gateway-config")
    else:
        broker = KafkaBroker(args.kafka_dist, workdir / "kafka-4")
    try:
        start(broker, args.codecs)
        fill(broker, count, args.codecs)
        grant_reads(secured, args.codecs)
        secured.use()
        for codec in args.codecs:
            collapsed, cpu, wall = profile_codec(broker, codec, count, args, workdir, args.py_spy, secured)
            what = (f"Fetch v{args.fetch_version} -> magic {legacy_magic(args.fetch_version)}"
                    if args.fetch_version < 4 else f"Fetch v{args.fetch_version}, relayed")
            print(f"\n## {codec}: {args.consumers} consumers ({what}), "
                  f"{args.seconds} s at {args.rate} samples/s ({collapsed})\n")
            print(summarize_perf(args.perf, collapsed, cpu, wall) if args.sampler == "perf"
                  else summarize(collapsed), flush=True)
    finally:
        for process in list(LIVE_PROCESSES):
            process.stop()
        broker.stop()
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
