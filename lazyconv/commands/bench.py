"""``lazyconv bench``: run the benchmarks (the same code as the scripts in ``bench/``)."""

from __future__ import annotations

import argparse
import importlib

from lazyconv.commands._common import UsageError, missing_extra, require_extra

# sub-command name -> module in lazyconv.benchmarks
BENCHMARKS = {
    "peers": "peers",
    "lazy-sink": "lazy_sink",
    "chunk-sizes": "chunk_sizes",
    "memory": "memory",
    "codecs": "codecs",
    "decode": "decode",
    "lz4-overhead": "lz4_overhead",
    "fuzz": "fuzz",
    "fuzz-kernel": "fuzz_kernel",
}
# the optional modules each benchmark needs: checked before it starts, not halfway through
NEEDS = {
    "peers": ("kafka", "aiokafka"),
    "lazy-sink": ("kafka", "aiokafka"),
    "chunk-sizes": ("matplotlib",),
    "memory": (),
    "codecs": ("kafka", "aiokafka"),
    "decode": ("kafka", "aiokafka"),
    "lz4-overhead": ("kafka",),
    "fuzz": (),
    "fuzz-kernel": (),
}
# what 'all' runs: the measurements, not the fuzzers (which run for a time budget)
ALL = ("peers", "lazy-sink", "chunk-sizes", "memory", "codecs", "decode", "lz4-overhead")
SUMMARY = """benchmarks:
  peers         down-conversion throughput against kafka-python and aiokafka
  lazy-sink     the lazy send from a log file into a discarding sink, against aiokafka eager
  chunk-sizes   consumer throughput and sender memory per lazy-send chunk size (plot)
  memory        KIP-283's experiment: memory of a 250-partition fetch, eager against lazy
  codecs        reading and writing v2 batches against kafka-python and aiokafka
  decode        iterating records against aiokafka's compiled reader
  lz4-overhead  time outside the lz4 library, pure Python against the compiled kernel
  fuzz          the robustness fuzzer over every reader of untrusted bytes (time budget)
  fuzz-kernel   differential fuzzing of the compiled kernel against the reference (time budget)
  all           every benchmark above except the two fuzzers, with their defaults
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark (peers, lazy-sink, chunk-sizes, memory, codecs, decode, ...) and print its table",
        description=(
            "Run one benchmark and print its table. Every benchmark compares implementations "
            "or configurations in the same run. Options after the benchmark name go to it: "
            "'lazyconv bench peers --help'. Needs the 'bench' extra (the peers it compares "
            "with, and matplotlib for plots): pip install 'lazyconv[bench]'."
        ),
        epilog=SUMMARY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("benchmark", choices=[*BENCHMARKS, "all"],
                        help="which benchmark (listed below); 'all' runs every measurement, not the fuzzers, with its defaults")
    parser.add_argument("options", nargs=argparse.REMAINDER,
                        help="options passed to the benchmark (e.g. --quick)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    names = list(ALL) if args.benchmark == "all" else [args.benchmark]
    status = 0
    for name in names:
        for module_name in NEEDS[name]:
            require_extra(module_name, f"lazyconv bench {name}")
    if "fuzz-kernel" in names and "--help" not in args.options and "-h" not in args.options:
        from lazyconv.records import IMPLEMENTATION

        if IMPLEMENTATION != "native":
            raise UsageError(
                "lazyconv bench fuzz-kernel needs the compiled kernel, which is not in use "
                "(not built, or LAZYCONV_NO_EXTENSIONS is set): nothing to fuzz"
            )
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
