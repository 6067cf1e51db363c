"""The index files of a range, checked against what its log scan saw: the ``.index`` entries
(each the start of a batch with that last offset), the ``.timeindex`` entries (the log's max
timestamp up to that batch; those that depend on the log before the range are deferred to the
partition's reduce) and the ``.txnindex`` entries (one per ABORT marker, as far as the log
cleaner keeps them).
"""

from __future__ import annotations

import bisect

from lazyconv.logdir._index import OFFSET_ENTRY as _OFFSET_ENTRY
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from lazyconv.logdir._index import TIME_ENTRY as _TIME_ENTRY
from lazyconv.logdir._txnindex import TXNINDEX_ENTRY as _TXN_ENTRY
from lazyconv.logdir._txnindex import TXNINDEX_ENTRY_SIZE as TXN_ENTRY_SIZE
from lazyconv.records._format import (
    ATTRIBUTES_LENGTH,
    ATTRIBUTES_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LOG_HEADER,
    V2_HEADER,
)
from lazyconv.spark._reader import SegmentReader, read_regular_file
from lazyconv.spark._scan_state import RangeScan, ScanTask
from lazyconv.spark._violations import marker_without_entry

__all__ = ["check_offset_index", "check_time_index", "check_txn_index", "DEFERRED_TIME_ENTRIES"]

# at most this many .timeindex entries of a later range that agree with the range's own max
# timestamp go to the reduce to confirm (right unless the log before the range has a larger one)
DEFERRED_TIME_ENTRIES = 64


def _read_small_file(path: str) -> bytes | None:
    """A whole index file, or ``None`` when there is none."""
    if "://" in path:
        import fsspec

        fs, local = fsspec.core.url_to_fs(path)
        if not fs.exists(local):
            return None
        with fs.open(local, "rb") as f:
            return bytes(f.read())
    try:
        return read_regular_file(path)
    except FileNotFoundError:
        return None

def _owned(task: ScanTask, offset: int) -> bool:
    """Whether an index entry for ``offset`` is this range's to check."""
    if task.start_key is not None and offset < task.start_key:
        return False
    return task.end_key is None or offset < task.end_key


def _index_bytes(scan: RangeScan, file: str, path: str) -> bytes | None:
    """The index file at ``path``; ``None`` when there is none or it cannot be read (an
    ``unreadable`` violation, reported by the segment's first range only: one per file)."""
    try:
        return _read_small_file(path)
    except OSError as exc:
        scan.unreadable.add(file)
        if scan.task.range_index == 0:
            scan.add(file, -1, "unreadable", f"cannot read {path}: {exc.strerror or exc}")
        return None


def check_offset_index(scan: RangeScan) -> None:
    task = scan.task
    data = _index_bytes(scan, "index", task.index_path)
    if data is None:
        if task.range_index == 0 and not any(v["file"] == "index" for v in scan.violations):
            scan.add("index", -1, "index", "offset index file is missing")
        return
    if len(data) % OFFSET_ENTRY_SIZE and task.is_last_range:
        scan.add("index", len(data) - len(data) % OFFSET_ENTRY_SIZE, "index",
                 f"size {len(data)} is not a multiple of {OFFSET_ENTRY_SIZE}")
    by_position = dict(zip(scan.positions, scan.last_offsets, strict=False))
    base = task.base_offset
    prev: tuple[int, int] | None = None
    checked = 0
    for index_position in range(0, len(data) - OFFSET_ENTRY_SIZE + 1, OFFSET_ENTRY_SIZE):
        rel, position = _OFFSET_ENTRY.unpack_from(data, index_position)
        offset = base + rel
        if rel == 0 and position == 0 and prev is not None:
            break  # zero-filled tail of a preallocated index: the end of the entries
        mine = (task.start <= position < task.stop) or (task.is_last_range and position >= task.stop)
        if task.range_index == 0 and position < task.start:
            mine = True
        if mine:
            checked += 1
            problem = None
            if rel < 0:
                problem = f"relative offset {rel} is negative"
            elif prev is not None and (offset <= prev[0] or position <= prev[1]):
                problem = f"entry ({offset}, {position}) does not follow ({prev[0]}, {prev[1]})"
            elif position not in by_position:
                problem = (f"entry for offset {offset} points to log byte {position}, which is "
                           f"not the start of a batch")
            elif by_position[position] != offset:
                problem = (f"entry says offset {offset} but the batch at log byte {position} "
                           f"ends at offset {by_position[position]}")
            if problem is not None:
                scan.add("index", index_position, "index", problem, offset=offset)
        prev = (offset, position)
    scan.summary["index_entries"] = checked


def check_time_index(scan: RangeScan) -> list[tuple[int, int, int, int]]:
    """Check the range's ``.timeindex`` entries; returns the entries whose timestamp depends on
    the log before the range ``(index position, timestamp, offset, max timestamp in range)``."""
    task = scan.task
    data = _index_bytes(scan, "timeindex", task.timeindex_path)
    deferred: list[tuple[int, int, int, int]] = []
    if data is None:
        if task.range_index == 0 and not any(v["file"] == "timeindex" for v in scan.violations):
            scan.add("timeindex", -1, "timeindex", "time index file is missing")
        return deferred
    if len(data) % TIME_ENTRY_SIZE and task.is_last_range:
        scan.add("timeindex", len(data) - len(data) % TIME_ENTRY_SIZE, "timeindex",
                 f"size {len(data)} is not a multiple of {TIME_ENTRY_SIZE}")
    base = task.base_offset
    last_offsets = scan.last_offsets
    prev: tuple[int, int] | None = None
    exact_deferred = 0
    checked = 0
    for index_position in range(0, len(data) - TIME_ENTRY_SIZE + 1, TIME_ENTRY_SIZE):
        ts, rel = _TIME_ENTRY.unpack_from(data, index_position)
        offset = base + rel
        if ts == 0 and rel == 0 and prev is not None:
            break  # zero-filled tail of a preallocated index
        if _owned(task, offset):
            checked += 1
            problem = None
            i = bisect.bisect_left(last_offsets, offset)
            if prev is not None and (ts <= prev[0] or offset < prev[1]):
                problem = f"entry ({ts}, {offset}) does not follow ({prev[0]}, {prev[1]})"
            elif i == len(last_offsets) or last_offsets[i] != offset:
                problem = f"offset {offset} is not the last offset of a batch in the log"
            else:
                local = scan.running_max_ts[i]
                if local is None:
                    pass  # that batch is damaged; reported once, in the log
                elif task.start == 0:
                    if local != ts:
                        problem = (f"timestamp {ts} for offset {offset} differs from the log's "
                                   f"max timestamp up to that batch, {local}")
                elif ts != local:
                    deferred.append((index_position, ts, offset, local))
                elif exact_deferred < DEFERRED_TIME_ENTRIES:
                    # right unless the log before the range has a larger timestamp
                    exact_deferred += 1
                    deferred.append((index_position, ts, offset, local))
            if problem is not None:
                scan.add("timeindex", index_position, "timeindex", problem, offset=offset)
        prev = (ts, offset)
    scan.summary["timeindex_entries"] = checked
    return deferred


class _LogPeek:
    """Small positioned reads of the range's log file after its scan (opened on first use:
    only the ``.txnindex`` checks of a cleaned log need them)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._reader: SegmentReader | None = None
        self.failed = False

    def read(self, position: int, size: int) -> bytes | None:
        if self._reader is None and not self.failed:
            try:
                self._reader = SegmentReader(self.path)
            except OSError:
                self.failed = True
        if self._reader is None:
            return None
        try:
            data = self._reader.read(position, size)
        except OSError:
            return None
        return data if len(data) == size else None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def _cleaned_marker(scan: RangeScan, peek: _LogPeek, marker: tuple[int, int]) -> bool | None:
    """Whether the log cleaner may have dropped the ``.txnindex`` entry of this ABORT marker;
    ``None`` when only the segment's earlier ranges can tell (the reduce decides).

    When the cleaner (Kafka 3.1+, KIP-534) reads an ABORT marker whose transaction has no batch
    left in the segments it cleans, it drops the marker's entry from the cleaned segment's
    ``.txnindex`` and, in the same pass, rewrites the marker with a delete horizon (the
    attribute bit 0x40), to remove the marker itself after ``delete.retention.ms``. So an entry
    may be missing only for a marker that carries a delete horizon and has no batch of its
    transaction before it in its segment (the cleaner writes each group of segments it cleans
    as one segment, and sees only that group's batches); an ABORT marker never cleaned has no
    delete horizon and must have its entry. A range that does not start the segment sees the
    whole transaction only when the producer has an earlier marker in it: otherwise the marker
    goes to the reduce with the producers' open transactions of every range
    (:attr:`RangeScan.txn_deferred`)."""
    if marker in scan.txn_starts:
        return False  # a batch of the transaction is still here: the cleaner keeps the entry
    attributes = peek.read(scan.abort_markers[marker] + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH)
    if attributes is None or not int.from_bytes(attributes, "big") & DELETE_HORIZON_FLAG_MASK:
        return False
    if scan.task.start == 0 or marker in scan.txn_after_marker:
        return True
    return None


def _offset_removed(scan: RangeScan, peek: _LogPeek, offset: int) -> bool:
    """Whether ``offset`` (at or after the range's first offset) is in an offset gap of the log:
    no batch holds it. The cleaner removes an aborted transaction's batches whole and keeps its
    ``.txnindex`` entry (with the first offset it had) while the ABORT marker stays and until a
    pass finds no batch of it; in a log never cleaned, an entry's first offset is where its
    transaction's first batch starts."""
    i = bisect.bisect_left(scan.last_offsets, offset)
    if i == len(scan.last_offsets):
        return False
    head = peek.read(scan.positions[i], LOG_HEADER.size)
    return head is not None and offset < LOG_HEADER.unpack(head)[0]


def _batch_empty(scan: RangeScan, peek: _LogPeek, offset: int) -> bool:
    """Whether the batch holding ``offset`` (one of the range's) is a v2 batch with no records:
    the one the cleaner keeps of an aborted transaction for its producer's state (a batch of
    it with records means the cleaner never removed that transaction)."""
    i = bisect.bisect_left(scan.last_offsets, offset)
    if i == len(scan.last_offsets):
        return False
    head = peek.read(scan.positions[i], V2_HEADER.size)
    if head is None:
        return False
    fields = V2_HEADER.unpack(head)
    return fields[3] == 2 and fields[-1] == 0


def check_txn_index(scan: RangeScan) -> None:
    """Each ABORT marker of the range has its ``.txnindex`` entry and each entry its marker,
    as far as the log cleaner keeps them (see :func:`_cleaned_marker`, :func:`_offset_removed`)."""
    peek = _LogPeek(scan.task.log_path)
    try:
        _check_txn_entries(scan, peek)
    finally:
        peek.close()


def _check_txn_entries(scan: RangeScan, peek: _LogPeek) -> None:
    task = scan.task
    data = _index_bytes(scan, "txnindex", task.txnindex_path)
    if data is None:
        # Kafka writes no file for a segment without aborted transactions; with ABORT markers
        # it must have one (the reduce reports it once per segment), unless the cleaner dropped
        # all their entries
        if scan.abort_markers and "txnindex" not in scan.unreadable:
            needing = []
            for marker in sorted(scan.abort_markers):
                cleaned = _cleaned_marker(scan, peek, marker)
                if cleaned is None:
                    scan.txn_deferred.append([marker[0], marker[1], 0])
                elif not cleaned:
                    needing.append(marker[1])
            if needing:
                scan.aborts_without_txnindex = [len(needing), min(needing)]
        return
    if len(data) % TXN_ENTRY_SIZE and task.is_last_range:
        scan.add("txnindex", len(data) - len(data) % TXN_ENTRY_SIZE, "txnindex",
                 f"size {len(data)} is not a multiple of {TXN_ENTRY_SIZE}")
    listed: set[tuple[int, int]] = set()
    checked = 0
    first_seen = scan.summary["first_offset"]
    for index_position in range(0, len(data) - TXN_ENTRY_SIZE + 1, TXN_ENTRY_SIZE):
        version, pid, first, last, _lso = _TXN_ENTRY.unpack_from(data, index_position)
        if not _owned(task, last):
            continue
        checked += 1
        listed.add((pid, last))
        problem = None
        if version != 0:
            problem = f"entry version {version} is not 0"
        elif first > last:
            problem = f"first offset {first} is after last offset {last}"
        elif (pid, last) not in scan.abort_markers:
            problem = (f"aborted transaction of producer {pid} ending at offset {last} has no "
                       f"ABORT marker at that offset in the log")
        elif first < 0:
            problem = f"first offset {first} is negative"
        elif (pid, last) not in scan.txn_starts and first <= scan.txn_after_marker.get((pid, last), -1):
            problem = (f"aborted transaction of producer {pid} begins at offset {first}, not after "
                       f"the producer's previous marker at offset "
                       f"{scan.txn_after_marker[(pid, last)]}")
        elif ((pid, last) in scan.txn_starts and scan.txn_starts[(pid, last)] != first
              and ((pid, last) in scan.txn_start_known or first_seen is None or first >= first_seen)
              and not (first_seen is not None and first_seen <= first < scan.txn_starts[(pid, last)]
                       and first > scan.txn_after_marker.get((pid, last), -1)
                       and _offset_removed(scan, peek, first)
                       and _batch_empty(scan, peek, scan.txn_starts[(pid, last)]))):
            # a transaction the entry says began before this range's first offset may have
            # batches in an earlier range or segment: only a start seen here is compared (a
            # start known here, after the producer's previous marker, always); one whose
            # batches the cleaner removed from an offset in this range on may keep its last
            # batch, empty, further on
            problem = (f"aborted transaction of producer {pid} starts at offset "
                       f"{scan.txn_starts[(pid, last)]} in the log, the entry says {first}")
        elif ((pid, last) not in scan.txn_starts and first_seen is not None and first >= first_seen
              and not _offset_removed(scan, peek, first)):
            problem = (f"aborted transaction of producer {pid} has no batch from offset {first} "
                       f"in the log")
        if problem is not None:
            scan.add("txnindex", index_position, "txnindex", problem, offset=last)
    for marker in sorted(scan.abort_markers):
        if marker in listed:
            continue
        cleaned = _cleaned_marker(scan, peek, marker)
        if cleaned is None:
            scan.txn_deferred.append([marker[0], marker[1], 1])
        elif not cleaned:
            scan.add("txnindex", -1, "txnindex", marker_without_entry(*marker), offset=marker[1])
    scan.summary["txnindex_entries"] = checked
