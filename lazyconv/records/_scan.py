"""Scanning record bytes: delimit every entry and check it, in one pass (one kernel call).

:func:`scan_batches` is the fast way to validate a log segment or a fetch response: it walks
the entries as :class:`~lazyconv.records.MemoryRecords` splits them and checks each one as
``batch.validate()`` plus (for uncompressed entries) iterating its records would, without
creating batch or record objects. With the compiled kernel in use this is one C call with the
GIL released; otherwise the pure-Python reference (:func:`scan_batches_reference`) gives the
same result. Errors are not constructed during the scan: :meth:`ScanResult.error` re-checks one
entry with the reference code and returns the exact error (type, message, position) that
reading it would raise.

Example (what the Spark validation job needs)::

    result = scan_batches(segment_bytes, base_position=0)
    for entry in result.entries:
        if not entry.valid:
            report(entry.position, result.error(entry))
        elif not entry.records_checked:
            ...  # compressed: decompress and iterate with MemoryRecords to check its records
    if result.stop in ("bad_size", "bad_magic"):
        report(result.end, result.stop_error())
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Literal, NamedTuple

from lazyconv._buffers import byte_view
from lazyconv.errors import ConfigurationError, LazyconvError, RecordsError
from lazyconv.records import _impl
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from lazyconv.records._entries import iter_batches
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
)
from lazyconv.records._legacy import LegacyBatch
from lazyconv.records._types import RecordBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["ScannedEntry", "ScanResult", "ScanStop", "ShiftedSource", "scan_batches", "scan_batches_reference"]

ScanStop = Literal["end", "partial", "bad_size", "bad_magic"]
_STOPS: tuple[ScanStop, ...] = ("end", "partial", "bad_size", "bad_magic")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


class ScannedEntry(NamedTuple):
    """One complete entry: header fields as stored, and what the checks found.

    ``position`` is ``base_position`` + the entry's byte offset; ``size`` counts the 12-byte log
    header. ``base_offset``/``last_offset``: a v2 batch's header values (base + last offset
    delta), a legacy message's offset. ``record_count``: the v2 header count, 1 for a plain
    legacy message, -1 for a compressed wrapper. ``max_timestamp``: the v2 header's, a v1
    message's timestamp, -1 for v0. ``valid``: size, CRC (CRC-32C for v2, CRC-32 for legacy)
    and, when ``records_checked`` (uncompressed entries), the structure of every record are
    fine, i.e. ``validate()`` and iterating the batch would not raise (a v2 batch whose length
    field is below 49 is never valid and has ``last_offset == base_offset``, count 0).
    """

    position: int
    size: int
    magic: int
    attributes: int
    base_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    valid: bool
    records_checked: bool


class ShiftedSource:
    """Reads ``view`` with positions starting at ``base`` (so errors carry base positions)."""

    __slots__ = ("view", "base")

    def __init__(self, view: memoryview, base: int) -> None:
        self.view = view
        self.base = base

    def read(self, position: int, size: int) -> memoryview:
        start = position - self.base
        return self.view[start : start + size]


class ScanResult(NamedTuple):
    """``entries`` in order; ``end`` = ``base_position`` + bytes delimited (where a caller
    resumes: a trailing partial entry starts there); ``stop`` says why the scan ended: ``"end"``
    (exactly at the end), ``"partial"`` (a trailing incomplete entry, normal in a fetch
    response, a torn write in a segment), ``"bad_size"`` (a size field below 14) or
    ``"bad_magic"`` (a magic above 2): nothing after those can be delimited."""

    entries: list[ScannedEntry]
    end: int
    stop: ScanStop
    view: memoryview
    base_position: int

    def batch(self, entry: ScannedEntry, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> RecordBatch:
        """The batch object of ``entry`` (to iterate its records); raises as reading would."""
        source = ShiftedSource(self.view, self.base_position)
        header = source.read(entry.position, min(entry.size, RECORD_BATCH_OVERHEAD))
        if entry.magic == 2:
            return DefaultBatch(source, entry.position, header, max_decompressed_size)
        return LegacyBatch(source, entry.position, header, max_decompressed_size)

    def error(self, entry: ScannedEntry) -> LazyconvError | None:
        """The error reading ``entry`` raises (construction, ``validate()``, then iterating
        its records if uncompressed), or ``None`` when it is valid."""
        try:
            batch = self.batch(entry)
            batch.validate()
            if entry.records_checked:
                for _ in batch:
                    pass
        except RecordsError as exc:
            return exc
        return None

    def stop_error(self) -> LazyconvError | None:
        """The error the entry splitter raises where the scan stopped (``bad_size`` /
        ``bad_magic``), else ``None``."""
        if self.stop not in ("bad_size", "bad_magic"):
            return None
        source = ShiftedSource(self.view, self.base_position)
        try:
            for _ in iter_batches(source, self.end, self.base_position + len(self.view), DEFAULT_MAX_DECOMPRESSED_SIZE):
                break
        except RecordsError as exc:
            return exc
        return None


_as_view = byte_view  # any C-contiguous buffer as unsigned bytes; ConfigurationError otherwise


def scan_batches(buf: Buffer, base_position: int = 0) -> ScanResult:
    """Delimit and check every complete entry of ``buf`` (see the module docstring).

    ``base_position`` is added to every position (pass the file position of ``buf`` when it is
    a piece of a segment). One kernel call with the GIL released when the compiled kernel is
    in use; the same result from the pure-Python reference otherwise.
    """
    view = _as_view(buf)
    if not isinstance(base_position, int) or base_position < 0:
        raise ConfigurationError(f"base_position must be an int >= 0, got {base_position!r:.40}")
    native = _impl.scan_entries  # None: the reference below is the implementation in use
    if native is None:
        return scan_batches_reference(view, base_position)
    entries, end, stop = native(view)  # positions from 0: Python adds the base
    new = tuple.__new__
    base = base_position
    return ScanResult(
        [new(ScannedEntry, (base + p, s, m, a, b, b + d, c, t, v, k)) for p, s, m, a, b, d, c, t, v, k in entries],
        base + end, _STOPS[stop], view, base_position,
    )


def scan_batches_reference(buf: bytes | bytearray | memoryview, base_position: int = 0) -> ScanResult:
    """:func:`scan_batches` by the pure-Python reference: the batch classes' own checks."""
    view = _as_view(buf)
    source = ShiftedSource(view, base_position)
    entries: list[ScannedEntry] = []
    pos = 0
    n = len(view)
    stop: ScanStop
    while True:
        remaining = n - pos
        if remaining == 0:
            stop = "end"
            break
        if remaining < LOG_OVERHEAD:
            stop = "partial"
            break
        size = _I32.unpack_from(view, pos + SIZE_OFFSET)[0]
        if size < RECORD_OVERHEAD_V0:
            stop = "bad_size"
            break
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            stop = "partial"
            break
        magic = view[pos + MAGIC_OFFSET]
        if magic > 2:
            stop = "bad_magic"
            break
        total = LOG_OVERHEAD + size
        if remaining < total:
            stop = "partial"
            break
        base_offset = _I64.unpack_from(view, pos)[0]
        header = view[pos : pos + min(total, RECORD_BATCH_OVERHEAD)]
        checked = False
        if magic == 2:
            attributes = view[pos + ATTRIBUTES_OFFSET + 1]
            if size < BATCH_LENGTH_MIN:
                last, count, max_ts = base_offset, 0, -1
            else:
                last = base_offset + _I32.unpack_from(view, pos + LAST_OFFSET_DELTA_OFFSET)[0]
                count = _I32.unpack_from(view, pos + RECORDS_COUNT_OFFSET)[0]
                max_ts = _I64.unpack_from(view, pos + MAX_TIMESTAMP_OFFSET)[0]
                checked = not attributes & COMPRESSION_CODEC_MASK
        else:
            attributes = view[pos + LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET]
            last = base_offset
            count = -1 if attributes & COMPRESSION_CODEC_MASK else 1
            max_ts = _I64.unpack_from(view, pos + LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET)[0] if magic == 1 else -1
            checked = count == 1
        try:
            batch: RecordBatch
            if magic == 2:
                batch = DefaultBatch(source, base_position + pos, header)
            else:
                batch = LegacyBatch(source, base_position + pos, header)
            batch.validate()
            if checked:
                for _ in batch:
                    pass
            valid = True
        except RecordsError:
            valid = False
        entries.append(
            ScannedEntry(base_position + pos, total, magic, attributes, base_offset, last, count, max_ts, valid, checked)
        )
        pos += total
    return ScanResult(entries, base_position + pos, stop, view, base_position)
