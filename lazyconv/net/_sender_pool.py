"""Sender processes: converting responses written by other processes, so a server uses every
core.

A Python process runs Python code on one thread at a time. The conversion worker threads
(:mod:`lazyconv.net._workers`) release the interpreter lock inside the kernel, the codecs and
the socket calls, but every step hands the lock between the event loop and the workers, and
with many converting connections those hand-overs cost more than the conversion itself
(docs/guide/benchmarks.md). A sender process has one thread: it rebuilds a response's Send from
a picklable :class:`~lazyconv.net._remote_send.RemoteJob`, converts and writes it to the
client's socket, whose descriptor it receives with ``SCM_RIGHTS``, and reports how that ended.

The connection's task awaits that report before it reads the next request, so each connection's
responses stay whole and in order. All senders start with the first job (``python -m
lazyconv.net._sender``), each job goes to the sender with the fewest jobs, and a sender that
dies after it said it was ready ends the connections it had (the next job starts a new one);
so does one that says nothing for 15 s while it has responses in flight (it says it is alive
every second then): it is killed, as a stopped or wedged process would otherwise hold its
connections for ever. A
job no sender began (:data:`~lazyconv.net._remote_send.NOT_STARTED`: it could not be loaded or
built, it waited for a sender that died, its sender never came up) is written by the serving
process itself; so is every response while no sender runs (one that fails to come up is tried
again after 1 s, then 2, 4, ... up to 30 s).
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import pickle
import socket
import subprocess
import sys
import time
from typing import Any, cast

from lazyconv.errors import ConfigurationError
from lazyconv.net._remote_send import (
    DONE,
    MAX_MESSAGE,
    NOT_STARTED,
    PEER_GONE,
    RemoteJob,
    SendReport,
)
from lazyconv.net._workers import default_worker_count

log = logging.getLogger(__name__)

__all__ = ["SenderPool", "default_sender_processes"]

_STOP_WAIT_S = 5.0
_OWN_PROCESS_GROUP: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {}
_FIRST_BACKOFF_S = 1.0  # after a sender that could not start or died before it was ready
_MAX_BACKOFF_S = 30.0
# A sender with responses in flight says it is alive every second (ALIVE_EVERY_S); one silent
# this long is stopped (SIGSTOP, a wedged read from a hung file system) and its connections cut.
_SILENT_AFTER_S = 15.0
# errors of the control socket itself (the sender is gone); others belong to the job
_GONE = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED})


class _Sender:
    """One sender process and the jobs it has not reported yet."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = False  # the sender said it is up (imports done)
        self.pending: dict[int, asyncio.Future[SendReport]] = {}
        self.jobs_taken = 0
        self.room_waits = 0  # times a submit waited for room on the control socket
        self._room: list[asyncio.Future[None]] = []  # submits waiting for room on the control socket
        self._exited: list[subprocess.Popen[bytes]] = []  # stopped senders not reaped yet
        self.retry_at = 0.0  # not started again before this (time.monotonic())
        self.backoff = _FIRST_BACKOFF_S
        self.last_heard = 0.0  # its last message, or the first job after a quiet time
        self._watchdog: asyncio.TimerHandle | None = None

    @property
    def alive(self) -> bool:
        return self.control is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.reap()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # The same interpreter with the same flags and environment (LAZYCONV_NO_EXTENSIONS
            # included), so a sender writes what the serving process would. A process group of
            # its own keeps the terminal's Ctrl-C for the serving process, which stops it; the
            # same session keeps it in the serving process's scheduling group (a session of its
            # own, with Linux's autogroups, cost 8 old consumers a tenth of their throughput).
            process = cast("subprocess.Popen[bytes]", subprocess.Popen(
                [sys.executable, *subprocess._args_from_interpreter_flags(),  # type: ignore[attr-defined]
                 "-m", "lazyconv.net._sender", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True,
                **_OWN_PROCESS_GROUP))
            self.process = process
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control = ours
        self.loop = loop
        self.ready = False
        loop.add_reader(ours.fileno(), self._on_readable)
        log.info("sender process %d started (pid %d)", self.index, process.pid)

    async def submit(self, job_id: int, message: bytes, fd: int) -> asyncio.Future[SendReport]:
        """Queue the job; raises OSError (nothing sent) when the sender is gone or refused it.

        The job counts as pending only once sent: a sender that dies while it waits for room
        never had it, even when a new sender has been started meanwhile."""
        assert self.loop is not None
        control = self.control
        while True:
            if control is None or self.control is not control:
                raise ConnectionError("the sender process stopped")
            try:
                socket.send_fds(control, [message], [fd])
            except BlockingIOError:
                await self._wait_for_room()
                continue
            except OSError as exc:
                if exc.errno in _GONE:
                    # take what it said before it went (its readiness, its reports), then end it
                    self._on_readable()
                    if self.control is control:
                        self._died(f"its control socket failed: {exc}")
                raise
            future: asyncio.Future[SendReport] = self.loop.create_future()
            if not self.pending:  # silence is counted from the first job in flight
                self.last_heard = time.monotonic()
            self.pending[job_id] = future
            self.jobs_taken += 1
            if self._watchdog is None:
                self._watchdog = self.loop.call_later(_SILENT_AFTER_S, self._check_alive)
            return future

    def _check_alive(self) -> None:
        """Stop a sender that has said nothing for too long while it has responses in flight."""
        self._watchdog = None
        if self.control is None or not self.pending or self.loop is None:
            return
        silent = time.monotonic() - self.last_heard
        if silent >= _SILENT_AFTER_S:
            log.error("sender process %d said nothing for %.0f s with %d response(s) in flight; "
                      "stopping it", self.index, silent, len(self.pending))
            self._died(f"silent for {silent:.0f} s", kill=True)
            return
        self._watchdog = self.loop.call_later(_SILENT_AFTER_S - silent, self._check_alive)

    async def _wait_for_room(self) -> None:
        assert self.loop is not None and self.control is not None
        self.room_waits += 1
        waiter: asyncio.Future[None] = self.loop.create_future()
        if not self._room:  # one writer callback per socket wakes every waiting submit
            self.loop.add_writer(self.control.fileno(), self._wake_room)
        self._room.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._room:
                self._room.remove(waiter)
                if not self._room and self.control is not None:
                    self.loop.remove_writer(self.control.fileno())

    def _wake_room(self) -> None:
        waiters, self._room = self._room, []
        if self.loop is not None and self.control is not None:
            self.loop.remove_writer(self.control.fileno())
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def cancel(self, job_id: int) -> None:
        if self.pending.pop(job_id, None) is None or self.control is None or self.loop is None:
            return
        message = pickle.dumps(("cancel", job_id))
        try:
            self.control.send(message)
        except BlockingIOError:  # sent once there is room, so the sender lets the client go
            self.loop.create_task(self._cancel_later(self.control, message))
        except OSError:
            pass  # gone: it holds no client socket any more

    async def _cancel_later(self, control: socket.socket, message: bytes) -> None:
        while self.control is control:
            try:
                control.send(message)
                return
            except BlockingIOError:
                await self._wait_for_room()
            except OSError:
                return

    def _on_readable(self) -> None:
        while self.control is not None:
            try:
                data = self.control.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._died(f"its control socket failed: {exc}")
                return
            if not data:
                self._died("it exited")
                return
            self.last_heard = time.monotonic()
            try:
                message = pickle.loads(data)
                kind = message[0]
                if kind == "report":
                    _, job_id, outcome, written, error, details = message
                    if not isinstance(outcome, str) or not isinstance(written, int) or \
                            not isinstance(error, str):
                        raise TypeError(f"a report of {outcome!r}, {written!r}, {error!r}")
                    report = SendReport(outcome, written, error, details)
                    future = self.pending.pop(job_id, None)
                    if future is not None and not future.done():
                        future.set_result(report)
                elif kind == "ready":
                    self.ready = True
                    self.backoff = _FIRST_BACKOFF_S
                elif kind == "alive":
                    pass  # heard: last_heard is set
                else:
                    raise ValueError(f"unknown message {kind!r}")
            except Exception as exc:  # a sender that speaks nonsense is stopped
                log.error("sender process %d sent a message that cannot be read (%s); stopping it",
                          self.index, exc)
                self._died(f"an unreadable message: {exc}", kill=True)
                return

    def _died(self, why: str, kill: bool = False) -> None:
        if self.control is None:
            return  # already ended
        process = self.process
        code = process.poll() if process is not None else None
        if process is not None:
            if code is None and kill:
                process.kill()  # alive but unusable (an unreadable message)
            self._exited.append(process)
            self.process = None
        # A sender says it is ready before it reads its first job: the jobs of one that never
        # said so wrote nothing, and the serving process writes them itself. The jobs of a
        # sender that was working may have been written in part: their connections are cut.
        was_ready = self.ready
        if was_ready and self.pending:
            log.error("sender process %d stopped (%s, exit code %s): %d response(s) in flight are "
                      "cut", self.index, why, code, len(self.pending))
        elif not was_ready:
            log.error("sender process %d stopped before it was ready (%s, exit code %s)",
                      self.index, why, code)
        self._close_control()
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if future.done():
                continue
            if was_ready:
                future.set_result(SendReport(PEER_GONE, -1, f"the sender process stopped ({why})"))
            else:
                future.set_result(SendReport(NOT_STARTED, 0, f"the sender process stopped ({why})"))
        if not was_ready:
            # not even up: wait before the next try, longer each time this sender fails so
            self.retry_at = time.monotonic() + self.backoff
            log.error("starting sender process %d again in %.0f s; the serving process writes "
                      "its responses meanwhile", self.index, self.backoff)
            self.backoff = min(_MAX_BACKOFF_S, self.backoff * 2)

    def _close_control(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        control, self.control = self.control, None
        if control is not None:
            if self.loop is not None:
                self.loop.remove_reader(control.fileno())
                if self._room:
                    self.loop.remove_writer(control.fileno())
            control.close()
        waiters, self._room = self._room, []
        for waiter in waiters:  # they find the sender gone
            if not waiter.done():
                waiter.set_result(None)

    def reap(self) -> None:
        """Collect the exit status of stopped senders (no zombies)."""
        self._exited = [p for p in self._exited if p.poll() is None]

    def close_control(self) -> None:
        """Close the control socket (the sender cuts its jobs and exits); see :meth:`wait`."""
        self._close_control()
        for future in self.pending.values():
            if not future.done():
                future.set_result(SendReport(PEER_GONE, -1, "the server is stopping"))
        self.pending.clear()
        if self.process is not None:
            self._exited.append(self.process)
            self.process = None

    def wait(self, deadline: float) -> None:
        """Reap the stopped senders, killing those still running at ``deadline``."""
        for process in self._exited:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("sender process %d (pid %d) did not stop within %.0f s; killing it",
                            self.index, process.pid, _STOP_WAIT_S)
                process.kill()
                process.wait()
        self._exited.clear()


class SenderPool:
    """``processes`` sender processes, all started with the first job."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ConfigurationError(f"a sender pool needs at least one process, got {processes}")
        self.processes = processes
        self._senders = [_Sender(i) for i in range(processes)]
        self._ids = itertools.count(1)
        self._closed = False
        self.jobs_sent = 0  # handed to a sender
        self.jobs_done = 0  # reported DONE by a sender
        self.jobs_not_started = 0  # given back to the serving process (NOT_STARTED)

    def _pick(self, loop: asyncio.AbstractEventLoop) -> _Sender | None:
        """The live sender with the fewest jobs, after starting every sender that is not
        running (all at the first job, so the pool's memory is there from then on; a sender
        that died, at the next job; one that died before it was up, after its backoff)."""
        now = time.monotonic()
        for sender in self._senders:
            if sender.alive:
                continue
            sender.reap()
            if now < sender.retry_at:
                continue
            try:
                sender.start(loop)
            except OSError as exc:
                sender.retry_at = now + sender.backoff
                log.error("could not start sender process %d (%s); trying again in %.0f s",
                          sender.index, exc, sender.backoff)
                sender.backoff = min(_MAX_BACKOFF_S, sender.backoff * 2)
        live = [s for s in self._senders if s.alive]
        return min(live, key=lambda s: (len(s.pending), not s.ready), default=None)

    async def write(self, conn: socket.socket, job: RemoteJob, timeout: float) -> SendReport:
        """Write ``job``'s response to ``conn`` in a sender process and wait for its report.

        Returns a NOT_STARTED report (nothing was written) when no sender took it or could
        begin it; the caller then writes the response itself. Cancelling the caller cancels the job."""
        report = await self._write(conn, job, timeout)
        if report.outcome == DONE:
            self.jobs_done += 1
        elif report.outcome == NOT_STARTED:
            self.jobs_not_started += 1
        return report

    async def _write(self, conn: socket.socket, job: RemoteJob, timeout: float) -> SendReport:
        if self._closed:
            return SendReport(NOT_STARTED, 0, "the sender pool is closed")
        job_id = next(self._ids)
        message = pickle.dumps(("write", job_id, pickle.dumps(job), timeout))
        if len(message) > MAX_MESSAGE:
            return SendReport(NOT_STARTED, 0, f"the job takes {len(message)} bytes to describe, "
                                              f"more than {MAX_MESSAGE}")
        sender = self._pick(asyncio.get_running_loop())
        if sender is None:
            return SendReport(NOT_STARTED, 0, "no sender process is running")
        try:
            future = await sender.submit(job_id, message, conn.fileno())
        except OSError as exc:
            return SendReport(NOT_STARTED, 0, f"the sender process did not take the job: {exc}")
        self.jobs_sent += 1
        try:
            return await future
        except asyncio.CancelledError:
            sender.cancel(job_id)
            raise

    def close(self) -> None:
        """Stop every sender (their jobs are cut) and wait for them to exit."""
        self._closed = True
        for sender in self._senders:
            sender.close_control()
        deadline = time.monotonic() + _STOP_WAIT_S
        for sender in self._senders:
            sender.wait(deadline)


def default_sender_processes() -> int:
    """One sender per core this process may run on."""
    return default_worker_count()
