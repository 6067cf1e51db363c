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
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lazyconv._commands import _segment_files as segment_files
from lazyconv._commands._common import (
    finish_progress,
    input_file,
    int_range,
    progress_bar,
    size_type,
)
from lazyconv._commands._dump_lines import Dumper, camel_case, snapshot_line
from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from lazyconv.logdir._naming import LOG_SUFFIX

if TYPE_CHECKING:
    from lazyconv.records import RecordBatch

log = logging.getLogger(__name__)

# KRaft snapshots of __cluster_metadata (Kafka's Snapshots and BootstrapDirectory): record batches
_SNAPSHOT_SUFFIX = ".checkpoint"
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
_SNAPSHOT_NAME = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$", re.IGNORECASE)

# Kafka's default --max-bytes (Integer.MAX_VALUE): its tool prints "Found N invalid bytes at the
# end of FILE" only with this value
_KAFKA_NO_LIMIT = 2**31 - 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``dump`` sub-command."""
    parser = subparsers.add_parser(
        "dump",
        help="list the batches and records of log segments and Kafka's index files",
        description=(
            "Print the batches and records of Kafka log segments (.log, or .bin: any file of "
            "concatenated record batches, magic v0/v1/v2, any codec; .checkpoint: a KRaft "
            "snapshot of __cluster_metadata) and the entries of a "
            "segment's other files: offset index (.index), time index (.timeindex), aborted "
            "transactions (.txnindex) and producer state snapshots (.snapshot). The type comes "
            "from the file name (--type overrides it); other names are refused. Default: the "
            "listing line for line as Kafka's kafka.tools.DumpLogSegments prints it: one line per "
            "batch (--deep-iteration adds a line per record, --print-data-log its key and value), "
            "and Kafka's index checks (--verify-index-only, --index-sanity-check). A trailing "
            "partial batch is skipped with a warning (an error with --strict). Corrupt input: "
            "what was valid is printed, then the command exits with status 1 and the error and "
            "its byte position on stderr. The files are PATH arguments or, as Kafka's tool "
            "takes them, --files FILE1,FILE2,..."
        ),
    )
    parser.add_argument("paths", metavar="PATH", nargs="*",
                        help="segment files to read, in order (or --files)")
    parser.add_argument(
        "--files",
        type=_file_list,
        action="extend",
        default=None,
        metavar="FILE1,FILE2,...",
        help="the files to read, in order, as a comma-separated list, as Kafka's tool takes "
        "them (instead of PATH arguments; repeated, the lists add up; a trailing comma is "
        "ignored; a name with a comma is given as a PATH)",
    )
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
        "--max-bytes",
        type=int_range(0),
        default=None,
        metavar="N",
        help="read only the first N bytes of each file of record batches (.log, .bin, "
        ".checkpoint): the batches that end within them, as Kafka's --max-bytes (a batch the "
        "limit cuts is not a trailing partial batch); index and other files are read whole "
        "(default: no limit; as in Kafka's tool, 'Found N invalid bytes' is printed only "
        "without a limit or with Kafka's default, 2147483647)",
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


def _file_list(text: str) -> list[str]:
    """``--files A,B,C``: the names between the commas; trailing commas are dropped, as Java's
    ``String.split`` drops them in Kafka's tool; an empty name before another is refused
    (Kafka's tool fails on it with a StringIndexOutOfBoundsException)."""
    names = text.split(",")
    while names and not names[-1]:
        names.pop()
    if not names or "" in names:
        raise argparse.ArgumentTypeError(f"an empty file name in {text!r} (expected FILE1,FILE2,...)")
    return names


def _paths(args: argparse.Namespace) -> list[str]:
    """The files to read, from the PATH arguments or ``--files`` (checked to be readable)."""
    from lazyconv._commands._common import OptionError, UsageError

    if args.files is None:
        if not args.paths:
            raise UsageError("the following arguments are required: PATH or --files",
                             option="PATH")
        for path in args.paths:
            input_file(path)
        return list(args.paths)
    if args.paths:
        raise OptionError("--files", "give the files either as PATH arguments or with --files, "
                                     "not both")
    for path in args.files:
        try:
            input_file(path)
        except UsageError as exc:
            raise OptionError("--files", exc.message) from None
    return list(args.files)


def run(args: argparse.Namespace) -> int:
    """Dump every PATH in order; returns the exit status (errors propagate as LazyconvError)."""
    from lazyconv._commands._common import UsageError

    args.paths = _paths(args)
    kinds = []
    for path in args.paths:
        kind = args.type or _guess_type(path)
        if kind is None:
            raise UsageError(
                f"cannot tell what {path} holds from its name: expected a .log, .bin or "
                ".checkpoint (record batches), .index, .timeindex, .txnindex or .snapshot file "
                "(--type sets the type)"
            )
        kinds.append(kind)
    if args.json and (args.verify_index_only or args.index_sanity_check):
        # the checks print their findings as text and set the exit status; JSON lines would
        # list the entries and exit 0, whatever the index holds
        raise UsageError("--json cannot be combined with --verify-index-only or "
                         "--index-sanity-check")
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


def _absolute_path(path: str) -> str:
    """A file as Kafka's tool names it in its reports, ``java.io.File.getAbsolutePath()``: the
    path as given joined to the working directory, repeated and trailing slashes dropped;
    symbolic links, ``.`` and ``..`` are kept (``Path.resolve()`` would follow the links)."""
    return _file_text(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))


def _file_text(path: str) -> str:
    """A file as Kafka's tool prints it in its listing (``Dumping FILE``), ``java.io.File``'s
    text: the path as given with repeated and trailing slashes dropped."""
    return re.sub("/+", "/", path).rstrip("/") or path[:1]


def _guess_type(path: str) -> str | None:
    if Path(path).suffix.lower() in (".bin", _SNAPSHOT_SUFFIX):
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
        out.write(f"Dumping {_file_text(path)}\n")
    for entry in entries:
        if json_lines:
            out.write(json.dumps(entry) + "\n")
        elif kind == "snapshot":
            out.write(snapshot_line(entry) + "\n")
        else:
            out.write(" ".join(f"{camel_case(k)}: {v}" for k, v in entry.items()) + "\n")


# -- index files and their checks (Kafka's dumpIndex / dumpTimeIndex) -------------------------


def _dump_index(path: str, kind: str, args: argparse.Namespace, report: _Report) -> None:
    from lazyconv.errors import CorruptRecordError

    out = sys.stdout
    out.write(f"Dumping {_file_text(path)}\n")
    data = Path(path).read_bytes()
    base = segment_files.base_offset(path) or 0
    entry_size = OFFSET_ENTRY_SIZE if kind == "index" else TIME_ENTRY_SIZE
    if kind == "index" and len(data) < entry_size:
        out.write(f"{_file_text(path)} is empty.\n")
        return
    if args.index_sanity_check:
        _sanity_check(path, kind, data, base)
        out.write(f"{_file_text(path)} passed sanity check.\n")
        return
    # the whole entries first: a partial last one fails the command after them (below)
    whole = data[:len(data) - len(data) % entry_size]
    entries = list(segment_files.offset_index(whole, base) if kind == "index"
                   else segment_files.time_index(whole, base))
    log_path = Path(path).with_suffix(LOG_SUFFIX)
    name = _absolute_path(path)
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
        segment_files.whole_entries(data, entry_size, "offset index")
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
    segment_files.whole_entries(data, entry_size, "time index")


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
    """Kafka's OffsetIndex / TimeIndex sanityCheck, in its order: the last slot of the file
    (every whole entry counts, the zeros a broker pre-allocates too, as Kafka opens an existing
    index) not below the base offset, and for a time index its timestamp not before the first
    one; then a size that is a whole number of entries. A time index left pre-allocated (a
    broker killed while the segment was active) fails: its last slot's timestamp is 0."""
    from lazyconv.errors import CorruptRecordError
    from lazyconv.logdir._index import parse_offset_index, parse_time_index

    entry_size = OFFSET_ENTRY_SIZE if kind == "index" else TIME_ENTRY_SIZE
    name = _absolute_path(path)
    count = len(data) // entry_size
    if count:
        last_at = (count - 1) * entry_size
        last_slot = data[last_at:last_at + entry_size]
        if kind == "index":
            last_offset = parse_offset_index(last_slot, base)[0].offset
            if last_offset < base:
                raise CorruptRecordError(
                    f"Corrupt index found, index file {name} has non-zero size but the last "
                    f"offset is {last_offset} which is less than the base offset {base}", last_at)
        else:
            last, first = parse_time_index(last_slot, base)[0], parse_time_index(data[:entry_size], base)[0]
            if last.timestamp < first.timestamp:
                raise CorruptRecordError(
                    f"Corrupt time index found, time index file ({name}) has non-zero size but "
                    f"the last timestamp is {last.timestamp} which is less than the first "
                    f"timestamp {first.timestamp}", last_at)
            if last.offset < base:
                raise CorruptRecordError(
                    f"Corrupt time index found, time index file ({name}) has non-zero size but "
                    f"the last offset is {last.offset} which is less than the first offset "
                    f"{base}", last_at)
    if len(data) % entry_size:
        raise CorruptRecordError(
            f"{'Index' if kind == 'index' else 'Time index'} file {name} is corrupt, found "
            f"{len(data)} bytes which is neither positive nor a multiple of {entry_size}",
            count * entry_size)


def _dump_records(path: str, args: argparse.Namespace, report: _Report) -> None:
    """Dump the batches and records of one segment."""
    from lazyconv.errors import ConfigurationError, TruncatedDataError
    from lazyconv.records import DEFAULT_MAX_DECOMPRESSED_SIZE, FileRecords

    max_size = args.max_decompressed_size or DEFAULT_MAX_DECOMPRESSED_SIZE
    limit = args.max_bytes
    try:
        # --max-bytes: Kafka's FileRecords.slice(0, N), the batches ending within N bytes
        records = FileRecords(path, 0, limit, max_decompressed_size=max_size)
    except OSError as exc:
        raise ConfigurationError(f"cannot open {path}: {exc.strerror or exc}") from None
    out = sys.stdout
    with records, _progress(records.size_in_bytes, args.quiet) as progress:
        # a batch cut by the limit is the end of what was asked for, not a torn tail
        cut = limit is not None and limit < os.fstat(records.fileno).st_size
        dumper = Dumper(out, json_lines=args.json, validate=not args.no_validate, args=args)
        if not args.json:
            out.write(f"Dumping {_file_text(path)}\n")
            base = segment_files.base_offset(path)
            if Path(path).suffix == LOG_SUFFIX and base is not None:
                out.write(f"Log starting offset: {base}\n")
            elif Path(path).suffix.lower() == _SNAPSHOT_SUFFIX:
                _snapshot_heading(path, out)
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
        if trailing > 0 and not cut:
            if args.strict:
                raise TruncatedDataError(
                    f"{trailing} trailing bytes do not form a complete batch (--strict)", end
                )
            if not args.json and limit in (None, _KAFKA_NO_LIMIT):
                out.write(f"Found {trailing} invalid bytes at the end of {Path(path).name}\n")
            log.warning(
                "%s: %d trailing bytes at byte %d do not form a complete batch (skipped)",
                path,
                trailing,
                end,
            )
        finish_progress(progress)
        if dumper.non_consecutive:
            report.non_consecutive[_absolute_path(path)] = dumper.non_consecutive
        dumper.finish()


def _snapshot_heading(path: str, out: TextIO) -> None:
    """The line Kafka's tool prints before the batches of a KRaft snapshot: ``KRaft bootstrap
    snapshot`` for ``bootstrap.checkpoint``, else the end offset and epoch its name holds
    (``00000000000000000042-0000000003.checkpoint``); none for another name (Kafka's tool
    stops there with an exception)."""
    name = Path(path).name
    if name == _BOOTSTRAP_SNAPSHOT:
        out.write("KRaft bootstrap snapshot\n")
        return
    match = _SNAPSHOT_NAME.match(name)
    if match is None:
        log.info("%s: the name is not END_OFFSET-EPOCH%s (20 and 10 digits)", path,
                 _SNAPSHOT_SUFFIX)
        return
    out.write(f"Snapshot end offset: {int(match['offset'])}, epoch: {int(match['epoch'])}\n")


def _batches(records: Any, progress: Any) -> Iterator[RecordBatch]:
    for batch in records.batches():
        yield batch
        progress.update(batch.size_in_bytes)


def _progress(total: int, quiet: bool) -> Any:
    return progress_bar(total, "dump", quiet=quiet, unit="B", unit_scale=True)
