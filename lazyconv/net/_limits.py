"""What one connection may cost the server: request sizes, queued request bytes, timeouts.

The knobs carry Kafka's broker setting names (in brackets) and, where Kafka bounds something,
its defaults:

- ``max_request_size`` [``socket.request.max.bytes``, 100 MiB]: a larger size field closes the
  connection;
- ``queued_max_request_bytes`` [``queued.max.request.bytes``]: bytes of requests being read or
  waiting to be answered, over all connections (Kafka's request memory pool). Kafka's default is
  -1 (unbounded); here it is 200 MiB so the server's memory is bounded out of the box. As on
  Kafka, 0 or less is unbounded. How the pool is shared is the admission rule below;
- ``connections_max_idle_ms`` [``connections.max.idle.ms``, 10 min]: a connection with no
  request for that long is closed;
- ``request_read_timeout_ms``: a request whose bytes stop arriving for that long (or whose
  memory cannot be reserved in that time) closes the connection (Kafka relies on the client's
  ``request.timeout.ms``, 30 s, for the same purpose);
- ``request_stall_ms`` (1 s; no Kafka equivalent): how long a large request may stall above its
  fair share of the pool while other requests wait for room (see below);
- ``write_timeout_ms``: a client that accepts none of its response's bytes for that long is
  closed, which returns what its response held (converted chunk, segment descriptor).

**Admission** (:class:`RequestMemoryPool`). A request's announced size is reserved in the pool
before its bytes are read, and given back once it is answered; a connection reads its next
request only after answering the previous one, so it holds at most one reservation. The pool
(capacity *C*) is shared so that no connection can keep the others out:

- *small requests* (at most ``SMALL_REQUEST_BYTES``, 64 KiB: ApiVersions, Metadata, heartbeats,
  offset commits, fetch requests) have a *reserved slice* of ``min(C / 8, C -
  socket.request.max.bytes)`` (25 MiB with the defaults) that larger requests never use: a health
  check is admitted at once however many large requests are held or stalled (it waits only if
  the slice itself is full, hundreds of stalled requests of 64 KiB);
- *large requests* share the rest, *C* minus the slice, in arrival order (a large request is
  never overtaken by a later one, so a stream of medium requests cannot starve a big one);
- *fair share*: while a large request waits for room, each of the *n* connections holding or
  waiting for large room is entitled to (*C* minus the slice) / *n*. A connection holding more
  than that whose request, not yet read whole, has received no byte for ``request_stall_ms``, or
  whose bytes arrive too slowly for it to be whole within ``request_read_timeout_ms`` of its
  grant (bytes trickled one at a time), is closed and its reservation given back (it was stalled, so nothing it sent was answered; a client retries on
  a new connection). Requests within their share, requests whose bytes keep arriving at that pace and
  requests read whole and being answered (an append, an fsync) are never cut; a stalled request nobody waits behind keeps its room until
  ``request_read_timeout_ms``.

So two clients that send 95 MiB of a 100 MiB request each and stop can delay another large
request by about ``request_stall_ms``, and a small one not at all; memory stays bounded by *C*.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import ctypes.util
import logging
import time
from dataclasses import dataclass, field

from lazyconv.errors import ConfigurationError

log = logging.getLogger(__name__)

__all__ = ["ConnectionLimits", "RequestMemoryPool", "Reservation", "release_free_memory", "tune_allocator",
           "DEFAULT_MAX_REQUEST_SIZE", "DEFAULT_QUEUED_MAX_REQUEST_BYTES", "SMALL_REQUEST_BYTES"]

DEFAULT_MAX_REQUEST_SIZE = 104857600
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 209715200
# Requests up to this size draw on the reserved slice: every request a health check, a consumer's
# poll loop or a group member sends fits, while a Produce of a full batch usually does not.
SMALL_REQUEST_BYTES = 65536
# The reserved slice is this fraction of the pool (25 MiB of the default 200 MiB: 400 small
# requests of the largest kind stalled at once before a health check would wait).
RESERVED_FRACTION = 8
# How often a waiting request looks for stalled holders to reclaim, and a holder whose bytes
# stopped looks whether its reservation was reclaimed: the delay a stall can add beyond
# request_stall_ms.
STALL_CHECK_S = 0.1


MIN_MAX_REQUEST_SIZE = 8  # a size field and a request header's api key, version and id


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection and server-wide request limits (see the module docstring)."""

    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    connections_max_idle_ms: int = 600000
    request_read_timeout_ms: int = 30000
    write_timeout_ms: int = 30000
    request_stall_ms: int = 1000

    def __post_init__(self) -> None:
        if self.max_request_size < MIN_MAX_REQUEST_SIZE:
            raise ConfigurationError(f"max_request_size must be at least {MIN_MAX_REQUEST_SIZE} "
                                     f"bytes, got {self.max_request_size}")
        if 0 < self.queued_max_request_bytes < self.max_request_size:
            raise ConfigurationError(
                f"queued.max.request.bytes ({self.queued_max_request_bytes}) must be at least "
                f"socket.request.max.bytes ({self.max_request_size}), or -1 for unbounded")
        for name in ("connections_max_idle_ms", "request_read_timeout_ms", "write_timeout_ms",
                     "request_stall_ms"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass(eq=False)
class Reservation:
    """Room held in a :class:`RequestMemoryPool` for one request being read or answered.

    The connection reading the request calls :meth:`progressed` whenever bytes arrive; the pool
    sets ``reclaimed`` when it takes a stalled reservation back (the connection must then close).
    """

    size: int
    large: bool
    owner: str = ""
    last_progress: float = field(default_factory=time.monotonic)
    reclaimed: bool = False
    released: bool = False
    reading: bool = True  # False once the whole request arrived (it is being answered)
    granted_at: float = field(default_factory=time.monotonic)
    received: int = 0  # bytes of the request read since it was granted

    def progressed(self, nbytes: int = 0) -> None:
        """``nbytes`` of the request arrived: it is not stalled."""
        self.last_progress = time.monotonic()
        self.received += nbytes

    def read(self) -> None:
        """The whole request arrived: from now on it is being answered, never stalled."""
        self.reading = False


@dataclass(eq=False)
class _Waiter:
    size: int
    large: bool
    granted: asyncio.Future[Reservation]
    owner: str


class RequestMemoryPool:
    """Kafka's request memory pool (``queued.max.request.bytes``), shared fairly.

    ``capacity`` <= 0 means unbounded. Requests of at most ``small_request_bytes`` have a
    reserved slice of the pool (``reserved``); larger ones share the rest (``large_capacity``) in
    arrival order, and one holding more than its fair share that stalls for ``stall_s`` while
    others wait is reclaimed (module docstring). :meth:`reserve` waits for room; :meth:`release`
    gives it back. Used from one event loop.
    """

    def __init__(self, capacity: int, *, max_request_size: int | None = None,
                 small_request_bytes: int = SMALL_REQUEST_BYTES, stall_s: float = 1.0,
                 pace_s: float | None = None) -> None:
        """``max_request_size``: the largest request that will be reserved; the slice is cut so
        that one such request still fits beside it (none when the pool is no larger)."""
        self.capacity = capacity
        self.small_request_bytes = small_request_bytes
        self.stall_s = stall_s
        # a large request read at a pace that would not bring it whole within this many seconds
        # (the request read timeout) counts as stalled too: trickling bytes must not hold room
        self.pace_s = pace_s
        if capacity > 0:
            reserved = capacity // RESERVED_FRACTION
            if max_request_size is not None:
                reserved = max(0, min(reserved, capacity - max_request_size))
        else:
            reserved = 0
        self.reserved = reserved
        self.large_capacity = capacity - reserved
        self.in_use = 0
        self.in_use_large = 0
        self.peak = 0
        self.reclaimed = 0  # reservations taken back from stalled connections
        self._holders: set[Reservation] = set()  # large reservations not yet released
        self._large_waiters: collections.deque[_Waiter] = collections.deque()
        self._small_waiters: collections.deque[_Waiter] = collections.deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for room."""
        return len(self._large_waiters) + len(self._small_waiters)

    def _is_large(self, size: int) -> bool:
        return size > self.small_request_bytes

    def _fits(self, size: int, large: bool) -> bool:
        if self.capacity <= 0:
            return True
        if self.in_use + size > self.capacity:
            return False
        return not large or self.in_use_large + size <= self.large_capacity

    def _grant(self, size: int, large: bool, owner: str) -> Reservation:
        reservation = Reservation(size, large, owner)
        self.in_use += size
        if large:
            self.in_use_large += size
            self._holders.add(reservation)
        self.peak = max(self.peak, self.in_use)
        return reservation

    async def reserve(self, size: int, timeout: float, owner: str = "") -> Reservation | None:
        """Room for a request of ``size`` bytes; ``None`` if it did not fit within ``timeout``
        seconds (or can never fit). ``owner`` names the connection in log lines."""
        large = self.capacity > 0 and self._is_large(size)
        if large and size > self.large_capacity:
            return None
        queue = self._large_waiters if large else self._small_waiters
        # A large request never overtakes one that waits already (arrival order).
        if self._fits(size, large) and not (large and queue):
            return self._grant(size, large, owner)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(size, large, loop.create_future(), owner)
        queue.append(waiter)
        deadline = time.monotonic() + timeout
        granted: Reservation | None = None
        try:
            while not waiter.granted.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await asyncio.wait({waiter.granted}, timeout=min(remaining, STALL_CHECK_S)
                                   if large else remaining)
                if large and not waiter.granted.done():
                    self._reclaim_stalled()
            if waiter.granted.done():
                granted = waiter.granted.result()
            return granted
        finally:
            if waiter in queue:
                queue.remove(waiter)
            if granted is None:
                if waiter.granted.done():  # granted just as this caller gave up
                    self.release(waiter.granted.result())
                else:
                    waiter.granted.cancel()
                self._admit_waiters()  # the next in line may fit now

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (once; later calls do nothing) and admit who fits now."""
        if reservation.released:
            return
        reservation.released = True
        self.in_use -= reservation.size
        if reservation.large:
            self.in_use_large -= reservation.size
            self._holders.discard(reservation)
        self._admit_waiters()

    def _admit_waiters(self) -> None:
        for waiter in list(self._small_waiters):  # small ones in any order: each is tiny
            if self._fits(waiter.size, False):
                self._small_waiters.remove(waiter)
                if not waiter.granted.done():
                    waiter.granted.set_result(self._grant(waiter.size, False, waiter.owner))
        while self._large_waiters and self._fits(self._large_waiters[0].size, True):
            waiter = self._large_waiters.popleft()
            if not waiter.granted.done():
                waiter.granted.set_result(self._grant(waiter.size, True, waiter.owner))

    def fair_share(self) -> float:
        """Bytes of the large part each connection holding or waiting for large room is
        entitled to (the whole large part when nobody competes)."""
        contenders = sum(1 for h in self._holders if not h.reclaimed) + len(self._large_waiters)
        return self.large_capacity / max(1, contenders)

    def _reclaim_stalled(self) -> None:
        """Take back stalled reservations above their fair share, largest first, until the
        first waiting large request would fit (the holders close their connections)."""
        if not self._large_waiters:
            return
        head = self._large_waiters[0]
        leaving = sum(h.size for h in self._holders if h.reclaimed)  # their connections are closing
        lacking = max(self.in_use_large + head.size - self.large_capacity,
                      self.in_use + head.size - self.capacity) - leaving
        if lacking <= 0:
            return
        share = self.fair_share()
        now = time.monotonic()
        stalled = sorted((h for h in self._holders
                          if h.reading and not h.reclaimed and h.size > share
                          and (now - h.last_progress >= self.stall_s or self._too_slow(h, now))),
                         key=lambda h: (-h.size, h.last_progress))
        for holder in stalled:
            if lacking <= 0:
                break
            holder.reclaimed = True
            self.reclaimed += 1
            lacking -= holder.size
            why = (f"no bytes for {now - holder.last_progress:.1f} s"
                   if now - holder.last_progress >= self.stall_s else
                   f"{holder.received} bytes in {now - holder.granted_at:.1f} s, too slow to arrive "
                   f"within {self.pace_s:g} s")
            log.warning("reclaiming the %d-byte request of %s: %s, above its fair share of %d "
                        "bytes of queued.max.request.bytes while %d request(s) wait",
                        holder.size, holder.owner or "a connection", why, int(share),
                        len(self._large_waiters))

    def _too_slow(self, holder: Reservation, now: float) -> bool:
        """Whether ``holder``'s bytes arrive too slowly for it to be whole within ``pace_s`` of
        its grant (judged once it has had ``stall_s`` to show its pace)."""
        if self.pace_s is None or self.pace_s <= 0:
            return False
        elapsed = now - holder.granted_at
        return elapsed >= self.stall_s and holder.received < holder.size * elapsed / self.pace_s


_libc: ctypes.CDLL | None = None
_last_trim = 0.0
_TRIM_INTERVAL_S = 1.0
# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Buffers below this come from the heap, not from mmap: every converted chunk (at most 1 MiB), read
# window and request piece; a request frame of many MiB still gets its own mapping.
ALLOCATOR_MMAP_THRESHOLD = 4 << 20
# Free memory a heap keeps at its top before giving it back to the OS.
ALLOCATOR_TRIM_THRESHOLD = 32 << 20


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        _libc = ctypes.CDLL(name)
    return _libc


def tune_allocator() -> bool:
    """Keep chunk-sized buffers in the heap (glibc ``mallopt``); ``False`` where there is no
    glibc. For server processes (``lazyconv serve``, ``lazyconv gateway``).

    With glibc's defaults a worker thread's freed chunk (about 128 KiB) is given back to the OS
    (``madvise``) and the next one is faulted in again page by page: measured 17,000-50,000 page
    faults per GiB of converted Fetch responses, and 15 % of the server's CPU for uncompressed
    data. Fixed thresholds stop that (and glibc's dynamic threshold with it); memory still goes
    back after a burst through :func:`release_free_memory`, which trims regardless.
    """
    libc = _load_libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None:
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, ALLOCATOR_MMAP_THRESHOLD))
    ok = bool(mallopt(_M_TRIM_THRESHOLD, ALLOCATOR_TRIM_THRESHOLD)) and ok
    if not ok:
        log.warning("mallopt refused the allocator thresholds; keeping glibc's defaults")
    return ok


def release_free_memory() -> None:
    """Hand freed heap memory back to the OS (glibc ``malloc_trim``), at most once a second.

    Called when a connection that held a large request or response ends, so the server's RSS
    goes back down after a burst instead of staying at its peak."""
    global _last_trim
    now = time.monotonic()
    if now - _last_trim < _TRIM_INTERVAL_S:
        return
    _last_trim = now
    libc = _load_libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is not None:
        trim(0)
