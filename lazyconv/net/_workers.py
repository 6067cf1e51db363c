"""The conversion worker pool: where responses that convert records are written.

Down-conversion happens inside a lazy send's ``write_to`` (one chunk at a time). The compiled
kernel and the codec libraries release the GIL while they work, so running those steps on a
pool of threads, one per core, lets N converting connections use N cores while the event loop
only accepts, reads requests and moves already-converted bytes. Each connection awaits its own
step before it issues the next, so a send is never touched by two threads at once and the
per-connection response order is kept; the memory bound is unchanged (one chunk per send).

A step runs in the caller's context (:mod:`contextvars`, as ``asyncio.to_thread`` does), so
its log lines and counters know their connection. The pool's threads run nothing but steps, so
the CPU seconds they used (:attr:`ConversionWorkers.cpu_seconds`) are read from each thread's
CPU clock when asked, at no cost per step (two reads of ``CLOCK_THREAD_CPUTIME_ID`` around
each step, a system call rather than a vDSO read, cost 9 µs per step on a busy two-core VM, and
a 1 MiB fetch takes several steps); it also counts the steps waiting for a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from lazyconv.errors import ConfigurationError

__all__ = ["ConversionWorkers", "default_worker_count"]

T = TypeVar("T")


def default_worker_count() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


class ConversionWorkers:
    """A lazily started thread pool for conversion steps (``threads`` defaults to the cores)."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads if threads is not None else default_worker_count()
        if self.threads < 1:
            raise ConfigurationError(f"a conversion pool needs at least one thread, got {self.threads}")
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        # each pool thread's CPU clock (registered by the thread itself when it starts) and the
        # clock's last reading, which stands once the thread has ended
        self._cpu_clocks: dict[int, int] = {}
        self._cpu_read: dict[int, float] = {}
        self._cpu_closed = 0.0  # CPU seconds of the threads of pools already closed
        self.in_flight = 0  # steps submitted by run() and not finished (queued or running)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.threads, "lazyconv-convert", initializer=self._thread_started)
        return self._pool

    def _thread_started(self) -> None:
        """Run once in each pool thread as it starts: note its CPU clock (where the platform
        has per-thread CPU clocks; elsewhere :attr:`cpu_seconds` stays 0)."""
        clock_of = getattr(time, "pthread_getcpuclockid", None)
        if clock_of is not None:
            ident = threading.get_ident()
            try:
                self._cpu_clocks[ident] = clock_of(ident)
            except OSError:  # not counted rather than a pool that cannot start threads
                pass

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker, in the caller's context; the caller's task waits for it.

        A caller cancelled while its step runs waits for the step to end before the
        cancellation reaches it: the step uses the caller's objects (a lazy send writes to its
        socket's descriptor number), and a connection closed under it would free that number
        for the next accepted client, whose socket would then get the rest of the chunk. A step
        that has not started yet is dropped at once."""
        context = contextvars.copy_context()
        self.in_flight += 1
        try:
            step = self._executor().submit(context.run, fn, *args)
            waited = asyncio.wrap_future(step)
            try:
                return await asyncio.shield(waited)
            except asyncio.CancelledError:
                if not step.cancel():  # running: one chunk, so a short wait
                    while not waited.done():
                        with contextlib.suppress(asyncio.CancelledError):
                            await asyncio.shield(waited)
                    if not waited.cancelled():
                        waited.exception()  # retrieved: the caller is gone, not its error
                raise
        finally:
            self.in_flight -= 1

    def submit(self, fn: Callable[..., T], *args: object) -> concurrent.futures.Future[T]:
        """``fn(*args)`` on a worker, in the caller's context, as a future (for callers that
        must release what ``fn`` returns when they stop waiting for it)."""
        return self._executor().submit(contextvars.copy_context().run, fn, *args)

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds the pool's threads have used (they run conversion steps only), read
        from their CPU clocks now; a thread that has ended counts with its last reading."""
        total = self._cpu_closed
        for ident, clock in list(self._cpu_clocks.items()):
            try:
                self._cpu_read[ident] = time.clock_gettime(clock)
            except OSError:  # the thread has ended since
                pass
            total += self._cpu_read.get(ident, 0.0)
        return total

    @property
    def queued(self) -> int:
        """Steps waiting for a free thread now."""
        pool = self._pool
        queue = getattr(pool, "_work_queue", None)  # ThreadPoolExecutor's own queue
        return queue.qsize() if queue is not None else 0

    def close(self) -> None:
        """Stop the threads: steps not started are dropped (their connections are gone), the
        ones running (one chunk each) finish."""
        pool, self._pool = self._pool, None
        if pool is not None:
            self.cpu_seconds  # noqa: B018  (the threads' last readings, while they still run)
            pool.shutdown(wait=True, cancel_futures=True)
            # the ended threads' idents may be reused by new threads: keep their last readings
            # as one sum (the last step each ran after the reading is not counted)
            self._cpu_closed = self.cpu_seconds
            self._cpu_clocks.clear()
            self._cpu_read.clear()
