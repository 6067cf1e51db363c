"""What makes the log directory survive a crash: fsync helpers, atomic small files and the
background flusher.

- :func:`write_atomically`: a small file written to a temporary name, fsynced, renamed over the
  old one, and the directory fsynced: a crash leaves the old or the new content, never a torn
  file (producer snapshots, the producer-id block, the recovery-point checkpoint of
  :mod:`lazyconv.logdir._checkpoint`).
- :class:`Flusher`: one background thread that fsyncs rolled segments and writes their producer
  snapshots (Kafka flushes a rolled segment asynchronously too), so a roll does not stall the
  event loop for the seconds an fsync of a large segment may take.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "fsync_path",
    "fsync_directory",
    "write_atomically",
    "Flusher",
]


def fsync_path(path: Path) -> None:
    """fsync one file (opened read-only: fsync needs no write access). A file that is gone has
    nothing left to make durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(path: Path) -> None:
    """fsync a directory, so the names created or renamed in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash at any moment leaves either the old or the
    new content. Raises ``OSError``; the temporary file is removed on failure."""
    # os.open applies the umask to 0o644 as for the log files (mkstemp would make it private)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(path.parent)


class Flusher:
    """One background thread for fsyncs that nobody waits for (a rolled segment and its
    producer snapshot) and those a request waits for (``--flush-messages``); jobs run in order."""

    def __init__(self) -> None:
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], object]) -> concurrent.futures.Future[object]:
        """Run ``job`` on the flusher thread; failures are logged (and kept in the future)."""
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="lazyconv-flush")
            future = self._executor.submit(job)
        future.add_done_callback(_log_failure)
        return future

    def drain(self) -> None:
        """Wait until every job submitted so far has run (the thread stays available)."""
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.submit(lambda: None).result()

    def close(self) -> None:
        """Run what is queued, then stop the thread (a later :meth:`submit` starts a new one)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


def _log_failure(future: concurrent.futures.Future[object]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        log.error("background flush failed: %s", exc)
