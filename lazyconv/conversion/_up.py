"""Up-conversion of an old producer's message set (magic 0/1) to one v2 record batch.

Kafka 4.0 refuses Produce v0–2 and magic 0/1 records. Before 4.0 the broker accepted them and
*up-converted* them to the topic's message format (v2 on every 3.x broker) in ``LogValidator``
(``kafka/log/LogValidator.scala`` in 2.x; ``storage/.../log/LogValidator.java`` in 3.x:
``convertAndAssignOffsetsNonCompressed`` for uncompressed sets, ``validateMessagesAndAssignOffsetsCompressed``
→ ``buildRecordsAndAssignOffsets`` for compressed ones), after ``UnifiedLog.analyzeAndValidateRecords``
had checked each top-level entry. :func:`up_convert` does the same for one partition's message set
of a Produce request, so that a gateway can forward the result in a Produce v3+ request to a
Kafka 4 cluster (the broker assigns the offsets); :func:`kafka_error_code` gives the error a
broker answered for each refusal.

What Kafka 3.9 does (read in its code, measured on a broker), and so what :func:`up_convert` does
---------------------------------------------------------------------------------------------------

- **One v2 batch for the whole set.** The uncompressed messages of a set (any number) become one
  uncompressed batch; a compressed wrapper's inner messages become one batch compressed with the
  wrapper's codec (the topic default ``compression.type=producer`` keeps the source codec; the
  Kafka 4 broker recompresses if the topic says otherwise). Offset deltas are 0..n-1 whatever the
  source offsets were (v0 absolute inner offsets, v1 relative ones, gaps, even decreasing ones:
  Kafka rewrites them, "some older clients do not implement the V1 internal offsets correctly").
- **A compressed wrapper must be alone.** The source codec is the last non-``none`` codec of the
  set; if it is not ``none`` (or the first entry is a v2 batch) and the set has more than one
  entry, Kafka refuses the set ("Compressed outer record has more than one batch",
  INVALID_RECORD). So wrappers with different codecs never meet: two wrappers, or a wrapper plus
  plain messages, are refused.
- **Records**: key and value kept (null stays null, an empty key is a key), no headers, timestamp
  type CreateTime, producer id/epoch/base sequence −1, not transactional, partition leader epoch
  −1 here (the broker writes its own). Timestamps: magic 1 keeps each message's timestamp (−1
  stays −1); magic 0 has none: ``RecordBatch.NO_TIMESTAMP`` (−1). Inner messages of a magic-1
  wrapper flagged LogAppendTime take the wrapper's timestamp (as Kafka's deep iterator does); the
  batch is still written CreateTime. Batch header as ``MemoryRecordsBuilder`` writes it: base
  timestamp = the first record's, max timestamp = the greatest (−1 if none).
- **Checks and the error a 3.9 broker answered** (all measured against a real 3.9.0 broker, see
  below), in Kafka's order: each top-level entry's framing (size below 14, magic above 2) and CRC
  → CORRUPT_MESSAGE; a codec id 5–7 → UNKNOWN_SERVER_ERROR (Kafka's ``CompressionType.forId``
  throws); more than one entry with a wrapper or a v2 batch, or uncompressed messages of mixed
  magic → INVALID_RECORD; in a wrapper: zstd (magic 2 only), a null value, no complete inner
  message, a magic-1 wrapper offset below its last inner offset and not 0 (librdkafka's 0 is
  allowed) → INVALID_RECORD; a stream that does not decompress → UNKNOWN_SERVER_ERROR (Kafka
  wraps the IOException in a plain KafkaException); an inner size below 14 or an inner CRC
  mismatch → CORRUPT_MESSAGE; per record: a compressed inner message, an inner message whose
  magic differs from the wrapper's, a null key on a compacted topic → INVALID_RECORD, a
  LogAppendTime-flagged magic-1 message (or wrapper) whose timestamp is −1 → INVALID_TIMESTAMP
  (Kafka collects these per-record errors over a wrapper and answers INVALID_TIMESTAMP if any was
  a timestamp error, else INVALID_RECORD: so do we). A LogAppendTime-flagged message *with* a
  timestamp is accepted on a CreateTime topic (3.9 stored it as CreateTime with that timestamp).
- **Produce version.** Produce v3+ must carry magic 2 (3.9: INVALID_RECORD, also for an empty
  set); Produce v0–2 are *not* checked against the magic: a magic-1 set in Produce v0 or a
  magic-0 set in Produce v2 is accepted, and so is a single v2 batch in Produce v0–2, which
  Kafka validated and stored as it would a Produce v3+ batch. :func:`up_convert` returns such a
  batch unchanged (``converted`` is ``False``) after the checks Kafka made of its header: the
  only entry, its CRC, base offset 0, a record count above 0 that matches the offset range, not
  a control batch, a sequence if it has a producer id (else INVALID_RECORD); the Kafka 4 broker
  validates its records when it is forwarded.
- **An empty set** (no bytes) is accepted by Kafka with nothing appended (NONE, base offset −1):
  :func:`up_convert` returns an empty :class:`UpConverted` (``record_count`` 0, ``batch`` b"").
  Kafka 4 refuses a Produce v3+ partition without a batch, so a gateway answers that one itself.

Where we differ on purpose
--------------------------

- **Trailing partial data is refused** (:class:`~lazyconv.errors.TruncatedDataError`,
  CORRUPT_MESSAGE). Kafka silently drops a partial last entry of the set and a partial last inner
  message of a wrapper, and answers NONE (for a set that is *only* a partial entry: NONE, base
  offset −1, nothing stored): the producer believes records were written that were not. No
  correct producer sends a partial entry.
- **A message whose key and value lengths do not account for its size exactly** is refused
  (:class:`~lazyconv.errors.CorruptRecordError`, CORRUPT_MESSAGE). Kafka stored a message whose
  value length left bytes unread (ignoring them) and answered UNKNOWN_SERVER_ERROR for lengths
  past the end or a magic-1 message shorter than its 22-byte overhead (unchecked exceptions).
- **Timestamps below −1** are refused with :class:`~lazyconv.errors.InvalidTimestampError`
  (INVALID_TIMESTAMP); 3.9 answered UNKNOWN_SERVER_ERROR (``MemoryRecordsBuilder`` throws
  IllegalArgumentException after validation).
- **A timestamp too far above the set's first** for a v2 record's int64 timestamp delta (−1
  then ``Long.MAX_VALUE``) is refused with :class:`~lazyconv.errors.InvalidTimestampError`
  (INVALID_TIMESTAMP) for its partition; Kafka's Java wraps the delta around and stores it.
- **Decompressed data is bounded** (``max_decompressed_size`` per wrapper, the records layer's
  default 128 MiB): beyond it :class:`~lazyconv.errors.DecompressionBombError`, answered as
  MESSAGE_TOO_LARGE. Kafka has no such bound (it checks ``max.message.bytes`` on compressed sizes
  only).
- **LogAppendTime topics**: 3.9 refused *every* LogAppendTime-flagged message there
  (INVALID_TIMESTAMP); we apply the CreateTime-topic rule above (refused only without a
  timestamp). The Kafka 4 broker overwrites the timestamps of a LogAppendTime topic anyway.
- The outer-entry size limit (``max.message.bytes``, MESSAGE_TOO_LARGE) and the timestamp range
  (``message.timestamp.*.max.ms``, INVALID_TIMESTAMP) depend on the topic and are left to the
  Kafka 4 broker, which checks them on the converted batch (3.9 re-checked the size after
  conversion too).

Oracle: a real Kafka 3.9.0 broker
---------------------------------

``tests/kafka/test_upconvert_oracle.py`` sends raw Produce v0/v1/v2 requests with message sets
written by :class:`~lazyconv.records.RecordsBuilder` (and hand-broken ones) to a 3.9.0 broker and
reads back what it stored. Found: for every codec (none, gzip, snappy, lz4; lz4 magic 0 with
Kafka's old header checksum) and magic 0 and 1, the broker stored exactly one v2 batch whose
records (key, value, timestamp, in order) equal those of :func:`up_convert`'s batch; the stored
header fields (attributes, last offset delta, base and max timestamps, producer id/epoch, base
sequence, record count) equal ours; for uncompressed data the whole batch is byte-identical once
the base offset and the partition leader epoch, which the broker sets, are zeroed (the CRC-32C
covers neither, so it is equal as stored). Every code in the "Kafka 3.9 answered" column of
:func:`kafka_error_code` is what the broker answered (67 cases), including: a v2 batch in
Produce v0/v2 accepted and stored unchanged; a magic-1 set in Produce v0 and a magic-0 set in
Produce v2 accepted; magic 0 or 1 in Produce v3 → INVALID_RECORD; lz4 magic 1 with the magic-0
header checksum → UNKNOWN_SERVER_ERROR while lz4 magic 0 with a correct checksum is accepted.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    RecordsError,
    TruncatedDataError,
    UnsupportedCompressionError,
)
from lazyconv.records import _impl
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._builder import RecordsBuilder, encode_v2_batch
from lazyconv.records._codec import parse_legacy_message
from lazyconv.records._compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    compress,
    decompress,
)
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_HEADER,
    LEGACY_MAGIC_OFFSET,
    LOG_HEADER,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    RECORDS_OFFSET,
    SIZE_OFFSET,
    V2_AFTER_CRC,
    V2_BEFORE_ATTRIBUTES,
)
from lazyconv.records._legacy import (
    LEGACY_ATTR_COMPRESSION_MASK,
    LEGACY_ATTR_TIMESTAMP_TYPE,
    LegacyBatch,
)
from lazyconv.records._memory import MemoryRecords
from lazyconv.records._types import RecordBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["UpConverted", "up_convert", "kafka_error_code", "INVALID_TIMESTAMP"]

#: Kafka's INVALID_TIMESTAMP error code (32).
INVALID_TIMESTAMP: int = ErrorCode.INVALID_TIMESTAMP

_NO_TIMESTAMP = -1
_INT64_MAX = (1 << 63) - 1
_CRC_START = LOG_OVERHEAD + 4  # a legacy message's CRC-32 covers magic .. end
# the plain path's reads: the entry's header up to the attributes, then a v1 message's timestamp
# and key length (or a v0 message's key length) after them
_LEGACY_HEADER = LEGACY_HEADER
_AFTER_ATTRIBUTES = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET + 1
_V1_TAIL = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_LEGACY_V0_MIN = LOG_OVERHEAD + RECORD_OVERHEAD_V0
_CODEC_MASK = LEGACY_ATTR_COMPRESSION_MASK
_MAGIC_AT = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET  # 16, from the start of the entry
_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET  # 17
# One parsed legacy message: (offset, crc, magic, attributes, timestamp, key, value).
_Parsed = tuple[int, int, int, int, int, bytes | None, bytes | None]
# One record to write: (timestamp, key, value, position of its top-level entry).
_Row = tuple[int, bytes | None, bytes | None, int]


@dataclass(frozen=True)
class UpConverted:
    """The result of :func:`up_convert`.

    ``batch`` is one magic v2 record batch with base offset 0 (``b""`` for an empty set), ready to
    be the records of one partition in a Produce v3+ request; ``record_count`` its records;
    ``source_compression`` the codec of the source (the wrapper's, ``NONE`` for plain messages),
    which is also the batch's; ``source_magic`` the magic of the source entries (0, 1, or 2 for a
    v2 batch returned unchanged; ``None`` for an empty set).
    """

    batch: bytes
    record_count: int
    source_compression: Compression
    source_magic: int | None

    @property
    def converted(self) -> bool:
        """``True`` if ``batch`` was written from magic 0/1 messages (not an empty set, not a v2
        batch passed through)."""
        return self.source_magic in (0, 1)


def up_convert(
    message_set: Buffer,
    *,
    produce_version: int | None = None,
    compacted_topic: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> UpConverted:
    """Up-convert one partition's message set of a Produce request to one v2 batch, as a Kafka
    3.x broker did before appending it (see the module docstring for the rules and the few
    places where we are stricter than Kafka on purpose).

    ``produce_version``: the Produce request's version, if known; 3 and above must carry magic 2
    (legacy messages are then refused as Kafka refused them). ``compacted_topic``: refuse records
    without a key, as Kafka did for ``cleanup.policy=compact`` topics. ``max_decompressed_size``
    bounds the decompressed size of a wrapper.

    Raises :class:`~lazyconv.errors.RecordsError` subclasses saying what is wrong and at which
    byte of ``message_set`` (errors about an inner message give the wrapper's position and the
    byte in its decompressed data); :func:`kafka_error_code` maps each to the error code for the
    Produce response. Bad arguments raise :class:`~lazyconv.errors.ConfigurationError`.
    """
    if produce_version is not None and (type(produce_version) is not int or produce_version < 0):
        raise ConfigurationError(f"produce_version must be a Produce version >= 0 or None, got {produce_version!r}")
    v3_or_later = produce_version is not None and produce_version >= 3
    records = MemoryRecords(message_set, max_decompressed_size)
    if not v3_or_later:  # the common case, in one pass over the bytes
        native = _kernel_set(records.buffer, compacted_topic, Compression.NONE)
        if native is not None:
            magic, _last, count, converted = native
            return UpConverted(converted, count, Compression.NONE, magic)
        plain = _plain_set(records.buffer, compacted_topic)
        if plain is not None:
            magic, _last, rows = plain
            return UpConverted(_v2_batch(Compression.NONE, rows), len(rows), Compression.NONE, magic)

    # 1. The top-level entries, as UnifiedLog.analyzeAndValidateRecords reads them: framing
    #    (size, magic: raised by the records layer), CRC, codec id. Kafka's ProduceRequest check
    #    of v3+ looks at the first entry's magic before anything else.
    entries: list[RecordBatch] = []
    parsed: list[_Parsed | None] = []
    end = 0
    for batch in records.batches():
        if v3_or_later and not entries and batch.magic != 2:
            raise InvalidRecordError(
                f"Produce v{produce_version} requests may only carry magic 2 record batches, "
                f"this set starts with a magic {batch.magic} message", batch.position + _MAGIC_AT)
        parsed.append(_check_entry(batch))
        entries.append(batch)
        end = batch.position + batch.size_in_bytes
    if end != len(records):
        raise TruncatedDataError(
            f"the message set ends inside an entry: {len(records) - end} bytes after the last "
            f"complete one (Kafka dropped them silently; refused here)", end)
    if not entries:
        if v3_or_later:
            raise InvalidRecordError(f"Produce v{produce_version} needs a record batch per partition, got none", 0)
        return UpConverted(b"", 0, Compression.NONE, None)

    # 2. LogValidator: one batch if compressed or v2, the same magic throughout.
    first = entries[0]
    source = Compression.NONE
    for batch in entries:
        if batch.compression != Compression.NONE:
            source = batch.compression
    if len(entries) > 1 and (first.magic >= 2 or source != Compression.NONE):
        what = "a v2 batch" if first.magic >= 2 else f"a {source.name.lower()} wrapper message"
        raise InvalidRecordError(
            f"a message set with {what} must hold nothing else, but it has {len(entries)} entries "
            f"(the second at byte {entries[1].position})", entries[1].position)
    if first.magic == 2:
        assert isinstance(first, DefaultBatch)
        _check_client_v2_batch(first)
        return UpConverted(bytes(first.buffer()), first.record_count, source, 2)
    if source == Compression.NONE:
        rows = _plain_rows(entries, parsed, compacted_topic)
    else:
        message = parsed[0]
        assert isinstance(first, LegacyBatch) and message is not None
        data = _wrapper_data(first, message, records.max_decompressed_size)
        inner = _kernel_wrapper(message, data, compacted_topic, source)
        if inner is not None:  # the common case: the kernel's one pass over the inner messages
            count, converted = inner
            return UpConverted(converted, count, source, first.magic)
        rows = _wrapper_rows(first, message, data, compacted_topic)

    return UpConverted(_v2_batch(source, rows), len(rows), source, first.magic)


def _v2_batch(source: Compression, rows: list[_Row]) -> bytes:
    """MemoryRecordsBuilder's batch: offsets 0..n-1, CreateTime, no producer state."""
    builder = RecordsBuilder(2, source)
    first = rows[0][0] if rows else 0
    for index, (timestamp, key, value, position) in enumerate(rows):
        if timestamp < _NO_TIMESTAMP:
            raise InvalidTimestampError(f"record {index} has the negative timestamp {timestamp}", position)
        if timestamp - first > _INT64_MAX:  # timestamps are int64 and first >= -1: only upward
            raise InvalidTimestampError(
                f"record {index}'s timestamp {timestamp} is too far from the first record's "
                f"({first}) for a v2 batch (its timestamp delta would not fit an int64)", position)
        builder.append(index, timestamp, key, value)
    return builder.build()


def _kernel_set(data: memoryview, compacted_topic: bool,
                compression: Compression) -> tuple[int, int, int, bytes] | None:
    """The kernel's one pass (``_impl.legacy_set_to_v2``) over a set of uncompressed magic 0/1
    messages: ``(magic, last offset, record count, batch)``, ``batch`` being the bytes
    ``_v2_batch(compression, rows)`` writes for the rows of :func:`_plain_set` (the records
    compressed with ``compression``). ``None`` when the kernel declines (or is not in use: the
    reference twin always declines), that is whenever :func:`_plain_set` declines or its rows
    would make ``_v2_batch`` raise: the caller then does it in Python."""
    plain = compression == Compression.NONE
    # uncompressed, the records go straight behind the header's place: one copy, into bytes
    body = bytearray(RECORDS_OFFSET) if plain else bytearray()
    facts = _impl.legacy_set_to_v2(data, body, compacted_topic)
    if facts is None:
        return None
    magic, last_offset, count, base_timestamp, max_timestamp = facts
    after_crc = (int(compression), count - 1, base_timestamp, max_timestamp, -1, -1, -1, count)
    if not plain:  # RecordsBuilder's batch: the records compressed as one stream
        batch = encode_v2_batch(
            base_offset=0, partition_leader_epoch=-1, attributes=after_crc[0], last_offset_delta=after_crc[1],
            base_timestamp=base_timestamp, max_timestamp=max_timestamp, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, record_count=count, payload=compress(compression, body, 2))
        return magic, last_offset, count, batch
    # encode_v2_batch's header, written in place
    V2_AFTER_CRC.pack_into(body, ATTRIBUTES_OFFSET, *after_crc)
    crc = _impl.crc32c(memoryview(body)[ATTRIBUTES_OFFSET:])
    V2_BEFORE_ATTRIBUTES.pack_into(body, BASE_OFFSET_OFFSET, 0, len(body) - LOG_OVERHEAD, -1, 2, crc)
    return magic, last_offset, count, bytes(body)


def _plain_set(data: memoryview, compacted_topic: bool,
               position: int | None = None) -> tuple[int, int, list[_Row]] | None:
    """The records of a set of uncompressed magic 0/1 messages (what most old producers send),
    checked as the careful path checks them (framing, CRC-32, codec, lengths, one magic, the
    LogAppendTime and compacted-topic rules) but in one pass over the bytes, without a batch
    object per message: ``(magic, last offset, rows)``, each row positioned at its message (or
    at ``position``: a wrapper's inner messages). ``None`` when anything is not plain or not
    sound: the careful path then meets it and raises what Kafka answered."""
    end = len(data)
    if not end:
        return None
    rows: list[_Row] = []
    pos = 0
    first_magic = -1
    crc32 = zlib.crc32
    while pos < end:
        if end - pos < _LEGACY_V0_MIN:
            return None
        offset, size, crc, magic, attributes = _LEGACY_HEADER.unpack_from(data, pos)
        stop = pos + LOG_OVERHEAD + size
        if size < RECORD_OVERHEAD_V0 or stop > end or attributes & _CODEC_MASK or not 0 <= magic <= 1:
            return None
        if first_magic < 0:
            first_magic = magic
        elif magic != first_magic:
            return None
        if crc32(data[pos + _CRC_START:stop]) != crc:
            return None
        if magic:
            if size < RECORD_OVERHEAD_V1:
                return None
            timestamp, key_size = _V1_TAIL.unpack_from(data, pos + _AFTER_ATTRIBUTES)
            at = pos + _AFTER_ATTRIBUTES + _V1_TAIL.size
            if attributes & LEGACY_ATTR_TIMESTAMP_TYPE and timestamp == _NO_TIMESTAMP:
                return None
        else:
            timestamp = _NO_TIMESTAMP
            key_size = _I32.unpack_from(data, pos + _AFTER_ATTRIBUTES)[0]
            at = pos + _AFTER_ATTRIBUTES + 4
        if key_size < -1 or at + max(key_size, 0) + 4 > stop:
            return None
        key = bytes(data[at:at + key_size]) if key_size >= 0 else None
        at += max(key_size, 0)
        value_size = _I32.unpack_from(data, at)[0]
        at += 4
        if value_size < -1 or at + max(value_size, 0) != stop:
            return None
        if compacted_topic and key is None:
            return None
        rows.append((timestamp, key, bytes(data[at:stop]) if value_size >= 0 else None,
                     pos if position is None else position))
        pos = stop
    return first_magic, offset, rows


def _check_entry(batch: RecordBatch) -> _Parsed | None:
    """Kafka's per-entry checks (CRC, codec id: :func:`~lazyconv.conversion._entry_checks.check_entry`);
    a legacy message's fields."""
    check_entry(batch)
    if isinstance(batch, DefaultBatch):
        return None
    data = bytes(batch.buffer())
    return _parse(data, 0, len(data), batch.position, check_crc=False)


def _check_client_v2_batch(batch: DefaultBatch) -> None:
    """The header checks Kafka made on a producer's v2 batch (base offset 0,
    ``LogValidator.validateBatch``); the records are left to the broker it is forwarded to. A
    batch without records must not pass for an empty set."""
    check_client_base_offset(batch)
    check_client_batch_header(batch)


def _parse(data: bytes, pos: int, end: int, error_base: int, *, check_crc: bool = True) -> _Parsed:
    """Parse one legacy entry, its CRC checked unless it was already; key/value lengths that do
    not fit its size are corruption (Kafka itself fails on them with an unchecked exception or
    ignores the rest)."""
    try:
        return parse_legacy_message(data, pos, end, error_base, check_crc)
    except InvalidRecordError as exc:
        raise CorruptRecordError(exc.message, exc.position) from None


def _plain_rows(entries: list[RecordBatch], parsed: list[_Parsed | None], compacted_topic: bool) -> list[_Row]:
    """The records of uncompressed messages (convertAndAssignOffsetsNonCompressed): each message
    is its own batch for Kafka, checked in order; the first refusal wins."""
    first_magic = entries[0].magic
    rows: list[_Row] = []
    for batch, message in zip(entries, parsed, strict=True):
        if batch.magic != first_magic:
            raise InvalidRecordError(
                f"message magic {batch.magic} differs from the first message's magic {first_magic}",
                batch.position + _MAGIC_AT)
        assert message is not None
        _offset, _crc, magic, attributes, timestamp, key, value = message
        if compacted_topic and key is None:
            raise InvalidRecordError("a compacted topic cannot accept a message without a key", batch.position)
        if magic == 1 and attributes & LEGACY_ATTR_TIMESTAMP_TYPE and timestamp == _NO_TIMESTAMP:
            raise InvalidTimestampError(
                "a producer must not set the LogAppendTime timestamp type (message without a timestamp)",
                batch.position + _ATTRIBUTES_AT)
        rows.append((timestamp, key, value, batch.position))
    return rows


def _wrapper_data(wrapper: LegacyBatch, message: _Parsed, max_size: int) -> bytes:
    """A compressed wrapper's value, decompressed (Kafka's deep iterator: zstd and a null value
    refused first)."""
    _offset, _crc, magic, attributes, _timestamp, _key, value = message
    position = wrapper.position
    codec = attributes & LEGACY_ATTR_COMPRESSION_MASK
    if codec == Compression.ZSTD:
        raise UnsupportedCompressionError(
            f"zstd compressed v{magic} wrapper: zstd exists only in magic 2 batches", position + _ATTRIBUTES_AT)
    if value is None:
        raise InvalidRecordError("compressed wrapper message with a null value", position)
    value_position = position + wrapper.size_in_bytes - len(value)
    return decompress(codec, value, magic, max_size, position=value_position)


def _kernel_wrapper(message: _Parsed, data: bytes, compacted_topic: bool,
                    source: Compression) -> tuple[int, bytes] | None:
    """A wrapper's inner messages (``data``, decompressed) as one batch compressed with
    ``source`` by the kernel's one pass: ``(record count, batch)``, what :func:`_wrapper_rows`
    and ``_v2_batch`` give; ``None`` for :func:`_wrapper_rows` to do it (a LogAppendTime wrapper,
    whose timestamp the records take; anything the kernel declines; inner messages the wrapper
    refuses: another magic, a wrapper offset below the last inner one and not 0)."""
    wrapper_offset, _crc, magic, attributes, _timestamp, _key, _value = message
    if magic == 1 and attributes & LEGACY_ATTR_TIMESTAMP_TYPE:
        return None
    native = _kernel_set(memoryview(data), compacted_topic, source)
    if native is None or native[0] != magic or (magic == 1 and wrapper_offset != 0 and wrapper_offset < native[1]):
        return None
    return native[2], native[3]


def _wrapper_rows(wrapper: LegacyBatch, message: _Parsed, data: bytes, compacted_topic: bool) -> list[_Row]:
    """The records of a compressed wrapper whose value decompressed to ``data`` (Kafka's deep
    iterator, then LogValidator's checks)."""
    wrapper_offset, _crc, magic, attributes, wrapper_timestamp, _key, _value = message
    position = wrapper.position
    log_append_time = magic == 1 and bool(attributes & LEGACY_ATTR_TIMESTAMP_TYPE)
    plain = _plain_set(memoryview(data), compacted_topic, position)
    if plain is not None and plain[0] == magic and not (
            magic == 1 and wrapper_offset != 0 and wrapper_offset < plain[1]):
        if not log_append_time:
            return plain[2]  # the common case, in one pass over the inner messages
        if wrapper_timestamp != _NO_TIMESTAMP:  # Kafka's deep iterator: the wrapper's timestamp
            return [(wrapper_timestamp, key, value, row_position)
                    for _timestamp, key, value, row_position in plain[2]]

    # The inner entries (Kafka reads them all first); a partial last one ends the walk.
    inner: list[tuple[int, int, int]] = []  # (start, offset, end)
    pos = 0
    size_of_data = len(data)
    while size_of_data - pos >= LOG_OVERHEAD:
        inner_offset, size = LOG_HEADER.unpack_from(data, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"inner message size {size} is below the minimum {RECORD_OVERHEAD_V0} "
                f"(byte {pos + SIZE_OFFSET} of the decompressed wrapper)", position)
        if size_of_data - pos - LOG_OVERHEAD < size:
            break
        inner.append((pos, inner_offset, pos + LOG_OVERHEAD + size))
        pos += LOG_OVERHEAD + size
    if not inner:
        raise InvalidRecordError("compressed wrapper message holds no complete inner message", position)
    if magic == 1 and wrapper_offset != 0 and wrapper_offset < inner[-1][1]:
        raise InvalidRecordError(
            f"wrapper offset {wrapper_offset} is below its last inner offset {inner[-1][1]} and not 0", position)
    if pos != size_of_data:
        raise TruncatedDataError(
            f"the decompressed wrapper ends with {size_of_data - pos} bytes that are not a whole inner "
            f"message (byte {pos} of the decompressed wrapper; Kafka dropped them silently)", position)

    refused: list[RecordsError] = []  # per-record errors: Kafka collects them over the wrapper
    rows: list[_Row] = []
    for index, (start, _offset, stop) in enumerate(inner):
        where = f"inner message {index} (byte {start} of the decompressed wrapper)"
        if data[start + _ATTRIBUTES_AT] & LEGACY_ATTR_COMPRESSION_MASK:  # a per-record error for Kafka too
            refused.append(InvalidRecordError(f"{where} is compressed: inner messages must not be", position))
            continue
        inner_magic = data[start + _MAGIC_AT]
        if inner_magic != magic:
            refused.append(InvalidRecordError(f"{where} has magic {inner_magic}, its wrapper {magic}", position))
            continue
        try:
            _o, _c, _m, _a, timestamp, key, value = _parse(data, start, stop, 0)
        except RecordsError as exc:
            raise type(exc)(f"{where}: {exc.message}", position) from None
        if compacted_topic and key is None:
            refused.append(InvalidRecordError(f"{where}: a compacted topic cannot accept a message without a key", position))
            continue
        if log_append_time:
            timestamp = wrapper_timestamp  # Kafka's deep iterator: LogAppendTime wrappers set it
            if timestamp == _NO_TIMESTAMP:
                refused.append(InvalidTimestampError(
                    f"{where}: a producer must not set the LogAppendTime timestamp type (wrapper without a timestamp)",
                    position + _ATTRIBUTES_AT))
                continue
        rows.append((timestamp, key, value, position))
    if refused:
        timestamp_errors = [error for error in refused if isinstance(error, InvalidTimestampError)]
        raise (timestamp_errors or refused)[0]
    return rows


def kafka_error_code(error: BaseException) -> int:
    """The Produce error code for an error :func:`up_convert` raised: what a Kafka 3.9 broker
    answered for the same input, or, where we refuse what Kafka accepted (or answered
    UNKNOWN_SERVER_ERROR by accident), the code named in the module docstring.

    ===========================================  ==========================  ======================
    error                                        code                        Kafka 3.9 answered
    ===========================================  ==========================  ======================
    InvalidTimestampError                        INVALID_TIMESTAMP (32)      32 (LogAppendTime
                                                                             without timestamp);
                                                                             -1 for timestamp < -1
    InvalidRecordError (other)                   INVALID_RECORD (87)         87
    UnsupportedCompressionError (zstd v0/v1)     INVALID_RECORD (87)         87
    DecompressionBombError                       MESSAGE_TOO_LARGE (10)      (no bound: stored)
    DecompressionError, UnknownCompressionError  UNKNOWN_SERVER_ERROR (-1)   -1
    CorruptRecordError (CRC, sizes, magic)       CORRUPT_MESSAGE (2)         2; -1 for lengths past
                                                                             the end, 0 for bytes
                                                                             left unread
    TruncatedDataError                           CORRUPT_MESSAGE (2)         0 (partial dropped)
    anything else                                UNKNOWN_SERVER_ERROR (-1)
    ===========================================  ==========================  ======================

    Returns :class:`~lazyconv.errors.ErrorCode` members (:data:`INVALID_TIMESTAMP` included).
    """
    if isinstance(error, InvalidTimestampError):
        return INVALID_TIMESTAMP
    if isinstance(error, UnsupportedCompressionError):
        return ErrorCode.INVALID_RECORD
    if isinstance(error, DecompressionBombError):
        return ErrorCode.MESSAGE_TOO_LARGE
    if isinstance(error, CompressionError):  # DecompressionError, UnknownCompressionError
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if isinstance(error, (CorruptRecordError, TruncatedDataError)):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(error, InvalidRecordError):
        return ErrorCode.INVALID_RECORD
    return ErrorCode.UNKNOWN_SERVER_ERROR
