"""The lazy send from a log file into a discarding sink, against aiokafka's eager conversion.

Per case (value size, target magic): v2 batches of about 16 KiB (1 KiB or 100 B values, built
by kafka-python as in ``bench/peers.py``) are written to a file; lazyconv opens it with
``FileRecords.open``, wraps it in ``LazyDownConvertedRecords(records, to_magic, 0, 128 KiB)``
and drives ``to_send().write_to(sink)`` until complete, the sink discarding every byte (so the
figure is the sender's conversion + chunking cost, reads from the page cache included).
aiokafka reads the same file's bytes and converts them eagerly with its compiled
``MemoryRecords`` + ``LegacyRecordBatchBuilder`` (what ``bench/peers.py`` times), its output
likewise dropped. CPU time, best of ``--repeat`` interleaved rounds; × = aiokafka time / lazyconv time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import format_table, machine_line, make_v2_batches  # noqa: E402


class DiscardingSink:
    """A channel that accepts and drops everything (``write`` returns the length)."""

    def write(self, data: memoryview | bytes) -> int:
        return len(data)


def lazy_send(path: Path, to_magic: int, chunk_size: int) -> int:
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.records import FileRecords

    with FileRecords.open(path) as records:
        send = LazyDownConvertedRecords(records, to_magic, 0, chunk_size).to_send()
        sink = DiscardingSink()
        while not send.completed:
            send.write_to(sink)
        return send.size


def aiokafka_eager(path: Path, to_magic: int) -> int:
    from bench.peers import aiokafka_converter

    convert, _ = aiokafka_converter()
    return len(convert(path.read_bytes(), to_magic))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--value-sizes``, ``--to-magic``, ``--input-mib``, ``--chunk-size``, ``--repeat``."""
    parser = argparse.ArgumentParser(prog="bench/lazy_sink.py", description=__doc__.splitlines()[0])
    parser.add_argument("--value-sizes", default="1024,100",
                        help="comma-separated value sizes in bytes (default 1024,100)")
    parser.add_argument("--to-magic", default="1,0", help="target magics (default 1,0)")
    parser.add_argument("--input-mib", type=float, default=8.0,
                        help="MiB of values written to the log file per case (default 8)")
    parser.add_argument("--chunk-size", type=int, default=128 * 1024,
                        help="bytes converted per step of the lazy send (default 131072)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best is kept (default 5)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for value_size in (int(v) for v in args.value_sizes.split(",")):
            path = Path(tmp) / f"{value_size}.log"
            path.write_bytes(make_v2_batches(int(args.input_mib * 1024 * 1024), value_size))
            size = path.stat().st_size
            for to_magic in (int(t) for t in args.to_magic.split(",")):
                best = {"lazyconv": float("inf"), "aiokafka": float("inf")}
                for _ in range(args.repeat):
                    for name in ("lazyconv", "aiokafka"):
                        start = time.process_time()
                        if name == "lazyconv":
                            lazy_send(path, to_magic, args.chunk_size)
                        else:
                            aiokafka_eager(path, to_magic)
                        best[name] = min(best[name], time.process_time() - start)
                rows.append([f"{value_size} B", f"v{to_magic}", f"{size / best['lazyconv'] / 1e6:,.0f}",
                             f"{size / best['aiokafka'] / 1e6:,.0f}", f"{best['aiokafka'] / best['lazyconv']:.2f}"])
    print(f"Lazy send from a file into a discarding sink ({machine_line()}, cpu time, best of {args.repeat}; "
          f"chunk {args.chunk_size} B)")
    print(format_table(["value", "to", "lazyconv lazy send MB/s", "aiokafka eager MB/s", "×"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
