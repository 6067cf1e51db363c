"""Kafka's append validation for Produce, sans-IO: decide what one partition's records may append.

A leader checks produced records before it assigns offsets and writes them (Kafka's
``ProduceRequest.validateRecords``, ``UnifiedLog.analyzeAndValidateRecords``, ``LogValidator``
and ``ProducerAppendInfo``). :func:`validate_produce` does the same for the records of one
partition of a Produce request and returns an :class:`AppendDecision`: either accepted, with the
entries to append (``(bytes, offsets taken)`` pairs, the form
:meth:`lazyconv.logdir._partition.PartitionLog.append` takes), or rejected with Kafka's error code, its
message and, for per-record problems, the record errors a Produce v8+ response carries. Nothing
is ever written here; a rejected partition appends nothing at all.

Idempotent and transactional producers: pass a :class:`ProducerStateTable` (one per partition).
Validation only reads it; once the entries are appended at ``base_offset`` the caller records them
with :meth:`ProducerStateTable.apply`. A retried batch that matches one of the producer's last five
batches is accepted *without* anything to append and answers with the first append's offset
(``AppendDecision.duplicate``), as Kafka does.

Typical server use::

    decision = validate_produce(part["records"], produce_version=version, producers=table)
    if decision.accepted and decision.entries:
        base, log_start = plog.append(decision.append_entries())
        table.apply(decision, base)
    elif decision.duplicate is not None:
        base = decision.duplicate.first_offset
    answer.update(decision.response_fields())   # error_code, error_message, record_errors

The checks, in Kafka's order (first failing check decides; codes in :class:`AppendErrorCode`):

1. structure of the set: size fields, magic, no trailing partial entry, codec ids, decompression
   → CORRUPT_MESSAGE; an entry above ``max_message_bytes`` → MESSAGE_TOO_LARGE;
2. Produce v3+: exactly one batch, of magic 2 (INVALID_RECORD); zstd only from Produce v7
   (UNSUPPORTED_COMPRESSION_TYPE); zstd in a v0/v1 message → UNSUPPORTED_COMPRESSION_TYPE;
3. per entry: a v2 base offset other than 0 (INVALID_RECORD); the CRC (v2 CRC-32C, v0/v1
   CRC-32 of the top-level message) → CORRUPT_MESSAGE; then, any Produce version, a v2 batch or
   a compressed entry that is not alone in the set → INVALID_RECORD;
4. per batch (``validateBatch``): the first batch's magic, offset range vs record count, count ≥ 1, no control batch,
   a producer id needs a sequence → INVALID_RECORD; transactional or idempotent batches into a
   log whose message format is below v2 → UNSUPPORTED_FOR_MESSAGE_FORMAT;
5. per record: records that decompress to more than ``max_decompressed_size`` →
   MESSAGE_TOO_LARGE (decompression stops at the bound); structure (lengths, varints, headers,
   the records end exactly with the batch) → INVALID_RECORD; then record errors: inner magic ≠
   outer magic, inner v0/v1 CRCs, offset deltas ``0..n-1`` in order, timestamps (out of range, or
   a producer's LogAppendTime entry without one), keys for compacted topics → INVALID_RECORD (or
   INVALID_TIMESTAMP if any timestamp is refused) with ``(batch_index, message)`` per record;
6. producer state: duplicates; with ``verified_producers`` (Kafka's
   ``transaction.partition.verification.enable``), a transactional batch that would open a
   transaction the coordinator did not verify (INVALID_TXN_STATE); epoch
   (INVALID_PRODUCER_EPOCH), sequence (OUT_OF_ORDER_SEQUENCE_NUMBER), a non-transactional write
   during an open transaction (INVALID_TXN_STATE).

A server verifies a transactional batch with the transaction coordinator before it validates
it, as Kafka's ``ReplicaManager.handleProduceAppend`` does (KIP-890 part 1):
:func:`transactional_producers` names the producers to verify, and the ones verified are passed
as ``verified_producers``.

Where this is stricter than Kafka, on purpose (docs/differences.md, "Produce validation"):

- Kafka never checks v2 offset deltas (it assigns offsets by position); a batch whose deltas are
  not ``0..n-1`` is refused here, because our reader and the down-conversion use the deltas;
- Kafka silently drops a trailing partial entry of a produced set; it is refused here;
- a v1 compressed wrapper must hold relative inner offsets ``0..n-1`` (Kafka would recompress
  it); a compressed v0 message set is refused (taking new offsets means recompressing it);
- an unknown codec id (5..7) is CORRUPT_MESSAGE (Kafka fails with an internal error).

A v2 CreateTime batch whose MaxTimestamp differs from its records' maximum is corrected (the CRC
rewritten), as Kafka's in-place assignment does.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from lazyconv.conversion._entry_checks import (
    check_client_base_offset,
    check_client_batch_header,
    check_entry,
)
from lazyconv.errors import (
    CompressionError,
    ConfigurationError,
    CorruptRecordError,
    DecompressionBombError,
    InvalidRecordError,
    RecordsError,
    UnknownCompressionError,
    UnsupportedCompressionError,
)
from lazyconv.records import DefaultBatch, LegacyBatch, MemoryRecords
from lazyconv.records._codec import crc32c
from lazyconv.records._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LEGACY_ENTRY_KEY_SIZE_OFFSET_V0,
    LEGACY_ENTRY_KEY_SIZE_OFFSET_V1,
    LEGACY_ENTRY_MAGIC_OFFSET,
    LEGACY_HEADER,
    LEGACY_KEY_SIZE_LENGTH,
    LEGACY_VALUE_SIZE_LENGTH,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_MASK,
)
from lazyconv.serve._producer_table import (
    BatchMetadata,
    ProducerEntry,
    ProducerStateTable,
    record_batch,
)

__all__ = [
    "AppendErrorCode",
    "AppendConfig",
    "RecordError",
    "AppendEntry",
    "AppendDecision",
    "validate_produce",
    "transactional_producers",
    "opens_with_a_transactional_batch",
    "DEFAULT_MAX_MESSAGE_BYTES",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes default
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_ZSTD = 4
_LEGACY_HEADER = LEGACY_HEADER
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_LEGACY_OVERHEAD = {0: RECORD_OVERHEAD_V0, 1: RECORD_OVERHEAD_V1}
_LEGACY_KEY_SIZE_AT = {0: LEGACY_ENTRY_KEY_SIZE_OFFSET_V0, 1: LEGACY_ENTRY_KEY_SIZE_OFFSET_V1}


class AppendErrorCode(IntEnum):
    """The Produce error codes append validation answers with (Kafka's ``Errors`` numbers)."""

    NONE = 0
    CORRUPT_MESSAGE = 2
    MESSAGE_TOO_LARGE = 10
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87


@dataclass(frozen=True)
class AppendConfig:
    """The topic and broker settings validation depends on (Kafka's names in brackets).

    - ``max_message_bytes``: largest entry accepted [``max.message.bytes``];
    - ``message_format_magic``: the log's message format; below 2, idempotent and transactional
      batches are refused [``log.message.format.version``];
    - ``compacted``: every record needs a key [``cleanup.policy=compact``];
    - ``timestamp_before_max_ms`` / ``timestamp_after_max_ms``: how far a CreateTime record's
      timestamp may lie before / after ``now_ms``; ``None`` is unbounded
      [``message.timestamp.before.max.ms`` / ``after.max.ms``];
    - ``max_decompressed_size``: bound on one batch's decompressed records; a batch that
      inflates past it is MESSAGE_TOO_LARGE (a server passes the bound its Fetch conversion uses,
      so that nothing is appended that old consumers could not read).
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    message_format_magic: int = 2
    compacted: bool = False
    timestamp_before_max_ms: int | None = None
    timestamp_after_max_ms: int | None = None
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE

    def __post_init__(self) -> None:
        if self.max_message_bytes <= 0:
            raise ConfigurationError(f"max_message_bytes must be positive, got {self.max_message_bytes}")
        if self.message_format_magic not in (0, 1, 2):
            raise ConfigurationError(
                f"message_format_magic must be 0, 1 or 2, got {self.message_format_magic}"
            )
        for name in ("timestamp_before_max_ms", "timestamp_after_max_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigurationError(f"{name} must be >= 0 or None, got {value}")


@dataclass(frozen=True)
class RecordError:
    """One rejected record: its index in its batch and why (Produce v8+ ``RecordErrors``)."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


@dataclass(frozen=True)
class AppendEntry:
    """One top-level entry to append: its bytes (offsets not yet assigned) and what it takes.

    ``offset_count`` is how many offsets it takes; the producer fields are those of a v2 batch
    (-1 for legacy messages and batches without a producer id).
    """

    data: bytes
    offset_count: int
    magic: int
    producer_id: int = -1
    producer_epoch: int = -1
    first_sequence: int = -1
    last_sequence: int = -1
    is_transactional: bool = False
    max_timestamp: int = -1


@dataclass(frozen=True)
class AppendDecision:
    """The outcome of :func:`validate_produce` for one partition.

    ``error_code`` is :attr:`AppendErrorCode.NONE` when accepted; then ``entries`` are what to
    append (empty for an empty set or a duplicate). ``duplicate`` is the metadata of the earlier
    append a retried batch repeats (answer with its ``first_offset``, append nothing).
    """

    error_code: AppendErrorCode
    error_message: str | None = None
    record_errors: tuple[RecordError, ...] = ()
    entries: tuple[AppendEntry, ...] = ()
    duplicate: BatchMetadata | None = None

    @property
    def accepted(self) -> bool:
        """``True`` when nothing is wrong (entries to append, an empty set, or a duplicate)."""
        return self.error_code == AppendErrorCode.NONE

    @property
    def offset_count(self) -> int:
        """Offsets the entries take in all."""
        return sum(entry.offset_count for entry in self.entries)

    def append_entries(self) -> list[tuple[bytes, int]]:
        """The entries as ``(bytes, offsets taken)`` pairs for ``PartitionLog.append``."""
        return [(entry.data, entry.offset_count) for entry in self.entries]

    def response_fields(self) -> dict[str, Any]:
        """``error_code``, ``error_message`` and ``record_errors`` of a Produce partition
        response (versions below 8 ignore the last two when encoding)."""
        return {
            "error_code": int(self.error_code),
            "error_message": self.error_message,
            "record_errors": [
                {"batch_index": error.batch_index, "batch_index_error_message": error.message}
                for error in self.record_errors
            ],
        }


class _Rejected(Exception):
    """Internal: ends validation with a partition error."""

    def __init__(
        self, code: AppendErrorCode, message: str, record_errors: Sequence[RecordError] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = tuple(record_errors)


def validate_produce(
    records: bytes | bytearray | memoryview | None,
    *,
    produce_version: int,
    producers: ProducerStateTable | None = None,
    config: AppendConfig | None = None,
    now_ms: int | None = None,
    verified_producers: Collection[int] | None = None,
) -> AppendDecision:
    """Validate the records of one partition of a Produce request of ``produce_version``.

    ``producers`` is the partition's producer state (``None``: producer ids are checked for
    structure only); ``now_ms`` is the broker time for timestamp bounds (needed only when
    ``config`` bounds timestamps); ``verified_producers``: the producer ids whose transaction
    the coordinator said includes this partition (``None``: transactions are not verified). A
    transactional batch of another producer that would open a transaction here (its producer has
    none open in ``producers``) is refused. Never raises on bad records: every problem becomes
    the decision's error code. Raises :class:`~lazyconv.errors.ConfigurationError` for bad
    arguments.
    """
    config = config or AppendConfig()
    if not 0 <= produce_version <= 12:
        raise ConfigurationError(f"produce_version must be 0..12, got {produce_version}")
    bounded = config.timestamp_before_max_ms is not None or config.timestamp_after_max_ms is not None
    if bounded and now_ms is None:
        raise ConfigurationError("timestamp bounds need now_ms")
    try:
        entries = _validate_records(records, produce_version, config, now_ms)
        duplicate = _check_producers(entries, producers, verified_producers)
    except _Rejected as rejected:
        log.info("produce rejected (%s): %s", rejected.code.name, rejected.message)
        return AppendDecision(rejected.code, rejected.message, rejected.record_errors)
    if duplicate is not None:
        return AppendDecision(AppendErrorCode.NONE, duplicate=duplicate)
    return AppendDecision(AppendErrorCode.NONE, entries=tuple(entries))


def transactional_producers(
    records: bytes | bytearray | memoryview | None, produce_version: int
) -> list[tuple[int, int]]:
    """``(producer id, epoch)`` of each transactional batch with a producer id in the records of
    one partition, read from the batch headers only, as Kafka's ``handleProduceAppend`` collects
    the transactions to verify; none for records the request's shape check refuses (Kafka answers
    those before it verifies anything)."""
    if records is None:
        return []
    try:
        batches = _split(records, AppendConfig())  # batch headers read in place: no copy
        _check_request_shape(batches, produce_version)
    except _Rejected:
        return []
    return [(batch.producer_id, batch.producer_epoch) for batch in batches
            if isinstance(batch, DefaultBatch) and batch.producer_id >= 0 and batch.is_transactional]


def opens_with_a_transactional_batch(records: bytes | bytearray | memoryview | None) -> bool:
    """Whether the first complete batch of one partition's records is transactional (a v2
    batch with the flag, whatever its producer id), as Kafka's
    ``RequestUtils.hasTransactionalRecords`` looks at each partition: a Produce carrying one
    needs a transactional id."""
    if records is None:
        return False
    try:
        first = next(iter(MemoryRecords(records).batches()), None)
    except RecordsError:
        return False
    return isinstance(first, DefaultBatch) and first.is_transactional


# -- record-level validation ---------------------------------------------------------------------


def _structure_code(exc: RecordsError) -> AppendErrorCode:
    if isinstance(exc, DecompressionBombError):
        return AppendErrorCode.MESSAGE_TOO_LARGE
    if isinstance(exc, UnsupportedCompressionError):
        return AppendErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if isinstance(exc, (CorruptRecordError, CompressionError)):
        return AppendErrorCode.CORRUPT_MESSAGE
    return AppendErrorCode.INVALID_RECORD


def _split(records: bytes | bytearray | memoryview, config: AppendConfig) -> list[Any]:
    """The top-level entries; a size or magic problem or a trailing partial entry rejects."""
    batches: list[Any] = []
    consumed = 0
    try:
        for batch in MemoryRecords(records, config.max_decompressed_size).batches():
            batches.append(batch)
            consumed = batch.position + batch.size_in_bytes
    except RecordsError as exc:
        raise _Rejected(AppendErrorCode.CORRUPT_MESSAGE, f"Record set is corrupt: {exc}") from None
    if consumed != len(records):
        raise _Rejected(
            AppendErrorCode.CORRUPT_MESSAGE,
            f"Record set ends with {len(records) - consumed} bytes of a partial entry (at byte {consumed})",
        )
    return batches


def _check_request_shape(batches: list[Any], produce_version: int) -> None:
    """``ProduceRequest.validateRecords``: v3+ carries exactly one magic v2 batch."""
    if produce_version < 3:
        return
    if not batches:
        raise _Rejected(
            AppendErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} must have at least one record batch per partition",
        )
    first = batches[0]
    if first.magic != 2:
        raise _Rejected(
            AppendErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} are only allowed to contain record "
            "batches with magic version 2",
        )
    if produce_version < 7 and first.compression_id == _ZSTD:
        raise _Rejected(
            AppendErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {produce_version} are not allowed to use ZStandard compression",
        )
    if len(batches) > 1:
        raise _Rejected(
            AppendErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} are only allowed to contain exactly "
            "one record batch per partition",
        )


def _validate_records(
    records: bytes | bytearray | memoryview | None,
    produce_version: int,
    config: AppendConfig,
    now_ms: int | None,
) -> list[AppendEntry]:
    if records is None:
        raise _Rejected(AppendErrorCode.CORRUPT_MESSAGE, "Produce partition data has null records")
    data = bytes(records)
    batches = _split(data, config)
    _check_request_shape(batches, produce_version)
    for batch in batches:  # analyzeAndValidateRecords
        _check_entry(batch, config)
    _check_one_batch(batches)
    entries = []
    for batch in batches:  # LogValidator
        if batch.magic != batches[0].magic:  # validateBatch, before the batch's records
            raise _Rejected(
                AppendErrorCode.INVALID_RECORD,
                f"Batch magic {batch.magic} is not the same as the first batch's magic byte {batches[0].magic}",
            )
        if isinstance(batch, DefaultBatch):
            entries.append(_validate_v2(batch, config, now_ms))
        else:
            entries.append(_validate_legacy(batch, config, now_ms))
    return entries


def _check_one_batch(batches: list[Any]) -> None:
    """``LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches`` (any Produce version): a v2
    batch, or a set with a compressed entry, must be the set's only entry."""
    if len(batches) > 1 and (batches[0].magic >= 2 or any(batch.compression_id for batch in batches)):
        raise _Rejected(AppendErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")


def _check_entry(batch: Any, config: AppendConfig) -> None:
    """Kafka's per-entry checks (:mod:`lazyconv.conversion._entry_checks`) with a broker's
    answers: INVALID_RECORD for the base offset, MESSAGE_TOO_LARGE above ``max_message_bytes``,
    CORRUPT_MESSAGE for the CRC and an unknown codec id (Kafka fails with an internal error)."""
    try:
        check_client_base_offset(batch)
    except InvalidRecordError as exc:
        raise _Rejected(AppendErrorCode.INVALID_RECORD, exc.message) from None
    if batch.size_in_bytes > config.max_message_bytes:
        raise _Rejected(
            AppendErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch at byte {batch.position} is {batch.size_in_bytes} bytes, larger than "
            f"the maximum allowed ({config.max_message_bytes})",
        )
    try:
        check_entry(batch)
    except UnknownCompressionError:
        raise _Rejected(
            AppendErrorCode.CORRUPT_MESSAGE,
            f"Record batch at byte {batch.position} has unknown compression codec id {batch.compression_id}",
        ) from None
    except RecordsError as exc:
        raise _Rejected(AppendErrorCode.CORRUPT_MESSAGE, exc.message) from None


def _check_batch_header(batch: DefaultBatch, config: AppendConfig) -> None:
    """``LogValidator.validateBatch`` for a client's v2 batch, and the message format's limits."""
    try:
        check_client_batch_header(batch)
    except InvalidRecordError as exc:
        raise _Rejected(AppendErrorCode.INVALID_RECORD, exc.message) from None
    if batch.is_transactional and config.message_format_magic < 2:
        raise _Rejected(
            AppendErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"Transactional records cannot be used with magic version {config.message_format_magic}",
        )
    if batch.producer_id >= 0 and config.message_format_magic < 2:
        raise _Rejected(
            AppendErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"Idempotent records cannot be used with magic version {config.message_format_magic}",
        )


def _timestamp_error(
    index: int, offset: int, timestamp: int, config: AppendConfig, now_ms: int | None,
    log_append_time: bool = False,
) -> RecordError | None:
    """A record's timestamp (a LogAppendTime entry's: the entry's) checked as Kafka's
    ``validateTimestamp`` checks it on a CreateTime log: in bounds, and a producer's
    LogAppendTime entry must carry one."""
    if timestamp < -1 or timestamp > _INT64_MAX:  # Java would wrap BaseTimestamp + delta
        return RecordError(index, f"Timestamp {timestamp} of message with offset {offset} is invalid")
    if timestamp == -1 and log_append_time:
        return RecordError(index, f"Invalid timestamp type in message with offset {offset}. Producer should "
                                  "not set timestamp type to LogAppendTime.")
    if timestamp == -1 or now_ms is None:
        return None
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    if (before is not None and timestamp < now_ms - before) or (
        after is not None and timestamp > now_ms + after
    ):
        low = now_ms - before if before is not None else "-inf"
        high = now_ms + after if after is not None else "+inf"
        return RecordError(
            index,
            f"Timestamp {timestamp} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{low}, {high}]",
        )
    return None


def _raise_record_errors(errors: list[RecordError], timestamp_errors: int) -> None:
    if not errors:
        return
    if timestamp_errors:
        raise _Rejected(
            AppendErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(str(error) for error in errors[:3])
    raise _Rejected(
        AppendErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )


def _too_large_decompressed(batch: Any, config: AppendConfig, exc: DecompressionBombError) -> _Rejected:
    """A compressed entry whose records inflate past ``max_decompressed_size``.

    A server that down-converts refuses to inflate such a batch on the Fetch path (it would
    hold it whole in memory), so appending it would leave every old consumer stuck at its
    offset: it is refused here, with the same bound. The decompression stopped at the bound (the
    codecs stream and check before keeping each piece). The code is MESSAGE_TOO_LARGE (10,
    Kafka's RecordTooLargeException), not RECORD_LIST_TOO_LARGE (18, a batch larger than a
    segment, which clients treat as final): it says "larger than this server accepts", and on it
    the Java producer splits a batch of several records and resends the halves (Sender's
    ``completeBatch``), which then fit; a single record that large fails to the application.
    """
    return _Rejected(
        AppendErrorCode.MESSAGE_TOO_LARGE,
        f"The record batch at byte {batch.position} decompresses to more than the maximum "
        f"allowed ({config.max_decompressed_size} bytes of records; its compressed size is "
        f"{batch.size_in_bytes}): {exc}",
    )


def _validate_v2(batch: DefaultBatch, config: AppendConfig, now_ms: int | None) -> AppendEntry:
    _check_batch_header(batch, config)
    try:
        records = list(batch)
    except DecompressionBombError as exc:
        raise _too_large_decompressed(batch, config, exc) from None
    except RecordsError as exc:
        raise _Rejected(_structure_code(exc), f"Found invalid record structure: {exc}") from None
    create_time = not batch.attributes & TIMESTAMP_TYPE_MASK
    errors: list[RecordError] = []
    timestamp_errors = 0
    max_timestamp = -1
    for index, record in enumerate(records):
        delta = record.offset - batch.base_offset
        if delta != index:
            errors.append(RecordError(index, f"Record offset delta {delta} is not {index} (deltas must be 0..n-1 in order)"))
            continue
        if config.compacted and record.key is None:
            errors.append(RecordError(index, "Compacted topic cannot accept message without key"))
            continue
        error = _timestamp_error(index, record.offset, record.timestamp, config, now_ms, not create_time)
        if error is not None:
            errors.append(error)
            timestamp_errors += 1
            continue
        if record.timestamp > max_timestamp:
            max_timestamp = record.timestamp
    _raise_record_errors(errors, timestamp_errors)
    data = bytes(batch.buffer())
    if create_time and batch.max_timestamp != max_timestamp:
        data = _with_max_timestamp(data, max_timestamp)
    else:
        max_timestamp = batch.max_timestamp
    return AppendEntry(
        data,
        batch.record_count,
        2,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.last_sequence,
        batch.is_transactional,
        max_timestamp,
    )


def _with_max_timestamp(data: bytes, max_timestamp: int) -> bytes:
    """``data`` (one v2 batch) with MaxTimestamp set and the CRC-32C recomputed, as Kafka's
    ``setMaxTimestamp`` does; every other byte is kept."""
    out = bytearray(data)
    _I64.pack_into(out, MAX_TIMESTAMP_OFFSET, max_timestamp)
    _U32.pack_into(out, CRC_OFFSET, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def _validate_legacy(batch: LegacyBatch, config: AppendConfig, now_ms: int | None) -> AppendEntry:
    data = bytes(batch.buffer())
    if not batch.is_wrapper:
        if config.compacted and batch.record_count == 1:
            try:
                (record,) = list(batch)
            except RecordsError as exc:
                raise _Rejected(_structure_code(exc), f"Found invalid record structure: {exc}") from None
            if record.key is None:
                _raise_record_errors([RecordError(0, "Compacted topic cannot accept message without key")], 0)
        if batch.magic == 1:
            error = _timestamp_error(0, batch.offset, batch.timestamp, config, now_ms,
                                     bool(batch.attributes & TIMESTAMP_TYPE_MASK))
            _raise_record_errors([error] if error else [], 1)
        return AppendEntry(data, 1, batch.magic, max_timestamp=batch.timestamp)
    if batch.compression_id == _ZSTD:
        raise _Rejected(
            AppendErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"zstd compression is only allowed in magic v2 batches, not in a v{batch.magic} message",
        )
    if batch.magic == 0:
        raise _Rejected(
            AppendErrorCode.INVALID_RECORD,
            "compressed magic v0 message sets need recompression to take new offsets; produce magic v1 or v2",
        )
    count, max_timestamp = _validate_inner_messages(batch, data, config, now_ms)
    return AppendEntry(data, count, batch.magic, max_timestamp=max_timestamp)


def _validate_inner_messages(
    batch: LegacyBatch, data: bytes, config: AppendConfig, now_ms: int | None
) -> tuple[int, int]:
    """Check a v1 wrapper's inner messages; returns ``(count, max timestamp)``."""
    try:
        # Structure, inner CRCs and nesting, as a consumer reads it.
        records = list(batch)
        value_start = _wrapper_value_start(data, batch.magic)
        inner = decompress(
            batch.compression_id, data[value_start:], batch.magic, config.max_decompressed_size,
            position=batch.position + value_start,
        )
    except DecompressionBombError as exc:
        raise _too_large_decompressed(batch, config, exc) from None
    except RecordsError as exc:
        raise _Rejected(_structure_code(exc), f"Found invalid record structure: {exc}") from None
    errors: list[RecordError] = []
    timestamp_errors = 0
    max_timestamp = -1
    log_append = bool(batch.attributes & TIMESTAMP_TYPE_MASK)
    pos = 0
    for index in range(len(records)):
        offset, size, crc, magic, attributes = _LEGACY_HEADER.unpack_from(inner, pos)
        body = inner[pos + LEGACY_ENTRY_MAGIC_OFFSET : pos + LOG_OVERHEAD + size]  # what the CRC covers
        pos += LOG_OVERHEAD + size
        if magic != batch.magic:
            errors.append(RecordError(index, f"Record magic {magic} does not match outer magic {batch.magic}"))
            continue
        if zlib.crc32(body) != crc:
            errors.append(RecordError(index, f"Record is corrupt (stored crc = {crc})"))
            continue
        if offset != index:
            errors.append(RecordError(index, f"Inner relative offset {offset} is not {index}"))
            continue
        record = records[index]
        if config.compacted and record.key is None:
            errors.append(RecordError(index, "Compacted topic cannot accept message without key"))
            continue
        # a LogAppendTime wrapper's records carry its timestamp
        error = _timestamp_error(index, offset, record.timestamp, config, now_ms, log_append)
        if error is not None:
            errors.append(error)
            timestamp_errors += 1
            continue
        max_timestamp = max(max_timestamp, record.timestamp)
    _raise_record_errors(errors, timestamp_errors)
    return len(records), batch.timestamp if log_append else max_timestamp


def _wrapper_value_start(data: bytes, magic: int) -> int:
    """Position of the value bytes in a top-level legacy message (after key)."""
    pos = _LEGACY_KEY_SIZE_AT[magic]
    key_length = _I32.unpack_from(data, pos)[0]
    pos += LEGACY_KEY_SIZE_LENGTH + max(key_length, 0)
    return pos + LEGACY_VALUE_SIZE_LENGTH


# -- producer state ------------------------------------------------------------------------------


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == _INT32_MAX)


def _check_producers(
    entries: Iterable[AppendEntry], producers: ProducerStateTable | None,
    verified: Collection[int] | None = None,
) -> BatchMetadata | None:
    """``analyzeAndValidateProducerState``; returns the earlier append a retry duplicates."""
    if producers is None:
        return None
    updated: dict[int, ProducerEntry] = {}
    offset = 0  # offsets relative to the append, for the transaction bookkeeping
    for entry in entries:
        first, offset = offset, offset + entry.offset_count
        if entry.producer_id < 0:
            continue
        current = producers.entry(entry.producer_id)
        if current is not None:  # each batch is compared with the appended state, as in Kafka
            duplicate = current.find_duplicate(entry.producer_epoch, entry.first_sequence, entry.last_sequence)
            if duplicate is not None:
                log.info("producer %d: duplicate of the batch at offset %d", entry.producer_id,
                         duplicate.first_offset)
                return duplicate
        if (verified is not None and entry.is_transactional and entry.producer_id not in verified
                and (current is None or current.transaction_first_offset is None)):
            # Kafka's batchMissingRequiredVerification: the log's own check, whatever asked
            raise _Rejected(
                AppendErrorCode.INVALID_TXN_STATE,
                f"Record of producer {entry.producer_id} was not part of an ongoing transaction "
                "(no transactional id of the coordinator verified this partition)",
            )
        state = updated.get(entry.producer_id)
        if state is None:
            state = current.copy() if current is not None else ProducerEntry(entry.producer_id)
            updated[entry.producer_id] = state
        _check_epoch_and_sequence(state, current, entry)
        if state.transaction_first_offset is not None and not entry.is_transactional:
            raise _Rejected(
                AppendErrorCode.INVALID_TXN_STATE,
                f"Expected transactional write from producer {entry.producer_id}",
            )
        record_batch(state, entry, first)
    return None


def _check_epoch_and_sequence(state: ProducerEntry, current: ProducerEntry | None, entry: AppendEntry) -> None:
    pid, epoch, first_seq = entry.producer_id, entry.producer_epoch, entry.first_sequence
    if epoch < state.producer_epoch:
        raise _Rejected(
            AppendErrorCode.INVALID_PRODUCER_EPOCH,
            f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch {state.producer_epoch}",
        )
    if epoch != state.producer_epoch:
        if first_seq != 0 and state.producer_epoch != -1:
            raise _Rejected(
                AppendErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                f"{first_seq} (seq. number), {state.producer_epoch} (current producer epoch)",
            )
        return
    known_epoch = current.producer_epoch if current is not None else -1
    if known_epoch == -1:
        return  # nothing retained of this producer: any sequence starts it
    last_seq = state.last_sequence
    if not _in_sequence(last_seq, first_seq):
        raise _Rejected(
            AppendErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"Out of order sequence number for producer {pid}: {first_seq} (incoming seq. number), "
            f"{last_seq} (current end sequence number)",
        )
