"""The asyncio side of every endpoint (``serve`` and ``gateway``): listening sockets, request
framing, admission limits, timeouts, and writing Sends with backpressure.

Each connection is served by one task that reads a request (int32 size, then that many bytes),
hands it to the :class:`~lazyconv.net._model.RequestHandler`'s ``handle``, and writes the response before reading the next request —
per connection, requests are answered one at a time and in order, as a Kafka broker does (it
mutes a channel while its response is in flight). Pipelined requests simply wait in the socket.

Responses are :class:`~lazyconv._send.Send` objects written straight to the raw non-blocking
socket: ``write_to`` returns 0 when the socket buffer is full, and the task then waits for
writability with ``loop.add_writer``. So a slow reader holds at most the bytes of one Send step
(one converted chunk for lazy conversion; nothing for zero-copy file regions, which go out with
``os.sendfile``), never a whole response: memory is bounded by connections × chunk size.

A request larger than ``max_request_size``, a negative size, or a request the handler refuses
(:class:`~lazyconv.errors.RemoteProtocolError`, logged as the client's fault) closes that
connection (Kafka does the same); nothing a client sends can stop the server. An answer the
handler cannot encode (:class:`~lazyconv.errors.LocalProtocolError`) also ends the connection,
but is logged as an error of ours.
Responses that convert records while they are written (``Response.off_loop``) are written
step by step on the conversion worker pool (:mod:`lazyconv.net._workers`): the compiled kernel
and the codecs release the GIL, so N converting connections use every core while the event loop
only moves bytes; one task per connection still awaits each step, so per-connection order holds.
What a connection may cost is bounded by :class:`~lazyconv.net._limits.ConnectionLimits`:
the bytes of requests being read or answered over all connections (``queued.max.request.bytes``,
shared fairly: small requests have a reserved slice, and a stalled large request above its fair
share is cut after ``request_stall_ms`` when others wait; see :mod:`lazyconv.net._limits`),
idle, request-read and write timeouts (docs/guide/robustness.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lazyconv._send import Send
from lazyconv.errors import LazyconvError, LocalProtocolError
from lazyconv.net._limits import (
    DEFAULT_MAX_REQUEST_SIZE,
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    STALL_CHECK_S,
    ConnectionLimits,
    RequestMemoryPool,
    Reservation,
    release_free_memory,
)
from lazyconv.net._model import Listener, RequestHandler, Response
from lazyconv.net._remote_send import DONE, NOT_STARTED, PEER_GONE, TIMED_OUT
from lazyconv.net._sender_pool import SenderPool
from lazyconv.net._workers import ConversionWorkers

log = logging.getLogger(__name__)

__all__ = ["KafkaServer", "ListenerSpec", "ConnectionLimits", "DEFAULT_MAX_REQUEST_SIZE"]

# Kafka's socket.send.buffer.bytes default; -1 leaves the OS default (autotuned, often MBs).
DEFAULT_SEND_BUFFER = 102400
_RECV_PIECE = 65536
# Read at once when a connection becomes readable: the size field and, for most requests, the
# whole request (one recv, one future and one timer; before, 3 recv calls and two tasks with a
# timer each per Fetch). Bytes of a next request read along are kept for it: at most this much
# per connection outside queued.max.request.bytes, which counts a request once its size is read.
_READ_AHEAD = 8192
_LARGE_REQUEST = 1 << 20  # a connection that read one this large gives memory back when it ends


@dataclass(frozen=True)
class ListenerSpec:
    """Where to listen: ``port`` 0 picks a free port. ``advertised_host`` defaults to ``host``."""

    host: str = "127.0.0.1"
    port: int = 0
    produce_delay_ms: int = 0
    advertised_host: str | None = None


class _ConnectionClosed(Exception):
    pass


class KafkaServer:
    """Serves one request handler (``serve``'s broker, the gateway) on one or more listeners
    (each advertised as its own node)."""

    def __init__(self, broker_factory: Callable[[list[Listener]], RequestHandler],
                 listeners: list[ListenerSpec], *,
                 max_request_size: int = DEFAULT_MAX_REQUEST_SIZE,
                 send_buffer_bytes: int = DEFAULT_SEND_BUFFER,
                 limits: ConnectionLimits | None = None,
                 workers: ConversionWorkers | None = None,
                 senders: SenderPool | None = None) -> None:
        """``broker_factory(listeners)`` builds the handler once the ports are known;
        ``limits`` (if given) replaces ``max_request_size``; ``workers``: the pool that writes
        converting responses (one thread per core by default); ``senders``: sender processes
        that write the responses a handler describes for them (``Response.remote``)."""
        self._broker_factory = broker_factory
        self._specs = listeners
        if limits is None:
            limits = ConnectionLimits(max_request_size=max_request_size,
                                      queued_max_request_bytes=max(DEFAULT_QUEUED_MAX_REQUEST_BYTES,
                                                                   max_request_size))
        self.limits = limits
        self.max_request_size = limits.max_request_size
        self.request_memory = RequestMemoryPool(limits.queued_max_request_bytes,
                                                max_request_size=limits.max_request_size,
                                                stall_s=limits.request_stall_ms / 1000)
        if 0 < self.request_memory.capacity and \
                self.request_memory.reserved < self.request_memory.small_request_bytes:
            log.warning("queued.max.request.bytes (%d) leaves %d bytes beside one request of "
                        "socket.request.max.bytes (%d): small requests have no room of their own "
                        "and may wait behind large ones", limits.queued_max_request_bytes,
                        self.request_memory.reserved, limits.max_request_size)
        self.send_buffer_bytes = send_buffer_bytes
        self.broker: RequestHandler | None = None
        self.workers = workers if workers is not None else ConversionWorkers()
        self.senders = senders
        self._fallback_warned_at = -60.0
        self.listeners: list[Listener] = []
        self._sockets: list[socket.socket] = []
        self._accept_tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_served = 0

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        """Bind every listener, build the broker and start accepting."""
        for node_id, spec in enumerate(self._specs):
            sock = socket.create_server((spec.host, spec.port), reuse_port=False, backlog=512)
            sock.setblocking(False)
            self._sockets.append(sock)
            port = sock.getsockname()[1]
            host = spec.advertised_host or spec.host
            if host in ("0.0.0.0", "::", ""):
                host = socket.gethostname()
            self.listeners.append(Listener(node_id, host, port, spec.produce_delay_ms))
        self.broker = self._broker_factory(self.listeners)
        loop = asyncio.get_running_loop()
        self.broker.start(loop)
        for sock, listener in zip(self._sockets, self.listeners, strict=True):
            self._accept_tasks.append(loop.create_task(self._accept_loop(sock, listener)))
        for listener in self.listeners:
            log.info("listening on %s:%d as node %d", listener.host, listener.port, listener.node_id)

    async def close(self) -> None:
        """Stop accepting, end every connection and release the sockets."""
        for task in self._accept_tasks:
            task.cancel()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._accept_tasks, *self._connections, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        if self.broker is not None:
            self.broker.close()
        self.workers.close()
        if self.senders is not None:
            self.senders.close()

    async def serve_forever(self) -> None:
        await asyncio.gather(*self._accept_tasks)

    async def _accept_loop(self, server_sock: socket.socket, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(server_sock)
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                log.warning("accept failed on port %d: %s", listener.port, exc)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            self.connections_served += 1
            task = loop.create_task(self._serve_connection(conn, peer, listener))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve_connection(self, conn: socket.socket, peer, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        assert self.broker is not None
        limits = self.limits
        read_timeout = limits.request_read_timeout_ms / 1000
        large = False
        # A handler may keep state per connection (the gateway: its upstream connections).
        new_session = getattr(self.broker, "new_session", None)
        session = new_session(_host_of(peer)) if new_session is not None else None
        ahead = b""  # bytes read past the request being handled: the start of the next
        # The last response went through a sender: its wait for the report gave the loop to
        # the others, and a busy server usually finds the next request there already (a client
        # sends it once its response is in), read without a reader, a future and a timer.
        waited = False
        try:
            while True:
                if not ahead:
                    try:
                        ahead = await _recv_when_readable(loop, conn, _READ_AHEAD,
                                                          limits.connections_max_idle_ms / 1000,
                                                          try_now=waited)
                        waited = False
                    except asyncio.TimeoutError:
                        log.info("closing %s: idle for %d ms (connections.max.idle.ms)", peer,
                                 limits.connections_max_idle_ms)
                        return
                    if not ahead:
                        return  # clean close between requests
                if len(ahead) < 4:
                    # the rest of the size field: idle as much as reading (whichever ends first)
                    ahead += await _recv_within(
                        loop, conn, 4 - len(ahead), min(read_timeout, limits.connections_max_idle_ms / 1000))
                size = int.from_bytes(ahead[:4], "big", signed=True)
                if size < 8 or size > self.max_request_size:
                    log.warning("closing %s: request size %d outside [8, %d]", peer, size,
                                self.max_request_size)
                    return
                reservation = await self.request_memory.reserve(size, read_timeout, str(peer))
                if reservation is None:
                    log.warning("closing %s: %d request bytes did not fit in queued.max.request.bytes "
                                "(%d) within %.0f s", peer, size, self.request_memory.capacity,
                                read_timeout)
                    return
                large = large or size > _LARGE_REQUEST
                try:
                    frame, ahead = ahead[4:4 + size], ahead[4 + size:]
                    if len(frame) < size:
                        frame = await _recv_within(loop, conn, size, read_timeout, reservation,
                                                   start=frame)
                    reservation.read()  # answering it (a Produce's append, an fsync) is no stall
                    try:
                        if session is None:
                            response = await self.broker.handle(frame, listener, _host_of(peer))
                        else:
                            handler: Any = self.broker  # a handler with sessions (see model)
                            response = await handler.handle(frame, listener, _host_of(peer),
                                                             session)
                    except LocalProtocolError as exc:
                        # our answer could not be encoded: a lazyconv bug, not the client's
                        log.error("closing %s: the answer to its request could not be encoded "
                                  "(a lazyconv bug, please report it): %s", peer, exc)
                        return
                    except LazyconvError as exc:
                        log.warning("closing %s: invalid request: %s", peer, exc)
                        return
                    finally:
                        del frame
                finally:
                    self.request_memory.release(reservation)
                if response is None:
                    continue
                try:
                    if response.remote is not None and self.senders is not None and \
                            await self._write_remote(conn, peer, response):
                        waited = True
                        continue
                    await _write_send(loop, conn, response, limits.write_timeout_ms / 1000,
                                      self.workers if response.off_loop else None)
                except LazyconvError as exc:
                    # e.g. a segment truncated under a zero-copy send: the committed size can no
                    # longer be honoured, so the connection must end.
                    log.error("aborting the response to %s: %s", peer, exc)
                    return
                finally:
                    response.close()
        except (ConnectionError, _ConnectionClosed) as exc:
            log.info("connection from %s ended: %s", peer, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug must end this connection only, never the server.
            log.exception("internal error serving %s; closing the connection", peer)
        finally:
            if session is not None:
                session.close()
            with contextlib.suppress(OSError):
                conn.close()
            if large:
                release_free_memory()


    async def _write_remote(self, conn: socket.socket, peer: object, response: Response) -> bool:
        """Have a sender process write ``response``; False when none took it (nothing was
        written: the caller writes it). Raises what ends the connection."""
        assert self.senders is not None and response.remote is not None
        timeout = self.limits.write_timeout_ms / 1000
        report = await self.senders.write(conn, response.remote, timeout)
        if report.outcome == NOT_STARTED:
            # usually a sender being restarted; said at most once a minute, so a sender that
            # refuses every response is noticed without flooding the log
            now = time.monotonic()
            if now - self._fallback_warned_at >= 60:
                self._fallback_warned_at = now
                log.warning("a response to %s is written by the serving process, not a sender: %s",
                            peer, report.error)
            else:
                log.debug("writing the response to %s here: %s", peer, report.error)
            return False
        if response.remote_done is not None:
            response.remote_done(report)
        if report.outcome == DONE:
            return True
        if report.outcome == TIMED_OUT:
            raise _ConnectionClosed(f"the client read nothing for {timeout:.0f} s")
        if report.outcome == PEER_GONE:
            raise _ConnectionClosed(report.error)
        raise LocalProtocolError(report.error)  # logged as an aborted response


def _host_of(peer: object) -> str:
    """The client host as Kafka's DescribeGroups shows it ("/127.0.0.1")."""
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return ""


async def _recv_when_readable(loop: asyncio.AbstractEventLoop, conn: socket.socket, limit: int,
                              timeout: float, try_now: bool = False) -> bytes:
    """At most ``limit`` bytes, once the socket has some (``b""`` when the peer closed); raises
    ``asyncio.TimeoutError`` after ``timeout`` seconds without any. ``try_now``: read at once
    when bytes are there, without waiting on the loop (only for a caller that has just waited
    on it: a client that never stops sending must not keep the loop from the others)."""
    fd = conn.fileno()
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    if try_now:
        try:
            return conn.recv(limit)
        except (BlockingIOError, InterruptedError):
            pass
    deadline = loop.time() + timeout
    while True:
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _set_done, readable)
        timer = loop.call_at(deadline, _set_timed_out, readable)
        try:
            await readable
        finally:
            timer.cancel()
            loop.remove_reader(fd)
        try:
            return conn.recv(limit)
        except (BlockingIOError, InterruptedError):
            continue  # woken without data after all: wait again


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _set_timed_out(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())


async def _recv_within(loop: asyncio.AbstractEventLoop, conn: socket.socket, n: int,
                       timeout: float, reservation: Reservation | None = None,
                       start: bytes = b"") -> bytes:
    """Exactly ``n`` bytes of a request that has begun, the first of them ``start`` (read
    already); each piece must arrive within
    ``timeout`` seconds of the previous one (else the connection is closed). A large request's
    ``reservation`` learns of every piece, and while the bytes stop the loop looks every
    ``STALL_CHECK_S`` whether the pool took the reservation back (then the connection closes)."""
    pieces: list[bytes] = [start] if start else []
    got = len(start)
    watch = reservation is not None and reservation.large
    last = time.monotonic()
    while got < n:
        wait = min(timeout, STALL_CHECK_S) if watch else timeout
        try:
            piece = await asyncio.wait_for(loop.sock_recv(conn, min(n - got, _RECV_PIECE)), wait)
        except asyncio.TimeoutError:
            if reservation is not None and reservation.reclaimed:
                raise _ConnectionClosed(
                    f"its request stalled after {got} of {n} bytes while others waited for "
                    "queued.max.request.bytes; its room was given to them") from None
            if not watch or time.monotonic() - last >= timeout:
                raise _ConnectionClosed(
                    f"no request bytes for {timeout:.0f} s after {got} of {n}") from None
            continue
        if not piece:
            raise _ConnectionClosed(f"peer closed after {got} of {n} bytes")
        if watch:
            assert reservation is not None
            reservation.progressed()
            last = reservation.last_progress
        pieces.append(piece)
        got += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


async def _write_send(loop: asyncio.AbstractEventLoop, conn: socket.socket, response: Response,
                      timeout: float | None = None,
                      workers: ConversionWorkers | None = None) -> None:
    """Write a Send to the non-blocking socket, waiting for writability when it would block;
    a reader that takes nothing for ``timeout`` seconds ends the connection. With ``workers``
    each ``write_to`` step (which may convert a chunk) runs on that pool."""
    send: Send = response.send
    while not send.completed:
        if workers is not None:
            await workers.run(send.write_to, conn)
        else:
            send.write_to(conn)
        if send.completed:
            break
        # A send's write_to returns before it is complete only once the socket would block, so
        # the next step waits for room instead of first running a step that finds none: half
        # the trips through the pool (and the loop's wake-ups) of a converting response.
        try:
            await asyncio.wait_for(_wait_writable(loop, conn), timeout)
        except asyncio.TimeoutError:
            raise _ConnectionClosed(f"the client read nothing for {timeout:.0f} s") from None


async def _wait_writable(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    fd = conn.fileno()
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    future: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _set_done, future)
    try:
        await future
    finally:
        loop.remove_writer(fd)
