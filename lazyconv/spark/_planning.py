"""Plan the validation job by bytes: byte ranges of segments, packed into balanced tasks.

A segment larger than the target range size is cut at offset-index entries: for each cut the
entry whose log position is the first at or after ``k x target`` is found by a binary search in
the ``.index`` file (a few 8-byte reads per cut, never the whole index), and the cut is kept
only when the log has a plausible entry header there whose last offset is the entry's offset
(a damaged index moves no cut into the middle of a batch; the range then just stays larger).
Ranges are then packed into tasks by size, largest first onto the least loaded task (LPT), so
the cores finish together.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable

from lazyconv.logdir._entry import MIN_ENTRY_SIZE
from lazyconv.logdir._index import OFFSET_ENTRY as _OFFSET_ENTRY
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE
from lazyconv.logdir._layout import SegmentFiles
from lazyconv.records._format import (
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_LENGTH,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
)
from lazyconv.spark._reader import SegmentReader
from lazyconv.spark._scan_state import ScanTask

__all__ = ["plan_ranges", "pack_tasks", "range_target"]

MIB = 1024 * 1024
MIN_RANGE_BYTES = 1 * MIB
MAX_RANGE_BYTES = 64 * MIB
# what a cut reads: an entry's header up to a v2 batch's last offset delta
_UP_TO_LAST_OFFSET_DELTA = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
_LAST_OFFSET_DELTA = struct.Struct(">i")


def range_target(total_bytes: int, tasks: int) -> int:
    """Bytes per range: an even share of the log per task, between 1 MiB and 64 MiB."""
    share = -(-total_bytes // max(1, tasks))
    return max(MIN_RANGE_BYTES, min(MAX_RANGE_BYTES, share))


def _cuts(seg: SegmentFiles, target: int) -> list[tuple[int, int]]:
    """``[(log position, offset)]`` where ranges of ``seg`` may start (after the first)."""
    try:
        index = SegmentReader(seg.index_path)
    except OSError:
        return []  # the scan reports the index; the segment stays one range
    try:
        log = SegmentReader(seg.log_path)
    except OSError:
        index.close()
        return []
    cuts: list[tuple[int, int]] = []
    try:
        entries = index.size // OFFSET_ENTRY_SIZE
        last_cut = 0
        wanted = target
        while wanted < seg.size and entries:
            lo, hi = 0, entries
            while lo < hi:  # first entry whose position >= wanted
                mid = (lo + hi) // 2
                rel, position = _OFFSET_ENTRY.unpack(index.read(mid * OFFSET_ENTRY_SIZE, OFFSET_ENTRY_SIZE))
                if position < wanted:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == entries:
                break
            rel, position = _OFFSET_ENTRY.unpack(index.read(lo * OFFSET_ENTRY_SIZE, OFFSET_ENTRY_SIZE))
            offset = seg.base_offset + rel
            if position > last_cut and position < seg.size and _starts_entry(log, position,
                                                                               offset):
                cuts.append((position, offset))
                last_cut = position
            wanted = max(wanted + target, position + 1)
    finally:
        index.close()
        log.close()
    return cuts


def _starts_entry(log: SegmentReader, position: int, offset: int) -> bool:
    head = log.read(position, _UP_TO_LAST_OFFSET_DELTA)
    if len(head) < HEADER_SIZE_UP_TO_MAGIC:
        return False
    base, size = LOG_HEADER.unpack_from(head)
    magic = head[MAGIC_OFFSET]
    if size < MIN_ENTRY_SIZE or magic > 2 or position + LOG_OVERHEAD + size > log.size:
        return False
    if magic == 2:
        return (len(head) == _UP_TO_LAST_OFFSET_DELTA
                and base + _LAST_OFFSET_DELTA.unpack_from(head, LAST_OFFSET_DELTA_OFFSET)[0] == offset)
    return base == offset


def plan_ranges(segments: Iterable[SegmentFiles], target: int) -> list[ScanTask]:
    """Every segment as one or more :class:`ScanTask` byte ranges of about ``target`` bytes."""
    segments = list(segments)
    last_of_partition: dict[tuple[str, int], int] = {}
    for seg in segments:
        name = (seg.topic, seg.partition)
        last_of_partition[name] = max(last_of_partition.get(name, -1), seg.base_offset)
    tasks: list[ScanTask] = []
    for seg in segments:
        cuts = _cuts(seg, target) if seg.size > target + target // 2 else []
        starts: list[tuple[int, int | None]] = [(0, None), *cuts]
        count = len(starts)
        last = last_of_partition[(seg.topic, seg.partition)] == seg.base_offset
        for i, (start, key) in enumerate(starts):
            end, end_key = starts[i + 1] if i + 1 < count else (-1, None)
            tasks.append(ScanTask.of(seg, start=start, end=end, start_key=key, end_key=end_key,
                                     range_index=i, range_count=count, last_in_partition=last))
    return tasks


def pack_tasks(ranges: list[ScanTask], bins: int) -> list[tuple[int, ScanTask]]:
    """``(task number, range)`` pairs: ranges packed largest first onto the least loaded of
    ``bins`` tasks (the job runs each pack as one Spark task)."""
    bins = max(1, min(bins, len(ranges)))
    heap = [(0, b) for b in range(bins)]
    out: list[tuple[int, ScanTask]] = []
    for task in sorted(ranges, key=lambda t: -(t.stop - t.start)):
        load, b = heapq.heappop(heap)
        out.append((b, task))
        heapq.heappush(heap, (load + (task.stop - task.start), b))
    return out
