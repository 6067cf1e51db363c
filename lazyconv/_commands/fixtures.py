"""``lazyconv fixtures generate``: write a broker-shaped Kafka log directory with a manifest."""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path

from lazyconv._commands._common import (
    finish_progress,
    int_range,
    progress_bar,
    sigterm_as_interrupt,
    size_type,
)
from lazyconv.errors import ConfigurationError
from lazyconv.fixtures._generate import DEFAULT_SEGMENT_BYTES
from lazyconv.fixtures._profiles import PROFILE_SETS
from lazyconv.logdir._index import DEFAULT_INDEX_INTERVAL_BYTES

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``fixtures`` sub-command."""
    parser = subparsers.add_parser(
        "fixtures",
        help="generate Kafka log fixtures",
        description="Generate Kafka log directories for tests and the Spark validation job.",
    )
    actions = parser.add_subparsers(dest="fixtures_action", metavar="ACTION", required=True)
    gen = actions.add_parser(
        "generate",
        help="write a log directory (topic-N/ folders of segments) and manifest.json",
        description=(
            "Write Kafka log directories as a broker lays them out: <topic>-<N>/ folders with "
            "segments (%020d.log named by base offset, .index, .timeindex), plus manifest.json "
            "with the expected counts and a checksum per partition. Deterministic for a seed."
        ),
    )
    gen.add_argument("outdir", metavar="OUTDIR", help="output folder (created; must be empty)")
    gen.add_argument("--size", required=True, type=size_type(1),
                     help="approximate total log bytes, e.g. 8M, 512M, 1G (binary units); every "
                          "partition gets at least its profile's few batches, so a very small "
                          "size comes out larger (the summary says by how much)")
    gen.add_argument("--partitions", type=int_range(1), default=1,
                     help="partitions per topic (default 1; the 'large' topic has one)")
    gen.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    gen.add_argument("--profile", default="mixed", choices=sorted(PROFILE_SETS),
                     help="which topics to write: 'mixed' (default) writes one topic per "
                          "profile; any other name writes only that topic")
    gen.add_argument("--segment-bytes", default=DEFAULT_SEGMENT_BYTES, type=size_type(1024),
                     help="roll a segment when the next batch would pass this size "
                          "(default 8M)")
    gen.add_argument("--index-interval-bytes", type=size_type(1), default=DEFAULT_INDEX_INTERVAL_BYTES,
                     help="log bytes between offset/time index entries (default 4096, as "
                          "Kafka's index.interval.bytes)")
    gen.add_argument("--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Generate the fixture and print one summary line per partition.

    The fixture is written into a hidden sibling folder and renamed to OUTDIR only once it is
    complete, so an interrupted run (Ctrl-C, a full disk) leaves no half fixture behind to block
    the next one."""
    from lazyconv.fixtures import generate

    size = args.size
    outdir = Path(args.outdir)
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise ConfigurationError(f"output directory {outdir} is not empty")
    outdir.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(outdir.parent).free
    if size > free:  # the fixture's records alone; its indexes add a little more
        raise ConfigurationError(f"{_mib(size)} asked for, but only {_mib(free)} is free under "
                                 f"{outdir.parent}")
    partial = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.partial-", dir=outdir.parent))
    try:
        with sigterm_as_interrupt(), progress_bar(size, "fixtures", quiet=args.quiet, unit="B",
                                                  unit_scale=True, unit_divisor=1024) as bar:
            manifest = generate(partial, size, partitions=args.partitions, seed=args.seed,
                                profile=args.profile, segment_bytes=args.segment_bytes,
                                index_interval_bytes=args.index_interval_bytes,
                                progress=bar.update)
            finish_progress(bar)  # the size is a target: the last segment ends near it
        if outdir.exists():
            outdir.rmdir()  # empty, checked above
        partial.rename(outdir)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    total = 0
    for name, part in manifest["partitions"].items():
        total += part["bytes"]
        print(f"{name:<20} {part['segments']:>5} segments {part['batches']:>8} batches "
              f"{part['records']:>9} records {part['bytes']:>12} bytes  checksum {part['checksum']}")
    print(f"total {total} bytes in {len(manifest['partitions'])} partitions under {args.outdir}")
    if total > size * 1.1:
        log.warning("%s asked for, %s written: every partition gets at least its profile's "
                    "minimum number of batches", _mib(size), _mib(total))
    return 0


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"
