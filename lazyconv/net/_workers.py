"""The conversion worker pool: where responses that convert records are written.

Down-conversion happens inside a lazy send's ``write_to`` (one chunk at a time). The compiled
kernel and the codec libraries release the GIL while they work, so running those steps on a
pool of threads, one per core, lets N converting connections use N cores while the event loop
only accepts, reads requests and moves already-converted bytes. Each connection awaits its own
step before it issues the next, so a send is never touched by two threads at once and the
per-connection response order is kept; the memory bound is unchanged (one chunk per send).

A step runs in the caller's context (:mod:`contextvars`, as ``asyncio.to_thread`` does), so
its log lines and counters know their connection; the pool counts the CPU seconds its threads
spent in steps (:attr:`ConversionWorkers.cpu_seconds`) and the steps waiting for a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

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
            raise ValueError(f"a conversion pool needs at least one thread, got {self.threads}")
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        # CPU nanoseconds spent in steps, per thread (each thread adds to its own entry only:
        # no lock on the hot path; a reader sums them)
        self._cpu_ns: dict[int, int] = {}
        self.in_flight = 0  # steps submitted by run() and not finished (queued or running)
        #: count the CPU seconds of steps (two clock reads per step: on when metrics are)
        self.count_cpu = False

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, "lazyconv-convert")
        return self._pool

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker, in the caller's context; the caller's task waits for it."""
        context = contextvars.copy_context()
        self.in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor(), self._timed, context, fn, args)
        finally:
            self.in_flight -= 1

    def submit(self, fn: Callable[..., T], *args: object) -> concurrent.futures.Future[T]:
        """``fn(*args)`` on a worker, in the caller's context, as a future (for callers that
        must release what ``fn`` returns when they stop waiting for it)."""
        return self._executor().submit(self._timed, contextvars.copy_context(), fn, args)

    def _timed(self, context: contextvars.Context, fn: Callable[..., T], args: tuple[object, ...]) -> T:
        if not self.count_cpu:
            return context.run(fn, *args)
        started = time.thread_time_ns()
        try:
            return context.run(fn, *args)
        finally:
            ident = threading.get_ident()
            self._cpu_ns[ident] = self._cpu_ns.get(ident, 0) + time.thread_time_ns() - started

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds the pool's threads spent in steps while :attr:`count_cpu` was on."""
        return sum(list(self._cpu_ns.values())) / 1e9

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
            pool.shutdown(wait=True, cancel_futures=True)
