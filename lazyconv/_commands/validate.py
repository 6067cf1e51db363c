"""``lazyconv validate``: the Spark job that checks a log directory and the lazy send over it."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import Any

DEFAULT_FIXTURE_SIZE = "8M"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``validate`` sub-command."""
    parser = subparsers.add_parser(
        "validate",
        help="validate a Kafka log directory and the lazy down-conversion with Spark",
        description=(
            "Check every batch (CRC, structure, offsets within and across segments) and the "
            "index files of a Kafka log directory, then run the lazy down-converting send over "
            "every segment for each target magic and chunk size and check the records that "
            "survive. Runs as a Spark job (segments cut into byte ranges and packed into tasks by "
            "size). Exit status: 0 clean (warnings allowed), 1 violations found, 2 bad usage, "
            "no segments, or a failed job. Without LOGDIR, a small fixture is generated into a temporary "
            "folder and validated."
        ),
    )
    parser.add_argument("logdir", metavar="LOGDIR", nargs="?",
                        help="log directory (<topic>-<N>/ folders), local path or fsspec URL "
                             "readable from the executors; omitted: generate a "
                             f"{DEFAULT_FIXTURE_SIZE} fixture and validate it (a local "
                             "--master only)")
    parser.add_argument("--master", default="local[*]", type=_master_url,
                        help="Spark master URL (default local[*]; e.g. spark://host:7077)")
    parser.add_argument("--chunk-sizes", default="16K,32K,64K,128K,256K,512K,1M",
                        help="comma-separated lazy-send chunk sizes, 16K..1M "
                             "(default 16K,32K,64K,128K,256K,512K,1M)")
    parser.add_argument("--to-magic", default="0,1",
                        help="comma-separated target magics to down-convert to (default 0,1); "
                             "'none' checks the log only")
    parser.add_argument("--out", default="out/validate",
                        help="folder for the Parquet results: segments/, partitions/, "
                             "conversions/, violations/ (default out/validate); with a "
                             "cluster's --master, a URL every host can write")
    parser.add_argument("--fetch-max-bytes", default="1M",
                        help="bytes per emulated consumer fetch, Kafka's "
                             "max.partition.fetch.bytes (default 1M; a larger first batch is "
                             "fetched whole)")
    parser.add_argument("--driver-memory", default="1g", help="Spark driver memory (default 1g)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the generated fixture when LOGDIR is omitted (default 0)")
    parser.add_argument("--executor-python", default=None, metavar="PATH",
                        help="Python the executors run (spark.pyspark.python), e.g. "
                             "./environment/bin/python with --archives env.tar.gz#environment "
                             "in spark-submit / PYSPARK_SUBMIT_ARGS; default: the executors' "
                             "own python3 (a local master uses this interpreter)")
    parser.add_argument("--topic-config", action="append", metavar="TOPIC:KEY=VALUE",
                        type=_topic_config,
                        help="a topic's configuration the log must obey (repeatable): "
                             "max.message.bytes=N (no larger entry), message.timestamp.type="
                             "CreateTime|LogAppendTime (every v1/v2 entry's type), "
                             "cleanup.policy=delete (no offset gaps) | compact (every record "
                             "has a key)")
    parser.add_argument("--allow-pure-python", action="store_true",
                        help="let executors that cannot load the compiled kernel shipped from "
                             "the driver scan in pure Python (about 5x the CPU); without it "
                             "such an executor stops the run before the scan")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


EXIT_CLEAN = 0
EXIT_VIOLATIONS = 1
EXIT_FAILURE = 2

log = logging.getLogger(__name__)


def _csv(text: str, parse: Callable[[str], int], what: str) -> tuple[int, ...]:
    from lazyconv._commands._common import OptionError
    from lazyconv.errors import ConfigurationError

    values = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            values.append(parse(part.strip()))
        except (ValueError, argparse.ArgumentTypeError, ConfigurationError):
            raise OptionError(what, f"{part.strip()!r} is not valid in {text!r}") from None
    if not values:
        raise OptionError(what, f"{text!r} names no value")
    return tuple(values)


def parse_options(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(chunk sizes, target magics, fetch max bytes)`` from the command line; raises
    :class:`~lazyconv.errors.ConfigurationError` with a one-line message."""
    from lazyconv._commands._common import (  # the one size syntax of every command
        OptionError,
        parse_size,
    )

    chunk_sizes = _csv(args.chunk_sizes, parse_size, "--chunk-sizes")
    for size in chunk_sizes:
        if not 16 * 1024 <= size <= 1024 * 1024:
            raise OptionError("--chunk-sizes", f"{size} bytes is outside 16K..1M")
    if args.to_magic.strip().lower() == "none":
        to_magics: tuple[int, ...] = ()
    else:
        to_magics = _csv(args.to_magic, int, "--to-magic")
        for magic in to_magics:
            if magic not in (0, 1, 2):
                raise OptionError("--to-magic", f"{magic} is not 0, 1 or 2")
    try:
        fetch_max_bytes = parse_size(args.fetch_max_bytes)
    except argparse.ArgumentTypeError:
        raise OptionError("--fetch-max-bytes", f"{args.fetch_max_bytes!r} is not a size") from None
    if fetch_max_bytes < 1:
        raise OptionError("--fetch-max-bytes", "must be at least 1 byte")
    return chunk_sizes, to_magics, fetch_max_bytes


def _fail(error: Exception | str) -> int:
    """Say ``error`` on stderr, as :mod:`lazyconv._cli` does; returns the exit status."""
    from lazyconv.errors import ConfigurationError

    message = str(error)
    if isinstance(error, ConfigurationError) and error.option is not None:  # an option's value
        message += " (see 'lazyconv validate --help')"
    print(f"lazyconv validate: error: {message}", file=sys.stderr)
    return EXIT_FAILURE


EXIT_SIGINT = 128 + signal.SIGINT  # 130, as a shell reports a command stopped by Ctrl-C
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143


class _Stopped(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM: the run stops Spark and exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def _catch_signals() -> None:
    """SIGINT and SIGTERM raise :class:`_Stopped` (again after Spark started: PySpark's
    context installs a SIGINT handler of its own)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_stopped)


def _stop_spark_quietly(spark: Any) -> None:
    """Cancel the running job and stop Spark without the JVM's or Py4J's complaints (the
    interrupted call left its Py4J connection half read)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    for step in ("setLogLevel", "cancelAllJobs", "stop"):
        try:
            if step == "setLogLevel":
                spark.sparkContext.setLogLevel("OFF")
            elif step == "cancelAllJobs":
                spark.sparkContext.cancelAllJobs()
            else:
                spark.stop()
        except Exception:  # noqa: BLE001 - stopping after a signal: nothing else to do
            log.debug("while stopping Spark after a signal: %s failed", step, exc_info=True)


def prepare_out(out: str) -> tuple[str, list[str]]:
    """``--out`` checked before Spark starts: a local path is made absolute and created (with
    its missing parents, nothing outside it), and must be a writable folder; returns the path
    and the folders created (removed again if the run writes nothing). A URL is left to the
    writer. Raises :class:`~lazyconv._commands._common.OptionError` (a
    :class:`~lazyconv.errors.ConfigurationError`) with one line."""
    from lazyconv._commands._common import OptionError

    if "://" in out:
        return out, []
    path = os.path.abspath(out)
    missing: list[str] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        what = "is not a folder" if probe == path else f"is inside {probe}, which is not a folder"
        raise OptionError("--out", f"{out} {what}")
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        for folder in missing:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise OptionError("--out", f"{out} cannot be written: {exc.strerror or exc}") from None
    return path, missing


def check_paths_for_master(master: str, logdir: str | None, out: str) -> None:
    """Raise :class:`~lazyconv.errors.ConfigurationError` (one line, before Spark starts) when
    ``master`` is a cluster's (not ``local...``) and LOGDIR is omitted or ``--out`` is a path on
    this machine (an :class:`~lazyconv._commands._common.OptionError` of ``--out`` then).

    Without LOGDIR the fixture would be generated in this machine's temporary folder, which
    the executors of other hosts cannot read (the scan would find every segment missing).
    The violations table is written by the executors, from their cached results: it holds
    every violation found (as many as the log has batches, for a badly damaged log), so it is
    not collected to the driver, whose memory is bounded by the partitions and ranges only. On
    a cluster of several hosts each executor would write its part of a plain path on its own
    host, away from the tables the driver writes; a URL names a place every host can write."""
    from lazyconv._commands._common import OptionError
    from lazyconv.errors import ConfigurationError

    if master.startswith("local"):
        return
    if logdir is None:
        raise ConfigurationError(
            "without LOGDIR a fixture is generated in this machine's temporary folder, which the "
            f"executors of {master} cannot read: generate one where they can (lazyconv fixtures "
            "generate DIR) and give it as LOGDIR")
    if "://" in out:
        return
    raise OptionError(
        "--out", f"{out} is a path on this machine, which the executors of {master} would write "
        "on their own hosts: give a URL every host can write (hdfs://..., s3a://..., or "
        "file:///... of a folder mounted on every host)")


def _remove_if_empty(folders: list[str]) -> None:
    for folder in folders:  # deepest first
        with contextlib.suppress(OSError):
            os.rmdir(folder)


_MASTER_SCHEMES = ("local", "spark://", "yarn", "k8s://", "mesos://")


def _master_url(text: str) -> str:
    """A Spark master URL Spark accepts the form of: checked before the JVM starts, which
    would print its stack trace for a bad one."""
    if not text.startswith(_MASTER_SCHEMES):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT, "
            "yarn, k8s://..., mesos://...)")
    return text


def _topic_config(text: str) -> str:
    """``--topic-config TOPIC:KEY=VALUE``, checked as it is parsed (what the library refuses,
    said as argparse says a bad value)."""
    from lazyconv.errors import ConfigurationError
    from lazyconv.spark._topic_config import parse_topic_configs

    try:
        parse_topic_configs([text])
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


_topic_config.__name__ = "TOPIC:KEY=VALUE"  # argparse names the type in its messages


def run(args: argparse.Namespace) -> int:
    """Run the job and print the summary: exit status 0 clean, 1 violations, 2 bad usage or a
    failed job (one line on stderr), 130/143 when stopped by SIGINT/SIGTERM (one line)."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    holder: dict[str, Any] = {}
    created: list[str] = []
    status = EXIT_FAILURE
    try:
        _catch_signals()
        status = _run(args, holder, created)
        return status
    except (_Stopped, KeyboardInterrupt) as stop:
        # KeyboardInterrupt: PySpark's own SIGINT handler, in force while the context starts
        signum = stop.signum if isinstance(stop, _Stopped) else signal.SIGINT
        for caught in previous:  # a second Ctrl-C does not interrupt the stopping
            signal.signal(caught, signal.SIG_IGN)
        name = signal.Signals(signum).name
        if "spark" in holder:
            _stop_spark_quietly(holder["spark"])
        print(f"lazyconv validate: stopped by {name}", file=sys.stderr)
        status = EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM
        return status
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, left alone
                signal.signal(signum, handler)
        if status not in (EXIT_CLEAN, EXIT_VIOLATIONS):
            _remove_if_empty(created)


def _run(args: argparse.Namespace, holder: dict[str, Any], created: list[str]) -> int:
    from lazyconv._commands._common import OptionError, require_extra
    from lazyconv.errors import LazyconvError
    from lazyconv.fixtures import generate, parse_size
    from lazyconv.logdir._manifest import load_manifest
    from lazyconv.spark._job import run_validation
    from lazyconv.spark._listing import list_log_directory
    from lazyconv.spark._progress import SparkProgress
    from lazyconv.spark._report import format_report
    from lazyconv.spark._session import build_session, check_master_reachable
    from lazyconv.spark._topic_config import parse_topic_configs

    try:
        chunk_sizes, to_magics, fetch_max_bytes = parse_options(args)
        topic_configs = parse_topic_configs(args.topic_config)
        check_paths_for_master(args.master, args.logdir, args.out)
    except LazyconvError as exc:
        return _fail(exc)
    workdir = None
    logdir = args.logdir
    try:
        if logdir is None:
            workdir = tempfile.mkdtemp(prefix="lazyconv-fixture-")
            logdir = workdir
            print(f"generating a {DEFAULT_FIXTURE_SIZE} fixture (seed {args.seed}) in {logdir}",
                  file=sys.stderr)
            generate(logdir, parse_size(DEFAULT_FIXTURE_SIZE), partitions=2, seed=args.seed,
                     segment_bytes=512 * 1024)
        try:
            listing = list_log_directory(logdir)  # before Spark starts; absolute paths
            manifest = load_manifest(listing.logdir)  # a bad one is refused before Spark too
        except LazyconvError as exc:
            return _fail(exc)
        unknown = sorted(set(topic_configs) - {s.topic for s in listing.segments})
        if unknown:
            return _fail(OptionError("--topic-config",
                                     f"topic {unknown[0]} has no segments in {logdir}"))
        require_extra("pyspark", "the Spark validation job")  # names the extra to install
        try:
            check_master_reachable(args.master)
            out, made = prepare_out(args.out)
        except LazyconvError as exc:
            return _fail(exc)
        created += made
        conf = {}
        if args.executor_python:
            conf["spark.pyspark.python"] = args.executor_python
        try:
            spark = holder["spark"] = build_session(args.master, driver_memory=args.driver_memory,
                                                    extra_conf=conf)
        except Exception as exc:  # noqa: BLE001 - Spark/JVM start-up failures, one line
            return _fail(f"Spark did not start on {args.master}: {_one_line(exc)}")
        _catch_signals()
        try:
            _check_out_url(spark, out)
        except LazyconvError as exc:
            return _fail(exc)
        try:
            with SparkProgress(spark.sparkContext,
                               disable=args.quiet or not sys.stderr.isatty()):
                result = run_validation(logdir, spark=spark, chunk_sizes=chunk_sizes,
                                        to_magics=to_magics, out=out, manifest=manifest,
                                        fetch_max_bytes=fetch_max_bytes, listing=listing,
                                        allow_pure_python=args.allow_pure_python,
                                        topic_configs=topic_configs)
        except LazyconvError as exc:
            return _fail(exc)
        except Exception as exc:  # noqa: BLE001 - a failed job is exit 2 with one line
            log.debug("the Spark job failed", exc_info=True)
            from lazyconv.spark._executors import task_failure

            return _fail(f"the Spark job failed: {task_failure(exc) or _one_line(exc)}")
        spark.stop()
        del holder["spark"]
    finally:
        if "spark" in holder and sys.exc_info()[0] is None:
            holder.pop("spark").stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(format_report(result))
    return EXIT_CLEAN if result.ok else EXIT_VIOLATIONS


def _check_out_url(spark: Any, out: str) -> None:
    """Raise :class:`~lazyconv._commands._common.OptionError` (a
    :class:`~lazyconv.errors.ConfigurationError`) when Spark has no filesystem for an ``--out``
    URL (``s3://`` without EMR's, ``s3a://`` without hadoop-aws): its writer would fail only
    after the whole scan."""
    from lazyconv._commands._common import OptionError

    if "://" not in out:
        return
    sc = spark.sparkContext
    try:
        sc._jvm.org.apache.hadoop.fs.Path(out).getFileSystem(sc._jsc.hadoopConfiguration())
    except Exception as exc:  # noqa: BLE001 - Py4J's error for the JVM's, one line
        raise OptionError("--out", f"{out}: Spark cannot write there: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        # Py4JJavaError's own first line is "An error occurred while calling o129.parquet."
        with contextlib.suppress(Exception):
            exc_text = str(java.toString()).strip().splitlines()
            if exc_text and exc_text[0].strip():
                return exc_text[0].strip()[:300]
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first.strip()[:300]}"
