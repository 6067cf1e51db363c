"""What one connection may cost the server: request sizes, queued request bytes, timeouts.

The knobs carry Kafka's broker setting names (in brackets) and, where Kafka bounds something,
its defaults:

- ``max_request_size`` [``socket.request.max.bytes``, 100 MiB]: a larger size field closes the
  connection;
- ``queued_max_request_bytes`` [``queued.max.request.bytes``]: bytes of requests being read or
  waiting to be answered, over all connections (Kafka's request memory pool). A connection
  whose next request does not fit waits, without reading it, until others finish; if that takes
  longer than ``request_read_timeout_ms`` it is closed. Kafka's default is -1 (unbounded); here
  it is 200 MiB so the server's memory is bounded out of the box;
- ``connections_max_idle_ms`` [``connections.max.idle.ms``, 10 min]: a connection with no
  request for that long is closed;
- ``request_read_timeout_ms``: a request whose bytes stop arriving for that long (or whose
  memory cannot be reserved in that time) closes the connection (Kafka relies on the client's
  ``request.timeout.ms``, 30 s, for the same purpose);
- ``write_timeout_ms``: a client that accepts none of its response's bytes for that long is
  closed, which returns what its response held (converted chunk, segment descriptor).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import time
from dataclasses import dataclass

from lazyconv.errors import ConfigurationError

log = logging.getLogger(__name__)

__all__ = ["ConnectionLimits", "RequestMemoryPool", "release_free_memory",
           "DEFAULT_MAX_REQUEST_SIZE", "DEFAULT_QUEUED_MAX_REQUEST_BYTES"]

DEFAULT_MAX_REQUEST_SIZE = 104857600
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 209715200


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection and server-wide request limits (see the module docstring)."""

    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    connections_max_idle_ms: int = 600000
    request_read_timeout_ms: int = 30000
    write_timeout_ms: int = 30000

    def __post_init__(self) -> None:
        if self.max_request_size < 8:
            raise ConfigurationError(f"max_request_size must be at least 8 bytes, got {self.max_request_size}")
        if 0 < self.queued_max_request_bytes < self.max_request_size:
            raise ConfigurationError(
                f"queued.max.request.bytes ({self.queued_max_request_bytes}) must be at least "
                f"socket.request.max.bytes ({self.max_request_size}), or -1 for unbounded")
        for name in ("connections_max_idle_ms", "request_read_timeout_ms", "write_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")


class RequestMemoryPool:
    """Kafka's request memory pool: bytes of requests being read or answered, bounded.

    ``capacity`` <= 0 means unbounded. :meth:`reserve` waits until the bytes fit (first come,
    first served); :meth:`release` gives them back.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self.peak = 0
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def reserve(self, size: int, timeout: float) -> bool:
        """Reserve ``size`` bytes; ``False`` if they did not fit within ``timeout`` seconds."""
        if self.capacity <= 0 or self.in_use + size <= self.capacity:
            self._take(size)
            return True
        changed = self._condition()
        try:
            async with changed:
                await asyncio.wait_for(
                    changed.wait_for(lambda: self.in_use + size <= self.capacity), timeout)
        except asyncio.TimeoutError:
            return False
        self._take(size)
        return True

    def _take(self, size: int) -> None:
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def release(self, size: int) -> None:
        self.in_use -= size
        if self._changed is not None:
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()


_libc: ctypes.CDLL | None = None
_last_trim = 0.0
_TRIM_INTERVAL_S = 1.0


def release_free_memory() -> None:
    """Hand freed heap memory back to the OS (glibc ``malloc_trim``), at most once a second.

    Called when a connection that held a large request or response ends, so the server's RSS
    goes back down after a burst instead of staying at its peak."""
    global _libc, _last_trim
    now = time.monotonic()
    if now - _last_trim < _TRIM_INTERVAL_S:
        return
    _last_trim = now
    if _libc is None:
        name = ctypes.util.find_library("c")
        if name is None:
            return
        _libc = ctypes.CDLL(name)
    trim = getattr(_libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
