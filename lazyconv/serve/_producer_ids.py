"""Producer ids that are never handed out twice, across restarts.

A producer id identifies an idempotent producer's batches in every partition's producer state,
which survives restarts (snapshots and the log). Handing a new producer an id that an earlier
one used makes its first batch look like a retry of the old producer's batch: acknowledged at
the old offset and never written. Kafka never reuses an id: its controller hands brokers blocks
of ids and records each block durably before any id of it is used (``ProducerIdManager``;
the ZooKeeper-era record was ``{"version":1,"broker":…,"block_start":…,"block_end":…}``).

Here the same is done with one small file in the log directory,
``__lazyconv_producer_ids.json``::

    {"version": 1, "block_start": 1000, "block_end": 1999}

A block of :data:`BLOCK_SIZE` ids is written and fsynced (atomically: temporary file, fsync,
rename, directory fsync) before its first id is handed out; after a restart allocation starts
above the recorded block, so at most the unused rest of a block is skipped. Allocation also
stays above every producer id found in the logs and latest producer snapshots (a directory
written by a Kafka broker, or one whose file was lost), and never goes below
:data:`FIRST_PRODUCER_ID`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from lazyconv.errors import StorageError, ValidationError
from lazyconv.logdir._durability import write_atomically

log = logging.getLogger(__name__)

__all__ = ["ProducerIdManager", "PRODUCER_ID_FILE", "BLOCK_SIZE", "FIRST_PRODUCER_ID"]

PRODUCER_ID_FILE = "__lazyconv_producer_ids.json"
BLOCK_SIZE = 1000  # Kafka's ProducerIdManager block size
FIRST_PRODUCER_ID = 1000
_FORMAT_VERSION = 1
_MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdManager:
    """Hands out producer ids from durably recorded blocks.

    ``floor`` returns the largest producer id already in use in the log directory (-1: none);
    it is asked once, when the first id is needed, since it may read every partition's latest
    snapshot.
    """

    def __init__(self, root: Path, floor: Callable[[], int], block_size: int = BLOCK_SIZE) -> None:
        self.path = Path(root) / PRODUCER_ID_FILE
        self._floor = floor
        self._floor_value: int | None = None
        self.block_size = block_size
        self._next = 0
        self._block_end = -1  # the last id of the block in use (none yet)

    def allocate(self) -> int:
        """A producer id never handed out before (in this or an earlier run).

        Raises :class:`~lazyconv.errors.StorageError` when a new block cannot be recorded (the
        id is then not handed out) and :class:`~lazyconv.errors.ValidationError` when the file
        exists but is not this format."""
        if self._next > self._block_end:
            self._reserve_block()
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve_block(self) -> None:
        if self._floor_value is None:
            self._floor_value = self._floor()
        recorded_end = self._recorded_block_end()
        # Re-read every time: another broker object over the same directory may have recorded
        # a block since (the ids stay disjoint).
        start = max(FIRST_PRODUCER_ID, recorded_end + 1, self._floor_value + 1, self._next)
        end = min(start + self.block_size - 1, _MAX_PRODUCER_ID)
        if start > end:
            raise StorageError("no producer id is left: every 63-bit id was handed out")
        record = {"version": _FORMAT_VERSION, "block_start": start, "block_end": end}
        try:
            write_atomically(self.path, json.dumps(record).encode())
        except OSError as exc:
            raise StorageError(f"cannot record the producer id block {start}-{end} in {self.path}: "
                               f"{exc}") from exc
        log.info("producer ids %d-%d recorded in %s", start, end, self.path)
        self._next, self._block_end = start, end

    def _recorded_block_end(self) -> int:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return -1
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        try:
            record = json.loads(text)
            if record.get("version") != _FORMAT_VERSION:
                raise ValueError(f"version {record.get('version')!r}, expected {_FORMAT_VERSION}")
            end = int(record["block_end"])
            if end < int(record["block_start"]):
                raise ValueError(f"block end {end} is below its start {record['block_start']}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Refuse rather than guess: a wrong guess hands out ids that are in use.
            raise ValidationError(f"{self.path}: not a lazyconv producer id file: {exc}; fix or "
                                  "remove it (ids then restart above those in the logs)") from None
        return end
