"""Moved to :mod:`lazyconv.logdir.snapshot`:
these names stay only until their users import them from there."""

from lazyconv.logdir.naming import SNAPSHOT_SUFFIX
from lazyconv.logdir.snapshot import (
    SNAPSHOT_VERSION,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_offsets,
    snapshot_path,
)

__all__ = ["SNAPSHOT_SUFFIX", "SNAPSHOT_VERSION", "SnapshotEntry", "encode_snapshot",
           "decode_snapshot", "snapshot_path", "snapshot_offsets"]
