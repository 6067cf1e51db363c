"""A Kafka log directory as a server sees it: topics, partitions, segments, offsets → positions.

Layout (as a broker writes it): ``LOGDIR/<topic>-<partition>/<base offset, 20 digits>.log``
with ``.index`` / ``.timeindex`` beside each segment. The model is read-mostly: segments are
scanned lazily (entry headers only, read with ``os.pread``), the scan resumes where it stopped
when a file grows, and a trailing partial entry (a writer still appending) is simply not visible
yet. :meth:`PartitionLog.append` is the one writer (the server's Produce path).

An *entry* is one top-level item of a segment: a v2 batch or a legacy (v0/v1) message, possibly a
compressed wrapper. Per entry the scan keeps its position, size, last offset, magic, codec and max
timestamp: enough to map a fetch offset to a byte range without decoding any record.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lazyconv.errors import CorruptRecordError, ValidationError
from lazyconv.records._format import LOG_OVERHEAD
from lazyconv.serve.topic_ids import ensure_topic_id
from lazyconv.serve.transactions import PartitionTransactions

log = logging.getLogger(__name__)

__all__ = ["Entry", "Segment", "PartitionLog", "LogDirectory", "Region", "OffsetOutOfRange", "SEGMENT_SUFFIX"]

SEGMENT_SUFFIX = ".log"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT_NAME = re.compile(r"^(?P<base>\d{20})\.log$")

# Enough header bytes for every magic: v2 needs up to MaxTimestamp (byte 43).
_HEADER_READ = 43
_MIN_ENTRY_SIZE = 14  # smallest legal size field (a v0 message with null key and value)
_CODEC_MASK = 0x07


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

    @property
    def next_offset(self) -> int:
        """Offset after the last complete entry (base offset when empty)."""
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    def refresh(self) -> None:
        """Scan entries appended since the last scan; stop at a trailing partial entry.

        Corrupt data (a size field or magic no broker writes) stops the scan for good: the
        entries before it stay readable and :attr:`corruption` says what and where.
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
                    entry = _parse_entry_header(header, position, file_size, self.path)
                except CorruptRecordError as exc:
                    log.error("%s", exc)
                    self.corruption = exc
                    break
                if entry is None:
                    break  # partial entry at the end: a writer is still appending
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

    def is_entry_boundary(self, position: int) -> bool:
        """Whether ``position`` is where an entry starts or where the scanned entries end."""
        if position == self.scanned_bytes:
            return True
        i = bisect.bisect_left(self.positions, position)
        return i < len(self.positions) and self.positions[i] == position

    def entry_index_for(self, offset: int) -> int:
        """Index of the first entry whose last offset is >= ``offset`` (len(entries) if none)."""
        return bisect.bisect_left(self.last_offsets, offset)


def _parse_entry_header(header: bytes, position: int, file_size: int, path: Path) -> Entry | None:
    if len(header) < LOG_OVERHEAD:
        return None
    offset, size = struct.unpack_from(">qi", header, 0)
    if size < _MIN_ENTRY_SIZE:
        raise CorruptRecordError(f"{path}: entry size field {size} is below {_MIN_ENTRY_SIZE}", position)
    total = LOG_OVERHEAD + size
    if position + total > file_size:
        return None
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
    """The segments of one partition directory, oldest first."""

    def __init__(self, topic: str, partition: int, directory: Path) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.segments: list[Segment] = []
        self._lock = threading.Lock()
        self.transactions = PartitionTransactions()
        self.refresh()

    def refresh(self) -> None:
        """Pick up new segment files and entries appended to existing ones."""
        with self._lock:
            known = {s.path.name for s in self.segments}
            new = []
            for name in os.listdir(self.directory):
                m = _SEGMENT_NAME.match(name)
                if m and name not in known:
                    new.append(Segment(self.directory / name, int(m.group("base"))))
            if new:
                self.segments.extend(new)
                self.segments.sort(key=lambda s: s.base_offset)
            new_ids = {id(s) for s in new}
            # Rolled segments are immutable: only new ones and the active (last) one can grow.
            for segment in self.segments:
                if id(segment) in new_ids or segment is self.segments[-1] or segment.scanned_bytes == 0:
                    segment.refresh()

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
        segment file when the partition directory has none.
        """
        from lazyconv.serve.offsets import assign_offsets

        with self._lock:
            if not self.segments:
                self.segments.append(Segment(self.directory / f"{0:020d}{SEGMENT_SUFFIX}", 0))
            segment = self.segments[-1]
            segment.refresh()
            next_offset = self._next_offset_locked()
            base = next_offset
            out = bytearray()
            for data, count in entries:
                out += assign_offsets(data, next_offset)
                next_offset += count
            with open(segment.path, "ab") as f:
                if f.tell() != segment.scanned_bytes:
                    # a partial entry at the end (a crashed writer) would corrupt what follows
                    raise CorruptRecordError(
                        f"{segment.path} ends with {f.tell() - segment.scanned_bytes} bytes of a "
                        "partial entry; refusing to append after it",
                        segment.scanned_bytes,
                    )
                f.write(out)
            segment.refresh()
            return base, self.log_start_offset

    def _next_offset_locked(self) -> int:
        for segment in reversed(self.segments):
            if segment.entries:
                return segment.next_offset
        return self.segments[-1].base_offset if self.segments else 0


class LogDirectory:
    """All partition directories under a log directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValidationError(f"log directory {self.root} does not exist or is not a directory")
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
                    self.partitions[key] = PartitionLog(key[0], key[1], path)
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
