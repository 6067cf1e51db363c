"""A single-node transaction coordinator for transactional producers.

What Kafka's TransactionCoordinator does for one broker, kept in memory; each id's producer id,
epoch, timeout and last change are recorded through ``save``, so that after a restart
:meth:`TransactionCoordinator.recover` (given the transactions open in the log) takes back the
transactions a crash or a stop left open, as Kafka's coordinator reloads its transaction log:

- InitProducerId with a transactional id: the id keeps one producer id; every call bumps the
  epoch (fencing older producers) and aborts a transaction the previous incarnation left open
  (its markers carry a bumped epoch, which fences the old producer in the partitions too);
- AddPartitionsToTxn / AddOffsetsToTxn record what the transaction touches;
- before Produce appends a transactional batch that would open a transaction in a partition,
  :meth:`TransactionCoordinator.verify_partition` says whether the producer's transaction
  includes that partition (KIP-890 part 1, Kafka's ``handleVerifyPartitionsInTransaction``);
- TxnOffsetCommit stashes offsets that become the group's committed offsets on commit;
- a transaction open longer than its ``transaction_timeout_ms`` is aborted by
  :meth:`TransactionCoordinator.expire` (called by the broker's timer) and its producer fenced
  (the ABORT markers carry the bumped epoch), as Kafka's ``abortTimedOutTransactions``; after a
  restart too: a transaction left open in the log by an id's producer is timed out with the
  id's recorded timeout, counted from its last recorded change (its InitProducerId or the end
  of its previous transaction: never later than Kafka, which counts from the transaction's
  first AddPartitionsToTxn), and it can only be aborted (what its producer sent with
  TxnOffsetCommit is gone): the old incarnation's next call aborts it and is fenced;
- a transaction open in the log whose producer id no transactional id holds (a log written by
  Kafka, whose ``__transaction_state`` serve does not have, or by a producer whose id was lost)
  has nothing that could end it; Kafka would leave it hanging, and the last stable offset with
  it, until an operator aborts it (``kafka-transactions.sh abort``). Serve, the only
  coordinator of its log directory, aborts it ``unknown_producer_transaction_timeout_ms``
  after the start (15 minutes, the default of Kafka's ``transaction.max.timeout.ms``: the
  longest timeout its coordinator accepts), with markers of the producer's next epoch (fencing
  a producer still writing with that id); until then nothing is written to a directory that
  is only served;
- a transactional id without a transaction open or being committed and unchanged for
  ``transactional_id_expiration_ms`` (Kafka's ``transactional.id.expiration.ms``, 7 days) is
  forgotten, looked for every ``remove_expired_transaction_cleanup_interval_ms`` (Kafka's
  ``transaction.remove.expired.transaction.cleanup.interval.ms``, 1 hour) by
  :meth:`TransactionCoordinator.tick`: its next InitProducerId gets a fresh producer id, its
  old producer INVALID_PRODUCER_ID_MAPPING, as Kafka's ``TransactionStateManager``;
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

from lazyconv.errors import ConfigurationError, ErrorCode, StorageError
from lazyconv.serve._offset_store import CommittedOffset
from lazyconv.serve._txn_ids import IdRecord, PreparedCommit

log = logging.getLogger(__name__)

__all__ = ["TransactionCoordinator", "TransactionalProducer", "TransactionConfig", "UnknownProducerTransaction",
           "MAX_EPOCH"]

MAX_EPOCH = 32767
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
INVALID_TXN_STATE = int(ErrorCode.INVALID_TXN_STATE)
PRODUCER_FENCED = int(ErrorCode.PRODUCER_FENCED)
TRANSACTION_ABORTABLE = int(ErrorCode.TRANSACTION_ABORTABLE)


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's transaction coordinator settings for transactional ids (defaults as Kafka's)."""

    # transactional.id.expiration.ms: an id without a transaction open or being committed,
    # unchanged this long, is forgotten
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    # transaction.remove.expired.transaction.cleanup.interval.ms: how often they are looked for
    remove_expired_transaction_cleanup_interval_ms: int = 3600 * 1000
    # a transaction open in the log at the start whose producer id no transactional id holds is
    # aborted this long after the start (the default of Kafka's transaction.max.timeout.ms, the
    # longest timeout its coordinator accepts)
    unknown_producer_transaction_timeout_ms: int = 15 * 60 * 1000

    def __post_init__(self) -> None:
        for name in ("transactional_id_expiration_ms", "remove_expired_transaction_cleanup_interval_ms",
                     "unknown_producer_transaction_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"TransactionConfig.{name} must be an int of at least 1 ms, "
                                         f"got {value!r}")


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
    # its open transaction is from before a restart (its TxnOffsetCommit offsets are gone): it
    # can only be aborted
    carried_over: bool = False
    prepared: PreparedCommit | None = None  # the commit being completed, as recorded
    last_update_ms: int = 0  # wall clock of its last change (Kafka's txnLastUpdateTimestamp)

    @property
    def ongoing(self) -> bool:
        return bool(self.partitions or self.groups)


@dataclass
class UnknownProducerTransaction:
    """A transaction open in the log whose producer id no transactional id holds."""

    producer_id: int
    epoch: int  # the producer's latest epoch in those partitions
    partitions: set[tuple[str, int]]
    started_at: float  # when it was found (``clock``)


class TransactionCoordinator:
    """Transactional ids → producers. ``write_marker(topic, partition, pid, epoch, commit)``
    appends a control batch; ``commit_offsets(group, offsets)`` stores committed offsets;
    ``partition_exists(topic, partition)`` says whether a partition is served.

    ``restored`` maps the transactional ids of an earlier run to ``(producer id, epoch,
    timeout ms, last update ms)`` (``None``: from a file without it, taken as now) and
    ``prepared`` to the commits it was completing; ``save(producers, prepared)`` records both
    whenever they change (raising :class:`~lazyconv.errors.StorageError` when it cannot);
    ``open_transactions(producer_id)`` names the partitions where that producer has a
    transaction open in the log (asked for an id's producer until :meth:`recover` was given
    them all). ``clock`` (seconds, monotonic) times transactions and the expiration sweeps,
    ``wall_clock`` (seconds since the epoch) the ids' last updates, which outlive a restart;
    ``config``: when ids expire."""

    def __init__(self, allocate_producer_id: Callable[[], int],
                 write_marker: Callable[[str, int, int, int, bool], None],
                 commit_offsets: Callable[[str, dict[tuple[str, int], CommittedOffset]], None],
                 partition_exists: Callable[[str, int], bool],
                 clock: Callable[[], float] = time.monotonic, *,
                 restored: dict[str, IdRecord] | None = None,
                 prepared: dict[str, PreparedCommit] | None = None,
                 save: Callable[[dict[str, IdRecord], dict[str, PreparedCommit]], None] | None = None,
                 open_transactions: Callable[[int], list[tuple[str, int]]] | None = None,
                 config: TransactionConfig | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        if config is not None and not isinstance(config, TransactionConfig):
            raise ConfigurationError(f"the transaction config must be a TransactionConfig, "
                                     f"got {type(config).__name__}")
        self.allocate_producer_id = allocate_producer_id
        self.clock = clock
        self.wall_clock = wall_clock
        self.config = config or TransactionConfig()
        # Kafka's scheduler: the first sweep one interval after the start, then every interval
        self._next_id_expiration = clock() + self.config.remove_expired_transaction_cleanup_interval_ms / 1000
        self.write_marker = write_marker
        self.commit_offsets = commit_offsets
        self.partition_exists = partition_exists
        self.save = save
        self.open_transactions = open_transactions
        loaded_at = self._now_ms()  # an id recorded without its last update: as if updated now
        self.producers: dict[str, TransactionalProducer] = {
            tid: TransactionalProducer(tid, pid, epoch, timeout, restored=True,
                                       last_update_ms=loaded_at if updated is None else updated)
            for tid, (pid, epoch, timeout, updated) in (restored or {}).items()}
        for tid, commit in (prepared or {}).items():
            if tid in self.producers:
                self.producers[tid].prepared = commit
        # transactions open in the log that no id accounts for, by producer id
        self.unknown: dict[int, UnknownProducerTransaction] = {}

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

    def recover(self, open_in_log: dict[int, dict[tuple[str, int], int]]) -> None:
        """Take back the transactions open in the log at the start, after
        :meth:`complete_prepared`: ``open_in_log`` maps each producer id with a transaction open
        to its partitions and its epoch in each. An id's producer gets its transaction back, to
        be timed out (:meth:`expire`) from the id's last recorded change with its recorded
        timeout, as Kafka's coordinator does with the Ongoing transactions it reloads; a
        producer id no id holds is timed out ``unknown_producer_transaction_timeout_ms`` from
        now."""
        by_producer_id = {producer.producer_id: producer for producer in self.producers.values()}
        for producer_id, partitions in open_in_log.items():
            producer = by_producer_id.get(producer_id)
            if producer is None:
                log.info("producer id %d, which no transactional id holds, has a transaction open in "
                         "%d partitions: aborting it in %d ms", producer_id, len(partitions),
                         self.config.unknown_producer_transaction_timeout_ms)
                self.unknown[producer_id] = UnknownProducerTransaction(
                    producer_id, max(partitions.values()), set(partitions), self.clock())
            elif producer.restored:
                self._carry_over(producer, list(partitions))
        for producer in self.producers.values():
            producer.restored = False  # every open partition was given

    def init_producer_id(self, transactional_id: str, timeout_ms: int) -> tuple[int, int, int]:
        """(error code, producer id, epoch) for a (re)starting transactional producer."""
        if not transactional_id:
            return int(ErrorCode.INVALID_REQUEST), -1, -1
        producer = self.producers.get(transactional_id)
        if producer is None:
            producer = TransactionalProducer(transactional_id, self.allocate_producer_id(), 0, timeout_ms,
                                             last_update_ms=self._now_ms())
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
        producer.last_update_ms = self._now_ms()
        self._save()
        return 0, producer.producer_id, producer.epoch

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    def _save(self) -> None:
        if self.save is not None:
            self.save({tid: (p.producer_id, p.epoch, p.timeout_ms, p.last_update_ms)
                       for tid, p in self.producers.items()},
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
            self._carry_over(producer, found)

    def _carry_over(self, producer: TransactionalProducer, partitions: list[tuple[str, int]]) -> None:
        """The transaction ``producer`` left open in ``partitions`` before the restart: open
        again, from the id's last recorded change (Kafka counts from the transaction's start,
        which came after it), to be aborted."""
        producer.restored = False
        producer.partitions.update(partitions)
        producer.carried_over = True
        elapsed_s = max(0, self._now_ms() - producer.last_update_ms) / 1000
        producer.started_at = self.clock() - elapsed_s
        log.info("transactional id %s: a transaction from before the restart is open in %d "
                 "partitions, aborted %d ms after the id's last recorded change unless its "
                 "producer initialises again", producer.transactional_id, len(partitions),
                 producer.timeout_ms)

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[int, TransactionalProducer | None]:
        producer = self.producers.get(transactional_id)
        if producer is None or producer.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if epoch != producer.epoch:
            return int(ErrorCode.INVALID_PRODUCER_EPOCH), None
        self._find_open_partitions(producer)
        if producer.carried_over:
            # the incarnation from before the restart: what its open transaction sent with
            # TxnOffsetCommit is lost, so the transaction is aborted (and it fenced), as a
            # timed-out one
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
        producer.last_update_ms = self._now_ms()
        return dict.fromkeys(partitions, 0)

    def verify_partition(self, transactional_id: str, producer_id: int, epoch: int,
                         partition: tuple[str, int]) -> int:
        """Whether the open transaction of ``transactional_id``'s producer includes
        ``partition``, asked before a Produce appends a transactional batch that would open a
        transaction there, as Kafka's ``handleVerifyPartitionsInTransaction``: 0, or
        INVALID_REQUEST for an empty id, INVALID_PRODUCER_ID_MAPPING for an id this
        coordinator does not hold or that holds another producer id, PRODUCER_FENCED for
        another epoch, TRANSACTION_ABORTABLE for a partition no AddPartitionsToTxn named.
        Changes nothing."""
        if not transactional_id:
            return int(ErrorCode.INVALID_REQUEST)
        producer = self.producers.get(transactional_id)
        if producer is None or producer.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if epoch != producer.epoch:
            return PRODUCER_FENCED
        return 0 if partition in producer.partitions else TRANSACTION_ABORTABLE

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> int:
        code, producer = self._check(transactional_id, producer_id, epoch)
        if producer is None:
            return code
        producer.groups.add(group_id)
        self._started(producer)
        producer.last_update_ms = self._now_ms()
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

    def tick(self, now: float) -> None:
        """The broker's timer (``now`` from ``clock``): :meth:`expire` the transactions open too
        long and, every ``remove_expired_transaction_cleanup_interval_ms``,
        :meth:`remove_expired_ids`."""
        self.expire(now)
        if now >= self._next_id_expiration:
            self._next_id_expiration = now + self.config.remove_expired_transaction_cleanup_interval_ms / 1000
            self.remove_expired_ids()

    def remove_expired_ids(self) -> list[str]:
        """Forget the transactional ids unchanged for ``transactional_id_expiration_ms`` that
        have no transaction open (in memory or, for an id from before a restart, in the log) or
        being committed, as Kafka's expiration of the Empty, CompleteCommit and CompleteAbort
        ones, and record that they are gone; the ids removed. When the record cannot be written
        they are kept (as Kafka keeps an id whose tombstone was not appended), to be tried
        again at the next sweep."""
        deadline = self._now_ms() - self.config.transactional_id_expiration_ms
        expired = []
        for transactional_id, producer in self.producers.items():
            if producer.last_update_ms > deadline or producer.prepared is not None:
                continue
            self._find_open_partitions(producer)
            if not producer.ongoing:
                expired.append(transactional_id)
        if not expired:
            return []
        removed = {transactional_id: self.producers.pop(transactional_id) for transactional_id in expired}
        try:
            self._save()
        except StorageError as exc:
            self.producers.update(removed)
            log.error("%d expired transactional ids kept: %s", len(removed), exc)
            return []
        log.info("%d transactional ids expired (unchanged for %d ms)", len(removed),
                 self.config.transactional_id_expiration_ms)
        return expired

    def expire(self, now: float) -> None:
        """Abort transactions open longer than their timeout and fence their producer (Kafka
        bumps the epoch, so the late producer's next request gets INVALID_PRODUCER_EPOCH); a
        transaction of a producer id no id holds after ``unknown_producer_transaction_timeout_ms``,
        with markers of its next epoch."""
        for producer in self.producers.values():
            started = producer.started_at
            if started is not None and now - started >= producer.timeout_ms / 1000:
                log.info("transactional id %s: transaction timed out after %d ms; aborting",
                         producer.transactional_id, producer.timeout_ms)
                self._fence_and_abort(producer)
        unknown_timeout_ms = self.config.unknown_producer_transaction_timeout_ms
        for producer_id, txn in list(self.unknown.items()):
            if now - txn.started_at < unknown_timeout_ms / 1000:
                continue
            del self.unknown[producer_id]
            epoch = min(txn.epoch + 1, MAX_EPOCH)
            log.info("producer id %d: the transaction no transactional id holds timed out after %d ms; "
                     "aborting it in %d partitions", producer_id, unknown_timeout_ms, len(txn.partitions))
            for topic, partition in sorted(txn.partitions):
                self.write_marker(topic, partition, producer_id, epoch, False)

    def _fence_and_abort(self, producer: TransactionalProducer) -> None:
        """Abort the open transaction with markers of the next epoch, as Kafka's
        ``prepareFenceProducerEpoch``: a partition takes the marker's epoch, so the fenced
        producer's late batches get INVALID_PRODUCER_EPOCH instead of opening a transaction
        nothing would ever end (markers of the old epoch left them accepted)."""
        producer.epoch = min(producer.epoch + 1, MAX_EPOCH)  # at MAX_EPOCH the next init rotates
        self._complete(producer, commit=False)  # records the bumped epoch with the end

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
        producer.prepared = None
        producer.carried_over = False
        # the end recorded with its time (Kafka's CompleteCommit/CompleteAbort): an id in use
        # does not expire after a restart because its last recorded change was older
        producer.last_update_ms = self._now_ms()
        try:
            self._save()
        except StorageError as exc:  # the file keeps the old state until the next save succeeds
            log.error("transactional id %s: %s", producer.transactional_id, exc)
