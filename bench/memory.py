"""KIP-283's memory experiment, scaled to this machine.

KIP-283 showed that eagerly down-converting one fetch of 250 partitions ran a 200 MB broker heap
out of memory while lazy conversion did not. Here one FetchResponse (Fetch v3, a magic-1
consumer) of 250 partitions × N MiB of stored magic-2 data (N = 1, 2, 4: the fetch grows 2×, 4×)
is built and streamed to a sink that discards the bytes, once with eager conversion (every
partition converted in full before sending) and once with lazy conversion (128 KiB chunks).

Each configuration runs in a fresh process and reports its peak traced Python memory
(tracemalloc: every buffer the conversion allocates) and its RSS high-water mark above the
baseline taken just before the fetch is built.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import (  # noqa: E402
    format_table,
    machine_line,
    make_v2_batches,
    peak_rss_since_reset,
    reset_peak_rss,
)

MIB = 1024 * 1024


class _DiscardSink:
    """A channel that accepts everything and keeps nothing."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data) -> int:
        self.bytes += len(data)
        return len(data)


def _one_fetch(path: str, partitions: int, mode: str, chunk_size: int, queue) -> None:
    from lazyconv._send import drain
    from lazyconv.conversion._down import down_convert
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.protocol import FetchResponse
    from lazyconv.records import FileRecords, MemoryRecords

    records = FileRecords.open(path)  # one descriptor shared by every partition (pread only)
    baseline_rss = reset_peak_rss()
    tracemalloc.start()
    start = time.perf_counter()
    partition_data = []
    for index in range(partitions):
        converted: MemoryRecords | LazyDownConvertedRecords
        if mode == "eager":
            converted = MemoryRecords(down_convert(records.batches(), 1, 0).records.buffer)
        else:
            converted = LazyDownConvertedRecords(records, 1, 0, chunk_size=chunk_size)
        partition_data.append({"partition_index": index, "records": converted})
    response = FetchResponse(3, {"responses": [{"topic": "t", "partitions": partition_data}]})
    sink = _DiscardSink()
    drain(response.to_send(correlation_id=1), sink)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_rss = peak_rss_since_reset() - baseline_rss
    records.close()
    queue.put({"traced_peak": peak, "rss_peak": max(0, peak_rss), "sent": sink.bytes,
               "seconds": seconds, "declared": 4 + response.size_in_bytes})


def measure(path: str, partitions: int, mode: str, chunk_size: int) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_one_fetch, args=(path, partitions, mode, chunk_size, queue))
    process.start()
    result = queue.get(timeout=1800)
    process.join(60)
    if result["sent"] != result["declared"]:
        raise AssertionError(f"{mode}: sent {result['sent']} bytes, declared {result['declared']}")
    return result


def run(partitions: int, partition_mibs: Sequence[float], chunk_size: int) -> list[dict]:
    from tqdm import tqdm

    results = []
    with tempfile.TemporaryDirectory(prefix="lazyconv-memory-") as tmp:
        combos = [(m, mode) for m in partition_mibs for mode in ("eager", "lazy")]
        for partition_mib, mode in tqdm(combos, desc="memory", disable=not sys.stderr.isatty()):
            path = Path(tmp) / f"p{partition_mib}.log"
            if not path.exists():
                path.write_bytes(make_v2_batches(int(partition_mib * MIB), 1024, "none"))
            stored = path.stat().st_size * partitions
            result = measure(str(path), partitions, mode, chunk_size)
            results.append({"partition_mib": partition_mib, "mode": mode, "fetch_mib": stored / MIB,
                            **result})
    return results


def table(results: list[dict]) -> str:
    base = {r["mode"]: r for r in results if r["partition_mib"] == results[0]["partition_mib"]}
    rows = []
    for r in results:
        growth = r["traced_peak"] / base[r["mode"]]["traced_peak"]
        rows.append([r["mode"], f"{r['partition_mib']:g} MiB", r["fetch_mib"],
                     r["traced_peak"] / MIB, f"{growth:.2f}×", r["rss_peak"] / MIB,
                     r["sent"] / MIB / r["seconds"]])
    return format_table(
        ["conversion", "per partition", "fetch MiB", "traced peak MiB", "peak vs 1×",
         "RSS peak MiB", "MiB/s (under tracemalloc)"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark with command-line ``argv``."""
    parser = argparse.ArgumentParser(
        prog="bench/memory.py",
        description="Peak memory of one 250-partition down-converted fetch, eager vs lazy, as it grows.",
    )
    parser.add_argument("--partitions", type=int, default=250, help="partitions in the fetch (default 250)")
    parser.add_argument("--partition-mib", default="1,2,4",
                        help="stored MiB per partition, one run each (default 1,2,4: the fetch grows 2×, 4×)")
    parser.add_argument("--chunk-size", type=int, default=128 * 1024, help="lazy chunk size (default 131072)")
    parser.add_argument("--quick", action="store_true", help="20 partitions × 0.25/0.5 MiB (smoke test)")
    args = parser.parse_args(argv)
    partitions = 20 if args.quick else args.partitions
    sizes = [0.25, 0.5] if args.quick else [float(s) for s in args.partition_mib.split(",")]
    results = run(partitions, sizes, args.chunk_size)
    print(f"Memory: one Fetch v3 response, {partitions} partitions, v2→v1, "
          f"lazy chunk {args.chunk_size // 1024} KiB ({machine_line()})")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
