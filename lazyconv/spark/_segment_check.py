"""Check one whole segment without Spark: :func:`check_segment` (tests, tools).

The work is :func:`lazyconv.spark._segment_scan.scan_range` over the whole segment; this module
keeps the simple entry point.
"""

from __future__ import annotations

from typing import Any

from lazyconv.logdir._layout import SegmentFiles
from lazyconv.spark import _violations as _violations
from lazyconv.spark._scan_state import ScanOptions, ScanTask
from lazyconv.spark._segment_scan import scan_range

__all__ = ["VIOLATION_KINDS", "check_segment", "task_for"]

VIOLATION_KINDS = tuple(_violations.VIOLATION_KINDS)


def task_for(seg: SegmentFiles, last_in_partition: bool = False) -> ScanTask:
    """The whole segment as one :class:`~lazyconv.spark._scan_state.ScanTask`."""
    return ScanTask.of(seg, last_in_partition=last_in_partition)


def check_segment(seg: SegmentFiles, options: ScanOptions | None = None, *,
                  last_in_partition: bool = False) -> dict[str, Any]:
    """Check one whole segment (every batch, its index files); see
    :func:`~lazyconv.spark._segment_scan.scan_range` for the result."""
    return scan_range(task_for(seg, last_in_partition), options or ScanOptions())
