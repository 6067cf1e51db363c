"""Fetch responses passed from the upstream broker's socket to the client's without entering the
gateway's memory (docs/guide/gateway.md, "Fetch": "Spliced responses").

A client that reads magic 2 with a flexible Fetch version (v12+) needs the broker's answer as it
is but for its correlation id, and for a few same-size fields that name brokers or errors. When
its request goes to one upstream leader whole, the gateway asks that leader the client's own
request (Fetch v12-15: v16 and v17 answers are v15's with one more tagged field the broker sends
only when a partition's leader moved) on a connection of the client's own, a
:class:`SpliceLane`, and answers with a :class:`SplicedFetchSend`: the response's size is the
upstream's, known from its first four bytes; its framing is read (peeked, then taken) and
rewritten in place (:class:`~lazyconv.protocol._fetch_scan.FetchResponseScanner` says where); the
record bytes between go from the upstream socket through a pipe into the client's socket with
``os.splice``, each batch's header peeked on the way to count its records. So a MiB of records
costs the gateway a few system calls instead of two copies through its own buffers, and it
holds none of them: a lane holds a pipe (the kernel's 64 KiB) and a socket.

Only where the bytes are plain on both sides: the upstream cluster reached over PLAINTEXT
(TLS and SASL upstream use the gateway's own connections), and the client's socket not TLS
(else the same send copies through a buffer of 64 KiB instead of splicing). Anything that goes
wrong before the response's size is committed makes the gateway answer the fetch the usual
way; after it, the client's connection is closed, as a broker closes one whose response it
cannot finish.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections.abc import Callable

from lazyconv._send import Channel, Send, write_to_channel
from lazyconv.errors import RemoteProtocolError, UpstreamError
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

__all__ = ["SPLICE_AVAILABLE", "SpliceLane", "SplicedFetchSend"]

SPLICE_AVAILABLE = hasattr(os, "splice")
_PIPE_CAPACITY = 64 << 10  # a pipe's default size: not raised (it counts against a user's limit)
_FIRST_PEEK = 16 << 10
_MAX_PEEK = 1 << 20  # the framing between two partitions' records that one step may need
_COPY_PIECE = 64 << 10  # what one read takes when the client's channel is not a socket
_MOVE = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_MORE = getattr(os, "SPLICE_F_MORE", 4)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ii")  # a response's size and correlation id


class SpliceLane:
    """A downstream connection's own plain connection to one upstream broker, for spliced
    fetches: one request at a time, its answer read by the :class:`SplicedFetchSend` that
    passes it on. Closed with the client's connection (it lives in the session's extras), and
    whenever a response through it could not be read to its end."""

    def __init__(self, address: BrokerAddress, client_id: str | None) -> None:
        self.address = address
        self.encoder = ClientConnection(client_id, max_response_size=MAX_RESPONSE_SIZE)
        self.sock: socket.socket | None = None
        self._pipe: tuple[int, int] | None = None

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
            self._pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, asyncio.TimeoutError) as exc:
            sock.close()
            raise UpstreamError(f"cannot reach upstream broker {self.address}: "
                                f"{exc or 'timed out'}") from None
        self.sock = sock

    @property
    def pipe(self) -> tuple[int, int]:
        assert self._pipe is not None
        return self._pipe

    async def ask(self, request: bytes, correlation_id: int, timeout: float) -> int:
        """Send a request and wait for its answer's first bytes: the answer's frame size
        (raises :class:`UpstreamError`, the lane closed, when it does not come or is not the
        answer to ``request``)."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        if sock is None:
            raise UpstreamError(f"the spliced lane to {self.address} is closed")
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

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            for fd in pipe:
                os.close(fd)


class SplicedFetchSend(Send):
    """A Fetch response of ``frame_size`` bytes (after the size), whose upstream size and
    correlation id the ``lane`` has read: written with the client's ``correlation_id``, its
    framing rewritten by ``rewrite(step, framing)`` (same size), its records spliced (see the
    module docstring). ``records_out``: the records of the whole batches passed on."""

    def __init__(self, lane: SpliceLane, scanner: FetchResponseScanner, frame_size: int,
                 correlation_id: int, rewrite: Callable[[ScanStep, bytearray], None],
                 source_timeout: float) -> None:
        self.lane = lane
        self.scanner = scanner
        self.rewrite = rewrite
        self.source_timeout = source_timeout
        self.records_out = 0
        self._size = 4 + frame_size
        self._written = 0
        self._out = memoryview(_HEAD.pack(frame_size, correlation_id))
        self._records_left = 0  # of the partition whose records are being passed on
        self._batch_left = 0  # of its batch whose header was peeked
        self._piped = 0  # in the lane's pipe, not yet in the client's socket
        self._peek = _FIRST_PEEK
        self._waiting_source = False

    @property
    def size(self) -> int:
        return self._size

    @property
    def written(self) -> int:
        return self._written

    def source_fileno(self) -> int | None:
        sock = self.lane.sock
        return sock.fileno() if self._waiting_source and sock is not None else None

    def write_to(self, channel: Channel) -> int:
        self._waiting_source = False
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
                    if not self._batch_left and not self._next_batch(sock):
                        break
                    if not (self._to_pipe(sock) if splice else self._copy(sock)):
                        break
                elif not self._next_framing(sock):
                    break
                if self._written - start >= (4 << 20):
                    break  # let the loop serve the others; called again at once
        except (BlockingIOError, InterruptedError):
            pass
        return self._written - start

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
        flags = _MOVE | (_MORE if self._more_follows(self._piped) else 0)
        n = os.splice(self.lane.pipe[0], channel.fileno(), self._piped, flags=flags)  # type: ignore[union-attr]
        if n <= 0:
            raise UpstreamError("the spliced lane's pipe gave back nothing")
        self._written += n
        self._piped -= n
        return not self._piped

    def _to_pipe(self, sock: socket.socket) -> bool:
        try:
            n = os.splice(sock.fileno(), self.lane.pipe[1], min(self._batch_left, _PIPE_CAPACITY),
                          flags=_MOVE)
        except (BlockingIOError, InterruptedError):
            self._waiting_source = True
            return False
        if n == 0:
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        self._took(n)
        self._piped = n
        return True

    def _copy(self, sock: socket.socket) -> bool:
        try:
            data = sock.recv(min(self._batch_left, _COPY_PIECE))
        except (BlockingIOError, InterruptedError):
            self._waiting_source = True
            return False
        if not data:
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        self._took(len(data))
        self._out = memoryview(data)
        return True

    def _took(self, n: int) -> None:
        self._records_left -= n
        self._batch_left -= n
        self.scanner.records_read(n)

    def _next_batch(self, sock: socket.socket) -> bool:
        """Peek at the next batch's header: its records are counted, and it is passed on whole
        (a partial last batch, or bytes that are not a batch, are passed on as they are)."""
        want = min(RECORD_BATCH_OVERHEAD, self._records_left)
        header = self._peek_at(sock, want)
        if header is None:
            return False
        self._batch_left = self._records_left
        if len(header) >= RECORD_BATCH_OVERHEAD:
            length = _I32.unpack_from(header, SIZE_OFFSET)[0]
            whole = LOG_OVERHEAD + length
            if RECORD_BATCH_OVERHEAD <= whole <= self._records_left:
                self._batch_left = whole
                if header[MAGIC_OFFSET] == 2:
                    self.records_out += _I32.unpack_from(header, RECORDS_COUNT_OFFSET)[0]
        return True

    def _next_framing(self, sock: socket.socket) -> bool:
        scanner = self.scanner
        while True:
            window = min(self._peek, scanner.remaining)
            data = self._peek_at(sock, window, at_least=1)
            if data is None:
                return False
            try:
                step = scanner.scan(data)
            except RemoteProtocolError as exc:
                raise UpstreamError(f"upstream broker {self.lane.address} sent a Fetch response "
                                    f"that does not parse: {exc}") from None
            if step is not None:
                break
            if len(data) < window:  # the rest has not arrived
                self._waiting_source = True
                return False
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
        self._out = view
        self._records_left = step.records
        self._batch_left = 0
        return True

    def _peek_at(self, sock: socket.socket, n: int, at_least: int | None = None) -> bytes | None:
        """The next ``n`` bytes of the response left where they are (fewer when ``at_least``
        of them are there); ``None``: they have not all arrived yet (wait for the socket)."""
        try:
            data = sock.recv(n, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            data = None
        if data == b"":
            raise UpstreamError(f"upstream broker {self.lane.address} closed the connection "
                                f"inside a response")
        if data is None or len(data) < (n if at_least is None else at_least):
            self._waiting_source = True
            return None
        return data

    def close(self) -> None:
        """Give the lane up unless the whole response went through it (an abandoned response
        leaves its rest in the socket and the pipe)."""
        if self._written < self._size or self._piped:
            self.lane.close()

