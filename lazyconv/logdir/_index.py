"""A segment's sparse ``.index`` and ``.timeindex``: entry formats and when entries are written.

Entry formats (big-endian, no header):

- offset index (``.index``), 8 bytes: ``int32 offset - base offset``, ``int32 byte position``
  of an entry in the ``.log``;
- time index (``.timeindex``), 12 bytes: ``int64 timestamp``, ``int32 offset - base offset``.

The rule is Kafka's (``LogSegment.recover``, which is also what its append does for a produce
of one batch): an entry is indexed when more than ``index.interval.bytes`` of log were written
since the last indexed one; the offset index maps that entry's last offset to its position, and
the time index gets (largest timestamp so far, last offset of the entry that carries it) when
that timestamp is above the last time entry's. A segment that stops being the active one gets
one final time entry the same way (``onBecomeInactiveSegment``). Kafka's live append indexes a
whole produced set at once (one entry for all its batches); here every log entry is indexed on
its own, as Kafka's recovery rebuilds it, so an index entry always names the last offset of the
batch it points at (what ``lazyconv validate`` and ``kafka-dump-log --verify-index-only``
check).

:class:`IndexCursor` is the state of one segment being appended to: it says which index bytes
each appended entry adds. :class:`IndexBuilder` collects them in memory (a writer that writes
the index files when the segment is done); :func:`expected_indexes` runs it over a whole
segment (recovery). :func:`parse_offset_index` / :func:`parse_time_index` read the files.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "OFFSET_ENTRY",
    "TIME_ENTRY",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "OffsetEntry",
    "TimeEntry",
    "IndexCursor",
    "IndexBuilder",
    "expected_indexes",
    "parse_offset_index",
    "parse_time_index",
]

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # Kafka's index.interval.bytes
OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size  # 8
TIME_ENTRY_SIZE = TIME_ENTRY.size  # 12
_NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP: v0 messages carry none


class OffsetEntry(NamedTuple):
    """An offset index entry with the absolute offset and its byte position in the index file."""

    offset: int
    position: int
    index_position: int


class TimeEntry(NamedTuple):
    """A time index entry with the absolute offset and its byte position in the index file."""

    timestamp: int
    offset: int
    index_position: int


@dataclass(slots=True)
class IndexCursor:
    """What one segment's indexes hold so far and what the next entry adds to them."""

    base_offset: int
    interval: int = DEFAULT_INDEX_INTERVAL_BYTES
    bytes_since_entry: int = 0
    max_timestamp: int = _NO_TIMESTAMP
    offset_of_max_timestamp: int = -1
    last_time_entry: int = _NO_TIMESTAMP  # the timestamp of the last time index entry
    offset_index_size: int = 0  # bytes of .index written (or to be written)
    time_index_size: int = 0

    def add(self, position: int, size: int, last_offset: int, max_timestamp: int) -> tuple[bytes, bytes]:
        """Account one appended log entry; returns the (offset index, time index) bytes it adds
        (usually none: the index is sparse)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        offset_entry = time_entry = b""
        if self.bytes_since_entry > self.interval:
            offset_entry = OFFSET_ENTRY.pack(last_offset - self.base_offset, position)
            self.offset_index_size += len(offset_entry)
            time_entry = self._time_entry()
            self.bytes_since_entry = 0
        self.bytes_since_entry += size
        return offset_entry, time_entry

    def final_time_entry(self) -> bytes:
        """The time entry a segment gets when it is rolled (empty when it adds nothing)."""
        return self._time_entry()

    def _time_entry(self) -> bytes:
        # Kafka's TimeIndex.maybeAppend: only a timestamp above the last entry's is indexed.
        if self.max_timestamp <= self.last_time_entry:
            return b""
        self.last_time_entry = self.max_timestamp
        entry = TIME_ENTRY.pack(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.time_index_size += len(entry)
        return entry

    def copy(self) -> IndexCursor:
        """A copy to roll back to when an append fails."""
        return IndexCursor(self.base_offset, self.interval, self.bytes_since_entry, self.max_timestamp,
                           self.offset_of_max_timestamp, self.last_time_entry, self.offset_index_size,
                           self.time_index_size)


class IndexBuilder:
    """Builds a segment's offset and time index in memory while entries are appended."""

    def __init__(self, base_offset: int,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> None:
        self.cursor = IndexCursor(base_offset, index_interval_bytes)
        self._offset_entries = bytearray()
        self._time_entries = bytearray()

    def append(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Account one entry of ``size`` bytes at ``position`` (see :meth:`IndexCursor.add`)."""
        offset_entry, time_entry = self.cursor.add(position, size, last_offset, max_timestamp)
        self._offset_entries += offset_entry
        self._time_entries += time_entry

    def close(self, rolled: bool) -> tuple[bytes, bytes]:
        """The (offset index, time index) file contents; ``rolled`` adds the final time entry."""
        if rolled:
            self._time_entries += self.cursor.final_time_entry()
        return bytes(self._offset_entries), bytes(self._time_entries)


def expected_indexes(base_offset: int, entries: Iterable[tuple[int, int, int, int]], *,
                     interval: int = DEFAULT_INDEX_INTERVAL_BYTES,
                     rolled: bool) -> tuple[bytes, bytes, IndexCursor]:
    """The (``.index``, ``.timeindex``) contents of a segment holding ``entries`` — (position,
    size, last offset, max timestamp) each — and the cursor to keep appending with; ``rolled``
    adds the final time entry of a segment that is no longer active."""
    builder = IndexBuilder(base_offset, interval)
    for position, size, last_offset, max_timestamp in entries:
        builder.append(position, size, last_offset, max_timestamp)
    offsets, times = builder.close(rolled)
    return offsets, times, builder.cursor


def parse_offset_index(data: bytes, base_offset: int) -> list[OffsetEntry]:
    """Entries of an ``.index`` file; a trailing partial entry is ignored (caller checks size)."""
    usable = len(data) - len(data) % OFFSET_ENTRY_SIZE
    return [OffsetEntry(base_offset + rel, pos, i)
            for i, (rel, pos) in zip(range(0, usable, OFFSET_ENTRY_SIZE),
                                     OFFSET_ENTRY.iter_unpack(data[:usable]), strict=False)]


def parse_time_index(data: bytes, base_offset: int) -> list[TimeEntry]:
    """Entries of a ``.timeindex`` file; a trailing partial entry is ignored (caller checks size)."""
    usable = len(data) - len(data) % TIME_ENTRY_SIZE
    return [TimeEntry(ts, base_offset + rel, i)
            for i, (ts, rel) in zip(range(0, usable, TIME_ENTRY_SIZE),
                                    TIME_ENTRY.iter_unpack(data[:usable]), strict=False)]
