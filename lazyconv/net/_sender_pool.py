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
responses stay whole and in order. Senders start on first use (``python -m
lazyconv.net._sender``), each job goes to the sender with the fewest jobs, and a sender that
dies ends the connections it was writing to (the next job starts a new one). A job the sender
cannot even begin (:data:`~lazyconv.net._remote_send.NOT_STARTED`) is written by the serving
process itself; so is every response while no sender can be started.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
import socket
import subprocess
import sys
import time

from lazyconv.errors import ConfigurationError
from lazyconv.net._remote_send import MAX_MESSAGE, NOT_STARTED, PEER_GONE, RemoteJob, SendReport
from lazyconv.net._workers import default_worker_count

log = logging.getLogger(__name__)

__all__ = ["SenderPool", "default_sender_processes"]

_STOP_WAIT_S = 5.0
_RESTART_BACKOFF_S = 1.0


class _Sender:
    """One sender process and the jobs it has not reported yet."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.pending: dict[int, asyncio.Future[SendReport]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def alive(self) -> bool:
        return self.control is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # A sender must write with the kernel the serving process uses: the same
            # interpreter, the same environment (LAZYCONV_NO_EXTENSIONS included).
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lazyconv.net._sender", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control = ours
        self.loop = loop
        loop.add_reader(ours.fileno(), self._on_readable)
        log.info("sender process %d started (pid %d)", self.index, self.process.pid)

    async def submit(self, job_id: int, message: bytes, fd: int) -> asyncio.Future[SendReport]:
        assert self.control is not None and self.loop is not None
        future: asyncio.Future[SendReport] = self.loop.create_future()
        self.pending[job_id] = future
        while True:
            try:
                socket.send_fds(self.control, [message], [fd])
                return future
            except BlockingIOError:
                await _writable(self.loop, self.control)
            except OSError as exc:
                self.pending.pop(job_id, None)
                self._died(f"its control socket failed: {exc}")
                raise

    def cancel(self, job_id: int) -> None:
        if self.pending.pop(job_id, None) is None or self.control is None:
            return
        try:
            self.control.send(pickle.dumps(("cancel", job_id)))
        except OSError:
            pass  # full or gone: the sender ends the job when the client socket fails

    def _on_readable(self) -> None:
        control = self.control
        while control is not None:
            try:
                data = control.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._died(f"its control socket failed: {exc}")
                return
            if not data:
                self._died("it exited")
                return
            _, job_id, report = pickle.loads(data)
            future = self.pending.pop(job_id, None)
            if future is not None and not future.done():
                future.set_result(report)

    def _died(self, why: str) -> None:
        code = self.process.poll() if self.process is not None else None
        if self.pending:
            log.error("sender process %d stopped (%s, exit code %s): %d response(s) in flight are cut",
                      self.index, why, code, len(self.pending))
        self._close_control()
        for future in self.pending.values():
            if not future.done():
                future.set_result(SendReport(PEER_GONE, -1, f"the sender process stopped ({why})"))
        self.pending.clear()

    def _close_control(self) -> None:
        if self.control is not None:
            if self.loop is not None:
                self.loop.remove_reader(self.control.fileno())
            self.control.close()
            self.control = None

    def stop(self) -> None:
        """Close the control socket (the sender cuts its jobs and exits) and reap it."""
        self._close_control()
        for future in self.pending.values():
            if not future.done():
                future.set_result(SendReport(PEER_GONE, -1, "the server is stopping"))
        self.pending.clear()
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.wait(_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("sender process %d (pid %d) did not stop within %.0f s; killing it",
                        self.index, process.pid, _STOP_WAIT_S)
            process.kill()
            process.wait()


class SenderPool:
    """``processes`` sender processes, started on first use."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ConfigurationError(f"a sender pool needs at least one process, got {processes}")
        self.processes = processes
        self._senders = [_Sender(i) for i in range(processes)]
        self._ids = itertools.count(1)
        self._failed_start_at = -_RESTART_BACKOFF_S
        self._closed = False
        self.jobs_sent = 0

    def _pick(self, loop: asyncio.AbstractEventLoop) -> _Sender | None:
        """The live sender with the fewest jobs, after starting every sender that is not
        running (all at the first job, so the pool's memory is there from then on; a sender
        that died, at the next job)."""
        if time.monotonic() - self._failed_start_at >= _RESTART_BACKOFF_S:
            for sender in self._senders:
                if sender.alive:
                    continue
                try:
                    sender.start(loop)
                except OSError as exc:
                    self._failed_start_at = time.monotonic()
                    log.error("could not start a sender process (%s); responses are written by "
                              "the serving process meanwhile", exc)
                    break
        return min((s for s in self._senders if s.alive), key=lambda s: len(s.pending), default=None)

    async def write(self, conn: socket.socket, job: RemoteJob, timeout: float) -> SendReport:
        """Write ``job``'s response to ``conn`` in a sender process and wait for its report.

        Returns a NOT_STARTED report (nothing was written) when no sender could take it; the
        caller then writes the response itself. Cancelling the caller cancels the job."""
        if self._closed:
            return SendReport(NOT_STARTED, 0, "the sender pool is closed")
        job_id = next(self._ids)
        message = pickle.dumps(("write", job_id, pickle.dumps(job), timeout))
        if len(message) > MAX_MESSAGE:
            return SendReport(NOT_STARTED, 0, f"the job takes {len(message)} bytes to describe")
        loop = asyncio.get_running_loop()
        sender = self._pick(loop)
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
            sender.stop()


async def _writable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    future: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def ready() -> None:
        if not future.done():
            future.set_result(None)

    loop.add_writer(fd, ready)
    try:
        await future
    finally:
        loop.remove_writer(fd)


def default_sender_processes() -> int:
    """One sender per core this process may run on."""
    return default_worker_count()
