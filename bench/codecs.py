"""Record codec throughput: lazyconv against kafka-python and aiokafka, same input, same run.

For each workload (magic v2 batches; 1 KiB and 100 B values; codecs none and lz4) every
implementation encodes the same records into batches and decodes the same bytes (the batches
lazyconv built), touching every record's offset, timestamp, key, value and headers. Before
timing, every implementation's decoded records are checked against the input, and every
implementation's encoded batches are checked by decoding them with lazyconv.

Throughput is payload bytes (keys + values) per second and records per second of this
process's CPU time (``--clock wall`` for elapsed time); the best of ``--repeats`` runs is
kept; "vs lazyconv" is the implementation's records/s divided by lazyconv's (above 1: faster
than lazyconv). Usage::

    python bench/codecs.py            # 20 000 records per workload, best of 5
    python bench/codecs.py --quick    # 2 000 records, best of 2 (a smoke run)
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RecordTuple = tuple[int, bytes, bytes, list]  # timestamp, key, value, headers

_WORDS = [
    b"kafka", b"record", b"batch", b"offset", b"lazy", b"convert", b"fetch", b"topic",
    b"partition", b"leader", b"epoch", b"consumer", b"producer", b"{", b"}", b":", b'"id"',
]  # fmt: skip


def make_records(count: int, value_size: int, seed: int = 1) -> list[RecordTuple]:
    """Records with 16-byte keys and JSON-like values (compressible like real payloads)."""
    rng = random.Random(seed)
    records: list[RecordTuple] = []
    base_timestamp = 1_700_000_000_000
    for index in range(count):
        parts = []
        size = 0
        while size < value_size:
            word = rng.choice(_WORDS) if rng.random() < 0.7 else b"%d" % rng.getrandbits(24)
            parts.append(word)
            size += len(word) + 1
        value = b" ".join(parts)[:value_size]
        key = b"key-%012d" % rng.getrandbits(36)
        records.append((base_timestamp + index, key, value, []))
    return records


def chunks(records: Sequence[RecordTuple], per_batch: int) -> list[Sequence[RecordTuple]]:
    return [records[i : i + per_batch] for i in range(0, len(records), per_batch)]


# ---------------------------------------------------------------------------------------------
# Implementations: encode(records, codec, per_batch) -> bytes; decode(data) -> records seen


@dataclass
class Implementation:
    name: str
    detail: str
    encode: Callable[[Sequence[RecordTuple], int, int], bytes]
    decode: Callable[[bytes], list[tuple]]


def _lazyconv() -> Implementation:
    from lazyconv.records import MemoryRecords, RecordsBuilder

    def encode(records: Sequence[RecordTuple], codec: int, per_batch: int) -> bytes:
        out = []
        offset = 0
        for batch in chunks(records, per_batch):
            builder = RecordsBuilder(2, codec, base_offset=offset)
            for timestamp, key, value, headers in batch:
                builder.append(
                    offset=offset, timestamp=timestamp, key=key, value=value, headers=headers
                )
                offset += 1
            out.append(builder.build())
        return b"".join(out)

    def decode(data: bytes) -> list[tuple]:
        seen: list[tuple] = []
        append = seen.append
        for batch in MemoryRecords(data).batches():
            for record in batch:
                append((record.offset, record.timestamp, record.key, record.value, record.headers))
        return seen

    return Implementation("lazyconv", "pure Python (lazyconv.records)", encode, decode)


def _kafka_python() -> Implementation:
    import kafka
    from kafka.record import MemoryRecords, MemoryRecordsBuilder

    def encode(records: Sequence[RecordTuple], codec: int, per_batch: int) -> bytes:
        out = []
        offset = 0
        for batch in chunks(records, per_batch):
            builder = MemoryRecordsBuilder(2, codec, batch_size=1 << 30, offset=offset)
            for timestamp, key, value, headers in batch:
                builder.append(timestamp, key, value, headers)
            offset += len(batch)
            builder.close()
            out.append(bytes(builder.buffer()))
        return b"".join(out)

    return Implementation(
        "kafka-python",
        f"kafka-python {kafka.__version__}, pure Python",
        encode,
        partial(_decode_batches, MemoryRecords),
    )


def _aiokafka(compiled: bool) -> Implementation | None:
    import aiokafka
    from aiokafka.record import default_records, memory_records

    if compiled:
        builder_class = default_records.DefaultRecordBatchBuilder
        records_class = memory_records.MemoryRecords
        if "_crecords" not in builder_class.__module__:
            return None  # no compiled extension in this install (or AIOKAFKA_NO_EXTENSIONS)
        detail = f"aiokafka {aiokafka.__version__}, compiled {builder_class.__module__}"
        name = "aiokafka"
    else:
        # aiokafka's pure-Python twins; its _MemoryRecordsPy would hand out the compiled batch
        # class, so batches are split here and read with _DefaultRecordBatchPy
        builder_class = default_records._DefaultRecordBatchBuilderPy
        records_class = _PurePythonBatches(default_records._DefaultRecordBatchPy)
        detail = f"aiokafka {aiokafka.__version__}, pure-Python twin ({builder_class.__module__})"
        name = "aiokafka-py"

    def encode(records: Sequence[RecordTuple], codec: int, per_batch: int) -> bytes:
        out = []
        offset = 0
        for batch in chunks(records, per_batch):
            builder = builder_class(2, codec, 0, -1, -1, -1, 1 << 30)
            for index, (timestamp, key, value, headers) in enumerate(batch):
                builder.append(index, timestamp, key, value, headers)
            data = bytearray(builder.build())
            data[0:8] = offset.to_bytes(8, "big")  # a producer batch: the broker sets the base
            offset += len(batch)
            out.append(bytes(data))
        return b"".join(out)

    return Implementation(name, detail, encode, partial(_decode_batches, records_class))


def _decode_batches(records_class: Callable[[bytes], Any], data: bytes) -> list[tuple]:
    """Decode with a peer's ``MemoryRecords``-like class (``has_next`` / ``next_batch``)."""
    seen: list[tuple] = []
    append = seen.append
    records = records_class(data)
    while records.has_next():
        batch = records.next_batch()
        for record in batch:
            append(
                (record.offset, record.timestamp, record.key, record.value, tuple(record.headers))
            )
    return seen


class _PurePythonBatches:
    """``MemoryRecords``-like splitter (has_next / next_batch) yielding a given batch class."""

    def __init__(self, batch_class: type) -> None:
        self.batch_class = batch_class

    def __call__(self, data: bytes) -> _PurePythonBatches:
        self.view = memoryview(data)
        self.pos = 0
        return self

    def has_next(self) -> bool:
        return len(self.view) - self.pos >= 12

    def next_batch(self) -> object:
        size = int.from_bytes(self.view[self.pos + 8 : self.pos + 12], "big")
        batch = self.batch_class(self.view[self.pos : self.pos + 12 + size])
        self.pos += 12 + size
        return batch


def implementations() -> list[Implementation]:
    found = [_lazyconv(), _kafka_python()]
    compiled = _aiokafka(compiled=True)
    if compiled is not None:
        found.append(compiled)
    pure = _aiokafka(compiled=False)
    if pure is not None:
        found.append(pure)
    return found


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Result:
    operation: str
    codec: str
    value_size: int
    implementation: str
    seconds: float
    records: int
    payload_bytes: int

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def best_time(
    function: Callable[[], object], repeats: int, clock: Callable[[], float] = time.process_time
) -> float:
    """Best time of ``repeats`` runs on ``clock``, with the garbage collector paused (as timeit).

    The default clock is this process's CPU time: on a shared machine wall time mostly
    measures the other processes.
    """
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            started = clock()
            function()
            best = min(best, clock() - started)
    finally:
        if enabled:
            gc.enable()
    return best


def check_equivalence(
    impls: list[Implementation], records: list[RecordTuple], codec: int, per_batch: int
) -> bytes:
    """Raise if any implementation encodes or decodes differently; return the shared input."""
    expected = [(i, ts, key, value) for i, (ts, key, value, _) in enumerate(records)]
    shared = impls[0].encode(records, codec, per_batch)
    reference = impls[0].decode
    for impl in impls:
        decoded = [r[:4] for r in impl.decode(shared)]
        if decoded != expected:
            raise AssertionError(f"{impl.name} decodes lazyconv's batches differently")
        theirs = [r[:4] for r in reference(impl.encode(records, codec, per_batch))]
        if theirs != expected:
            raise AssertionError(f"lazyconv decodes {impl.name}'s batches differently")
    return shared


def run(
    impls: list[Implementation],
    count: int,
    repeats: int,
    per_batch_bytes: int,
    value_sizes: Sequence[int],
    codecs: Sequence[str],
    clock: Callable[[], float] = time.process_time,
) -> list[Result]:
    from lazyconv.records import Compression

    results: list[Result] = []
    for value_size in value_sizes:
        records = make_records(count, value_size)
        payload = sum(len(key) + len(value) for _, key, value, _ in records)
        per_batch = max(1, per_batch_bytes // (value_size + 16))
        for codec_name in codecs:
            codec = int(Compression[codec_name.upper()])
            shared = check_equivalence(impls, records, codec, per_batch)
            gc.collect()
            for operation in ("decode", "encode"):
                work = {
                    impl.name: partial(impl.decode, shared)
                    if operation == "decode"
                    else partial(impl.encode, records, codec, per_batch)
                    for impl in impls
                }
                # rounds interleave the implementations, so drift on a busy machine hits all alike
                best = dict.fromkeys(work, float("inf"))
                for _ in range(repeats):
                    for name, function in work.items():
                        best[name] = min(best[name], best_time(function, 1, clock))
                for name, seconds in best.items():
                    results.append(
                        Result(operation, codec_name, value_size, name, seconds, count, payload)
                    )
    return results


def format_table(results: list[Result]) -> str:
    baseline = {
        (r.operation, r.codec, r.value_size): r.records_per_s
        for r in results
        if r.implementation == "lazyconv"
    }
    rows = [
        "| operation | codec | value | implementation | MB/s | records/s | vs lazyconv |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in results:
        ratio = r.records_per_s / baseline[(r.operation, r.codec, r.value_size)]
        value = f"{r.value_size} B" if r.value_size < 1024 else f"{r.value_size // 1024} KiB"
        rows.append(
            f"| {r.operation} | {r.codec} | {value} | {r.implementation} | {r.mb_per_s:.1f} "
            f"| {r.records_per_s:,.0f} | {ratio:.2f}x |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark with command-line ``argv``."""
    parser = argparse.ArgumentParser(
        prog="bench/codecs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 000 records, best of 2")
    parser.add_argument("--records", type=int, default=None, help="records per workload (20 000)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="runs per measurement (best kept, 5)"
    )
    parser.add_argument(
        "--batch-bytes",
        type=int,
        default=16384,
        help="payload bytes per batch (16384, Kafka's batch.size)",
    )
    parser.add_argument(
        "--value-sizes", default="1024,100", help="comma-separated value sizes in bytes (1024,100)"
    )
    parser.add_argument("--codecs", default="none,lz4", help="comma-separated codecs (none,lz4)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="cpu",
        help="cpu: this process's CPU time (default; stable on a busy machine), wall: elapsed",
    )
    args = parser.parse_args(argv)
    count = args.records or (2_000 if args.quick else 20_000)
    repeats = args.repeats or (2 if args.quick else 5)
    value_sizes = [int(size) for size in args.value_sizes.split(",")]
    codecs = [name.strip() for name in args.codecs.split(",")]

    print(
        f"# record codecs, magic v2: {count} records per workload, best of {repeats}, "
        f"~{args.batch_bytes} payload bytes per batch, {args.clock} time"
    )
    print(f"# Python {platform.python_version()} on {platform.machine()}, {platform.system()}")
    impls = implementations()
    for impl in impls:
        print(f"# {impl.name}: {impl.detail}")
    print()
    results = run(impls, count, repeats, args.batch_bytes, value_sizes, codecs, CLOCKS[args.clock])
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
