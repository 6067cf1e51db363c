"""One partition's log: its segments, offsets → byte ranges, appends, rolls, flushes.

The model is read-mostly: segments are scanned lazily (:mod:`lazyconv.logdir._segment`), and a
trailing partial entry (a writer still appending) is simply not visible yet.
:meth:`PartitionLog.append` is the one writer (a server's Produce path): it rolls segments at
``segment.bytes``, writes the sparse ``.index`` / ``.timeindex`` as a broker does
(:mod:`lazyconv.logdir._index`), and undoes a write that fails half-way (a full disk), so the
partition stays writable. Opening a partition runs Kafka's log recovery on what was written
after the last clean point (:mod:`lazyconv.logdir._recovery`).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lazyconv.errors import ConfigurationError, CorruptRecordError, StorageError
from lazyconv.logdir._checkpoint import clear_leader_epochs, read_leader_epochs
from lazyconv.logdir._durability import Flusher, fsync_directory, fsync_path, write_atomically
from lazyconv.logdir._entry import (
    HEADER_READ,
    MIN_ENTRY_SIZE,
    Entry,
    assign_offsets,
    parse_entry_header,
)
from lazyconv.logdir._index import DEFAULT_INDEX_INTERVAL_BYTES, IndexCursor, expected_indexes
from lazyconv.logdir._naming import offset_from_name, segment_file_name
from lazyconv.logdir._segment import Segment
from lazyconv.logdir._snapshot import decode_snapshot, snapshot_offsets, snapshot_path
from lazyconv.logdir._transactions import PartitionTransactions
from lazyconv.logdir._txnindex import AbortedTxn, encode_txnindex_entry
from lazyconv.records._format import PARTITION_LEADER_EPOCH_LENGTH, PARTITION_LEADER_EPOCH_OFFSET

if TYPE_CHECKING:
    from lazyconv.logdir._recovery import RecoveryReport

log = logging.getLogger(__name__)

# A directory unchanged for this long before it was listed keeps its mtime until it changes.
_SETTLED_NS = 2_000_000_000
# Listed again after this long whatever its mtime says (file systems that do not keep it).
_RELIST_NS = 1_000_000_000

__all__ = ["PartitionLog", "LogConfig", "Region", "OffsetOutOfRange", "DEFAULT_SEGMENT_BYTES"]

_INT32_MAX = (1 << 31) - 1
DEFAULT_SEGMENT_BYTES = 1 << 30  # Kafka's log.segment.bytes


@dataclass(frozen=True)
class LogConfig:
    """How appended data is laid out and made durable (Kafka's setting names in brackets).

    - ``segment_bytes``: roll to a new segment when the next append would take the active one
      past this [``log.segment.bytes``];
    - ``index_interval_bytes``: log bytes between two index entries [``index.interval.bytes``];
    - ``flush_messages``: fsync a partition once this many messages were appended to it since
      its last flush; ``None``: never for that reason [``log.flush.interval.messages``];
    - ``flush_ms``: fsync a partition whose oldest unflushed append is this old; ``None``: never
      for that reason [``log.flush.interval.ms``].

    Kafka's defaults leave flushing to the operating system (and fsync rolled segments, which
    this log does too): a process crash loses nothing acknowledged, a power loss may lose
    what the OS had not written yet.
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    flush_messages: int | None = None
    flush_ms: int | None = None

    def __post_init__(self) -> None:
        if not MIN_ENTRY_SIZE <= self.segment_bytes <= _INT32_MAX:
            raise ConfigurationError(
                f"segment bytes must be between {MIN_ENTRY_SIZE} and {_INT32_MAX}, got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ConfigurationError(f"index interval bytes must be >= 0, got {self.index_interval_bytes}")
        for name in ("flush_messages", "flush_ms"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigurationError(f"{name} must be at least 1 (or unset), got {value}")


@dataclass(frozen=True, slots=True)
class Region:
    """Where a fetch starts: the entry holding the fetch offset up to the end of its segment."""

    path: Path | None  # None: nothing at or after the offset yet (offset == high watermark)
    segment: Segment | None
    position: int
    end: int
    first_entry_size: int
    high_watermark: int
    log_start_offset: int
    first_entry_codec: int = 0  # the compression codec of the entry holding the fetch offset


class OffsetOutOfRange(Exception):
    """The fetch offset is outside [log start offset, high watermark]."""


class PartitionLog:
    """The segments of one partition directory, oldest first.

    Opening it runs log recovery (:func:`lazyconv.logdir._recovery.recover_partition`) unless
    ``recover`` is false: the entries written after the last clean point are validated, a torn
    last entry is cut off, missing or torn index files are rebuilt. ``recovery_point`` is the
    offset below which the log is known to be on disk (from the log directory's
    ``recovery-point-offset-checkpoint``). What recovery found and did (bytes and offsets cut
    off, corruption kept, index files rebuilt) is :attr:`recovery_report` (``None`` when it did
    not run); a cut is also logged, one warning per partition.
    """

    def __init__(self, topic: str, partition: int, directory: Path, *,
                 config: LogConfig | None = None, flusher: Flusher | None = None,
                 recovery_point: int | None = None, recover: bool = True,
                 log_start_checkpoint: int | None = None) -> None:
        self.topic = topic
        # the log start offset DeleteRecords left (log-start-offset-checkpoint), if any
        self.log_start_checkpoint = log_start_checkpoint
        # (epoch, start offset) from a broker's leader-epoch-checkpoint; empty for serve's logs
        self.leader_epochs = read_leader_epochs(directory)
        self.partition = partition
        self.directory = directory
        self.config = config or LogConfig()
        self.flusher = flusher or Flusher()
        self.segments: list[Segment] = []
        self._lock = threading.Lock()
        self.transactions = PartitionTransactions()
        self.recovery_point = recovery_point
        # What was written since the last fsync: files, and whether names were created.
        self._dirty: set[Path] = set()
        self._directory_dirty = False
        self.unflushed_messages = 0
        self.unflushed_at_last_append = 0  # unflushed_messages right after the last append
        self.first_unflushed_at: float | None = None  # time.monotonic() of the oldest unflushed append
        # whether this process changed the directory (appends, repairs): a directory that was
        # only read gets no recovery-point checkpoint written into it
        self.modified = False
        # Called at a roll with the new segment's base offset: the producer snapshot bytes to
        # write at that offset once the rolled segment is on disk (None: no snapshot).
        self.on_roll: Callable[[PartitionLog, int], bytes | None] | None = None
        # The directory's (mtime, inode) at the last listing and when that listing began: a
        # fetch lists the directory again only when it may have changed (see _names_if_changed).
        self._listed_stamp: tuple[int, int] | None = None
        self._listed_at_ns = 0
        self.snapshot_offsets = snapshot_offsets(directory)
        self.recovery_report: RecoveryReport | None = None
        self._scan(quiet=recover)
        if recover:
            from lazyconv.logdir._recovery import recover_partition

            self.recovery_report = recover_partition(self)
            self._start_at_log_start_checkpoint()

    def _start_at_log_start_checkpoint(self) -> None:
        """Kafka's LogLoader: when ``log-start-offset-checkpoint`` puts the log start above the
        log end offset (segment files deleted behind the broker's back), every segment and
        producer snapshot is deleted, with a warning, the leader epochs are cleared (in memory
        and in ``leader-epoch-checkpoint``: they were those of offsets that no longer exist),
        and the log starts again, empty, at the checkpoint; a partition without segments gets
        its first one there.

        Nothing deleted was readable: every record in it lies below the log start offset."""
        checkpoint = self.log_start_checkpoint
        end = self.high_watermark
        if checkpoint is None or checkpoint <= end:
            return
        if self.segments:
            log.warning("%s-%d: deleting all segments because the log end offset (%d) is smaller "
                        "than the log start offset %d of log-start-offset-checkpoint; this could "
                        "happen if segment files were deleted from the file system", self.topic,
                        self.partition, end, checkpoint)
        try:
            for segment in self.segments:
                for path in (segment.path, segment.index_path, segment.timeindex_path,
                             segment.txnindex_path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            had_segments = bool(self.segments)
            self.segments.clear()
            for offset in list(self.snapshot_offsets):
                self.delete_snapshot(offset)
            if had_segments:  # Kafka's LogLoader clears the epochs only with the segments
                self.leader_epochs = []
                clear_leader_epochs(self.directory)
            self._create_segment(checkpoint)
        except (OSError, StorageError) as exc:
            log.error("%s-%d: cannot start the log at its log start offset %d: %s", self.topic,
                      self.partition, checkpoint, exc)
            self.segments.clear()
            self._listed_stamp = None
            self._scan()  # what is left on disk
            return
        self.recovery_point = checkpoint
        self.transactions = PartitionTransactions()

    def refresh(self) -> None:
        """Pick up new segment files and entries appended to existing ones."""
        self._scan()

    def _names_if_changed(self) -> list[str] | None:
        """The directory's names, or None when it cannot have changed since the last listing:
        its mtime and inode are the same, it had not changed for 2 s before that listing began
        (file systems stamp times coarsely, so a change right after a listing may keep the
        mtime it had; git treats its index the same way), and that listing is under a second
        old."""
        st = os.stat(self.directory)
        stamp = (st.st_mtime_ns, st.st_ino)
        began = time.time_ns()
        if (stamp == self._listed_stamp and self._listed_at_ns - st.st_mtime_ns > _SETTLED_NS
                and began - self._listed_at_ns < _RELIST_NS):
            return None
        names = os.listdir(self.directory)
        self._listed_stamp, self._listed_at_ns = stamp, began
        return names

    def _scan(self, quiet: bool = False) -> None:
        with self._lock:
            previous_active = self.segments[-1] if self.segments else None
            new = []
            names = self._names_if_changed()
            known = {s.path.name for s in self.segments} if names else set()
            for name in names or ():
                base = offset_from_name(name)
                if base is not None and name not in known:
                    new.append(Segment(self.directory / name, base))
            if new:
                self.segments.extend(new)
                self.segments.sort(key=lambda s: s.base_offset)
            new_ids = {id(s) for s in new}
            # Rolled segments are immutable: only new ones and the active (last) one can grow,
            # and the one that was active until now may have been completed before a roll.
            for segment in self.segments:
                if (id(segment) in new_ids or segment is self.segments[-1] or segment is previous_active
                        or segment.scanned_bytes == 0):
                    segment.refresh(active=segment is self.segments[-1], quiet=quiet)

    @property
    def log_start_offset(self) -> int:
        """Kafka's log start offset: the base offset of the oldest segment, or the offset
        DeleteRecords moved it to (``log-start-offset-checkpoint``) when that is larger."""
        first = self.segments[0].base_offset if self.segments else 0
        checkpoint = self.log_start_checkpoint
        return first if checkpoint is None or checkpoint < first else checkpoint

    @property
    def high_watermark(self) -> int:
        """Offset after the last complete entry of the log (every entry counts as committed)."""
        return self._next_offset_locked()

    def entries(self) -> Iterator[tuple[Segment, Entry]]:
        for segment in self.segments:
            for entry in segment.entries:
                yield segment, entry

    def locate(self, fetch_offset: int, max_offset: int | None = None) -> Region:
        """The readable region a fetch at ``fetch_offset`` starts in (one segment, complete
        entries only). Raises :class:`OffsetOutOfRange` outside ``[log start, high watermark]``.

        ``max_offset`` (a read_committed fetch's last stable offset) ends the region before the
        first entry holding an offset at or above it."""
        self.refresh()
        hw = self.high_watermark
        start_offset = self.log_start_offset
        if fetch_offset < start_offset or fetch_offset > hw:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} outside [{start_offset}, {hw}] of {self.topic}-{self.partition}"
            )
        for segment in self._segments_from(fetch_offset):
            i = segment.entry_index_for(fetch_offset)
            if i >= len(segment.entries) and segment.corruption is not None:
                raise segment.corruption  # the offset lies in or after data that cannot be read
            if i < len(segment.entries):
                entry = segment.entries[i]
                end = segment.scanned_bytes
                if max_offset is not None:
                    j = segment.entry_index_for(max_offset)
                    if j < len(segment.entries):
                        end = segment.positions[j]
                    if end <= entry.position:
                        return Region(None, None, 0, 0, 0, hw, start_offset)
                return Region(segment.path, segment, entry.position, end, entry.size, hw, start_offset,
                              entry.codec)
        return Region(None, None, 0, 0, 0, hw, start_offset)

    def _segments_from(self, offset: int) -> list[Segment]:
        bases = [s.base_offset for s in self.segments]
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        return self.segments[i:]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` at or after
        the log start offset, as Kafka's ListOffsets finds it: the first segment whose largest
        timestamp reaches the target, in it the first entry whose max timestamp does (from its
        header), then the first record inside that does and is not below the log start
        (records DeleteRecords removed are still in the segment). ``None`` when no record of
        that segment qualifies (Kafka looks no further)."""
        from lazyconv.records import FileRecords

        self.refresh()
        start = self.log_start_offset
        for segment in self.segments:
            if not any(entry.max_timestamp >= timestamp for entry in segment.entries):
                continue
            for entry in segment.entries:
                if entry.max_timestamp < timestamp or entry.last_offset < start:
                    continue
                with FileRecords(segment.path, start=entry.position,
                                 end=entry.position + entry.size) as records:
                    for batch in records.batches():
                        for record in batch:
                            if record.timestamp >= timestamp and record.offset >= start:
                                return record.offset, record.timestamp
            return None
        return None

    def epoch_for_offset(self, offset: int, default: int = 0) -> int:
        """The leader epoch under which ``offset`` was written, from the leader-epoch
        checkpoint (Kafka's epochForOffset: the last epoch starting at or before it; -1 before
        the first); ``default`` when the log has no checkpoint (serve's own logs)."""
        if not self.leader_epochs:
            return default
        found = -1
        for epoch, start in self.leader_epochs:
            if start <= offset:
                found = epoch
        return found

    def latest_epoch(self, default: int = 0) -> int:
        """The last leader epoch of the checkpoint (``default`` without one)."""
        return self.leader_epochs[-1][0] if self.leader_epochs else default

    def batch_leader_epoch(self, offset: int) -> int:
        """The partition leader epoch in the header of the v2 batch holding ``offset`` (what
        Kafka's ListOffsets reports with an offset found by timestamp); -1 for a legacy entry,
        a batch without one, or an offset the log does not hold."""
        for segment in self._segments_from(offset):
            i = segment.entry_index_for(offset)
            if i >= len(segment.entries):
                continue
            entry = segment.entries[i]
            if entry.magic < 2:
                return -1
            with open(segment.path, "rb") as file:
                file.seek(entry.position + PARTITION_LEADER_EPOCH_OFFSET)
                data = file.read(PARTITION_LEADER_EPOCH_LENGTH)
            return int.from_bytes(data, "big", signed=True) if len(data) == PARTITION_LEADER_EPOCH_LENGTH else -1
        return -1

    def transaction_state(self) -> PartitionTransactions:
        """The partition's transaction state, brought up to date with the log."""
        self.refresh()
        with self._lock:
            self.transactions.update(self)
        return self.transactions

    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        state = self.transaction_state()
        return state.last_stable_offset(self.high_watermark)

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp
        (ListOffsets −3, KIP-734); ``None`` for an empty log."""
        self.refresh()
        best: Entry | None = None
        for _segment, entry in self.entries():
            if best is None or entry.max_timestamp > best.max_timestamp:
                best = entry
        if best is None:
            return None
        found = self.offset_for_timestamp(best.max_timestamp)
        return found if found is not None else (best.last_offset, best.max_timestamp)

    def append(self, entries: list[tuple[bytes, int]]) -> tuple[int, int]:
        """Append entries whose offsets are assigned by ``assign(bytes, next_offset)``.

        ``entries`` holds ``(entry_bytes, record_count)`` pairs; each entry's offset fields are
        rewritten here, under the partition lock, so concurrent producers get distinct offsets.
        Returns ``(base offset of the first entry, log start offset)``. Creates the first
        segment when the partition directory has none, rolls to a new one at ``segment_bytes``
        and adds the index entries the data calls for.

        Raises :class:`~lazyconv.errors.StorageError` when the log cannot be written (a full
        disk, an I/O error) or must not be (corrupt data or a partial entry at its end); what a
        failed write had put on disk is removed again, so nothing of it is ever read and the
        next append may succeed.
        """
        with self._lock:
            if not self.segments:
                self._create_segment(0)
            segment = self.segments[-1]
            segment.refresh()
            self._check_appendable(segment)
            next_offset = self._next_offset_locked()
            base = next_offset
            pieces = []
            for data, count in entries:
                pieces.append(assign_offsets(data, next_offset))
                next_offset += count
            size = sum(len(piece) for piece in pieces)
            if segment.scanned_bytes > 0 and (
                    segment.scanned_bytes + size > self.config.segment_bytes
                    or next_offset - 1 - segment.base_offset > _INT32_MAX):
                # Kafka's shouldRoll: the segment would pass segment.bytes, or an offset would
                # not fit the indexes' 32-bit relative offsets
                segment = self._roll(base)
            self._write(segment, pieces)
            self.unflushed_messages += next_offset - base
            # read by the appender right after, unlike unflushed_messages, which a flush
            # starting on the flusher thread may zero before its fsync is done
            self.unflushed_at_last_append = self.unflushed_messages
            if self.first_unflushed_at is None:
                self.first_unflushed_at = time.monotonic()
            return base, self.log_start_offset

    def _check_appendable(self, segment: Segment) -> None:
        if segment.corruption is not None:
            raise StorageError(f"{segment.path} holds corrupt data ({segment.corruption}); "
                               "refusing to append after it")
        try:
            file_size = os.stat(segment.path).st_size
        except OSError as exc:
            raise StorageError(f"cannot append to {segment.path}: {exc}") from exc
        if file_size != segment.scanned_bytes:
            # a partial entry at the end (another writer) would corrupt what follows
            raise StorageError(
                f"{segment.path} ends with {file_size - segment.scanned_bytes} bytes of a "
                "partial entry; refusing to append after it", segment.scanned_bytes)

    def _create_segment(self, base_offset: int) -> Segment:
        """Create an empty segment (``.log``, ``.index``, ``.timeindex``) and make it active."""
        segment = Segment(self.directory / segment_file_name(base_offset), base_offset)
        created = []
        try:
            for path in (segment.path, segment.index_path, segment.timeindex_path):
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    continue  # left by an earlier attempt; checked like any other segment
                os.close(fd)
                created.append(path)
        except OSError as exc:
            for path in created:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise StorageError(f"cannot create segment {segment.path}: {exc}") from exc
        self._directory_dirty = True
        self.modified = True
        segment.refresh()  # a file left by an earlier attempt may hold entries (checked by _cursor)
        self.segments.append(segment)
        return segment

    def _roll(self, new_base: int) -> Segment:
        """Make a new active segment at ``new_base``; the old one gets its final time index
        entry, and is fsynced and followed by a producer snapshot in the background."""
        old = self.segments[-1]
        cursor = self._cursor(old)
        saved = cursor.copy()
        final = cursor.final_time_entry()
        try:
            if final:
                _write_at(old.timeindex_path, final, saved.time_index_size)
            new = self._create_segment(new_base)
        except (OSError, StorageError) as exc:
            old.index = saved
            _truncate_quietly(old.timeindex_path, saved.time_index_size)
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"cannot roll {self.topic}-{self.partition}: {exc}") from exc
        self._dirty.update((old.path, old.index_path, old.timeindex_path))
        if old.txnindex_path.exists():
            self._dirty.add(old.txnindex_path)
        old.index = None  # rolled: nothing is appended to it any more
        snapshot = self.on_roll(self, new_base) if self.on_roll is not None else None
        log.info("rolled %s-%d to a new segment at offset %d", self.topic, self.partition, new_base)
        self.flusher.submit(lambda: self._after_roll(new_base, snapshot))
        return new

    def _after_roll(self, new_base: int, snapshot: bytes | None) -> None:
        """On the flusher thread: put what precedes ``new_base`` on disk, then the snapshot (a
        snapshot file therefore always marks a point up to which the log is durable)."""
        self.flush()
        if snapshot is not None:
            self.write_snapshot(new_base, snapshot)

    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Write the producer snapshot at ``offset`` (fsynced; failures are logged: a missing
        snapshot only means a longer rebuild at the next start)."""
        try:
            write_atomically(snapshot_path(self.directory, offset), data)
        except OSError as exc:
            log.warning("cannot write the producer snapshot of %s-%d at offset %d: %s", self.topic,
                        self.partition, offset, exc)
            return
        with self._lock:
            if offset not in self.snapshot_offsets:
                bisect.insort(self.snapshot_offsets, offset)
            # Kafka's removeStraySnapshots: keep those at segment base offsets and the newest
            bases = {s.base_offset for s in self.segments}
            stray = [o for o in self.snapshot_offsets[:-1] if o not in bases]
        for old in stray:
            self.delete_snapshot(old)

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove the snapshots above ``offset`` (their data is gone, as after a truncation)."""
        with self._lock:
            doomed = [o for o in self.snapshot_offsets if o > offset]
        for stale in doomed:
            self.delete_snapshot(stale)

    def delete_snapshot(self, offset: int) -> None:
        """Remove the producer snapshot at ``offset`` (stale or unreadable); failures are logged."""
        with self._lock:
            if offset in self.snapshot_offsets:
                self.snapshot_offsets.remove(offset)
        path = snapshot_path(self.directory, offset)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot delete the producer snapshot %s: %s", path, exc)

    def _cursor(self, segment: Segment) -> IndexCursor:
        """The index state of the segment being appended to; the first time, its index files
        are made to hold exactly what its entries call for (a crash or another writer may have
        left them behind, or written them with another index interval)."""
        if segment.index is not None:
            return segment.index
        offsets, times, cursor = expected_indexes(
            segment.base_offset, ((e.position, e.size, e.last_offset, e.max_timestamp) for e in segment.entries),
            interval=self.config.index_interval_bytes, rolled=False)
        try:
            for path, data in ((segment.index_path, offsets), (segment.timeindex_path, times)):
                if _read_or_none(path) != data:
                    log.info("rewriting %s from its segment (%d bytes)", path, len(data))
                    path.write_bytes(data)
                    self._dirty.add(path)
                    self.modified = True
        except OSError as exc:
            raise StorageError(f"cannot write the index files of {segment.path}: {exc}") from exc
        segment.index = cursor
        return cursor

    def _write(self, segment: Segment, pieces: list[bytes]) -> None:
        """Write entries (offsets assigned) at the end of ``segment`` and their index entries;
        on failure remove every byte written and leave the index state as it was."""
        cursor = self._cursor(segment)
        saved = cursor.copy()
        position = segment.scanned_bytes
        offset_entries = bytearray()
        time_entries = bytearray()
        at = position
        for piece in pieces:
            entry = parse_entry_header(piece[:HEADER_READ], at, at + len(piece), segment.path)
            assert entry is not None  # a complete entry validated by Produce
            offset_entry, time_entry = cursor.add(at, len(piece), entry.last_offset, entry.max_timestamp)
            offset_entries += offset_entry
            time_entries += time_entry
            at += len(piece)
        try:
            _write_at(segment.path, b"".join(pieces), position)
            if offset_entries:
                _write_at(segment.index_path, bytes(offset_entries), saved.offset_index_size)
            if time_entries:
                _write_at(segment.timeindex_path, bytes(time_entries), saved.time_index_size)
        except OSError as exc:
            segment.index = saved
            _truncate_quietly(segment.path, position)
            _truncate_quietly(segment.index_path, saved.offset_index_size)
            _truncate_quietly(segment.timeindex_path, saved.time_index_size)
            raise StorageError(f"cannot append {at - position} bytes to {segment.path}: {exc}; "
                               "the partial write was removed") from exc
        self._dirty.add(segment.path)
        self.modified = True
        if offset_entries:
            self._dirty.add(segment.index_path)
        if time_entries:
            self._dirty.add(segment.timeindex_path)
        segment.refresh()

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction to the ``.txnindex`` of the segment holding its marker
        (Kafka creates the file when the first abort marker lands in a segment)."""
        with self._lock:
            segments = self._segments_from(txn.last_offset)
            if not segments:
                return
            path = segments[0].txnindex_path
            try:
                size = path.stat().st_size if path.exists() else 0
                size -= size % len(encode_txnindex_entry(txn))  # never after a torn entry
                _write_at(path, encode_txnindex_entry(txn), size)
            except OSError as exc:
                log.error("cannot add the aborted transaction of producer %d at offset %d to %s: %s",
                          txn.producer_id, txn.last_offset, path, exc)
                return
            self._dirty.add(path)
            self.modified = True
            if size == 0:
                self._directory_dirty = True

    def flush(self) -> None:
        """fsync what was written since the last flush (segment and index files, and the
        directory when files were created in it), and move the recovery point up to it.
        Raises :class:`~lazyconv.errors.StorageError`."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            directory_dirty, self._directory_dirty = self._directory_dirty, False
            messages, self.unflushed_messages = self.unflushed_messages, 0
            since, self.first_unflushed_at = self.first_unflushed_at, None
            end = self._next_offset_locked()
        try:
            for path in sorted(dirty):
                fsync_path(path)
            if directory_dirty:
                fsync_directory(self.directory)
        except OSError as exc:
            with self._lock:  # still to be made durable
                self._dirty |= dirty
                self._directory_dirty |= directory_dirty
                self.unflushed_messages += messages
                if since is not None and (self.first_unflushed_at is None or since < self.first_unflushed_at):
                    self.first_unflushed_at = since
            raise StorageError(f"cannot fsync {self.topic}-{self.partition}: {exc}") from exc
        if self.recovery_point is None or end > self.recovery_point:
            self.recovery_point = end

    def mark_unflushed(self, segment: Segment) -> None:
        """Recovery validated ``segment`` but cannot tell it is on disk: the next flush fsyncs it."""
        with self._lock:
            self._dirty.update(p for p in (segment.path, segment.index_path, segment.timeindex_path)
                               if p.exists())

    def max_producer_id(self) -> int:
        """The largest producer id in the log's batches and its latest producer snapshot
        (-1: none); the producer-id allocator stays above it."""
        best = max((s.max_producer_id for s in self.segments), default=-1)
        if self.snapshot_offsets:
            path = snapshot_path(self.directory, self.snapshot_offsets[-1])
            try:
                entries = decode_snapshot(path.read_bytes(), path)
            except (OSError, CorruptRecordError, ValueError) as exc:
                log.warning("cannot read producer snapshot %s: %s", path, exc)
            else:
                best = max([best, *(e.producer_id for e in entries)])
        return best

    def _next_offset_locked(self) -> int:
        # an empty last segment (just rolled, or after a truncation) fixes the next offset too
        floor = self.segments[-1].base_offset if self.segments else 0
        for segment in reversed(self.segments):
            if segment.entries:
                return max(segment.next_offset, floor)
        return floor


def _write_at(path: Path, data: bytes, position: int) -> None:
    """Write all of ``data`` at ``position`` of ``path`` (created if missing). Raises OSError
    (e.g. ENOSPC after part of it was written: the caller removes that part)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        written = 0
        while written < len(view):
            n = os.pwrite(fd, view[written:], position + written)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            written += n
    finally:
        os.close(fd)


def _truncate_quietly(path: Path, size: int) -> None:
    """Cut ``path`` back to ``size`` after a failed write (shrinking needs no free space)."""
    try:
        if os.stat(path).st_size > size:
            os.truncate(path, size)
    except FileNotFoundError:
        pass
    except OSError as exc:
        # What is left after ``size`` is never read (the scan stops there) and recovery cuts
        # it off at the next start; appends are refused until then.
        log.error("cannot remove the partial write at the end of %s: %s", path, exc)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
