"""Transactional ids → producer id and epoch, kept in the log directory across restarts.

The transaction coordinator keeps open transactions in memory only, but the producer id,
epoch, transaction timeout and last change of each transactional id are recorded here, so that
after a restart a transaction its producer left open in the partitions is found and aborted
once that timeout has passed since the id's last change (at once by the id's next
InitProducerId, or by a call of its previous incarnation). Forgotten, the id got a fresh
producer id and those transactions stayed open for good: the last stable offset never moved
past them.

A commit is recorded too, before its first COMMIT marker is written and until its offsets are
stored (Kafka's PrepareCommit in its transaction log): a restart in between completes it, where
aborting the partitions still open would have left the transaction committed in some
partitions and aborted in the others.

One small file in the log directory, ``__lazyconv_transactional_ids.json``, rewritten
atomically (temporary file, fsync, rename, directory fsync) whenever an id's producer id or
epoch changes, a transaction ends, a commit begins or ids expire::

    {"version": 1, "producers": {"<transactional id>": {"producer_id": 1000, "epoch": 3,
                                                        "timeout_ms": 60000,
                                                        "last_update_ms": 1700000000000,
        "prepared_commit": {"partitions": [["t", 0]],            (only while committing)
                            "offsets": {"<group>": [["t", 0, 42, -1, "", 1700000000000]]}}}}}

(an offset: topic, partition, offset, leader epoch, metadata, commit timestamp). ``last_update_ms``
is the wall-clock time of the id's last change (Kafka's ``txnLastUpdateTimestamp``), from which it
expires; a file written before it existed loads without it (``None``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyconv.errors import StorageError, ValidationError
from lazyconv.logdir._durability import write_atomically
from lazyconv.serve._offset_store import CommittedOffset

log = logging.getLogger(__name__)

__all__ = ["TRANSACTIONAL_ID_FILE", "IdRecord", "PreparedCommit", "TransactionalIdStore"]

TRANSACTIONAL_ID_FILE = "__lazyconv_transactional_ids.json"
_FORMAT_VERSION = 1

# (producer id, epoch, transaction timeout ms, last update ms: None in a file from before it)
IdRecord = tuple[int, int, int, int | None]


@dataclass(frozen=True)
class PreparedCommit:
    """A commit being completed: the partitions that get a COMMIT marker, the offsets stored."""

    partitions: tuple[tuple[str, int], ...]
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]]


class TransactionalIdStore:
    """Loads and saves ``{transactional id: (producer id, epoch, timeout ms, last update ms)}``
    and the commits being completed."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / TRANSACTIONAL_ID_FILE
        self.prepared: dict[str, PreparedCommit] = {}  # what load found

    def load(self) -> dict[str, IdRecord]:
        """What the file records (empty without a file), its commits being completed in
        :attr:`prepared`; a file that is not this format is logged and ignored (its ids then
        get fresh producer ids, as before it existed)."""
        self.prepared = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            log.error("cannot read %s (%s); transactional ids start afresh", self.path, exc)
            return {}
        try:
            data = json.loads(text)
            if data.get("version") != _FORMAT_VERSION:
                raise ValueError(f"format version {data.get('version')!r}, expected {_FORMAT_VERSION}")
            producers = {str(tid): (int(p["producer_id"]), int(p["epoch"]), int(p["timeout_ms"]),
                                    None if p.get("last_update_ms") is None else int(p["last_update_ms"]))
                         for tid, p in data["producers"].items()}
            prepared = {str(tid): _prepared_from_json(p["prepared_commit"])
                        for tid, p in data["producers"].items() if p.get("prepared_commit") is not None}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("%s", ValidationError(f"{self.path}: not a lazyconv transactional id file: "
                                            f"{exc}; transactional ids start afresh"))
            return {}
        self.prepared = prepared
        return producers

    def save(self, producers: dict[str, IdRecord],
             prepared: dict[str, PreparedCommit] | None = None) -> None:
        """Record ``producers`` and the commits being completed durably; raises
        :class:`~lazyconv.errors.StorageError`."""
        records: dict[str, dict[str, Any]] = {
            tid: {"producer_id": pid, "epoch": epoch, "timeout_ms": timeout, "last_update_ms": updated}
            for tid, (pid, epoch, timeout, updated) in sorted(producers.items())}
        for tid, commit in (prepared or {}).items():
            if tid in records:
                records[tid]["prepared_commit"] = _prepared_to_json(commit)
        data = {"version": _FORMAT_VERSION, "producers": records}
        try:
            write_atomically(self.path, json.dumps(data).encode())
        except OSError as exc:
            raise StorageError(f"cannot record the transactional ids in {self.path}: {exc}") from exc


def _prepared_to_json(commit: PreparedCommit) -> dict[str, Any]:
    return {"partitions": [[topic, partition] for topic, partition in commit.partitions],
            "offsets": {group: [[topic, partition, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp]
                                for (topic, partition), c in sorted(offsets.items())]
                        for group, offsets in sorted(commit.offsets.items())}}


def _prepared_from_json(data: dict[str, Any]) -> PreparedCommit:
    partitions = tuple((str(topic), int(partition)) for topic, partition in data["partitions"])
    offsets = {str(group): {(str(topic), int(partition)): CommittedOffset(
                   int(offset), int(leader_epoch), None if metadata is None else str(metadata),
                   int(timestamp))
                   for topic, partition, offset, leader_epoch, metadata, timestamp in entries}
               for group, entries in data["offsets"].items()}
    return PreparedCommit(partitions, offsets)
