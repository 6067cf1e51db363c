"""One pass over one byte range of one segment, the validation job's per-segment work:
:func:`scan_range` walks the log once, in blocks, taking runs of sound v2 batches in one kernel
call each (:mod:`~lazyconv.spark._scan_runs`) and sending every other entry through the
per-entry path here (delimited: size, magic, torn write, trailing zeros; then validated and
checked by :mod:`~lazyconv.spark._scan_entries`), feeds the derived lazy send
(:mod:`~lazyconv.spark._scan_conversions`), then checks the range's index files
(:mod:`~lazyconv.spark._scan_indexes`). Memory is a read block, a run and one fetch window,
never the segment; what a range cannot know alone (offsets, epochs and the max timestamp before
it) comes back in the result's ``boundary`` for the per-partition reduce
(:mod:`lazyconv.spark._partition_checks`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from lazyconv.errors import CorruptRecordError, LazyconvError
from lazyconv.logdir._entry import MIN_ENTRY_SIZE as MIN_ENTRY_SIZE_FIELD
from lazyconv.records._digest import MASK64
from lazyconv.records._format import (
    BATCH_LENGTH_MIN,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
)
from lazyconv.spark._scan_conversions import conversion_rows, feed_consumers
from lazyconv.spark._scan_entries import (
    check_offsets,
    check_topic_config,
    check_v2_header,
    entry_facts,
    header_last_offset,
    keep_place,
    note_control,
    what_failed,
)
from lazyconv.spark._scan_indexes import check_offset_index, check_time_index, check_txn_index
from lazyconv.spark._scan_runs import take_runs
from lazyconv.spark._scan_state import BlockReader, RangeScan, ScanOptions, ScanTask
from lazyconv.spark._violations import ERROR, WARNING

__all__ = ["scan_range"]

log = logging.getLogger(__name__)

V2_MIN_SIZE_FIELD = BATCH_LENGTH_MIN  # a v2 batch header is 61 bytes, 12 of them before the size field counts
_ZERO_BLOCK = bytes(1 << 16)
_TEXT_PREVIEW = 24  # characters of a text file quoted in its violation


def scan_range(task: ScanTask,
               options: ScanOptions = ScanOptions(),  # noqa: B008 - frozen: one serves every call
               ) -> dict[str, Any]:
    """Check one byte range of one segment in a single pass.

    Returns ``{"summary", "violations", "conversions", "boundary"}``; never raises: an
    unexpected exception becomes an ``internal_error`` violation at the file and byte position
    being checked when it happened.
    """
    started = time.perf_counter()
    scan = RangeScan(task, options)
    conversions: list[dict[str, Any]] = []
    try:
        _scan_log(scan)
        deferred: list[tuple[int, int, int, int]] = []
        if "log" not in scan.unreadable and not scan.not_a_segment:
            # indexes are checked against the log: not against a file that is not one
            scan.where = ("index", -1)
            check_offset_index(scan)
            scan.where = ("timeindex", -1)
            deferred = check_time_index(scan)
            scan.where = ("txnindex", -1)
            check_txn_index(scan)
        scan.where = ("log", -1)
        conversions = conversion_rows(scan)
    except Exception as exc:  # noqa: BLE001 - a task reports, it never aborts the job
        file, position = scan.where
        log.exception("internal error checking %s at %s byte %s", task.log_path, file, position)
        scan.add(file, position, "internal_error", f"{type(exc).__name__}: {exc}")
        deferred = []
        conversions = []
    s = scan.summary
    s["checksum"] &= MASK64
    s["bytes"] = s["scan_end"] - task.start + scan.zero_bytes
    s["violations"] = sum(1 for v in scan.violations if v["severity"] == ERROR)
    s["warnings"] = len(scan.violations) - s["violations"]
    s["check_seconds"] = time.perf_counter() - started
    boundary = {
        "first_offset": s["first_offset"], "last_offset": s["last_offset"],
        "first_epoch": s["first_epoch"], "last_epoch": s["last_epoch"],
        "max_timestamp": scan.max_ts, "scan_end": s["scan_end"],
        "first_epoch_position": scan.first_epoch_position,
        "deferred_time_entries": deferred,
        "aborts_without_txnindex": scan.aborts_without_txnindex,
        **_txn_facts(scan),
    }
    return {"summary": s, "violations": scan.violations, "conversions": conversions,
            "boundary": boundary}


def _txn_facts(scan: RangeScan) -> dict[str, Any]:
    """What the reduce needs to decide this segment's deferred ABORT markers
    (:func:`~lazyconv.spark._scan_indexes._cleaned_marker`): this range's deferred markers;
    unless it ends the segment, the producers with a marker in it and those with a batch of a
    transaction still open at its end (sorted producer ids)."""
    task = scan.task
    if task.range_count == 1:
        return {}
    facts: dict[str, Any] = {"txn_deferred": scan.txn_deferred}
    if not task.is_last_range:
        facts["txn_marked"] = sorted(scan.txn_marker_seen)
        facts["txn_open"] = sorted(scan.txn_first)
    return facts


# --- the log ---------------------------------------------------------------------------------

def _scan_log(scan: RangeScan) -> None:
    task = scan.task
    try:
        reader = BlockReader(task.log_path)
    except OSError as exc:
        scan.unreadable.add("log")
        scan.add("log", -1, "unreadable", f"cannot open {task.log_path}: {exc.strerror or exc}")
        return
    with reader:
        end = min(task.stop, reader.size) if task.end >= 0 else reader.size
        pos = task.start
        if pos == 0 and end > 0:
            foreign = _foreign_file(reader.read(0, 64), task.base_offset, reader.size)
            if foreign is not None:
                scan.not_a_segment = True
                scan.add("log", 0, "not_a_segment", f"not a Kafka segment: {foreign}")
                return
        while pos < end:
            scan.where = ("log", pos)
            pos = take_runs(scan, reader, pos, end)
            if pos >= end:
                break
            scan.where = ("log", pos)
            size = _delimit(scan, reader, pos, end)
            if size is None:
                break
            _check_entry(scan, reader.read(pos, size), pos)
            pos += size
        scan.summary["scan_end"] = pos
        if scan.consumers is not None:
            for consumer in scan.consumers.values():
                consumer.finish(pos)


_SIGNATURES = (  # what a file that is not a segment often is, by its first bytes
    (b"\x1f\x8b", "a gzip file"), (b"\x28\xb5\x2f\xfd", "a zstd frame"),
    (b"\x04\x22\x4d\x18", "an LZ4 frame"), (b"\xff\x06\x00\x00sNaPpY", "a snappy stream"),
    (b"PK\x03\x04", "a zip file"), (b"BZh", "a bzip2 file"), (b"\xfd7zXZ\x00", "an xz file"),
    (b"\x7fELF", "an ELF binary"), (b"PAR1", "a Parquet file"), (b"%PDF", "a PDF file"),
)
_PRINTABLE = frozenset(range(32, 127)) | {9, 10, 13}


def _foreign_file(head: bytes, base_offset: int, file_size: int) -> str | None:
    """Why a segment's first bytes are not a log entry (``None`` when they may be one): a
    known file signature, text, or a header unlike any Kafka entry's (an offset more than 2^31
    from the segment's base offset, and a magic above 2, a size field below 14 or an entry
    longer than the file). Zeros are left to the trailing-zeros check, and anything that may
    be an entry (a torn one, one with a wrong offset) to the entry checks."""
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return f"it starts like {what} ({signature[:4].hex(' ')})"
    if len(head) < HEADER_SIZE_UP_TO_MAGIC or not any(head):
        return None
    if all(b in _PRINTABLE for b in head):
        return f"it holds text ({head[:_TEXT_PREVIEW].decode('ascii')!r}...)"
    offset, size = LOG_HEADER.unpack_from(head)
    magic = head[MAGIC_OFFSET]
    impossible = size < MIN_ENTRY_SIZE_FIELD or magic > 2 or LOG_OVERHEAD + size > file_size
    if abs(offset - base_offset) >= 1 << 31 and impossible:
        return (f"its first bytes are no log entry header (offset {offset}, size field {size}, "
                f"magic {magic}; the segment's base offset is {base_offset})")
    return None


def _delimit(scan: RangeScan, reader: BlockReader, pos: int, end: int) -> int | None:
    """The total size of the entry at ``pos``, or ``None`` (with a violation or a warning) where
    the rest of the range cannot be delimited."""
    head = reader.read(pos, HEADER_SIZE_UP_TO_MAGIC)
    if len(head) < LOG_OVERHEAD:
        if _all_zeros(reader, pos, end):
            _trailing_zeros(scan, pos, end)
        else:
            scan.add("log", pos, "truncated", f"{end - pos} bytes at the end of the segment are "
                                              f"less than an entry header")
        return None
    offset, size = LOG_HEADER.unpack_from(head)
    if offset == 0 and size == 0 and _all_zeros(reader, pos, end):
        _trailing_zeros(scan, pos, end)
        return None
    if size < MIN_ENTRY_SIZE_FIELD:
        scan.add("log", pos, "bad_size", f"entry at offset {offset} has size field {size} "
                                         f"(< {MIN_ENTRY_SIZE_FIELD}); the remaining {end - pos} bytes cannot be "
                                         f"checked", offset=offset)
        return None
    if len(head) < HEADER_SIZE_UP_TO_MAGIC or pos + LOG_OVERHEAD + size > end:
        scan.add("log", pos, "truncated", f"entry at offset {offset} declares {size} bytes but "
                                          f"the segment ends after {end - pos - LOG_OVERHEAD}",
                 offset=offset)
        return None
    magic = head[MAGIC_OFFSET]
    if magic > 2:
        scan.add("log", pos, "bad_magic", f"entry at offset {offset} has magic {magic}; the "
                                          f"remaining {end - pos} bytes cannot be checked",
                 offset=offset)
        return None
    return LOG_OVERHEAD + size


def _all_zeros(reader: BlockReader, pos: int, end: int) -> bool:
    while pos < end:
        n = min(len(_ZERO_BLOCK), end - pos)
        if reader.read(pos, n) != _ZERO_BLOCK[:n]:
            return False
        pos += n
    return True


def _trailing_zeros(scan: RangeScan, pos: int, end: int) -> None:
    task = scan.task
    scan.zero_bytes = end - pos
    if task.last_in_partition and task.is_last_range:
        scan.add("log", pos, "trailing_zeros",
                 f"{end - pos} zero bytes after the last entry (preallocated; Kafka reads them as "
                 f"the end of the log)", severity=WARNING)
    else:
        scan.add("log", pos, "trailing_zeros",
                 f"{end - pos} zero bytes after the last entry of a segment that is not the "
                 f"partition's last")


def _check_entry(scan: RangeScan, data: bytes, pos: int) -> None:
    """Decode, validate and check one complete entry at log byte ``pos``."""
    from lazyconv.records import MemoryRecords

    s = scan.summary
    magic = data[MAGIC_OFFSET]
    header_offset, size_field = LOG_HEADER.unpack_from(data)
    scan.current = (pos, header_last_offset(data), len(data))
    if magic == 2 and size_field < V2_MIN_SIZE_FIELD:
        scan.add("log", pos, "structure",
                 f"v2 batch at offset {header_offset} has length {size_field}, below the v2 "
                 f"minimum {V2_MIN_SIZE_FIELD}", offset=header_offset)
        keep_place(scan, pos, header_offset, None)
        scan.consumers = None
        return
    try:
        batch = next(MemoryRecords(data).batches())
        batch.validate()
        facts, payload = entry_facts(batch)
    except LazyconvError as exc:
        kind = "crc" if isinstance(exc, CorruptRecordError) else "structure"
        inner = f" (byte {pos + exc.position} of the segment)" if exc.position else ""
        scan.add("log", pos, kind, f"{what_failed(data, exc)}{inner}", offset=header_offset)
        keep_place(scan, pos, header_last_offset(data), None)
        scan.consumers = None  # the conversion of a damaged range is not checked
        return
    s["batches"] += 1
    s[f"batches_v{batch.magic}"] += 1
    base = batch.base_offset
    last = batch.last_offset
    if scan.config is not None:
        check_topic_config(scan, scan.prev_offset, pos, data, base, last, facts.record_count,
                            batch.is_control)
    check_offsets(scan, batch, facts, pos, base, last)
    if magic == 2:
        check_v2_header(scan, batch, facts, pos)
    s["last_offset"] = last
    if batch.is_control:
        s["control_batches"] += 1
        note_control(scan, batch, facts, pos)
    else:
        s["checksum"] += facts.full
        s["records"] += facts.record_count
        if batch.is_transactional and magic == 2 and batch.producer_id not in scan.txn_first:
            scan.txn_first[batch.producer_id] = base
    scan.max_ts = max(scan.max_ts, batch.max_timestamp)
    s["max_timestamp"] = scan.max_ts
    keep_place(scan, pos, last, scan.max_ts)
    if scan.consumers is not None:
        feed_consumers(scan, batch, data, facts, payload, pos)
