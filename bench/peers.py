"""Down-conversion throughput: lazyconv against kafka-python's and aiokafka's codecs.

The same magic-2 input (1 KiB and 100 B values; none, gzip, lz4, snappy) is converted to magic 1
and magic 0 by each implementation in the same run:

- lazyconv: ``down_convert(MemoryRecords(data).batches(), to_magic, 0)``;
- kafka-python: ``kafka.record.MemoryRecords`` to read, ``LegacyRecordBatchBuilder`` to write
  (one builder per input batch, which is what Kafka's RecordsUtil does);
- aiokafka: the same with ``aiokafka.record`` (its compiled ``_crecords`` when importable).

Every implementation's output is decoded with kafka-python and checked to hold the same
(offset, key, value) records before any timing is reported. Figures are MB/s of input
(stored, possibly compressed bytes) and records/s; the ratio columns are lazyconv's throughput
divided by the peer's.

Timing: each implementation's result is taken as it produces it (lazyconv's joined bytes, the
peers' output bytearray; nobody's result is copied again inside the timed call). Rounds are
interleaved (every implementation is timed in each round, best round kept) and the clock is the
process CPU time by default, so that other processes on a shared machine do not decide the
ratios; ``--clock wall`` uses elapsed time instead.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import (  # noqa: E402
    CODEC_IDS,
    format_table,
    machine_line,
    make_v2_batches,
)

log = logging.getLogger(__name__)

Converter = Callable[[bytes, int], "bytes | bytearray | memoryview"]


def lazyconv_converter() -> Converter:
    from lazyconv.conversion._down import down_convert
    from lazyconv.records import MemoryRecords

    def convert(data: bytes, to_magic: int) -> bytes | memoryview:
        converted = down_convert(MemoryRecords(data).batches(), to_magic, 0)
        return converted.records.buffer  # the converted bytes as produced, not copied again

    return convert


def _peer_converter(memory_records_cls, builder_cls) -> Converter:
    def convert(data: bytes, to_magic: int) -> bytearray:
        out = bytearray()
        records = memory_records_cls(data)
        while records.has_next():
            batch = records.next_batch()
            builder = builder_cls(to_magic, batch.compression_type, 1 << 30)
            for record in batch:
                builder.append(record.offset, record.timestamp, record.key, record.value)
            out += builder.build()
        return out  # as produced: no extra copy to bytes (lazyconv's result is not copied either)

    return convert


def kafka_python_converter() -> Converter:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

    return _peer_converter(MemoryRecords, LegacyRecordBatchBuilder)


def aiokafka_converter() -> tuple[Converter, str]:
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
    from aiokafka.record.memory_records import MemoryRecords

    flavour = "compiled" if "_crecords" in MemoryRecords.__module__ else "pure Python"
    return _peer_converter(MemoryRecords, LegacyRecordBatchBuilder), flavour


def decoded(data: bytes | bytearray | memoryview) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, as kafka-python reads them."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        for record in records.next_batch():
            out.append((record.offset, record.key, record.value))
    return out


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def interleaved_best(
    calls: dict[str, Callable[[], object]], repeat: int, clock: Callable[[], float], min_time: float = 0.2
) -> dict[str, float]:
    """Best seconds per call of each function over ``repeat`` rounds.

    Each round times every function in turn (looping until ``min_time`` has passed), so a load
    spike from other processes hits all implementations alike instead of one of them.
    """
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeat):
        for name, fn in calls.items():
            gc.collect()
            loops = 0
            start = clock()
            while True:
                fn()
                loops += 1
                elapsed = clock() - start
                if elapsed >= min_time:
                    break
            best[name] = min(best[name], elapsed / loops)
    return best


def run(
    value_sizes: Sequence[int],
    codecs: Sequence[str],
    targets: Sequence[int],
    input_bytes: int,
    repeat: int,
    clock: str = "cpu",
) -> list[dict]:
    """Measure every combination; returns one dict per (value size, codec, target)."""
    from tqdm import tqdm

    implementations: dict[str, Converter] = {
        "lazyconv": lazyconv_converter(),
        "kafka-python": kafka_python_converter(),
    }
    aiokafka, flavour = aiokafka_converter()
    implementations[f"aiokafka ({flavour})"] = aiokafka
    combos = [(v, c, t) for v in value_sizes for c in codecs for t in targets]
    results = []
    for value_size, codec, to_magic in tqdm(combos, desc="peers", disable=not sys.stderr.isatty()):
        data = make_v2_batches(input_bytes, value_size, codec)
        expected = decoded(data)
        row: dict = {"value_size": value_size, "codec": codec, "to_magic": to_magic,
                     "input_bytes": len(data), "records": len(expected)}
        calls: dict[str, Callable[[], object]] = {}
        for name, convert in implementations.items():
            try:
                output = convert(data, to_magic)
            except Exception as exc:  # a peer without this codec/magic (aiokafka: no v0 lz4)
                if name == "lazyconv":
                    raise
                log.warning("%s cannot convert %s to v%d: %s", name, codec, to_magic, exc)
                row[name] = None
                continue
            if decoded(output) != expected:
                raise AssertionError(f"{name} converted {codec}/{value_size} B to v{to_magic} wrongly")
            calls[name] = partial(convert, data, to_magic)
        row.update(interleaved_best(calls, repeat, CLOCKS[clock]))
        results.append(row)
    return results


def table(results: list[dict]) -> str:
    names = [k for k in results[0] if k not in
             {"value_size", "codec", "to_magic", "input_bytes", "records"}]
    peers = [n for n in names if n != "lazyconv"]
    headers = ["value", "codec", "to", *[f"{n} MB/s" for n in names], "lazyconv rec/s",
               *[f"× {n}" for n in peers]]
    rows = []
    for r in results:
        mbps = [r["input_bytes"] / r[n] / 1e6 if r[n] else "n/a" for n in names]
        ratios = [r[p] / r["lazyconv"] if r[p] else "n/a" for p in peers]
        rows.append([
            f"{r['value_size']} B", r["codec"], f"v{r['to_magic']}", *mbps,
            r["records"] / r["lazyconv"], *ratios,
        ])
    return format_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark with command-line ``argv``."""
    parser = argparse.ArgumentParser(
        prog="bench/peers.py",
        description="Down-conversion throughput of lazyconv vs kafka-python and aiokafka codecs.",
    )
    parser.add_argument("--value-sizes", default="1024,100",
                        help="comma-separated record value sizes in bytes (default 1024,100)")
    parser.add_argument("--codecs", default="none,gzip,lz4,snappy",
                        help="comma-separated input codecs (default none,gzip,lz4,snappy)")
    parser.add_argument("--to-magic", default="1,0", help="target magics (default 1,0)")
    parser.add_argument("--input-mib", type=float, default=2.0,
                        help="MiB of record values per case (default 2)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="timing rounds, best kept; each round times every implementation in "
                             "turn (default 5)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: process CPU time (robust on a shared machine; every implementation "
                             "is single-threaded); wall: elapsed time (default cpu)")
    parser.add_argument("--quick", action="store_true", help="tiny inputs, one repeat (smoke test)")
    args = parser.parse_args(argv)
    codecs = [c for c in args.codecs.split(",") if c]
    for codec in codecs:
        if codec not in CODEC_IDS or codec == "zstd":
            parser.error(f"unsupported codec {codec!r}: choose from none, gzip, snappy, lz4")
    input_bytes = int((0.05 if args.quick else args.input_mib) * 1024 * 1024)
    repeat = 1 if args.quick else args.repeat
    results = run(
        [int(v) for v in args.value_sizes.split(",")],
        codecs,
        [int(t) for t in args.to_magic.split(",")],
        input_bytes,
        repeat,
        args.clock,
    )
    print(f"Down-conversion throughput ({machine_line()}, {args.clock} time, best of {repeat} "
          "interleaved rounds); × = lazyconv speed-up over the peer")
    print(table(results))
    print("n/a: the peer refuses this combination (aiokafka cannot write lz4 for magic 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
