"""snappy compression: the kernel's (``snappy.c``, snappy 1.1.10's bytes, Kafka's) against Rust's
``snap`` through cramjam (what lazyconv used before) and the pure-Python twin, same run.

Inputs: text of ``tests/lz4_parity.py`` (semi-compressible words) and 1 KiB JSON-like values,
in the sizes a down-converted wrapper's 32 KiB xerial blocks come in, and random bytes. CPU time
(``time.process_time``), best of ``--repeat`` rounds of ``--mib`` MiB each; MB/s of input.

    python bench/snappy_compress.py
    python bench/snappy_compress.py --mib 64 --repeat 5 --json snappy.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

SIZES = (200, 2000, 8192, 32768)


def _json_values(size: int, rng: random.Random) -> bytes:
    out = bytearray()
    while len(out) < size:
        value = json.dumps({"id": rng.randrange(10**9), "user": f"user{rng.randrange(10**5):05d}",
                            "tags": [rng.choice(["a", "kafka", "lazy", "conv"]) for _ in range(8)],
                            "payload": "".join(rng.choice("abcdefghij0123456789") for _ in range(700))})
        out += value.encode()[:1024].ljust(1024, b" ")
    return bytes(out[:size])


def _inputs() -> dict[str, bytes]:
    from lz4_parity import text

    rng = random.Random(3)
    found = {}
    for size in SIZES:
        found[f"text {size} B"] = text(size, b"bench%d" % size)
        found[f"json {size} B"] = _json_values(size, rng)
    found["random 32768 B"] = rng.randbytes(32768)
    return found


def _rate(compress: Callable[[bytes], bytes], data: bytes, mib: float, repeat: int) -> float:
    calls = max(1, int(mib * (1 << 20) // len(data)))
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(calls):
            compress(data)
        best = min(best, time.process_time() - start)
    return calls * len(data) / max(best, 1e-9) / 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/snappy_compress.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=16.0, help="MiB compressed per round and input (default 16)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, the best counts (default 3)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.mib <= 0 or args.repeat < 1:
        parser.error("--mib must be > 0 and --repeat >= 1")

    import cramjam

    from lazyconv.records import _impl, _snappy

    if _impl.NATIVE is None:
        parser.error("the compiled kernel is not in use: nothing to compare")
    twins: dict[str, Callable[[bytes], bytes]] = {
        "kernel": _impl.NATIVE.snappy_compress_raw,
        "cramjam (snap)": lambda data: bytes(cramjam.snappy.compress_raw(data)),
        "pure Python": _snappy.compress_raw_reference,
    }
    rows = []
    print("| input | " + " | ".join(f"{name} MB/s" for name in twins) + " | kernel / snap |")
    print("|---|" + "---:|" * (len(twins) + 1))
    for name, data in _inputs().items():
        rates = {twin: _rate(compress, data, args.mib / (64 if twin == "pure Python" else 1), args.repeat)
                 for twin, compress in twins.items()}
        rows.append({"input": name, **rates})
        print(f"| {name} | " + " | ".join(f"{rate:,.1f}" for rate in rates.values())
              + f" | {rates['kernel'] / rates['cramjam (snap)']:.2f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
