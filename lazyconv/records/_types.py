"""Shared record types: timestamp types, the Record tuple, the batch interface and constants."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import ClassVar, NamedTuple, Protocol

from lazyconv.errors import RecordsError, UnknownCompressionError
from lazyconv.records._format import (  # re-exported: the layout's one source is _format.py
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    ArgumentEnum,
    Compression,
)

__all__ = [
    "TimestampType",
    "Record",
    "RecordBatch",
    "ByteSource",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
    "RECORD_BATCH_OVERHEAD",
    "RECORD_OVERHEAD_V0",
    "RECORD_OVERHEAD_V1",
    "NO_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
]

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class TimestampType(ArgumentEnum):
    """Kafka's timestamp types (magic 0 has none)."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Record(NamedTuple):
    """One record as a consumer sees it.

    ``timestamp`` is -1 for magic 0; ``key``/``value`` are ``None`` when null; ``headers`` is a
    tuple of ``(name, value-or-None)`` (always empty below magic 2).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ByteSource(Protocol):
    """Where a batch's bytes come from: ``read(position, size)`` returns exactly ``size`` bytes
    (a memoryview for memory-backed records, bytes for files) or raises TruncatedDataError."""

    def read(self, position: int, size: int) -> bytes | memoryview: ...


class RecordBatch(abc.ABC):
    """One entry of a record set: a v2 batch or a top-level legacy (v0/v1) message.

    Iterating yields :class:`Record` s (control records included for v2 control batches).
    Subclasses read their header into ``attributes`` and keep the ``_source`` the entry's
    bytes come from.
    """

    # Byte offset of the attributes field within the entry (21 for v2, 17 for v0/v1): error
    # positions about the codec point there. Every magic keeps the codec in bits 0-2.
    ATTRIBUTES_POSITION: ClassVar[int]
    COMPRESSION_MASK: ClassVar[int] = COMPRESSION_CODEC_MASK

    magic: int
    position: int
    size_in_bytes: int
    attributes: int
    _source: ByteSource

    @property
    @abc.abstractmethod
    def base_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def last_offset(self) -> int: ...

    @property
    def next_offset(self) -> int:
        """Offset a consumer fetches next: ``last_offset + 1``."""
        return self.last_offset + 1

    @property
    def compression_id(self) -> int:
        """The raw codec id (0..7) from the attributes."""
        return self.attributes & self.COMPRESSION_MASK

    @property
    def compression(self) -> Compression:
        """The codec; ids 5..7 raise :class:`~lazyconv.errors.UnknownCompressionError`."""
        codec = self.attributes & self.COMPRESSION_MASK
        if codec > 4:
            raise UnknownCompressionError(
                f"unknown compression codec id {codec}", self.position + self.ATTRIBUTES_POSITION
            )
        return Compression(codec)

    @property
    @abc.abstractmethod
    def timestamp_type(self) -> TimestampType: ...

    @property
    @abc.abstractmethod
    def max_timestamp(self) -> int: ...

    @property
    @abc.abstractmethod
    def crc(self) -> int: ...

    @property
    @abc.abstractmethod
    def record_count(self) -> int | None: ...

    is_control: bool = False
    is_transactional: bool = False
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1

    @abc.abstractmethod
    def validate(self) -> None:
        """Raise a :class:`~lazyconv.errors.RecordsError` if the batch is corrupt (size, CRC)."""

    def is_valid(self) -> bool:
        """``True`` if :meth:`validate` passes."""
        try:
            self.validate()
        except RecordsError:
            return False
        return True

    def buffer(self) -> memoryview:
        """The whole entry (12 + size bytes), loaded on demand for file-backed records."""
        data = self._source.read(self.position, self.size_in_bytes)
        return data if isinstance(data, memoryview) else memoryview(data)

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Record]: ...
