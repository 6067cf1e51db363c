"""``lazyconv bench``: run the benchmarks (the same code as the scripts in ``bench/``)."""

from __future__ import annotations

import argparse
import importlib

# sub-command name -> module in lazyconv.benchmarks
BENCHMARKS = {
    "peers": "peers",
    "chunk-sizes": "chunk_sizes",
    "memory": "memory",
    "codecs": "codecs",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark (peers, chunk-sizes, memory, codecs) and print its table",
        description=(
            "Run one benchmark and print its table. Every benchmark compares implementations "
            "or configurations in the same run. Options after the benchmark name go to it: "
            "'lazyconv bench peers --help'."
        ),
    )
    parser.add_argument("benchmark", choices=[*BENCHMARKS, "all"],
                        help="which benchmark; 'all' runs each with its defaults")
    parser.add_argument("options", nargs=argparse.REMAINDER,
                        help="options passed to the benchmark (e.g. --quick)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    names = list(BENCHMARKS) if args.benchmark == "all" else [args.benchmark]
    status = 0
    for name in names:
        module = importlib.import_module(f"lazyconv.benchmarks.{BENCHMARKS[name]}")
        status = max(status, module.main(args.options))
    return status
