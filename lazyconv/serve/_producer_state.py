"""The server's per-partition producer state: a :class:`ProducerStateTable` for each partition,
loaded the first time the partition is produced to, and Kafka-format producer snapshots.

:func:`~lazyconv.serve._append_validation.validate_produce` needs each partition's idempotent and
transactional producers (epoch, last sequences, open transaction) to refuse stale epochs,
out-of-order sequences and to answer retried batches as duplicates. As a broker does, the state
is loaded from the partition's latest producer snapshot (``<offset>.snapshot``, see
:mod:`lazyconv.logdir._snapshot`) and completed from the batch headers of the log after
it (61 bytes per v2 batch with a producer id, read with ``os.pread``): every batch is recorded
as if it had just been appended, and a control batch (COMMIT/ABORT marker) closes its
producer's open transaction. Without a usable snapshot the whole log is read.

Snapshots are written when a segment is rolled (at the new segment's base offset, once the old
segment is on disk) and at a clean shutdown (at the log end), so a restart reads at most the
log written since. A snapshot keeps each producer's last batch only (Kafka's format): after a
restart a retry of an older batch of the duplicate window is refused as out of order, as by
Kafka.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from lazyconv.errors import RecordsError
from lazyconv.logdir._partition import PartitionLog
from lazyconv.logdir._snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)
from lazyconv.records._format import (
    CONTROL_FLAG_MASK,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    V2_PRODUCER_FIELDS,
)
from lazyconv.serve._append_validation import AppendDecision, AppendEntry, AppendErrorCode
from lazyconv.serve._producer_table import BatchMetadata, ProducerEntry, ProducerStateTable

log = logging.getLogger(__name__)

__all__ = ["ProducerStates", "rebuild_producer_state", "load_producer_state", "snapshot_entries",
           "DEFAULT_MAX_PRODUCERS"]

DEFAULT_MAX_PRODUCERS = 65536
_PRODUCER_FIELDS = V2_PRODUCER_FIELDS  # producer id, producer epoch, base sequence
_PRODUCER_ID_AT = PRODUCER_ID_OFFSET
_TRANSACTIONAL = TRANSACTIONAL_FLAG_MASK
_CONTROL = CONTROL_FLAG_MASK
_SEQUENCE_WRAP = 1 << 31


def rebuild_producer_state(plog: PartitionLog, max_producers: int = DEFAULT_MAX_PRODUCERS) -> ProducerStateTable:
    """The producer state of ``plog`` as its whole log leaves it (v2 batches with a producer id)."""
    table = ProducerStateTable(max_producers)
    plog.refresh()
    replay(table, plog, plog.log_start_offset)
    return table


def load_producer_state(plog: PartitionLog, max_producers: int = DEFAULT_MAX_PRODUCERS
                        ) -> tuple[ProducerStateTable, int, int | None]:
    """``(table, end offset it covers, offset of the snapshot it started from or None)``: the
    latest readable snapshot at or below the log end, then the log after it. A snapshot that
    fails its checks is logged, deleted (as Kafka does) and the next older one tried."""
    plog.refresh()
    end = plog.high_watermark
    for offset in reversed(list(plog.snapshot_offsets)):
        if offset > end:
            continue
        path = snapshot_path(plog.directory, offset)
        try:
            entries = decode_snapshot(path.read_bytes(), path)
        except (OSError, RecordsError) as exc:
            log.warning("producer snapshot %s is unusable (%s); deleting it and trying an older one",
                        path, exc)
            plog.delete_snapshot(offset)
            continue
        table = ProducerStateTable(max_producers)
        for entry in entries:
            table.restore(_producer_entry(entry))
        batches = replay(table, plog, offset)
        log.info("producer state of %s-%d: snapshot at offset %d (%d producers) and %d batches after it",
                 plog.topic, plog.partition, offset, len(entries), batches)
        return table, plog.high_watermark, offset
    table = ProducerStateTable(max_producers)
    batches = replay(table, plog, plog.log_start_offset)
    log.debug("producer state of %s-%d rebuilt from %d batches: %d producers", plog.topic,
              plog.partition, batches, len(table))
    return table, plog.high_watermark, None


def replay(table: ProducerStateTable, plog: PartitionLog, from_offset: int) -> int:
    """Record in ``table`` the v2 batches of ``plog`` whose last offset is ``from_offset`` or
    later, as if they had just been appended; returns how many were recorded."""
    batches = 0
    for segment in plog._segments_from(from_offset):
        first = segment.entry_index_for(from_offset)
        entries = segment.entries[first:]
        if not any(e.magic == 2 for e in entries):
            continue
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            for entry in entries:
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
    return batches


def _producer_entry(entry: SnapshotEntry) -> ProducerEntry:
    state = ProducerEntry(entry.producer_id, entry.producer_epoch)
    if entry.last_offset >= 0:
        first_sequence = ((entry.last_sequence - entry.offset_delta) % _SEQUENCE_WRAP
                          if entry.last_sequence >= 0 else -1)
        state.batches.append(BatchMetadata(first_sequence, entry.last_sequence,
                                           entry.last_offset - entry.offset_delta, entry.last_offset,
                                           entry.timestamp))
    if entry.current_txn_first_offset >= 0:
        state.transaction_first_offset = entry.current_txn_first_offset
    return state


def snapshot_entries(table: ProducerStateTable) -> list[SnapshotEntry]:
    """The table as snapshot entries (each producer's last batch; least recent first)."""
    out = []
    for state in table.producers():
        txn = state.transaction_first_offset if state.transaction_first_offset is not None else -1
        if state.batches:
            last = state.batches[-1]
            out.append(SnapshotEntry(state.producer_id, state.producer_epoch, last.last_sequence,
                                     last.last_offset, last.last_offset - last.first_offset,
                                     last.timestamp, -1, txn))
        else:  # only a marker of it is in the log
            out.append(SnapshotEntry(state.producer_id, state.producer_epoch,
                                     current_txn_first_offset=txn))
    return out


@dataclass
class _Loaded:
    plog: PartitionLog
    table: ProducerStateTable
    end: int  # the table holds every batch below this offset
    snapshot: int | None  # the offset of the latest snapshot on disk that matches it


class ProducerStates:
    """One :class:`ProducerStateTable` per partition, loaded on first use (snapshot, then log)."""

    def __init__(self, max_producers: int = DEFAULT_MAX_PRODUCERS) -> None:
        self.max_producers = max_producers
        self._loaded: dict[tuple[str, int], _Loaded] = {}
        self._lock = threading.Lock()

    def table(self, plog: PartitionLog) -> ProducerStateTable:
        """The partition's producer table, up to date with its log."""
        key = (plog.topic, plog.partition)
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                table, end, snapshot = load_producer_state(plog, self.max_producers)
                loaded = self._loaded[key] = _Loaded(plog, table, end, snapshot)
                plog.on_roll = self._snapshot_at_roll
            elif loaded.end < plog.high_watermark:
                # written by something else than this server's Produce (another process)
                replay(loaded.table, plog, loaded.end)
                loaded.end = plog.high_watermark
            return loaded.table

    def appended(self, plog: PartitionLog, decision: AppendDecision, base_offset: int) -> None:
        """Record what Produce appended at ``base_offset``."""
        key = (plog.topic, plog.partition)
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                return  # loaded from the log the first time it is needed
            loaded.table.apply(decision, base_offset)
            loaded.end = max(loaded.end, base_offset + decision.offset_count)

    def end_transaction(self, plog: PartitionLog, producer_id: int, producer_epoch: int,
                        marker_offset: int | None = None) -> None:
        """A COMMIT/ABORT marker of this producer was written to the partition at ``marker_offset``."""
        key = (plog.topic, plog.partition)
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                return  # the load will read the marker from the log
            if marker_offset is not None and marker_offset != loaded.end:
                return  # the table is behind the log: the catch-up replay reads the marker
            loaded.table.end_transaction(producer_id, producer_epoch)
            if marker_offset is not None:
                loaded.end = marker_offset + 1

    def _snapshot_at_roll(self, plog: PartitionLog, offset: int) -> bytes | None:
        """The snapshot bytes at a roll to ``offset`` (called under the partition's lock, on the
        thread appending); None when the table does not stand exactly at that offset."""
        loaded = self._loaded.get((plog.topic, plog.partition))
        if loaded is None or loaded.end != offset:
            return None
        loaded.snapshot = offset
        return encode_snapshot(snapshot_entries(loaded.table))

    def write_snapshots(self) -> None:
        """At a clean shutdown, after the log was flushed: a snapshot at the log end of every
        partition whose state changed since its latest snapshot."""
        with self._lock:
            items = list(self._loaded.values())
            for loaded in items:
                if loaded.end < loaded.plog.high_watermark:
                    replay(loaded.table, loaded.plog, loaded.end)
                    loaded.end = loaded.plog.high_watermark
            todo = [(loaded.plog, loaded.end, encode_snapshot(snapshot_entries(loaded.table)))
                    for loaded in items if loaded.snapshot != loaded.end]
            for loaded in items:
                loaded.snapshot = loaded.end
        for plog, offset, data in todo:
            plog.write_snapshot(offset, data)
