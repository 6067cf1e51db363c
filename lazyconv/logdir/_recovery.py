"""Log recovery when a partition is opened, as Kafka's ``LogLoader`` / ``LogSegment.recover``.

What a crash can leave behind is confined to what was written after the partition's last
*clean point*: the larger of its recovery point (``recovery-point-offset-checkpoint``, written
at a clean shutdown and after flushes) and its latest producer snapshot (written once the log
before it was fsynced). Without either, the active segment is taken as unclean. On opening:

1. every complete entry at or after the clean point has its CRC checked (CRC-32C of a v2
   batch, CRC-32 of a v0/v1 message, as ``RecordBatch.ensureValid``);
2. a torn entry at the very end of the active segment is cut off, keeping everything before it:
   a partial size field, an entry whose (plausible) size runs past the end of the file, zeros
   where the file was extended but never written (a power loss), or a last entry whose CRC
   fails;
3. corruption anywhere else (a bad CRC with entries after it, a size field no broker writes
   such as 0x7fffffff in the middle of a segment, an unknown magic) is not cut off (the data
   after it may be intact and acknowledged): it is logged as an error, fetches that reach it
   are answered with a storage error, and appends to that segment are refused;
4. the ``.index`` / ``.timeindex`` of the segments checked are rewritten when they differ from
   what the log calls for; missing or torn index files of any segment are rebuilt;
5. producer snapshots above the new log end and ``.txnindex`` entries of markers that are gone
   are removed.

Nothing is written when nothing needs repair, and a directory that cannot be written (read
only) is served as it is, with a warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lazyconv.errors import CorruptRecordError
from lazyconv.logdir._entry import entry_crc_ok
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, expected_indexes
from lazyconv.logdir._txnindex import trim_txnindex
from lazyconv.records._format import LOG_OVERHEAD

if TYPE_CHECKING:
    from lazyconv.logdir._partition import PartitionLog
    from lazyconv.logdir._segment import Segment

log = logging.getLogger(__name__)

__all__ = ["RecoveryReport", "recover_partition"]

_READ_CHUNK = 8 << 20


@dataclass
class RecoveryReport:
    """What recovery of one partition found and did."""

    start_offset: int | None = None  # entries from here on were validated (None: none were)
    entries_checked: int = 0
    truncated_bytes: int = 0
    truncated_at: int | None = None  # byte position in the active segment
    # first and last offset of the complete entry cut off (its CRC failed; a fetch could read
    # it before the crash); None when nothing was cut or only an incomplete entry, never readable
    truncated_offsets: tuple[int, int] | None = None
    corrupt: list[str] = field(default_factory=list)  # corruption kept (reported, not cut)
    rebuilt_indexes: list[Path] = field(default_factory=list)


def recover_partition(plog: PartitionLog) -> RecoveryReport:
    """Recover ``plog`` (just opened and scanned); see the module documentation."""
    report = RecoveryReport()
    if not plog.segments:
        return report
    last = plog.segments[-1]
    end = plog.high_watermark
    clean_points = [o for o in plog.snapshot_offsets if o <= end][-1:]
    if plog.recovery_point is not None:
        clean_points.append(min(plog.recovery_point, end))
    start = max(clean_points) if clean_points else last.base_offset

    truncate_at: int | None = None
    cut_offsets: tuple[int, int] | None = None
    checked: list[Segment] = []
    if start < end:
        report.start_offset = start
        for segment in plog._segments_from(start):
            first = segment.entry_index_for(start)
            if first >= len(segment.entries):
                continue
            checked.append(segment)
            for j in _bad_crc_entries(segment, first, report):
                entry = segment.entries[j]
                if segment is last and j == len(segment.entries) - 1:
                    truncate_at = entry.position  # the last entry was torn: cut it off
                    cut_offsets = (entry.first_offset, entry.last_offset)
                else:
                    # kept, entries follow it; fenced: read up to it, never from or past it, and
                    # nothing appended after it (logged once, with the other corruption, below)
                    message = (f"{segment.path}: entry at byte {entry.position} (offsets "
                               f"{entry.first_offset}-{entry.last_offset}) fails its CRC check")
                    report.corrupt.append(message)
                    segment.fence(j, CorruptRecordError(message))
                    break

    try:
        file_size = os.stat(last.path).st_size
    except OSError as exc:
        log.error("cannot recover %s: %s", last.path, exc)
        return report
    if truncate_at is None and last.scanned_bytes < file_size:
        if (last.corruption is None or _all_zero(last.path, last.scanned_bytes, file_size)
                or _all_zero(last.path, last.scanned_bytes + LOG_OVERHEAD, file_size)):
            # a partial entry, never-written zeros, or a header torn by a power loss (its first
            # bytes written, zeros from its size field on: no entry was ever acknowledged there)
            truncate_at = last.scanned_bytes
        else:
            report.corrupt.append(f"{last.path}: {file_size - last.scanned_bytes} bytes after the "
                                  f"corrupt data at byte {last.scanned_bytes} are kept")

    truncated = False
    if truncate_at is not None:
        try:
            os.truncate(last.path, truncate_at)
        except OSError as exc:
            log.error("cannot cut the torn end off %s at byte %d: %s; it stays invisible, and "
                      "appends are refused", last.path, truncate_at, exc)
        else:
            truncated = True
            plog.modified = True
            report.truncated_at = truncate_at
            report.truncated_bytes = file_size - truncate_at
            report.truncated_offsets = cut_offsets
            last.corruption = None  # it was in the part cut off
            last.refresh(quiet=True)  # this line is the one that says what was cut
            if last not in checked:
                checked.append(last)
            end = plog.high_watermark
            log.warning("recovered %s-%d: cut %d bytes of a torn entry (%s) off %s at byte %d; the "
                        "log now ends at offset %d", plog.topic, plog.partition,
                        file_size - truncate_at,
                        "incomplete, never readable" if cut_offsets is None else
                        f"offsets {cut_offsets[0]}-{cut_offsets[1]}, its CRC fails",
                        last.path.name, truncate_at, end)
            plog.delete_snapshots_after(end)
            trim_txnindex(last.txnindex_path, end)

    for segment in plog.segments:
        if segment.corruption is not None:
            kept = os.path.getsize(segment.path) - segment.scanned_bytes if segment.path.exists() else 0
            log.error("%s; the %d bytes after it are kept but cannot be read: fetches reaching them "
                      "are answered with a storage error%s", segment.corruption, kept,
                      ", appends are refused until it is repaired" if segment is last else "")
            if segment is not last and str(segment.corruption) not in report.corrupt:
                report.corrupt.append(str(segment.corruption))
        rolled = segment is not last
        if segment in checked:
            _rebuild_indexes(plog, segment, rolled, report, only_if_broken=False)
        else:
            _rebuild_indexes(plog, segment, rolled, report, only_if_broken=True)

    if checked or truncated:
        for segment in checked:
            plog.mark_unflushed(segment)  # validated, but only an fsync makes it a clean point
        plog.recovery_point = min(start, plog.high_watermark)
    elif plog.recovery_point is None or plog.recovery_point > end:
        plog.recovery_point = end if clean_points else last.base_offset
    if report.entries_checked:
        log.info("recovered %s-%d from offset %d: %d entries checked, %d bytes cut, %d corrupt "
                 "places kept", plog.topic, plog.partition, start, report.entries_checked,
                 report.truncated_bytes, len(report.corrupt))
    return report


def _bad_crc_entries(segment: Segment, first: int, report: RecoveryReport) -> list[int]:
    """Indexes (into ``segment.entries``) of the entries from ``first`` whose CRC fails."""
    bad: list[int] = []
    try:
        fd = os.open(segment.path, os.O_RDONLY)
    except OSError as exc:
        log.error("cannot validate %s: %s", segment.path, exc)
        return bad
    try:
        buffer = b""
        buffer_at = 0
        for j in range(first, len(segment.entries)):
            entry = segment.entries[j]
            if entry.position < buffer_at or entry.position + entry.size > buffer_at + len(buffer):
                buffer_at = entry.position
                buffer = _read(fd, max(_READ_CHUNK, entry.size), buffer_at)
            data = memoryview(buffer)[entry.position - buffer_at:entry.position - buffer_at + entry.size]
            report.entries_checked += 1
            if len(data) < entry.size or not entry_crc_ok(data, entry.magic):
                bad.append(j)
    finally:
        os.close(fd)
    return bad


def _read(fd: int, size: int, position: int) -> bytes:
    parts = []
    while size > 0:
        piece = os.pread(fd, size, position)
        if not piece:
            break
        parts.append(piece)
        size -= len(piece)
        position += len(piece)
    return b"".join(parts)


def _all_zero(path: Path, start: int, end: int) -> bool:
    """Whether ``path`` holds only zero bytes in ``[start, end)`` (blocks a crash left
    allocated but unwritten)."""
    with open(path, "rb") as f:
        f.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = f.read(min(_READ_CHUNK, remaining))
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                return False
            remaining -= len(chunk)
    return True


def _rebuild_indexes(plog: PartitionLog, segment: Segment, rolled: bool, report: RecoveryReport, *,
                     only_if_broken: bool) -> None:
    """Make ``segment``'s index files what its entries call for: always (``only_if_broken``
    false), or only when a file is missing or ends in a partial entry."""
    paths = ((segment.index_path, OFFSET_ENTRY_SIZE), (segment.timeindex_path, TIME_ENTRY_SIZE))
    if only_if_broken:
        broken = False
        for path, entry_size in paths:
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                broken = True
                break
            if size % entry_size:
                broken = True
                break
        if not broken:
            return
    offsets, times, _cursor = expected_indexes(
        segment.base_offset, ((e.position, e.size, e.last_offset, e.max_timestamp) for e in segment.entries),
        interval=plog.config.index_interval_bytes, rolled=rolled)
    for (path, _entry_size), data in zip(paths, (offsets, times), strict=True):
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            current = None
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
            continue
        if current == data:
            continue
        try:
            path.write_bytes(data)
        except OSError as exc:
            log.warning("cannot rebuild %s: %s", path, exc)
            continue
        log.info("rebuilt %s (%d bytes) from its segment", path, len(data))
        plog.modified = True
        report.rebuilt_indexes.append(path)
    segment.index = None  # an append makes sure the files match before it continues them
