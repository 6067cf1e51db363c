"""One segment of a partition as the log model sees it: its ``.log`` scanned entry by entry.

The scan is lazy (entry headers only, read with ``os.pread``, see :mod:`lazyconv.logdir._entry`),
resumes where it stopped when the file grows, and does not see a trailing partial entry (a
writer still appending) yet. Corrupt data stops the scan for good (:attr:`Segment.corruption`).
The segment's other files are named beside its ``.log`` (:mod:`lazyconv.logdir._naming`).
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from lazyconv.errors import CorruptRecordError
from lazyconv.logdir._entry import HEADER_READ, Entry, parse_entry_header, producer_id
from lazyconv.logdir._index import IndexCursor
from lazyconv.logdir._naming import INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX
from lazyconv.records._format import LOG_OVERHEAD

log = logging.getLogger(__name__)

__all__ = ["Segment"]


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
    index: IndexCursor | None = None  # the index state while the log appends to it

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
        ``quiet``: do not log corruption or a shrunk file (log recovery decides what it is and
        reports it).
        """
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            file_size = os.fstat(fd).st_size
            if file_size < self.scanned_bytes:
                self._forget_beyond(file_size, quiet)
            if self.corruption is not None:
                return
            position = self.scanned_bytes
            while position + LOG_OVERHEAD <= file_size:
                header = os.pread(fd, HEADER_READ, position)
                try:
                    entry = parse_entry_header(header, position, file_size, self.path, active)
                except CorruptRecordError as exc:
                    if not quiet:
                        log.error("%s; the entries after it cannot be read", exc)
                    self.corruption = exc
                    break
                if entry is None:
                    break  # partial entry at the end: a writer is still appending
                if entry.magic == 2:
                    pid = producer_id(header)
                    if pid > self.max_producer_id:
                        self.max_producer_id = pid
                self.entries.append(entry)
                self.last_offsets.append(entry.last_offset)
                self.positions.append(entry.position)
                position += entry.size
            self.scanned_bytes = position
        finally:
            os.close(fd)

    def fence(self, index: int, error: CorruptRecordError) -> None:
        """Entry ``index`` and those after it cannot be trusted (log recovery found its CRC
        bad): they are forgotten as if the scan had stopped there, and :attr:`corruption` says
        why, so a fetch reaching it is answered with an error and nothing is appended after it.
        The bytes stay in the file, for whoever repairs it."""
        del self.entries[index:], self.last_offsets[index:], self.positions[index:]
        self.scanned_bytes = (self.positions[-1] + self.entries[-1].size) if self.entries else 0
        self.corruption = error

    def _forget_beyond(self, file_size: int, quiet: bool = False) -> None:
        """The file shrank (truncated under us, or by log recovery, which says so itself:
        ``quiet``): drop the entries that are no longer in it."""
        keep = bisect.bisect_right(self.positions, file_size)
        while keep and self.positions[keep - 1] + self.entries[keep - 1].size > file_size:
            keep -= 1
        if not quiet:
            log.warning("%s shrank to %d bytes: %d of %d entries remain", self.path, file_size,
                        keep, len(self.entries))
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
