"""What a sender process is given and what it reports: the contract between
:mod:`lazyconv.net._sender_pool` (the serving process) and :mod:`lazyconv.net._sender` (the
sender processes).

A :class:`RemoteJob` is a picklable description of one response: the sender rebuilds the
response's :class:`~lazyconv._send.Send` from it (:meth:`RemoteJob.start`) and writes it to the
connection's socket, which it received as a descriptor. Its :class:`SendReport` says how that
ended; ``details`` carries what the job collected (e.g. conversion counts) back to the server.
"""

from __future__ import annotations

import abc
import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lazyconv._send import Send

__all__ = ["RemoteJob", "SenderContext", "SendReport", "DONE", "NOT_STARTED", "FAILED", "TIMED_OUT",
           "PEER_GONE", "PEER_GONE_ERRNOS", "MAX_MESSAGE"]

T = TypeVar("T")

MAX_MESSAGE = 64 * 1024  # the largest message either side sends (a job: one fetch's partitions)

DONE = "done"  # every byte written
NOT_STARTED = "not-started"  # the send could not be built; no byte was written
FAILED = "failed"  # the send raised after writing some bytes: the connection must end
TIMED_OUT = "timed-out"  # the client read nothing for the write timeout
PEER_GONE = "peer-gone"  # the socket failed (reset, closed) or the sender went away
# what a client's socket fails with when the client went away (or its network did)
PEER_GONE_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNABORTED,
                              errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH})


class SenderContext:
    """What a sender process keeps between jobs (e.g. a cache of open files), by name."""

    def __init__(self) -> None:
        self._shared: dict[str, Any] = {}

    def shared(self, name: str, factory: Callable[[], T]) -> T:
        """The object kept under ``name``, made by ``factory()`` the first time."""
        if name not in self._shared:
            self._shared[name] = factory()
        value: T = self._shared[name]
        return value

    def release_idle(self) -> None:
        """The sender has had no job for a while: kept objects with a ``release_idle`` method
        (e.g. the conversion cache) let go of what they hold."""
        for value in self._shared.values():
            release = getattr(value, "release_idle", None)
            if release is not None:
                release()

    def close(self) -> None:
        for value in self._shared.values():
            close = getattr(value, "close", None)
            if close is not None:
                close()
        self._shared.clear()


class RemoteJob(abc.ABC):
    """One response, described so that a sender process can build and write its Send."""

    @abc.abstractmethod
    def start(self, context: SenderContext) -> Send:
        """Build the response's Send (in the sender process); raising here means no byte was
        written and the serving process may still write the response itself."""

    def details(self) -> Any:
        """After the send ended (completely or not): what to report back (picklable)."""
        return None

    def close(self) -> None:  # noqa: B027 - a job that takes nothing has nothing to release
        """Release what :meth:`start` took (called once, after :meth:`details`)."""


@dataclass(frozen=True)
class SendReport:
    """How a remote send ended: ``outcome`` is one of the module's constants, ``written`` the
    bytes that reached the socket, ``error`` why it stopped (empty when done)."""

    outcome: str
    written: int = 0
    error: str = ""
    details: Any = None
