"""A single-node transaction coordinator for transactional producers.

What Kafka's TransactionCoordinator does for one broker, kept in memory (a restart forgets open
transactions; their partitions keep them open until the same transactional id initialises
again and aborts them: each id's producer id and epoch are recorded through ``save``, and
after a restart ``open_transactions`` finds the partitions its producer id left open):

- InitProducerId with a transactional id: the id keeps one producer id; every call bumps the
  epoch (fencing older producers) and aborts a transaction the previous incarnation left open
  (its markers carry a bumped epoch, which fences the old producer in the partitions too);
- AddPartitionsToTxn / AddOffsetsToTxn record what the transaction touches;
- TxnOffsetCommit stashes offsets that become the group's committed offsets on commit;
- a transaction open longer than its ``transaction_timeout_ms`` is aborted by
  :meth:`TransactionCoordinator.expire` (called by the broker's timer) and its producer fenced
  (the ABORT markers carry the bumped epoch);
- EndTxn writes a COMMIT or ABORT control batch (pid, epoch) into every partition of the
  transaction, through ``write_marker``, then applies or drops the stashed offsets; a commit is
  recorded through ``save`` first (Kafka's PrepareCommit) and, when a restart interrupted it,
  completed by :meth:`TransactionCoordinator.complete_prepared` (the partitions it left open
  get their COMMIT marker, the offsets are stored).

Errors as Kafka's: INVALID_PRODUCER_ID_MAPPING (49) for a producer id the transactional id does
not hold, INVALID_PRODUCER_EPOCH (47) for a fenced epoch, INVALID_TXN_STATE (48) for EndTxn
without a transaction... All methods are synchronous and do no I/O besides the callbacks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lazyconv.errors import ErrorCode, StorageError
from lazyconv.serve._offset_store import CommittedOffset
from lazyconv.serve._txn_ids import PreparedCommit

log = logging.getLogger(__name__)

__all__ = ["TransactionCoordinator", "TransactionalProducer", "MAX_EPOCH"]

MAX_EPOCH = 32767
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
INVALID_TXN_STATE = int(ErrorCode.INVALID_TXN_STATE)


@dataclass
class TransactionalProducer:
    """One transactional id's producer id, epoch and open transaction."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started_at: float | None = None  # when the open transaction added its first partition or group
    pending_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    restored: bool = False  # from before a restart: its open partitions are still to be found
    prepared: PreparedCommit | None = None  # the commit being completed, as recorded

    @property
    def ongoing(self) -> bool:
        return bool(self.partitions or self.groups)


class TransactionCoordinator:
    """Transactional ids → producers. ``write_marker(topic, partition, pid, epoch, commit)``
    appends a control batch; ``commit_offsets(group, offsets)`` stores committed offsets;
    ``partition_exists(topic, partition)`` says whether a partition is served.

    ``restored`` maps the transactional ids of an earlier run to ``(producer id, epoch,
    timeout ms)`` and ``prepared`` to the commits it was completing; ``save(producers,
    prepared)`` records both whenever they change (raising
    :class:`~lazyconv.errors.StorageError` when it cannot); ``open_transactions(producer_id)``
    names the partitions where that producer has a transaction open in the log."""

    def __init__(self, allocate_producer_id: Callable[[], int],
                 write_marker: Callable[[str, int, int, int, bool], None],
                 commit_offsets: Callable[[str, dict[tuple[str, int], CommittedOffset]], None],
                 partition_exists: Callable[[str, int], bool],
                 clock: Callable[[], float] = time.monotonic, *,
                 restored: dict[str, tuple[int, int, int]] | None = None,
                 prepared: dict[str, PreparedCommit] | None = None,
                 save: Callable[[dict[str, tuple[int, int, int]], dict[str, PreparedCommit]], None]
                 | None = None,
                 open_transactions: Callable[[int], list[tuple[str, int]]] | None = None) -> None:
        self.allocate_producer_id = allocate_producer_id
        self.clock = clock
        self.write_marker = write_marker
        self.commit_offsets = commit_offsets
        self.partition_exists = partition_exists
        self.save = save
        self.open_transactions = open_transactions
        self.producers: dict[str, TransactionalProducer] = {
            tid: TransactionalProducer(tid, pid, epoch, timeout, restored=True)
            for tid, (pid, epoch, timeout) in (restored or {}).items()}
        for tid, commit in (prepared or {}).items():
            if tid in self.producers:
                self.producers[tid].prepared = commit

    def complete_prepared(self) -> None:
        """Complete the commits a restart interrupted: a COMMIT marker in each of their
        partitions still open, then their offsets stored (called once, at start)."""
        for producer in self.producers.values():
            commit = producer.prepared
            if commit is None:
                continue
            open_now = (set(self.open_transactions(producer.producer_id))
                        if self.open_transactions is not None else set(commit.partitions))
            producer.partitions = {tp for tp in commit.partitions if tp in open_now}
            producer.pending_offsets = {group: dict(offsets) for group, offsets in commit.offsets.items()}
            log.info("transactional id %s: completing the commit a restart interrupted",
                     producer.transactional_id)
            self._complete(producer, commit=True)

    def init_producer_id(self, transactional_id: str, timeout_ms: int) -> tuple[int, int, int]:
        """(error code, producer id, epoch) for a (re)starting transactional producer."""
        if not transactional_id:
            return int(ErrorCode.INVALID_REQUEST), -1, -1
        producer = self.producers.get(transactional_id)
        if producer is None:
            producer = TransactionalProducer(transactional_id, self.allocate_producer_id(), 0, timeout_ms)
            self.producers[transactional_id] = producer
            self._save()
            return 0, producer.producer_id, producer.epoch
        self._find_open_partitions(producer)
        if producer.ongoing:
            log.info("transactional id %s re-initialised: aborting its open transaction",
                     transactional_id)
            self._fence_and_abort(producer)
        producer.timeout_ms = timeout_ms
        if producer.epoch >= MAX_EPOCH - 1:
            producer.producer_id, producer.epoch = self.allocate_producer_id(), 0
        else:
            producer.epoch += 1
        self._save()
        return 0, producer.producer_id, producer.epoch

    def _save(self) -> None:
        if self.save is not None:
            self.save({tid: (p.producer_id, p.epoch, p.timeout_ms) for tid, p in self.producers.items()},
                      {tid: p.prepared for tid, p in self.producers.items() if p.prepared is not None})

    def _find_open_partitions(self, producer: TransactionalProducer) -> None:
        """A producer from before a restart: the partitions its transaction left open."""
        if not producer.restored:
            return
        producer.restored = False
        if self.open_transactions is None:
            return
        found = self.open_transactions(producer.producer_id)
        if found:
            log.info("transactional id %s: a transaction from before the restart is open in %d "
                     "partitions", producer.transactional_id, len(found))
            producer.partitions.update(found)
            self._started(producer)

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[int, TransactionalProducer | None]:
        producer = self.producers.get(transactional_id)
        if producer is None or producer.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if epoch != producer.epoch:
            return int(ErrorCode.INVALID_PRODUCER_EPOCH), None
        if producer.restored:
            # the incarnation from before the restart: what its open transaction sent with
            # TxnOffsetCommit is lost, so the transaction is aborted (and it fenced), as a
            # timed-out one
            self._find_open_partitions(producer)
            if producer.ongoing:
                self._fence_and_abort(producer)
                return int(ErrorCode.INVALID_PRODUCER_EPOCH), None
        return 0, producer

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Error code per partition (all fail together, as Kafka's)."""
        code, producer = self._check(transactional_id, producer_id, epoch)
        if producer is None:
            return dict.fromkeys(partitions, code)
        unknown = [tp for tp in partitions if not self.partition_exists(*tp)]
        if unknown:
            # Kafka: the unknown ones get UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED
            return {tp: int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if tp in unknown
                    else int(ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        producer.partitions.update(partitions)
        self._started(producer)
        return dict.fromkeys(partitions, 0)

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> int:
        code, producer = self._check(transactional_id, producer_id, epoch)
        if producer is None:
            return code
        producer.groups.add(group_id)
        self._started(producer)
        return 0

    def txn_offset_commit(self, transactional_id: str, producer_id: int, epoch: int, group_id: str,
                          offsets: dict[tuple[str, int], CommittedOffset]) -> int:
        code, producer = self._check(transactional_id, producer_id, epoch)
        if producer is None:
            return code
        if group_id not in producer.groups:
            return INVALID_TXN_STATE
        producer.pending_offsets.setdefault(group_id, {}).update(offsets)
        return 0

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> int:
        code, producer = self._check(transactional_id, producer_id, epoch)
        if producer is None:
            return code
        try:
            self._complete(producer, commit)
        except StorageError as exc:  # the commit could not be recorded: nothing was written
            log.error("EndTxn of transactional id %s: %s", transactional_id, exc)
            return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)  # retried by clients
        return 0

    def _started(self, producer: TransactionalProducer) -> None:
        if producer.started_at is None:
            producer.started_at = self.clock()

    def expire(self, now: float) -> None:
        """Abort transactions open longer than their timeout and fence their producer (Kafka
        bumps the epoch, so the late producer's next request gets INVALID_PRODUCER_EPOCH)."""
        for producer in self.producers.values():
            started = producer.started_at
            if started is not None and now - started >= producer.timeout_ms / 1000:
                log.info("transactional id %s: transaction timed out after %d ms; aborting",
                         producer.transactional_id, producer.timeout_ms)
                self._fence_and_abort(producer)

    def _fence_and_abort(self, producer: TransactionalProducer) -> None:
        """Abort the open transaction with markers of the next epoch, as Kafka's
        ``prepareFenceProducerEpoch``: a partition takes the marker's epoch, so the fenced
        producer's late batches get INVALID_PRODUCER_EPOCH instead of opening a transaction
        nothing would ever end (markers of the old epoch left them accepted)."""
        producer.epoch = min(producer.epoch + 1, MAX_EPOCH)  # at MAX_EPOCH the next init rotates
        self._complete(producer, commit=False)
        try:
            self._save()
        except StorageError as exc:  # the markers fence it already; a restart may forget the epoch
            log.error("transactional id %s: %s", producer.transactional_id, exc)

    def _complete(self, producer: TransactionalProducer, commit: bool) -> None:
        """Write the markers and store or drop the offsets. A commit is recorded before its
        first marker (raising :class:`~lazyconv.errors.StorageError`, with nothing written,
        when it cannot be): a restart half-way completes it rather than aborting the
        partitions left open, which would split the transaction."""
        if (commit and producer.prepared is None and self.save is not None
                and (producer.partitions or producer.pending_offsets)):
            producer.prepared = PreparedCommit(tuple(sorted(producer.partitions)),
                                               {group: dict(offsets) for group, offsets
                                                in producer.pending_offsets.items()})
            try:
                self._save()
            except StorageError:
                producer.prepared = None
                raise
        for topic, partition in sorted(producer.partitions):
            self.write_marker(topic, partition, producer.producer_id, producer.epoch, commit)
        if commit:
            for group, offsets in producer.pending_offsets.items():
                self.commit_offsets(group, offsets)
        log.info("transactional id %s: %s over %d partitions", producer.transactional_id,
                 "commit" if commit else "abort", len(producer.partitions))
        producer.partitions.clear()
        producer.groups.clear()
        producer.pending_offsets.clear()
        producer.started_at = None
        if producer.prepared is not None:
            producer.prepared = None
            try:
                self._save()
            except StorageError as exc:  # the file still holds it until the next save succeeds
                log.error("transactional id %s: %s", producer.transactional_id, exc)
