"""One pass over one byte range of one segment: the validation job's per-segment work.

:func:`scan_range` reads the range once, in blocks. Runs of sound v2 batches (plain or
compressed data batches and control batches, in order, with nothing to report) are taken by
one kernel call each (:func:`lazyconv.records._segment_run.segment_run`: CRC-32C, record
structure, offsets, leader epochs, max timestamps and the record digests, no Python object per
batch; the kernel calls back only to decompress), converted once per target magic (plain
stretches in one kernel call, compressed batches from the records already decompressed) and
handed to a :class:`~lazyconv.spark._derived_conversion.DerivedConsumer`, which derives the lazy
send's behaviour for every chunk size. Every other entry (legacy messages, and whatever a run
stops at) goes through the per-entry path: delimited (size, magic, torn write, trailing zeros),
validated (CRC-32C / CRC-32, structure), digested, checked (offsets, leader epochs, max
timestamp) and reported where something is wrong. Both paths record the same facts; a test
holds them to the same results. Then the ``.index``, ``.timeindex`` and ``.txnindex`` entries
that belong to the range are checked against what the scan saw.

Memory is a read block, a run (at most one fetch of input when converting), the batches of one
fetch window and their conversions, and the index entries (a few bytes per 4 KiB of log);
never the segment.

What a range cannot know alone (offsets and epochs before it, the max timestamp of the log
before it) comes back in the result's ``boundary`` for the per-partition reduce
(:mod:`lazyconv.spark._partition_checks`).
"""

from __future__ import annotations

import bisect
import logging
import struct
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from lazyconv.errors import CorruptRecordError, LazyconvError
from lazyconv.logdir._entry import MIN_ENTRY_SIZE as MIN_ENTRY_SIZE_FIELD
from lazyconv.logdir._index import OFFSET_ENTRY as _OFFSET_ENTRY
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from lazyconv.logdir._index import TIME_ENTRY as _TIME_ENTRY
from lazyconv.logdir._layout import SegmentFiles
from lazyconv.logdir._txnindex import TXNINDEX_ENTRY as _TXN_ENTRY
from lazyconv.logdir._txnindex import TXNINDEX_ENTRY_SIZE as TXN_ENTRY_SIZE
from lazyconv.records._compression import decompress
from lazyconv.records._control import ControlRecordType
from lazyconv.records._digest import (
    DIGEST_DECLINED,
    MASK64,
    digest_delivered,
    digest_v2_records,
    record_digest,
)
from lazyconv.records._format import (
    ATTRIBUTES_LENGTH,
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_LENGTH,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LOG_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from lazyconv.spark._derived_conversion import ConvertedBatch, DerivedConsumer
from lazyconv.spark._reader import SegmentReader, read_regular_file
from lazyconv.spark._topic_config import TIMESTAMP_TYPES, TopicConfig
from lazyconv.spark._violations import ERROR, WARNING, file_path, violation

__all__ = [
    "ScanTask",
    "ScanOptions",
    "BlockReader",
    "scan_range",
    "TXN_ENTRY_SIZE",
    "DEFERRED_TIME_ENTRIES",
]

log = logging.getLogger(__name__)

V2_MIN_SIZE_FIELD = BATCH_LENGTH_MIN  # a v2 batch header is 61 bytes, 12 of them before the size field counts
DEFERRED_TIME_ENTRIES = 64
BLOCK_SIZE = 1 << 20
_ZERO_BLOCK = bytes(1 << 16)
_HEADER = LOG_HEADER
# an entry's header up to a v2 batch's last offset delta (its last offset)
_UP_TO_LAST_OFFSET_DELTA = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_TEXT_PREVIEW = 24  # characters of a text file quoted in its violation
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


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



def _read_small_file(path: str) -> bytes | None:
    """A whole index file, or ``None`` when there is none."""
    if "://" in path:
        import fsspec

        fs, local = fsspec.core.url_to_fs(path)
        if not fs.exists(local):
            return None
        with fs.open(local, "rb") as f:
            return bytes(f.read())
    try:
        return read_regular_file(path)
    except FileNotFoundError:
        return None


class _RangeScan:
    """The state of one :func:`scan_range` call (kept on an object to keep functions small)."""

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


def scan_range(task: ScanTask, options: ScanOptions = ScanOptions()) -> dict[str, Any]:
    """Check one byte range of one segment in a single pass.

    Returns ``{"summary", "violations", "conversions", "boundary"}``; never raises: an
    unexpected exception becomes an ``internal_error`` violation at the file and byte position
    being checked when it happened.
    """
    started = time.perf_counter()
    scan = _RangeScan(task, options)
    conversions: list[dict[str, Any]] = []
    try:
        _scan_log(scan)
        deferred: list[tuple[int, int, int, int]] = []
        if "log" not in scan.unreadable and not scan.not_a_segment:
            # indexes are checked against the log: not against a file that is not one
            scan.where = ("index", -1)
            _check_offset_index(scan)
            scan.where = ("timeindex", -1)
            deferred = _check_time_index(scan)
            scan.where = ("txnindex", -1)
            _check_txn_index(scan)
        scan.where = ("log", -1)
        conversions = _conversion_rows(scan)
    except Exception as exc:  # noqa: BLE001 - a task reports, it never aborts the job
        file, position = scan.where
        log.exception("internal error checking %s at %s byte %s", task.log_path, file, position)
        scan.add(file, position, "internal_error", f"{type(exc).__name__}: {exc}")
        deferred = []
        conversions = []
    s = scan.summary
    s["checksum"] &= MASK64
    s["bytes"] = s["scan_end"] - task.start + scan.zero_bytes
    s["violations"] = sum(1 for v in scan.violations if v["severity"] == ERROR)
    s["warnings"] = len(scan.violations) - s["violations"]
    s["check_seconds"] = time.perf_counter() - started
    boundary = {
        "first_offset": s["first_offset"], "last_offset": s["last_offset"],
        "first_epoch": s["first_epoch"], "last_epoch": s["last_epoch"],
        "max_timestamp": scan.max_ts, "scan_end": s["scan_end"],
        "first_epoch_position": scan.first_epoch_position,
        "deferred_time_entries": deferred,
        "aborts_without_txnindex": scan.aborts_without_txnindex,
    }
    return {"summary": s, "violations": scan.violations, "conversions": conversions,
            "boundary": boundary}


# --- the log ---------------------------------------------------------------------------------

def _scan_log(scan: _RangeScan) -> None:
    task = scan.task
    try:
        reader = BlockReader(task.log_path)
    except OSError as exc:
        scan.unreadable.add("log")
        scan.add("log", -1, "unreadable", f"cannot open {task.log_path}: {exc.strerror or exc}")
        return
    with reader:
        end = min(task.stop, reader.size) if task.end >= 0 else reader.size
        pos = task.start
        if pos == 0 and end > 0:
            foreign = _foreign_file(reader.read(0, 64), task.base_offset, reader.size)
            if foreign is not None:
                scan.not_a_segment = True
                scan.add("log", 0, "not_a_segment", f"not a Kafka segment: {foreign}")
                return
        while pos < end:
            scan.where = ("log", pos)
            pos = _take_runs(scan, reader, pos, end)
            if pos >= end:
                break
            scan.where = ("log", pos)
            size = _delimit(scan, reader, pos, end)
            if size is None:
                break
            _check_entry(scan, reader.read(pos, size), pos)
            pos += size
        scan.summary["scan_end"] = pos
        if scan.consumers is not None:
            for consumer in scan.consumers.values():
                consumer.finish(pos)


_SIGNATURES = (  # what a file that is not a segment often is, by its first bytes
    (b"\x1f\x8b", "a gzip file"), (b"\x28\xb5\x2f\xfd", "a zstd frame"),
    (b"\x04\x22\x4d\x18", "an LZ4 frame"), (b"\xff\x06\x00\x00sNaPpY", "a snappy stream"),
    (b"PK\x03\x04", "a zip file"), (b"BZh", "a bzip2 file"), (b"\xfd7zXZ\x00", "an xz file"),
    (b"\x7fELF", "an ELF binary"), (b"PAR1", "a Parquet file"), (b"%PDF", "a PDF file"),
)
_PRINTABLE = frozenset(range(32, 127)) | {9, 10, 13}


def _foreign_file(head: bytes, base_offset: int, file_size: int) -> str | None:
    """Why a segment's first bytes are not a log entry (``None`` when they may be one): a
    known file signature, text, or a header unlike any Kafka entry's (an offset more than 2^31
    from the segment's base offset, and a magic above 2, a size field below 14 or an entry
    longer than the file). Zeros are left to the trailing-zeros check, and anything that may
    be an entry (a torn one, one with a wrong offset) to the entry checks."""
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return f"it starts like {what} ({signature[:4].hex(' ')})"
    if len(head) < HEADER_SIZE_UP_TO_MAGIC or not any(head):
        return None
    if all(b in _PRINTABLE for b in head):
        return f"it holds text ({head[:_TEXT_PREVIEW].decode('ascii')!r}...)"
    offset, size = _HEADER.unpack_from(head)
    magic = head[MAGIC_OFFSET]
    impossible = size < MIN_ENTRY_SIZE_FIELD or magic > 2 or LOG_OVERHEAD + size > file_size
    if abs(offset - base_offset) >= 1 << 31 and impossible:
        return (f"its first bytes are no log entry header (offset {offset}, size field {size}, "
                f"magic {magic}; the segment's base offset is {base_offset})")
    return None


def _delimit(scan: _RangeScan, reader: BlockReader, pos: int, end: int) -> int | None:
    """The total size of the entry at ``pos``, or ``None`` (with a violation or a warning) where
    the rest of the range cannot be delimited."""
    head = reader.read(pos, HEADER_SIZE_UP_TO_MAGIC)
    if len(head) < LOG_OVERHEAD:
        if _all_zeros(reader, pos, end):
            _trailing_zeros(scan, pos, end)
        else:
            scan.add("log", pos, "truncated", f"{end - pos} bytes at the end of the segment are "
                                              f"less than an entry header")
        return None
    offset, size = _HEADER.unpack_from(head)
    if offset == 0 and size == 0 and _all_zeros(reader, pos, end):
        _trailing_zeros(scan, pos, end)
        return None
    if size < MIN_ENTRY_SIZE_FIELD:
        scan.add("log", pos, "bad_size", f"entry at offset {offset} has size field {size} "
                                         f"(< {MIN_ENTRY_SIZE_FIELD}); the remaining {end - pos} bytes cannot be "
                                         f"checked", offset=offset)
        return None
    if len(head) < HEADER_SIZE_UP_TO_MAGIC or pos + LOG_OVERHEAD + size > end:
        scan.add("log", pos, "truncated", f"entry at offset {offset} declares {size} bytes but "
                                          f"the segment ends after {end - pos - LOG_OVERHEAD}",
                 offset=offset)
        return None
    magic = head[MAGIC_OFFSET]
    if magic > 2:
        scan.add("log", pos, "bad_magic", f"entry at offset {offset} has magic {magic}; the "
                                          f"remaining {end - pos} bytes cannot be checked",
                 offset=offset)
        return None
    return LOG_OVERHEAD + size


def _all_zeros(reader: BlockReader, pos: int, end: int) -> bool:
    while pos < end:
        n = min(len(_ZERO_BLOCK), end - pos)
        if reader.read(pos, n) != _ZERO_BLOCK[:n]:
            return False
        pos += n
    return True


def _trailing_zeros(scan: _RangeScan, pos: int, end: int) -> None:
    task = scan.task
    scan.zero_bytes = end - pos
    if task.last_in_partition and task.is_last_range:
        scan.add("log", pos, "trailing_zeros",
                 f"{end - pos} zero bytes after the last entry (preallocated; Kafka reads them as "
                 f"the end of the log)", severity=WARNING)
    else:
        scan.add("log", pos, "trailing_zeros",
                 f"{end - pos} zero bytes after the last entry of a segment that is not the "
                 f"partition's last")


class _Facts(NamedTuple):
    """What the checks and the conversions need from an entry's records: their count, the
    offsets of the first and last, whether offsets increase, the max timestamp as stored (v2:
    base + delta), the sums of the record digests as a consumer sees them (``full``), without
    headers (a magic 1 consumer) and with timestamp -1 too (a magic 0 consumer), and a control
    batch's first key."""

    record_count: int
    first_offset: int
    last_offset: int
    offsets_increasing: bool
    max_raw_timestamp: int
    full: int
    no_headers: int
    no_timestamp: int
    control_key: bytes | None = None


_NO_FACTS = _Facts(0, 0, -1, True, -1, 0, 0, 0)


def _entry_facts(batch: Any) -> tuple[_Facts, bytes | None]:
    """The facts of a validated entry, and a compressed v2 batch's decompressed records (for
    its conversions; ``None`` otherwise): a v2 data batch is digested from its (decompressed)
    record bytes in one kernel call; other entries, and records the digest declines, are
    decoded record by record (which raises the records layer's error for a damaged one)."""
    if batch.magic == 2 and not batch.is_control and batch.record_count > 0:
        override = batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else None
        payload = batch.records_payload()
        digest = digest_v2_records(payload, batch.record_count, batch.base_offset,
                                   batch.base_timestamp, override)
        if digest is not None:
            facts = _Facts(batch.record_count, *digest[:4], *digest[5:])
            return facts, payload if batch.attributes & COMPRESSION_CODEC_MASK else None
    return _facts_of_records(list(batch), batch.is_control), None


def _facts_of_records(records: list[Any], control: bool) -> _Facts:
    if not records:
        return _NO_FACTS
    full = no_headers = no_timestamp = 0
    increasing = True
    previous = None
    for r in records:
        plain = record_digest(r.offset, r.timestamp, r.key, r.value)
        no_headers += plain
        full += record_digest(r.offset, r.timestamp, r.key, r.value, r.headers) if r.headers else plain
        no_timestamp += plain if r.timestamp == -1 else record_digest(r.offset, -1, r.key, r.value)
        if previous is not None and r.offset <= previous:
            increasing = False
        previous = r.offset
    return _Facts(len(records), records[0].offset, records[-1].offset, increasing,
                  max(r.timestamp for r in records), full & MASK64, no_headers & MASK64,
                  no_timestamp & MASK64, records[0].key if control else None)


def _check_entry(scan: _RangeScan, data: bytes, pos: int) -> None:
    """Decode, validate and check one complete entry at log byte ``pos``."""
    from lazyconv.records import MemoryRecords

    s = scan.summary
    magic = data[MAGIC_OFFSET]
    header_offset, size_field = _HEADER.unpack_from(data)
    scan.current = (pos, _header_last_offset(data), len(data))
    if magic == 2 and size_field < V2_MIN_SIZE_FIELD:
        scan.add("log", pos, "structure",
                 f"v2 batch at offset {header_offset} has length {size_field}, below the v2 "
                 f"minimum {V2_MIN_SIZE_FIELD}", offset=header_offset)
        _keep_place(scan, pos, header_offset, None)
        scan.consumers = None
        return
    try:
        batch = next(MemoryRecords(data).batches())
        batch.validate()
        facts, payload = _entry_facts(batch)
    except LazyconvError as exc:
        kind = "crc" if isinstance(exc, CorruptRecordError) else "structure"
        inner = f" (byte {pos + exc.position} of the segment)" if exc.position else ""
        scan.add("log", pos, kind, f"{_what_failed(data, exc)}{inner}", offset=header_offset)
        _keep_place(scan, pos, _header_last_offset(data), None)
        scan.consumers = None  # the conversion of a damaged range is not checked
        return
    s["batches"] += 1
    s[f"batches_v{batch.magic}"] += 1
    base = batch.base_offset
    last = batch.last_offset
    if scan.config is not None:
        _check_topic_config(scan, scan.prev_offset, pos, data, base, last, facts.record_count,
                            batch.is_control)
    _check_offsets(scan, batch, facts, pos, base, last)
    if magic == 2:
        _check_v2_header(scan, batch, facts, pos)
    s["last_offset"] = last
    if batch.is_control:
        s["control_batches"] += 1
        _note_control(scan, batch, facts, pos)
    else:
        s["checksum"] += facts.full
        s["records"] += facts.record_count
        if batch.is_transactional and magic == 2 and batch.producer_id not in scan.txn_first:
            scan.txn_first[batch.producer_id] = base
    scan.max_ts = max(scan.max_ts, batch.max_timestamp)
    s["max_timestamp"] = scan.max_ts
    _keep_place(scan, pos, last, scan.max_ts)
    if scan.consumers is not None:
        _feed_consumers(scan, batch, data, facts, payload, pos)


def _what_failed(entry: bytes, exc: LazyconvError) -> str:
    """What is wrong with an entry that does not decode, naming its bytes: a compressed
    payload that does not decompress, or decompresses to bytes that are not records."""
    from lazyconv.errors import CompressionError
    from lazyconv.records._compression import Compression

    reason = f"{type(exc).__name__}: {exc.message}"
    # the attributes' low byte: the codec
    at = ATTRIBUTES_OFFSET + 1 if entry[MAGIC_OFFSET] == 2 else LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
    if isinstance(exc, CorruptRecordError) or len(entry) <= at:
        return reason
    codec = entry[at] & COMPRESSION_CODEC_MASK
    if not codec:
        return reason
    try:
        name = Compression(codec).name.lower()
    except ValueError:
        return reason
    if isinstance(exc, CompressionError):
        return f"{name} payload does not decode ({reason})"
    return f"the records decompressed from the {name} payload do not decode ({reason})"


def _check_topic_config(scan: _RangeScan, previous: int | None, pos: int, entry: bytes | memoryview,
                        base: int, last: int, records: int, control: bool) -> None:
    """The checks of the topic's configuration (:mod:`lazyconv.spark._topic_config`) on one
    sound entry at log byte ``pos`` (``previous``: the last offset of the entry before it in
    the range)."""
    config = scan.config
    assert config is not None
    magic = entry[MAGIC_OFFSET]
    where = f"batch {base}..{last}" if magic == 2 else f"message at offset {last}"
    if config.max_message_bytes is not None and len(entry) > config.max_message_bytes:
        scan.add("log", pos, "max_message_bytes",
                 f"{where} is {len(entry)} bytes, over the topic's max.message.bytes "
                 f"{config.max_message_bytes}", offset=base)
    if config.log_append_time is not None and magic > 0:
        at = ATTRIBUTES_OFFSET + 1 if magic == 2 else LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
        log_append = bool(entry[at] & TIMESTAMP_TYPE_MASK)
        if log_append != config.log_append_time:
            scan.add("log", pos, "timestamp_type",
                     f"{where} has {TIMESTAMP_TYPES[log_append]} timestamps, the topic's "
                     f"message.timestamp.type is {TIMESTAMP_TYPES[config.log_append_time]}",
                     offset=base)
    if config.contiguous_offsets:
        if previous is not None and base > previous + 1:
            scan.add("log", pos, "offset_gap",
                     f"offsets {previous + 1}..{base - 1} are missing before {where} (only "
                     f"compaction removes offsets; the topic's cleanup.policy is delete)",
                     offset=base)
        if magic == 2 and not control and records and records != last - base + 1:
            scan.add("log", pos, "offset_gap",
                     f"{where} holds {records} records for {last - base + 1} offsets (only "
                     f"compaction removes records; the topic's cleanup.policy is delete)",
                     offset=base)
    if config.keys_required and not control:
        from lazyconv.records import MemoryRecords

        keyless = sum(1 for b in MemoryRecords(bytes(entry)).batches() for r in b if r.key is None)
        if keyless:
            scan.add("log", pos, "null_key",
                     f"{where} has {keyless} record(s) without a key (the topic's cleanup.policy "
                     f"is compact: Kafka refuses keyless records there)", offset=base)


def _check_topic_config_run(scan: _RangeScan, run: Any, data: memoryview, pos: int) -> None:
    """:func:`_check_topic_config` for every batch of a run (``data``: its bytes, from log
    byte ``pos``)."""
    previous = scan.prev_offset
    ends = [*run.positions[1:], pos + run.consumed]
    for start, end, last in zip(run.positions, ends, run.last_offsets, strict=True):
        entry = data[start - pos:end - pos]
        base = _HEADER.unpack_from(entry)[0]
        control = bool(entry[ATTRIBUTES_OFFSET + 1] & CONTROL_FLAG_MASK)
        records = struct.unpack_from(">i", entry, RECORDS_COUNT_OFFSET)[0]
        scan.current = (start, last, len(entry))
        _check_topic_config(scan, previous, start, entry, base, last, records, control)
        previous = last


def _keep_place(scan: _RangeScan, pos: int, last_offset: int, running_max: int | None) -> None:
    scan.positions.append(pos)
    scan.last_offsets.append(last_offset)
    scan.running_max_ts.append(running_max)


def _header_last_offset(entry: bytes) -> int:
    """Last offset as an entry's header states it (v2: base + delta; legacy: its offset)."""
    offset = _HEADER.unpack_from(entry)[0]
    if entry[MAGIC_OFFSET] >= 2 and len(entry) >= _UP_TO_LAST_OFFSET_DELTA:
        return int(offset + struct.unpack_from(">i", entry, LAST_OFFSET_DELTA_OFFSET)[0])
    return int(offset)


def _check_offsets(scan: _RangeScan, batch: Any, facts: _Facts, pos: int, base: int,
                   last: int) -> None:
    s = scan.summary
    task = scan.task
    if s["first_offset"] is None:
        s["first_offset"] = base
        if base < task.base_offset:
            scan.add("log", pos, "segment_base", f"first offset {base} is below the segment "
                                                 f"base offset {task.base_offset}", offset=base)
    prev = scan.prev_offset
    if prev is not None and base <= prev:
        scan.add("log", pos, "offset_order",
                 f"batch offsets {base}..{last} do not follow offset {prev}", offset=base)
    if last < base:
        scan.add("log", pos, "offset_order", f"last offset {last} is below base offset {base}",
                 offset=base)
    in_order = facts.record_count == 0 or (facts.offsets_increasing and facts.first_offset >= base
                                    and facts.last_offset <= last)
    if not in_order:  # rare: decode the records again to name the first one out of place
        record_prev = base - 1
        for r in batch:
            if r.offset <= record_prev or r.offset > last:
                scan.add("log", pos, "offset_order",
                         f"record offset {r.offset} out of order in batch {base}..{last} "
                         f"(previous {record_prev})", offset=r.offset)
                break
            record_prev = r.offset
    scan.prev_offset = last  # the next batch is compared with this one: one finding per fault


def _check_v2_header(scan: _RangeScan, batch: Any, facts: _Facts, pos: int) -> None:
    s = scan.summary
    epoch = batch.partition_leader_epoch
    if epoch >= 0:  # -1: unknown (written before leader epochs existed)
        if scan.prev_epoch is not None and epoch < scan.prev_epoch:
            scan.add("log", pos, "leader_epoch",
                     f"batch {batch.base_offset}..{batch.last_offset} has partition leader epoch "
                     f"{epoch}, below the previous batch's {scan.prev_epoch}",
                     offset=batch.base_offset)
        if s["first_epoch"] is None:
            s["first_epoch"] = epoch
            scan.first_epoch_position = pos
        s["last_epoch"] = scan.prev_epoch = epoch  # the next batch is compared with this one
    if facts.record_count and not batch.attributes & TIMESTAMP_TYPE_MASK:
        actual = facts.max_raw_timestamp  # create time: the header states the records' max
        if actual != batch.max_timestamp:
            scan.add("log", pos, "timestamp",
                     f"batch {batch.base_offset}..{batch.last_offset} states max timestamp "
                     f"{batch.max_timestamp} but its records' max is {actual}",
                     offset=batch.base_offset)


def _note_control(scan: _RangeScan, batch: Any, facts: _Facts, pos: int) -> None:
    """Remember ABORT markers (for the ``.txnindex`` check) and close the producer's txn."""
    if batch.magic != 2 or not facts.record_count:
        return
    key = facts.control_key
    abort = (key is not None and len(key) >= _CONTROL_KEY.size
             and _CONTROL_KEY.unpack_from(key)[1] == ControlRecordType.ABORT)
    _note_marker(scan, batch.producer_id, facts.first_offset, abort, pos)


def _note_marker(scan: _RangeScan, producer_id: int, offset: int, abort: bool, pos: int) -> None:
    """A transaction marker of ``producer_id`` at ``offset`` (log byte ``pos``)."""
    if abort:
        marker = (producer_id, offset)
        scan.abort_markers[marker] = pos
        first = scan.txn_first.get(producer_id)
        if first is not None:
            scan.txn_starts[marker] = first
            if producer_id in scan.txn_marker_seen:
                scan.txn_start_known.add(marker)
    scan.txn_first.pop(producer_id, None)
    scan.txn_marker_seen.add(producer_id)


# --- runs of sound v2 batches ----------------------------------------------------------------

def _take_runs(scan: _RangeScan, reader: BlockReader, pos: int, end: int) -> int:
    """Take the runs of sound, in-order v2 batches from ``pos`` on
    (:func:`lazyconv.records._segment_run.segment_run`: one call per run, no Python per batch
    but the decompression of compressed ones);
    returns where the per-entry path must go on (an entry the runs leave, or ``end``). With
    conversions, a run holds at most one fetch of input (the consumers' memory bound)."""
    from lazyconv.records._segment_run import segment_run

    if scan.prev_offset is not None and scan.prev_offset > _INT64_MAX:
        return pos  # a batch's last offset left int64 (reported): no later batch can be sound
    limit = scan.options.fetch_max_bytes if scan.consumers is not None else BLOCK_SIZE
    limit = max(limit, RECORD_BATCH_OVERHEAD)
    while pos < end:
        scan.where = ("log", pos)  # an unexpected error inside a run is reported at its start
        block, offset = reader.block_from(pos, min(limit, RECORD_BATCH_OVERHEAD))
        if len(block) - offset > MAGIC_OFFSET and block[offset + MAGIC_OFFSET] != 2:
            return pos  # a legacy entry (or garbage): the per-entry path
        available = min(len(block) - offset, end - pos, limit)
        with memoryview(block) as view, view[offset:offset + available] as data:
            run = segment_run(data, pos, scan.prev_offset, scan.task.base_offset, scan.prev_epoch,
                              scan.max_ts, _decompress_records)
            if not run.consumed:
                return pos
            first_base = _HEADER.unpack_from(data)[0]
            if scan.config is not None:
                _check_topic_config_run(scan, run, data[:run.consumed], pos)
            _apply_run(scan, run, first_base)
            if scan.consumers is not None:
                _feed_run(scan, run, data[:run.consumed], first_base)
        pos += run.consumed
    return pos


def _decompress_records(codec: int, data: bytes) -> bytes | None:
    """A compressed v2 batch's records for :func:`segment_run`; ``None`` when they do not
    decompress (the per-entry path then reports why)."""
    return _decompress_wrapper(codec, 2, data)


def _apply_run(scan: _RangeScan, run: Any, first_base: int) -> None:
    """What the per-entry checks would have recorded for every batch of ``run`` (none of
    them has anything to report; the first one's base offset is ``first_base``)."""
    from lazyconv.records._segment_run import RUN_ABORT, RUN_CONTROL

    s = scan.summary
    count = len(run.positions)
    s["batches"] += count
    s["batches_v2"] += count
    s["records"] += run.data_records
    s["checksum"] += run.full
    if s["first_offset"] is None:
        s["first_offset"] = first_base
    s["last_offset"] = run.last_offsets[-1]
    if s["first_epoch"] is None and run.first_epoch is not None:
        s["first_epoch"], scan.first_epoch_position = run.first_epoch
    s["last_epoch"] = run.prev_epoch
    scan.prev_epoch = run.prev_epoch
    scan.prev_offset = run.prev_offset
    scan.max_ts = run.max_timestamp
    s["max_timestamp"] = scan.max_ts
    scan.positions += run.positions
    scan.last_offsets += run.last_offsets
    scan.running_max_ts += run.max_timestamps
    for marker in run.markers:
        if marker.flags & RUN_CONTROL:
            s["control_batches"] += 1
            _note_marker(scan, marker.producer_id, marker.first_record, bool(marker.flags & RUN_ABORT),
                         marker.position)
        elif marker.producer_id not in scan.txn_first:
            scan.txn_first[marker.producer_id] = marker.base_offset


def _feed_run(scan: _RangeScan, run: Any, data: memoryview, first_base: int) -> None:
    """Convert ``run`` (its bytes: ``data``) once per target magic and give it to each
    consumer: stretches of uncompressed batches in one kernel call each, every compressed one
    from the records the run decompressed; a run the converters decline goes batch by batch."""
    assert scan.consumers is not None
    run_end = run.positions[0] + run.consumed
    base = run.positions[0]
    # where each batch starts in data, and the run's end: for the compressed batches' slices
    starts = [p - base for p in run.positions] + [run.consumed] if run.compressed else []
    for to_magic in scan.options.to_magics:
        consumer = _consumer(scan, to_magic, first_base)
        converted = (_convert_run(run, data, starts, consumer.conversion_buffer, to_magic)
                     if to_magic < 2 else None)
        if converted is None:
            _feed_run_by_batch(scan, consumer, data, run.positions[0], to_magic)
            continue
        ends, records, last_records, temporaries, zstd = converted
        consumer.expect_records(run.convertible_records,
                                run.no_headers if to_magic > 0 else run.no_timestamp)
        consumer.add_run(run.positions, run_end, run.last_offsets, ends, records, last_records,
                         temporaries, zstd)


def _convert_run(run: Any, data: memoryview, starts: list[int], out: bytearray,
                 to_magic: int) -> tuple | None:
    """``run`` converted to ``to_magic`` (0 or 1) into ``out``: ``(ends, records, last records,
    temporaries of compressed batches, zstd batch indexes)`` for
    :meth:`DerivedConsumer.add_run`; ``None`` (``out`` unchanged) when a converter declines.
    ``starts``: where each batch starts in ``data``, then the run's length (needed only when
    the run holds compressed batches)."""
    from lazyconv._convert import append_compressed_v2_entry
    from lazyconv.records._segment_run import convert_run_ends

    start = len(out)
    if not run.compressed:
        whole = convert_run_ends(data, out, to_magic)
        return None if whole is None else (whole, run.records, run.last_records, None, ())
    ends: list[int] = []
    records = list(run.records)
    last_records = list(run.last_records)
    temporaries: dict[int, int] = {}
    zstd: list[int] = []
    done = 0  # batches converted so far
    for index, payload in [*run.compressed, (len(run.positions), None)]:
        if index > done:  # the plain stretch before it
            stretch = convert_run_ends(data[starts[done]:starts[index]], out, to_magic)
            if stretch is None:
                del out[start:]
                return None
            ends += stretch
        if index == len(run.positions):
            break
        if payload is None:  # zstd: error 76 below magic 2, never converted
            zstd.append(index)
            records[index] = 0
            last_records[index] = None
        else:
            records[index], temporaries[index] = append_compressed_v2_entry(
                out, data[starts[index]:starts[index + 1]], payload, to_magic, run.positions[index])
        ends.append(len(out))
        done = index + 1
    return ends, records, last_records, temporaries, zstd


def _feed_run_by_batch(scan: _RangeScan, consumer: DerivedConsumer, data: memoryview, start: int,
                       to_magic: int) -> None:
    from lazyconv.records import MemoryRecords

    for batch in MemoryRecords(bytes(data)).batches():
        position = start + batch.position
        entry = bytes(data[batch.position:batch.position + batch.size_in_bytes])
        facts, payload = _entry_facts(batch)
        _feed_consumer(scan, consumer, batch, entry, facts, payload, position, to_magic)


def _consumer(scan: _RangeScan, to_magic: int, base_offset: int) -> DerivedConsumer:
    """The consumer of ``to_magic``, created at the first batch (``base_offset``) it sees."""
    assert scan.consumers is not None
    consumer = scan.consumers.get(to_magic)
    if consumer is None:
        options = scan.options
        start = scan.task.base_offset if scan.task.start == 0 else base_offset
        consumer = DerivedConsumer(to_magic, options.chunk_sizes, options.fetch_max_bytes, start,
                                   _digest_delivered)
        scan.consumers[to_magic] = consumer
    return consumer


# --- conversions -------------------------------------------------------------------------------

def _digest_delivered(data: memoryview, min_offset: int) -> tuple[int, int | None, int, int]:
    """What a consumer receives from ``data`` (converted bytes, possibly cut inside the last
    entry) at fetch offset ``min_offset``: ``(bytes of complete entries, last offset of the
    last complete entry or None, records at or above min_offset, sum of their digests without
    headers)``.

    Plain legacy messages and compressed wrappers (what v2 batches convert to below magic 2)
    are digested in one kernel call (:func:`lazyconv.records._digest.digest_delivered`, each
    wrapper decompressed once); any entry it leaves (a v2 batch, a damaged entry) is decoded by
    the records layer's reader, which raises the error reading it would.
    """
    pos = 0
    end = len(data)
    last: int | None = None
    count = total = 0
    while pos < end:
        run = digest_delivered(data[pos:], min_offset, _decompress_wrapper)
        if run.entries:
            last = run.last_offset
            count += run.records
            total += run.sum
        pos += run.consumed
        if run.stop != DIGEST_DECLINED:
            break
        size = _entry_size(data, pos, end)
        if size is None:
            break  # cut by the committed size: not received
        entry_last, entry_count, entry_sum = _digest_entries_by_records(data[pos:pos + size], min_offset)
        last = entry_last if entry_last is not None else last
        count += entry_count
        total += entry_sum
        pos += size
    return pos, last, count, total & MASK64


def _decompress_wrapper(codec: int, magic: int, value: bytes) -> bytes | None:
    """A legacy wrapper's inner messages for :func:`digest_delivered` (or, with magic 2, a v2
    batch's records); ``None`` when they do not decompress (the reader then reports why)."""
    try:
        return decompress(codec, value, magic)
    except LazyconvError:
        return None


def _entry_size(data: memoryview, pos: int, end: int) -> int | None:
    """The size of the entry at ``pos``: ``None`` when it does not end within ``data``; the
    rest of ``data`` when its size field is impossible (the reader then reports it)."""
    if end - pos < LOG_OVERHEAD:
        return None
    size = LOG_OVERHEAD + _HEADER.unpack_from(data, pos)[1]
    if size < LOG_OVERHEAD + MIN_ENTRY_SIZE_FIELD:
        return end - pos
    return size if size <= end - pos else None


def _digest_entries_by_records(data: memoryview, min_offset: int) -> tuple[int | None, int, int]:
    """``(last offset of the last entry or None, count, digest sum)`` of the complete entries
    of ``data``, decoded record by record by the records layer's reader (a consumer receives no
    record from a control batch); the reference for the kernel's digests."""
    from lazyconv.records import MemoryRecords

    last: int | None = None
    count = total = 0
    for batch in MemoryRecords(bytes(data)).batches():
        last = batch.last_offset
        if batch.is_control:
            continue
        for r in batch:
            if r.offset >= min_offset:
                count += 1
                total += record_digest(r.offset, r.timestamp, r.key, r.value)
    return last, count, total


def _digest_delivered_by_records(data: memoryview, min_offset: int) -> tuple[int, int | None, int, int]:
    """:func:`_digest_delivered` decoding every record (the reference)."""
    valid = 0
    end = len(data)
    while (size := _entry_size(data, valid, end)) is not None and valid + size <= end:
        valid += size
    last, count, total = _digest_entries_by_records(data[:valid], min_offset)
    return valid, last, count, total & MASK64


def _expected_digest_sum(batch: Any, facts: _Facts, to_magic: int) -> int:
    """The digest sum of the records a consumer of ``to_magic`` receives from ``batch``: no
    headers below magic 2, and timestamp -1 unless both magics carry one."""
    if to_magic > 0 and batch.magic > 0:
        return facts.no_headers
    return facts.no_timestamp


def _convert_once(batch: Any, data: bytes, to_magic: int,
                  payload: bytes | None = None) -> tuple[bytes | bytearray, int, int]:
    """``batch`` (whose entry bytes are ``data``) converted to ``to_magic`` with no first-offset
    filter: ``(bytes, records converted, temporary memory)``. A plain v2 batch goes straight to
    the kernel's run converter, a compressed one whose records were decompressed for the checks
    (``payload``) is converted from them; anything else through ``down_convert_bytes``."""
    from lazyconv._convert import append_compressed_v2_entry, down_convert_bytes
    from lazyconv.records._conversion import convert_uncompressed_run

    if payload is not None and to_magic < 2 and batch.magic == 2 and batch.base_offset >= 0:
        converted = bytearray()
        records, temporary = append_compressed_v2_entry(converted, data, payload, to_magic,
                                                        batch.position)
        return converted, records, temporary

    plain_data = not batch.attributes & (COMPRESSION_CODEC_MASK | CONTROL_FLAG_MASK)
    if to_magic < 2 and batch.magic == 2 and plain_data and batch.base_offset >= 0:
        out = bytearray()
        run = convert_uncompressed_run(data, out, to_magic, 0)
        if run is not None and run.consumed == len(data):
            return out, run.converted, run.temporary
    # no first-offset filter: 0 keeps every offset of a sane log; a negative base offset keeps
    # the reference path (which refuses negative offsets)
    no_filter = 0 if batch.base_offset >= 0 else _INT64_MIN
    conv, stats = down_convert_bytes([batch], to_magic, no_filter)
    return conv, stats.records_converted, stats.temporary_memory_bytes


def _feed_consumers(scan: _RangeScan, batch: Any, data: bytes, facts: _Facts,
                    payload: bytes | None, pos: int) -> None:
    assert scan.consumers is not None
    for to_magic in scan.options.to_magics:
        consumer = _consumer(scan, to_magic, batch.base_offset)
        _feed_consumer(scan, consumer, batch, data, facts, payload, pos, to_magic)


def _feed_consumer(scan: _RangeScan, consumer: DerivedConsumer, batch: Any, data: bytes,
                   facts: _Facts, payload: bytes | None, pos: int, to_magic: int) -> None:
    """One batch (its entry bytes: ``data``, at log byte ``pos``; ``payload``: its records
    decompressed, for a compressed v2 batch), converted to ``to_magic``."""
    from lazyconv._convert import is_zstd_below_v2

    control = batch.is_control
    plain = not batch.attributes & COMPRESSION_CODEC_MASK  # v2 and legacy alike
    count = facts.record_count
    zstd = not plain and is_zstd_below_v2(batch, to_magic)
    expected = not control and not zstd and count > 0
    if zstd or (to_magic < 2 and control):
        conv: bytes | bytearray = b""
        converted = temporary = 0
    else:
        conv, converted, temporary = _convert_once(batch, data, to_magic, payload)
    if expected:
        consumer.expect_records(count, _expected_digest_sum(batch, facts, to_magic))
    consumer.add(ConvertedBatch(pos, batch.size_in_bytes, batch.last_offset, zstd, conv, converted,
                                temporary, batch.magic > to_magic and plain,
                                facts.last_offset if expected else None))


def _locate_conversion_failure(scan: _RangeScan, to_magic: int) -> tuple[int, int | None, str]:
    """Where a consumer of ``to_magic`` first gets other records than expected: the
    reference consumer (:mod:`lazyconv.spark._conversion_check`, the real lazy send, record by
    record) is run over the segment, which costs more than the derived scan but happens only
    when a conversion fails. ``(log position, offset, what it found)``."""
    from lazyconv.spark._conversion_check import check_conversions

    task = scan.task
    options = scan.options
    found = check_conversions(task, to_magic, [options.chunk_sizes[0]], options.fetch_max_bytes)
    for result in found:
        for v in result["violations"]:
            return v["position"], v.get("offset"), f"the lazy send itself: {v['message']}"
    return -1, scan.summary["first_offset"], ("the reference consumer, running the lazy send, "
                                             "receives the expected records (a bug in the "
                                             "derived consumer)")


def _conversion_rows(scan: _RangeScan) -> list[dict[str, Any]]:
    """One row per target magic x chunk size; a ``conversion`` violation when the records a
    consumer receives differ from the expected ones."""
    if not scan.consumers:
        return []
    task = scan.task
    rows = []
    for to_magic, consumer in sorted(scan.consumers.items()):
        t = consumer.totals
        ok = t.delivered == t.expected and t.delivered_hash == t.expected_hash
        if not ok:
            position, offset, where = _locate_conversion_failure(scan, to_magic)
            scan.add("log", position, "conversion",
                     f"to magic {to_magic}: a consumer receives {t.delivered} records "
                     f"(hash {t.delivered_hash:016x}), {t.expected} expected "
                     f"(hash {t.expected_hash:016x}); {where}", offset=offset)
        for chunk_size, tally in sorted(t.tallies.items()):
            rows.append({
                "topic": task.topic, "partition": task.partition, "segment": task.segment,
                "start": task.start, "first_offset": scan.summary["first_offset"],
                "last_offset": scan.summary["last_offset"], "to_magic": to_magic,
                "chunk_size": chunk_size,
                "bytes_in": scan.summary["scan_end"] - task.start,
                "records_expected": t.expected, "records_delivered": t.delivered,
                "fetches": t.fetches, "bytes_committed": t.bytes_committed,
                "bytes_written": t.bytes_committed, "bytes_valid": t.bytes_valid,
                "padding_bytes": t.padding_bytes,
                "discarded_bytes": t.bytes_committed - t.bytes_valid, "chunks": tally.chunks,
                "records_converted": tally.records_converted,
                "temporary_memory_bytes": tally.temporary_memory_bytes,
                "zstd_batches": t.zstd_batches, "stalls": t.stalls,
                "window_peak_bytes": consumer.peak_window_bytes, "ok": ok,
            })
    return rows


# --- index files -------------------------------------------------------------------------------

def _owned(task: ScanTask, offset: int) -> bool:
    """Whether an index entry for ``offset`` is this range's to check."""
    if task.start_key is not None and offset < task.start_key:
        return False
    return task.end_key is None or offset < task.end_key


def _index_bytes(scan: _RangeScan, file: str, path: str) -> bytes | None:
    """The index file at ``path``; ``None`` when there is none or it cannot be read (an
    ``unreadable`` violation, reported by the segment's first range only: one per file)."""
    try:
        return _read_small_file(path)
    except OSError as exc:
        scan.unreadable.add(file)
        if scan.task.range_index == 0:
            scan.add(file, -1, "unreadable", f"cannot read {path}: {exc.strerror or exc}")
        return None


def _check_offset_index(scan: _RangeScan) -> None:
    task = scan.task
    data = _index_bytes(scan, "index", task.index_path)
    if data is None:
        if task.range_index == 0 and not any(v["file"] == "index" for v in scan.violations):
            scan.add("index", -1, "index", "offset index file is missing")
        return
    if len(data) % OFFSET_ENTRY_SIZE and task.is_last_range:
        scan.add("index", len(data) - len(data) % OFFSET_ENTRY_SIZE, "index",
                 f"size {len(data)} is not a multiple of {OFFSET_ENTRY_SIZE}")
    by_position = dict(zip(scan.positions, scan.last_offsets, strict=False))
    base = task.base_offset
    prev: tuple[int, int] | None = None
    checked = 0
    for index_position in range(0, len(data) - OFFSET_ENTRY_SIZE + 1, OFFSET_ENTRY_SIZE):
        rel, position = _OFFSET_ENTRY.unpack_from(data, index_position)
        offset = base + rel
        if rel == 0 and position == 0 and prev is not None:
            break  # zero-filled tail of a preallocated index: the end of the entries
        mine = (task.start <= position < task.stop) or (task.is_last_range and position >= task.stop)
        if task.range_index == 0 and position < task.start:
            mine = True
        if mine:
            checked += 1
            problem = None
            if rel < 0:
                problem = f"relative offset {rel} is negative"
            elif prev is not None and (offset <= prev[0] or position <= prev[1]):
                problem = f"entry ({offset}, {position}) does not follow ({prev[0]}, {prev[1]})"
            elif position not in by_position:
                problem = (f"entry for offset {offset} points to log byte {position}, which is "
                           f"not the start of a batch")
            elif by_position[position] != offset:
                problem = (f"entry says offset {offset} but the batch at log byte {position} "
                           f"ends at offset {by_position[position]}")
            if problem is not None:
                scan.add("index", index_position, "index", problem, offset=offset)
        prev = (offset, position)
    scan.summary["index_entries"] = checked


def _check_time_index(scan: _RangeScan) -> list[tuple[int, int, int, int]]:
    """Check the range's ``.timeindex`` entries; returns the entries whose timestamp depends on
    the log before the range ``(index position, timestamp, offset, max timestamp in range)``."""
    task = scan.task
    data = _index_bytes(scan, "timeindex", task.timeindex_path)
    deferred: list[tuple[int, int, int, int]] = []
    if data is None:
        if task.range_index == 0 and not any(v["file"] == "timeindex" for v in scan.violations):
            scan.add("timeindex", -1, "timeindex", "time index file is missing")
        return deferred
    if len(data) % TIME_ENTRY_SIZE and task.is_last_range:
        scan.add("timeindex", len(data) - len(data) % TIME_ENTRY_SIZE, "timeindex",
                 f"size {len(data)} is not a multiple of {TIME_ENTRY_SIZE}")
    base = task.base_offset
    last_offsets = scan.last_offsets
    prev: tuple[int, int] | None = None
    exact_deferred = 0
    checked = 0
    for index_position in range(0, len(data) - TIME_ENTRY_SIZE + 1, TIME_ENTRY_SIZE):
        ts, rel = _TIME_ENTRY.unpack_from(data, index_position)
        offset = base + rel
        if ts == 0 and rel == 0 and prev is not None:
            break  # zero-filled tail of a preallocated index
        if _owned(task, offset):
            checked += 1
            problem = None
            i = bisect.bisect_left(last_offsets, offset)
            if prev is not None and (ts <= prev[0] or offset < prev[1]):
                problem = f"entry ({ts}, {offset}) does not follow ({prev[0]}, {prev[1]})"
            elif i == len(last_offsets) or last_offsets[i] != offset:
                problem = f"offset {offset} is not the last offset of a batch in the log"
            else:
                local = scan.running_max_ts[i]
                if local is None:
                    pass  # that batch is damaged; reported once, in the log
                elif task.start == 0:
                    if local != ts:
                        problem = (f"timestamp {ts} for offset {offset} differs from the log's "
                                   f"max timestamp up to that batch, {local}")
                elif ts != local:
                    deferred.append((index_position, ts, offset, local))
                elif exact_deferred < DEFERRED_TIME_ENTRIES:
                    # right unless the log before the range has a larger timestamp
                    exact_deferred += 1
                    deferred.append((index_position, ts, offset, local))
            if problem is not None:
                scan.add("timeindex", index_position, "timeindex", problem, offset=offset)
        prev = (ts, offset)
    scan.summary["timeindex_entries"] = checked
    return deferred


class _LogPeek:
    """Small positioned reads of the range's log file after its scan (opened on first use:
    only the ``.txnindex`` checks of a cleaned log need them)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._reader: SegmentReader | None = None
        self.failed = False

    def read(self, position: int, size: int) -> bytes | None:
        if self._reader is None and not self.failed:
            try:
                self._reader = SegmentReader(self.path)
            except OSError:
                self.failed = True
        if self._reader is None:
            return None
        try:
            data = self._reader.read(position, size)
        except OSError:
            return None
        return data if len(data) == size else None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def _cleaned_marker(scan: _RangeScan, peek: _LogPeek, marker: tuple[int, int]) -> bool:
    """Whether the log cleaner may have dropped the ``.txnindex`` entry of this ABORT marker.

    When the cleaner (Kafka 3.1+, KIP-534) reads an ABORT marker whose transaction has no batch
    left in the segments it cleans, it drops the marker's entry from the cleaned segment's
    ``.txnindex`` and, in the same pass, rewrites the marker with a delete horizon (the
    attribute bit 0x40), to remove the marker itself after ``delete.retention.ms``. So an entry
    may be missing only for a marker that carries a delete horizon and has no batch of its
    transaction before it; an ABORT marker never cleaned has no delete horizon and must have
    its entry."""
    if marker in scan.txn_starts:
        return False  # a batch of the transaction is still here: the cleaner keeps the entry
    attributes = peek.read(scan.abort_markers[marker] + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH)
    return attributes is not None and bool(int.from_bytes(attributes, "big") & DELETE_HORIZON_FLAG_MASK)


def _offset_removed(scan: _RangeScan, peek: _LogPeek, offset: int) -> bool:
    """Whether ``offset`` (at or after the range's first offset) is in an offset gap of the log:
    no batch holds it. The cleaner removes an aborted transaction's batches whole and keeps its
    ``.txnindex`` entry (with the first offset it had) while the ABORT marker stays and until a
    pass finds no batch of it; in a log never cleaned, an entry's first offset is where its
    transaction's first batch starts."""
    i = bisect.bisect_left(scan.last_offsets, offset)
    if i == len(scan.last_offsets):
        return False
    head = peek.read(scan.positions[i], _HEADER.size)
    return head is not None and offset < _HEADER.unpack(head)[0]


def _check_txn_index(scan: _RangeScan) -> None:
    """Each ABORT marker of the range has its ``.txnindex`` entry and each entry its marker,
    as far as the log cleaner keeps them (see :func:`_cleaned_marker`, :func:`_offset_removed`)."""
    peek = _LogPeek(scan.task.log_path)
    try:
        _check_txn_entries(scan, peek)
    finally:
        peek.close()


def _check_txn_entries(scan: _RangeScan, peek: _LogPeek) -> None:
    task = scan.task
    data = _index_bytes(scan, "txnindex", task.txnindex_path)
    if data is None:
        # Kafka writes no file for a segment without aborted transactions; with ABORT markers
        # it must have one (the reduce reports it once per segment), unless the cleaner dropped
        # all their entries
        if scan.abort_markers and "txnindex" not in scan.unreadable:
            needing = [marker[1] for marker in scan.abort_markers
                       if not _cleaned_marker(scan, peek, marker)]
            if needing:
                scan.aborts_without_txnindex = [len(needing), min(needing)]
        return
    if len(data) % TXN_ENTRY_SIZE and task.is_last_range:
        scan.add("txnindex", len(data) - len(data) % TXN_ENTRY_SIZE, "txnindex",
                 f"size {len(data)} is not a multiple of {TXN_ENTRY_SIZE}")
    listed: set[tuple[int, int]] = set()
    checked = 0
    first_seen = scan.summary["first_offset"]
    for index_position in range(0, len(data) - TXN_ENTRY_SIZE + 1, TXN_ENTRY_SIZE):
        version, pid, first, last, _lso = _TXN_ENTRY.unpack_from(data, index_position)
        if not _owned(task, last):
            continue
        checked += 1
        listed.add((pid, last))
        problem = None
        if version != 0:
            problem = f"entry version {version} is not 0"
        elif first > last:
            problem = f"first offset {first} is after last offset {last}"
        elif (pid, last) not in scan.abort_markers:
            problem = (f"aborted transaction of producer {pid} ending at offset {last} has no "
                       f"ABORT marker at that offset in the log")
        elif ((pid, last) in scan.txn_starts and scan.txn_starts[(pid, last)] != first
              and ((pid, last) in scan.txn_start_known or first_seen is None or first >= first_seen)
              and not (first < scan.txn_starts[(pid, last)] and _offset_removed(scan, peek, first))):
            # a transaction the entry says began before this range's first offset may have
            # batches in an earlier range or segment: only a start seen here is compared; one
            # whose first batches the cleaner removed may keep an empty batch further on
            problem = (f"aborted transaction of producer {pid} starts at offset "
                       f"{scan.txn_starts[(pid, last)]} in the log, the entry says {first}")
        elif ((pid, last) not in scan.txn_starts and first_seen is not None and first >= first_seen
              and not _offset_removed(scan, peek, first)):
            problem = (f"aborted transaction of producer {pid} has no batch from offset {first} "
                       f"in the log")
        if problem is not None:
            scan.add("txnindex", index_position, "txnindex", problem, offset=last)
    for marker in sorted(scan.abort_markers):
        if marker not in listed and not _cleaned_marker(scan, peek, marker):
            scan.add("txnindex", -1, "txnindex",
                     f"ABORT marker of producer {marker[0]} at offset {marker[1]} has no entry",
                     offset=marker[1])
    scan.summary["txnindex_entries"] = checked
