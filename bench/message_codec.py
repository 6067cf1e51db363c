"""Protocol message codecs: the code generated per struct and version against the schema walker.

The messages a server handles most: a Fetch request of one partition (what an old consumer
sends, decoded by ``lazyconv serve``) and the FetchResponse that answers it (encoded with its
records left as a slot, as serve does), at the versions old and new consumers use; and a
Metadata request and response. Each is run by
:func:`lazyconv.protocol._message_codec.decode_message` / ``encode_message`` (the generated
codec) and by the walker alone (``lazyconv.protocol._schema.walk_decode`` / ``walk_encode``),
on the same message. CPU time per message, best of ``--repeat`` interleaved rounds.

    python bench/message_codec.py
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import format_table, machine_line  # noqa: E402

FETCH_REQUEST = {
    "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
    "topics": [{"topic": "bench-none", "partitions": [
        {"partition": 0, "fetch_offset": 123456, "partition_max_bytes": 1 << 20}]}],
}
FETCH_RESPONSE = {
    "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
    "responses": [{"topic": "bench-none", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 131072, "last_stable_offset": 131072,
         "log_start_offset": 0, "aborted_transactions": None, "records": b"r" * 1000}]}],
}


def _cases() -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    from lazyconv.protocol import API_BY_KEY
    from lazyconv.protocol._message_codec import decode_message, encode_message
    from lazyconv.protocol._primitives import Reader
    from lazyconv.protocol._schema import walk_decode, walk_encode

    cases = []
    messages = [(1, "Fetch", 2, FETCH_REQUEST, FETCH_RESPONSE), (1, "Fetch", 12, FETCH_REQUEST, FETCH_RESPONSE),
                (3, "Metadata", 1, {"topics": [{"name": "bench-none"}]},
                 {"brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092}],
                  "topics": [{"name": "bench-none", "partitions": [
                      {"partition_index": 0, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}]}]})]
    for key, name, version, request, response in messages:
        spec = API_BY_KEY[key]
        flexible = spec.is_flexible(version)
        data = walk_encode(spec.request, request, version, flexible).to_bytes()

        def decode(s: Any = spec.request, d: bytes = data, v: int = version, f: bool = flexible,
                   fn: Any = decode_message) -> Any:
            return fn(s, Reader(d), v, f)

        def encode(s: Any = spec.response, b: Any = response, v: int = version, f: bool = flexible,
                   fn: Any = encode_message) -> Any:
            return fn(s, b, v, f)

        cases.append((f"{name} v{version} request, decode", decode,
                      lambda decode=decode: decode(fn=walk_decode)))
        cases.append((f"{name} v{version} response, encode", encode,
                      lambda encode=encode: encode(fn=walk_encode)))
    return cases


def _plain(result: Any) -> Any:
    """A decoded dict as it is; an encoded message as its bytes and (records, size) slots."""
    if isinstance(result, dict):
        return result
    return result.size, [(id(p.records), p.size) if hasattr(p, "records") else p for p in result.parts]


def _best(fn: Callable[[], Any], count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        fn()
    return (time.process_time() - started) / count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/message_codec.py",
        description="Protocol message codecs: generated per struct and version against the "
                    "schema walker, CPU microseconds per message.")
    parser.add_argument("--messages", type=int, default=20000,
                        help="messages per round and codec (default 20000)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved rounds; the best counts (default 5)")
    parser.add_argument("--check", action="store_true",
                        help="also check that both give the same result on every case first")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repeat < 1:
        parser.error("--messages and --repeat must be at least 1")
    rows = []
    for label, generated, walker in _cases():
        if args.check:
            if _plain(generated()) != _plain(walker()):
                print(f"error: {label}: the generated codec and the walker differ", file=sys.stderr)
                return 1
        fast = slow = float("inf")
        for _ in range(args.repeat):
            fast = min(fast, _best(generated, args.messages))
            slow = min(slow, _best(walker, args.messages))
        rows.append((label, f"{slow * 1e6:.1f}", f"{fast * 1e6:.1f}", f"{slow / fast:.1f}x"))
    print(f"# message codecs, CPU us per message, best of {args.repeat} rounds of {args.messages}")
    print(f"# {machine_line()}")
    print(format_table(["message", "walker us", "generated us", "speed-up"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
