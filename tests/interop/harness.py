"""Running ``lazyconv serve`` and client programs as subprocesses, bounded in time and always
killed (their whole process group) when a test ends."""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

log = logging.getLogger(__name__)

SERVING = re.compile(r"^serving .* on (?P<host>[^ ]+):(?P<port>\d+) as node (?P<node>\d+)$")


class ChildProcess:
    """A subprocess in its own process group; its stdout lines are collected by a thread."""

    def __init__(self, argv: list[str], *, cwd: Path | None = None, stdin: bool = False,
                 env: dict[str, str] | None = None, binary: bool = False) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, **(env or {})})
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        self._binary = binary
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def kill(self) -> None:
        """SIGTERM the process group (the program and anything it started, even after the
        program itself exited), then SIGKILL whatever is left of it."""
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break  # the group is gone
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                continue
        if self.proc.poll() is None:
            self.proc.wait(5)
        self.close_stdin()

    def stderr_tail(self, size: int = 3000) -> str:
        return bytes(self.stderr[-size:]).decode(errors="replace")


class Server:
    """``lazyconv serve LOGDIR --port 0`` in a subprocess; the port read from its first line."""

    def __init__(self, logdir: Path, *extra: str) -> None:
        argv = [sys.executable, "-m", "lazyconv._cli", "serve", str(logdir), "--port", "0", *extra]
        self.child = ChildProcess(argv, cwd=REPO_ROOT)
        deadline = time.monotonic() + 30
        while True:
            try:
                line = self.child.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            m = SERVING.match(line.decode().strip()) if line else None
            if m:
                self.port = int(m.group("port"))
                break
            if line is None or time.monotonic() > deadline:
                self.child.kill()
                raise RuntimeError(f"lazyconv serve did not start: {self.child.stderr_tail()}")
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.child.kill()


class Events:
    """A driver's JSON-lines events, read as they come."""

    def __init__(self, child: ChildProcess) -> None:
        self.child = child
        self.events: list[dict[str, Any]] = []
        self.finished = False

    def next(self, deadline: float) -> dict[str, Any] | None:
        """The next event, or None at end of output or at the deadline."""
        while not self.finished:
            try:
                line = self.child.lines.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                self.finished = True
                return None
            try:
                event = json.loads(line)
            except ValueError:
                log.info("driver says: %s", line.decode(errors="replace").rstrip())
                continue
            self.events.append(event)
            return event
        return None

    def wait_for(self, kind: str, timeout: float) -> dict[str, Any]:
        """Read events until one of ``kind`` (an ``error`` event or the end fails the test)."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(deadline)
            if event is None:
                ended = "the client exited" if self.finished else f"{timeout:.0f} s passed"
                raise AssertionError(
                    f"no {kind!r} event ({ended}) from {self.program()}; "
                    f"events: {summarize(self.events)}; stderr: {self.child.stderr_tail()}")
            if event["ev"] == "error":
                raise AssertionError(f"client error: {event['message']}; "
                                     f"stderr: {self.child.stderr_tail()}")
            if event["ev"] == kind:
                return event

    def program(self) -> str:
        """The driver's command line without its job (a JSON argument): which client it is
        (``python -m tests.interop.drivers.confluent_client``, an old client's interpreter and
        driver file, ...)."""
        return " ".join("<job>" if arg.startswith("{") else arg for arg in self.child.argv)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == kind]


def summarize(events: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for e in events:
        counts[e["ev"]] = counts.get(e["ev"], 0) + 1
    last: dict[str, int] = {}
    for e in events:
        if e["ev"] == "record":
            last[f"{e['t']}/{e['p']}"] = e["o"]
    assigned = [e["partitions"] for e in events if e["ev"] == "assigned"][-1:]
    tail = [e for e in events if e["ev"] not in ("record", "assigned")][-5:]
    return (f"{counts}; last offset per partition {last}; last assignment {assigned}; "
            f"last other events: {tail}")


def which(name: str) -> str | None:
    return shutil.which(name)


def stop_members(*members: Events, grace: float = 10.0) -> None:
    """Close the members' stdin (their signal to leave the group), give them ``grace`` seconds
    to exit, then kill whatever is left."""
    for m in members:
        m.child.close_stdin()
    deadline = time.monotonic() + grace
    for m in members:
        try:
            m.child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        m.child.kill()
