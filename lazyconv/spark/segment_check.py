"""Check one log segment: every batch (frame, CRC, structure, offsets) and its index files.

Pure Python, no Spark: the Spark job maps :func:`check_segment` over segments on executors, and
tests call it directly. Entries are delimited here with positioned reads of their 17-byte
headers, so a violation's byte position is exact and a bad batch does not hide the ones after
it; each complete entry is then decoded and validated by :mod:`lazyconv.records`.

A violation is a dict ``{topic, partition, segment, file, position, kind, message}``: ``file``
is ``log``, ``index``, ``timeindex`` or ``partition`` (cross-segment / manifest findings, where
``position`` is -1), ``position`` a byte position in that file.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from typing import Any

from lazyconv.errors import CorruptRecordError, LazyconvError
from lazyconv.fixtures.checksum import MASK64, record_hash
from lazyconv.fixtures.index import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    parse_offset_index,
    parse_time_index,
)
from lazyconv.fixtures.layout import SegmentFiles
from lazyconv.records._format import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD

__all__ = [
    "VIOLATION_KINDS",
    "SegmentReader",
    "violation",
    "scan_entries",
    "check_segment",
]

MIN_ENTRY_SIZE_FIELD = 14

VIOLATION_KINDS = (
    "truncated",  # an entry runs past the end of the segment (a torn write)
    "bad_size",  # size field below 14: the rest of the segment cannot be delimited
    "bad_magic",  # magic byte not 0, 1 or 2
    "crc",  # stored CRC differs from the computed one
    "structure",  # the batch does not decode (counts, varints, lengths, codec)
    "offset_order",  # offsets not strictly increasing within a segment
    "segment_base",  # an offset below the segment's base offset (its file name)
    "segment_order",  # offsets not increasing from one segment of a partition to the next
    "index",  # an .index entry or the file disagrees with the log
    "timeindex",  # a .timeindex entry or the file disagrees with the log
    "manifest",  # counts or checksum differ from the fixture manifest
    "conversion",  # the lazy send wrote other bytes or records than expected
    "unreadable",  # the file cannot be read at all
)

_HEADER = struct.Struct(">qi")


def violation(seg: SegmentFiles | None, file: str, position: int, kind: str, message: str,
              topic: str | None = None, partition: int | None = None) -> dict[str, Any]:
    """One finding, located by topic, partition, segment, file and byte position."""
    return {
        "topic": seg.topic if seg is not None else topic,
        "partition": seg.partition if seg is not None else partition,
        "segment": seg.name if seg is not None else "",
        "file": file,
        "position": position,
        "kind": kind,
        "message": message,
    }


class SegmentReader:
    """Positioned reads from a local file or an fsspec URL."""

    def __init__(self, path: str) -> None:
        self.path = path
        if "://" in path:
            import fsspec

            self._file = fsspec.open(path, "rb").open()
            self._fd = None
            self._file.seek(0, os.SEEK_END)
            self.size = self._file.tell()
        else:
            self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
            self._fd = self._file.fileno()
            self.size = os.fstat(self._fd).st_size

    def read(self, position: int, size: int) -> bytes:
        if self._fd is not None:
            return os.pread(self._fd, size, position)
        self._file.seek(position)
        return self._file.read(size)

    def read_all(self) -> bytes:
        return self.read(0, self.size)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan_entries(reader: SegmentReader, seg: SegmentFiles,
                 violations: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Delimit the entries of a segment: ``[(position, total size)]`` of complete entries.

    Appends a violation and stops where the rest cannot be delimited (a size field below 14, a
    bad magic, an entry running past the end of the file: on disk that is a torn write, not the
    normal partial batch of a fetch response).
    """
    entries: list[tuple[int, int]] = []
    pos = 0
    end = reader.size
    while pos < end:
        head = reader.read(pos, HEADER_SIZE_UP_TO_MAGIC)
        if len(head) < LOG_OVERHEAD:
            violations.append(violation(seg, "log", pos, "truncated",
                                        f"{end - pos} bytes at the end of the segment are less "
                                        f"than an entry header"))
            break
        offset, size = _HEADER.unpack_from(head)
        if size < MIN_ENTRY_SIZE_FIELD:
            violations.append(violation(seg, "log", pos, "bad_size",
                                        f"entry at offset {offset} has size field {size} (< 14); "
                                        f"the remaining {end - pos} bytes cannot be checked"))
            break
        if len(head) < HEADER_SIZE_UP_TO_MAGIC:
            violations.append(violation(seg, "log", pos, "truncated",
                                        f"entry at offset {offset} declares {size} bytes but the "
                                        f"segment ends after {end - pos - LOG_OVERHEAD}"))
            break
        magic = head[16]
        if magic > 2:
            violations.append(violation(seg, "log", pos, "bad_magic",
                                        f"entry at offset {offset} has magic {magic}; the "
                                        f"remaining {end - pos} bytes cannot be checked"))
            break
        if pos + LOG_OVERHEAD + size > end:
            violations.append(violation(seg, "log", pos, "truncated",
                                        f"entry at offset {offset} declares {size} bytes but the "
                                        f"segment ends after {end - pos - LOG_OVERHEAD}"))
            break
        entries.append((pos, LOG_OVERHEAD + size))
        pos += LOG_OVERHEAD + size
    return entries


def check_segment(seg: SegmentFiles) -> dict[str, Any]:
    """Check one segment; returns ``{"summary": {...}, "violations": [...]}``.

    The summary holds the counts, the first/last offsets (for the cross-segment check), and
    ``checksum``: the sum mod 2**64 of the consumer-view record hashes
    (:mod:`lazyconv.fixtures.checksum`), so partitions can be summed over segments.
    """
    from lazyconv.records import MemoryRecords

    started = time.perf_counter()
    violations: list[dict[str, Any]] = []
    summary: dict[str, Any] = {
        "topic": seg.topic, "partition": seg.partition, "segment": seg.name,
        "base_offset": seg.base_offset, "path": seg.log_path, "bytes": 0, "batches": 0,
        "control_batches": 0, "records": 0, "first_offset": None, "last_offset": None,
        "checksum": 0, "batches_v0": 0, "batches_v1": 0, "batches_v2": 0,
        "index_entries": 0, "timeindex_entries": 0, "violations": 0, "check_seconds": 0.0,
    }
    try:
        reader = SegmentReader(seg.log_path)
    except OSError as exc:
        violations.append(violation(seg, "log", -1, "unreadable", f"cannot open: {exc}"))
        summary["violations"] = len(violations)
        return {"summary": summary, "violations": violations}

    # per decoded batch: position, last offset, max timestamp of the log up to it
    positions: list[int] = []
    last_offsets: list[int] = []
    running_max_ts: list[int | None] = []
    checksum = 0
    prev_offset: int | None = None  # last offset seen (record or batch), for ordering
    max_ts = -1
    with reader:
        summary["bytes"] = reader.size
        for pos, size in scan_entries(reader, seg, violations):
            data = reader.read(pos, size)
            try:
                batch = next(MemoryRecords(data).batches())
                batch.validate()
                records = list(batch)
            except LazyconvError as exc:
                kind = "crc" if isinstance(exc, CorruptRecordError) else "structure"
                violations.append(violation(seg, "log", pos, kind, _where(exc, pos)))
                # keep its place for the index checks (reported once, here), with the last
                # offset its header claims and no timestamp
                positions.append(pos)
                last_offsets.append(_header_last_offset(data))
                running_max_ts.append(None)
                continue
            summary["batches"] += 1
            summary[f"batches_v{batch.magic}"] += 1
            base = batch.base_offset
            last = batch.last_offset
            if summary["first_offset"] is None:
                summary["first_offset"] = base
                if base < seg.base_offset:
                    violations.append(violation(
                        seg, "log", pos, "segment_base",
                        f"first offset {base} is below the segment base offset {seg.base_offset}"))
            if prev_offset is not None and base <= prev_offset:
                violations.append(violation(
                    seg, "log", pos, "offset_order",
                    f"batch offsets {base}..{last} do not follow offset {prev_offset}"))
            if last < base:
                violations.append(violation(seg, "log", pos, "offset_order",
                                            f"last offset {last} is below base offset {base}"))
            record_prev = base - 1
            for r in records:
                if r.offset <= record_prev or r.offset > last:
                    violations.append(violation(
                        seg, "log", pos, "offset_order",
                        f"record offset {r.offset} out of order in batch {base}..{last} "
                        f"(previous {record_prev})"))
                    break
                record_prev = r.offset
            prev_offset = max(last, prev_offset if prev_offset is not None else last)
            summary["last_offset"] = last
            if batch.is_control:
                summary["control_batches"] += 1
            else:
                for r in records:
                    checksum += record_hash(r.offset, r.timestamp, r.key, r.value, r.headers)
                summary["records"] += len(records)
            ts = batch.max_timestamp
            max_ts = max(max_ts, ts)
            positions.append(pos)
            last_offsets.append(last)
            running_max_ts.append(max_ts)

    summary["checksum"] = checksum & MASK64
    _check_offset_index(seg, positions, last_offsets, summary, violations)
    _check_time_index(seg, last_offsets, running_max_ts, summary, violations)
    summary["violations"] = len(violations)
    summary["check_seconds"] = time.perf_counter() - started
    return {"summary": summary, "violations": violations}


def _header_last_offset(entry: bytes) -> int:
    """Last offset as an entry's header states it (v2: base + delta; legacy: its offset)."""
    offset = _HEADER.unpack_from(entry)[0]
    if entry[16] >= 2 and len(entry) >= 27:
        return offset + struct.unpack_from(">i", entry, 23)[0]
    return offset


def _where(exc: LazyconvError, batch_position: int) -> str:
    inner = f" (byte {batch_position + exc.position} of the segment)" if exc.position else ""
    return f"{type(exc).__name__}: {exc.message}{inner}"


def _read_optional(path: str) -> bytes | None:
    try:
        with SegmentReader(path) as reader:
            return reader.read_all()
    except FileNotFoundError:
        return None


def _check_offset_index(seg: SegmentFiles, positions: list[int], last_offsets: list[int],
                        summary: dict[str, Any], violations: list[dict[str, Any]]) -> None:
    data = _read_optional(seg.index_path)
    if data is None:
        violations.append(violation(seg, "index", -1, "index", "offset index file is missing"))
        return
    if len(data) % OFFSET_ENTRY_SIZE:
        violations.append(violation(seg, "index", len(data) - len(data) % OFFSET_ENTRY_SIZE,
                                    "index", f"size {len(data)} is not a multiple of 8"))
    entries = parse_offset_index(data, seg.base_offset)
    summary["index_entries"] = len(entries)
    by_position = dict(zip(positions, last_offsets, strict=False))
    prev = None
    for entry in entries:
        if entry.offset == seg.base_offset and entry.position == 0 and prev is not None:
            # zero-filled tail of a preallocated (not trimmed) index: the end of the entries
            break
        problem = None
        if entry.offset < seg.base_offset:
            problem = f"relative offset {entry.offset - seg.base_offset} is negative"
        elif prev is not None and (entry.offset <= prev.offset or entry.position <= prev.position):
            problem = (f"entry ({entry.offset}, {entry.position}) does not follow "
                       f"({prev.offset}, {prev.position})")
        elif entry.position not in by_position:
            problem = (f"entry for offset {entry.offset} points to log byte {entry.position}, "
                       f"which is not the start of a batch")
        elif by_position[entry.position] != entry.offset:
            problem = (f"entry says offset {entry.offset} but the batch at log byte "
                       f"{entry.position} ends at offset {by_position[entry.position]}")
        if problem is not None:
            violations.append(violation(seg, "index", entry.index_position, "index", problem))
        prev = entry


def _check_time_index(seg: SegmentFiles, last_offsets: list[int],
                      running_max_ts: list[int | None],
                      summary: dict[str, Any], violations: list[dict[str, Any]]) -> None:
    data = _read_optional(seg.timeindex_path)
    if data is None:
        violations.append(violation(seg, "timeindex", -1, "timeindex",
                                    "time index file is missing"))
        return
    if len(data) % TIME_ENTRY_SIZE:
        violations.append(violation(seg, "timeindex", len(data) - len(data) % TIME_ENTRY_SIZE,
                                    "timeindex", f"size {len(data)} is not a multiple of 12"))
    entries = parse_time_index(data, seg.base_offset)
    summary["timeindex_entries"] = len(entries)
    prev = None
    for entry in entries:
        if entry.timestamp == 0 and entry.offset == seg.base_offset and prev is not None:
            break  # zero-filled tail of a preallocated index
        problem = None
        i = bisect.bisect_left(last_offsets, entry.offset)
        if prev is not None and (entry.timestamp <= prev.timestamp or entry.offset < prev.offset):
            problem = (f"entry ({entry.timestamp}, {entry.offset}) does not follow "
                       f"({prev.timestamp}, {prev.offset})")
        elif i == len(last_offsets) or last_offsets[i] != entry.offset:
            problem = f"offset {entry.offset} is not the last offset of a batch in the log"
        elif running_max_ts[i] is not None and running_max_ts[i] != entry.timestamp:
            problem = (f"timestamp {entry.timestamp} for offset {entry.offset} differs from the "
                       f"log's max timestamp up to that batch, {running_max_ts[i]}")
        if problem is not None:
            violations.append(violation(seg, "timeindex", entry.index_position, "timeindex",
                                        problem))
        prev = entry
