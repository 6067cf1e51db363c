"""The sparse ``.index`` and ``.timeindex`` of a segment, as a Kafka broker writes them.

Entry formats (big-endian, no header): offset index, 8 bytes: ``int32 offset - base offset``,
``int32 byte position`` of an entry in the ``.log``; time index, 12 bytes: ``int64 timestamp``,
``int32 offset - base offset``.

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
each appended entry adds. :func:`expected_indexes` runs it over a whole segment (recovery).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "INDEX_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "IndexCursor",
    "expected_indexes",
]

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # Kafka's index.interval.bytes
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
_OFFSET = struct.Struct(">ii")
_TIME = struct.Struct(">qi")
OFFSET_ENTRY_SIZE = _OFFSET.size
TIME_ENTRY_SIZE = _TIME.size
_NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP: v0 messages carry none


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
            offset_entry = _OFFSET.pack(last_offset - self.base_offset, position)
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
        entry = _TIME.pack(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.time_index_size += len(entry)
        return entry

    def copy(self) -> IndexCursor:
        """A copy to roll back to when an append fails."""
        return IndexCursor(self.base_offset, self.interval, self.bytes_since_entry, self.max_timestamp,
                           self.offset_of_max_timestamp, self.last_time_entry, self.offset_index_size,
                           self.time_index_size)


def expected_indexes(base_offset: int, entries: Iterable[tuple[int, int, int, int]], *,
                     interval: int = DEFAULT_INDEX_INTERVAL_BYTES,
                     rolled: bool) -> tuple[bytes, bytes, IndexCursor]:
    """The (``.index``, ``.timeindex``) contents of a segment holding ``entries`` — (position,
    size, last offset, max timestamp) each — and the cursor to keep appending with; ``rolled``
    adds the final time entry of a segment that is no longer active."""
    cursor = IndexCursor(base_offset, interval)
    offsets = bytearray()
    times = bytearray()
    for position, size, last_offset, max_timestamp in entries:
        offset_entry, time_entry = cursor.add(position, size, last_offset, max_timestamp)
        offsets += offset_entry
        times += time_entry
    if rolled:
        times += cursor.final_time_entry()
    return bytes(offsets), bytes(times), cursor
