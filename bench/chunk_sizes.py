"""Consumer throughput per chunk size: KIP-283's measurement, on this machine.

12 partitions of magic-2 records (1 KiB values, or 100 B with ``--value-size 100``) stored in log
files are fetched by an old consumer: the sender process builds a FetchResponse (Fetch v3 for a
magic-1 consumer, v1 for magic 0) whose partitions are lazily down-converted with each chunk
size (16 KiB … 1 MiB), or eagerly converted in full before sending ("eager", no chunking), and
streams it through a TCP socket on 127.0.0.1 to a consumer process that parses every record
(aiokafka's compiled record reader, so the consumer is not the bottleneck).

Each configuration runs in a fresh sender process, so its peak memory belongs to that
configuration alone: the RSS high-water mark above the RSS just before the fetch is built, and
the peak of traced Python allocations (tracemalloc) while the same fetch is sent again, untimed,
into a discarding sink (RSS hides buffers smaller than the memory the process already holds).
Throughput is measured from the moment the sender starts building the response until the
consumer has parsed the last record; MB/s counts the FetchResponse bytes the consumer received
and parsed. A lazily converted partition delivers a little less than an eager one when its
conversion outgrows the committed size (the cut of KIP-283: the consumer fetches the rest
next time), so records/s is the fairer figure across modes.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import socket
import struct
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

log = logging.getLogger(__name__)

CHUNK_SIZES = (16, 32, 64, 128, 256, 512, 1024)  # KiB
FETCH_VERSION_FOR_MAGIC = {1: 3, 0: 1}
PARTITIONS = 12


def _build_response(files, to_magic: int, chunk_kib: int | None):
    from lazyconv.conversion._down import down_convert
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.protocol import FetchResponse
    from lazyconv.records import MemoryRecords

    partitions = []
    for index, records in enumerate(files):
        converted: MemoryRecords | LazyDownConvertedRecords
        if chunk_kib is None:
            converted = MemoryRecords(down_convert(records.batches(), to_magic, 0).records.buffer)
        else:
            converted = LazyDownConvertedRecords(records, to_magic, 0, chunk_size=chunk_kib * 1024)
        partitions.append({"partition_index": index, "error_code": 0, "high_watermark": 0,
                           "records": converted})
    return FetchResponse(FETCH_VERSION_FOR_MAGIC[to_magic], {
        "throttle_time_ms": 0, "responses": [{"topic": "bench", "partitions": partitions}]})


class _DiscardSink:
    def write(self, data) -> int:
        return len(data)


def _sender(paths: list[str], to_magic: int, chunk_kib: int | None, port_queue, result_queue) -> None:
    from lazyconv._send import drain
    from lazyconv.records import FileRecords

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port_queue.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    files = [FileRecords.open(p) for p in paths]
    baseline_rss = reset_peak_rss()
    start = time.monotonic()
    drain(_build_response(files, to_magic, chunk_kib).to_send(correlation_id=1), conn)
    sent_at = time.monotonic()
    peak_rss = max(0, peak_rss_since_reset() - baseline_rss)
    conn.close()
    # RSS hides small buffers (freed memory is reused in place), so the same fetch is sent again,
    # untimed, into a discarding sink under tracemalloc: the exact peak of Python allocations.
    tracemalloc.start()
    drain(_build_response(files, to_magic, chunk_kib).to_send(correlation_id=2), _DiscardSink())
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    for records in files:
        records.close()
    result_queue.put({"start": start, "sent": sent_at, "peak_rss": peak_rss,
                      "traced_peak": traced_peak})


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError(f"connection closed after {got} of {size} bytes")
        got += n
    return buffer


def _parse_fetch_v1_v3(data: bytearray) -> list[bytes]:
    """Records fields of a Fetch v1–v3 response body (after the correlation id)."""
    pos = 4  # throttle time
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", data, pos)
        pos += 2 + name_len
        (partitions,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(partitions):
            pos += 4 + 2 + 8  # partition, error code, high watermark
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out.append(bytes(data[pos : pos + max(size, 0)]))
            pos += max(size, 0)
    return out


def _consumer(port: int, result_queue) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    body = _recv_exact(sock, size)
    records = 0
    value_bytes = 0
    for data in _parse_fetch_v1_v3(body[4:]):
        reader = MemoryRecords(data)
        while reader.has_next():
            batch = reader.next_batch()
            for record in batch:
                records += 1
                value_bytes += len(record.value or b"")
    done = time.monotonic()
    sock.close()
    result_queue.put({"done": done, "records": records, "value_bytes": value_bytes,
                      "response_bytes": 4 + size})


def measure(paths: list[str], to_magic: int, chunk_kib: int | None) -> dict:
    """One fetch of every partition in ``paths``: timing, records, sender peak memory."""
    ctx = mp.get_context("spawn")  # a fresh interpreter: peak RSS is this configuration's own
    port_queue, sender_results, consumer_results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    sender = ctx.Process(target=_sender, args=(paths, to_magic, chunk_kib, port_queue, sender_results))
    sender.start()
    port = port_queue.get(timeout=60)
    consumer = ctx.Process(target=_consumer, args=(port, consumer_results))
    consumer.start()
    sent = sender_results.get(timeout=600)
    received = consumer_results.get(timeout=600)
    sender.join(60)
    consumer.join(60)
    elapsed = received["done"] - sent["start"]
    return {**sent, **received, "seconds": elapsed}


def run(value_size: int, partition_mib: float, targets: Sequence[int], repeat: int,
        chunk_sizes: Sequence[int] = CHUNK_SIZES) -> list[dict]:
    from tqdm import tqdm

    with tempfile.TemporaryDirectory(prefix="lazyconv-bench-") as tmp:
        data = make_v2_batches(int(partition_mib * 1024 * 1024), value_size, "none")
        paths = []
        for index in range(PARTITIONS):
            path = Path(tmp) / f"bench-{index}.log"
            path.write_bytes(data)
            paths.append(str(path))
        input_bytes = len(data) * PARTITIONS
        modes: list[int | None] = [*chunk_sizes, None]
        combos = [(t, m) for t in targets for m in modes]
        results = []
        for to_magic, chunk_kib in tqdm(combos, desc="chunk sizes", disable=not sys.stderr.isatty()):
            runs = [measure(paths, to_magic, chunk_kib) for _ in range(repeat)]
            best = min(runs, key=lambda r: r["seconds"])
            results.append({
                "to_magic": to_magic,
                "mode": "eager" if chunk_kib is None else f"{chunk_kib}K",
                "chunk_kib": chunk_kib,
                "input_bytes": input_bytes,
                "records": best["records"],
                "response_bytes": best["response_bytes"],
                "seconds": best["seconds"],
                "mb_s": best["response_bytes"] / best["seconds"] / 1e6,
                "records_s": best["records"] / best["seconds"],
                "peak_rss_mib": max(r["peak_rss"] for r in runs) / 2**20,
                "traced_peak_mib": max(r["traced_peak"] for r in runs) / 2**20,
            })
        return results


def table(results: list[dict]) -> str:
    rows = [[f"v2→v{r['to_magic']}", r["mode"], r["mb_s"], r["records_s"], r["traced_peak_mib"],
             r["peak_rss_mib"], r["records"]] for r in results]
    return format_table(["conversion", "chunk", "MB/s", "records/s", "sender traced peak MiB",
                         "sender RSS peak MiB", "records"], rows)


def plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_speed, ax_mem) = plt.subplots(1, 2, figsize=(11, 4))
    for to_magic in sorted({r["to_magic"] for r in results}, reverse=True):
        rows = [r for r in results if r["to_magic"] == to_magic and r["chunk_kib"] is not None]
        eager = next(r for r in results if r["to_magic"] == to_magic and r["chunk_kib"] is None)
        xs = [r["chunk_kib"] for r in rows]
        line = ax_speed.plot(xs, [r["records_s"] for r in rows], marker="o", label=f"lazy v2→v{to_magic}")
        ax_speed.axhline(eager["records_s"], linestyle="--", color=line[0].get_color(),
                         label=f"eager v2→v{to_magic}")
        line = ax_mem.plot(xs, [r["traced_peak_mib"] for r in rows], marker="o", label=f"lazy v2→v{to_magic}")
        ax_mem.axhline(eager["traced_peak_mib"], linestyle="--", color=line[0].get_color(),
                       label=f"eager v2→v{to_magic}")
    for ax, label in ((ax_speed, "consumer throughput (records/s)"),
                      (ax_mem, "sender peak traced memory (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chunk size (KiB)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("lazyconv: FetchResponse down-conversion per chunk size (12 partitions)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark with command-line ``argv``."""
    default_plot = "bench/results/chunk_sizes.png"
    parser = argparse.ArgumentParser(
        prog="bench/chunk_sizes.py",
        description="Throughput and sender memory of a 12-partition down-converted fetch per chunk size.",
    )
    parser.add_argument("--value-size", type=int, default=1024, help="record value bytes (default 1024)")
    parser.add_argument("--partition-mib", type=float, default=8.0,
                        help="stored MiB per partition (default 8; 12 partitions)")
    parser.add_argument("--to-magic", default="1,0", help="target magics (default 1,0)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration, best kept (default 2)")
    parser.add_argument("--plot", default=default_plot,
                        help=f"PNG to write (default {default_plot}, folder created; '' for none)")
    parser.add_argument("--quick", action="store_true", help="small partitions, one run (smoke test)")
    args = parser.parse_args(argv)
    partition_mib = 0.25 if args.quick else args.partition_mib
    repeat = 1 if args.quick else args.repeat
    targets = [int(t) for t in args.to_magic.split(",")]
    results = run(args.value_size, partition_mib, targets, repeat)
    print(f"Chunk sizes: 12 partitions × {partition_mib} MiB of {args.value_size} B records "
          f"({machine_line()})")
    print(table(results))
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(results, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
