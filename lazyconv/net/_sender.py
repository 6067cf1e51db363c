"""A sender process: writes the responses the serving process hands it, one thread, no GIL to
share (``python -m lazyconv.net._sender FD``; started by :mod:`lazyconv.net._sender_pool`).

FD is a SOCK_SEQPACKET Unix socket to the serving process. Each message from it is a pickled
``("write", job_id, pickled_job, timeout_s)`` with the client connection's descriptor attached, or
``("cancel", job_id)``. The sender says ``("ready",)`` once it is up (before it reads a job, so
the jobs of a sender that never said it wrote nothing). The sender writes every job's Send to its socket whenever the socket
has room (round robin over the jobs, one ``write_to`` step each), and answers each job once
with a pickled ``("report", job_id, outcome, written, error, details)`` (a SendReport's fields:
a tuple loads faster than the dataclass). A job whose client takes nothing for
``timeout_s`` ends TIMED_OUT. When the serving process goes away (end of file), the sender
closes every socket it holds and exits.
"""

from __future__ import annotations

import array
import logging
import os
import pickle
import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence

from lazyconv._send import Send
from lazyconv.errors import LazyconvError
from lazyconv.net._limits import release_free_memory, tune_allocator
from lazyconv.net._remote_send import (
    DONE,
    FAILED,
    MAX_MESSAGE,
    NOT_STARTED,
    PEER_GONE,
    PEER_GONE_ERRNOS,
    TIMED_OUT,
    RemoteJob,
    SenderContext,
    SendReport,
)

log = logging.getLogger("lazyconv.sender")

_MESSAGES_PER_TURN = 64
_IDLE_TRIM_S = 1.0
# While it has responses in flight a sender says at least this often that it is alive: the
# serving process stops a sender that stays silent (a stopped or wedged process).
ALIVE_EVERY_S = 1.0


class _Job:
    __slots__ = ("job_id", "job", "sock", "send", "timeout", "deadline")

    def __init__(self, job_id: int, job: RemoteJob, sock: socket.socket, send: Send,
                 timeout: float) -> None:
        self.job_id = job_id
        self.job = job
        self.sock = sock
        self.send = send
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout


class Sender:
    """The sender's loop over its control socket and the jobs' client sockets."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.control.setblocking(True)  # reports are small; the server reads them at once
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, None)
        self.jobs: dict[int, _Job] = {}
        self.context = SenderContext()
        self.trim_when_idle = False
        self.last_sent = time.monotonic()

    def run(self) -> None:
        try:
            while True:
                timeout = _IDLE_TRIM_S if self.trim_when_idle else None
                if self.jobs:
                    soonest = min(min(j.deadline for j in self.jobs.values()), self.last_sent + ALIVE_EVERY_S)
                    timeout = max(0.0, soonest - time.monotonic())
                events = self.selector.select(timeout)
                if not events and not self.jobs and self.trim_when_idle:
                    # idle for a while after a burst: hand the freed heap back, as the serving
                    # process does (not after every job: the next would fault its pages in again)
                    self.context.release_idle()
                    release_free_memory()
                    self.trim_when_idle = False
                for key, _ in events:
                    if key.data is None:
                        # every queued message, so jobs do not wait behind the writing ones
                        for _ in range(_MESSAGES_PER_TURN):
                            more = self._read_control()
                            if more is None:
                                break
                            if not more:
                                return
                    else:
                        job: _Job = key.data
                        if job.job_id in self.jobs:
                            self._step(job)
                now = time.monotonic()
                for job in [j for j in self.jobs.values() if j.deadline <= now]:
                    self._finish(job, SendReport(TIMED_OUT, job.send.written,
                                                 f"the client read nothing for {job.timeout:.0f} s"))
                if self.jobs and now - self.last_sent >= ALIVE_EVERY_S:
                    self._send(("alive",))
        finally:
            for job in list(self.jobs.values()):
                self._end(job)
            self.context.close()

    def _read_control(self) -> bool | None:
        """Take one message: None when there is none now, False at end of file (the serving
        process is gone)."""
        try:
            data, fds = _receive(self.control)
        except BlockingIOError:
            return None
        except ConnectionError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        message = pickle.loads(data)
        if message[0] == "cancel":
            job = self.jobs.get(message[1])
            if job is not None:
                self._end(job)
            for fd in fds:
                os.close(fd)
            return True
        _, job_id, described, timeout = message
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self._report(job_id, SendReport(NOT_STARTED, 0, f"a job came with {len(fds)} descriptors, not 1"))
            return True
        sock = socket.socket(fileno=fds[0])
        remote: RemoteJob | None = None
        try:
            # the job is pickled apart, so one that cannot be loaded here is answered, not fatal
            remote = pickle.loads(described)
            send = remote.start(self.context)
        except Exception as exc:  # anything: the serving process writes the response itself
            sock.close()
            if remote is not None:
                with _suppress():
                    remote.close()
            self._report(job_id, SendReport(NOT_STARTED, 0, f"{type(exc).__name__}: {exc}"))
            return True
        job = _Job(job_id, remote, sock, send, timeout)
        self.jobs[job_id] = job
        self.trim_when_idle = True
        self.selector.register(sock, selectors.EVENT_WRITE, job)
        self._step(job)
        return True

    def _step(self, job: _Job) -> None:
        send = job.send
        try:
            written = send.write_to(job.sock)
        except LazyconvError as exc:
            self._finish(job, SendReport(FAILED, send.written, f"{type(exc).__name__}: {exc}"))
            return
        except OSError as exc:
            # the client's socket failing is the client going away; anything else (a segment
            # that cannot be read) is ours to report
            outcome = PEER_GONE if exc.errno in PEER_GONE_ERRNOS else FAILED
            self._finish(job, SendReport(outcome, send.written, str(exc) or type(exc).__name__))
            return
        except Exception as exc:  # a bug must end this response only
            log.exception("sender: writing a response failed")
            self._finish(job, SendReport(FAILED, send.written, f"internal error: {exc!r}"))
            return
        if send.completed:
            self._finish(job, SendReport(DONE, send.written))
        elif written:
            job.deadline = time.monotonic() + job.timeout

    def _finish(self, job: _Job, report: SendReport) -> None:
        details = None
        try:
            details = job.job.details()
        except Exception:  # the report itself must still go out
            log.exception("sender: collecting a job's details failed")
        self._end(job)
        self._report(job.job_id, SendReport(report.outcome, report.written, report.error, details))

    def _end(self, job: _Job) -> None:
        if self.jobs.pop(job.job_id, None) is None:
            return
        with _suppress():
            self.selector.unregister(job.sock)
        job.sock.close()  # our descriptor only: the serving process keeps the connection
        with _suppress():
            job.job.close()

    def _report(self, job_id: int, report: SendReport) -> None:
        message = pickle.dumps(("report", job_id, report.outcome, report.written, report.error,
                                report.details))
        if len(message) > MAX_MESSAGE:  # the outcome matters more than the details
            message = pickle.dumps(("report", job_id, report.outcome, report.written,
                                    report.error[:1000] + " (details dropped: too large)", None))
        self._send(message)

    def _send(self, message: object) -> None:
        try:
            self.control.send(message if isinstance(message, bytes) else pickle.dumps(message))
        except OSError:
            pass  # the serving process is gone; its end of file stops the loop
        else:
            self.last_sent = time.monotonic()


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors passed with it, without waiting (``socket.recv_fds``
    drops its ``flags`` argument on Python 3.11, so it would block)."""
    fds = array.array("i")
    data, ancillary, _, _ = control.recvmsg(MAX_MESSAGE, socket.CMSG_LEN(4 * fds.itemsize),
                                            socket.MSG_DONTWAIT)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        if isinstance(exc, Exception):
            log.debug("sender: ignored %r", exc)
            return True
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m lazyconv.net._sender FD (started by lazyconv serve)", file=sys.stderr)
        return 2
    # Ctrl-C reaches the whole process group: the serving process decides when we stop (it
    # closes our control socket); SIGTERM ends us as it would any process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    level = os.environ.get("LAZYCONV_SENDER_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level if isinstance(logging.getLevelName(level), int) else "WARNING",
                        format=f"%(asctime)s lazyconv sender {os.getpid()}: %(message)s")
    tune_allocator()  # converted chunks stay in the heap, as in the serving process
    control = socket.socket(fileno=int(args[0]))
    sender = Sender(control)
    sender._send(("ready",))
    sender.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
