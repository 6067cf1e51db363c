"""Eager down-conversion of record batches: Kafka's ``RecordsUtil.downConvert`` semantics.

:func:`down_convert` takes batches (of any magic) and a target magic and returns the converted
bytes plus :class:`ConversionStats`. The rules are those of Kafka's Java code (see
docs/guide/down-conversion.md):

- with a target of 0 or 1, control batches are dropped (before the zstd check), and a zstd
  batch fails the whole call with :class:`~lazyconv.errors.UnsupportedCompressionError`;
- a batch whose magic is already at or below the target is copied byte for byte;
- any other batch becomes *one* output batch: one wrapper message with the same codec (default
  level) when compressed, one standalone legacy message per record when not;
- the first-offset filter drops records below ``first_offset`` only from converted,
  uncompressed batches (and only for targets 0/1); a converted batch left with no record is
  dropped entirely;
- headers, producer state, the transactional flag and the partition leader epoch are dropped;
- a record with a negative offset is refused (:class:`~lazyconv.errors.InvalidRecordError`)
  instead of being written into messages our reader (and Kafka's) rejects or misreads.

Memory: the output, plus (over a file) at most ``records.conversion.MAX_RUN_READ`` bytes of
input at a time. A compressed batch is converted whole, as Kafka does: its decompressed records
(at most ``max_decompressed_size``, the reader's bound) and their legacy messages (a v2 record
takes at least 7 bytes and its message at most 27 more, so at most 4.9 times that) are held
together, about 6 times ``max_decompressed_size`` at worst (tests/conversion/test_convert_memory.py): lower
that bound to lower this one.

This module knows nothing of chunks or of the committed size: that is :mod:`lazyconv.conversion._lazy_records`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from lazyconv.conversion._to_legacy import (
    append_batch_as_legacy,
    append_decompressed_as_legacy,
    convert_batch_run,
    convert_memory_range,
)
from lazyconv.errors import (
    ConfigurationError,
    InvalidRecordError,
    TruncatedDataError,
    UnsupportedCompressionError,
)
from lazyconv.records import _impl
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._codec import unwritable_record_error
from lazyconv.records._compression import Compression, compress
from lazyconv.records._format import (
    ATTRIBUTES_LOW_BYTE_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    V2_TIMESTAMPS,
)
from lazyconv.records._types import RecordBatch, TimestampType

if TYPE_CHECKING:
    from lazyconv._types import Records
    from lazyconv.records._memory import MemoryRecords

RecordsT = TypeVar("RecordsT", covariant=True)

__all__ = [
    "ConversionStats",
    "ConvertedRecords",
    "down_convert",
    "down_convert_bytes",
    "down_convert_file",
    "convert_compressed_v2_entry",
    "append_compressed_v2_entry",
    "ZSTD_DOWN_CONVERSION_MESSAGE",
    "negative_offset_error",
]

ZSTD_DOWN_CONVERSION_MESSAGE = "Down-conversion of zstandard-compressed batches is not supported"

# Bytes of a legacy message without key and value (docs/guide/records.md) and of the 12-byte
# offset+size prefix; used for the builder byte accounting of the statistics.
_LOG_OVERHEAD = LOG_OVERHEAD
_RECORD_OVERHEAD = {0: RECORD_OVERHEAD_V0, 1: RECORD_OVERHEAD_V1}
_LOG_APPEND_TIME_FLAG = TIMESTAMP_TYPE_MASK
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_BASE_OFFSET = BASE_OFFSET_OFFSET
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_LOW_BYTE_OFFSET
_BASE_TIMESTAMP = BASE_TIMESTAMP_OFFSET
_RECORDS_COUNT = RECORDS_COUNT_OFFSET
_LOG_HEADER = LOG_HEADER


@dataclass(frozen=True)
class ConversionStats:
    """What a conversion cost, as Kafka's ``RecordValidationStats`` reports it.

    ``temporary_memory_bytes`` is the sum of the sizes of every input batch that survived
    classification plus the uncompressed bytes written by the builders; ``records_converted``
    counts records written by builders (copied batches count 0); ``conversion_time_ns`` is the
    wall time spent converting. Stats add up with ``+`` (the lazy send sums them over chunks).
    """

    records_converted: int = 0
    temporary_memory_bytes: int = 0
    conversion_time_ns: int = 0

    def __add__(self, other: ConversionStats) -> ConversionStats:
        if not isinstance(other, ConversionStats):
            return NotImplemented
        return ConversionStats(
            self.records_converted + other.records_converted,
            self.temporary_memory_bytes + other.temporary_memory_bytes,
            self.conversion_time_ns + other.conversion_time_ns,
        )

    def to_dict(self) -> dict[str, int]:
        """The stats as a plain dict (for JSON output)."""
        return {
            "records_converted": self.records_converted,
            "temporary_memory_bytes": self.temporary_memory_bytes,
            "conversion_time_ns": self.conversion_time_ns,
        }


ZERO_STATS = ConversionStats()


@dataclass(frozen=True)
class ConvertedRecords(Generic[RecordsT]):
    """The result of a down-conversion: the records (``MemoryRecords``, or the input itself for
    :func:`down_convert_file` when nothing was converted) and the :class:`ConversionStats`."""

    records: RecordsT
    stats: ConversionStats


def check_target_magic(to_magic: int) -> None:
    """Raise :class:`ConfigurationError` unless ``to_magic`` is 0, 1 or 2."""
    if to_magic not in (0, 1, 2):
        raise ConfigurationError(f"target magic must be 0, 1 or 2, got {to_magic!r}")


def check_conversion_input(records: object, first_offset: object, *, batches: bool = False) -> None:
    """Raise :class:`ConfigurationError` unless ``records`` is a record set (with ``batches()``;
    any iterable of batches when ``batches``) and ``first_offset`` an int: bytes, ``None`` or a
    str offset would fail deep inside the conversion as an AttributeError or TypeError."""
    if isinstance(records, (bytes, bytearray, memoryview, str)) or not (
            isinstance(records, Iterable) if batches else hasattr(records, "batches")):
        wanted = "batches (e.g. MemoryRecords(data).batches())" if batches else \
            "records (MemoryRecords, FileRecords)"
        raise ConfigurationError(f"down-conversion needs {wanted}, got {type(records).__name__}")
    if not isinstance(first_offset, int):
        raise ConfigurationError(f"first_offset must be an int, got {first_offset!r:.40}")


def is_zstd_below_v2(batch: RecordBatch, to_magic: int) -> bool:
    """True if converting ``batch`` to ``to_magic`` must fail because it is zstd-compressed.

    Control batches are dropped before the zstd check, so they never count.
    """
    if to_magic >= 2 or batch.is_control:
        return False
    if type(batch) is DefaultBatch and batch.attributes & COMPRESSION_CODEC_MASK < Compression.ZSTD:
        return False  # skips building a Compression enum per batch (codecs 5..7 still raise below)
    return batch.compression == Compression.ZSTD


def _zstd_error(batch: RecordBatch) -> UnsupportedCompressionError:
    return UnsupportedCompressionError(
        f"{ZSTD_DOWN_CONVERSION_MESSAGE}: batch with last offset {batch.last_offset} is zstd",
        batch.position,
    )


def _convert_batch_into(
    out: bytearray, batch: Any, to_magic: int, first_offset: int
) -> tuple[int, int]:
    """Append the conversion of one batch whose magic is above ``to_magic`` (then 0 or 1).

    Returns ``(records_written, uncompressed_bytes_written)``; ``(0, 0)`` with nothing appended
    when the first-offset filter left no record. v2 batches take the fused path
    (:func:`_convert_v2_batch_into`), anything else the generic one; both give the same bytes
    and the same errors.
    """
    if type(batch) is DefaultBatch:
        return _convert_v2_batch_into(out, batch, to_magic, first_offset)
    return _convert_batch_into_generic(out, batch, to_magic, first_offset)


def _convert_batch_into_generic(
    out: bytearray, batch: Any, to_magic: int, first_offset: int
) -> tuple[int, int]:
    """:func:`_convert_batch_into` for any batch: iterate its ``Record`` s and append one legacy
    message per kept record with the records layer's per-record encoder (no builder objects).
    """
    compression = batch.compression
    compressed = compression != Compression.NONE
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    log_append_time = batch.max_timestamp if log_append else -1
    # Inner/standalone attributes carry only the timestamp-type bit, and only in v1.
    attributes = _LOG_APPEND_TIME_FLAG if (log_append and to_magic == 1) else 0
    # Compressed: the inner messages go to a separate buffer that is then compressed; they are
    # never filtered by offset (the first-offset filter is narrow).
    target = bytearray() if compressed else out
    start = len(target)
    # v1 wrappers hold offsets relative to the first record; v0 keeps absolute offsets.
    relative = compressed and to_magic == 1
    relative_to = 0
    max_timestamp = -1
    written = 0
    last_offset = 0
    first_kept = 0
    append = _impl.append_legacy_message
    for record in batch:
        offset = record.offset
        if not compressed and offset < first_offset:
            continue
        if written and offset <= last_offset:  # Kafka's builder refuses this too
            raise InvalidRecordError(
                f"record offsets must increase within a batch: {offset} follows {last_offset}",
                batch.position,
            )
        timestamp = log_append_time if log_append else record.timestamp
        if written == 0:
            first_kept = offset
        if written == 0 and relative:
            relative_to = offset
        if not (
            -1 <= timestamp <= _INT64_MAX
            and _INT64_MIN <= offset <= _INT64_MAX  # also the wrapper offset if it is the last
            and _INT64_MIN <= offset - relative_to <= _INT64_MAX
        ):
            raise unwritable_record_error(offset, timestamp, batch.position)
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        append(target, offset - relative_to, timestamp, record.key, record.value, to_magic, attributes)
        written += 1
        last_offset = offset
    if written == 0:
        return 0, 0
    if first_kept < 0:  # checked after parsing every record, as the fused path does
        raise negative_offset_error(first_kept, batch.position)
    uncompressed = len(target) - start
    if not compressed:
        return written, uncompressed
    value = compress(compression, target, to_magic)  # default level; v0 LZ4 quirk by magic
    append(
        out,
        last_offset,  # the last *kept* record, not the batch's last offset (compaction)
        log_append_time if log_append else max_timestamp,
        None,
        value,
        to_magic,
        int(compression) | attributes,
    )
    # Builder accounting: the reserved wrapper header (12 + message overhead) + inner entries.
    return written, uncompressed + _LOG_OVERHEAD + _RECORD_OVERHEAD[to_magic]


# --- v2 path ----------------------------------------------------------------------------------
# The hot path: runs of uncompressed v2 batches go through the records layer's compiled kernel in
# one call per run (lazyconv.conversion._to_legacy.convert_batch_run); any other v2 batch goes
# straight from its record bytes to legacy messages (append_batch_as_legacy, no Record
# objects). Both must stay byte- and error-identical to _convert_batch_into_generic
# (tests/conversion/test_convert_fused.py, tests/records/test_kernel_differential.py check).


def _convert_v2_batch_into(
    out: bytearray, batch: DefaultBatch, to_magic: int, first_offset: int,
    payload: bytes | None = None,
) -> tuple[int, int]:
    """:func:`_convert_batch_into` for a v2 batch, in one pass over its record bytes
    (``payload``: a compressed batch's records, already decompressed)."""
    if not batch.attributes & COMPRESSION_CODEC_MASK:
        start = len(out)
        written, _, _, _ = append_batch_as_legacy(out, batch, to_magic, first_offset)
        if written and (first := _I64.unpack_from(out, start)[0]) < 0:  # the least kept offset
            raise negative_offset_error(first, batch.position)
        return written, len(out) - start
    inner = bytearray()
    written, last_offset, max_timestamp, first = append_batch_as_legacy(inner, batch, to_magic, None, payload)
    if written == 0:
        return 0, 0
    log_append_time = batch.max_timestamp if batch.attributes & _LOG_APPEND_TIME_FLAG else None
    codec = batch.attributes & COMPRESSION_CODEC_MASK  # a known codec: append_batch_as_legacy checked it
    _wrap_inner(out, inner, last_offset, max_timestamp, first, codec, log_append_time, to_magic,
                batch.position)
    return written, len(inner) + _LOG_OVERHEAD + _RECORD_OVERHEAD[to_magic]


def _wrap_inner(out: bytearray, inner: bytearray, last_offset: int, max_timestamp: int,
                first: int | None, codec: int, log_append_time: int | None, to_magic: int,
                position: int) -> None:
    """Append the wrapper of the converted inner messages ``inner`` of a compressed v2 batch."""
    if first is None:  # the reference converted the records: read it from the messages
        first = _first_inner_offset(inner, last_offset, to_magic)
    if first < 0:
        raise negative_offset_error(first, position)
    message_attributes = _LOG_APPEND_TIME_FLAG if (log_append_time is not None and to_magic == 1) else 0
    value = compress(codec, inner, to_magic)  # default level, v0 LZ4 quirk by magic
    _impl.append_legacy_message(
        out,
        last_offset,  # the last *kept* record, not the batch's last offset
        log_append_time if log_append_time is not None else max_timestamp,
        None,
        value,
        to_magic,
        codec | message_attributes,
    )


def convert_compressed_v2_entry(
    entry: bytes | bytearray | memoryview, payload: bytes, to_magic: int, position: int = 0
) -> tuple[bytearray, int, int]:
    """One compressed, non-zstd v2 data batch (its entry bytes, at ``position`` in the caller's
    log) converted to ``to_magic`` (0 or 1) as :func:`down_convert_bytes` converts it, from its
    records already decompressed (``payload``): ``(bytes, records converted, temporary
    memory)``. For callers that read the records before converting and should not decompress
    them again; raises the records layer's errors for records that do not convert."""
    check_target_magic(to_magic)
    if len(entry) < RECORD_BATCH_OVERHEAD:
        raise TruncatedDataError(
            f"v2 batch of {len(entry)} bytes is shorter than its {RECORD_BATCH_OVERHEAD}-byte header",
            position)
    base_offset = _I64.unpack_from(entry, _BASE_OFFSET)[0]
    attributes = entry[_ATTRIBUTES_LOW_BYTE]
    base_timestamp, max_timestamp = V2_TIMESTAMPS.unpack_from(entry, _BASE_TIMESTAMP)
    count = _I32.unpack_from(entry, _RECORDS_COUNT)[0]
    codec = attributes & COMPRESSION_CODEC_MASK
    if not 0 < codec < Compression.ZSTD or to_magic > 1:
        raise ValueError("convert_compressed_v2_entry converts gzip, snappy or lz4 v2 batches to magic 0 or 1")
    out = bytearray()
    if count <= 0:
        return out, 0, 0
    log_append_time = max_timestamp if attributes & _LOG_APPEND_TIME_FLAG else None
    inner = bytearray()
    written, last_offset, records_max, first = append_decompressed_as_legacy(
        inner, payload, count, base_offset, base_timestamp, log_append_time, to_magic, position)
    if written == 0:
        return out, 0, 0
    _wrap_inner(out, inner, last_offset, records_max, first, codec, log_append_time, to_magic, position)
    return out, written, len(entry) + len(inner) + _LOG_OVERHEAD + _RECORD_OVERHEAD[to_magic]


def append_compressed_v2_entry(
    out: bytearray, entry: bytes | bytearray | memoryview, payload: bytes, to_magic: int,
    position: int = 0,
) -> tuple[int, int]:
    """:func:`convert_compressed_v2_entry` appending to ``out``: ``(records converted,
    temporary memory)``. The compiled kernel converts and wraps in one call (only the codec
    runs in Python); what it declines goes through :func:`convert_compressed_v2_entry`, which
    raises the error (``out`` is then unchanged)."""
    check_target_magic(to_magic)
    done = _impl.convert_v2_compressed(out, entry, payload, to_magic, compress)
    if done is not None:  # the kernel converted and wrapped it (the reference twin declines)
        return done
    converted, written, temporary = convert_compressed_v2_entry(entry, payload, to_magic, position)
    out += converted
    return written, temporary


def negative_offset_error(offset: int, position: int) -> InvalidRecordError:
    """The error for a record whose offset is negative: no legacy message may carry one (a v1
    wrapper could not even express it, and a log never holds one), so down-conversion refuses."""
    return InvalidRecordError(
        f"record offset {offset} is negative: down-conversion refuses negative offsets", position
    )


def _first_inner_offset(inner: bytearray, last_offset: int, to_magic: int) -> int:
    """The absolute offset of the first of the legacy messages in ``inner`` (the inner messages
    of a wrapper whose last absolute offset is ``last_offset``)."""
    first_field = _I64.unpack_from(inner, 0)[0]
    if to_magic == 0:
        return first_field  # absolute offsets
    position = 0
    last_relative = 0
    while position < len(inner):  # v1: relative offsets, 0 for the first; find the last one
        last_relative, size = _LOG_HEADER.unpack_from(inner, position)
        position += _LOG_OVERHEAD + size
    return last_offset - last_relative


def down_convert_bytes(
    batches: Iterable[RecordBatch], to_magic: int, first_offset: int
) -> tuple[bytearray, ConversionStats]:
    """:func:`down_convert` returning the converted bytes as a ``bytearray`` (no final copy;
    what the lazy send uses per chunk)."""
    check_target_magic(to_magic)
    start = time.perf_counter_ns()
    out = bytearray()
    temporary = 0
    converted = 0
    # The kernel's runs keep only offsets >= first_offset; a negative first_offset could keep
    # negative offsets, which the per-batch path refuses (negative_offset_error).
    use_kernel = _impl.current.converts_runs and to_magic < 2 and first_offset >= 0
    # Memory-backed records of plain v2 batches only: one kernel call for all of them.
    whole = convert_memory_range(batches, out, to_magic, first_offset) if use_kernel else None
    if whole is not None:
        converted, temporary, batches = whole
    batch_list: Sequence[RecordBatch] = batches if isinstance(batches, Sequence) else list(batches)
    for batch in batch_list:  # the type test first: isinstance of an ABC is the slow one
        if type(batch) is not DefaultBatch and not isinstance(batch, RecordBatch):  # e.g. a bytes' ints
            raise ConfigurationError(f"down-conversion needs batches, got an item of type {type(batch).__name__}")
    # Pass 1 (headers only): zstd anywhere fails the whole call before anything is built.
    if to_magic < 2:
        for batch in batch_list:
            if is_zstd_below_v2(batch, to_magic):
                raise _zstd_error(batch)
    index = 0
    count = len(batch_list)
    while index < count:
        if use_kernel:  # runs of plain v2 batches: one compiled-kernel call each
            index, run_converted, run_temporary = convert_batch_run(batch_list, index, out, to_magic, first_offset)
            converted += run_converted
            temporary += run_temporary
            if index == count:
                break
        batch = batch_list[index]
        index += 1
        if to_magic < 2 and batch.is_control:
            continue  # dropped before the zstd check, without a trace, not even in the stats
        if batch.magic <= to_magic:
            out += batch.buffer()
            temporary += batch.size_in_bytes
            continue
        written, uncompressed = _convert_batch_into(out, batch, to_magic, first_offset)
        if written == 0:
            continue  # every record filtered out: the batch vanishes, stats untouched
        temporary += batch.size_in_bytes + uncompressed
        converted += written
    stats = ConversionStats(converted, temporary, time.perf_counter_ns() - start)
    return out, stats


def down_convert(
    batches: Iterable[RecordBatch], to_magic: int, first_offset: int
) -> ConvertedRecords[MemoryRecords]:
    """Down-convert ``batches`` to ``to_magic`` as Kafka's ``RecordsUtil.downConvert`` does.

    ``batches`` is any iterable of batches (``MemoryRecords(...).batches()``,
    ``FileRecords.open(...).batches()``). ``to_magic`` is 0, 1 or 2 (2 copies everything and
    keeps control batches). ``first_offset`` is the fetch offset (see the module docstring for
    the narrow cases where it filters).

    Raises :class:`~lazyconv.errors.UnsupportedCompressionError` if a zstd batch would have to
    be converted (nothing is returned then), and the records layer's errors for corrupt input.
    """
    from lazyconv.records import MemoryRecords

    check_conversion_input(batches, first_offset, batches=True)
    data, stats = down_convert_bytes(batches, to_magic, first_offset)
    return ConvertedRecords(MemoryRecords(data), stats)


def down_convert_file(
    records: Records, to_magic: int, first_offset: int
) -> ConvertedRecords[Records]:
    """Kafka's ``FileRecords.downConvert``: like :func:`down_convert` over ``records.batches()``,
    except that when no record was converted the result is ``records`` itself (all of its bytes,
    trailing partial batch and control batches included) with all-zero stats (see docs/guide/down-conversion.md)."""
    check_conversion_input(records, first_offset)
    converted = down_convert(records.batches(), to_magic, first_offset)
    if converted.stats.records_converted == 0:
        return ConvertedRecords(records, ZERO_STATS)
    return converted
