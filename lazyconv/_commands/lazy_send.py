"""``lazyconv lazy-send IN OUT --to-magic M [--first-offset F] [--chunk-size N]``.

Drives a KIP-283 lazy down-conversion send over the whole of IN into OUT, exactly as a broker
would write it to a consumer's socket: the committed size, chunk by chunk, cut or padded.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lazyconv._commands._common import (
    atomic_output,
    check_complete,
    finish_progress,
    input_file,
    int_choice,
    not_the_input,
    output_file,
    progress_bar,
    size_type,
)

_DEFAULT_CHUNK_SIZE = 128 * 1024
_MIN_CHUNK_SIZE = 16 * 1024
_MAX_CHUNK_SIZE = 1024 * 1024


def register(subparsers: Any) -> None:
    """Add the ``lazy-send`` sub-command."""
    parser = subparsers.add_parser(
        "lazy-send",
        help="write the KIP-283 lazy down-conversion send of a log file",
        description=(
            "Treat the whole of IN as the records of one fetched partition, build a lazy "
            "down-conversion of it (committed size = max(input size, first converted batch)) "
            "and drive its send into OUT: converted chunks, cut at the committed size or "
            "followed by overflow padding. Prints one JSON line: committed_size, bytes_written, "
            "chunks, padding_bytes, records_converted and more."
        ),
    )
    parser.add_argument("input", metavar="IN", help="file holding the input record batches")
    parser.add_argument("output", metavar="OUT", help="file to write the sent bytes to")
    parser.add_argument(
        "--to-magic",
        type=int_choice(0, 1, 2),
        required=True,
        metavar="{0,1,2}",
        help="message format the consumer reads: 0 or 1 (2 converts nothing)",
    )
    parser.add_argument(
        "--first-offset",
        type=int,
        default=0,
        help="the consumer's fetch offset (filters converted uncompressed batches; default 0)",
    )
    parser.add_argument(
        "--chunk-size",
        type=size_type(_MIN_CHUNK_SIZE, _MAX_CHUNK_SIZE),
        default=_DEFAULT_CHUNK_SIZE,
        metavar="SIZE",
        help=(
            "input bytes converted at a time, whole batches, at least one batch: bytes or "
            "16K..1M (default 128K)"
        ),
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when IN ends in a partial batch instead of warning",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar on stderr"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Drive the lazy send of IN into OUT and print its stats as one JSON line."""
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.errors import UnsupportedCompressionError
    from lazyconv.records import FileRecords

    source = input_file(args.input)
    target = output_file(args.output)
    not_the_input(target, source)
    with FileRecords.open(args.input) as records, atomic_output(target) as out:
        check_complete(records, strict=args.strict, what=args.input)
        lazy = LazyDownConvertedRecords(
            records, args.to_magic, args.first_offset, chunk_size=args.chunk_size
        )
        send = lazy.to_send()
        with progress_bar(
            send.size, "lazy-send", quiet=args.quiet, unit="B", unit_scale=True
        ) as bar:
            while not send.completed:
                bar.update(send.write_to(out))
            finish_progress(bar)
        stats = send.stats
        line: dict[str, Any] = {
            "input_bytes": records.size_in_bytes,
            "committed_size": lazy.size_in_bytes,
            "bytes_written": send.written,
            "chunks": send.chunks,
            "converted_bytes": send.converted_bytes_written,
            "padding_bytes": send.padding_bytes,
            "truncated": send.truncated,
            "records_converted": stats.records_converted,
            "temporary_memory_bytes": stats.temporary_memory_bytes,
            "conversion_time_ns": stats.conversion_time_ns,
            "stopped_at_zstd": isinstance(send.error, UnsupportedCompressionError),
        }
    sys.stdout.write(json.dumps(line) + "\n")
    # Corrupt data ended the conversion (logged as an error): OUT holds the padded send, but
    # records could not be read, which is exit status 1, as `convert` answers for them.
    return 0 if send.error is None or isinstance(send.error, UnsupportedCompressionError) else 1
