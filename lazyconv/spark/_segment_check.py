"""Check one whole segment without Spark: :func:`check_segment` (tests, tools).

The work is :func:`lazyconv.spark._segment_scan.scan_range` over the whole segment; this module
keeps the simple entry point and the helpers :mod:`lazyconv.spark._conversion_check` (the
reference consumer that runs the real lazy send) uses.
"""

from __future__ import annotations

from typing import Any

from lazyconv.logdir._layout import SegmentFiles
from lazyconv.spark import _violations as _violations
from lazyconv.spark._reader import SegmentReader
from lazyconv.spark._segment_scan import ScanOptions, ScanTask, scan_range

__all__ = ["VIOLATION_KINDS", "SegmentReader", "violation", "check_segment", "task_for"]

VIOLATION_KINDS = tuple(_violations.VIOLATION_KINDS)


def violation(seg: SegmentFiles | None, file: str, position: int, kind: str, message: str,
              topic: str | None = None, partition: int | None = None) -> dict[str, Any]:
    """One error located by a segment (or a topic and partition), file and byte position."""
    return _violations.violation(seg.topic if seg is not None else topic,
                                 seg.partition if seg is not None else partition,
                                 seg.name if seg is not None else "", file, position, kind,
                                 message)


def task_for(seg: SegmentFiles, last_in_partition: bool = False) -> ScanTask:
    """The whole segment as one :class:`~lazyconv.spark._segment_scan.ScanTask`."""
    return ScanTask.of(seg, last_in_partition=last_in_partition)


def check_segment(seg: SegmentFiles, options: ScanOptions | None = None, *,
                  last_in_partition: bool = False) -> dict[str, Any]:
    """Check one whole segment (every batch, its index files); see
    :func:`~lazyconv.spark._segment_scan.scan_range` for the result."""
    return scan_range(task_for(seg, last_in_partition), options or ScanOptions())
