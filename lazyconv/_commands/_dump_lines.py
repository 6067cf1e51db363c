"""The lines Kafka's DumpLogSegments prints, for ``lazyconv dump``: a batch (printBatchLevel), its
records (deep iteration: metadata, transaction markers, keys and values), the same as JSON
lines, and a producer snapshot's entries; :class:`Dumper` writes a segment's batches and records
in the chosen format.
"""

from __future__ import annotations

import argparse
import codecs
import json
from typing import TYPE_CHECKING, Any, TextIO

from lazyconv.records._format import LEGACY_PREFIX, LOG_OVERHEAD

if TYPE_CHECKING:
    from lazyconv.records import Record, RecordBatch

__all__ = ["Dumper", "snapshot_line", "camel_case", "java_utf8"]

_TIMESTAMP_TYPE_JSON = {-1: None, 0: "create_time", 1: "log_append_time"}
_TIMESTAMP_TYPE_TEXT = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def snapshot_line(entry: dict[str, Any]) -> str:
    """A producer entry as Kafka's tool prints it: the entry, then its last batch's metadata
    (the first sequence is the last one minus the offset delta, wrapping as Kafka's)."""
    first_txn = entry["current_txn_first_offset"]
    line = (f"producerId: {entry['producer_id']} producerEpoch: {entry['producer_epoch']} "
            f"coordinatorEpoch: {entry['coordinator_epoch']} "
            f"currentTxnFirstOffset: {_optional_long(None if first_txn < 0 else first_txn)} "
            f"lastTimestamp: {entry['timestamp']} ")
    if entry["last_offset"] >= 0:
        last_seq, delta = entry["last_sequence"], entry["offset_delta"]
        first_seq = last_seq - delta if last_seq >= delta else 0x7FFFFFFF - (delta - last_seq) + 1
        line += (f"firstSequence: {first_seq} lastSequence: {last_seq} "
                 f"lastOffset: {entry['last_offset']} offsetDelta: {delta} "
                 f"timestamp: {entry['timestamp']}")
    return line


def _optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def camel_case(name: str) -> str:
    """``producer_id`` -> ``producerId``, the spelling of Kafka's tool."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _readable(data: bytes | None) -> str:
    """UTF-8 text when the bytes are printable text, else ``0x`` + hex."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


class Dumper:
    """Writes batches and records in the chosen format; remembers CRC failures and (deep
    iteration) offsets that do not follow each other."""

    def __init__(self, out: TextIO, json_lines: bool, validate: bool,
                 args: argparse.Namespace | None = None) -> None:
        self.out = out
        self.json_lines = json_lines
        self.validate = validate
        self.print_data = bool(args and args.print_data_log)
        self.hex = bool(args and args.hex)
        self.headers = bool(args and args.headers)
        self.skip_metadata = bool(args and args.skip_record_metadata)
        self.invalid: list[int] = []  # positions of batches whose CRC failed (--batches)
        self.last_offset = -1
        self.non_consecutive: list[tuple[int, int]] = []

    # -- per batch ---------------------------------------------------------------------------

    def batch_only(self, batch: RecordBatch) -> None:
        valid = batch.is_valid()
        if not valid:
            self.invalid.append(batch.position)
        if self.json_lines:
            count = batch.record_count
            if count is None and valid:  # a legacy wrapper: count its inner messages
                count = sum(1 for _ in batch)
            fields = _batch_fields(batch, _base_offset(batch, strict=valid))
            fields.update(
                size=batch.size_in_bytes, record_count=count, crc=batch.crc, crc_valid=valid
            )
            self.out.write(json.dumps(fields) + "\n")
        else:
            self.out.write(_batch_line(batch, valid) + "\n")

    def batch_and_records(self, batch: RecordBatch) -> None:
        from lazyconv.errors import CorruptRecordError

        valid = batch.is_valid()
        if not self.json_lines:
            self.out.write(_batch_line(batch, valid) + "\n")
        if not valid and self.validate:
            batch.validate()  # raises the precise error (size, CRC) with its position
            raise CorruptRecordError("batch fails validation", batch.position)
        if self.json_lines:
            self._json_records(batch)
        else:
            self._text_records(batch, valid)

    def finish(self) -> None:
        from lazyconv.errors import CorruptRecordError

        if self.invalid:
            raise CorruptRecordError(
                f"{len(self.invalid)} batch(es) fail CRC validation, the first one", self.invalid[0]
            )

    # -- per record --------------------------------------------------------------------------

    def _json_records(self, batch: RecordBatch) -> None:
        magic = batch.magic
        common = {
            "magic": magic,
            "compression": _compression_name(batch),
            "batch_base_offset": None,
            "control": bool(batch.is_control),
            "transactional": bool(batch.is_transactional),
            "producer_id": batch.producer_id if magic >= 2 else -1,
            "producer_epoch": batch.producer_epoch if magic >= 2 else -1,
            "base_sequence": batch.base_sequence if magic >= 2 else -1,
        }
        timestamp_type = _TIMESTAMP_TYPE_JSON[int(batch.timestamp_type)]
        write = self.out.write
        for record in batch:
            if common["batch_base_offset"] is None:
                # after the first record: a legacy wrapper's base offset needs decompression
                common["batch_base_offset"] = batch.base_offset
            obj: dict[str, Any] = {
                "offset": record.offset,
                "timestamp": None if magic == 0 else record.timestamp,
                "timestamp_type": None if magic == 0 else timestamp_type,
                "key": _hex(record.key),
                "value": _hex(record.value),
                "headers": [[_key_text(name), _hex(value)] for name, value in record.headers],
            }
            obj.update(common)
            write(json.dumps(obj) + "\n")

    def _text_records(self, batch: RecordBatch, valid: bool) -> None:
        """Kafka's deep-iteration lines: ``| offset: … <type>: … keySize: … valueSize: …``,
        then ``sequence: … headerKeys: […]`` (v2) or ``isValid: … crc: …`` (v0/v1), the
        transaction marker of a control record, and key and payload with --print-data-log.
        ``valid``: whether the batch passed its CRC check (a plain v0/v1 message is its own
        record, so its line says so, as Kafka's does; --no-validate prints such records)."""
        kind = _TIMESTAMP_TYPE_TEXT[int(batch.timestamp_type)]
        control = bool(batch.is_control)
        write = self.out.write
        legacy_crcs = _legacy_crcs(batch, valid) if batch.magic < 2 else None
        for index, record in enumerate(batch):
            if self.last_offset != -1 and record.offset != self.last_offset + 1:
                self.non_consecutive.append((self.last_offset, record.offset))
            self.last_offset = record.offset
            parts = []
            if not self.skip_metadata:
                parts.append(f"offset: {record.offset} {kind}: {record.timestamp} "
                             f"keySize: {-1 if record.key is None else len(record.key)} "
                             f"valueSize: {-1 if record.value is None else len(record.value)}")
                if batch.magic >= 2:
                    parts.append(f"sequence: {_record_sequence(batch, record.offset)} "
                                 "headerKeys: [" + ",".join(_key_text(n) for n, _ in record.headers) + "]")
                elif legacy_crcs is not None:
                    crc, crc_valid = legacy_crcs[index]
                    parts.append(f"isValid: {str(crc_valid).lower()} crc: {crc}")
                if self.headers and record.headers:
                    parts.append("headers: " + ", ".join(
                        f"{_key_text(n)}={_readable(v)}" for n, v in record.headers))
                if control:
                    parts.append(_control_text(record))
            if self.print_data and not control:
                text = _readable if self.hex else _utf8
                if record.key is not None:
                    parts.append(f"key: {text(record.key)}")
                if record.value is not None:
                    parts.append(f"payload: {text(record.value)}")
            write("| " + " ".join(parts) + "\n")


def _record_sequence(batch: RecordBatch, offset: int) -> int:
    """Kafka's ``Record.sequence()``: the batch's base sequence plus the offset delta, wrapping
    past 2^31-1 to 0; -1 when the base sequence is negative (not only -1, as Kafka's reader)."""
    from lazyconv.records._batch import increment_sequence

    base = batch.base_sequence
    if base < 0:
        return -1
    return increment_sequence(base, offset - batch.base_offset)


def _legacy_crcs(batch: RecordBatch, valid: bool) -> list[tuple[int, bool]]:
    """The CRC of each message a v0/v1 entry holds, and whether it matches: itself (``valid``),
    or a wrapper's inner messages (iterating a wrapper checks their CRCs: they match)."""
    if not getattr(batch, "is_wrapper", False):
        return [(batch.crc, valid)]
    data, count, _shift, _override = batch.inner_messages()  # type: ignore[attr-defined]
    crcs, pos = [], 0
    for _ in range(count):
        _offset, size, crc = LEGACY_PREFIX.unpack_from(data, pos)
        crcs.append((crc, True))
        pos += LOG_OVERHEAD + size
    return crcs


def _utf8(data: bytes) -> str:
    """Kafka's StringDecoder: the bytes as UTF-8, malformed sequences replaced as Java does."""
    return java_utf8(data)


def java_utf8(data: bytes) -> str:
    """``new String(data, StandardCharsets.UTF_8)``, as Kafka's tool decodes keys, values and
    header keys: valid UTF-8 as Python reads it, each malformed sequence one U+FFFD, but where
    Java's decoder takes more bytes as one sequence than Python's ``errors="replace"``: a UTF-8
    encoded surrogate (``ED A0 80``) is one U+FFFD (Python: three), its first two bytes one
    (Python: two), a sequence cut by the end one whatever follows."""
    return data.decode("utf-8", _JAVA_REPLACE)


def _java_malformed(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler of :func:`java_utf8`: U+FFFD for the malformed sequence at
    ``exc.start``, and where Java's decoder (OpenJDK 17's String.decodeUTF8_UTF16) resumes:
    after the bytes it takes as that sequence, read by the lead byte's length."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, at = exc.object, exc.start
    return "\ufffd", at + _java_malformed_length(data, at)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _java_malformed_length(data: bytes, at: int) -> int:
    """How many bytes from ``at`` Java's decoder replaces by one U+FFFD (the rest of ``data``
    where it stops there); ``data[at:]`` does not start with a valid sequence."""
    lead, rest = data[at], len(data) - at - 1  # bytes after the lead byte
    if 0xE0 <= lead <= 0xEF:
        second = data[at + 1] if rest else None
        bad_second = second is not None and (
            (lead == 0xE0 and second & 0xE0 == 0x80) or not _is_continuation(second))
        if rest >= 2:
            # three bytes there: malformed (an overlong, a non-continuation) or a surrogate
            if bad_second:
                return 1
            return 2 if not _is_continuation(data[at + 2]) else 3
        # cut by the end: the lead byte alone when the next one cannot follow it, else all
        return 1 if bad_second else rest + 1
    if 0xF0 <= lead <= 0xF7:
        second = data[at + 1] if rest else None
        bad_second = lead > 0xF4 or (second is not None and (
            (lead == 0xF0 and not 0x90 <= second <= 0xBF)
            or (lead == 0xF4 and second & 0xF0 != 0x80) or not _is_continuation(second)))
        if rest >= 3:
            if bad_second:
                return 1
            return 2 if not _is_continuation(data[at + 2]) else 3
        if bad_second:
            return 1
        # cut by the end: the lead and second bytes, and a third continuation byte after them
        if rest < 2 or not _is_continuation(data[at + 2]):
            return min(2, rest + 1)
        return rest + 1
    return 1  # a continuation or invalid byte, a two-byte lead without its continuation


_JAVA_REPLACE = "lazyconv.java_utf8_replace"
codecs.register_error(_JAVA_REPLACE, _java_malformed)


def _compression_name(batch: RecordBatch) -> str:
    from lazyconv.records._compression import compression_name

    return compression_name(batch.compression)


def _base_offset(batch: RecordBatch, strict: bool) -> int | None:
    """The batch's base offset; ``None`` for a wrapper that does not decompress when not
    ``strict`` (a batch already known to be corrupt)."""
    from lazyconv.errors import LazyconvError

    try:
        return batch.base_offset
    except LazyconvError:
        if strict:
            raise
        return None


def _batch_fields(batch: RecordBatch, base_offset: int | None) -> dict[str, Any]:
    magic = batch.magic
    return {
        "position": batch.position,
        "base_offset": base_offset,
        "last_offset": batch.last_offset,
        "magic": magic,
        "compression": _compression_name(batch),
        "timestamp_type": _TIMESTAMP_TYPE_JSON[int(batch.timestamp_type)],
        "max_timestamp": None if magic == 0 else batch.max_timestamp,
        "partition_leader_epoch": batch.partition_leader_epoch if magic >= 2 else -1,
        "producer_id": batch.producer_id if magic >= 2 else -1,
        "producer_epoch": batch.producer_epoch if magic >= 2 else -1,
        "base_sequence": batch.base_sequence if magic >= 2 else -1,
        "transactional": bool(batch.is_transactional),
        "control": bool(batch.is_control),
    }


def _batch_line(batch: RecordBatch, valid: bool) -> str:
    """A batch as Kafka's tool prints it (printBatchLevel); a wrapper that does not
    decompress shows ``?`` as its base offset (its record lines then raise the error)."""
    kind = _TIMESTAMP_TYPE_TEXT[int(batch.timestamp_type)]
    if batch.magic >= 2:
        base_offset = batch.base_offset
        horizon = batch.base_timestamp if batch.has_delete_horizon else None  # type: ignore[attr-defined]
        parts = [
            f"baseOffset: {base_offset} lastOffset: {batch.last_offset}",
            f"count: {batch.record_count}",
            f"baseSequence: {batch.base_sequence}",
            f"lastSequence: {batch.last_sequence}",  # type: ignore[attr-defined]
            f"producerId: {batch.producer_id}",
            f"producerEpoch: {batch.producer_epoch}",
            f"partitionLeaderEpoch: {batch.partition_leader_epoch}",
            f"isTransactional: {str(bool(batch.is_transactional)).lower()}",
            f"isControl: {str(bool(batch.is_control)).lower()}",
            f"deleteHorizonMs: {_optional_long(horizon)}",
        ]
    else:
        parts = [f"offset: {batch.last_offset}"]
    parts += [
        f"position: {batch.position}",
        f"{kind}: {batch.max_timestamp}",
        f"size: {batch.size_in_bytes}",
        f"magic: {batch.magic}",
        f"compresscodec: {_compression_name(batch)}",
        f"crc: {batch.crc}",
        f"isvalid: {str(valid).lower()}",
    ]
    return " ".join(parts)


def _control_text(record: Record) -> str:
    """What Kafka's tool prints for a control record: a transaction marker, a KRaft record
    as JSON (``SnapshotHeader {...}``), or the type and the id its key holds."""
    from lazyconv._commands._kraft_records import kraft_control_text
    from lazyconv.errors import LazyconvError
    from lazyconv.records._control import (
        ControlRecordType,
        control_type_id,
        parse_control_key,
        parse_end_txn_marker,
    )

    try:
        kind = parse_control_key(record.key)
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = parse_end_txn_marker(record.key, record.value)
            return f"endTxnMarker: {kind.name} coordinatorEpoch: {marker.coordinator_epoch}"
        kraft = kraft_control_text(int(kind), record.value)
        if kraft is not None:
            return kraft
        # the id the key holds, as Kafka prints it: UNKNOWN(42), not UNKNOWN(-1)
        return f"controlType: {kind.name}({control_type_id(record.key)})"
    except LazyconvError as exc:
        return f"controlType: unreadable ({exc.message})"


def _key_text(key: str) -> str:
    """A header key as Kafka's DumpLogSegments prints it: bytes that are not UTF-8 (kept by the
    records layer as lone surrogates, so they round-trip) shown as U+FFFD, as Java's decoder
    shows them; this also keeps ``--json`` output valid JSON."""
    return java_utf8(key.encode("utf-8", "surrogateescape"))
