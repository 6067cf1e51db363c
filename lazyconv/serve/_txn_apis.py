"""The transaction APIs on the wire: decoded requests in, response bodies out, over the
coordinator (:mod:`lazyconv.serve._txn_coordinator`, sans-IO), as
:mod:`lazyconv.serve._group_apis` does for the group APIs.

InitProducerId hands out producer ids: a fresh one (never handed out before, also across
restarts: :mod:`lazyconv.serve._producer_ids`) for an idempotent producer, the one kept per
transactional id, with a bumped epoch, for a transactional one. AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit are the coordinator's, answered per partition or
per request with its error code.

:meth:`TransactionApis.verify_produce` is Kafka's transaction verification of a Produce (KIP-890
part 1: ``ReplicaManager.handleProduceAppend`` asks the coordinator through
``AddPartitionsToTxnManager``), with the coordinator's answer turned into the producer's error
as Kafka turns it: PRODUCER_FENCED into INVALID_PRODUCER_EPOCH, and TRANSACTION_ABORTABLE, which
clients know from Produce v11, into INVALID_TXN_STATE "Partition was not added to the
transaction" below it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from lazyconv.errors import ErrorCode, StorageError, ValidationError
from lazyconv.serve._offset_store import CommittedOffset
from lazyconv.serve._txn_coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

__all__ = ["TransactionApis"]

# Produce v11 brought TRANSACTION_ABORTABLE (KIP-890); older producers get INVALID_TXN_STATE
# (Kafka's produceRequestVersionToTransactionSupportedOperation: genericError above v10)
_FIRST_ABORTABLE_PRODUCE_VERSION = 11
_NOT_ADDED = "Partition was not added to the transaction"  # Kafka's words for the 48


class TransactionApis:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit over one
    :class:`TransactionCoordinator`; ``allocate_producer_id`` hands out a fresh producer id."""

    def __init__(self, coordinator: TransactionCoordinator,
                 allocate_producer_id: Callable[[], int]) -> None:
        self.coordinator = coordinator
        self.allocate_producer_id = allocate_producer_id

    def init_producer_id(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        """A producer id and epoch; when no id can be recorded (a full disk) Kafka's
        COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
        try:
            if request["transactional_id"] is not None:
                code, producer_id, epoch = self.coordinator.init_producer_id(
                    request["transactional_id"], request["transaction_timeout_ms"])
                return {"throttle_time_ms": 0, "error_code": code, "producer_id": producer_id,
                        "producer_epoch": epoch}
            return {"throttle_time_ms": 0, "error_code": 0,
                    "producer_id": self.allocate_producer_id(), "producer_epoch": 0}
        except (StorageError, ValidationError) as exc:
            log.error("InitProducerId: %s", exc)
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                    "producer_id": -1, "producer_epoch": -1}

    def verify_produce(self, version: int, transactional_id: str, producer_id: int, epoch: int,
                       partition: tuple[str, int]) -> tuple[int, str | None]:
        """``(error code, error message)`` of a Produce ``version`` partition whose
        transactional batch would open a transaction in ``partition``: ``(0, None)`` when the
        producer's transaction includes it (Kafka words only the INVALID_TXN_STATE)."""
        code = self.coordinator.verify_partition(transactional_id, producer_id, epoch, partition)
        if code == ErrorCode.PRODUCER_FENCED:
            return int(ErrorCode.INVALID_PRODUCER_EPOCH), None
        if code == ErrorCode.TRANSACTION_ABORTABLE and version < _FIRST_ABORTABLE_PRODUCE_VERSION:
            return int(ErrorCode.INVALID_TXN_STATE), _NOT_ADDED
        return code, None

    def add_partitions_to_txn(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        partitions = [(t["name"], p) for t in request["v3_and_below_topics"] for p in t["partitions"]]
        codes = self.coordinator.add_partitions(
            request["v3_and_below_transactional_id"], request["v3_and_below_producer_id"],
            request["v3_and_below_producer_epoch"], partitions)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes[(t["name"], p)]}
                for p in t["partitions"]]}
            for t in request["v3_and_below_topics"]]}

    def add_offsets_to_txn(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        code = self.coordinator.add_offsets(request["transactional_id"], request["producer_id"],
                                            request["producer_epoch"], request["group_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    def end_txn(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        code = self.coordinator.end_txn(request["transactional_id"], request["producer_id"],
                                        request["producer_epoch"], request["committed"])
        return {"throttle_time_ms": 0, "error_code": code}

    def txn_offset_commit(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        offsets = {(t["name"], p["partition_index"]): CommittedOffset(
                       p["committed_offset"], p.get("committed_leader_epoch", -1),
                       p["committed_metadata"] or "", int(time.time() * 1000))  # null: "", as Kafka
                   for t in request["topics"] for p in t["partitions"]}
        code = self.coordinator.txn_offset_commit(
            request["transactional_id"], request["producer_id"], request["producer_epoch"],
            request["group_id"], offsets)
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]]}
            for t in request["topics"]]}
