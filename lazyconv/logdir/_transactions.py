"""Per-partition transaction state: open transactions, aborted ones, the last stable offset.

What Kafka's ProducerStateManager and TransactionIndex keep, rebuilt from the log:

- a transactional v2 batch (attribute bit 4) opens a transaction for its producer id at its
  base offset, unless one is open already (a batch without a producer id, -1, opens none); the
  producer's epoch in it is the largest of its batches';
- a control batch (bit 5) from that producer ends it; its one record's key is
  ``version int16, type int16`` with type 0 = ABORT, 1 = COMMIT;
- an aborted transaction is remembered as Kafka's ``AbortedTxn``: producer id, first offset,
  last offset (the marker's) and the last stable offset once it ended (the first offset of the
  next open transaction, else the marker's offset + 1);
- the last stable offset (LSO) is the first offset of the oldest open transaction, else the
  high watermark.

Segments that carry a ``.txnindex`` (Kafka's TransactionIndex, :mod:`lazyconv.logdir._txnindex`)
give their aborted transactions from it; the control batches it lists then need no reading
beyond the batch header. Every other control batch is read from the log: one appended after the
index was written, and an ABORT marker whose entry a crash kept out of the index (the marker is
appended first), even when a later abort's entry follows in it. The scan resumes where it
stopped, so Produce keeps the state current by calling :meth:`PartitionTransactions.update`
after each append.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lazyconv.errors import CorruptRecordError
from lazyconv.logdir._txnindex import AbortedTxn, parse_txnindex
from lazyconv.records._control import ControlRecordType
from lazyconv.records._format import (
    CONTROL_FLAG_MASK,
    PRODUCER_ID_OFFSET,
    RECORDS_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
)

if TYPE_CHECKING:
    from lazyconv.logdir._partition import PartitionLog
    from lazyconv.logdir._segment import Segment

log = logging.getLogger(__name__)

__all__ = ["PartitionTransactions"]

_PRODUCER_ID_AND_EPOCH = struct.Struct(">qh")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_READ = 96  # enough of a control batch for its one record's key


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zig-zag varint at ``at``: (value, next position)."""
    shift = result = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _control_type(header: bytes) -> int:
    """The control type (0 abort, 1 commit) from a control batch's first record key."""
    at = RECORDS_OFFSET
    _length, at = _varint(header, at)
    at += 1  # record attributes
    _ts_delta, at = _varint(header, at)
    _offset_delta, at = _varint(header, at)
    key_length, at = _varint(header, at)
    if key_length < _CONTROL_KEY.size or at + _CONTROL_KEY.size > len(header):
        raise ValueError(f"control record key of {key_length} bytes")
    _version, kind = _CONTROL_KEY.unpack_from(header, at)
    return int(kind)


@dataclass
class _SegmentProgress:
    entries_done: int = 0
    indexed: frozenset[int] = frozenset()  # the markers' offsets the .txnindex accounts for


@dataclass
class PartitionTransactions:
    """The transaction state of one partition, updated incrementally from its log."""

    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    ongoing_epochs: dict[int, int] = field(default_factory=dict)  # producer id -> its epoch in it
    aborted: list[AbortedTxn] = field(default_factory=list)  # by last offset
    _aborted_last: list[int] = field(default_factory=list)
    _progress: dict[Path, _SegmentProgress] = field(default_factory=dict)

    def update(self, plog: PartitionLog) -> None:
        """Take in the entries appended since the last update."""
        for segment in list(plog.segments):
            progress = self._progress.get(segment.path)
            if progress is None:
                progress = self._progress[segment.path] = _SegmentProgress()
                index_path = segment.txnindex_path
                if index_path.is_file():
                    try:
                        indexed = parse_txnindex(index_path.read_bytes(), index_path)
                    except CorruptRecordError as exc:
                        log.warning("%s; rebuilding from the log instead", exc)
                    else:
                        for txn in indexed:
                            self._add_aborted(txn)
                        # the other markers are read from the log
                        progress.indexed = frozenset(t.last_offset for t in indexed)
            entries = segment.entries
            if progress.entries_done >= len(entries):
                continue
            self._scan(segment, progress, len(entries))

    def _scan(self, segment: Segment, progress: _SegmentProgress, upto: int) -> None:
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            for entry in segment.entries[progress.entries_done:upto]:
                progress.entries_done += 1
                if entry.magic != 2 or not entry.attributes & TRANSACTIONAL_FLAG_MASK:
                    continue
                is_control = bool(entry.attributes & CONTROL_FLAG_MASK)
                from_index = entry.last_offset in progress.indexed
                need = (_CONTROL_READ if is_control and not from_index
                        else PRODUCER_ID_OFFSET + _PRODUCER_ID_AND_EPOCH.size)
                header = os.pread(fd, min(need, entry.size), entry.position)
                pid, epoch = _PRODUCER_ID_AND_EPOCH.unpack_from(header, PRODUCER_ID_OFFSET)
                if pid < 0:
                    # no producer, no transaction (Kafka's producer state skips such batches):
                    # nothing could ever end it and the LSO would stay there for good
                    continue
                if not is_control:
                    self.ongoing.setdefault(pid, entry.first_offset)
                    self.ongoing_epochs[pid] = max(self.ongoing_epochs.get(pid, epoch), epoch)
                    continue
                first = self.ongoing.pop(pid, None)
                self.ongoing_epochs.pop(pid, None)
                if from_index or first is None:
                    continue  # the index has this abort; a marker with nothing open
                try:
                    kind = _control_type(header)
                except (ValueError, struct.error) as exc:
                    log.warning("%s at %d: unreadable control record (%s); taken as a commit",
                                segment.path, entry.position, exc)
                    continue
                if kind == ControlRecordType.ABORT:
                    lso = min(self.ongoing.values(), default=entry.last_offset + 1)
                    self._add_aborted(AbortedTxn(pid, first, entry.last_offset, lso))
        finally:
            os.close(fd)

    def _add_aborted(self, txn: AbortedTxn) -> None:
        i = bisect.bisect_right(self._aborted_last, txn.last_offset)
        self._aborted_last.insert(i, txn.last_offset)
        self.aborted.insert(i, txn)

    def last_stable_offset(self, high_watermark: int) -> int:
        """First offset of the oldest open transaction, else the high watermark."""
        return min(min(self.ongoing.values(), default=high_watermark), high_watermark)

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions a fetch of ``[fetch_offset, upper_bound)`` must report
        (Kafka: last offset >= fetch offset and first offset < upper bound)."""
        start = bisect.bisect_left(self._aborted_last, fetch_offset)
        return [txn for txn in self.aborted[start:] if txn.first_offset < upper_bound]
