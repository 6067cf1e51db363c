"""``lazyconv simulate partitioner``: KIP-794's producer experiment as a discrete-event simulation.

Prints, per partitioner variant and rate, throughput, average / p99 / p99.9 latency and bytes per
broker (``--json``: a list of objects), and draws a PNG of bytes per broker and latency.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from lazyconv._commands._common import (
    OptionError,
    finish_progress,
    int_range,
    output_file,
    progress_bar,
    require_extra,
)

DEFAULT_RATES = (2048.0, 4096.0)
DEFAULT_VARIANTS = ("kip480-sticky", "uniform", "adaptive", "adaptive-timeout-5ms")
DEFAULT_PLOT = "out/simulate/partitioner-simulation.png"


def register(subparsers: Any) -> None:
    """Add ``simulate`` and its ``partitioner`` sub-command."""
    parser = subparsers.add_parser(
        "simulate",
        help="run simulations (partitioner: KIP-794's experiment)",
        description="Discrete-event simulations. Run 'lazyconv simulate partitioner --help'.",
    )
    sims = parser.add_subparsers(dest="simulation", metavar="SIMULATION", required=True)
    p = sims.add_parser(
        "partitioner",
        help="KIP-794's experiment: 3 brokers, one 20 ms slower, 122 880 records of 512 B",
        description=(
            "Simulate a Kafka producer (linger.ms=0, batch.size=16384, 5 in flight) sending "
            "512-byte keyless records to a 3-partition topic whose partition 1 sits on a broker "
            "that answers every produce request 20 ms later, once per partitioner variant: "
            "kip480-sticky (old DefaultPartitioner), uniform (built-in, adaptive off), adaptive "
            "(built-in defaults), adaptive-timeout-5ms (availability timeout 5 ms). Prints "
            "throughput (MB/s = MiB/s of values, as kafka-producer-perf-test), average/p99/p99.9 "
            "latency (ms) and bytes per broker (broker 0 is the slow one)."
        ),
    )
    p.add_argument(
        "--rate", type=_finite(above=0.0), action="append", metavar="R",
        help="offered load in records/s (repeatable; default: 2048 and 4096, the KIP's series)",
    )
    p.add_argument(
        "--variant", action="append", metavar="NAME",
        choices=("kip480-sticky", "uniform", "adaptive", "adaptive-timeout-5ms", "round-robin"),
        help="partitioner variant (repeatable; default: the KIP's four; 'round-robin' also exists)",
    )
    p.add_argument(
        "--switch-rule", choices=("immediate", "deferred"), default="deferred",
        help="sticky switch rule: 'deferred' = Kafka's own since KAFKA-14156 (default; Kafka "
             "4.0.1's producer), 'immediate' = KIP-794 as written and measured (use it to compare "
             "with the KIP's numbers)",
    )
    p.add_argument("--records", type=int_range(1), default=122880, help="records per run (default 122880)")
    p.add_argument("--seed", type=int, default=1, help="seed of the partition-choice RNG (default 1)")
    p.add_argument(
        "--sender-delay-ms", type=_finite(at_least=0.0), default=0.5,
        help="sender reaction delay after a wake-up, ms (default 0.5)",
    )
    p.add_argument(
        "--base-latency-ms", type=_finite(at_least=0.0), default=4.0,
        help="broker service time per produce request, ms (default 4; the slow broker adds 20)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--plot", metavar="PATH", default=DEFAULT_PLOT,
        help=f"where to write the PNG (default {DEFAULT_PLOT}, folder created; needs the 'plot' "
             "extra: pip install 'lazyconv[plot]')",
    )
    p.add_argument("--no-plot", action="store_true",
                   help="do not draw the PNG (no matplotlib needed)")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=run)


def _finite(*, above: float | None = None, at_least: float | None = None) -> Any:
    """An argparse ``type`` for a finite number above ``above`` or from ``at_least`` on."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or (above is not None and value <= above) or (
                at_least is not None and value < at_least):
            bound = f"above {above:g}" if above is not None else f"{at_least:g} or more"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def _check_plot_format(path: str) -> None:
    """Refuse a --plot suffix matplotlib cannot write (it would say so after every run)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix[1:].lower()  # none: matplotlib writes a PNG
    if suffix and suffix not in formats:
        raise OptionError("--plot", f"{path}: matplotlib cannot write .{suffix} files (use .png "
                                    f"or one of {', '.join(sorted(formats))})")


def _plot(results: list[Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({r.rate_records_per_s for r in results})
    fig, axes = plt.subplots(len(rates), 2, figsize=(12, 4 * len(rates)), squeeze=False)
    for row, rate in enumerate(rates):
        runs = [r for r in results if r.rate_records_per_s == rate]
        names = [r.partitioner for r in runs]
        brokers = sorted(runs[0].bytes_per_broker)
        ax_bytes, ax_lat = axes[row]
        width = 0.8 / len(brokers)
        for j, broker in enumerate(brokers):
            label = f"broker {broker}" + (" (slow)" if broker == runs[0].slow_broker else "")
            ax_bytes.bar(
                [i + j * width for i in range(len(runs))],
                [r.bytes_per_broker[broker] / 1e6 for r in runs], width, label=label,
            )
        ax_bytes.set_xticks([i + width * (len(brokers) - 1) / 2 for i in range(len(runs))], names)
        ax_bytes.set_ylabel("MB sent")
        ax_bytes.set_title(f"bytes per broker, {rate:g} records/s")
        ax_bytes.legend()
        width = 0.8 / 3
        for j, (label, attr) in enumerate(
            (("avg", "avg_latency_ms"), ("p99", "p99_latency_ms"), ("p99.9", "p999_latency_ms"))
        ):
            ax_lat.bar([i + j * width for i in range(len(runs))],
                       [getattr(r, attr) for r in runs], width, label=label)
        ax_lat.set_xticks([i + width for i in range(len(runs))], names)
        ax_lat.set_yscale("log")
        ax_lat.set_ylabel("latency (ms, log scale)")
        ax_lat.set_title(f"latency, {rate:g} records/s")
        ax_lat.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _table(results: list[Any]) -> str:
    brokers = sorted(results[0].bytes_per_broker)
    slow = results[0].slow_broker
    head = ["partitioner", "rate", "MB/s", "avg ms", "p99 ms", "p99.9 ms"] + [
        f"B broker {b}{'*' if b == slow else ''}" for b in brokers
    ]
    rows = [head]
    for r in results:
        rows.append(
            [r.partitioner, f"{r.rate_records_per_s:g}", f"{r.throughput_mb_s:.2f}",
             f"{r.avg_latency_ms:.1f}", f"{r.p99_latency_ms:.1f}", f"{r.p999_latency_ms:.1f}"]
            + [f"{r.bytes_per_broker[b]:,}" for b in brokers]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.append(f"(* slow broker: +20 ms per produce response; switch rule {results[0].switch_rule};"
                 f" seed {results[0].seed})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the simulations and print / plot them."""
    from lazyconv.partitioner._simulator import SimulationConfig, simulate

    rates = args.rate or list(DEFAULT_RATES)
    variants = args.variant or list(DEFAULT_VARIANTS)
    configs = [
        SimulationConfig(
            variant=v, rate_records_per_s=rate, records=args.records, seed=args.seed,
            switch_rule=args.switch_rule, sender_delay_ms=args.sender_delay_ms,
            base_service_ms=args.base_latency_ms,
        )
        for rate in rates
        for v in variants
    ]
    if not args.no_plot:  # before the simulations run, not after
        require_extra("matplotlib", "drawing the plot (or use --no-plot)")
        output_file(args.plot, create_parent=args.plot == DEFAULT_PLOT)
        _check_plot_format(args.plot)
    results = []
    with progress_bar(len(configs), "simulate", quiet=args.quiet, unit="run") as bar:
        for cfg in configs:
            bar.set_postfix_str(f"{cfg.variant} @ {cfg.rate_records_per_s:g}/s")
            results.append(simulate(cfg))
            bar.update(1)
        finish_progress(bar)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        print(_table(results))
    if not args.no_plot:
        _plot(results, Path(args.plot))
        if not args.json:
            print(f"plot: {args.plot}")
    return 0
