"""Moved to :mod:`lazyconv.logdir`:
these names stay only until their users import them from there."""

from lazyconv.logdir.directory import LogDirectory
from lazyconv.logdir.entry import MAX_ENTRY_SIZE, Entry
from lazyconv.logdir.naming import LOG_SUFFIX as SEGMENT_SUFFIX
from lazyconv.logdir.partition import (
    DEFAULT_SEGMENT_BYTES,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    Region,
)
from lazyconv.logdir.segment import Segment

__all__ = ["Entry", "Segment", "PartitionLog", "LogDirectory", "LogConfig", "Region",
           "OffsetOutOfRange", "SEGMENT_SUFFIX", "DEFAULT_SEGMENT_BYTES", "MAX_ENTRY_SIZE"]
