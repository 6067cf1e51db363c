"""Kafka's ``recovery-point-offset-checkpoint``: where each partition's log is known to be on disk.

Format (Kafka's offset checkpoint files): a version line ``0``, a count line, then
``topic partition offset`` per line. For each partition the offset below which the log is known
to be on disk; written at a clean shutdown and after timed flushes; on start only what lies
after it (and after the latest producer snapshot) is validated
(:mod:`lazyconv.logdir.recovery`).
"""

from __future__ import annotations

from pathlib import Path

from lazyconv.errors import ValidationError
from lazyconv.logdir.durability import write_atomically
from lazyconv.logdir.naming import RECOVERY_POINT_CHECKPOINT

__all__ = ["RECOVERY_POINT_CHECKPOINT", "read_recovery_points", "write_recovery_points"]

_CHECKPOINT_VERSION = 0


def read_recovery_points(root: Path) -> dict[tuple[str, int], int]:
    """The partitions' recovery points from ``root/recovery-point-offset-checkpoint`` (empty
    when there is none). Raises :class:`~lazyconv.errors.ValidationError` for a file that is not
    in Kafka's checkpoint format."""
    path = root / RECOVERY_POINT_CHECKPOINT
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
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
