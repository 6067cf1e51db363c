"""Benchmarks of the validation job (issue 13): run once, on a quiet machine if you can.

    python bench/validate.py scan   --size 512M   # per-segment functions, one process, no Spark
    python bench/validate.py job    --size 512M   # `lazyconv validate` end to end
    python bench/validate.py memory --size 1G     # peak RSS of a worker over one big segment

``scan`` runs :func:`lazyconv.spark.segment_check.check_segment` over every segment of a
``mixed`` fixture (``--segment-bytes 16M``, target magics 0 and 1) with one chunk size and then
with the seven default chunk sizes, and prints CPU seconds and MiB/s per core for each and
their ratio. ``job`` runs ``lazyconv validate --chunk-sizes 128K --to-magic 0,1`` on the same
fixture and prints its own MiB/s line. ``memory`` generates one partition with a single segment
of ``--size`` and scans it the way the job does (byte ranges planned for two cores, all in one
reused Python process), in a child process whose peak RSS is reported, and the whole segment as
one range for comparison. Fixtures are generated under ``--workdir`` once and reused. The
machine's load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lazyconv.fixtures.generate import generate, parse_size  # noqa: E402

MIB = 1024 * 1024
ONE_CHUNK = (128 * 1024,)
SEVEN_CHUNKS = tuple(k * 1024 for k in (16, 32, 64, 128, 256, 512, 1024))


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _fixture(workdir: Path, size: str, partitions: int, segment_bytes: str) -> Path:
    root = workdir / f"mixed-{size}-p{partitions}-s{segment_bytes}"
    if not (root / "manifest.json").exists():
        started = time.perf_counter()
        generate(root, parse_size(size), partitions=partitions, seed=13,
                 segment_bytes=parse_size(segment_bytes))
        print(f"generated {root} in {time.perf_counter() - started:.0f} s", flush=True)
    return root


def _scan_all(root: Path, chunk_sizes: tuple[int, ...]) -> tuple[float, float, int]:
    from lazyconv.fixtures import list_segments
    from lazyconv.spark.segment_check import check_segment
    from lazyconv.spark.segment_scan import ScanOptions

    options = ScanOptions((0, 1), chunk_sizes)
    segments = list_segments(str(root))
    cpu = time.process_time()
    wall = time.perf_counter()
    bad = 0
    for seg in segments:
        result = check_segment(seg, options)
        bad += len(result["violations"])
    return time.process_time() - cpu, time.perf_counter() - wall, bad


def scan(args: argparse.Namespace) -> None:
    root = _fixture(Path(args.workdir), args.size, 4, "16M")
    mib = sum(p.stat().st_size for p in root.glob("*/*.log")) / MIB
    one_cpu, one_wall, bad = _scan_all(root, ONE_CHUNK)
    print(f"scan, magics 0+1, chunk 128K: {mib:.0f} MiB in {one_cpu:.1f} CPU s "
          f"({mib / one_cpu:.2f} MiB/s per core; wall {one_wall:.1f} s), violations {bad}; "
          f"{_load()}", flush=True)
    seven_cpu, seven_wall, bad = _scan_all(root, SEVEN_CHUNKS)
    print(f"scan, magics 0+1, 7 chunk sizes: {seven_cpu:.1f} CPU s ({mib / seven_cpu:.2f} MiB/s "
          f"per core; wall {seven_wall:.1f} s), {seven_cpu / one_cpu:.2f}x one chunk size, "
          f"violations {bad}; {_load()}", flush=True)


def job(args: argparse.Namespace) -> None:
    root = _fixture(Path(args.workdir), args.size, 4, "16M")
    command = [str(Path(sys.executable).parent / "lazyconv"), "validate", str(root),
               "--chunk-sizes", "128K", "--to-magic", "0,1", "--out",
               str(Path(args.workdir) / "validate-out"), "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("validated")), "?")
    print(f"job: exit {done.returncode}; {line}; command wall {time.perf_counter() - started:.1f} s; "
          f"{_load()}", flush=True)
    print(" ".join(command[1:]), flush=True)


_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from lazyconv.fixtures import list_segments
from lazyconv.spark.planning import plan_ranges, range_target
from lazyconv.spark.segment_scan import ScanOptions, scan_range
from lazyconv.spark.segment_check import task_for
segs = list_segments(sys.argv[2])
whole = sys.argv[3] == "whole"
tasks = [task_for(s, True) for s in segs] if whole else plan_ranges(
    segs, range_target(sum(s.size for s in segs), 6))
cpu = time.process_time()
ok = all(c["ok"] for t in tasks for c in scan_range(t, ScanOptions((0, 1), (128 * 1024,)))["conversions"])
print(json.dumps({"ranges": len(tasks), "ok": ok, "cpu": time.process_time() - cpu,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def memory(args: argparse.Namespace) -> None:
    size = parse_size(args.size)
    root = Path(args.workdir) / f"one-segment-{args.size}"
    if not (root / "manifest.json").exists():
        started = time.perf_counter()
        generate(root, size, partitions=1, seed=13, profile="headers",
                 segment_bytes=size + 64 * MIB)
        print(f"generated {root} in {time.perf_counter() - started:.0f} s", flush=True)
    for mode in ("ranges", "whole"):
        done = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), str(root), mode],
                              capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-2000:])
            continue
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"memory, one {args.size} segment as {figures['ranges']} range(s) ({mode}): peak "
              f"RSS {figures['peak_rss_mib']:.0f} MiB, conversions ok {figures['ok']}, "
              f"{figures['cpu']:.0f} CPU s; {_load()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("scan", "job", "memory"))
    parser.add_argument("--size", default="512M")
    parser.add_argument("--workdir", default="/tmp/lazyconv-bench-validate")
    args = parser.parse_args()
    {"scan": scan, "job": job, "memory": memory}[args.what](args)


if __name__ == "__main__":
    main()
