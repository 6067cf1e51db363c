"""Moved to :mod:`lazyconv.logdir.index`:
these names stay only until their users import them from there."""

from lazyconv.logdir.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexCursor,
    expected_indexes,
)
from lazyconv.logdir.naming import INDEX_SUFFIX, TIMEINDEX_SUFFIX

__all__ = ["DEFAULT_INDEX_INTERVAL_BYTES", "OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE", "INDEX_SUFFIX",
           "TIMEINDEX_SUFFIX", "IndexCursor", "expected_indexes"]
