"""What reading and converting a fetch response costs a ``lazyconv serve`` sender, by the path
that reads the segment: a chunk's window at once against batch by batch.

A segment of uncompressed v2 batches (``--batch-kib`` each, ``--value-size`` values, built by
kafka-python as in ``bench/peers.py``) is cut into responses of ``--response-kib`` (whole
batches, as a Fetch with that partition_max_bytes gets them). Each response is opened as serve
opens it (``CachedFileRecords`` over a shared ``SegmentFileCache``), rebuilt as a sender
rebuilds it (``LazyDownConvertedRecords.from_state`` with the committed state the serving
process found, untimed: it converts the first batch again) and written to a discarding sink.
Both paths are first checked to send the same bytes. Paths:

- ``chunk``: what serve does: one read of a chunk's window and one kernel call per chunk;
- ``batch``: what serve did before the chunk path was fixed (``ef04c48``): a header read, a
  body read and a conversion per batch (the same records, their ``batches()`` a plain batch
  generator, which the lazy send cannot read ahead).

CPU time per GiB of input, best of ``--repeat`` rounds (the paths alternate which goes first);
× = batch / chunk. Socket writes are left out: they cost both paths the same
(``bench/serve_vs_kafka.py`` has them). Without the kernel (``LAZYCONV_NO_EXTENSIONS=1``) the
chunk path groups and converts each window's batches in Python.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import format_table, machine_line, make_v2_batches  # noqa: E402
from bench.lazy_sink import DiscardingSink  # noqa: E402
from lazyconv._send import drain  # noqa: E402
from lazyconv.conversion._lazy_records import CommittedState, LazyDownConvertedRecords  # noqa: E402
from lazyconv.records import FileRecords, RecordBatch, _impl  # noqa: E402
from lazyconv.records._entries import iter_batches  # noqa: E402
from lazyconv.serve._segment_files import CachedFileRecords, SegmentFileCache  # noqa: E402

GIB = 1 << 30


class DigestSink:
    """A channel that keeps a digest of everything written to it."""

    def __init__(self) -> None:
        self.digest = hashlib.blake2b()

    def write(self, data: memoryview | bytes) -> int:
        self.digest.update(data)
        return len(data)


class BatchByBatchRecords(CachedFileRecords):
    """Serve's segment records as they were read before the chunk path: batch by batch."""

    def batches(self) -> Iterator[RecordBatch]:
        self._check_open()
        return iter_batches(self._cached_source, self.start, self.end, self.max_decompressed_size)


PATHS: dict[str, type[CachedFileRecords]] = {"chunk": CachedFileRecords, "batch": BatchByBatchRecords}


def responses(path: Path, response_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, first offset) of each response: whole batches up to ``response_bytes``."""
    out: list[tuple[int, int, int]] = []
    with FileRecords.open(path) as records:
        start, first = 0, 0
        for batch in records.batches():
            end = batch.position + batch.size_in_bytes
            if end - start > response_bytes and batch.position > start:
                out.append((start, batch.position, first))
                start, first = batch.position, batch.base_offset
        out.append((start, records.size_in_bytes, first))
    return out


def committed(path: Path, cuts: list[tuple[int, int, int]], to_magic: int,
              chunk_size: int) -> list[CommittedState]:
    """What the serving process finds for each response (its size, where the send resumes)."""
    files = SegmentFileCache(4)
    try:
        states = []
        for start, end, first in cuts:
            records = CachedFileRecords(files, path, start, end)
            states.append(LazyDownConvertedRecords(records, to_magic, first, chunk_size).committed_state)
            records.close()
        return states
    finally:
        files.close()


def read_all(path: Path, cuts: list[tuple[int, int, int]], states: list[CommittedState],
             opener: type[CachedFileRecords], to_magic: int, chunk_size: int,
             sink: DiscardingSink | DigestSink) -> None:
    """Every response rebuilt as a sender does, read, converted and written to ``sink``."""
    files = SegmentFileCache(4)
    try:
        for (start, end, first), state in zip(cuts, states, strict=True):
            records = opener(files, path, start, end)
            try:
                drain(LazyDownConvertedRecords.from_state(records, to_magic, first, state, chunk_size).to_send(),
                      sink)
            finally:
                records.close()
    finally:
        files.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see ``--help``."""
    parser = argparse.ArgumentParser(prog="bench/serve_reads.py", description=__doc__.splitlines()[0])
    parser.add_argument("--input-mib", type=float, default=64.0,
                        help="MiB of record values in the segment (default 64)")
    parser.add_argument("--value-size", type=int, default=1024,
                        help="bytes per record value (default 1024)")
    parser.add_argument("--batch-kib", type=int, default=64,
                        help="size of each stored batch in KiB, as a producer's batch.size (default 64)")
    parser.add_argument("--response-kib", type=int, default=1024,
                        help="input bytes per response in KiB, a Fetch's partition_max_bytes (default 1024)")
    parser.add_argument("--chunk-size", type=int, default=128 * 1024,
                        help="bytes converted per step of the lazy send (default 131072, serve's)")
    parser.add_argument("--to-magic", type=int, default=1, choices=(0, 1),
                        help="target magic: 1 for Fetch v2-3, 0 for v0-1 (default 1)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best is kept (default 5)")
    args = parser.parse_args(argv)
    per_batch = max(1, args.batch_kib * 1024 // (args.value_size + 30))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.log"
        path.write_bytes(make_v2_batches(int(args.input_mib * 1024 * 1024), args.value_size,
                                         records_per_batch=per_batch))
        size = path.stat().st_size
        cuts = responses(path, args.response_kib * 1024)
        states = committed(path, cuts, args.to_magic, args.chunk_size)
        digests = {}
        for name, opener in PATHS.items():
            check = DigestSink()
            read_all(path, cuts, states, opener, args.to_magic, args.chunk_size, check)
            digests[name] = check.digest.hexdigest()
        if len(set(digests.values())) != 1:
            raise SystemExit(f"bench/serve_reads.py: the paths sent different bytes: {digests}")
        best = {name: float("inf") for name in PATHS}
        for round_ in range(args.repeat):
            for name in sorted(PATHS, reverse=bool(round_ % 2)):
                started = time.process_time()
                read_all(path, cuts, states, PATHS[name], args.to_magic, args.chunk_size, DiscardingSink())
                best[name] = min(best[name], time.process_time() - started)
    rows = [[name, f"{best[name] / (size / GIB):.3f}", f"{size / best[name] / 1e6:,.0f}"] for name in PATHS]
    rows.append(["×", f"{best['batch'] / best['chunk']:.2f}", ""])
    print(f"A serve sender's reads and conversions ({machine_line()}, {_impl.IMPLEMENTATION}, cpu time, "
          f"best of {args.repeat}): "
          f"{size / 2**20:.0f} MiB segment, {per_batch} records of {args.value_size} B per batch, "
          f"{len(cuts)} responses of {args.response_kib} KiB, chunk {args.chunk_size} B, to magic {args.to_magic}")
    print(format_table(["path", "CPU s/GiB", "MB/s"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
