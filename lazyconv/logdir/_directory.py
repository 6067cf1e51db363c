"""A log directory: its partition folders, topic ids, recovery points and clean shutdown.

Layout (as a broker writes it, :mod:`lazyconv.logdir._naming`): ``LOGDIR/<topic>-<partition>/``
folders of segments, each opened as a :class:`~lazyconv.logdir._partition.PartitionLog` when it
is first found.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from lazyconv.errors import ConfigurationError, StorageError, ValidationError
from lazyconv.logdir._checkpoint import (
    read_log_start_offsets,
    read_recovery_points,
    write_recovery_points,
)
from lazyconv.logdir._durability import Flusher
from lazyconv.logdir._naming import split_partition_dir
from lazyconv.logdir._partition import LogConfig, PartitionLog
from lazyconv.logdir._topic_ids import ensure_topic_id

log = logging.getLogger(__name__)

__all__ = ["LogDirectory"]


class LogDirectory:
    """All partition directories under a log directory.

    ``config`` (segment size, index interval, flush policy) applies to every partition;
    ``recover`` runs log recovery on each partition when it is first opened (see
    :class:`PartitionLog`). :meth:`close` makes everything written durable and records the
    recovery points, as a broker's clean shutdown does.
    """

    def __init__(self, root: str | os.PathLike[str], config: LogConfig | None = None, *,
                 recover: bool = True) -> None:
        if not isinstance(root, (str, os.PathLike)):  # Path() raised a bare TypeError
            raise ConfigurationError(f"a log directory is a path, got {type(root).__name__}")
        if config is not None and not isinstance(config, LogConfig):
            raise ConfigurationError(f"config must be a LogConfig or None, got {type(config).__name__}")
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValidationError(f"log directory {self.root} does not exist or is not a directory")
        self.config = config or LogConfig()
        self.flusher = Flusher()
        self._recover = recover
        try:
            self._recovery_points = read_recovery_points(self.root)
        except ValidationError as exc:
            # Only costs a longer recovery: every partition is validated as after a crash.
            log.warning("%s; ignoring it", exc)
            self._recovery_points = {}
        try:
            self._log_starts = read_log_start_offsets(self.root)
        except ValidationError as exc:
            log.warning("%s; ignoring it", exc)
            self._log_starts = {}
        self.partitions: dict[tuple[str, int], PartitionLog] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        """Discover partition directories created since the last call."""
        with self._lock:
            for name in sorted(os.listdir(self.root)):
                key = split_partition_dir(name)
                path = self.root / name
                if key is None or not path.is_dir():
                    continue
                if key not in self.partitions:
                    self.partitions[key] = PartitionLog(
                        key[0], key[1], path, config=self.config, flusher=self.flusher,
                        recovery_point=self._recovery_points.get(key), recover=self._recover,
                        log_start_checkpoint=self._log_starts.get(key))
                    self._topic_ids.pop(key[0], None)  # a new folder: make sure it gets the id

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's stable id (from ``partition.metadata``, created on first use)."""
        with self._lock:
            known = self._topic_ids.get(topic)
            if known is not None:
                return known
            directories = [plog.directory for (name, _p), plog in sorted(self.partitions.items())
                           if name == topic]
            if not directories:
                raise ValidationError(f"topic {topic!r} has no partition in {self.root}")
            topic_id = ensure_topic_id(topic, directories)
            self._topic_ids[topic] = topic_id
            self._topics_by_id[topic_id] = topic
            return topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic with id ``topic_id`` (None if no topic here has it)."""
        if topic_id not in self._topics_by_id:
            self.refresh()
            for topic in self.topics():
                self.topic_id(topic)
        return self._topics_by_id.get(topic_id)

    def topics(self) -> dict[str, list[int]]:
        """Topic name → sorted partition ids."""
        result: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            result.setdefault(topic, []).append(partition)
        for parts in result.values():
            parts.sort()
        return dict(sorted(result.items()))

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.partitions.get((topic, partition))

    def max_producer_id(self) -> int:
        """The largest producer id found in any partition's log or latest snapshot (-1: none)."""
        self.refresh()
        return max((plog.max_producer_id() for plog in list(self.partitions.values())), default=-1)

    def flush(self) -> None:
        """Wait for the background flushes, then fsync every partition's unflushed writes.
        A partition that cannot be flushed is logged and keeps its older recovery point."""
        self.flusher.drain()
        for plog in list(self.partitions.values()):
            try:
                plog.flush()
            except StorageError as exc:
                log.error("%s", exc)

    def flush_due(self, now: float | None = None) -> list[PartitionLog]:
        """The partitions whose oldest unflushed append is older than ``flush_ms``."""
        if self.config.flush_ms is None:
            return []
        now = time.monotonic() if now is None else now
        limit = self.config.flush_ms / 1000
        return [plog for plog in list(self.partitions.values())
                if plog.first_unflushed_at is not None and now - plog.first_unflushed_at >= limit]

    def write_checkpoint(self) -> None:
        """Record every partition's recovery point in ``recovery-point-offset-checkpoint``
        (unchanged points are not rewritten; a directory this process only read gets none;
        failures are logged)."""
        plogs = list(self.partitions.items())
        points = {key: plog.recovery_point for key, plog in plogs if plog.recovery_point is not None}
        if points == self._recovery_points:
            return
        if not self._recovery_points and not any(plog.modified for _key, plog in plogs):
            return
        try:
            write_recovery_points(self.root, points)
        except OSError as exc:
            log.warning("cannot write the recovery points of %s: %s", self.root, exc)
            return
        self._recovery_points = points

    def close(self, before_checkpoint: Callable[[], None] | None = None) -> None:
        """A clean shutdown's work: every write fsynced, then ``before_checkpoint`` (the
        broker's producer snapshots), then the recovery points written. The directory stays
        usable (a later append starts the flusher again)."""
        began = time.monotonic()
        log.info("flushing %s for a clean shutdown", self.root)
        self.flush()
        log.info("flushed %s in %.1f s", self.root, time.monotonic() - began)
        if before_checkpoint is not None:
            before_checkpoint()
        self.write_checkpoint()
        self.flusher.close()
