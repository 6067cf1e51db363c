"""The state of one range scan: the task (:class:`ScanTask`, a byte range of a segment), what to
derive besides the checks (:class:`ScanOptions`), the block reader the log is read through
(:class:`BlockReader`) and the facts the scan gathers as it goes (:class:`RangeScan`), which the
log walk, the runs, the conversions and the index checks all read and write.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lazyconv.logdir._layout import SegmentFiles
from lazyconv.spark._derived_conversion import DerivedConsumer
from lazyconv.spark._reader import SegmentReader
from lazyconv.spark._topic_config import TopicConfig
from lazyconv.spark._violations import ERROR, file_path, violation

__all__ = ["ScanTask", "ScanOptions", "BlockReader", "RangeScan", "BLOCK_SIZE"]

BLOCK_SIZE = 1 << 20


@dataclass(frozen=True)
class ScanTask(SegmentFiles):
    """One byte range ``[start, end)`` of one segment (its :class:`SegmentFiles` fields first),
    as the planner cut it.

    ``start_key`` / ``end_key`` are the offset-index offsets the range was cut at (``None`` at
    the segment's start / end): index entries whose offset lies in ``[start_key, end_key)`` are
    this range's to check. ``last_in_partition`` marks the range that ends the partition (its
    trailing zeros are a warning).
    """

    start: int = 0
    end: int = -1
    start_key: int | None = None
    end_key: int | None = None
    range_index: int = 0
    range_count: int = 1
    last_in_partition: bool = False

    @classmethod
    def of(cls, seg: SegmentFiles, **range_fields: Any) -> ScanTask:
        """A range of ``seg``: its fields, then ``range_fields`` (``start``, ``end``, ...)."""
        return cls(**{f.name: getattr(seg, f.name) for f in fields(SegmentFiles)}, **range_fields)

    @property
    def segment(self) -> str:
        """The ``.log`` file name (as violations name the segment)."""
        return self.name

    @property
    def stop(self) -> int:
        """The range's end (the file size for the last range)."""
        return self.size if self.end < 0 else self.end

    @property
    def is_last_range(self) -> bool:
        return self.range_index == self.range_count - 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScanOptions:
    """What to derive besides the checks: the lazy send for each target magic and chunk size."""

    to_magics: tuple[int, ...] = ()
    chunk_sizes: tuple[int, ...] = ()
    fetch_max_bytes: int = 1024 * 1024
    #: topic -> the configuration its log must obey (:mod:`lazyconv.spark._topic_config`)
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)


class BlockReader(SegmentReader):
    """Positioned reads through one reusable block of ``block_size`` bytes (small reads of
    headers are served from it); ``bytes_read`` counts what was read from the file."""

    def __init__(self, path: str, block_size: int = BLOCK_SIZE) -> None:
        super().__init__(path)
        self.block_size = block_size
        self._block = b""
        self._block_start = 0
        self.bytes_read = 0

    def _raw(self, position: int, size: int) -> bytes:
        self.bytes_read += size
        return super().read(position, size)

    def block_from(self, position: int, least: int) -> tuple[bytes, int]:
        """``(block, offset)`` with ``block[offset:]`` the file's bytes from ``position`` on,
        at least ``least`` of them unless the file ends first (the block is reloaded at
        ``position`` when it holds fewer)."""
        offset = position - self._block_start
        if not (0 <= offset and len(self._block) - offset >= least):
            self._block = self._raw(position, self.block_size)
            self._block_start = position
            offset = 0
        return self._block, offset

    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position`` (fewer at the end of the file)."""
        offset = position - self._block_start
        if 0 <= offset and offset + size <= len(self._block):
            return self._block[offset:offset + size]
        if size >= self.block_size:
            return self._raw(position, size)
        self._block = self._raw(position, self.block_size)
        self._block_start = position
        return self._block[:size]


class RangeScan:
    """The state of one :func:`~lazyconv.spark._segment_scan.scan_range` call (kept on an object
    to keep functions small)."""

    def __init__(self, task: ScanTask, options: ScanOptions) -> None:
        self.task = task
        self.options = options
        self.violations: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {
            "topic": task.topic, "partition": task.partition, "segment": task.segment,
            "base_offset": task.base_offset, "path": task.log_path, "start": task.start,
            "end": task.stop, "range_index": task.range_index, "range_count": task.range_count,
            "bytes": 0, "range_bytes": task.stop - task.start, "batches": 0, "control_batches": 0, "records": 0,
            "first_offset": None, "last_offset": None, "checksum": 0, "batches_v0": 0,
            "batches_v1": 0, "batches_v2": 0, "index_entries": 0, "timeindex_entries": 0,
            "txnindex_entries": 0, "violations": 0, "warnings": 0, "check_seconds": 0.0,
            "scan_end": task.start, "first_epoch": None, "last_epoch": None, "max_timestamp": -1,
        }
        # per entry that could be delimited: position, last offset, running max timestamp
        self.positions: list[int] = []
        self.last_offsets: list[int] = []
        self.running_max_ts: list[int | None] = []
        self.max_ts = -1
        self.prev_offset: int | None = None
        self.prev_epoch: int | None = None
        self.first_epoch_position = -1
        self.abort_markers: dict[tuple[int, int], int] = {}  # (pid, offset) -> log position
        self.txn_first: dict[int, int] = {}  # pid -> first offset of its open transaction
        # producers whose earlier marker is in this range: their next transaction's start is
        # known here (otherwise it may have begun in an earlier range or segment)
        self.txn_marker_seen: set[int] = set()
        self.txn_start_known: set[tuple[int, int]] = set()
        self.txn_starts: dict[tuple[int, int], int] = {}  # (pid, marker offset) -> first offset
        # ABORT markers whose producer has an earlier marker (of any kind) in this range -> its
        # offset: the range sees every batch of their transaction, which begins after it
        self.txn_after_marker: dict[tuple[int, int], int] = {}
        self.txn_last_marker: dict[int, int] = {}  # pid -> offset of its last marker so far
        # [pid, offset, has .txnindex] of ABORT markers with a delete horizon and no entry that
        # no batch in the range precedes, but whose transaction may have begun in an earlier
        # range of the segment: the reduce decides (see _scan_indexes._cleaned_marker)
        self.txn_deferred: list[list[int]] = []
        self.consumers: dict[int, DerivedConsumer] | None = None if not (
            options.to_magics and options.chunk_sizes) else {}
        self.where = ("log", task.start)
        self.zero_bytes = 0  # trailing zeros checked after the last entry
        self.unreadable: set[str] = set()  # files that could not be read ("log", "index", ...)
        self.not_a_segment = False  # the .log does not start with a log entry
        self.aborts_without_txnindex: list[int] | None = None  # [markers, first offset]
        self.config: TopicConfig | None = options.topic_configs.get(task.topic)
        # the entry being checked: (log position, last offset, bytes)
        self.current: tuple[int, int | None, int | None] = (-1, None, None)

    def add(self, file: str, position: int, kind: str, message: str, *,
            offset: int | None = None, severity: str = ERROR) -> None:
        """One violation of this range; one about the entry being checked (``current``) names
        its last offset and size too."""
        t = self.task
        entry = self.current if file == "log" and self.current[0] == position else (-1, None, None)
        self.violations.append(violation(t.topic, t.partition, t.segment, file, position, kind,
                                         message, offset=offset, severity=severity,
                                         last_offset=entry[1], batch_bytes=entry[2],
                                         path=file_path(t.log_path, file)))
