"""``lazyconv dump PATH...``: list the batches and records of log segments and the entries of
Kafka's other segment files (like Kafka's DumpLogSegments), as readable text or as JSON lines.

Output is streamed batch by batch: on corrupt input everything valid before the problem has
already been printed when the command exits with status 1 and the error (with its byte
position in the file) on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lazyconv.commands import _segment_files as segment_files
from lazyconv.commands._common import finish_progress, input_file, progress_bar, size_type

if TYPE_CHECKING:
    from lazyconv.records import Record, RecordBatch

log = logging.getLogger(__name__)

_TIMESTAMP_TYPE_JSON = {-1: None, 0: "create_time", 1: "log_append_time"}
_TIMESTAMP_TYPE_TEXT = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``dump`` sub-command."""
    parser = subparsers.add_parser(
        "dump",
        help="list the batches and records of log segments and Kafka's index files",
        description=(
            "Print the batches and records of Kafka log segments (.log, or .bin: any file of "
            "concatenated record batches, magic v0/v1/v2, any codec) and the entries of a "
            "segment's other files: offset index (.index), time index (.timeindex), aborted "
            "transactions (.txnindex) and producer state snapshots (.snapshot). The type comes "
            "from the file name (--type overrides it); other names are refused. Default: a "
            "readable listing, one header line per batch and one indented line per record. A "
            "trailing partial batch is skipped with a warning (an error with --strict). Corrupt "
            "input: what was valid is printed, then the command exits with status 1 and the "
            "error and its byte position on stderr."
        ),
    )
    parser.add_argument("paths", metavar="PATH", nargs="+", help="segment files to read, in order")
    parser.add_argument(
        "--type",
        choices=segment_files.FILE_TYPES,
        default=None,
        help="read every PATH as this type instead of guessing it from the file name "
        "(log = record batches)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=(
            "print one JSON object per record (keys: offset, timestamp, timestamp_type, key, "
            "value, headers, magic, compression, batch_base_offset, control, transactional, "
            "producer_id, producer_epoch, base_sequence; bytes as lowercase hex, null if null)"
        ),
    )
    parser.add_argument(
        "--batches",
        action="store_true",
        help=(
            "one entry per batch instead of per record (with --json: header fields, size, "
            "record_count, crc, crc_valid); batches failing their CRC are listed and make the "
            "command exit with status 1 at the end"
        ),
    )
    parser.add_argument(
        "--no-validate",
        action="store_true",
        help="print the records of batches whose CRC does not match instead of stopping there",
    )
    parser.add_argument(
        "--max-decompressed-size",
        type=size_type(1),
        default=None,
        metavar="SIZE",
        help="refuse a compressed batch that decompresses to more than SIZE (default 128M)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) on a trailing partial batch instead of warning and skipping it",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar on stderr (none when not a TTY)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Dump every PATH in order; returns the exit status (errors propagate as LazyconvError)."""
    from lazyconv.commands._common import UsageError

    kinds = []
    for path in args.paths:
        input_file(path)
        kind = args.type or _guess_type(path)
        if kind is None:
            raise UsageError(
                f"cannot tell what {path} holds from its name: expected a .log or .bin "
                "(record batches), .index, .timeindex, .txnindex or .snapshot file "
                "(--type sets the type)"
            )
        kinds.append(kind)
    try:
        for path, kind in zip(args.paths, kinds, strict=True):
            if kind == "log":
                _dump_records(path, args)
            else:
                _dump_segment_file(path, kind, args.json)
    finally:
        sys.stdout.flush()
    return 0


def _guess_type(path: str) -> str | None:
    if Path(path).suffix.lower() == ".bin":
        return "log"
    return segment_files.file_type(path)


def _dump_segment_file(path: str, kind: str, json_lines: bool) -> None:
    """List the entries of an index, transaction index or producer snapshot file."""
    data = Path(path).read_bytes()
    base = segment_files.base_offset(path)
    if kind in ("index", "timeindex") and base is None:
        log.info("%s: the file name is not a base offset; offsets are relative to 0", path)
    entries: Any
    if kind == "index":
        entries = segment_files.offset_index(data, base or 0)
    elif kind == "timeindex":
        entries = segment_files.time_index(data, base or 0)
    elif kind == "txnindex":
        entries = segment_files.transaction_index(data)
    else:
        entries = segment_files.producer_snapshot(data)
    out = sys.stdout
    if not json_lines:
        out.write(f"Dumping {path}\n")
    for entry in entries:
        if json_lines:
            out.write(json.dumps(entry) + "\n")
        else:
            out.write(" ".join(f"{_camel(k)}: {v}" for k, v in entry.items()) + "\n")


def _camel(name: str) -> str:
    """``producer_id`` -> ``producerId``, the spelling of Kafka's tool."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _dump_records(path: str, args: argparse.Namespace) -> None:
    """Dump the batches and records of one segment."""
    from lazyconv.errors import ConfigurationError, TruncatedDataError
    from lazyconv.records import DEFAULT_MAX_DECOMPRESSED_SIZE, FileRecords

    max_size = args.max_decompressed_size or DEFAULT_MAX_DECOMPRESSED_SIZE
    try:
        records = FileRecords(path, max_decompressed_size=max_size)
    except OSError as exc:
        raise ConfigurationError(f"cannot open {path}: {exc.strerror or exc}") from None
    out = sys.stdout
    with records, _progress(records.size_in_bytes, args.quiet) as progress:
        dumper = _Dumper(out, json_lines=args.json, validate=not args.no_validate)
        if not args.json:
            out.write(f"Dumping {path}\n")
        end = 0
        for batch in _batches(records, progress):
            if args.batches:
                dumper.batch_only(batch)
            else:
                dumper.batch_and_records(batch)
            end = batch.position + batch.size_in_bytes
        trailing = records.size_in_bytes - end
        if trailing > 0:
            if args.strict:
                raise TruncatedDataError(
                    f"{trailing} trailing bytes do not form a complete batch (--strict)", end
                )
            log.warning(
                "%s: %d trailing bytes at byte %d do not form a complete batch (skipped)",
                path,
                trailing,
                end,
            )
        finish_progress(progress)
        dumper.finish()


def _batches(records: Any, progress: Any) -> Iterator[RecordBatch]:
    for batch in records.batches():
        yield batch
        progress.update(batch.size_in_bytes)


def _progress(total: int, quiet: bool) -> Any:
    return progress_bar(total, "dump", quiet=quiet, unit="B", unit_scale=True)


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


class _Dumper:
    """Writes batches and records in the chosen format; remembers CRC failures."""

    def __init__(self, out: TextIO, json_lines: bool, validate: bool) -> None:
        self.out = out
        self.json_lines = json_lines
        self.validate = validate
        self.invalid: list[int] = []  # positions of batches whose CRC failed (--batches)

    # -- per batch ---------------------------------------------------------------------------

    def batch_only(self, batch: RecordBatch) -> None:
        valid = batch.is_valid()
        if not valid:
            self.invalid.append(batch.position)
        count = batch.record_count
        if count is None and valid:  # a legacy wrapper: count its inner messages
            count = sum(1 for _ in batch)
        if self.json_lines:
            fields = _batch_fields(batch, _base_offset(batch, strict=valid))
            fields.update(
                size=batch.size_in_bytes, record_count=count, crc=batch.crc, crc_valid=valid
            )
            self.out.write(json.dumps(fields) + "\n")
        else:
            self.out.write(_batch_line(batch, count, valid) + "\n")

    def batch_and_records(self, batch: RecordBatch) -> None:
        from lazyconv.errors import CorruptRecordError

        valid = batch.is_valid()
        if not self.json_lines:
            self.out.write(_batch_line(batch, batch.record_count, valid) + "\n")
        if not valid and self.validate:
            batch.validate()  # raises the precise error (size, CRC) with its position
            raise CorruptRecordError("batch fails validation", batch.position)
        if self.json_lines:
            self._json_records(batch)
        else:
            self._text_records(batch)

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
                "headers": [[name, _hex(value)] for name, value in record.headers],
            }
            obj.update(common)
            write(json.dumps(obj) + "\n")

    def _text_records(self, batch: RecordBatch) -> None:
        kind = _TIMESTAMP_TYPE_TEXT[int(batch.timestamp_type)]
        control = bool(batch.is_control)
        write = self.out.write
        for record in batch:
            write("| " + _record_line(record, kind, control) + "\n")


def _compression_name(batch: RecordBatch) -> str:
    from lazyconv.records.compression import compression_name

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


def _batch_line(batch: RecordBatch, count: int | None, valid: bool) -> str:
    # a wrapper that does not decompress shows "?"; its record lines then raise the error
    base_offset = _base_offset(batch, strict=False)
    fields = _batch_fields(batch, base_offset)
    kind = _TIMESTAMP_TYPE_TEXT[int(batch.timestamp_type)]
    parts = [
        f"baseOffset: {'?' if base_offset is None else base_offset}",
        f"lastOffset: {fields['last_offset']}",
        f"count: {'?' if count is None else count}",
    ]
    if batch.magic >= 2:
        parts += [
            f"baseSequence: {fields['base_sequence']}",
            f"producerId: {fields['producer_id']}",
            f"producerEpoch: {fields['producer_epoch']}",
            f"partitionLeaderEpoch: {fields['partition_leader_epoch']}",
            f"isTransactional: {str(fields['transactional']).lower()}",
            f"isControl: {str(fields['control']).lower()}",
        ]
    parts.append(f"position: {batch.position}")
    if batch.magic >= 1:
        parts.append(f"{kind}: {batch.max_timestamp}")
    parts += [
        f"size: {batch.size_in_bytes}",
        f"magic: {batch.magic}",
        f"compresscodec: {fields['compression']}",
        f"crc: {batch.crc}",
        f"isvalid: {str(valid).lower()}",
    ]
    return " ".join(parts)


def _record_line(record: Record, kind: str, control: bool) -> str:
    parts = [f"offset: {record.offset}"]
    if kind != "NoTimestampType":
        parts.append(f"{kind}: {record.timestamp}")
    parts += [
        f"keySize: {-1 if record.key is None else len(record.key)}",
        f"valueSize: {-1 if record.value is None else len(record.value)}",
    ]
    if record.headers:
        parts.append("headers: " + ", ".join(f"{n}={_readable(v)}" for n, v in record.headers))
    if control:
        parts.append(_control_text(record))
    else:
        parts += [f"key: {_readable(record.key)}", f"payload: {_readable(record.value)}"]
    return " ".join(parts)


def _control_text(record: Record) -> str:
    from lazyconv.errors import LazyconvError
    from lazyconv.records.control import ControlRecordType, parse_control_key, parse_end_txn_marker

    try:
        kind = parse_control_key(record.key)
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = parse_end_txn_marker(record.key, record.value)
            return f"endTxnMarker: {kind.name} coordinatorEpoch: {marker.coordinator_epoch}"
        return f"controlType: {kind.name}"
    except LazyconvError as exc:
        return f"controlType: unreadable ({exc.message})"
