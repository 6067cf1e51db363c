"""The ``lazyconv`` command: one entry point, a sub-command per job.

Sub-commands live in :mod:`lazyconv.commands` (one module each) and are discovered at start-up.
Errors from bad input (:class:`~lazyconv.errors.LazyconvError`) end the command with exit
status 1 and a one-line message on stderr that says what is wrong and where.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

import lazyconv.commands
from lazyconv import __version__
from lazyconv.errors import LazyconvError
from lazyconv.records._native import describe

log = logging.getLogger("lazyconv")

EXIT_ERROR = 1
EXIT_USAGE = 2


class _VersionAction(argparse.Action):
    """``--version``: the version and which implementation (compiled kernel or pure Python) and
    CPU features are in use, printed as is (argparse's version action re-wraps lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"lazyconv {__version__}\n{describe()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every sub-command found in :mod:`lazyconv.commands`."""
    parser = argparse.ArgumentParser(
        prog="lazyconv",
        description=(
            "Kafka record formats, KIP-283 lazy down-conversion and FetchResponse encoding. "
            "Run 'lazyconv COMMAND --help' for the options of a command."
        ),
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="show the version and the implementation in use, then exit"
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(lazyconv.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"lazyconv.commands.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except LazyconvError as exc:
        print(f"lazyconv {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `lazyconv dump x | head`
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
