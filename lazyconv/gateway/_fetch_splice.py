"""Fetch responses passed from the upstream broker's socket to the client's without entering the
gateway's memory (docs/guide/gateway.md, "Fetch": "Spliced responses").

A client that reads magic 2 with Fetch v10+ (every codec, zstd included) needs the broker's
answer as it is but for its correlation id, and for a few same-size fields that name brokers or
errors. When its request goes to one upstream leader whole, the gateway asks that leader the
client's own request (Fetch v10-15: v16 and v17 answers are v15's with one more tagged field the
broker sends only when a partition's leader moved) on a connection of the client's own, a
:class:`SpliceLane`, and answers with a :class:`SplicedFetchSend`: the response's size is the
upstream's, known from its first four bytes; its framing is read (peeked, then taken) and
rewritten in place (:class:`~lazyconv.protocol._fetch_scan.FetchResponseScanner` says where); the
record bytes between go from the upstream socket through a pipe into the client's socket with
``os.splice``. So a MiB of records costs the gateway a few system calls instead of two copies
through its own buffers, and it holds none of them: a lane is a socket, and the pipes (of 1 MiB:
a splice through the default 64 KiB pipe costs several times more per byte) are lent from a
small pool for as long as they hold bytes. When metrics are on, each batch's header is peeked
where it lies in the socket's queue (``SO_PEEK_OFF``; one batch per splice where the kernel
lacks it) to count the records passed on.

Only where the bytes are plain on both sides: the upstream cluster reached over PLAINTEXT
(TLS and SASL upstream use the gateway's own connections), and the client's socket not TLS
(else the same send copies through a buffer of 64 KiB instead of splicing). Anything that goes
wrong before the response's size is committed makes the gateway answer the fetch the usual
way; after it, the client's connection is closed, as a broker closes one whose response it
cannot finish.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import select
import socket
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Hashable

from lazyconv._send import Channel, Send, write_to_channel
from lazyconv.errors import RemoteProtocolError, UpstreamError
from lazyconv.gateway._fetch_ahead import AheadBudget, offset_after
from lazyconv.gateway._upstream import MAX_RESPONSE_SIZE, BrokerAddress
from lazyconv.protocol._connection import ClientConnection
from lazyconv.protocol._fetch_scan import FetchResponseScanner, ScanStep
from lazyconv.records._format import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
)

log = logging.getLogger(__name__)

__all__ = ["SPLICE_AVAILABLE", "SpliceLane", "SpliceLanes", "SplicedFetchSend"]

SPLICE_AVAILABLE = hasattr(os, "splice")
_PIPE_SIZE = 1 << 20  # asked of the kernel (fs.pipe-max-size); what it grants is used
_PIPES_KEPT = 16  # idle pipes kept for the next response (each counts in fs.pipe-user-pages-soft)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
# Peeking at an offset into a socket's queue (Linux 6.9+ for TCP; not in Python's socket module)
_SO_PEEK_OFF = getattr(socket, "SO_PEEK_OFF", 42) if sys.platform.startswith("linux") else None
_FIRST_PEEK = 16 << 10
_MAX_PEEK = 8 << 20  # the framing between two partitions' records that one step may need
_COPY_PIECE = 64 << 10  # what one read takes when the client's channel is not a socket
_MOVE = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_MORE = getattr(os, "SPLICE_F_MORE", 4)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ii")  # a response's size and correlation id
_POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)
_DROP_AT_MOST = 64 << 10  # an answer sent ahead and not used: read and dropped, else the lane closed


class _PipePool:
    """Pipes lent to spliced responses while they hold bytes (a response waiting for its client
    keeps its pipe; one waiting for the upstream has none), the idle ones kept for the next.
    Shared by the process's event loops."""

    def __init__(self) -> None:
        self._idle: list[tuple[int, int, int]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[int, int, int]:
        """(read end, write end, capacity) of an empty pipe."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(write, _F_SETPIPE_SZ, _PIPE_SIZE)
        except OSError:  # over the user's pipe pages or fs.pipe-max-size: the default then
            pass
        return read, write, fcntl.fcntl(write, _F_GETPIPE_SZ)

    def give(self, pipe: tuple[int, int, int]) -> None:
        """An empty pipe back."""
        with self._lock:
            if len(self._idle) < _PIPES_KEPT:
                self._idle.append(pipe)
                return
        self.discard(pipe)

    @staticmethod
    def discard(pipe: tuple[int, int, int]) -> None:
        """A pipe that may still hold bytes: closed."""
        os.close(pipe[0])
        os.close(pipe[1])


PIPES = _PipePool()


class SpliceLane:
    """A downstream connection's own plain connection to one upstream broker, for spliced
    fetches: one request at a time, its answer read by the :class:`SplicedFetchSend` that
    passes it on, and at most one more sent ahead (:meth:`send_ahead`: the client's next fetch
    as a sequential consumer asks it, whose answer waits in the socket's queue, its bytes
    reserved in ``budget`` and the lane closed if the client does not ask within ``keep_s``).
    Closed with the client's connection (it lives in the session's extras), and whenever a
    response through it could not be read to its end."""

    def __init__(self, address: BrokerAddress, client_id: str | None, *,
                 budget: AheadBudget | None = None, keep_s: float = 2.0) -> None:
        self.address = address
        self.encoder = ClientConnection(client_id, max_response_size=MAX_RESPONSE_SIZE)
        self.sock: socket.socket | None = None
        #: whether its socket peeks at an offset (SO_PEEK_OFF): None until first tried
        self.peeks_ahead: bool | None = None if _SO_PEEK_OFF is not None else False
        self.budget = budget
        self.keep_s = keep_s
        #: the request sent ahead: what it asked (a key) and its correlation id
        self.ahead: tuple[Hashable, int] | None = None
        self._lowat = 1  # the socket's SO_RCVLOWAT
        self._reserved = 0
        self._expiry: asyncio.TimerHandle | None = None

    @property
    def closed(self) -> bool:
        return self.sock is None

    async def open(self, timeout: float) -> None:
        """Connect (raises :class:`UpstreamError`)."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(self.address.host, self.address.port,
                                           type=socket.SOCK_STREAM)
            family, kind, proto, _, where = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise UpstreamError(f"cannot reach upstream broker {self.address}: {exc}") from None
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, where), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, asyncio.TimeoutError) as exc:
            sock.close()
            raise UpstreamError(f"cannot reach upstream broker {self.address}: "
                                f"{exc or 'timed out'}") from None
        except BaseException:  # cancelled
            sock.close()
            raise
        self.sock = sock
        self._lowat = 1

    def want(self, n: int) -> None:
        """The socket is readable once ``n`` bytes are in its queue (``SO_RCVLOWAT``): a wait
        for bytes a peek found too few of must not wake at once on the few already there."""
        sock = self.sock
        if sock is not None and n != self._lowat:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(1, n))
            self._lowat = n

    def hung_up(self) -> bool:
        """Whether the peer closed its side (the bytes it sent may still be queued)."""
        sock = self.sock
        if sock is None:
            return True
        poller = select.poll()
        poller.register(sock.fileno(), _POLLRDHUP)
        return any(events & (_POLLRDHUP | select.POLLHUP | select.POLLERR)
                   for _, events in poller.poll(0))

    def peek(self, offset: int, n: int) -> bytes | None:
        """Up to ``n`` bytes at ``offset`` into the socket's queue, left there (``None``: none
        there yet); raises :class:`UpstreamError` when the upstream closed. An ``offset`` past
        0 needs :attr:`peeks_ahead`."""
        sock = self.sock
        assert sock is not None
        if self.peeks_ahead is not False:
            assert _SO_PEEK_OFF is not None
            try:  # once set, every peek starts at the offset: it is set before each
                sock.setsockopt(socket.SOL_SOCKET, _SO_PEEK_OFF, offset)
                self.peeks_ahead = True
            except OSError:
                self.peeks_ahead = False
        if offset and not self.peeks_ahead:
            raise UpstreamError("this kernel does not peek into a TCP socket at an offset")
        try:
            data = sock.recv(n, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:  # reset: before the size is written the fetch goes the usual way
            self.close()
            raise UpstreamError(f"upstream broker {self.address}: {exc}") from None
        if not data:
            raise UpstreamError(f"upstream broker {self.address} closed the connection inside "
                                f"a response")
        return data

    async def ask(self, request: bytes, correlation_id: int, timeout: float) -> int:
        """Send a request and wait for its answer's first bytes: the answer's frame size
        (raises :class:`UpstreamError`, the lane closed, when it does not come or is not the
        answer to ``request``)."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        if sock is None:
            raise UpstreamError(f"the spliced lane to {self.address} is closed")
        self.want(1)
        head = bytearray(_HEAD.size)
        try:
            await asyncio.wait_for(loop.sock_sendall(sock, request), timeout)
            view = memoryview(head)
            got = 0
            deadline = loop.time() + timeout
            while got < len(head):
                n = await asyncio.wait_for(loop.sock_recv_into(sock, view[got:]),
                                           max(0.001, deadline - loop.time()))
                if n == 0:
                    raise UpstreamError(f"upstream broker {self.address} closed the connection")
                got += n
        except (OSError, asyncio.TimeoutError) as exc:
            self.close()
            raise UpstreamError(f"fetch to upstream broker {self.address} failed: "
                                f"{exc or 'no answer in time'}") from None
        except BaseException:
            self.close()
            raise
        size, answered = _HEAD.unpack(head)
        if answered != correlation_id or not _HEAD.size <= size <= MAX_RESPONSE_SIZE:
            self.close()
            raise UpstreamError(f"upstream broker {self.address} answered correlation id "
                                f"{answered} with {size} bytes to request {correlation_id}")
        return size

    # -- the request sent ahead ------------------------------------------------------------

    def send_ahead(self, request: bytes, key: Hashable, correlation_id: int, reserve: int) -> bool:
        """Send ``request`` now, without waiting (False, nothing sent: over the budget, or a
        socket that does not take it whole, which closes the lane)."""
        sock = self.sock
        if sock is None or self.ahead is not None:
            return False
        if self.budget is not None and not self.budget.reserve(reserve):
            return False
        self._reserved = reserve
        try:
            sent = sock.send(request)
        except OSError:
            sent = -1
        if sent != len(request):
            self.close()
            return False
        self.ahead = (key, correlation_id)
        self._expiry = asyncio.get_running_loop().call_later(self.keep_s, self._expire)
        return True

    def _expire(self) -> None:
        if self.ahead is not None:  # the client stopped fetching: its answer is let go
            self.close()

    def _release(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self.budget is not None and self._reserved:
            self.budget.release(self._reserved)
        self._reserved = 0

    async def take_ahead(self, key: Hashable, timeout: float,
                         usable: Callable[[int], Awaitable[bool]]) -> int | None:
        """The size of the answer sent ahead when it asked ``key`` and ``usable(size)`` says
        so; else ``None``, that answer read and dropped (or the lane closed, for a large
        one)."""
        assert self.ahead is not None
        asked, correlation_id = self.ahead
        self.ahead = None
        self._release()
        size = await self.ask(b"", correlation_id, timeout)
        if asked == key and await usable(size):
            return size
        await self._drop(size - 4, timeout)
        return None

    async def _drop(self, n: int, timeout: float) -> None:
        """Read and forget the rest of an answer: a small one; a large one closes the lane."""
        sock = self.sock
        if sock is None:
            return
        if n > _DROP_AT_MOST:
            self.close()
            return
        self.want(1)
        loop = asyncio.get_running_loop()
        try:
            while n > 0:
                piece = await asyncio.wait_for(loop.sock_recv(sock, n), timeout)
                if not piece:
                    raise OSError("closed")
                n -= len(piece)
        except (OSError, asyncio.TimeoutError):
            self.close()

    async def peek_until(self, n: int, timeout: float,
                         decide: Callable[[bytes], bool | None]) -> bool:
        """``decide(bytes)`` over the first bytes of the answer being read (left in the queue),
        as soon as it decides (``None``: not from these bytes), on up to ``n`` bytes; False when
        it cannot or ``timeout`` passes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = -1
        while True:
            data = self.peek(0, n)
            if data is not None and len(data) == seen and self.hung_up():
                self.want(1)
                return False  # no more will come: whoever reads on finds the end
            seen = len(data) if data is not None else -1
            if data is not None:
                decided = decide(data)
                if decided is not None:
                    self.want(1)
                    return decided
                if len(data) >= n:
                    self.want(1)
                    return False
            if loop.time() >= deadline:
                self.want(1)
                return False
            self.want(len(data) + 1 if data else 1)
            sock = self.sock
            assert sock is not None
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(sock.fileno(), _set_ready, ready)
            try:
                await asyncio.wait_for(ready, max(0.001, deadline - loop.time()))
            except asyncio.TimeoutError:
                pass
            finally:
                loop.remove_reader(sock.fileno())

    def close(self) -> None:
        self.ahead = None
        self._release()
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


class SpliceLanes:
    """A client's two lanes to one broker: while one passes an answer on, the client's next
    fetch is asked ahead on the other, so that the broker reads it while the first answer's
    tail is still on its way (a broker answers one connection's requests one after another)."""

    def __init__(self, address: BrokerAddress, client_id: str | None, *,
                 budget: AheadBudget | None = None) -> None:
        self.lanes = (SpliceLane(address, client_id, budget=budget),
                      SpliceLane(address, client_id, budget=budget))

    def with_ahead(self) -> SpliceLane | None:
        """The lane that holds a request sent ahead, if one does."""
        return next((lane for lane in self.lanes if lane.ahead is not None), None)

    def other(self, lane: SpliceLane) -> SpliceLane:
        return self.lanes[1] if lane is self.lanes[0] else self.lanes[0]

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()


def _set_ready(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class SplicedFetchSend(Send):
    """A Fetch response of ``frame_size`` bytes (after the size), whose upstream size and
    correlation id the ``lane`` has read: written with the client's ``correlation_id``, its
    framing rewritten by ``rewrite(step, framing)`` (same size), its records spliced (see the
    module docstring). Each batch's header is peeked on the way: :attr:`records_out` counts the
    records of the whole batches passed on, :attr:`next_offsets` the offset after each
    partition's last whole batch (its next fetch, as a sequential consumer asks it), and
    ``on_known`` is called as soon as they are all known: once the last partition's last batch
    header has arrived (else once the response is written whole), while its tail may still be
    on its way."""

    def __init__(self, lane: SpliceLane, scanner: FetchResponseScanner, frame_size: int,
                 correlation_id: int, rewrite: Callable[[ScanStep, bytearray], None],
                 source_timeout: float, *,
                 on_known: Callable[[SplicedFetchSend], None] | None = None) -> None:
        self.lane = lane
        self.scanner = scanner
        self.rewrite = rewrite
        self.source_timeout = source_timeout
        self.on_known = on_known
        self._last = False  # the records being passed on are the response's last
        #: (topic name or id bytes, partition) → the offset after its last whole batch
        self.next_offsets: dict[tuple[str | bytes, int], int] = {}
        self._partition: tuple[str | bytes, int] | None = None  # whose records are passed on
        self.records_out = 0
        self._size = 4 + frame_size
        self._written = 0
        self._out = memoryview(b"")
        self._head = _HEAD.pack(frame_size, correlation_id)  # sent with the first framing
        self._records_left = 0  # of the partition whose records are being passed on
        self._known = 0  # of those, the bytes whose batch headers were read
        self._pipe: tuple[int, int, int] | None = None  # lent while it holds bytes
        self._piped = 0  # in the pipe, not yet in the client's socket
        self._peek = _FIRST_PEEK
        self._waiting_source = False
        self._need = 1
        self._last_wait: tuple[int, int, int, int] | None = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def written(self) -> int:
        return self._written

    def source_fileno(self) -> int | None:
        sock = self.lane.sock
        if not self._waiting_source or sock is None:
            return None
        self.lane.want(self._need)
        return sock.fileno()

    def _wait_source(self, need: int = 1) -> bool:
        """Wait until ``need`` bytes (from where the response is read) are in the socket's
        queue: fewer are there now. A socket that woke the last wait without a byte more is
        one whose peer hung up (readable at its end whatever ``SO_RCVLOWAT`` says)."""
        progress = (self._written, self.scanner.remaining, self._known, need)
        if progress == self._last_wait and self.lane.hung_up():
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        self._last_wait = progress
        self._waiting_source = True
        self._need = need
        return False

    def write_to(self, channel: Channel) -> int:
        self._waiting_source = False
        self._need = 1
        sock = self.lane.sock
        if sock is None:
            raise UpstreamError(f"the connection to upstream broker {self.lane.address} closed "
                                f"inside a response")
        splice = type(channel) is socket.socket and SPLICE_AVAILABLE
        start = self._written
        try:
            while self._written < self._size:
                if self._out:
                    if not self._write_out(channel):
                        break
                elif self._piped:
                    if not self._from_pipe(channel):
                        break
                elif self._records_left:
                    if self._known < self._records_left:
                        self._walk_batches()
                    if not self._known:  # the next batch's header has not arrived whole
                        self._wait_source(min(RECORD_BATCH_OVERHEAD, self._records_left))
                        break
                    if not (self._to_pipe(sock) if splice else self._copy(sock)):
                        break
                elif not self._next_framing(sock):
                    break
                if self._written - start >= (4 << 20):
                    break  # let the loop serve the others; called again at once
        except (BlockingIOError, InterruptedError):
            pass
        if self._written >= self._size:
            self._known_all()
        return self._written - start

    def _known_all(self) -> None:
        known, self.on_known = self.on_known, None
        if known is not None:
            known(self)

    # -- the steps (each False when it has to wait) -------------------------------------------

    def _more_follows(self, n: int) -> bool:
        return self._written + n < self._size

    def _write_out(self, channel: Channel) -> bool:
        out = self._out
        if type(channel) is socket.socket:
            n = channel.send(out, _MSG_MORE if self._more_follows(len(out)) else 0)
        else:
            n = write_to_channel(channel, out)
        self._written += n
        self._out = out[n:]
        return not self._out

    def _from_pipe(self, channel: Channel) -> bool:
        pipe = self._pipe
        assert pipe is not None
        flags = _MOVE | (_MORE if self._more_follows(self._piped) else 0)
        n = os.splice(pipe[0], channel.fileno(), self._piped, flags=flags)  # type: ignore[union-attr]
        if n <= 0:
            raise UpstreamError("a spliced response's pipe gave back nothing")
        self._written += n
        self._piped -= n
        if self._piped:
            return False
        self._pipe = None
        PIPES.give(pipe)
        return True

    def _to_pipe(self, sock: socket.socket) -> bool:
        pipe = self._pipe = self._pipe or PIPES.take()
        try:
            n = os.splice(sock.fileno(), pipe[1], min(self._known, pipe[2]), flags=_MOVE)
        except (BlockingIOError, InterruptedError):
            return self._wait_source()
        except OSError as exc:
            raise UpstreamError(f"upstream broker {self.lane.address}: {exc}") from None
        if n == 0:
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        self._took(n)
        self._piped = n
        return True

    def _copy(self, sock: socket.socket) -> bool:
        try:
            data = sock.recv(min(self._known, _COPY_PIECE))
        except (BlockingIOError, InterruptedError):
            return self._wait_source()
        except OSError as exc:
            raise UpstreamError(f"upstream broker {self.lane.address}: {exc}") from None
        if not data:
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        self._took(len(data))
        self._out = memoryview(data)
        return True

    def _took(self, n: int) -> None:
        self._records_left -= n
        self._known -= n
        self.scanner.records_read(n)

    def _walk_batches(self) -> None:
        """Count the batches whose headers have arrived past those counted (only the next one
        where the socket cannot peek at an offset); a partial last batch, or bytes that are not
        a batch, are passed on as they are, uncounted."""
        lane = self.lane
        while self._known < self._records_left:
            if self._known and lane.peeks_ahead is False:
                return
            want = min(RECORD_BATCH_OVERHEAD, self._records_left - self._known)
            header = lane.peek(self._known, want)
            if header is None or len(header) < want:
                return  # not arrived yet
            whole = self._records_left - self._known
            if len(header) >= RECORD_BATCH_OVERHEAD:
                length = LOG_OVERHEAD + _I32.unpack_from(header, SIZE_OFFSET)[0]
                if RECORD_BATCH_OVERHEAD <= length <= whole:
                    whole = length
                    if header[MAGIC_OFFSET] >= 2:
                        self.records_out += _I32.unpack_from(header, RECORDS_COUNT_OFFSET)[0]
                    if self._partition is not None:
                        self.next_offsets[self._partition] = offset_after(header, 0, length)
            self._known += whole
        if self._last and self._known >= self._records_left:
            self._known_all()

    def _next_framing(self, sock: socket.socket) -> bool:
        scanner = self.scanner
        while True:
            window = min(self._peek, scanner.remaining)
            data = self.lane.peek(0, window)
            if data is None:
                return self._wait_source()
            try:
                step = scanner.scan(data)
            except RemoteProtocolError as exc:
                raise UpstreamError(f"upstream broker {self.lane.address} sent a Fetch response "
                                    f"that does not parse: {exc}") from None
            if step is not None:
                break
            if len(data) < window:  # the rest has not arrived
                return self._wait_source(len(data) + 1)
            if window >= _MAX_PEEK:
                raise UpstreamError(f"upstream broker {self.lane.address} sent a Fetch response "
                                    f"with more than {_MAX_PEEK} bytes between two records")
            self._peek = min(_MAX_PEEK, self._peek * 4)
        framing = bytearray(step.framing)
        view = memoryview(framing)
        got = 0
        while got < len(framing):  # peeked: these bytes are there
            n = sock.recv_into(view[got:])
            if n == 0:
                raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                    f"inside a response")
            got += n
        self.rewrite(step, framing)
        if self._head:  # one send for the size, the correlation id and the first framing
            view = memoryview(self._head + framing)
            self._head = b""
        self._out = view
        self._records_left = step.records
        self._known = 0
        part = step.partition
        self._partition = (part.topic, part.partition) if part is not None else None
        self._last = step.last
        return True

    def close(self) -> None:
        """Give the lane up unless the whole response went through it (an abandoned response
        leaves its rest in the socket, and in its pipe, which is closed too)."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            if self._piped:
                PIPES.discard(pipe)
            else:
                PIPES.give(pipe)
        if self._written < self._size or self._piped:
            self.lane.close()

