"""Moved to :mod:`lazyconv.logdir.durability` and :mod:`lazyconv.logdir.checkpoint`:
these names stay only until their users import them from there."""

from lazyconv.logdir.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    read_recovery_points,
    write_recovery_points,
)
from lazyconv.logdir.durability import Flusher, fsync_directory, fsync_path, write_atomically

__all__ = ["RECOVERY_POINT_CHECKPOINT", "fsync_path", "fsync_directory", "write_atomically",
           "read_recovery_points", "write_recovery_points", "Flusher"]
