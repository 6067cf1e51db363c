"""``lazyconv bench``: run the benchmarks (the same code as the scripts in ``bench/``)."""

from __future__ import annotations

import argparse
import importlib

from lazyconv.commands._common import missing_extra, require_extra

# sub-command name -> module in lazyconv.benchmarks
BENCHMARKS = {
    "peers": "peers",
    "chunk-sizes": "chunk_sizes",
    "memory": "memory",
    "codecs": "codecs",
}
# the optional modules each benchmark needs: checked before it starts, not halfway through
NEEDS = {
    "peers": ("kafka", "aiokafka"),
    "chunk-sizes": ("matplotlib",),
    "memory": (),
    "codecs": ("kafka", "aiokafka"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark (peers, chunk-sizes, memory, codecs) and print its table",
        description=(
            "Run one benchmark and print its table. Every benchmark compares implementations "
            "or configurations in the same run. Options after the benchmark name go to it: "
            "'lazyconv bench peers --help'. Needs the 'bench' extra (the peers it compares "
            "with, and matplotlib for plots): pip install 'lazyconv[bench]'."
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
        for module_name in NEEDS[name]:
            require_extra(module_name, f"lazyconv bench {name}")
    for name in names:
        try:
            module = importlib.import_module(f"lazyconv.benchmarks.{BENCHMARKS[name]}")
            options = {"prog": f"lazyconv bench {name}"}
            if name == "chunk-sizes":  # the scripts write into the checkout; the CLI under out/
                options["default_plot"] = "out/bench/chunk_sizes.png"
            status = max(status, module.main(args.options, **options))
        except ModuleNotFoundError as exc:
            error = missing_extra(exc, f"lazyconv bench {name}")
            if error is None:
                raise
            raise error from None
    return status
