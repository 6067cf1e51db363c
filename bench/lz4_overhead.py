"""Where the time goes converting lz4 batches: inside the lz4 library vs everything else.

Converts the same lz4-compressed magic-2 input (1 KiB values by default) to magic 1 with the
compiled kernel and with the pure-Python path (each in its own process, selected with
``LAZYCONV_NO_EXTENSIONS``), timing every call into the lz4 libraries separately (``lz4.block``
and cramjam's lz4 block functions, which write lz4-java's blocks). The "outside lz4"
column (total minus lz4 library time) is what lazyconv's own code costs: record parsing,
legacy message encoding, CRCs, framing, Python overhead. CPU time, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _measure(value_size: int, input_mib: float, repeat: int) -> dict[str, float]:
    import cramjam
    import lz4.block

    from bench.bench_common import make_v2_batches
    from lazyconv.conversion._down import down_convert
    from lazyconv.records import MemoryRecords
    from lazyconv.records._impl import IMPLEMENTATION

    data = make_v2_batches(int(input_mib * 1024 * 1024), value_size, "lz4")
    spent = [0.0]
    real_compress, real_decompress = lz4.block.compress, lz4.block.decompress
    real_block, real_block_into = cramjam.lz4.compress_block, cramjam.lz4.compress_block_into

    def timed(fn):
        def call(*args, **kwargs):
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - start
        return call

    lz4.block.compress, lz4.block.decompress = timed(real_compress), timed(real_decompress)
    cramjam.lz4.compress_block = timed(real_block)
    cramjam.lz4.compress_block_into = timed(real_block_into)
    best: dict[str, float] = {}
    try:
        for _ in range(repeat):
            spent[0] = 0.0
            start = time.process_time()
            down_convert(MemoryRecords(data).batches(), 1, 0)
            total = time.process_time() - start
            if not best or total < best["total_s"]:
                best = {"total_s": total, "lz4_s": spent[0]}
    finally:
        lz4.block.compress, lz4.block.decompress = real_compress, real_decompress
        cramjam.lz4.compress_block, cramjam.lz4.compress_block_into = real_block, real_block_into
    best["outside_s"] = best["total_s"] - best["lz4_s"]
    best["input_mb"] = len(data) / 1e6
    best["implementation"] = IMPLEMENTATION  # type: ignore[assignment]
    return best


def main(argv: Sequence[str] | None = None) -> int:
    """Print a before/after table (pure Python vs compiled kernel) for lz4 conversion."""
    parser = argparse.ArgumentParser(prog="bench/lz4_overhead.py", description=__doc__.splitlines()[0])
    parser.add_argument("--value-size", type=int, default=1024, help="value size in bytes (default 1024)")
    parser.add_argument("--input-mib", type=float, default=4.0,
                        help="MiB of values in lz4 batches (default 4)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best is kept (default 5)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.value_size, args.input_mib, args.repeat)))
        return 0
    rows = []
    for no_ext in ("1", "0"):
        env = {**os.environ, "LAZYCONV_NO_EXTENSIONS": no_ext}
        cmd = [sys.executable, __file__, "--child",
               "--value-size", str(args.value_size), "--input-mib", str(args.input_mib), "--repeat", str(args.repeat)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(f"lz4 {args.value_size} B values -> v1, {rows[0]['input_mb']:.1f} MB input, CPU seconds (best of {args.repeat})")
    print("| implementation | total | inside lz4 | outside lz4 |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['implementation']} | {row['total_s']:.4f} | {row['lz4_s']:.4f} | {row['outside_s']:.4f} |")
    print(f"outside-lz4 time cut: {rows[0]['outside_s'] / rows[1]['outside_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
