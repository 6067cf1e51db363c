"""Kafka's offset checkpoint files of a log directory.

Format: a version line ``0``, a count line, then ``topic partition offset`` per line.

- ``recovery-point-offset-checkpoint``: for each partition the offset below which the log is
  known to be on disk; written at a clean shutdown and after timed flushes; on start only what
  lies after it (and after the latest producer snapshot) is validated
  (:mod:`lazyconv.logdir._recovery`).
- a partition folder's ``leader-epoch-checkpoint``: ``epoch start-offset`` per line, the first
  offset written under each partition leader epoch (a broker adds an entry when it becomes
  leader); read, and emptied when the partition's segments are deleted because its log start
  lies above its log end (Kafka's LogLoader clears the leader epoch cache then).
- ``log-start-offset-checkpoint`` (read only): a partition's log start offset where it lies
  above the base offset of its first segment, as DeleteRecords leaves it (Kafka deletes the
  segments below it later, or never for the segment holding it). Kafka's log start offset is
  the larger of the two.
"""

from __future__ import annotations

from pathlib import Path

from lazyconv.errors import ValidationError
from lazyconv.logdir._durability import write_atomically
from lazyconv.logdir._naming import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "read_leader_epochs",
    "read_log_start_offsets",
    "read_recovery_points",
    "clear_leader_epochs",
    "write_recovery_points",
]

_CHECKPOINT_VERSION = 0


def read_recovery_points(root: Path) -> dict[tuple[str, int], int]:
    """The partitions' recovery points from ``root/recovery-point-offset-checkpoint`` (empty
    when there is none). Raises :class:`~lazyconv.errors.ValidationError` for a file that cannot
    be read or is not in Kafka's checkpoint format."""
    return _read_offsets(root / RECOVERY_POINT_CHECKPOINT)


def read_log_start_offsets(root: Path) -> dict[tuple[str, int], int]:
    """The partitions' log start offsets from ``root/log-start-offset-checkpoint`` (empty when
    there is none); raises as :func:`read_recovery_points`."""
    return _read_offsets(root / LOG_START_OFFSET_CHECKPOINT)


def read_leader_epochs(partition_dir: Path) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` pairs of a partition's ``leader-epoch-checkpoint``, in file
    order; empty when there is none or it is not in Kafka's format (the epochs are then
    unknown, nothing else depends on them)."""
    try:
        lines = (partition_dir / LEADER_EPOCH_CHECKPOINT).read_text(encoding="utf-8").splitlines()
        if int(lines[0]) != _CHECKPOINT_VERSION or int(lines[1]) != len(lines) - 2:
            return []
        pairs = []
        for line in lines[2:]:
            epoch, start = line.split()
            pairs.append((int(epoch), int(start)))
        return pairs
    except (OSError, ValueError, IndexError):
        return []


def clear_leader_epochs(partition_dir: Path) -> None:
    """Empty a partition's ``leader-epoch-checkpoint`` (version and a count of 0, as Kafka's
    clearAndFlush writes it), atomically; nothing when the partition has none. Raises
    ``OSError``."""
    path = partition_dir / LEADER_EPOCH_CHECKPOINT
    if path.exists():
        write_atomically(path, f"{_CHECKPOINT_VERSION}\n0\n".encode())


def _read_offsets(path: Path) -> dict[tuple[str, int], int]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:  # unreadable, or bytes that are not text
        raise ValidationError(f"{path}: not a readable Kafka offset checkpoint file: {exc}") from None
    lines = text.splitlines()
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            raise ValueError(f"version {lines[0]!r}, expected {_CHECKPOINT_VERSION}")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"{count} entries announced, {len(lines) - 2} present")
        points: dict[tuple[str, int], int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            points[(topic, int(partition))] = int(offset)
    except (ValueError, IndexError) as exc:
        raise ValidationError(f"{path}: not a Kafka offset checkpoint file: {exc}") from None
    return points


def write_recovery_points(root: Path, points: dict[tuple[str, int], int]) -> None:
    """Write Kafka's ``recovery-point-offset-checkpoint`` atomically. Raises ``OSError``."""
    lines = [str(_CHECKPOINT_VERSION), str(len(points))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(points.items())]
    write_atomically(root / RECOVERY_POINT_CHECKPOINT, ("\n".join(lines) + "\n").encode())
