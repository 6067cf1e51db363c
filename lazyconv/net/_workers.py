"""The conversion worker pool: where responses that convert records are written.

Down-conversion happens inside a lazy send's ``write_to`` (one chunk at a time). The compiled
kernel and the codec libraries release the GIL while they work, so running those steps on a
pool of threads, one per core, lets N converting connections use N cores while the event loop
only accepts, reads requests and moves already-converted bytes. Each connection awaits its own
step before it issues the next, so a send is never touched by two threads at once and the
per-connection response order is kept; the memory bound is unchanged (one chunk per send).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
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

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, "lazyconv-convert")
        return self._pool

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker; the caller's task waits for it."""
        return await asyncio.get_running_loop().run_in_executor(self._executor(), fn, *args)

    def submit(self, fn: Callable[..., T], *args: object) -> concurrent.futures.Future[T]:
        """``fn(*args)`` on a worker, as a future (for callers that must release what ``fn``
        returns when they stop waiting for it)."""
        return self._executor().submit(fn, *args)

    def close(self) -> None:
        """Stop the threads: steps not started are dropped (their connections are gone), the
        ones running (one chunk each) finish."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
