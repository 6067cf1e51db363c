"""Committed consumer-group offsets, persisted in the log directory so they survive a restart.

The store is one JSON file, ``LOGDIR/__lazyconv_offsets/offsets.json``::

    {"version": 1, "groups": {"<group>": {"<topic>": {"<partition>":
        {"offset": 42, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1700000000000}}}}}

Every commit rewrites it atomically (write a temporary file, fsync, rename, fsync the folder),
so a crash or a power loss leaves either the old or the new content, never a torn file. The folder name has no ``-<n>`` suffix,
so it is never mistaken for a partition directory.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from lazyconv.errors import ValidationError
from lazyconv.logdir._durability import fsync_directory, write_atomically

log = logging.getLogger(__name__)

__all__ = ["OffsetStore", "CommittedOffset", "OFFSETS_DIRECTORY"]

OFFSETS_DIRECTORY = "__lazyconv_offsets"
_FILE = "offsets.json"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class CommittedOffset:
    """One committed position of a group in a partition."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1


class OffsetStore:
    """Group → topic → partition → :class:`CommittedOffset`, loaded at start, saved on commit."""

    def __init__(self, logdir_root: str | os.PathLike[str] | None) -> None:
        """``logdir_root`` None keeps offsets in memory only (tests, read-only log directories)."""
        self.path = None if logdir_root is None else Path(logdir_root) / OFFSETS_DIRECTORY / _FILE
        self._offsets: dict[str, dict[str, dict[int, CommittedOffset]]] = {}
        self._lock = threading.Lock()
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except UnicodeDecodeError as exc:  # bytes that are not text: not such a file either
            raise ValidationError(f"{self.path}: not a lazyconv offsets file: {exc}") from None
        try:
            data = json.loads(text)
            if data.get("version") != _FORMAT_VERSION:
                raise ValueError(f"format version {data.get('version')!r}, expected {_FORMAT_VERSION}")
            for group, topics in data["groups"].items():
                for topic, partitions in topics.items():
                    for partition, entry in partitions.items():
                        self._offsets.setdefault(group, {}).setdefault(topic, {})[int(partition)] = (
                            CommittedOffset(int(entry["offset"]), int(entry.get("leader_epoch", -1)),
                                            entry.get("metadata", ""), int(entry.get("commit_timestamp", -1))))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValidationError(f"{self.path}: not a lazyconv offsets file: {exc}") from None
        log.info("loaded committed offsets of %d groups from %s", len(self._offsets), self.path)

    def commit(self, group: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Store ``offsets`` for ``group`` and persist them before returning."""
        with self._lock:
            before = {topic: dict(parts) for topic, parts in self._offsets.get(group, {}).items()}
            topics = self._offsets.setdefault(group, {})
            for (topic, partition), committed in offsets.items():
                topics.setdefault(topic, {})[partition] = committed
            try:
                self._save_locked()
            except BaseException:
                # not stored, not served: the memory keeps what the file holds
                if before:
                    self._offsets[group] = before
                else:
                    del self._offsets[group]
                raise

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        """The committed offset, or None."""
        return self._offsets.get(group, {}).get(topic, {}).get(partition)

    def partitions(self, group: str) -> dict[str, list[int]]:
        """Topic → partitions with a committed offset in ``group``."""
        return {topic: sorted(parts) for topic, parts in sorted(self._offsets.get(group, {}).items())}

    def has_offsets(self, group: str) -> bool:
        """Whether ``group`` has a committed offset."""
        return group in self._offsets

    def groups(self) -> list[str]:
        """Groups with committed offsets."""
        return sorted(self._offsets)

    def _save_locked(self) -> None:
        if self.path is None:
            return
        data = {"version": _FORMAT_VERSION, "groups": {
            group: {topic: {str(p): {"offset": c.offset, "leader_epoch": c.leader_epoch,
                                     "metadata": c.metadata, "commit_timestamp": c.commit_timestamp}
                            for p, c in sorted(parts.items())}
                    for topic, parts in sorted(topics.items())}
            for group, topics in sorted(self._offsets.items())}}
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(exist_ok=True)
            fsync_directory(self.path.parent.parent)  # the folder's own name survives a power loss
        # temporary file, fsync, rename, folder fsync: a crash or a power loss leaves the old
        # content or the new, never a torn file nor the old one back after an answered commit
        write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
