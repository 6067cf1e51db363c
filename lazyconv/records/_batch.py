"""Magic v2 record batches (DefaultRecordBatch): header fields, validation, record iteration."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lazyconv.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordsError,
)
from lazyconv.records import _impl
from lazyconv.records._codec import iter_v2_records
from lazyconv.records._compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    decompress,
)
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LENGTH_OFFSET,
    LOG_HEADER,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    V2_HEADER,
)
from lazyconv.records._types import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    ByteSource,
    Record,
    RecordBatch,
    TimestampType,
)

__all__ = [
    "DefaultBatch",
    "plain_v2_records",
    "increment_sequence",
    "ATTR_COMPRESSION_MASK",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
]

# the attribute bits under the names this module has always exported (values: _format.py)
ATTR_COMPRESSION_MASK = COMPRESSION_CODEC_MASK
ATTR_TIMESTAMP_TYPE = TIMESTAMP_TYPE_MASK
ATTR_TRANSACTIONAL = TRANSACTIONAL_FLAG_MASK
ATTR_CONTROL = CONTROL_FLAG_MASK
ATTR_DELETE_HORIZON = DELETE_HORIZON_FLAG_MASK
_CRC_START = ATTRIBUTES_OFFSET  # the CRC covers attributes .. end of batch
_MIN_LENGTH = BATCH_LENGTH_MIN
_INT32_MAX = 0x7FFFFFFF


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: ``sequence + increment``, wrapping to
    0 past 2^31-1; a negative ``sequence`` is added to as it is (no wrap: -5 + 2 is -3). In
    Java's int arithmetic, as there, so that a negative ``increment`` (a corrupt offset delta)
    gives Kafka's number too."""
    if sequence > _int32(_INT32_MAX - increment):
        return _int32(increment - _int32(_INT32_MAX - sequence) - 1)
    return _int32(sequence + increment)


def _int32(value: int) -> int:
    """``value`` wrapped to a signed 32-bit int, as Java's int arithmetic overflows."""
    return (value + 0x80000000) % 0x100000000 - 0x80000000


def _reference_from(
    data: bytes | memoryview, count: int, base_offset: int, base_timestamp: int, override: int | None, error_base: int
) -> Callable[[int, int], Iterator[Record]]:
    """The kernel's hand-over (``fallback`` of ``_impl.iter_v2_records``): the reference parser
    from record ``index`` at ``position`` (yields or raises exactly what iterating the whole
    batch with it would from there)."""

    def rest(position: int, index: int) -> Iterator[Record]:
        buf = bytes(data)
        return iter_v2_records(
            buf, position, len(buf), count - index, base_offset, base_timestamp, override, error_base, True, index, count
        )

    return rest


def plain_v2_records(
    source: ByteSource, view: memoryview, max_decompressed_size: int
) -> Iterator[Record] | None:
    """The records of a whole memory-backed record set, when every complete entry of ``view``
    is a v2 batch the kernel's scan accepts (uncompressed or control): one kernel iterator
    walks the batch headers and decodes the records one at a time (one record's objects alive
    at a time), without batch objects or per-batch Python. ``None`` otherwise, and always in
    pure Python (the caller iterates its batches). Yields and raises exactly what iterating
    :class:`DefaultBatch` objects over the same bytes does."""
    end = _impl.scan_plain_v2(view)
    if end < 0:
        return None

    def rest_of_batch(position: int, record_position: int, index: int) -> Iterator[Record]:
        # what the kernel leaves to the reference: a whole batch (compressed control batches,
        # empty ones, a count beyond the batch's bytes) or the records from a malformed one on
        header = view[position : position + RECORD_BATCH_OVERHEAD]
        if record_position < 0:
            return iter(DefaultBatch(source, position, header, max_decompressed_size))
        base_offset, length, _, _, _, attributes, _, base_timestamp, max_timestamp, _, _, _, count = V2_HEADER.unpack(header)
        payload = view[position + RECORD_BATCH_OVERHEAD : position + LOG_OVERHEAD + length]
        override = max_timestamp if attributes & ATTR_TIMESTAMP_TYPE else None
        reference = _reference_from(payload, count, base_offset, base_timestamp, override, position + RECORD_BATCH_OVERHEAD)
        return reference(record_position, index)

    records: Iterator[Record] = _impl.iter_plain_v2(_impl.record_type, view, end, rest_of_batch)
    return records


class DefaultBatch(RecordBatch):
    """A magic v2 record batch.

    Header fields come from the first ``RECORD_BATCH_OVERHEAD`` bytes (read once); the records are read from
    ``source`` only when the batch is iterated, validated or :meth:`buffer` is called.
    ``position`` is the batch's byte position in its records (file position for file-backed
    records) and is the base of every error position.
    """

    ATTRIBUTES_POSITION = ATTRIBUTES_OFFSET

    __slots__ = (
        "_source",
        "position",
        "size_in_bytes",
        "max_decompressed_size",
        "_base_offset",
        "_length",
        "partition_leader_epoch",
        "magic",
        "_crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "_max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "_count",
    )

    def __init__(
        self,
        source: ByteSource,
        position: int,
        header: bytes | memoryview,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        length = LOG_HEADER.unpack_from(header, 0)[1]
        if length < _MIN_LENGTH:
            raise CorruptRecordError(
                f"v2 batch length {length} is smaller than the header ({_MIN_LENGTH})", position + LENGTH_OFFSET
            )
        if len(header) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"v2 batch needs {RECORD_BATCH_OVERHEAD} header bytes, got {len(header)}", position
            )
        (
            self._base_offset,
            self._length,
            self.partition_leader_epoch,
            self.magic,
            self._crc,
            attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        ) = V2_HEADER.unpack_from(header, 0)
        self.attributes = attributes & 0xFF  # only the low byte has meaning
        self._source = source
        self.position = position
        self.size_in_bytes = LOG_OVERHEAD + self._length
        self.max_decompressed_size = max_decompressed_size

    # -- header fields ---------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset(self) -> int:
        return self._base_offset + self.last_offset_delta

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def is_transactional(self) -> bool:  # type: ignore[override]
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:  # type: ignore[override]
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        """BaseTimestamp holds the delete horizon (attribute bit 6)."""
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def crc(self) -> int:
        return self._crc

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def last_sequence(self) -> int:
        """Kafka's ``lastSequence``: ``base_sequence + last_offset_delta`` wrapping past 2^31-1
        to 0 (:func:`increment_sequence`); -1 without a sequence (base sequence -1)."""
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    # -- bytes, validation, records --------------------------------------------------------

    def records_buffer(self) -> bytes | memoryview:
        """The bytes after the batch header: the records, or their compressed form."""
        return self._source.read(self.position + RECORD_BATCH_OVERHEAD, self.size_in_bytes - RECORD_BATCH_OVERHEAD)

    def compute_crc(self) -> int:
        """CRC-32C of the bytes from the attributes to the end, as stored in the CRC field of a
        valid batch."""
        return _impl.crc32c(self.buffer()[_CRC_START:])

    def validate(self) -> None:
        """Kafka's ``ensureValid``: a whole header and a matching CRC-32C."""
        actual = self.compute_crc()
        if actual != self._crc:
            raise CorruptRecordError(
                f"v2 batch CRC mismatch: stored {self._crc:#010x}, computed {actual:#010x}",
                self.position + CRC_OFFSET,
            )

    def __iter__(self) -> Iterator[Record]:
        count = self._count
        if count < 0:
            raise InvalidRecordError(f"v2 batch with negative record count {count}", self.position + RECORDS_COUNT_OFFSET)
        if count == 0:
            return iter(())
        plain = not self.attributes & ATTR_COMPRESSION_MASK  # no Compression enum per batch
        codec = Compression.NONE if plain else self.compression  # raises on 5..7
        override = self._max_timestamp if self.attributes & ATTR_TIMESTAMP_TYPE else None
        payload = self._source.read(self.position + RECORD_BATCH_OVERHEAD, self.size_in_bytes - RECORD_BATCH_OVERHEAD)
        if plain:
            if count > len(payload):  # every record takes at least one byte
                raise InvalidRecordError(
                    f"v2 batch declares {count} records but has only {len(payload)} bytes of records",
                    self.position + RECORDS_COUNT_OFFSET,
                )
            error_base = self.position + RECORD_BATCH_OVERHEAD
            # decoded by the kernel; from a malformed record on (or from the first in pure
            # Python), by the reference
            return _impl.iter_v2_records(
                _impl.record_type, payload, count, self._base_offset, self.base_timestamp, override,
                _reference_from(payload, count, self._base_offset, self.base_timestamp, override, error_base),
            )
        data = decompress(
            codec, payload, 2, self.max_decompressed_size, position=self.position + RECORD_BATCH_OVERHEAD
        )
        return self._iter_decompressed(data, count, override)

    def _iter_decompressed(self, data: bytes, count: int, override: int | None) -> Iterator[Record]:
        # Offsets inside decompressed data are not positions in the records: report the batch
        # position and say where in the decompressed payload the problem is.
        try:
            yield from _impl.iter_v2_records(
                _impl.record_type, data, count, self._base_offset, self.base_timestamp, override,
                _reference_from(data, count, self._base_offset, self.base_timestamp, override, 0),
            )
        except RecordsError as exc:
            raise type(exc)(
                f"{exc.message} (byte {exc.position} of the decompressed records)", self.position
            ) from None

    def records(self) -> list[Record]:
        """All records of the batch (control records included)."""
        return list(self)

    def records_payload(self) -> bytes | memoryview:
        """The records' bytes: the records region, decompressed for a compressed batch (raising
        what iterating the batch raises for an unknown codec or a bad payload)."""
        payload = self.records_buffer()
        if not self.attributes & ATTR_COMPRESSION_MASK:
            return payload
        return decompress(
            self.compression, payload, 2, self.max_decompressed_size, position=self.position + RECORD_BATCH_OVERHEAD
        )

    def __repr__(self) -> str:
        return (
            f"DefaultBatch(position={self.position}, base_offset={self._base_offset}, "
            f"last_offset={self.last_offset}, count={self._count}, size={self.size_in_bytes}, "
            f"attributes={self.attributes:#04x})"
        )
