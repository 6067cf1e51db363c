"""Batch-level entry points of down-conversion to legacy messages (what ``_convert.py`` calls).

Two levels, one contract, each with a compiled and a pure-Python implementation giving the same
bytes and the same errors (the kernel's entry points come from :mod:`lazyconv.records._impl`,
whose reference twins decline, so that the callers' own code converts):

- :func:`convert_uncompressed_run`: a run of consecutive whole entries (a chunk's bytes); the
  compiled kernel converts its uncompressed magic-2 batches in one call and stops at the first
  entry it leaves to the caller (compressed, not v2, anything invalid; every entry when the
  kernel is not in use): the caller converts from there batch by batch.
- :func:`append_batch_as_legacy`: one v2 batch's records (decompressed first if need be) as
  legacy messages; the records go through the kernel when it is in use, and through the
  reference parser whenever the kernel declines, so errors are always the reference's.

Compression of wrappers, zstd rules, statistics and the committed size stay with the callers.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

from lazyconv.errors import InvalidRecordError, RecordsError
from lazyconv.records import _impl
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._codec import convert_v2_records_to_legacy
from lazyconv.records._compression import Compression, decompress
from lazyconv.records._entries import BatchIterator, iter_batches
from lazyconv.records._format import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from lazyconv.records._memory import MemoryRecords
from lazyconv.records._types import RecordBatch

__all__ = [
    "RunResult",
    "convert_uncompressed_run",
    "convert_batch_run",
    "convert_memory_range",
    "append_batch_as_legacy",
    "append_decompressed_as_legacy",
    "ChunkResult",
    "convert_plain_chunk",
    "STOP_END",
    "convert_run_ends",
    "convert_run_ends_reference",
]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
STOP_END = _impl.STOP_END  # the kernel converted every entry of the run
# convert_batch_run reads at most this many bytes of batches at once (unless one batch is
# larger): eager down-conversion of a file holds its output and one such piece of input, not
# the whole input (which it would for a file of plain v2 batches read in one run).
MAX_RUN_READ = 1 << 20
_CODECS = tuple(Compression)  # codec id -> Compression without an enum call per batch


class RunResult(NamedTuple):
    """What :func:`convert_uncompressed_run` did: ``consumed`` input bytes (whole entries),
    ``converted`` records written, ``temporary`` = Σ (batch size + bytes written) over batches
    that wrote records, and ``stop`` (``STOP_END`` or why the entry at ``consumed`` is left)."""

    consumed: int
    converted: int
    temporary: int
    stop: int


def convert_uncompressed_run(
    data: bytes | bytearray | memoryview, out: bytearray, to_magic: int, first_offset: int
) -> RunResult | None:
    """Convert the uncompressed v2 batches at the start of ``data`` (whole entries) to magic
    ``to_magic`` (0 or 1) into ``out``, control batches dropped, records below ``first_offset``
    skipped; ``None`` when ``first_offset`` is beyond int64 (``consumed`` 0 when the compiled
    kernel is not in use). The GIL is released while the kernel runs."""
    if not _INT64_MIN <= first_offset <= _INT64_MAX:
        return None
    return RunResult(*_impl.convert_v2_run(data, out, to_magic, first_offset))


class ChunkResult(NamedTuple):
    """What :func:`convert_plain_chunk` did: the chunk is ``data[:end]`` (its plain v2 batches
    converted: ``converted`` records written, ``temporary`` as :class:`RunResult`)."""

    end: int
    converted: int
    temporary: int


def convert_plain_chunk(
    data: bytes | bytearray | memoryview, out: bytearray, chunk_size: int, to_magic: int, first_offset: int
) -> ChunkResult | None:
    """Decide and convert, in one kernel call, the lazy send's chunk that starts at ``data[0]``
    (an entry boundary; ``data`` is a read-ahead window of at least ``chunk_size`` + 61 bytes
    unless the records end sooner).

    The chunk is the first entry, then the following entries while the total of their sizes
    stays ``<= chunk_size`` (the policy of :func:`lazyconv.conversion._lazy_records.chunk_groups`). When every entry
    of it is a valid uncompressed (or control) v2 batch, its conversion to ``to_magic`` (0 or 1)
    is appended to ``out`` and the result says where the chunk ends. ``None`` when the caller must
    group and convert this chunk with the reference code: the kernel is not in use, the chunk
    holds an entry the kernel leaves to Python (legacy, compressed, zstd, invalid), its first
    entry is partial, larger than ``data`` or rejected by the splitter, or nothing is left.
    ``out`` is undefined after ``None``: pass a fresh one.
    """
    if not 0 <= first_offset <= _INT64_MAX:
        return None
    end, stop, converted, temporary = _impl.convert_v2_chunk(data, out, chunk_size, to_magic, first_offset)
    if stop != _impl.CHUNK_DONE or end == 0:
        return None
    return ChunkResult(end, converted, temporary)


def _runnable(batch: object) -> bool:
    # what the kernel converts or drops itself: uncompressed or control v2 batches
    if type(batch) is not DefaultBatch:
        return False
    attributes = batch.attributes
    return not attributes & COMPRESSION_CODEC_MASK or bool(attributes & CONTROL_FLAG_MASK)


def convert_batch_run(
    batches: Sequence[Any], index: int, out: bytearray, to_magic: int, first_offset: int
) -> tuple[int, int, int]:
    """Convert, in one kernel call, the longest run of batches from ``batches[index]`` that are
    uncompressed (or control) v2 batches lying back to back in the same records, as
    :func:`convert_uncompressed_run` (to_magic 0 or 1), up to :data:`MAX_RUN_READ` bytes of
    them (at least one batch): the run's bytes are read at once.

    Returns ``(next_index, converted, temporary)``: ``batches[index:next_index]`` are done (the
    caller converts ``batches[next_index]`` itself, if any); ``next_index == index`` when the
    kernel is not in use or ``batches[index]`` cannot start a run.
    """
    first = batches[index]
    if not _runnable(first) or not _INT64_MIN <= first_offset <= _INT64_MAX:
        return index, 0, 0
    source = first._source
    start = first.position
    end = start + first.size_in_bytes
    stop = index + 1
    while stop < len(batches):
        batch = batches[stop]
        if not _runnable(batch) or batch._source is not source or batch.position != end:
            break
        if end + batch.size_in_bytes - start > MAX_RUN_READ:
            break
        end += batch.size_in_bytes
        stop += 1
    data = source.read(start, end - start)
    consumed, converted, temporary, _ = _impl.convert_v2_run(data, out, to_magic, first_offset)
    done = start + consumed
    while index < stop and batches[index].position < done:
        index += 1
    return index, converted, temporary


def convert_memory_range(
    batches: object, out: bytearray, to_magic: int, first_offset: int
) -> tuple[int, int, list[RecordBatch]] | None:
    """Convert an untouched :class:`BatchIterator` over memory-backed records (what
    ``MemoryRecords.batches()`` returns) in one kernel call, without creating batch objects.

    Applies only when every complete entry is an uncompressed or control v2 batch (checked by
    the kernel's scan first, so no error is skipped or reordered); returns ``None`` otherwise
    (and when the kernel is not in use), having taken nothing. Else returns ``(converted,
    temporary, rest)``: ``rest`` is the batches from where the kernel stopped (a batch the
    reference code must convert, which raises its error), empty when it converted everything.
    """
    if (
        not isinstance(batches, BatchIterator)
        or not batches.untouched
        or not _INT64_MIN <= first_offset <= _INT64_MAX
    ):
        return None
    view = getattr(batches.source, "view", None)  # memory-backed sources only: files stay chunked
    if not isinstance(view, memoryview):
        return None
    data = view[batches.start : batches.end]
    end = _impl.scan_plain_v2(data)
    if end < 0:
        return None
    consumed, converted, temporary, stop = _impl.convert_v2_run(data[:end], out, to_magic, first_offset)
    rest: list[RecordBatch] = []
    if stop != STOP_END:
        start = batches.start + consumed
        rest = list(iter_batches(batches.source, start, batches.start + end, batches.max_decompressed_size))
    return converted, temporary, rest


def append_batch_as_legacy(
    out: bytearray, batch: DefaultBatch, to_magic: int, first_offset: int | None,
    payload: bytes | None = None,
) -> tuple[int, int, int, int | None]:
    """Append the records of ``batch`` (a v2 batch) to ``out`` as magic ``to_magic`` messages.

    Uncompressed batches: one standalone message per record at or above ``first_offset``, with
    absolute offsets. Compressed batches: the decompressed records, none filtered
    (``first_offset`` is ignored), offsets relative to the first one when ``to_magic`` is 1 (the
    inner messages of a wrapper). Messages carry the timestamp-type bit in v1 for LogAppendTime
    batches. Returns ``(written, last_offset, max_timestamp, first)``, the first three as
    :func:`~lazyconv.records._codec.convert_v2_records_to_legacy`, ``first`` the absolute offset
    of the first message written when the kernel converted a compressed batch's records
    (``None`` otherwise: a caller that needs it reads it from the messages); raises the records layer's
    errors for corrupt batches (codec ids 5..7 included). ``payload``: a compressed batch's
    records already decompressed (by :meth:`DefaultBatch.records_payload`), so that a caller
    that needed them first does not decompress twice.
    """
    attributes = batch.attributes
    codec = attributes & COMPRESSION_CODEC_MASK
    compression = _CODECS[codec] if codec <= 4 else batch.compression  # 5..7 raise here
    count = batch.record_count
    position = batch.position
    if count < 0:
        raise InvalidRecordError(f"v2 batch with negative record count {count}", position + RECORDS_COUNT_OFFSET)
    if count == 0:
        return 0, 0, -1, None
    log_append = attributes & TIMESTAMP_TYPE_MASK
    log_append_time = batch.max_timestamp if log_append else None
    message_attributes = TIMESTAMP_TYPE_MASK if (log_append and to_magic == 1) else 0
    if codec == 0:
        data = bytes(batch.records_buffer())  # indexing bytes beats indexing a memoryview; one batch-sized copy
        if count > len(data):  # every record takes at least one byte
            raise InvalidRecordError(
                f"v2 batch declares {count} records but has only {len(data)} bytes of records",
                position + RECORDS_COUNT_OFFSET,
            )
        written, last_offset, max_timestamp = convert_v2_records_to_legacy(
            out, data, count, batch.base_offset, batch.base_timestamp, log_append_time, first_offset,
            to_magic, message_attributes, False, position + RECORDS_OFFSET, position, False,
        )
        return written, last_offset, max_timestamp, None
    if payload is not None:
        data = payload
    else:
        data = decompress(compression, batch.records_buffer(), 2, batch.max_decompressed_size,
                          position=position + RECORDS_OFFSET)
    return append_decompressed_as_legacy(out, data, count, batch.base_offset, batch.base_timestamp,
                                         log_append_time, to_magic, position)


def append_decompressed_as_legacy(
    out: bytearray, data: bytes, count: int, base_offset: int, base_timestamp: int,
    log_append_time: int | None, to_magic: int, position: int,
) -> tuple[int, int, int, int | None]:
    """The ``count`` (>= 1) records of a compressed v2 batch, already decompressed (``data``),
    appended to ``out`` as the inner messages of a magic ``to_magic`` wrapper (offsets relative
    to the first one for magic 1), as :func:`append_batch_as_legacy` appends them; ``position``
    is the batch's, for errors. Returns what it returns."""
    message_attributes = TIMESTAMP_TYPE_MASK if (log_append_time is not None and to_magic == 1) else 0
    relative = to_magic == 1
    done = _impl.convert_v2_records(
        out, data, count, base_offset, base_timestamp, log_append_time, to_magic, message_attributes, relative,
    )
    if done is not None:  # the kernel converted them all (the reference twin declines)
        written, last_offset, max_timestamp, first = done
        return written, last_offset, max_timestamp, first if written else None
    written, last_offset, max_timestamp = convert_v2_records_to_legacy(
        out, data, count, base_offset, base_timestamp, log_append_time, None,
        to_magic, message_attributes, relative, 0, position, True,
    )
    return written, last_offset, max_timestamp, None


def convert_run_ends(data: bytes | bytearray | memoryview, out: bytearray, to_magic: int) -> list[int] | None:
    """Down-convert a run taken by :func:`~lazyconv.records._segment_run.segment_run` (``data``: exactly its bytes) to magic
    ``to_magic`` (0 or 1), appending to ``out``; returns ``len(out)`` after each batch (a
    control batch writes nothing). ``None`` (``out`` unchanged) when ``data`` is not such a
    run; the caller then converts batch by batch."""
    native = _impl.convert_v2_run_ends  # None: the reference is the implementation in use
    if native is not None:
        ends = native(data, out, to_magic)
        return None if ends is None else array("q", ends).tolist()
    return convert_run_ends_reference(data, out, to_magic)


def convert_run_ends_reference(data: bytes | bytearray | memoryview, out: bytearray,
                               to_magic: int) -> list[int] | None:
    """:func:`convert_run_ends` through the records layer's reference conversion."""
    if to_magic not in (0, 1):
        raise ValueError("to_magic must be 0 or 1")
    start = len(out)
    ends: list[int] = []
    taken = 0
    try:
        for batch in MemoryRecords(bytes(data)).batches():
            taken += batch.size_in_bytes
            if (not isinstance(batch, DefaultBatch) or batch.base_offset < 0
                    or batch.attributes & COMPRESSION_CODEC_MASK):
                raise ValueError("not a run of uncompressed v2 batches")
            if not batch.is_control:
                append_batch_as_legacy(out, batch, to_magic, 0)
            ends.append(len(out))
    except (RecordsError, ValueError):
        del out[start:]
        return None
    if (ends and ends[-1] - start != len(out) - start) or taken != len(data):
        del out[start:]
        return None
    return ends
