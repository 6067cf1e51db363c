"""Transactional ids → producer id and epoch, kept in the log directory across restarts.

The transaction coordinator keeps open transactions in memory only, but the producer id and
epoch it gave each transactional id are recorded here, so that after a restart the id's next
InitProducerId (or a call of its previous incarnation) finds the transactions that incarnation
left open in the partitions and aborts them. Forgotten, the id got a fresh producer id and
those transactions stayed open for good: the last stable offset never moved past them.

One small file in the log directory, ``__lazyconv_transactional_ids.json``, rewritten
atomically (temporary file, fsync, rename) whenever an id's producer id or epoch changes::

    {"version": 1, "producers": {"<transactional id>": {"producer_id": 1000, "epoch": 3,
                                                        "timeout_ms": 60000}}}
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lazyconv.errors import StorageError, ValidationError
from lazyconv.logdir._durability import write_atomically

log = logging.getLogger(__name__)

__all__ = ["TRANSACTIONAL_ID_FILE", "TransactionalIdStore"]

TRANSACTIONAL_ID_FILE = "__lazyconv_transactional_ids.json"
_FORMAT_VERSION = 1


class TransactionalIdStore:
    """Loads and saves ``{transactional id: (producer id, epoch, timeout ms)}``."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / TRANSACTIONAL_ID_FILE

    def load(self) -> dict[str, tuple[int, int, int]]:
        """What the file records (empty without a file); a file that is not this format is
        logged and ignored (its ids then get fresh producer ids, as before it existed)."""
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
            return {str(tid): (int(p["producer_id"]), int(p["epoch"]), int(p["timeout_ms"]))
                    for tid, p in data["producers"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("%s", ValidationError(f"{self.path}: not a lazyconv transactional id file: "
                                            f"{exc}; transactional ids start afresh"))
            return {}

    def save(self, producers: dict[str, tuple[int, int, int]]) -> None:
        """Record ``producers`` durably; raises :class:`~lazyconv.errors.StorageError`."""
        data = {"version": _FORMAT_VERSION, "producers": {
            tid: {"producer_id": pid, "epoch": epoch, "timeout_ms": timeout}
            for tid, (pid, epoch, timeout) in sorted(producers.items())}}
        try:
            write_atomically(self.path, json.dumps(data).encode())
        except OSError as exc:
            raise StorageError(f"cannot record the transactional ids in {self.path}: {exc}") from exc
