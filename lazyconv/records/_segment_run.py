"""Runs of sound magic-2 batches, checked, digested and converted in one call per run.

The validation job spends its time per batch. Most batches of a healthy log are uncompressed
magic-2 batches with nothing to report, so the job takes them a run at a time:

- :func:`segment_run` walks the batches at the start of a buffer and takes the longest run of
  complete, uncompressed v2 batches (data or control) whose CRC-32C is right, whose records are
  well formed, and which the segment scan's checks pass: base offsets above the previous last
  offset (the first batch of a range at or above the segment's base offset), record offsets
  increasing within the batch's offsets, leader epochs not going backwards, and (CreateTime)
  the header's max timestamp equal to the records' max. It stops *before* anything else; the
  caller's per-batch path then checks that entry and reports what is wrong with it. For every
  batch taken it returns its facts (lists, one item per batch), and for the data batches the
  record count and the three digest sums of :mod:`lazyconv.records._digest`.
- :func:`lazyconv.conversion._to_legacy.convert_run_ends` down-converts such a run to magic 0 or 1 in one call and returns
  where each batch's conversion ends, so that a consumer emulation can cut and group it.

Both have a compiled implementation (GIL released) and a pure-Python reference that give the
same results; tests hold them equal on valid and damaged logs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from crc32c import crc32c

from lazyconv.errors import RecordsError
from lazyconv.records import _impl
from lazyconv.records._codec import iter_v2_records
from lazyconv.records._digest import MASK64, digest_v2_records_reference
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)

__all__ = [
    "Marker",
    "MAX_BATCHES_PER_RUN",
    "RUN_CONTROL",
    "RUN_TRANSACTIONAL",
    "RUN_ABORT",
    "RUN_COMPRESSED",
    "RUN_ZSTD",
    "Decompress",
    "SegmentRun",
    "segment_run",
    "segment_run_reference",
]

RUN_CONTROL = 1
RUN_TRANSACTIONAL = 2
RUN_ABORT = 4  # a control batch whose marker is ABORT
RUN_COMPRESSED = 8  # its records were decompressed by the caller's function
RUN_ZSTD = 16  # compressed with zstd (never down-converted)
_ZSTD = 4
MAX_BATCHES_PER_RUN = 1024  # a longer run is taken by more calls

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_MAX_SAFE_BASE_OFFSET = _INT64_MAX - _INT32_MAX
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class Marker(NamedTuple):
    """A control or transactional batch of a run (what transaction tracking needs)."""

    position: int
    base_offset: int
    first_record: int  # offset of its first record (a control batch's marker offset)
    producer_id: int
    flags: int  # RUN_* bits


class SegmentRun(NamedTuple):
    """What :func:`segment_run` took: the run is ``data[:consumed]``.

    Per batch, in log order: ``positions`` (in the file), ``last_offsets`` (header),
    ``max_timestamps`` (the log's running max of header max timestamps after the batch),
    ``records`` (0 for a control batch) and ``last_records`` (offset of the last record,
    ``None`` for a control batch). ``markers``: the control and transactional batches;
    ``first_epoch``: ``(epoch, position)`` of the first batch with a leader epoch >= 0. The
    state after the run (``prev_offset``, ``prev_epoch``, ``max_timestamp``) feeds the next
    call. ``data_records`` and ``full`` add up the data batches; ``convertible_records`` and
    the other two digest sums the data batches that are not zstd (what a consumer below magic
    2 can receive); sums are modulo 2**64. ``compressed``: ``(index in the run, decompressed
    records or None for zstd)`` per compressed batch.
    """

    consumed: int
    positions: list[int]
    last_offsets: list[int]
    max_timestamps: list[int]
    records: list[int]
    last_records: list[int | None]
    markers: list[Marker]
    first_epoch: tuple[int, int] | None
    prev_offset: int | None
    prev_epoch: int | None
    max_timestamp: int
    data_records: int
    full: int
    convertible_records: int
    no_headers: int
    no_timestamp: int
    compressed: list[tuple[int, bytes | None]]


Decompress = Callable[[int, bytes], "bytes | None"]


def segment_run(
    data: bytes | bytearray | memoryview,
    position_base: int,
    prev_offset: int | None,
    min_base_offset: int,
    prev_epoch: int | None,
    max_timestamp: int,
    decompress: Decompress | None = None,
) -> SegmentRun:
    """Take the run of sound, in-order v2 batches at the start of ``data`` (at most
    :data:`MAX_BATCHES_PER_RUN` of them).

    ``prev_offset``: the largest last offset before ``data`` in the range (``None`` at the
    range's start, when the first base offset must be at least ``min_base_offset``);
    ``prev_epoch``: the largest leader epoch so far (``None``: none yet); ``max_timestamp``:
    the running max of header max timestamps so far (``-1`` at first). ``position_base`` is
    the file position of ``data[0]``. ``decompress(codec, records_region)`` returns a
    compressed data batch's records, or ``None`` when they do not decompress (the run then
    stops before the batch); without it the run stops at any compressed batch. Never raises
    on bad data: the run just ends before it.
    """
    native = _impl.segment_run  # None: the reference is the implementation in use
    if native is not None:
        (consumed, lists, prev_offset, prev_epoch, max_ts, records, full, convertible, no_headers,
         no_ts, compressed) = native(data, position_base, prev_offset, min_base_offset, prev_epoch, max_timestamp,
                                     decompress)
        positions, last_offsets, max_timestamps, counts, last_records, markers, first_epoch = lists
        return SegmentRun(consumed, positions, last_offsets, max_timestamps, counts, last_records,
                          [Marker(*m) for m in markers], first_epoch, prev_offset, prev_epoch, max_ts,
                          records, full, convertible, no_headers, no_ts, compressed)
    return segment_run_reference(data, position_base, prev_offset, min_base_offset, prev_epoch, max_timestamp,
                                 decompress)


def _take(batch: bytes, prev_offset: int | None, min_base_offset: int, prev_epoch: int | None,
          decompress: Decompress | None) -> tuple[tuple[int, ...], tuple[int, int, int], bytes | None] | None:
    """``(row without position, (full, no_headers, no_timestamp), decompressed records)`` for
    one complete v2 batch, or ``None`` when the run must stop before it."""
    attributes = batch[ATTRIBUTES_OFFSET + 1]
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec and (decompress is None or attributes & CONTROL_FLAG_MASK):
        return None
    base = _I64.unpack_from(batch, BASE_OFFSET_OFFSET)[0]
    delta = _I32.unpack_from(batch, LAST_OFFSET_DELTA_OFFSET)[0]
    count = _I32.unpack_from(batch, RECORDS_COUNT_OFFSET)[0]
    if base < 0 or base > _MAX_SAFE_BASE_OFFSET or delta < 0 or count < 1:
        return None
    last = base + delta
    if (base <= prev_offset) if prev_offset is not None else (base < min_base_offset):
        return None
    epoch = _I32.unpack_from(batch, PARTITION_LEADER_EPOCH_OFFSET)[0]
    if epoch >= 0 and prev_epoch is not None and epoch < prev_epoch:
        return None
    if crc32c(batch[ATTRIBUTES_OFFSET:]) != _U32.unpack_from(batch, CRC_OFFSET)[0]:
        return None
    payload = batch[RECORD_BATCH_OVERHEAD:]
    if codec:
        assert decompress is not None
        records = decompress(codec, payload)
        if records is None:
            return None
        if not isinstance(records, bytes):
            raise TypeError("segment_run: decompress must return bytes or None")
        payload = records
    max_ts = _I64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0]
    log_append_time = bool(attributes & TIMESTAMP_TYPE_MASK)
    base_ts = _I64.unpack_from(batch, BASE_TIMESTAMP_OFFSET)[0]
    digest = digest_v2_records_reference(payload, count, base, base_ts, max_ts if log_append_time else None)
    if digest is None:
        return None
    if not digest.offsets_increasing or digest.first_offset < base or digest.last_offset > last:
        return None
    if not log_append_time and digest.max_raw_timestamp != max_ts:
        return None
    flags = 0
    if attributes & CONTROL_FLAG_MASK:
        flags |= RUN_CONTROL
        if _is_abort_marker(payload, count, base, base_ts):
            flags |= RUN_ABORT
    if attributes & TRANSACTIONAL_FLAG_MASK:
        flags |= RUN_TRANSACTIONAL
    if codec:
        flags |= RUN_COMPRESSED | (RUN_ZSTD if codec == _ZSTD else 0)
    producer_id = _I64.unpack_from(batch, PRODUCER_ID_OFFSET)[0]
    row = (len(batch), base, last, digest.first_offset, digest.last_offset, count, max_ts, epoch,
           producer_id, flags)
    return row, (digest.full, digest.no_headers, digest.no_timestamp), payload if codec else None


def _is_abort_marker(payload: bytes, count: int, base: int, base_ts: int) -> bool:
    try:
        first = next(iter_v2_records(payload, 0, len(payload), count, base, base_ts, None, 0))
    except (RecordsError, StopIteration):  # pragma: no cover - the digest accepted the records
        return False
    key = first.key
    return key is not None and len(key) >= 4 and key[2] == 0 and key[3] == 0


def segment_run_reference(
    data: bytes | bytearray | memoryview,
    position_base: int,
    prev_offset: int | None,
    min_base_offset: int,
    prev_epoch: int | None,
    max_timestamp: int,
    decompress: Decompress | None = None,
) -> SegmentRun:
    """:func:`segment_run` in pure Python (the records layer's decoder and digests)."""
    if prev_epoch is not None and not 0 <= prev_epoch <= _INT32_MAX:  # as the kernel refuses it
        raise ValueError("prev_epoch must be None or an int32 >= 0")
    raw = bytes(data)
    n = len(raw)
    pos = 0
    run = SegmentRun(0, [], [], [], [], [], [], None, prev_offset, prev_epoch, max_timestamp, 0, 0, 0, 0, 0, [])
    first_epoch = None
    records = full = convertible = no_headers = no_timestamp = 0
    while n - pos >= RECORD_BATCH_OVERHEAD and len(run.positions) < MAX_BATCHES_PER_RUN:
        length = _I32.unpack_from(raw, pos + LENGTH_OFFSET)[0]
        if raw[pos + MAGIC_OFFSET] != 2 or length < BATCH_LENGTH_MIN or length > n - pos - LOG_OVERHEAD:
            break
        taken = _take(raw[pos:pos + LOG_OVERHEAD + length], prev_offset, min_base_offset, prev_epoch, decompress)
        if taken is None:
            break
        row, sums, payload = taken
        size, base, last, first_record, last_record, count, batch_max_ts, epoch, producer_id, flags = row
        position = position_base + pos
        prev_offset = last
        if epoch >= 0:
            prev_epoch = epoch
            if first_epoch is None:
                first_epoch = (epoch, position)
        max_timestamp = max(max_timestamp, batch_max_ts)
        control = bool(flags & RUN_CONTROL)
        if flags & RUN_COMPRESSED:
            run.compressed.append((len(run.positions), None if flags & RUN_ZSTD else payload))
        run.positions.append(position)
        run.last_offsets.append(last)
        run.max_timestamps.append(max_timestamp)
        run.records.append(0 if control else count)
        run.last_records.append(None if control else last_record)
        if flags & (RUN_CONTROL | RUN_TRANSACTIONAL):
            run.markers.append(Marker(position, base, first_record, producer_id, flags))
        if not control:
            records += count
            full += sums[0]
            if not flags & RUN_ZSTD:
                convertible += count
                no_headers += sums[1]
                no_timestamp += sums[2]
        pos += size
    return run._replace(consumed=pos, first_epoch=first_epoch, prev_offset=prev_offset, prev_epoch=prev_epoch,
                        max_timestamp=max_timestamp, data_records=records, full=full & MASK64,
                        convertible_records=convertible, no_headers=no_headers & MASK64,
                        no_timestamp=no_timestamp & MASK64)
