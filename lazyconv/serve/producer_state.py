"""The server's per-partition producer state: a :class:`ProducerStateTable` for each partition,
rebuilt from the log the first time the partition is produced to.

:func:`~lazyconv.serve.append_validation.validate_produce` needs each partition's idempotent and
transactional producers (epoch, last sequences, open transaction) to refuse stale epochs,
out-of-order sequences and to answer retried batches as duplicates. A broker keeps this in its
producer snapshots; here it is rebuilt from the batch headers of the log (61 bytes per v2 batch
with a producer id, read with ``os.pread``): every batch is recorded as if it had just been
appended, and a control batch (COMMIT/ABORT marker) closes its producer's open transaction.
The rebuild happens once per partition, lazily, so a server over a large log directory starts
as fast as before.
"""

from __future__ import annotations

import logging
import os
import struct
import threading

from lazyconv.serve.append_validation import (
    AppendDecision,
    AppendEntry,
    AppendErrorCode,
    ProducerStateTable,
)
from lazyconv.serve.logdir import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["ProducerStates", "rebuild_producer_state", "DEFAULT_MAX_PRODUCERS"]

DEFAULT_MAX_PRODUCERS = 65536
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_PRODUCER_ID_AT = 43
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_SEQUENCE_WRAP = 1 << 31


def rebuild_producer_state(plog: PartitionLog, max_producers: int = DEFAULT_MAX_PRODUCERS) -> ProducerStateTable:
    """The producer state of ``plog`` as its log leaves it (v2 batches with a producer id)."""
    table = ProducerStateTable(max_producers)
    plog.refresh()
    batches = 0
    for segment in plog.segments:
        if not any(e.magic == 2 for e in segment.entries):
            continue
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            for entry in list(segment.entries):
                if entry.magic != 2:
                    continue
                fields = os.pread(fd, _PRODUCER_FIELDS.size, entry.position + _PRODUCER_ID_AT)
                if len(fields) < _PRODUCER_FIELDS.size:
                    break  # the file shrank under us: what is left is not readable
                producer_id, epoch, base_sequence = _PRODUCER_FIELDS.unpack(fields)
                if producer_id < 0:
                    continue
                if entry.attributes & _CONTROL:
                    table.end_transaction(producer_id, epoch)
                    continue
                count = entry.last_offset - entry.first_offset + 1
                last_sequence = (base_sequence + count - 1) % _SEQUENCE_WRAP if base_sequence >= 0 else -1
                recorded = AppendEntry(b"", count, 2, producer_id, epoch, base_sequence, last_sequence,
                                       bool(entry.attributes & _TRANSACTIONAL), entry.max_timestamp)
                table.apply(AppendDecision(AppendErrorCode.NONE, entries=(recorded,)), entry.first_offset)
                batches += 1
        finally:
            os.close(fd)
    log.debug("producer state of %s-%d rebuilt from %d batches: %d producers", plog.topic,
              plog.partition, batches, len(table))
    return table


class ProducerStates:
    """One :class:`ProducerStateTable` per partition, rebuilt from the log on first use."""

    def __init__(self, max_producers: int = DEFAULT_MAX_PRODUCERS) -> None:
        self.max_producers = max_producers
        self._tables: dict[tuple[str, int], ProducerStateTable] = {}
        self._lock = threading.Lock()

    def table(self, plog: PartitionLog) -> ProducerStateTable:
        """The partition's producer table (rebuilt from its log the first time)."""
        key = (plog.topic, plog.partition)
        with self._lock:
            table = self._tables.get(key)
            if table is None:
                table = self._tables[key] = rebuild_producer_state(plog, self.max_producers)
            return table

    def end_transaction(self, plog: PartitionLog, producer_id: int, producer_epoch: int) -> None:
        """A COMMIT/ABORT marker of this producer was written to the partition."""
        key = (plog.topic, plog.partition)
        with self._lock:
            table = self._tables.get(key)
        if table is not None:  # else the rebuild will read the marker from the log
            table.end_transaction(producer_id, producer_epoch)
