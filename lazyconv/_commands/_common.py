"""What every sub-command shares: argument types, path checks, extras, progress bars.

The rule of the command line: a user mistake ends the command with one line on stderr,
``lazyconv CMD: error: ...``, and exit status :data:`EXIT_USAGE` (2) for what the user typed or
the environment cannot satisfy (a missing file, a busy port, a bad value, a missing extra, a
cluster or Spark master that cannot be reached), or
:data:`EXIT_DATA` (1) for input whose *content* is wrong (corrupt records, a failed
validation). :mod:`lazyconv._cli` turns the exceptions below into that line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from lazyconv.errors import ConfigurationError, LazyconvError

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2

# Top-level modules of the optional dependencies -> the extra that installs them.
EXTRA_OF_MODULE = {
    "pyspark": "spark",
    "pyarrow": "spark",
    "pandas": "spark",
    "fsspec": "spark",
    "py4j": "spark",
    "kafka": "bench",
    "aiokafka": "bench",
    "snappy": "bench",
    "psutil": "bench",
    "matplotlib": "plot",
}

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([KMGT])(I?B)?|(B))?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


# Line ends and other control characters: a log message may quote a client's own strings (its
# software name, a topic, a group id), and a line end in one would forge a log line of its own.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with its control characters escaped as Python writes them (``\\n``, ``\\x1b``):
    one log line whatever a client sent."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class UsageError(ConfigurationError):
    """A mistake in what the user asked for: exit status 2."""


class OptionError(UsageError):
    """A bad option value found once the options are parsed (checked against another option,
    or by what it configures): said as argparse says its own, ``argument --OPTION: ...``."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"argument {option}: {message}", option=option)


class MissingExtraError(UsageError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str, purpose: str = "this command") -> None:
        super().__init__(
            f"{purpose} needs the '{extra}' extra (module {module!r} is not installed): "
            f"pip install 'lazyconv[{extra}]'"
        )
        self.module = module
        self.extra = extra


def missing_extra(exc: ModuleNotFoundError, purpose: str = "this command") -> LazyconvError | None:
    """The :class:`MissingExtraError` for an import failure of an optional dependency, else None."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    return None if extra is None else MissingExtraError(top, extra, purpose)


def require_extra(module: str, purpose: str = "this command") -> None:
    """Import ``module`` now, so a missing extra is reported before any work is done."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, purpose)
        if error is None:
            raise
        raise error from None


def parse_size(text: str) -> int:
    """A byte count: ``16384``, ``16K``, ``16KB``, ``16KiB``, ``1M``, ``1.5G`` (units are binary;
    a fraction needs a unit)."""
    match = _SIZE.fullmatch(str(text).strip())
    unit = (match.group(2) or "").upper() if match else ""
    if match is None or ("." in match.group(1) and not unit):
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (bytes, or with a unit: 16K, 128KiB, 1M, 2G)"
        )
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def send_buffer_type(*, zero_is_default: bool) -> Any:
    """An argparse ``type`` for a socket send buffer: ``-1`` (the OS default, Kafka's spelling),
    a positive size up to 2 GiB - 1 (``100K``, ``1M``), and ``0`` where ``zero_is_default``."""

    def parse(text: str) -> int:
        from lazyconv.net._server import send_buffer_problem  # not imported for --help

        if text.strip() == "-1":
            return -1
        try:
            value = parse_size(text)
        except argparse.ArgumentTypeError:
            value = -2  # not a size: refused below, with the rule in the message
        problem = send_buffer_problem(value, zero_is_default=zero_is_default)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{text!r} {problem} (or a size: 100K, 1M)")
        return value

    return parse


def size_type(minimum: int | None = None, maximum: int | None = None) -> Any:
    """An argparse ``type`` parsing a size (:func:`parse_size`) within ``minimum..maximum``."""

    def parse(text: str) -> int:
        value = parse_size(text)
        if minimum is not None and maximum is None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {format_size(minimum)}, got {text}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            low = "" if minimum is None else format_size(minimum)
            high = "" if maximum is None else format_size(maximum)
            raise argparse.ArgumentTypeError(f"{text} is outside {low}..{high}")
        return value

    parse.__name__ = "size"  # argparse names the type in its messages
    return parse


def add_conversion_cache_option(parser: argparse.ArgumentParser, default: int, *,
                                compared: str, default_text: str) -> None:
    """``--conversion-cache SIZE``, as serve and the gateway take it (``compared``: whose bytes a
    reuse compares; ``default_text``: the default as --help says it)."""
    parser.add_argument("--conversion-cache", type=parse_size, default=default, metavar="SIZE",
                        help="recent down-conversions of compressed batches kept for consumers "
                             "reading the same records (e.g. several old consumer groups of one "
                             f"topic), reused only where {compared} are still identical; 0 turns "
                             f"it off (default {default_text})")


def format_size(size: int) -> str:
    """``16384`` -> ``16K``; sizes that are not whole KiB/MiB/GiB stay in bytes."""
    for unit, factor in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def port_number(text: str) -> int:
    """An argparse ``type`` for a TCP port: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0..65535")
    return port


def int_range(low: int, high: int | None = None) -> Any:
    """An argparse ``type`` for a whole number from ``low`` to ``high`` (None: no bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if high is None and value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    parse.__name__ = "int"  # argparse names the type in its messages
    return parse


def positive_int(text: str) -> int:
    """An argparse ``type`` for a whole number above 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def size_or_unbounded(text: str) -> int:
    """A size (:func:`parse_size`), or a whole number below 0; as Kafka's
    ``queued.max.request.bytes``, 0 or less means unbounded."""
    stripped = text.strip()
    if stripped.startswith("-") and stripped[1:].isdigit():
        return int(stripped)
    return parse_size(text)


def add_connection_limit_options(parser: argparse.ArgumentParser, *,
                                 settings_keys: bool = False) -> None:
    """What a client connection may cost a server (lazyconv.net._limits.ConnectionLimits), as
    ``serve`` and the gateway take it; :func:`connection_limits` builds them. With
    ``settings_keys`` (the gateway) an option not given is None, so that its settings file's
    value stands, and the help names that setting."""

    def default(value: int, key: str) -> tuple[int | None, str]:
        return (None, f"; {key}") if settings_keys else (value, "")

    value, key = default(104857600, "socket.request.max.bytes")
    parser.add_argument("--max-request-size", type=parse_size, default=value,
                        help="larger requests close the connection (default 100M, Kafka's "
                             f"socket.request.max.bytes{key})")
    value, key = default(209715200, "queued.max.request.bytes")
    parser.add_argument("--queued-max-request-bytes", type=size_or_unbounded, default=value,
                        help="bytes of requests being read or answered, over all connections "
                             "(Kafka's queued.max.request.bytes); a connection whose request does "
                             "not fit waits, unread, and is closed after --request-read-timeout-ms. "
                             "Requests of up to 64K have a reserved eighth; a stalled request above "
                             "its fair share is closed after 1 s when others wait. "
                             "Default 200M (Kafka: -1, unbounded); 0 or -1 for unbounded, as on "
                             f"Kafka{key}")
    value, key = default(600000, "connections.max.idle.ms")
    parser.add_argument("--connections-max-idle-ms", type=positive_int, default=value,
                        help="close a connection with no request for this long (Kafka's "
                             f"connections.max.idle.ms, default 600000{key})")
    value, key = default(30000, "gateway.request.read.timeout.ms")
    parser.add_argument("--request-read-timeout-ms", type=positive_int, default=value,
                        help="close a connection whose request bytes stop arriving for this long "
                             f"(default 30000, as a client's request.timeout.ms{key})")
    value, key = default(30000, "gateway.write.timeout.ms")
    parser.add_argument("--write-timeout-ms", type=positive_int, default=value,
                        help="close a connection that reads none of its response for this long "
                             f"(default 30000{key})")


def connection_limits(args: argparse.Namespace) -> Any:
    """The ConnectionLimits of :func:`add_connection_limit_options`' options (what they refuse
    named as the options, not as ConnectionLimits' fields)."""
    from lazyconv.net._limits import MIN_MAX_REQUEST_SIZE, ConnectionLimits

    largest, queued = args.max_request_size, args.queued_max_request_bytes
    if largest < MIN_MAX_REQUEST_SIZE:
        raise OptionError("--max-request-size",
                          f"must be at least {MIN_MAX_REQUEST_SIZE} bytes, got {largest}")
    if 0 < queued < largest:
        raise OptionError("--queued-max-request-bytes",
                          f"{queued} is below --max-request-size {largest} (or -1 for unbounded)")
    return ConnectionLimits(
        max_request_size=args.max_request_size,
        queued_max_request_bytes=args.queued_max_request_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
        request_read_timeout_ms=args.request_read_timeout_ms,
        write_timeout_ms=args.write_timeout_ms,
    )


def int_choice(*choices: int) -> Any:
    """An argparse ``type`` for an integer among ``choices`` (message lists them)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value not in choices:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not one of {', '.join(str(c) for c in choices)}"
            )
        return value

    parse.__name__ = "choice"
    return parse


def input_file(path: str) -> Path:
    """Check that ``path`` is a readable regular file (before any work is done)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"cannot open {path}: No such file or directory")
    if p.is_dir():
        raise UsageError(f"cannot open {path}: Is a directory")
    if not os.access(p, os.R_OK):
        raise UsageError(f"cannot open {path}: Permission denied")
    return p


def input_dir(path: str) -> Path:
    """Check that ``path`` is an existing, readable directory."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"cannot open {path}: No such file or directory")
    if not p.is_dir():
        raise UsageError(f"{path} is not a directory")
    if not os.access(p, os.R_OK | os.X_OK):
        raise UsageError(f"cannot open {path}: Permission denied")
    return p


def output_file(path: str, *, create_parent: bool = False) -> Path:
    """Check that a file can be written at ``path`` (before any work is done).

    ``create_parent`` creates a missing parent folder (for default output folders); otherwise
    a missing folder is the user's mistake.
    """
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"cannot write {path}: Is a directory")
    parent = p.parent
    if create_parent:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create folder {parent}: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {parent} does not exist")
    if (p.exists() and not os.access(p, os.W_OK)) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {path}: Permission denied")
    return p


def not_the_input(output: Path, input_path: Path) -> None:
    """Refuse OUT when it is IN (written over, it would be emptied before it is read)."""
    try:
        same = output.exists() and os.path.samefile(output, input_path)
    except OSError:
        same = False
    if same:
        raise UsageError(f"{output} is the input file too: write the output somewhere else")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block, as Ctrl-C does, so the block's cleanup
    runs for it too (in the main thread only, where signal handlers live)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM inside :func:`sigterm_as_interrupt`: the command exits 143 (128 + SIGTERM, what a
    shell reports for a process the signal ended), not Ctrl-C's 130."""


def _interrupt(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A file to write ``path``'s content into: a hidden temporary file beside it, renamed to
    ``path`` once the block ends normally, removed otherwise (an error, Ctrl-C, SIGTERM), so an
    interrupted command leaves the old OUT (or none), never a partial one."""
    temporary = path.with_name(f".{path.name}.partial-{os.getpid()}")
    with sigterm_as_interrupt():
        try:
            with open(temporary, "wb") as out:
                yield out
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def progress_bar(total: int, desc: str, *, quiet: bool, **options: Any) -> Any:
    """A tqdm bar on stderr, hidden with ``--quiet`` or when stderr is not a terminal."""
    import sys

    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc, file=sys.stderr, disable=quiet or not sys.stderr.isatty(), **options
    )


def finish_progress(bar: Any) -> None:
    """Show a finished job at 100 % even when the total was an estimate."""
    if bar.total is not None and bar.n != bar.total:
        bar.total = bar.n
    bar.refresh()


def check_complete(records: Any, *, strict: bool, what: str) -> None:
    """Warn (or, with ``--strict``, fail) when ``records`` ends in a partial batch.

    Readers skip a trailing partial batch, as Kafka's do; the command line never drops bytes
    without saying so. ``what`` names the input in the message.
    """
    import logging

    from lazyconv.errors import TruncatedDataError

    end = 0
    for batch in records.batches():
        end = batch.position + batch.size_in_bytes
    trailing = records.size_in_bytes - end
    if trailing <= 0:
        return
    message = f"{what}: {trailing} trailing bytes do not form a complete batch"
    if strict:
        raise TruncatedDataError(f"{message} (--strict)", end)
    logging.getLogger("lazyconv._cli").warning("%s (at byte %d, skipped)", message, end)


def run_until_stopped(main: Callable[[], Awaitable[None]]) -> str:
    """Run the server coroutine ``main()`` until SIGINT or SIGTERM (what Ctrl-C, systemd and
    Docker send) cancels it, so its ``finally`` blocks shut it down cleanly; returns the name
    of the signal that stopped it ("interrupted" when it ended otherwise)."""
    import asyncio
    import contextlib
    import signal

    stopped_by: list[str] = []

    async def guarded() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(sig: signal.Signals) -> None:
            if not stopped_by:
                stopped_by.append(sig.name)
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop, sig)
        await main()

    try:
        asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    return stopped_by[0] if stopped_by else "interrupted"

