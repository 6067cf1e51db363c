"""``lazyconv convert IN OUT --to-magic M [--first-offset F]``: eager down-conversion of a file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lazyconv._commands._common import (
    atomic_output,
    check_complete,
    input_file,
    int_choice,
    not_the_input,
    output_file,
)


def register(subparsers: Any) -> None:
    """Add the ``convert`` sub-command."""
    parser = subparsers.add_parser(
        "convert",
        help="down-convert the batches of a log file (eagerly, as Kafka's RecordsUtil does)",
        description=(
            "Read the record batches of IN (a log segment or any concatenation of batches), "
            "down-convert them to the target magic with Kafka's RecordsUtil.downConvert rules "
            "and write the result to OUT. Prints one JSON line of conversion stats."
        ),
    )
    parser.add_argument("input", metavar="IN", help="file holding the input record batches")
    parser.add_argument("output", metavar="OUT", help="file to write the converted records to")
    parser.add_argument(
        "--to-magic",
        type=int_choice(0, 1, 2),
        required=True,
        metavar="{0,1,2}",
        help="target message format: 0 or 1 (2 copies every batch and keeps control batches)",
    )
    parser.add_argument(
        "--first-offset",
        type=int,
        default=0,
        help=(
            "the fetch offset: records below it are dropped from converted uncompressed batches "
            "(default 0)"
        ),
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when IN ends in a partial batch instead of warning and skipping it",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Convert IN into OUT and print the stats as one JSON line."""
    from lazyconv.conversion._down import down_convert
    from lazyconv.records import FileRecords

    source = input_file(args.input)
    target = output_file(args.output)
    not_the_input(target, source)
    with FileRecords.open(args.input) as records:
        input_size = records.size_in_bytes
        check_complete(records, strict=args.strict, what=args.input)
        result = down_convert(records.batches(), args.to_magic, args.first_offset)
    data = result.records.buffer
    with atomic_output(target) as out:
        out.write(data)
    line: dict[str, int] = {
        "input_bytes": input_size,
        "output_bytes": len(data),
        **result.stats.to_dict(),
    }
    sys.stdout.write(json.dumps(line) + "\n")
    return 0
