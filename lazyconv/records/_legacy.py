"""Magic v0/v1 entries: plain messages and compressed wrapper messages (docs/guide/records.md)."""

from __future__ import annotations

from collections.abc import Iterator

from lazyconv.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordsError,
    UnknownCompressionError,
    UnsupportedCompressionError,
)
from lazyconv.records._codec import I64, LEGACY_HEADER, LOG_HEADER, parse_legacy_message
from lazyconv.records._compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    decompress,
)
from lazyconv.records._format import (
    COMPRESSION_CODEC_MASK,
    LEGACY_ENTRY_ATTRIBUTES_OFFSET,
    LEGACY_ENTRY_TIMESTAMP_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from lazyconv.records._types import (
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    ByteSource,
    Record,
    RecordBatch,
    TimestampType,
)

__all__ = ["LegacyBatch", "LEGACY_ATTR_COMPRESSION_MASK", "LEGACY_ATTR_TIMESTAMP_TYPE"]

LEGACY_ATTR_COMPRESSION_MASK = COMPRESSION_CODEC_MASK
LEGACY_ATTR_TIMESTAMP_TYPE = TIMESTAMP_TYPE_MASK
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


class LegacyBatch(RecordBatch):
    """A top-level v0/v1 message: a single record, or a compressed wrapper of inner messages.

    For a wrapper, :attr:`last_offset` is the wrapper offset (no decompression) while
    :attr:`base_offset` is the first inner absolute offset (decompresses once, then cached).
    Iterating a wrapper checks every inner message's CRC (as Kafka's consumer with
    ``check.crcs``); :meth:`validate` checks the top-level message.
    """

    ATTRIBUTES_POSITION = LEGACY_ENTRY_ATTRIBUTES_OFFSET

    __slots__ = (
        "_source",
        "position",
        "size_in_bytes",
        "max_decompressed_size",
        "offset",
        "_size",
        "_crc",
        "magic",
        "attributes",
        "timestamp",
        "_inner_base_offset",
    )

    def __init__(
        self,
        source: ByteSource,
        position: int,
        header: bytes | memoryview,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self.offset, self._size, self._crc, self.magic, self.attributes = LEGACY_HEADER.unpack_from(header, 0)
        overhead = RECORD_OVERHEAD_V0 if self.magic == 0 else RECORD_OVERHEAD_V1
        if self._size < overhead:
            raise CorruptRecordError(
                f"v{self.magic} message size {self._size} is smaller than its overhead {overhead}",
                position + SIZE_OFFSET,
            )
        self.timestamp = I64.unpack_from(header, LEGACY_ENTRY_TIMESTAMP_OFFSET)[0] if self.magic == 1 else -1
        self._source = source
        self.position = position
        self.size_in_bytes = LOG_OVERHEAD + self._size
        self.max_decompressed_size = max_decompressed_size
        self._inner_base_offset: int | None = None

    # -- header fields ---------------------------------------------------------------------

    @property
    def is_wrapper(self) -> bool:
        """``True`` for a compressed wrapper message."""
        return bool(self.attributes & LEGACY_ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP
        if self.attributes & LEGACY_ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def crc(self) -> int:
        return self._crc

    @property
    def record_count(self) -> int | None:
        """1 for a plain message; ``None`` for a wrapper (the count needs decompression)."""
        return None if self.is_wrapper else 1

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def base_offset(self) -> int:
        if not self.is_wrapper:
            return self.offset
        if self._inner_base_offset is None:
            data, entries, shift = self._expand()
            self._inner_base_offset = LOG_HEADER.unpack_from(data, entries[0])[0] + shift
        return self._inner_base_offset

    # -- bytes, validation, records --------------------------------------------------------

    def _parse(self, check_crc: bool) -> tuple[int, int, int, int, int, bytes | None, bytes | None]:
        data = bytes(self.buffer())
        return parse_legacy_message(data, 0, len(data), self.position, check_crc)

    def validate(self) -> None:
        """Check the message's CRC-32 and that its key/value lengths fit its size exactly."""
        self._parse(check_crc=True)

    def __iter__(self) -> Iterator[Record]:
        if not self.is_wrapper:
            offset, _crc, _magic, _attrs, timestamp, key, value = self._parse(check_crc=False)
            return iter((Record(offset, timestamp, key, value, _NO_HEADERS),))
        return self._iter_inner()

    def _expand(self) -> tuple[bytes, list[int], int]:
        """Decompress a wrapper; returns ``(data, entry start positions, offset shift)``."""
        _offset, _crc, magic, attributes, _ts, _key, value = self._parse(check_crc=False)
        codec = attributes & LEGACY_ATTR_COMPRESSION_MASK
        if codec > 4:
            raise UnknownCompressionError(f"unknown compression codec id {codec}", self.position + self.ATTRIBUTES_POSITION)
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionError(
                f"zstd compressed v{magic} message: zstd exists only in magic v2 batches",
                self.position + self.ATTRIBUTES_POSITION,
            )
        if value is None:
            raise InvalidRecordError("compressed record set with null value", self.position)
        value_position = self.position + self.size_in_bytes - len(value)
        data = decompress(codec, value, magic, self.max_decompressed_size, position=value_position)
        entries: list[int] = []
        pos = 0
        end = len(data)
        while end - pos >= LOG_OVERHEAD:
            size = LOG_HEADER.unpack_from(data, pos)[1]
            if size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"inner message size {size} is below the minimum {RECORD_OVERHEAD_V0} "
                    f"(byte {pos + SIZE_OFFSET} of the decompressed wrapper)",
                    self.position,
                )
            if end - pos < LOG_OVERHEAD + size:
                break  # incomplete inner entry at the very end: dropped, as Kafka does
            entries.append(pos)
            pos += LOG_OVERHEAD + size
        if not entries:
            raise InvalidRecordError("compressed message set contains no inner records", self.position)
        shift = 0
        if magic == 1 and self.offset != 0:  # wrapper offset 0: inner offsets are absolute
            last_inner = LOG_HEADER.unpack_from(data, entries[-1])[0]
            if self.offset < last_inner:
                raise InvalidRecordError(
                    f"wrapper offset {self.offset} is below its last inner offset {last_inner}",
                    self.position,
                )
            shift = self.offset - last_inner
        return data, entries, shift

    def inner_messages(self) -> tuple[memoryview, int, int, int | None]:
        """A wrapper's decompressed inner messages without reading them: ``(bytes of the
        complete ones, how many, offset shift, timestamp override)``; a record's offset is its
        inner offset + shift, and a magic 1 inner message's timestamp is the override unless
        ``None`` (a LogAppendTime wrapper). Raises what iterating raises for a bad wrapper; the
        inner messages themselves are not checked here."""
        data, entries, shift = self._expand()
        last = entries[-1]
        end = last + LOG_OVERHEAD + LOG_HEADER.unpack_from(data, last)[1]
        return memoryview(data)[:end], len(entries), shift, self._timestamp_override()

    def _timestamp_override(self) -> int | None:
        return self.timestamp if self.magic == 1 and self.attributes & LEGACY_ATTR_TIMESTAMP_TYPE else None

    def _iter_inner(self) -> Iterator[Record]:
        data, entries, shift = self._expand()
        override = self._timestamp_override()
        for pos in entries:
            size = LOG_HEADER.unpack_from(data, pos)[1]
            try:
                offset, _crc, imagic, iattrs, timestamp, key, value = parse_legacy_message(
                    data, pos, pos + LOG_OVERHEAD + size, 0, True
                )
            except RecordsError as exc:
                raise type(exc)(
                    f"inner message: {exc.message} (byte {exc.position} of the decompressed wrapper)",
                    self.position,
                ) from None
            if iattrs & LEGACY_ATTR_COMPRESSION_MASK:
                raise InvalidRecordError(
                    f"inner messages must not be compressed (inner message at decompressed byte {pos})",
                    self.position,
                )
            if override is not None and imagic == 1:
                timestamp = override
            yield Record(offset + shift, timestamp, key, value, _NO_HEADERS)

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(position={self.position}, magic={self.magic}, offset={self.offset}, "
            f"size={self.size_in_bytes}, attributes={self.attributes:#04x})"
        )
