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

from lazyconv._commands import _segment_files as segment_files
from lazyconv._commands._common import finish_progress, input_file, progress_bar, size_type
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from lazyconv.logdir._naming import LOG_SUFFIX
from lazyconv.records._format import LEGACY_PREFIX, LOG_OVERHEAD

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
            "from the file name (--type overrides it); other names are refused. Default: the "
            "listing line for line as Kafka's kafka.tools.DumpLogSegments prints it: one line per "
            "batch (--deep-iteration adds a line per record, --print-data-log its key and value), "
            "and Kafka's index checks (--verify-index-only, --index-sanity-check). A trailing "
            "partial batch is skipped with a warning (an error with --strict). Corrupt input: "
            "what was valid is printed, then the command exits with status 1 and the error and "
            "its byte position on stderr."
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
            "one entry per batch (the listing's default; with --json: header fields, size, "
            "record_count, crc, crc_valid, instead of one object per record); batches failing "
            "their CRC are listed and make the command exit with status 1 at the end"
        ),
    )
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="a line per record under its batch (offset, timestamp, sizes, sequence, header "
        "keys, transaction markers), as Kafka's --deep-iteration",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="records with their key and value decoded as UTF-8 (implies --deep-iteration), "
        "as Kafka's --print-data-log",
    )
    parser.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="record lines without offset, timestamp, sizes and sequence (Kafka's option)",
    )
    parser.add_argument(
        "--hex",
        action="store_true",
        help="lazyconv: keys, values and header values that are not printable UTF-8 as 0x + "
        "hex instead of UTF-8 with replacement characters (implies --print-data-log)",
    )
    parser.add_argument(
        "--headers",
        action="store_true",
        help="lazyconv: the header values on each record line, headers: name=value, ... "
        "(implies --deep-iteration)",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help=".index/.timeindex: check the entries against the segment's .log and print only "
        "the problems (on stderr, as Kafka's tool; the command then exits with status 1)",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help=".index/.timeindex: only the check a broker runs on start (entry size, last "
        "entry not below the first), as Kafka's tool",
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
    from lazyconv._commands._common import UsageError

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
    if args.hex:
        args.print_data_log = True
    if args.print_data_log or args.headers:
        args.deep_iteration = True
    report = _Report()
    try:
        for path, kind in zip(args.paths, kinds, strict=True):
            if kind == "log":
                _dump_records(path, args, report)
            elif kind in ("index", "timeindex") and not args.json:
                _dump_index(path, kind, args, report)
            else:
                _dump_segment_file(path, kind, args.json)
    finally:
        sys.stdout.flush()
        report.print(sys.stderr)
    return 1 if report.failed else 0


def _guess_type(path: str) -> str | None:
    if Path(path).suffix.lower() == ".bin":
        return "log"
    return segment_files.file_type(path)


class _Report:
    """What Kafka's tool prints on stderr after every file: index entries that do not match
    the log, and (deep iteration) offsets that do not follow each other. Index problems make
    the command fail (Kafka's tool exits 0: docs/differences.md)."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    @property
    def failed(self) -> bool:
        return any((self.index_mismatches, self.time_mismatches, self.time_out_of_order,
                    self.time_not_found))

    def print(self, err: TextIO) -> None:
        for name, pairs in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            for index_offset, log_offset in reversed(pairs):  # Kafka prepends to its list
                err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
        for name, pairs in self.time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in pairs:
                err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, pairs in self.time_out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            for index_ts, previous in pairs:
                err.write(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}\n")
        for pairs in self.time_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            for indexed, found in pairs:
                err.write(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            for first, second in reversed(pairs):
                err.write(f"  {first} is followed by {second}\n")


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
        elif kind == "snapshot":
            out.write(_snapshot_line(entry) + "\n")
        else:
            out.write(" ".join(f"{_camel(k)}: {v}" for k, v in entry.items()) + "\n")


def _snapshot_line(entry: dict[str, Any]) -> str:
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


def _camel(name: str) -> str:
    """``producer_id`` -> ``producerId``, the spelling of Kafka's tool."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


# -- index files and their checks (Kafka's dumpIndex / dumpTimeIndex) -------------------------


def _dump_index(path: str, kind: str, args: argparse.Namespace, report: _Report) -> None:
    from lazyconv.errors import CorruptRecordError

    out = sys.stdout
    out.write(f"Dumping {path}\n")
    data = Path(path).read_bytes()
    base = segment_files.base_offset(path) or 0
    entry_size = OFFSET_ENTRY_SIZE if kind == "index" else TIME_ENTRY_SIZE
    if kind == "index" and len(data) < entry_size:
        out.write(f"{path} is empty.\n")
        return
    if args.index_sanity_check:
        _sanity_check(path, kind, data, base)
        out.write(f"{path} passed sanity check.\n")
        return
    entries = list(segment_files.offset_index(data, base) if kind == "index"
                   else segment_files.time_index(data, base))
    log_path = Path(path).with_suffix(LOG_SUFFIX)
    name = str(Path(path).resolve())
    batches = _log_batches(log_path, timestamps=kind == "timeindex")
    if kind == "index":
        by_position = {position: last for position, last, _ in batches}
        for entry in entries:
            last = by_position.get(entry["position"])
            if last is None:
                raise CorruptRecordError(
                    f"{path}: index entry for offset {entry['offset']} points at byte "
                    f"{entry['position']} of {log_path.name}, where no batch starts",
                    entry["position"])
            if last != entry["offset"]:
                report.index_mismatches.setdefault(name, []).append((entry["offset"], last))
            if not args.verify_index_only:
                out.write(f"offset: {entry['offset']} position: {entry['position']}\n")
        return
    previous = -1
    for entry in entries:
        found = next(((last, max_ts) for _, last, max_ts in batches if last >= entry["offset"]), None)
        if found is None:
            report.time_not_found.setdefault(name, []).append((entry["offset"], -1))
        elif found[0] != entry["offset"]:
            report.time_not_found.setdefault(name, []).append((entry["offset"], found[0]))
        else:
            if found[1] != entry["timestamp"]:
                report.time_mismatches.setdefault(name, []).append((entry["timestamp"], found[1]))
            if previous >= entry["timestamp"]:
                report.time_out_of_order.setdefault(name, []).append((entry["timestamp"], previous))
        if not args.verify_index_only:
            out.write(f"timestamp: {entry['timestamp']} offset: {entry['offset']}\n")
        previous = entry["timestamp"]


def _log_batches(log_path: Path, timestamps: bool) -> list[tuple[int, int, int]]:
    """``(position, last offset, largest record timestamp)`` of each batch of the segment an
    index belongs to (Kafka's check compares an entry with its batch's records' timestamps)."""
    from lazyconv.errors import ConfigurationError
    from lazyconv.records import FileRecords

    try:
        records = FileRecords(str(log_path))
    except OSError as exc:
        raise ConfigurationError(f"cannot open {log_path}: {exc.strerror or exc}") from None
    found = []
    with records:
        for batch in records.batches():
            max_ts = max((record.timestamp for record in batch), default=-1) if timestamps else -1
            found.append((batch.position, batch.last_offset, max_ts))
    return found


def _sanity_check(path: str, kind: str, data: bytes, base: int) -> None:
    """Kafka's OffsetIndex / TimeIndex sanityCheck: whole entries, and a last entry that is
    not below the base offset (and, for a time index, not before the first timestamp)."""
    from lazyconv.errors import CorruptRecordError

    entry_size = OFFSET_ENTRY_SIZE if kind == "index" else TIME_ENTRY_SIZE
    if len(data) % entry_size:
        raise CorruptRecordError(
            f"Index file {path} is corrupt, found {len(data)} bytes which is neither positive "
            f"nor a multiple of {entry_size}.", len(data) - len(data) % entry_size)
    entries = list(segment_files.offset_index(data, base) if kind == "index"
                   else segment_files.time_index(data, base))
    if not entries:
        return
    last = entries[-1]
    if last["offset"] < base:
        raise CorruptRecordError(
            f"Corrupt {'index' if kind == 'index' else 'time index'} found, index file ({path}) "
            f"has non-zero size but the last offset is {last['offset']} which is less than the "
            f"base offset {base}.", len(data))
    if kind == "timeindex" and last["timestamp"] < entries[0]["timestamp"]:
        raise CorruptRecordError(
            f"Corrupt time index found, time index file ({path}) has non-zero size but the "
            f"last timestamp is {last['timestamp']} which is less than the first timestamp "
            f"{entries[0]['timestamp']}", len(data))


def _dump_records(path: str, args: argparse.Namespace, report: _Report) -> None:
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
        dumper = _Dumper(out, json_lines=args.json, validate=not args.no_validate, args=args)
        if not args.json:
            out.write(f"Dumping {path}\n")
            base = segment_files.base_offset(path)
            if Path(path).suffix == LOG_SUFFIX and base is not None:
                out.write(f"Log starting offset: {base}\n")
        end = 0
        for batch in _batches(records, progress):
            if args.json and args.batches:
                dumper.batch_only(batch)
            elif args.json or args.deep_iteration:
                dumper.batch_and_records(batch)
            else:
                dumper.batch_only(batch)
            end = batch.position + batch.size_in_bytes
        trailing = records.size_in_bytes - end
        if trailing > 0:
            if args.strict:
                raise TruncatedDataError(
                    f"{trailing} trailing bytes do not form a complete batch (--strict)", end
                )
            if not args.json:
                out.write(f"Found {trailing} invalid bytes at the end of {Path(path).name}\n")
            log.warning(
                "%s: %d trailing bytes at byte %d do not form a complete batch (skipped)",
                path,
                trailing,
                end,
            )
        finish_progress(progress)
        if dumper.non_consecutive:
            report.non_consecutive[str(Path(path).resolve())] = dumper.non_consecutive
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
        """Kafka's deep-iteration lines: ``| offset: … <type>: … keySize: … valueSize: …``,
        then ``sequence: … headerKeys: […]`` (v2) or ``isValid: … crc: …`` (v0/v1), the
        transaction marker of a control record, and key and payload with --print-data-log."""
        kind = _TIMESTAMP_TYPE_TEXT[int(batch.timestamp_type)]
        control = bool(batch.is_control)
        write = self.out.write
        legacy_crcs = _legacy_crcs(batch) if batch.magic < 2 else None
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
                                 "headerKeys: [" + ",".join(n for n, _ in record.headers) + "]")
                elif legacy_crcs is not None:
                    parts.append(f"isValid: true crc: {legacy_crcs[index]}")
                if self.headers and record.headers:
                    parts.append("headers: " + ", ".join(
                        f"{n}={_readable(v)}" for n, v in record.headers))
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
    past 2^31-1 to 0; -1 when the batch has none."""
    base = batch.base_sequence
    if base == -1:
        return -1
    return (base + offset - batch.base_offset) & 0x7FFFFFFF


def _legacy_crcs(batch: RecordBatch) -> list[int]:
    """The CRC of each message a v0/v1 entry holds: itself, or a wrapper's inner messages."""
    if not getattr(batch, "is_wrapper", False):
        return [batch.crc]
    data, count, _shift, _override = batch.inner_messages()  # type: ignore[attr-defined]
    crcs, pos = [], 0
    for _ in range(count):
        _offset, size, crc = LEGACY_PREFIX.unpack_from(data, pos)
        crcs.append(crc)
        pos += LOG_OVERHEAD + size
    return crcs


def _utf8(data: bytes) -> str:
    """Kafka's StringDecoder: the bytes as UTF-8, malformed sequences replaced by U+FFFD."""
    return data.decode("utf-8", "replace")


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
    from lazyconv.errors import LazyconvError
    from lazyconv.records._control import ControlRecordType, parse_control_key, parse_end_txn_marker

    try:
        kind = parse_control_key(record.key)
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = parse_end_txn_marker(record.key, record.value)
            return f"endTxnMarker: {kind.name} coordinatorEpoch: {marker.coordinator_epoch}"
        return f"controlType: {kind.name}({int(kind)})"
    except LazyconvError as exc:
        return f"controlType: unreadable ({exc.message})"
