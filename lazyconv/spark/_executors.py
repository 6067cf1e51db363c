"""What every executor runs: lazyconv's version and implementation, checked before the scan.

On a cluster the executors import the lazyconv the driver ships (:mod:`lazyconv.spark._session`
unpacks the package directory, compiled kernel included, next to each executor). Whether that
worked is a fact about each executor's Python (its version and platform must fit the kernel
built for the driver), so the job asks every executor: :func:`probe_executors` runs one small
task per core and each task answers with :func:`describe_runtime`; :func:`check_runtimes`
refuses a run in which an executor would scan in pure Python (about five times the CPU) or with
another lazyconv version, unless pure Python was allowed. The scan tasks check their own
executor again (:func:`require_kernel`), for executors that join after the probe.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from typing import Any

from lazyconv.errors import LazyconvError

__all__ = [
    "ExecutorRuntimeError",
    "PURE_PYTHON_MARKER",
    "check_runtimes",
    "describe_runtime",
    "executor_identity",
    "probe_executors",
    "require_kernel",
    "task_failure",
    "wait_for_executors",
]

log = logging.getLogger(__name__)

PURE_PYTHON_MARKER = "lazyconv-executor-runs-pure-python"
KERNEL_MODULE = "lazyconv.records._ckernel"


class ExecutorRuntimeError(LazyconvError):
    """An executor would run another lazyconv than the driver, or pure Python (not allowed)."""


def _parent_and_name(pid: int) -> tuple[int, str] | None:
    """``(parent pid, command name)`` of ``pid`` from ``/proc`` (Linux); ``None`` elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[1]), name


def executor_identity() -> str:
    """``host:pid`` of the executor this Python worker belongs to: the pid of the JVM that
    started it (the Python worker's parent, or the daemon's parent), else the worker's own."""
    host = socket.gethostname()
    pid = os.getpid()
    for _ in range(4):
        found = _parent_and_name(pid)
        if found is None:
            break
        parent, name = found
        if name == "java":
            return f"{host}:{pid}"
        if parent <= 1:
            break
        pid = parent
    return f"{host}:{os.getpid()}"


def describe_runtime() -> dict[str, Any]:
    """This process's lazyconv as the report records it: executor, host, Python version,
    lazyconv version and implementation (``native`` or ``python``), and where the package and
    its kernel were imported from."""
    from lazyconv._version import __version__
    from lazyconv.records import IMPLEMENTATION

    kernel = sys.modules.get(KERNEL_MODULE)
    kernel_file = getattr(kernel, "__file__", None) if IMPLEMENTATION == "native" else None
    return {
        "executor": executor_identity(),
        "host": socket.gethostname(),
        "python": ".".join(str(n) for n in sys.version_info[:3]),
        "lazyconv_version": __version__,
        "implementation": IMPLEMENTATION,
        "package": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "kernel": kernel_file,
        "kernel_sha256": file_digest(kernel_file) if kernel_file else None,
    }


def file_digest(path: str) -> str:
    """The first 16 hex digits of ``path``'s SHA-256 (which build of the kernel)."""
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def require_kernel(allow_pure_python: bool) -> None:
    """Raise (with :data:`PURE_PYTHON_MARKER` in the message) when this process would scan in
    pure Python and that was not allowed: run at the start of each scan task."""
    if allow_pure_python:
        return
    runtime = describe_runtime()
    if runtime["implementation"] != "native":
        raise ExecutorRuntimeError(f"{PURE_PYTHON_MARKER}: executor {runtime['executor']} "
                                   f"(Python {runtime['python']}) runs lazyconv in pure Python")


def wait_for_executors(sc: Any, seconds: float) -> int:
    """Wait until at least one executor has registered with a cluster master (a local master
    has its executor at once); returns how many there are. Raises
    :class:`ExecutorRuntimeError` after ``seconds`` without one."""
    if sc.master.startswith("local"):
        return 1
    deadline = time.monotonic() + seconds
    while True:
        # the block managers: the driver's and one per executor
        count = int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1
        if count > 0:
            return count
        if time.monotonic() >= deadline:
            raise ExecutorRuntimeError(f"no executor registered with {sc.master} within "
                                       f"{seconds:.0f} s (does the cluster have a free worker?)")
        time.sleep(0.2)


def _probe(_: Any) -> dict[str, Any]:
    time.sleep(0.05)  # keeps a task on its core long enough for every core to get one
    return describe_runtime()


def probe_executors(sc: Any, wait_seconds: float = 120.0) -> list[dict[str, Any]]:
    """One :func:`describe_runtime` per executor (a task per core of the cluster, as many
    rounds as it takes to hear from every registered executor, at most three)."""
    registered = wait_for_executors(sc, wait_seconds)
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(3):
        tasks = max(2, sc.defaultParallelism)
        for runtime in sc.parallelize(range(tasks), tasks).map(_probe).collect():
            seen.setdefault(runtime["executor"], runtime)
        if len(seen) >= registered:
            break
    return [seen[k] for k in sorted(seen)]


_LOST_TASK = re.compile(r"most recent failure: Lost task \S+ in stage \S+ \(TID \d+\) "
                        r"\((?P<where>[^)]*)\): (?P<what>.*)")


def task_failure(exc: BaseException) -> str | None:
    """``"executor <id> on <host>: <reason>"`` of the task failure that aborted the Spark job behind
    ``exc`` (Spark's message is a Java stack trace whose first line names no cause): the last
    line of the task's Python traceback, or the Java exception that ended it (an executor Python
    that cannot be started). ``None`` when ``exc`` is not a job aborted by a task."""
    text = str(exc)
    found = _LOST_TASK.search(text)
    if found is None:
        return None
    what = found["what"].strip()
    if what.endswith("PythonException: Traceback (most recent call last):"):
        lines = []
        for line in text[found.end():].splitlines():
            if line.startswith("\tat "):
                break
            lines.append(line)
        # the exception is what follows the traceback's indented File and code lines (its
        # message may take several lines)
        indented = [i for i, line in enumerate(lines) if line.startswith(" ")]
        start = indented[-1] + 1 if indented else 0
        what = " ".join(line.strip() for line in lines[start:] if line.strip()) or what
    host, _, executor = found["where"].partition(" executor ")
    where = f"executor {executor} on {host}" if executor else found["where"]
    return f"{where}: {what[:300]}"


def check_runtimes(runtimes: list[dict[str, Any]], *, allow_pure_python: bool) -> None:
    """Raise :class:`ExecutorRuntimeError` (one line) when an executor imports another lazyconv
    version or kernel build than the driver, or runs pure Python while the driver has the
    compiled kernel and ``allow_pure_python`` is false."""
    driver = describe_runtime()
    for runtime in runtimes:
        if runtime["lazyconv_version"] != driver["lazyconv_version"]:
            raise ExecutorRuntimeError(
                f"executor {runtime['executor']} imports lazyconv {runtime['lazyconv_version']} "
                f"from {runtime['package']}, the driver runs {driver['lazyconv_version']}")
        if (runtime["kernel_sha256"] and driver["kernel_sha256"]
                and runtime["kernel_sha256"] != driver["kernel_sha256"]):
            raise ExecutorRuntimeError(
                f"executor {runtime['executor']} loads another build of lazyconv's kernel "
                f"({runtime['kernel']}) than the driver ({driver['kernel']})")
    slow = [r for r in runtimes if r["implementation"] != "native"]
    if not slow:
        return
    names = ", ".join(f"{r['executor']} (Python {r['python']})" for r in slow)
    if allow_pure_python or driver["implementation"] != "native":
        # the driver itself runs pure Python: there is no kernel to ship
        log.warning("executors running lazyconv in pure Python (allowed): %s", names)
        return
    raise ExecutorRuntimeError(
        f"executor {names} would run lazyconv in pure Python (about 5x the CPU): its Python "
        f"cannot load the compiled kernel shipped from the driver (built for Python "
        f"{sys.version_info[0]}.{sys.version_info[1]} on {sys.platform}); use an executor "
        f"Python of that version (--executor-python) or pass --allow-pure-python")
