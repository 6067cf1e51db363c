"""One partition's idempotent and transactional producers (Kafka's ``ProducerStateManager``
and ``ProducerStateEntry``): each producer's epoch, its last batches (the duplicate window) and
its open transaction.

:func:`~lazyconv.serve._append_validation.validate_produce` reads a :class:`ProducerStateTable`
to refuse stale epochs and out-of-order sequences and to answer retried batches as duplicates;
the caller records each accepted append with :meth:`ProducerStateTable.apply`. Loading a table
from a partition's snapshot and log is :mod:`lazyconv.serve._producer_state`'s job.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lazyconv.errors import ConfigurationError

if TYPE_CHECKING:
    from lazyconv.serve._append_validation import AppendDecision, AppendEntry

__all__ = ["BATCHES_TO_RETAIN", "BatchMetadata", "ProducerEntry", "ProducerStateTable", "record_batch"]

BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the duplicate window


@dataclass(frozen=True)
class BatchMetadata:
    """What the producer state keeps of an appended batch (Kafka's ``BatchMetadata``)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int



@dataclass
class ProducerEntry:
    """One producer's state in a partition (Kafka's ``ProducerStateEntry``).

    ``batches`` holds the metadata of its last :data:`BATCHES_TO_RETAIN` batches of the current
    epoch (the duplicate window); ``transaction_first_offset`` is the first offset of its open
    transaction, ``None`` when none is open.
    """

    producer_id: int
    producer_epoch: int = -1
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=BATCHES_TO_RETAIN)
    )
    transaction_first_offset: int | None = None

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def find_duplicate(self, epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        """The retained batch with exactly these sequences in ``epoch``, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.producer_epoch,
            collections.deque(self.batches, maxlen=BATCHES_TO_RETAIN),
            self.transaction_first_offset,
        )


class ProducerStateTable:
    """The idempotent / transactional producer state of one partition.

    :func:`validate_produce` reads it; :meth:`apply` records an append; :meth:`end_transaction`
    closes a producer's open transaction when its COMMIT/ABORT marker is written.

    Memory is bounded: at most ``max_producers`` producers are kept, the one that appended
    least recently is forgotten first (Kafka expires idle producers after
    ``producer.id.expiration.ms``); a forgotten producer's next batch starts it afresh, with any
    sequence, as after Kafka's expiry. Producers with an open transaction are forgotten last.
    """

    def __init__(self, max_producers: int = 65536) -> None:
        if max_producers < 1:
            raise ConfigurationError(f"max_producers must be at least 1, got {max_producers}")
        self.max_producers = max_producers
        self._entries: collections.OrderedDict[int, ProducerEntry] = collections.OrderedDict()

    def entry(self, producer_id: int) -> ProducerEntry | None:
        """The producer's state, or ``None`` if it never appended here (or was forgotten)."""
        return self._entries.get(producer_id)

    def _state(self, producer_id: int) -> ProducerEntry:
        state = self._entries.get(producer_id)
        if state is None:
            state = self._entries[producer_id] = ProducerEntry(producer_id)
            self._evict()
        else:
            self._entries.move_to_end(producer_id)
        return state

    def _evict(self) -> None:
        while len(self._entries) > self.max_producers:
            older = itertools.islice(self._entries.items(), len(self._entries) - 1)  # not the newest
            victim = next(
                (pid for pid, e in older if e.transaction_first_offset is None),
                next(iter(self._entries)),
            )
            del self._entries[victim]

    def __len__(self) -> int:
        return len(self._entries)

    def producers(self) -> list[ProducerEntry]:
        """Every producer's state, the one that appended least recently first."""
        return list(self._entries.values())

    def restore(self, entry: ProducerEntry) -> None:
        """Put back a producer's state as a snapshot recorded it (it becomes the most recent)."""
        self._entries[entry.producer_id] = entry
        self._entries.move_to_end(entry.producer_id)
        self._evict()

    def apply(self, decision: AppendDecision, base_offset: int) -> None:
        """Record the entries of an accepted ``decision`` appended from ``base_offset``."""
        if not decision.accepted:
            raise ConfigurationError(f"cannot apply a rejected append ({decision.error_code.name})")
        offset = base_offset
        for entry in decision.entries:
            first, offset = offset, offset + entry.offset_count
            if entry.producer_id < 0:
                continue
            record_batch(self._state(entry.producer_id), entry, first)

    def end_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """Close the producer's open transaction (a marker was written); a newer epoch is taken."""
        state = self._state(producer_id)
        if producer_epoch > state.producer_epoch:
            state.producer_epoch = producer_epoch
            state.batches.clear()
        state.transaction_first_offset = None


def record_batch(state: ProducerEntry, entry: AppendEntry, first_offset: int) -> None:
    if entry.producer_epoch != state.producer_epoch:
        state.producer_epoch = entry.producer_epoch
        state.batches.clear()
    state.batches.append(
        BatchMetadata(
            entry.first_sequence,
            entry.last_sequence,
            first_offset,
            first_offset + entry.offset_count - 1,
            entry.max_timestamp,
        )
    )
    if entry.is_transactional and state.transaction_first_offset is None:
        state.transaction_first_offset = first_offset
