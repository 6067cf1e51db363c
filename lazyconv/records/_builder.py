"""Writing records: one builder for every magic and codec, with Kafka's defaults."""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lazyconv._buffers import byte_view
from lazyconv.errors import ConfigurationError, UnknownCompressionError, UnsupportedCompressionError
from lazyconv.records import _impl
from lazyconv.records._batch import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL
from lazyconv.records._codec import append_v2_record
from lazyconv.records._compression import Compression, compress
from lazyconv.records._control import ControlRecordType, control_key, end_txn_marker_value
from lazyconv.records._format import BATCH_LENGTH_MIN, V2_AFTER_CRC, V2_BEFORE_ATTRIBUTES
from lazyconv.records._legacy import LEGACY_ATTR_TIMESTAMP_TYPE
from lazyconv.records._types import TimestampType

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["RecordsBuilder", "build_end_txn_marker", "encode_v2_batch"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


class RecordsBuilder:
    """Builds the bytes Kafka's ``MemoryRecordsBuilder`` writes for the same input.

    - magic 2: one batch; BaseTimestamp = first record's timestamp (-1 if none), MaxTimestamp =
      running max from -1, or the log-append time for LogAppendTime (per-record timestamps are
      written as given and ignored on read).
    - magic 0/1 uncompressed: the concatenated messages (absolute offsets); with LogAppendTime
      each v1 message carries the log-append time and attribute bit 3.
    - magic 0/1 compressed: one wrapper message at the offset of the last record, holding inner
      messages with absolute (v0) or ``offset - base_offset`` (v1) offsets; the v1 wrapper
      timestamp is the max inner timestamp (CreateTime) or the log-append time.
    - no records: ``b""`` (Kafka writes nothing for an empty builder).

    ``append`` raises :class:`~lazyconv.errors.ConfigurationError` for offsets that do not
    increase, negative timestamps other than -1 and headers below magic 2; the constructor for
    header fields their wire types cannot hold (``producer_epoch`` an int16, ``base_sequence``
    and ``partition_leader_epoch`` int32s, the offsets, times and producer id int64s).
    """

    def __init__(
        self,
        magic: int,
        compression: Compression | int = Compression.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        base_offset: int = 0,
        log_append_time: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (0, 1, 2):
            raise ConfigurationError(f"magic must be 0, 1 or 2, got {magic}")
        if not isinstance(compression, int):  # int() would take "1" and 2.5
            raise ConfigurationError(f"compression must be a Compression or its codec id, got {compression!r:.40}")
        codec = int(compression)
        if not 0 <= codec <= 4:
            raise UnknownCompressionError(f"unknown compression codec id {codec}")
        if codec == Compression.ZSTD and magic < 2:
            raise UnsupportedCompressionError(f"zstd compression needs magic 2, got magic {magic}")
        try:
            timestamp_type = TimestampType(timestamp_type)
        except ValueError:
            raise ConfigurationError(f"unknown timestamp type {timestamp_type!r}") from None
        # the header fields as their wire types hold them (struct.error at build() otherwise)
        for name, value, bits in (
            ("base_offset", base_offset, 64),
            ("log_append_time", -1 if log_append_time is None else log_append_time, 64),
            ("producer_id", producer_id, 64),
            ("producer_epoch", producer_epoch, 16),
            ("base_sequence", base_sequence, 32),
            ("partition_leader_epoch", partition_leader_epoch, 32),
        ):
            try:
                number = operator.index(value)
            except TypeError:
                number = None
            if number is None or not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
                raise ConfigurationError(f"{name} must be an int{bits}, got {value!r}")
        if magic > 0 and timestamp_type == TimestampType.NO_TIMESTAMP:
            raise ConfigurationError(f"magic {magic} needs a timestamp type")
        if timestamp_type == TimestampType.LOG_APPEND_TIME and magic > 0 and log_append_time is None:
            raise ConfigurationError("LogAppendTime needs log_append_time")
        if magic < 2 and (is_transactional or is_control or producer_id != -1):
            raise ConfigurationError(f"magic {magic} has no producer state, transactions or control records")
        if is_control and codec != Compression.NONE:
            raise ConfigurationError("control batches are written uncompressed")
        self.magic = magic
        self.compression = Compression(codec)
        self.timestamp_type = timestamp_type
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.compression_level = compression_level
        self._records: list[tuple[int, int, bytes | None, bytes | None, tuple[Any, ...]]] = []
        self._last_offset: int | None = None
        self._max_timestamp = -1

    @property
    def record_count(self) -> int:
        return len(self._records)

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    def append(
        self,
        offset: int | None = None,
        timestamp: int = -1,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Sequence[tuple[str, Buffer | None]] = (),
    ) -> int:
        """Add a record (``offset`` defaults to the next one); returns its offset."""
        if type(timestamp) is not int or (offset is not None and type(offset) is not int):
            try:  # any integer (numpy's too, as the constructor takes), nothing else
                timestamp = operator.index(timestamp)
                offset = None if offset is None else operator.index(offset)
            except TypeError:
                raise ConfigurationError(f"a record's offset must be an int or None and its timestamp an int, "
                                         f"got {offset!r:.40}, {timestamp!r:.40}") from None
        if offset is None:
            offset = self.base_offset if self._last_offset is None else self._last_offset + 1
        elif self._last_offset is not None and offset <= self._last_offset:
            raise ConfigurationError(f"offset {offset} does not follow the previous offset {self._last_offset}")
        if offset < self.base_offset:
            raise ConfigurationError(f"offset {offset} is below the base offset {self.base_offset}")
        if offset > _INT64_MAX:
            raise ConfigurationError(f"offset {offset} is beyond int64")
        if self.magic == 1 and self.compression != Compression.NONE and offset - self.base_offset > _INT64_MAX:
            raise ConfigurationError(f"offset {offset} is too far from the base offset {self.base_offset} "
                                     "(a v1 wrapper's inner offsets are int64 offsets from it)")
        if timestamp < 0 and timestamp != -1:
            raise ConfigurationError(f"invalid negative timestamp {timestamp}")
        if timestamp > _INT64_MAX:
            raise ConfigurationError(f"timestamp {timestamp} is beyond int64")
        if self.magic == 2 and self._records and not (
                _INT64_MIN <= timestamp - self._records[0][1] <= _INT64_MAX):
            # Kafka's Java wraps the delta around; a batch holds exact deltas or refuses
            raise ConfigurationError(f"timestamp {timestamp} is too far from the batch's first "
                                     f"timestamp {self._records[0][1]} (a v2 record's timestamp "
                                     "delta is an int64)")
        if headers and self.magic < 2:
            raise ConfigurationError(f"magic v{self.magic} does not support record headers")
        if self.magic == 2 and offset - self.base_offset > _INT32_MAX:
            raise ConfigurationError(f"offset {offset} is too far from the base offset {self.base_offset}")
        if key is not None and type(key) is not bytes:
            key = _as_bytes("key", key)
        if value is not None and type(value) is not bytes:
            value = _as_bytes("value", value)
        if headers:
            try:
                pairs = iter(headers)
            except TypeError:
                raise ConfigurationError(f"headers must be a sequence of (key, value) pairs, got "
                                         f"{type(headers).__name__}") from None
            headers = tuple(_header(pair) for pair in pairs)
        else:
            headers = ()
        self._records.append((offset, timestamp, key, value, headers))
        self._last_offset = offset
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return offset

    def build(self) -> bytes:
        """The records' bytes."""
        if not self._records:
            return b""
        if self.magic == 2:
            return self._build_v2()
        return self._build_legacy()

    # -- magic 2 ---------------------------------------------------------------------------

    def _build_v2(self) -> bytes:
        base_timestamp = self._records[0][1]
        body = bytearray()
        base = self.base_offset
        # the kernel encodes every record in one call; the reference encoder whenever it declines
        if not _encoded_by_kernel(body, self._records, base, base_timestamp):
            for offset, timestamp, key, value, headers in self._records:
                append_v2_record(body, offset - base, timestamp - base_timestamp, key, value, headers)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            max_timestamp = self.log_append_time if self.log_append_time is not None else -1
        else:
            max_timestamp = self._max_timestamp
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= ATTR_TIMESTAMP_TYPE
        if self.is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if self.is_control:
            attributes |= ATTR_CONTROL
        payload = (
            bytes(body)
            if self.compression == Compression.NONE
            else compress(self.compression, bytes(body), 2, self.compression_level)
        )
        assert self._last_offset is not None
        return encode_v2_batch(
            base_offset=base,
            partition_leader_epoch=self.partition_leader_epoch,
            attributes=attributes,
            last_offset_delta=self._last_offset - base,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            record_count=len(self._records),
            payload=payload,
        )

    # -- magic 0 / 1 -----------------------------------------------------------------------

    def _build_legacy(self) -> bytes:
        magic = self.magic
        log_append = magic == 1 and self.timestamp_type == TimestampType.LOG_APPEND_TIME
        ts_bit = LEGACY_ATTR_TIMESTAMP_TYPE if log_append else 0
        compressed = self.compression != Compression.NONE
        relative = compressed and magic == 1
        out = bytearray()
        max_timestamp = -1
        append_legacy_message = _impl.append_legacy_message
        for offset, timestamp, key, value, _headers in self._records:
            if log_append:
                timestamp = self.log_append_time  # type: ignore[assignment]
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            inner_offset = offset - self.base_offset if relative else offset
            append_legacy_message(out, inner_offset, timestamp, key, value, magic, ts_bit)
        if not compressed:
            return bytes(out)
        value = compress(self.compression, bytes(out), magic, self.compression_level)
        wrapper = bytearray()
        assert self._last_offset is not None
        wrapper_timestamp = self.log_append_time if log_append else max_timestamp
        append_legacy_message(
            wrapper,
            self._last_offset,
            wrapper_timestamp,
            None,
            value,
            magic,
            int(self.compression) | ts_bit,
        )
        return bytes(wrapper)


def _as_bytes(what: str, data: object) -> bytes:
    """A key or value given as any bytes-like object (:func:`byte_view`'s definition), as bytes;
    anything else is refused (``bytes()`` of an int would be that many zero bytes, a str has no
    one encoding)."""
    return bytes(byte_view(data, f"a record's {what}"))  # type: ignore[arg-type]


def _header(pair: object) -> tuple[str, bytes | None]:
    """One ``(key, value)`` header: a str key (Kafka's header keys are strings: ``str()`` of bytes
    would write ``"b'...'"``) and a bytes-like value or None."""
    key: object
    value: object
    try:
        key, value = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ConfigurationError(f"a header must be a (key, value) pair, got {pair!r}") from None
    if not isinstance(key, str):
        raise ConfigurationError(f"a header key must be a str, got {type(key).__name__}")
    return str(key), None if value is None else _as_bytes("header value", value)


def _encoded_by_kernel(body: bytearray, records: list[Any], base_offset: int, base_timestamp: int) -> bool:
    """Encode every record into ``body`` in one kernel call; ``False`` (``body`` untouched) when
    the kernel is not in use or declines (the reference encoder then does it)."""
    if type(base_offset) is not int or type(base_timestamp) is not int:
        return False
    if not (_INT64_MIN <= base_offset <= _INT64_MAX and _INT64_MIN <= base_timestamp <= _INT64_MAX):
        return False
    return bool(_impl.encode_v2_records(body, records, base_offset, base_timestamp))


def encode_v2_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    payload: bytes,
) -> bytes:
    """A v2 batch from its header fields and (possibly compressed) record bytes; computes the
    length and CRC-32C. Also writes empty batches (``record_count=0``, empty payload). A field
    its wire type cannot hold (a payload past the int32 length too) or a payload that is not
    bytes-like raises :class:`~lazyconv.errors.ConfigurationError`."""
    if type(payload) is not bytes:  # a view of it: the batch's one copy is the join below
        payload = byte_view(payload, "a v2 batch's payload")  # type: ignore[assignment]
    try:
        after_crc = V2_AFTER_CRC.pack(
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
        length = BATCH_LENGTH_MIN + len(payload)
        crc = _impl.crc32c(payload, _impl.crc32c(after_crc))
        head = V2_BEFORE_ATTRIBUTES.pack(base_offset, length, partition_leader_epoch, 2, crc)
    except struct.error as exc:
        raise ConfigurationError(f"a v2 batch header field out of its wire type's range: {exc}") from None
    return head + after_crc + payload


def build_end_txn_marker(
    offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker (docs/guide/records.md)."""
    if not isinstance(coordinator_epoch, int) or not _INT32_MIN <= coordinator_epoch <= _INT32_MAX:
        raise ConfigurationError(f"coordinator_epoch must be an int32, got {coordinator_epoch!r:.40}")
    builder = RecordsBuilder(
        2,
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    builder.append(offset, timestamp, control_key(kind), end_txn_marker_value(coordinator_epoch))
    return builder.build()
