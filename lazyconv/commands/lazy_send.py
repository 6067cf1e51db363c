"""``lazyconv lazy-send IN OUT --to-magic M [--first-offset F] [--chunk-size N]``.

Drives a KIP-283 lazy down-conversion send over the whole of IN into OUT, exactly as a broker
would write it to a consumer's socket: the committed size, chunk by chunk, cut or padded.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

_DEFAULT_CHUNK_SIZE = 128 * 1024


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
        type=int,
        required=True,
        choices=(0, 1, 2),
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
        type=int,
        default=_DEFAULT_CHUNK_SIZE,
        help=(
            "input bytes converted at a time, whole batches, at least one batch "
            "(16384..1048576, default 131072)"
        ),
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar on stderr"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Drive the lazy send of IN into OUT and print its stats as one JSON line."""
    from tqdm import tqdm

    from lazyconv.lazy import LazyDownConvertedRecords
    from lazyconv.records import FileRecords

    with FileRecords.open(args.input) as records, open(args.output, "wb") as out:
        lazy = LazyDownConvertedRecords(
            records, args.to_magic, args.first_offset, chunk_size=args.chunk_size
        )
        send = lazy.to_send()
        disable = args.quiet or not sys.stderr.isatty()
        with tqdm(
            total=send.size, unit="B", unit_scale=True, disable=disable, desc="lazy-send"
        ) as bar:
            while not send.completed:
                bar.update(send.write_to(out))
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
            "stopped_at_zstd": send.error is not None,
        }
    sys.stdout.write(json.dumps(line) + "\n")
    return 0
