"""Run the lazy down-converting send over one segment the way a consumer drives it, and check it.

The reference implementation: the job derives the same figures from one conversion per batch
(:mod:`lazyconv.spark._derived_conversion`); tests hold the two equal for every chunk size.

For a target magic and each chunk size, :func:`check_conversions` plays an old consumer reading
the whole segment: fetch from offset ``o`` (a slice of at most ``fetch_max_bytes`` starting at
the batch holding ``o``, as the broker's offset index lookup gives it), build
``LazyDownConvertedRecords`` over that slice, drain its send into memory, check it wrote exactly its committed size, decode the
complete entries, keep records with offset >= ``o`` (a consumer drops the earlier records of a
compressed wrapper), and continue from the last complete batch's last offset + 1.

The records collected this way must be exactly the expected ones: every record of every
non-control batch, in offset order, with the timestamp the target magic carries (-1 for magic 0
and for v0 input, else the timestamp a reader of the input sees, LogAppendTime applied), key
and value. zstd batches cannot be converted below magic 2 (Kafka answers error 76): they are
expected to be missing and are counted.
"""

from __future__ import annotations

import bisect
import io
import logging
import time
from typing import Any

from lazyconv.errors import LazyconvError, UnsupportedCompressionError
from lazyconv.logdir._layout import SegmentFiles
from lazyconv.spark._reader import SegmentReader
from lazyconv.spark._violations import violation

__all__ = ["expected_records", "check_conversions"]

ZSTD = 4
DEFAULT_FETCH_MAX_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes default
_MAX_IDLE_WRITES = 3

Expected = tuple[int, int, bytes | None, bytes | None]


def _b(data: Any) -> bytes | None:
    return None if data is None else bytes(data)


def expected_records(batches: Any, to_magic: int) -> tuple[list[Expected], int]:
    """Records a consumer of ``to_magic`` must receive, and the number of zstd batches skipped."""
    expected: list[Expected] = []
    zstd_batches = 0
    for batch in batches:
        if batch.is_control:
            continue
        if to_magic < 2 and int(batch.compression) == ZSTD:
            zstd_batches += 1
            continue
        carries_ts = to_magic > 0 and batch.magic > 0
        for r in batch:
            expected.append((r.offset, r.timestamp if carries_ts else -1, _b(r.key), _b(r.value)))
    return expected, zstd_batches


def check_conversions(seg: SegmentFiles, to_magic: int, chunk_sizes: list[int],
                      fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES) -> list[dict[str, Any]]:
    """Consume ``seg`` through the lazy send once per chunk size (the expected records are
    decoded once); returns one ``{"stats": {...}, "violations": [...]}`` per chunk size.

    Each fetch reads ``fetch_max_bytes`` of the segment (Kafka's ``max.partition.fetch.bytes``,
    1 MiB by default), or the whole first batch when it is larger (KIP-74), so a slice usually
    ends inside a batch, as a broker's does."""
    from lazyconv.records import FileRecords, MemoryRecords

    # zstd batches stop a lazy send with a warning by design; here they are expected and counted
    lazy_log = logging.getLogger("lazyconv.conversion")
    level = lazy_log.level
    lazy_log.setLevel(logging.ERROR)
    try:
        return _check_all(seg, to_magic, chunk_sizes, fetch_max_bytes, FileRecords,
                          MemoryRecords)
    finally:
        lazy_log.setLevel(level)


def _check_all(seg: SegmentFiles, to_magic: int, chunk_sizes: list[int], fetch_max_bytes: int,
               file_records: Any, memory_records: Any) -> list[dict[str, Any]]:
    local = "://" not in seg.log_path
    if local:
        source: Any = file_records.open(seg.log_path)
    else:
        with SegmentReader(seg.log_path) as reader:
            source = memory_records(reader.read_all())
    try:
        try:
            positions: list[int] = []
            last_offsets: list[int] = []
            for batch in source.batches():
                positions.append(batch.position - getattr(source, "start", 0))
                last_offsets.append(batch.last_offset)
            expected, zstd_batches = expected_records(source.batches(), to_magic)
        except LazyconvError as exc:
            failure = violation(seg.topic, seg.partition, seg.name, "log",
                                getattr(exc, "position", None) or -1, "conversion",
                                f"to magic {to_magic}: input does not decode: {exc}")
            return [{"stats": _new_stats(seg, to_magic, c), "violations": [failure]}
                    for c in chunk_sizes]
        return [_consume(seg, source, to_magic, chunk, fetch_max_bytes, positions,
                         last_offsets, expected, zstd_batches) for chunk in chunk_sizes]
    finally:
        if local:
            source.close()


def _new_stats(seg: SegmentFiles, to_magic: int, chunk_size: int) -> dict[str, Any]:
    return {
        "topic": seg.topic, "partition": seg.partition, "segment": seg.name,
        "to_magic": to_magic, "chunk_size": chunk_size, "bytes_in": seg.size,
        "records_expected": 0, "records_delivered": 0, "fetches": 0, "bytes_committed": 0,
        "bytes_written": 0, "bytes_valid": 0, "padding_bytes": 0, "discarded_bytes": 0,
        "chunks": 0, "records_converted": 0, "temporary_memory_bytes": 0,
        "conversion_time_ns": 0, "zstd_batches": 0, "stalls": 0, "wall_seconds": 0.0, "ok": False,
    }


def _consume(seg: SegmentFiles, source: Any, to_magic: int, chunk_size: int,
             fetch_max_bytes: int, positions: list[int], last_offsets: list[int],
             expected: list[Expected],
             zstd_batches: int) -> dict[str, Any]:
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.records import MemoryRecords

    started = time.perf_counter()
    violations: list[dict[str, Any]] = []
    stats = _new_stats(seg, to_magic, chunk_size)
    stats["zstd_batches"] = zstd_batches
    stats["records_expected"] = len(expected)

    def fail(position: int, message: str, offset: int | None = None) -> dict[str, Any]:
        found = violation(seg.topic, seg.partition, seg.name, "log", position, "conversion",
                          f"to magic {to_magic}, chunk {chunk_size}: {message}")
        found["offset"] = offset
        violations.append(found)
        stats["wall_seconds"] = time.perf_counter() - started
        return {"stats": stats, "violations": violations}

    delivered: list[Expected] = []
    next_offset = seg.base_offset
    total = source.size_in_bytes
    floor = 0  # after a stall: the first batch the next fetch may start at
    try:
        while True:
            i = max(bisect.bisect_left(last_offsets, next_offset), floor)
            if i == len(last_offsets):
                break
            position = positions[i]
            first_batch_end = positions[i + 1] if i + 1 < len(positions) else total
            size = max(fetch_max_bytes, first_batch_end - position)
            region = source.slice(position, min(size, total - position))
            try:
                lazy = LazyDownConvertedRecords(region, to_magic, next_offset, chunk_size)
            except UnsupportedCompressionError:
                # error 76 for this partition: the batch at next_offset is zstd; step past it
                next_offset = last_offsets[i] + 1
                floor = 0
                continue
            committed = lazy.size_in_bytes
            sink = io.BytesIO()
            send = lazy.to_send()
            idle = 0
            while not send.completed and idle < _MAX_IDLE_WRITES:
                idle = idle + 1 if send.write_to(sink) == 0 else 0
            out = sink.getvalue()
            stats["fetches"] += 1
            stats["bytes_committed"] += committed
            stats["bytes_written"] += len(out)
            stats["chunks"] += getattr(send, "chunks", 0)
            stats["padding_bytes"] += getattr(send, "padding_bytes", 0)
            conv = lazy.stats
            stats["records_converted"] += conv.records_converted
            stats["temporary_memory_bytes"] += conv.temporary_memory_bytes
            stats["conversion_time_ns"] += conv.conversion_time_ns
            if len(out) != committed or not send.completed:
                return fail(position, f"fetch at offset {next_offset} committed {committed} "
                                      f"bytes but the send wrote {len(out)}", next_offset)
            valid = 0
            last_complete = None
            for out_batch in MemoryRecords(out).batches():
                if out_batch.magic > to_magic:
                    return fail(position, f"output batch at offset {out_batch.last_offset} "
                                          f"has magic {out_batch.magic}", next_offset)
                if out_batch.is_control and to_magic < 2:
                    return fail(position, "a control batch survived down-conversion",
                                next_offset)
                for r in out_batch:
                    if r.offset >= next_offset:
                        delivered.append((r.offset, r.timestamp, _b(r.key), _b(r.value)))
                valid = out_batch.position + out_batch.size_in_bytes
                last_complete = out_batch.last_offset
            stats["bytes_valid"] += valid
            stats["discarded_bytes"] += committed - valid
            if last_complete is None or last_complete < next_offset:
                if not any(e[0] >= next_offset for e in expected):
                    break
                # A stall: the first converted batch holds only offsets below the fetch offset
                # (a compressed batch whose tail was compacted away converts to a wrapper
                # ending before its original last offset) and the next batch's conversion did
                # not fit. A Kafka consumer refetches the same offset forever; count it and
                # start the next fetch one batch later (that batch has nothing at or above
                # next_offset, so no expected record is skipped).
                stats["stalls"] += 1
                floor = i + 1
                continue
            floor = 0
            next_offset = last_complete + 1
    except LazyconvError as exc:
        return fail(-1, f"{type(exc).__name__}: {exc}")
    stats["records_delivered"] = len(delivered)
    if delivered != expected:
        n = next((k for k, (a, b) in enumerate(zip(delivered, expected, strict=False)) if a != b),
                 min(len(delivered), len(expected)))
        got = delivered[n] if n < len(delivered) else None
        want = expected[n] if n < len(expected) else None
        offset = min(r[0] for r in (got, want) if r is not None)
        at = bisect.bisect_left(last_offsets, offset)
        return fail(positions[at] if at < len(positions) else -1,
                    f"{len(delivered)} records delivered, {len(expected)} expected; "
                    f"first difference at record {n}: got {_short(got)}, "
                    f"expected {_short(want)}", offset)
    stats["ok"] = True
    stats["wall_seconds"] = time.perf_counter() - started
    return {"stats": stats, "violations": violations}


def _short(rec: Expected | None) -> str:
    if rec is None:
        return "nothing"
    offset, ts, key, value = rec
    def cut(b: bytes | None) -> str:
        return "null" if b is None else (repr(b[:16]) + ("..." if len(b) > 16 else ""))
    return f"(offset {offset}, timestamp {ts}, key {cut(key)}, value {cut(value)})"
