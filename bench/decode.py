"""Record decoding throughput: lazyconv against aiokafka's compiled reader, in records/s.

The same magic-2 input (1 KiB and 100 B values, uncompressed v2 batches of about 16 KiB built
by kafka-python) is iterated by both, touching every record's key, value and headers:
lazyconv ``for record in MemoryRecords(data).records()``, aiokafka
``MemoryRecords(data).next_batch()`` loops. CPU time, best of ``--repeat`` interleaved rounds.
``--all-fields`` touches every record's offset and timestamp too (what a consumer that commits
offsets reads; aiokafka's records make those ints on access, lazyconv's ``Record`` tuples hold
them from the start).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import format_table, machine_line, make_v2_batches  # noqa: E402


def lazyconv_decode(data: bytes) -> int:
    from lazyconv.records import MemoryRecords

    count = 0
    for record in MemoryRecords(data).records():
        record.key, record.value, record.headers  # noqa: B018 - touch the fields
        count += 1
    return count


def lazyconv_decode_all_fields(data: bytes) -> int:
    from lazyconv.records import MemoryRecords

    count = 0
    for record in MemoryRecords(data).records():
        record.offset, record.timestamp, record.key, record.value, record.headers  # noqa: B018
        count += 1
    return count


def aiokafka_decode_all_fields(data: bytes) -> int:
    from aiokafka.record.memory_records import MemoryRecords

    count = 0
    records = MemoryRecords(data)
    while records.has_next():
        for record in records.next_batch():
            record.offset, record.timestamp, record.key, record.value, record.headers  # noqa: B018
            count += 1
    return count


def aiokafka_decode(data: bytes) -> int:
    from aiokafka.record.memory_records import MemoryRecords

    count = 0
    records = MemoryRecords(data)
    while records.has_next():
        for record in records.next_batch():
            record.key, record.value, record.headers  # noqa: B018
            count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--value-sizes``, ``--input-mib``, ``--repeat``."""
    parser = argparse.ArgumentParser(prog="bench/decode.py", description=__doc__.splitlines()[0])
    parser.add_argument("--value-sizes", default="1024,100",
                        help="comma-separated value sizes in bytes (default 1024,100)")
    parser.add_argument("--input-mib", type=float, default=8.0,
                        help="MiB of values decoded per case (default 8)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best is kept (default 5)")
    parser.add_argument("--all-fields", action="store_true",
                        help="touch offset and timestamp too (default: key, value, headers)")
    args = parser.parse_args(argv)
    runs = (("lazyconv", lazyconv_decode_all_fields), ("aiokafka", aiokafka_decode_all_fields)) if args.all_fields \
        else (("lazyconv", lazyconv_decode), ("aiokafka", aiokafka_decode))
    rows = []
    for value_size in (int(v) for v in args.value_sizes.split(",")):
        data = make_v2_batches(int(args.input_mib * 1024 * 1024), value_size)
        best = {"lazyconv": float("inf"), "aiokafka": float("inf")}
        records = 0
        for _ in range(args.repeat):
            for name, run in runs:
                start = time.process_time()
                records = run(data)
                best[name] = min(best[name], time.process_time() - start)
        rows.append([f"{value_size} B", f"{records / best['lazyconv']:,.0f}", f"{records / best['aiokafka']:,.0f}",
                     f"{best['aiokafka'] / best['lazyconv']:.2f}"])
    fields = "offset, timestamp, key, value, headers" if args.all_fields else "key, value, headers"
    print(f"Decoding records, touching {fields} ({machine_line()}, cpu time, best of {args.repeat})")
    print(format_table(["value", "lazyconv rec/s", "aiokafka (compiled) rec/s", "×"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
