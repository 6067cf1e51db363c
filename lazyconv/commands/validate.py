"""``lazyconv validate``: the Spark job that checks a log directory and the lazy send over it."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile

DEFAULT_FIXTURE_SIZE = "8M"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    parser = subparsers.add_parser(
        "validate",
        help="validate a Kafka log directory and the lazy down-conversion with Spark",
        description=(
            "Check every batch (CRC, structure, offsets within and across segments) and the "
            "index files of a Kafka log directory, then run the lazy down-converting send over "
            "every segment for each target magic and chunk size and check the records that "
            "survive. Runs as a Spark job (segments distributed over tasks). Exits 1 when any "
            "violation is found. Without LOGDIR, a small fixture is generated into a temporary "
            "folder and validated."
        ),
    )
    parser.add_argument("logdir", metavar="LOGDIR", nargs="?",
                        help="log directory (<topic>-<N>/ folders), local path or fsspec URL "
                             "readable from the executors; omitted: generate a "
                             f"{DEFAULT_FIXTURE_SIZE} fixture and validate it")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master URL (default local[*]; e.g. spark://host:7077)")
    parser.add_argument("--chunk-sizes", default="16K,32K,64K,128K,256K,512K,1M",
                        help="comma-separated lazy-send chunk sizes, 16K..1M "
                             "(default 16K,32K,64K,128K,256K,512K,1M)")
    parser.add_argument("--to-magic", default="0,1",
                        help="comma-separated target magics to down-convert to (default 0,1); "
                             "'none' checks the log only")
    parser.add_argument("--out", default="out/validate",
                        help="folder for the Parquet results: segments/, partitions/, "
                             "conversions/, violations/ (default out/validate)")
    parser.add_argument("--fetch-max-bytes", default="1M",
                        help="bytes per emulated consumer fetch, Kafka's "
                             "max.partition.fetch.bytes (default 1M; a larger first batch is "
                             "fetched whole)")
    parser.add_argument("--driver-memory", default="1g", help="Spark driver memory (default 1g)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the generated fixture when LOGDIR is omitted (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def _csv(text: str, parse) -> tuple:
    return tuple(parse(part) for part in text.split(",") if part.strip())


def run(args: argparse.Namespace) -> int:
    """Run the job, print the summary tables, return 1 when violations were found."""
    from lazyconv.commands._common import input_dir

    if args.logdir is not None and "://" not in args.logdir:
        input_dir(args.logdir)  # before Spark starts
    from lazyconv.errors import ConfigurationError
    from lazyconv.fixtures.generate import generate, parse_size
    from lazyconv.spark.job import run_validation
    from lazyconv.spark.progress import SparkProgress
    from lazyconv.spark.report import format_report
    from lazyconv.spark.session import build_session

    chunk_sizes = _csv(args.chunk_sizes, parse_size)
    for size in chunk_sizes:
        if not 16 * 1024 <= size <= 1024 * 1024:
            raise ConfigurationError(f"chunk size {size} is outside 16K..1M")
    to_magics = () if args.to_magic.strip().lower() == "none" else _csv(args.to_magic, int)
    for magic in to_magics:
        if magic not in (0, 1, 2):
            raise ConfigurationError(f"target magic {magic} is not 0, 1 or 2")
    workdir = None
    logdir = args.logdir
    if logdir is None:
        workdir = tempfile.mkdtemp(prefix="lazyconv-fixture-")
        logdir = workdir
        print(f"generating a {DEFAULT_FIXTURE_SIZE} fixture (seed {args.seed}) in {logdir}",
              file=sys.stderr)
        generate(logdir, parse_size(DEFAULT_FIXTURE_SIZE), partitions=2, seed=args.seed,
                 segment_bytes=512 * 1024)
    try:
        spark = build_session(args.master, driver_memory=args.driver_memory)
        try:
            with SparkProgress(spark.sparkContext,
                               disable=args.quiet or not sys.stderr.isatty()):
                result = run_validation(logdir, spark=spark, chunk_sizes=chunk_sizes,
                                        to_magics=to_magics, out=args.out,
                                        fetch_max_bytes=parse_size(args.fetch_max_bytes))
        finally:
            spark.stop()
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(format_report(result))
    return 0 if result.ok else 1
