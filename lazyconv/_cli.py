"""The ``lazyconv`` command: one entry point, a sub-command per job.

Sub-commands live in :mod:`lazyconv._commands` (one module each) and are discovered at start-up.
Every error ends the command with one line on stderr, ``lazyconv CMD: error: ...``, and exit
status 2 for a usage mistake or what the environment cannot give (bad option values, missing
or unwritable paths, a busy port, a missing optional dependency, a Kafka cluster or Spark
master that cannot be reached or used) or 1 for bad data (records that cannot be read, a
failed validation). ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import pkgutil
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import lazyconv._commands
from lazyconv._commands._common import EXIT_DATA, EXIT_USAGE, missing_extra, one_line
from lazyconv._commands._sighup import HeldSighup, held_sighup, reloads_on
from lazyconv._version import __version__
from lazyconv.errors import ConfigurationError, LazyconvError, UpstreamError
from lazyconv.records._impl import describe

log = logging.getLogger("lazyconv")

EXIT_ERROR = EXIT_DATA  # kept for callers of 0.1


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``PROG: error: MESSAGE`` (exit 2).

    ``lazyconv CMD --help`` still shows the usage; a mistake only says what is wrong.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _VersionAction(argparse.Action):
    """``--version``: the version and which implementation (compiled kernel or pure Python) and
    CPU features are in use, printed as is (argparse's version action re-wraps lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"lazyconv {__version__}\n{describe()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every sub-command found in :mod:`lazyconv._commands`."""
    parser = CommandParser(
        prog="lazyconv",
        description=(
            "Kafka record formats, KIP-283 lazy down-conversion and FetchResponse encoding. "
            "Run 'lazyconv COMMAND --help' for the options of a command."
        ),
        epilog=(
            "Exit status: 0 success, 1 bad data (records that cannot be read, a failed "
            "validation), 2 usage mistake or environment failure (bad option, missing path, busy "
            "port, missing extra, a cluster or Spark master that cannot be reached)."
        ),
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="show the version and the implementation in use, then exit"
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (for bug reports)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(lazyconv._commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"lazyconv._commands.{info.name}")
        module.register(subparsers)
    return parser


class _CommandFormatter(logging.Formatter):
    """``lazyconv CMD: warning: message`` (with -v, also the logger's name)."""

    def __init__(self, command: str, verbose: bool) -> None:
        super().__init__()
        self.command = command
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        where = f" [{record.name}]" if self.verbose else ""
        text = one_line(f"lazyconv {self.command}: {record.levelname.lower()}{where}: "
                        f"{record.getMessage()}")
        if record.exc_info and self.verbose:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _CommandHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """The CLI's stderr handler (replaced, not duplicated, when main() runs again; so is a
    server command's own, marked the same way: lazyconv._commands._log_format)."""

    lazyconv_cli = True


def _configure_logging(command: str, verbose: int) -> None:
    handler = _CommandHandler(sys.stderr)
    handler.setFormatter(_CommandFormatter(command, verbose > 0))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "lazyconv_cli", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING - 10 * min(verbose, 2))


def _describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit status for an exception escaping a sub-command."""
    if isinstance(exc, (ConfigurationError, UpstreamError)):
        # UpstreamError: the gateway's cluster cannot be reached or used (its address, its
        # credentials, its versions), as serve's port that cannot be bound and validate's
        # Spark master that does not start: what the environment cannot give, not bad data
        return str(exc), EXIT_USAGE
    if isinstance(exc, LazyconvError):
        return str(exc), EXIT_DATA
    if isinstance(exc, ModuleNotFoundError):
        extra = missing_extra(exc)
        if extra is not None:
            return str(extra), EXIT_USAGE
        return f"internal error: {exc} (a broken installation? run with --debug)", EXIT_DATA
    if isinstance(exc, OSError):
        if exc.errno == errno.EADDRINUSE:
            return f"port busy: {exc.strerror or exc}", EXIT_USAGE
        if exc.filename is not None:
            verb = "cannot open" if exc.errno in (errno.ENOENT, errno.EISDIR) else "cannot use"
            return f"{verb} {exc.filename}: {exc.strerror}", EXIT_USAGE
        return f"{exc.strerror or exc}", EXIT_USAGE
    if isinstance(exc, (OverflowError, ValueError)):
        text = str(exc)
        if text.startswith("invalid literal for int() with base 10: "):
            text = "not an integer: " + text.rsplit(": ", 1)[1]
        return f"bad value: {text}", EXIT_USAGE
    text = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"internal error: {type(exc).__name__}: {text} (please report it, with the output of "
        "--debug)",
        EXIT_DATA,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    # first: a SIGHUP while the command starts is counted, not the end of the process (a
    # reload sent to a gateway that is starting); given back at once to any command that
    # does not reload on it
    with held_sighup() as held:
        return _main(argv, held)


def _main(argv: Sequence[str] | None, held: HeldSighup) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not reloads_on(args.handler):
        held.release()
    action = (getattr(args, "fixtures_action", None) or getattr(args, "simulation", None)
              or getattr(args, "gateway_action", None))
    command = f"{args.command} {action}" if action else args.command
    _configure_logging(command, args.verbose)
    try:
        return int(args.handler(args) or 0)
    except BrokenPipeError:  # e.g. `lazyconv dump x | head`
        return 0
    except KeyboardInterrupt as exc:
        from lazyconv._commands._common import Terminated

        return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
    except Exception as exc:
        message, status = _describe(exc)
        if isinstance(exc, ConfigurationError) and exc.option is not None:
            # an option's value refused once parsed (OptionError, the gateway's settings of
            # its options): the same line as argparse's own refusals
            message += f" (see 'lazyconv {command} --help')"
        if args.debug:
            traceback.print_exc()
        print(f"lazyconv {command}: error: {message}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
