"""Helpers shared by the benchmarks: input generation, timing, tables."""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_v2_batches(
    total_bytes: int,
    value_size: int,
    codec: str = "none",
    records_per_batch: int | None = None,
    seed: int = 7,
) -> bytes:
    """Concatenated magic-2 batches of about ``total_bytes`` of record values.

    Built with kafka-python's builder so the input is independent of the code under test.
    Values are semi-compressible (random words), keys are 8 bytes, timestamps increase.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    rng = random.Random(seed)
    words = [bytes(rng.choices(range(97, 123), k=rng.randint(2, 9))) for _ in range(512)]
    if records_per_batch is None:
        records_per_batch = max(1, 16384 // (value_size + 30))  # producer batch.size 16 KiB
    n_records = max(1, total_bytes // value_size)
    out = bytearray()
    offset = 0
    timestamp = 1_700_000_000_000
    while offset < n_records:
        builder = DefaultRecordBatchBuilder(2, CODEC_IDS[codec], False, -1, -1, -1, 1 << 30)
        count = min(records_per_batch, n_records - offset)
        for i in range(count):
            value = bytearray()
            while len(value) < value_size:
                value += rng.choice(words) + b" "
            builder.append(i, timestamp + i, b"key%05d" % ((offset + i) % 100000), bytes(value[:value_size]), [])
        batch = builder.build()
        # kafka-python writes base offset 0: patch in the real base offset (not covered by the CRC)
        batch[0:8] = offset.to_bytes(8, "big", signed=True)
        out += batch
        offset += count
        timestamp += count
    return bytes(out)


@dataclass
class Timing:
    seconds: float
    result: object


def best_of(fn: Callable[[], object], repeat: int = 3, min_time: float = 0.2) -> Timing:
    """Best wall time of ``repeat`` runs (each run loops until ``min_time`` has passed)."""
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        gc.collect()
        loops = 0
        start = time.perf_counter()
        while True:
            result = fn()
            loops += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / loops)
    return Timing(best, result)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table (readable in a terminal and pasteable into the docs)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def reset_peak_rss() -> int:
    """Reset this process's RSS high-water mark (Linux) and return the current RSS in bytes.

    Writing 5 to /proc/self/clear_refs resets VmHWM, so :func:`peak_rss_since_reset` measures
    only what happens after this call (not interpreter start-up or imports).
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not permitted: the peak then includes start-up
        pass
    return _status_kib("VmRSS") * 1024


def peak_rss_since_reset() -> int:
    """RSS high-water mark in bytes (VmHWM) since the last :func:`reset_peak_rss`."""
    return _status_kib("VmHWM") * 1024


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def machine_line() -> str:
    """One line describing where a benchmark ran."""
    return (
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


@dataclass(frozen=True)
class HostProbe:
    """How fast this (shared) machine is right now, on one core: ``copy_gib_s`` copying a
    buffer far larger than the caches (memory bandwidth, what a server's copies and other
    tenants compete for), ``python_ns`` per iteration of a small Python loop (what the
    interpreter gets). Same-run ratios cancel a uniformly slower host, not one that slows one
    server's kind of work more than the other's. A rough witness: on an otherwise idle machine
    the copy gave 8.7-9.8 GiB/s in three probes and 18.1-19.2 GiB/s seven minutes later."""

    copy_gib_s: float
    python_ns: float

    def line(self) -> str:
        return f"copy {self.copy_gib_s:.1f} GiB/s, Python loop {self.python_ns:.0f} ns/iteration"


def host_probes_line(probes: dict[str, HostProbe]) -> str | None:
    """The line a benchmark prints for its probes ``before`` and ``after`` the rounds (None
    without both)."""
    if "before" not in probes or "after" not in probes:
        return None
    return f"host before / after the rounds: {probes['before'].line()} / {probes['after'].line()}"


_PROBE_BUFFER = 64 * 1024 * 1024
_PROBE_COPIES = 8
_PROBE_LOOP = 1_000_000


def host_probe() -> HostProbe:
    """Measure :class:`HostProbe` (about 0.2 s; buffers faulted in before timing)."""
    source = bytearray(os.urandom(1024)) * (_PROBE_BUFFER // 1024)
    target = bytearray(_PROBE_BUFFER)
    target[:] = source  # fault the pages in: the probe times copies, not page faults
    best = float("inf")
    for _ in range(_PROBE_COPIES):
        started = time.perf_counter()
        target[:] = source
        best = min(best, time.perf_counter() - started)
    started = time.perf_counter()
    total = 0
    for i in range(_PROBE_LOOP):
        total += i & 7
    loop_s = time.perf_counter() - started
    return HostProbe(_PROBE_BUFFER / 2**30 / best, loop_s / _PROBE_LOOP * 1e9)


# -- server processes (``lazyconv serve`` has sender processes) ---------------------------


def process_tree(process: psutil.Process) -> list[psutil.Process]:
    """``process`` and its live descendants (``lazyconv serve --sender-processes``' senders)."""
    import psutil

    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return [process]


def cpu_seconds(process: psutil.Process | None) -> float:
    """CPU seconds (user + system) of one process."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system


def tree_cpu_seconds(process: psutil.Process | None) -> float:
    """CPU seconds of a server: its process and every live child process."""
    import psutil

    if process is None:
        return 0.0
    total = 0.0
    for member in process_tree(process):
        try:
            total += cpu_seconds(member)
        except psutil.Error:
            pass  # ended meanwhile
    return total


def tree_rss(process: psutil.Process) -> int:
    """Resident memory of a server: its process and every live child process."""
    return members_rss(process_tree(process))


def members_rss(members: list[psutil.Process]) -> int:
    """Resident memory of ``members`` together (those that ended meanwhile count 0)."""
    import psutil

    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total
