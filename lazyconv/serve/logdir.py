"""A Kafka log directory as a server sees it: topics, partitions, segments, offsets → positions.

Layout (as a broker writes it): ``LOGDIR/<topic>-<partition>/<base offset, 20 digits>.log``
with ``.index`` / ``.timeindex`` beside each segment. The model is read-mostly: segments are
scanned lazily (entry headers only, read with ``os.pread``), the scan resumes where it stopped
when a file grows, and a trailing partial entry (a writer still appending) is simply not visible
yet. :meth:`PartitionLog.append` is the one writer (the server's Produce path): it rolls
segments at ``segment.bytes``, writes the sparse ``.index`` / ``.timeindex`` as a broker does
(:mod:`lazyconv.serve.segment_index`), and undoes a write that fails half-way (a full disk), so
the partition stays writable. Opening a partition runs Kafka's log recovery on what was written
after the last clean point (:mod:`lazyconv.serve.log_recovery`).

An *entry* is one top-level item of a segment: a v2 batch or a legacy (v0/v1) message, possibly a
compressed wrapper. Per entry the scan keeps its position, size, last offset, magic, codec and max
timestamp: enough to map a fetch offset to a byte range without decoding any record.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lazyconv.errors import ConfigurationError, CorruptRecordError, StorageError, ValidationError
from lazyconv.records._format import LOG_OVERHEAD
from lazyconv.serve.durability import (
    Flusher,
    fsync_directory,
    fsync_path,
    read_recovery_points,
    write_atomically,
    write_recovery_points,
)
from lazyconv.serve.producer_snapshot import (
    decode_snapshot,
    snapshot_offsets,
    snapshot_path,
)
from lazyconv.serve.segment_index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    INDEX_SUFFIX,
    TIMEINDEX_SUFFIX,
    IndexCursor,
    expected_indexes,
)
from lazyconv.serve.topic_ids import ensure_topic_id
from lazyconv.serve.transactions import (
    TXNINDEX_SUFFIX,
    AbortedTxn,
    PartitionTransactions,
    encode_txnindex_entry,
)

log = logging.getLogger(__name__)

__all__ = ["Entry", "Segment", "PartitionLog", "LogDirectory", "LogConfig", "Region",
           "OffsetOutOfRange", "SEGMENT_SUFFIX", "DEFAULT_SEGMENT_BYTES", "MAX_ENTRY_SIZE"]

SEGMENT_SUFFIX = ".log"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT_NAME = re.compile(r"^(?P<base>\d{20})\.log$")

# Enough header bytes for every magic: v2 needs up to MaxTimestamp (byte 43) and the producer
# id after it (bytes 43-51, for the producer-id floor).
_HEADER_READ = 51
_V2_HEADER = 43
_PRODUCER_ID = struct.Struct(">q")
_MIN_ENTRY_SIZE = 14  # smallest legal size field (a v0 message with null key and value)
# A size field above this is corruption, not an entry still being written: no broker accepts a
# request larger than socket.request.max.bytes (100 MiB by default), so no batch is larger.
MAX_ENTRY_SIZE = 100 << 20
_CODEC_MASK = 0x07
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
    this server does too): a process crash loses nothing acknowledged, a power loss may lose
    what the OS had not written yet.
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    flush_messages: int | None = None
    flush_ms: int | None = None

    def __post_init__(self) -> None:
        if not _MIN_ENTRY_SIZE <= self.segment_bytes <= _INT32_MAX:
            raise ConfigurationError(
                f"segment bytes must be between {_MIN_ENTRY_SIZE} and {_INT32_MAX}, got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ConfigurationError(f"index interval bytes must be >= 0, got {self.index_interval_bytes}")
        for name in ("flush_messages", "flush_ms"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigurationError(f"{name} must be at least 1 (or unset), got {value}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One top-level log entry (v2 batch or legacy message) located in a segment file."""

    position: int
    size: int  # bytes on disk including the 12-byte log overhead
    first_offset: int  # base offset (v2) or the entry's offset (legacy; a wrapper's last offset)
    last_offset: int
    magic: int
    codec: int
    max_timestamp: int
    attributes: int = 0  # the full attributes (v2: transactional 0x10, control 0x20)


@dataclass(slots=True)
class Segment:
    """One ``.log`` file; its entries are discovered by :meth:`refresh`."""

    path: Path
    base_offset: int
    entries: list[Entry] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)  # parallel to entries, for bisect
    positions: list[int] = field(default_factory=list)  # parallel to entries, for bisect
    scanned_bytes: int = 0
    corruption: CorruptRecordError | None = None  # where scanning stopped for good, if it did
    max_producer_id: int = -1  # the largest producer id of its v2 batches (-1: none)
    index: IndexCursor | None = None  # the index state while this server appends to it

    @property
    def index_path(self) -> Path:
        return self.path.with_suffix(INDEX_SUFFIX)

    @property
    def timeindex_path(self) -> Path:
        return self.path.with_suffix(TIMEINDEX_SUFFIX)

    @property
    def txnindex_path(self) -> Path:
        return self.path.with_suffix(TXNINDEX_SUFFIX)

    @property
    def next_offset(self) -> int:
        """Offset after the last complete entry (base offset when empty)."""
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    def refresh(self, active: bool = True, quiet: bool = False) -> None:
        """Scan entries appended since the last scan; stop at a trailing partial entry.

        Corrupt data (a size field or magic no broker writes, an entry running past the end of a
        segment that is no longer ``active``) stops the scan for good: the entries before it
        stay readable and :attr:`corruption` says what and where (a fetch reaching it is
        answered with an error). Only the active segment can end in an entry still being written.
        ``quiet``: do not log corruption (log recovery decides what it is and reports it).
        """
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            file_size = os.fstat(fd).st_size
            if file_size < self.scanned_bytes:
                self._forget_beyond(file_size)
            if self.corruption is not None:
                return
            position = self.scanned_bytes
            while position + LOG_OVERHEAD <= file_size:
                header = os.pread(fd, _HEADER_READ, position)
                try:
                    entry = _parse_entry_header(header, position, file_size, self.path, active)
                except CorruptRecordError as exc:
                    if not quiet:
                        log.error("%s; the entries after it cannot be read", exc)
                    self.corruption = exc
                    break
                if entry is None:
                    break  # partial entry at the end: a writer is still appending
                if entry.magic == 2:
                    (producer_id,) = _PRODUCER_ID.unpack_from(header, _V2_HEADER)
                    if producer_id > self.max_producer_id:
                        self.max_producer_id = producer_id
                self.entries.append(entry)
                self.last_offsets.append(entry.last_offset)
                self.positions.append(entry.position)
                position += entry.size
            self.scanned_bytes = position
        finally:
            os.close(fd)

    def _forget_beyond(self, file_size: int) -> None:
        """The file shrank (truncated under us): drop the entries that are no longer in it."""
        keep = bisect.bisect_right(self.positions, file_size)
        while keep and self.positions[keep - 1] + self.entries[keep - 1].size > file_size:
            keep -= 1
        log.warning("%s shrank to %d bytes: %d of %d entries remain", self.path, file_size, keep,
                    len(self.entries))
        del self.entries[keep:], self.last_offsets[keep:], self.positions[keep:]
        self.scanned_bytes = self.positions[keep - 1] + self.entries[keep - 1].size if keep else 0
        self.corruption = None  # what was corrupt may be gone: scan again
        self.index = None  # the index files are made to match the shorter segment before appending

    def is_entry_boundary(self, position: int) -> bool:
        """Whether ``position`` is where an entry starts or where the scanned entries end."""
        if position == self.scanned_bytes:
            return True
        i = bisect.bisect_left(self.positions, position)
        return i < len(self.positions) and self.positions[i] == position

    def entry_index_for(self, offset: int) -> int:
        """Index of the first entry whose last offset is >= ``offset`` (len(entries) if none)."""
        return bisect.bisect_left(self.last_offsets, offset)


def _parse_entry_header(header: bytes, position: int, file_size: int, path: Path,
                        active: bool = True) -> Entry | None:
    """The entry whose first bytes are ``header``; ``None`` for a partial entry at the end of the
    ``active`` segment. Raises :class:`CorruptRecordError` for a size field no broker writes, a
    partial entry at the end of a rolled segment, or an unknown magic."""
    if len(header) < LOG_OVERHEAD:
        if active:
            return None
        raise CorruptRecordError(f"{path}: {len(header)} bytes of an entry header at the end of "
                                 "a rolled segment", position)
    offset, size = struct.unpack_from(">qi", header, 0)
    if size < _MIN_ENTRY_SIZE:
        raise CorruptRecordError(f"{path}: entry size field {size} is below {_MIN_ENTRY_SIZE}", position)
    if size > MAX_ENTRY_SIZE:
        raise CorruptRecordError(f"{path}: entry size field {size} is above {MAX_ENTRY_SIZE} "
                                 "(the largest request a broker accepts)", position)
    total = LOG_OVERHEAD + size
    if position + total > file_size:
        if active:
            return None
        raise CorruptRecordError(f"{path}: an entry of {total} bytes runs past the end of this "
                                 f"rolled segment ({file_size} bytes)", position)
    if len(header) < 17 + 1:
        return None
    magic = header[16]
    if magic == 2:
        if len(header) < _HEADER_READ:
            raise CorruptRecordError(f"{path}: v2 batch shorter than its header", position)
        attributes, last_delta = struct.unpack_from(">hi", header, 21)
        (max_ts,) = struct.unpack_from(">q", header, 35)
        return Entry(position, total, offset, offset + last_delta, 2, attributes & _CODEC_MASK, max_ts,
                     attributes)
    if magic in (0, 1):
        attributes = header[17]
        timestamp = -1
        if magic == 1 and len(header) >= 26:
            (timestamp,) = struct.unpack_from(">q", header, 18)
        return Entry(position, total, offset, offset, magic, attributes & _CODEC_MASK, timestamp,
                     attributes)
    raise CorruptRecordError(f"{path}: unknown magic {magic}", position + 16)


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


class OffsetOutOfRange(Exception):
    """The fetch offset is outside [log start offset, high watermark]."""


class PartitionLog:
    """The segments of one partition directory, oldest first.

    Opening it runs log recovery (:func:`lazyconv.serve.log_recovery.recover_partition`) unless
    ``recover`` is false: the entries written after the last clean point are validated, a torn
    last entry is cut off, missing or torn index files are rebuilt. ``recovery_point`` is the
    offset below which the log is known to be on disk (from the log directory's
    ``recovery-point-offset-checkpoint``).
    """

    def __init__(self, topic: str, partition: int, directory: Path, *,
                 config: LogConfig | None = None, flusher: Flusher | None = None,
                 recovery_point: int | None = None, recover: bool = True) -> None:
        self.topic = topic
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
        self.first_unflushed_at: float | None = None  # time.monotonic() of the oldest unflushed append
        # whether this process changed the directory (appends, repairs): a directory that was
        # only read gets no recovery-point checkpoint written into it
        self.modified = False
        # Called at a roll with the new segment's base offset: the producer snapshot bytes to
        # write at that offset once the rolled segment is on disk (None: no snapshot).
        self.on_roll: Callable[[PartitionLog, int], bytes | None] | None = None
        self.snapshot_offsets = snapshot_offsets(directory)
        self._scan(quiet=recover)
        if recover:
            from lazyconv.serve.log_recovery import recover_partition

            recover_partition(self)

    def refresh(self) -> None:
        """Pick up new segment files and entries appended to existing ones."""
        self._scan()

    def _scan(self, quiet: bool = False) -> None:
        with self._lock:
            known = {s.path.name for s in self.segments}
            previous_active = self.segments[-1] if self.segments else None
            new = []
            for name in os.listdir(self.directory):
                m = _SEGMENT_NAME.match(name)
                if m and name not in known:
                    new.append(Segment(self.directory / name, int(m.group("base"))))
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
        """The base offset of the oldest segment (Kafka's log start offset without deleteRecords)."""
        return self.segments[0].base_offset if self.segments else 0

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
                return Region(segment.path, segment, entry.position, end, entry.size, hw, start_offset)
        return Region(None, None, 0, 0, 0, hw, start_offset)

    def _segments_from(self, offset: int) -> list[Segment]:
        bases = [s.base_offset for s in self.segments]
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        return self.segments[i:]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, as Kafka's
        ListOffsets finds it: the first entry whose max timestamp reaches the target (from its
        header), then the first record inside it that does. ``None`` when no record does."""
        from lazyconv.records import FileRecords

        self.refresh()
        for segment, entry in self.entries():
            if entry.max_timestamp < timestamp:
                continue
            with FileRecords(segment.path, start=entry.position, end=entry.position + entry.size) as records:
                for batch in records.batches():
                    for record in batch:
                        if record.timestamp >= timestamp:
                            return record.offset, record.timestamp
        return None

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
        from lazyconv.serve.offsets import assign_offsets

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
        segment = Segment(self.directory / f"{base_offset:020d}{SEGMENT_SUFFIX}", base_offset)
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
            entry = _parse_entry_header(piece[:_HEADER_READ], at, at + len(piece), segment.path)
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


class LogDirectory:
    """All partition directories under a log directory.

    ``config`` (segment size, index interval, flush policy) applies to every partition;
    ``recover`` runs log recovery on each partition when it is first opened (see
    :class:`PartitionLog`). :meth:`close` makes everything written durable and records the
    recovery points, as a broker's clean shutdown does.
    """

    def __init__(self, root: str | os.PathLike[str], config: LogConfig | None = None, *,
                 recover: bool = True) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValidationError(f"log directory {self.root} does not exist or is not a directory")
        self.config = config or LogConfig()
        self.flusher = Flusher()
        self._recover = recover
        try:
            self._recovery_points = read_recovery_points(self.root)
        except ValidationError as exc:
            # Only costs a longer recovery: every partition is validated as after a crash.
            log.warning("%s; ignoring it", exc)
            self._recovery_points = {}
        self.partitions: dict[tuple[str, int], PartitionLog] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        """Discover partition directories created since the last call."""
        with self._lock:
            for name in sorted(os.listdir(self.root)):
                m = _PARTITION_DIR.match(name)
                path = self.root / name
                if not m or not path.is_dir():
                    continue
                key = (m.group("topic"), int(m.group("partition")))
                if key not in self.partitions:
                    self.partitions[key] = PartitionLog(
                        key[0], key[1], path, config=self.config, flusher=self.flusher,
                        recovery_point=self._recovery_points.get(key), recover=self._recover)
                    self._topic_ids.pop(key[0], None)  # a new folder: make sure it gets the id

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's stable id (from ``partition.metadata``, created on first use)."""
        with self._lock:
            known = self._topic_ids.get(topic)
            if known is not None:
                return known
            directories = [plog.directory for (name, _p), plog in sorted(self.partitions.items())
                           if name == topic]
            if not directories:
                raise ValidationError(f"topic {topic!r} has no partition in {self.root}")
            topic_id = ensure_topic_id(topic, directories)
            self._topic_ids[topic] = topic_id
            self._topics_by_id[topic_id] = topic
            return topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic with id ``topic_id`` (None if no topic here has it)."""
        if topic_id not in self._topics_by_id:
            self.refresh()
            for topic in self.topics():
                self.topic_id(topic)
        return self._topics_by_id.get(topic_id)

    def topics(self) -> dict[str, list[int]]:
        """Topic name → sorted partition ids."""
        result: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            result.setdefault(topic, []).append(partition)
        for parts in result.values():
            parts.sort()
        return dict(sorted(result.items()))

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.partitions.get((topic, partition))

    def max_producer_id(self) -> int:
        """The largest producer id found in any partition's log or latest snapshot (-1: none)."""
        self.refresh()
        return max((plog.max_producer_id() for plog in list(self.partitions.values())), default=-1)

    def flush(self) -> None:
        """Wait for the background flushes, then fsync every partition's unflushed writes.
        A partition that cannot be flushed is logged and keeps its older recovery point."""
        self.flusher.drain()
        for plog in list(self.partitions.values()):
            try:
                plog.flush()
            except StorageError as exc:
                log.error("%s", exc)

    def flush_due(self, now: float | None = None) -> list[PartitionLog]:
        """The partitions whose oldest unflushed append is older than ``flush_ms``."""
        if self.config.flush_ms is None:
            return []
        now = time.monotonic() if now is None else now
        limit = self.config.flush_ms / 1000
        return [plog for plog in list(self.partitions.values())
                if plog.first_unflushed_at is not None and now - plog.first_unflushed_at >= limit]

    def write_checkpoint(self) -> None:
        """Record every partition's recovery point in ``recovery-point-offset-checkpoint``
        (unchanged points are not rewritten; a directory this process only read gets none;
        failures are logged)."""
        plogs = list(self.partitions.items())
        points = {key: plog.recovery_point for key, plog in plogs if plog.recovery_point is not None}
        if points == self._recovery_points:
            return
        if not self._recovery_points and not any(plog.modified for _key, plog in plogs):
            return
        try:
            write_recovery_points(self.root, points)
        except OSError as exc:
            log.warning("cannot write the recovery points of %s: %s", self.root, exc)
            return
        self._recovery_points = points

    def close(self, before_checkpoint: Callable[[], None] | None = None) -> None:
        """A clean shutdown's work: every write fsynced, then ``before_checkpoint`` (the
        broker's producer snapshots), then the recovery points written. The directory stays
        usable (a later append starts the flusher again)."""
        self.flush()
        if before_checkpoint is not None:
            before_checkpoint()
        self.write_checkpoint()
        self.flusher.close()
