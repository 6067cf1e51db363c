"""The asyncio side of every endpoint (``serve`` and ``gateway``): listening sockets, request
framing, admission limits, timeouts, and writing Sends with backpressure.

This module is the driver; the protocol work is sans-IO elsewhere. Each connection is served by
one task that feeds what it reads to a :class:`~lazyconv.protocol._connection.FrameReader`
(int32 size, then that many bytes, the size checked before the frame is read), hands each
frame with the connection's :class:`~lazyconv.net._session.Session` to the server's
:class:`~lazyconv.net._requests.FrontDoor` (parsing, ApiVersions, then the
:class:`~lazyconv.net._model.RequestHandler`), and writes the response before reading the next
request — per connection, requests are answered one at a time and in order, as a Kafka broker
does (it mutes a channel while its response is in flight). Pipelined requests simply wait in the
socket.

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

A handler may mute a connection (:attr:`~lazyconv.net._session.Session.muted_until`: the
gateway, for a quota's throttle): none of its requests is acted on until then, but the answers
it is owed go out as they come, as a Kafka broker writes the answers of a channel it muted.

A :class:`~lazyconv.net._observer.ServerObserver` (if given) hears of every connection that
opens and ends (and why) and of every request answered; :data:`~lazyconv.net._session.current_session`
is set in each connection's task. :meth:`KafkaServer.drain` is how a server stops without
cutting requests: it stops accepting, closes the connections that wait for a request, lets the
others finish the request they are answering and close, within a bound.

A listener with security (:class:`~lazyconv.net._secure_connection.ListenerSecurity`: SSL,
SASL_PLAINTEXT, SASL_SSL) first runs the connection's TLS handshake and SASL exchange through a
:class:`~lazyconv.net._secure_connection.SecureConnection`, within the listener's
authentication bound: until the client has authenticated its frames go to the exchange (at most
its SASL size), only ApiVersions reaches the front door, and the handler does not know the
connection (:meth:`RequestHandler.open_session` is called once its principal is known). On TLS
the Sends write through the :class:`~lazyconv.net._tls.TlsChannel` (no ``sendfile``, no sender
process: they need the plain socket), as Kafka loses its zero-copy path to TLS too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from lazyconv._send import Send
from lazyconv.errors import (
    AuthenticationError,
    ConfigurationError,
    LazyconvError,
    LocalProtocolError,
    RemoteProtocolError,
    TlsError,
    UnansweredRequestError,
)
from lazyconv.net._limits import (
    DEFAULT_MAX_REQUEST_SIZE,
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    STALL_CHECK_S,
    ConnectionLimits,
    RequestMemoryPool,
    Reservation,
    release_free_memory,
)
from lazyconv.net._model import Deferred, Listener, Response, reply_frame
from lazyconv.net._observer import ServerObserver
from lazyconv.net._remote_send import DONE, NOT_STARTED, PEER_GONE, PEER_GONE_ERRNOS, TIMED_OUT
from lazyconv.net._repeats import RepeatedLines
from lazyconv.net._requests import FrontDoor, RequestHandler
from lazyconv.net._secure_connection import (
    ClientAuthenticator,
    ConnectionRefused,
    ListenerSecurity,
    ListenerUsers,
    SecureConnection,
    tls_flush,
    tls_recv,
    tls_recv_into,
)
from lazyconv.net._sender_pool import SenderPool
from lazyconv.net._session import Session, current_session
from lazyconv.net._tls import TlsChannel, looks_like_tls
from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol._connection import SIZE_LENGTH, FrameReader
from lazyconv.records import _impl

log = logging.getLogger(__name__)
_ACCEPT_FAILURES_SAID_EVERY_S = 10.0  # accept failing (EMFILE) is logged at most this often

__all__ = ["KafkaServer", "ListenerSpec", "ConnectionLimits", "DEFAULT_MAX_REQUEST_SIZE", "MAX_SEND_BUFFER",
           "frame_buffer", "send_buffer_problem"]

# Kafka's socket.send.buffer.bytes default; -1 leaves the OS default (autotuned, often MBs).
DEFAULT_SEND_BUFFER = 102400
# the most SO_SNDBUF takes (an int), as Kafka's int setting
MAX_SEND_BUFFER = (1 << 31) - 1


_RECV_PIECE = 65536
# Read at once when a connection becomes readable: the size field and, for most requests, the
# whole request (one recv, one future and one timer; before, 3 recv calls and two tasks with a
# timer each per Fetch). Bytes of a next request read along are kept for it: at most this much
# per connection outside queued.max.request.bytes, which counts a request once its size is read.
_READ_AHEAD = 8192
_READ_AT_ONCE = 1 << 20  # request bytes read without waiting on the loop, per request
_LARGE_REQUEST = 1 << 20  # a connection that read one this large gives memory back when it ends
# Answers a connection may owe at once while it acts on the next request (Deferred): Kafka's
# clients keep at most max.in.flight.requests.per.connection (5 by default) unanswered.
MAX_DEFERRED = 5


def send_buffer_problem(value: int, *, zero_is_default: bool = False) -> str | None:
    """``None`` when ``value`` is a send buffer size (``socket.send.buffer.bytes``), else the
    rule it breaks, to follow the value in a message ("is not -1 ..."): -1 (the OS default,
    Kafka's spelling), a byte count from 1 to :data:`MAX_SEND_BUFFER`, and 0 (the OS default
    too) where ``zero_is_default``. The one rule the commands and the gateway's settings check
    (:class:`KafkaServer` itself takes any size up to the bound, at most 0 meaning the OS's)."""
    if value == -1 or 0 < value <= MAX_SEND_BUFFER or (value == 0 and zero_is_default):
        return None
    low = "-1 or 0" if zero_is_default else "-1"
    return f"is not {low} (the OS default) or a byte count from 1 to {MAX_SEND_BUFFER}"


@dataclass(frozen=True)
class ListenerSpec:
    """Where to listen: ``port`` 0 picks a free port. ``advertised_host`` defaults to ``host``
    (a wildcard ``host`` such as ``0.0.0.0``: the machine's host name), ``advertised_port`` to
    the port listened on (set both when clients come through a load balancer); ``name`` names
    the listener in metrics and logs (default: the security's listener name, else ``HOST:PORT``
    as advertised); ``security``: TLS and SASL (None: PLAINTEXT)."""

    host: str = "127.0.0.1"
    port: int = 0
    produce_delay_ms: int = 0
    advertised_host: str | None = None
    advertised_port: int | None = None
    name: str = ""
    security: ListenerSecurity | None = None


WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class _Ended(Exception):
    """The connection ends for ``reason`` (what ended it is logged already)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: an answer a connection owes, in request order: (it, when its request was read, the request's
#: size and (API key, version))
_Owed = tuple[Response | Deferred, float, int, "tuple[int, int] | None"]


class _ConnectionClosed(Exception):
    def __init__(self, message: str, reason: str = "client") -> None:
        super().__init__(message)
        self.reason = reason  # one of CLOSE_REASONS


class KafkaServer:
    """Serves one request handler (``serve``'s broker, the gateway) on one or more listeners
    (each advertised as its own node)."""

    def __init__(self, handler_factory: Callable[[list[Listener]], RequestHandler],
                 listeners: list[ListenerSpec], *,
                 max_request_size: int = DEFAULT_MAX_REQUEST_SIZE,
                 send_buffer_bytes: int = DEFAULT_SEND_BUFFER,
                 limits: ConnectionLimits | None = None,
                 workers: ConversionWorkers | None = None,
                 senders: SenderPool | None = None,
                 observer: ServerObserver | None = None,
                 authenticator: ClientAuthenticator | None = None) -> None:
        """``handler_factory(listeners)`` builds the handler once the ports are known;
        ``limits`` (if given) replaces ``max_request_size``; ``workers``: the pool that writes
        converting responses (one thread per core by default); ``senders``: sender processes
        that write the responses a handler describes for them (``Response.remote``);
        ``observer``: told of every connection and request (metrics, client records);
        ``authenticator``: who checks PLAIN passwords and admits principals on secured
        listeners (default: the listener's own PLAIN users, everyone admitted)."""
        self._handler_factory = handler_factory
        self.authenticator: ClientAuthenticator = authenticator or ListenerUsers()
        self._specs = listeners
        # each listener's security as new connections get it (replace_security swaps it)
        self._security: list[ListenerSecurity | None] = [spec.security for spec in listeners]
        if limits is None:
            limits = ConnectionLimits(max_request_size=max_request_size,
                                      queued_max_request_bytes=max(DEFAULT_QUEUED_MAX_REQUEST_BYTES,
                                                                   max_request_size))
        self.limits = limits
        self.max_request_size = limits.max_request_size
        self.request_memory = RequestMemoryPool(limits.queued_max_request_bytes,
                                                max_request_size=limits.max_request_size,
                                                stall_s=limits.request_stall_ms / 1000,
                                                pace_s=limits.request_read_timeout_ms / 1000)
        if 0 < self.request_memory.capacity and \
                self.request_memory.reserved < self.request_memory.small_request_bytes:
            log.warning("queued.max.request.bytes (%d) leaves %d bytes beside one request of "
                        "socket.request.max.bytes (%d): small requests have no room of their own "
                        "and may wait behind large ones", limits.queued_max_request_bytes,
                        self.request_memory.reserved, limits.max_request_size)
        if send_buffer_bytes > MAX_SEND_BUFFER:  # at most 0: the OS default
            raise ConfigurationError(f"send buffer {send_buffer_bytes} is more than the socket option "
                                     f"takes ({MAX_SEND_BUFFER})")
        self.send_buffer_bytes = send_buffer_bytes
        self._send_buffer_checked = False
        self.handler: RequestHandler | None = None
        self.front_door: FrontDoor | None = None
        self.workers = workers if workers is not None else ConversionWorkers()
        self.senders = senders
        self._fallback_warned_at = -60.0
        self.listeners: list[Listener] = []
        self._sockets: list[socket.socket] = []
        #: the ports listened on, per listener (a listener advertises its own, or another)
        self.bound_ports: list[int] = []
        self._accept_tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_served = 0
        self.observer = observer if observer is not None else ServerObserver()
        #: the open connections' sessions, by their task
        self.sessions: dict[asyncio.Task[None], Session] = {}
        #: stopping: no connection is accepted, none reads another request (see drain())
        self.draining = False

    @property
    def request_counts(self) -> Counter[tuple[int, int]]:
        """(API key, version) -> requests answered since the start, over every connection."""
        return self.front_door.request_counts if self.front_door is not None else Counter()

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
            if host in WILDCARD_HOSTS:
                host = socket.gethostname()
            security = spec.security
            self.listeners.append(Listener(
                node_id, host, spec.advertised_port or port, spec.produce_delay_ms,
                security.protocol if security is not None else "PLAINTEXT",
                spec.name or (security.name if security is not None else "")))
            self.bound_ports.append(port)
        self.handler = self._handler_factory(self.listeners)
        self.front_door = FrontDoor(self.handler)
        loop = asyncio.get_running_loop()
        self.handler.start(loop)
        for index, (sock, listener) in enumerate(zip(self._sockets, self.listeners, strict=True)):
            self._accept_tasks.append(loop.create_task(self._accept_loop(sock, listener, index)))
        for listener, port in zip(self.listeners, self.bound_ports, strict=True):
            log.info("listening on port %d (%s), advertised as %s:%d (node %d)", port,
                     listener.security_protocol, listener.host, listener.port, listener.node_id)
        for spec in self._specs:
            if spec.security is not None and spec.security.trust_warning is not None:
                log.warning("%s", spec.security.trust_warning)

    async def _stop_accepting(self) -> None:
        for task in self._accept_tasks:
            task.cancel()
        await asyncio.gather(*self._accept_tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    async def drain(self, timeout: float) -> bool:
        """Stop without cutting a request: stop accepting (the listening sockets close, so a
        load balancer's next connection goes elsewhere), close every connection waiting for a
        request, let each other connection finish answering the request it is on and then
        close it; after ``timeout`` seconds the connections still answering are cut. True when
        every connection ended by itself in time. :meth:`close` afterwards releases the rest."""
        self.draining = True
        await self._stop_accepting()
        for task, session in list(self.sessions.items()):
            if session.idle:
                task.cancel()
        pending = set(self._connections)
        if pending:
            log.info("draining: %d connection(s) finishing their requests (at most %.0f s)",
                     len(pending), timeout)
            _done, pending = await asyncio.wait(pending, timeout=timeout)
        if pending:
            log.warning("draining: cutting %d connection(s) still answering after %.0f s",
                        len(pending), timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        return not pending

    async def close(self) -> None:
        """Stop accepting, end every connection and release the sockets."""
        for task in list(self._connections):
            task.cancel()
        await self._stop_accepting()
        # asyncio.wait_for (3.11) swallows a cancellation that arrives as its awaitable
        # completes: a connection task may need asking again
        while pending := [task for task in self._connections if not task.done()]:
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=1.0)
        if self.handler is not None:
            self.handler.close()
        self.workers.close()
        if self.senders is not None:
            self.senders.close()

    async def serve_forever(self) -> None:
        """Until the server is closed or drained (or this is cancelled)."""
        await asyncio.gather(*self._accept_tasks, return_exceptions=True)

    def bound_address(self, index: int = 0) -> tuple[str, int]:
        """The address listener ``index`` is bound to, as given and with its port (after
        :meth:`start`; the advertised address may differ)."""
        return self._specs[index].host, self.bound_ports[index]

    def bound_port(self, index: int = 0) -> int:
        """The port listener ``index`` is bound to (after :meth:`start`; the advertised port
        may differ)."""
        return int(self._sockets[index].getsockname()[1])

    def security(self, index: int) -> ListenerSecurity | None:
        """Listener ``index``'s security as a new connection gets it (None: PLAINTEXT)."""
        return self._security[index]

    def replace_security(self, index: int, security: ListenerSecurity) -> None:
        """New connections to listener ``index`` get ``security`` (renewed certificates, SASL
        users, SCRAM credentials); open ones keep what they were accepted with, but for their
        re-authentications (KIP-368), which check the credentials of the moment. The security
        protocol cannot change (raises :class:`~lazyconv.errors.ConfigurationError`)."""
        current = self._security[index]
        protocol = current.protocol if current is not None else "PLAINTEXT"
        if security.protocol != protocol:
            raise ConfigurationError(f"listener {index} is {protocol}, not {security.protocol}: "
                                     "a listener's security protocol changes with a restart")
        if security.trust_warning is not None and (current is None or
                                                   current.trust_warning != security.trust_warning):
            log.warning("%s", security.trust_warning)
        self._security[index] = security

    async def _accept_loop(self, server_sock: socket.socket, listener: Listener,
                           index: int) -> None:
        loop = asyncio.get_running_loop()
        failed, said_at = 0, -_ACCEPT_FAILURES_SAID_EVERY_S  # failures not logged yet; when last
        while True:
            try:
                conn, peer = await loop.sock_accept(server_sock)
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                # one line per period, not one per retry, while the descriptors stay exhausted
                failed += 1
                now = time.monotonic()
                if now - said_at >= _ACCEPT_FAILURES_SAID_EVERY_S:
                    log.warning("accept failed on port %d: %s%s", listener.port, exc,
                                f" ({failed} times since the last line)" if failed > 1 else "")
                    failed, said_at = 0, now
                await asyncio.sleep(0.1)
                continue
            try:
                conn.setblocking(False)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.send_buffer_bytes > 0:
                    self._set_send_buffer(conn)
            except OSError as exc:  # the peer reset already (BSD and macOS say so here)
                log.info("connection from %s ended before it was served: %s", peer, exc)
                conn.close()
                continue
            self.connections_served += 1
            task = loop.create_task(self._serve_connection(conn, peer, listener,
                                                           self._security[index], index))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    def _set_send_buffer(self, conn: socket.socket) -> None:
        """SO_SNDBUF as configured; the first time, say so if the OS gave less (Linux caps the
        size at net.core.wmem_max, then doubles it for its bookkeeping)."""
        first = not self._send_buffer_checked
        self._send_buffer_checked = True
        try:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            got = conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) if first else 0
        except OSError as exc:
            if first:
                log.warning("could not set the send buffer of client connections to %d bytes: %s",
                            self.send_buffer_bytes, exc)
            return
        if first and got < self.send_buffer_bytes:
            log.info("client connections get a %d-byte send buffer, not the %d asked: the OS "
                     "caps it (net.core.wmem_max)", got, self.send_buffer_bytes)

    def _open_session(self, session: Session) -> None:
        """The handler's state for a connection whose principal is known; a principal the
        handler refuses (:class:`~lazyconv.errors.AuthenticationError`) is closed as one the
        authenticator refused."""
        assert self.handler is not None
        try:
            self.handler.open_session(session)
        except AuthenticationError as exc:
            raise ConnectionRefused(exc.message) from None

    async def _serve_connection(self, raw: socket.socket, peer: Any, listener: Listener,
                                security: ListenerSecurity | None, index: int = 0) -> None:
        loop = asyncio.get_running_loop()
        assert self.handler is not None and self.front_door is not None
        limits = self.limits
        read_timeout = limits.request_read_timeout_ms / 1000
        idle_timeout = limits.connections_max_idle_ms / 1000
        large = False
        session = Session(listener, _host_of(peer), peer if isinstance(peer, tuple) else None,
                          observer=self.observer)
        current_session.set(session)  # this task's context: its log lines and counters
        task = asyncio.current_task()
        assert task is not None
        self.sessions[task] = session
        observer = self.observer
        reason = "client"
        observer.connection_opened(session)
        # a re-authentication (KIP-368) checks the credentials of the moment: a reload's
        secure = (SecureConnection(security, raw, session, self.authenticator,
                                   current=functools.partial(self.security, index))
                  if security is not None and security.protocol != "PLAINTEXT" else None)
        conn: socket.socket | TlsChannel = raw
        where = f"{peer} on {listener.security_protocol} listener {listener.label}"
        frames = FrameReader(self.max_request_size, allocate=frame_buffer)
        # The last response went through a sender: its wait for the report gave the loop to
        # the others, and a busy server usually finds the next request there already (a client
        # sends it once its response is in), read without a reader, a future and a timer.
        waited = False
        first = b""  # a plaintext listener's first bytes: a TLS client is named as such
        # Requests the handler may act on before the earlier ones are answered (a Produce sent
        # upstream while the previous one's answer is on its way), and the answers owed.
        deferrable = frozenset(getattr(self.handler, "deferrable_keys", ()))
        session.may_defer = bool(deferrable)
        owed: deque[_Owed] = deque()
        refused = False
        try:
            if secure is not None:
                await secure.open(loop)
                conn = secure.channel
                if secure.authenticated:  # a TLS-only listener: the handshake authenticates
                    observer.authenticated(session, secure.mechanism, True)
            elif (refusal := self.authenticator.admit(session)) is not None:
                # a PLAINTEXT client is User:ANONYMOUS: admitted or refused as any principal
                raise ConnectionRefused(f"{session.principal} is not admitted: {refusal}")
            if secure is None or secure.authenticated:
                self._open_session(session)
            while True:
                deadline = secure.deadline() if secure is not None else None
                if secure is not None:
                    low, high = secure.frame_bounds()
                    frames.min_size, frames.max_size = low, min(high or self.max_request_size,
                                                                self.max_request_size)
                while len(owed) >= MAX_DEFERRED or owed and self.draining:
                    waited = await self._write_owed(loop, conn, peer, session, owed)
                size = frames.next_size()
                while size is None:
                    if owed:  # the next request, if it is there, else the oldest answer
                        if not frames.buffered and not self.draining:
                            data = _recv_now(conn)
                            if data is None:
                                head = owed[0][0]
                                if isinstance(head, Deferred) and \
                                        not await _answered_or_readable(loop, conn, head.answer):
                                    continue
                            elif not data:  # it sends no more: what it is owed, then the end
                                await self._write_owed_if_possible(loop, conn, peer, session, owed)
                                return
                            else:
                                frames.feed(data)
                                size = frames.next_size()
                                continue
                        waited = await self._write_owed(loop, conn, peer, session, owed)
                        continue
                    wait = idle_timeout if deadline is None else \
                        max(0.0, min(idle_timeout, deadline - loop.time()))
                    if frames.buffered:  # the rest of the size field: idle as much as reading
                        data = await _recv_within(loop, conn, SIZE_LENGTH - frames.buffered,
                                                  min(read_timeout, wait))
                    else:
                        if self.draining:
                            reason = "draining"
                            return
                        session.idle = True
                        try:
                            data = await _recv_when_readable(loop, conn, _READ_AHEAD, wait,
                                                             try_now=waited)
                            waited = False
                        except asyncio.TimeoutError:
                            if deadline is not None:
                                raise ConnectionRefused(
                                    f"it did not authenticate within "
                                    f"{secure.security.handshake_timeout_s:g} s") from None  # type: ignore[union-attr]
                            log.info("closing %s: idle for %d ms (connections.max.idle.ms)", peer,
                                     limits.connections_max_idle_ms)
                            reason = "idle"
                            return
                        finally:
                            session.idle = False
                        if not data:
                            return  # clean close between requests
                        if not first and conn is raw:
                            first = data[:3]
                    frames.feed(data)
                    size = frames.next_size()
                reservation = await self.request_memory.reserve(size, read_timeout, str(peer))
                if reservation is None:
                    log.warning("closing %s: %d request bytes did not fit in queued.max.request.bytes "
                                "(%d) within %.0f s", peer, size, self.request_memory.capacity,
                                read_timeout)
                    reason = "request_memory"
                    await self._write_owed_if_possible(loop, conn, peer, session, owed)
                    return
                large = large or size > _LARGE_REQUEST
                try:
                    frame = frames.next_frame()
                    if frame is None:
                        await _recv_rest(loop, conn, frames, read_timeout, reservation, deadline)
                        frame = frames.next_frame()
                        assert frame is not None
                    reservation.read()  # answering it (a Produce's append, an fsync) is no stall
                    session.bytes_in += size + SIZE_LENGTH
                    if session.muted_until > loop.time():  # a quota's throttle: Kafka's mute
                        waited = await self._while_muted(loop, conn, peer, session, owed) or waited
                    exchange = secure is not None and secure.needs_exchange(frame, loop.time())
                    if owed and (exchange or len(frame) < 2 or
                                 int.from_bytes(frame[:2], "big") not in deferrable):
                        # any other request waits for the answers before it, as on a broker
                        while owed:
                            waited = await self._write_owed(loop, conn, peer, session, owed)
                        exchange = secure is not None and secure.needs_exchange(frame, loop.time())
                    if exchange:
                        assert secure is not None
                        was_authenticated = secure.authenticated
                        outcome = await secure.receive(frame, loop.time())
                        if outcome.reply is not None:
                            await _write_send(loop, conn, reply_frame(outcome.reply),
                                              limits.write_timeout_ms / 1000)
                        if outcome.close:
                            raise ConnectionRefused(outcome.reason)
                        if secure.authenticated and not was_authenticated:
                            log.debug("%s authenticated as %s (%s)", where, session.principal,
                                      secure.mechanism)
                            observer.authenticated(session, secure.mechanism, True)
                            self._open_session(session)
                        elif outcome.authenticated is not None:
                            log.debug("%s re-authenticated as %s (KIP-368)", where,
                                      session.principal)
                            observer.authenticated(session, secure.mechanism, True)
                        if not outcome.forward:
                            continue
                    started = time.perf_counter()
                    try:
                        response = await self.front_door.answer(frame, session)
                    except LazyconvError as exc:
                        ended = _unanswerable(peer, exc)
                        # the requests before it were acted on: their answers first, as a
                        # broker (one request at a time) gave them
                        await self._write_owed_if_possible(loop, conn, peer, session, owed)
                        raise ended from None
                    except Exception:
                        # a bug ends this connection only; the answers owed are of requests
                        # already acted on (a Produce written upstream), so they go out first
                        log.exception("internal error serving %s; closing the connection", peer)
                        await self._write_owed_if_possible(loop, conn, peer, session, owed)
                        raise _Ended("internal_error") from None
                    finally:
                        del frame
                finally:
                    self.request_memory.release(reservation)
                if response is None:
                    observer.request_done(session, time.perf_counter() - started, size + SIZE_LENGTH, 0)
                    continue
                if owed or isinstance(response, Deferred):
                    owed.append((response, started, size + SIZE_LENGTH, session.request))
                    continue
                waited = await self._write_answer(loop, conn, peer, session, response, started,
                                                  size + SIZE_LENGTH, session.request)
        except _Ended as exc:
            reason = exc.reason
        except RemoteProtocolError as exc:  # a request size outside the bounds
            # the requests before it were acted on: their answers first, as for a bad request
            try:
                await self._write_owed_if_possible(loop, conn, peer, session, owed)
            except Exception:
                log.exception("internal error answering %s; closing the connection", peer)
            if looks_like_tls(first):
                log.warning("closing %s: the client speaks TLS to a PLAINTEXT listener", where)
            elif secure is not None and not secure.authenticated:
                log.warning("closing %s: %s before authenticating (a client with another "
                            "security protocol?)", where, exc.message)
            else:
                log.warning("closing %s: %s", peer, exc.message)
            reason = "invalid_request"
        except ConnectionRefused as exc:
            log.warning("closing %s: %s", where, exc.reason)
            reason = "authentication"
            refused = True
        except TlsError as exc:
            log.warning("closing %s: %s", where, exc.message)
            reason = "authentication"
        except _ConnectionClosed as exc:
            if secure is not None and not secure.authenticated:
                log.warning("closing %s: it did not authenticate: %s", where, exc)
                reason = "authentication"
            else:
                log.info("connection from %s ended: %s", peer, exc)
                reason = exc.reason
        except ConnectionError as exc:
            log.info("connection from %s ended: %s", peer, exc)
        except OSError as exc:
            if exc.errno in PEER_GONE_ERRNOS:  # ETIMEDOUT, EHOSTUNREACH: the peer's network
                log.info("connection from %s ended: %s", peer, exc)
            else:  # a bug must end this connection only, never the server
                log.exception("internal error serving %s; closing the connection", peer)
                reason = "internal_error"
        except asyncio.CancelledError:
            reason = "draining" if self.draining else "shutdown"
            raise
        except Exception:
            # A bug must end this connection only, never the server.
            log.exception("internal error serving %s; closing the connection", peer)
            reason = "internal_error"
        finally:
            _abandon(owed)
            del self.sessions[task]
            session.close()
            with contextlib.suppress(OSError, LazyconvError):
                conn.close()
            if conn is not raw:
                with contextlib.suppress(OSError):
                    raw.close()
            try:
                # an authentication (or re-authentication) refused, or a client gone before it
                # authenticated; not a TLS error on an authenticated connection
                if reason == "authentication" and secure is not None and (
                        refused or not secure.authenticated):
                    observer.authenticated(session, secure.mechanism, False)
                observer.connection_closed(session, reason)
            except Exception:  # an observer's bug must not hide the connection's end
                log.exception("the server's observer failed on a closed connection")
            if large:
                release_free_memory()

    async def _write_owed(self, loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                          peer: object, session: Session, owed: deque[_Owed]) -> bool:
        """Write the oldest answer a connection owes, once it is known, and let it go (see
        :meth:`_write_answer`); raises :class:`_Ended` when working it out failed."""
        answer, started, request_size, request = owed[0]
        if isinstance(answer, Deferred):
            try:
                response = await answer.answer
            except LazyconvError as exc:
                raise _unanswerable(peer, exc) from None
            if response is None:
                owed.popleft()
                self._request_done(session, request, started, request_size, 0)
                return False
            # kept in the queue while it is written: closed by _abandon if the connection ends
            owed[0] = (response, started, request_size, request)
        else:
            response = answer
        try:
            return await self._write_answer(loop, conn, peer, session, response, started,
                                            request_size, request)
        finally:
            owed.popleft()

    async def _while_muted(self, loop: asyncio.AbstractEventLoop,
                           conn: socket.socket | TlsChannel, peer: object, session: Session,
                           owed: deque[_Owed]) -> bool:
        """Until ``session.muted_until``: none of its requests is acted on, but the answers it
        is owed go out as they come, as a broker sends the answers of a channel it muted (an
        answer owed before a held one must not wait for its hold). True when the last one went
        through a sender (see :meth:`_write_answer`)."""
        waited = False
        while (left := session.muted_until - loop.time()) > 0:
            head = owed[0][0] if owed else None
            if head is None:
                await asyncio.sleep(left)
            elif isinstance(head, Deferred) and not head.answer.done():
                await asyncio.wait((head.answer,), timeout=left)
            else:
                waited = await self._write_owed(loop, conn, peer, session, owed)
        return waited

    async def _write_owed_if_possible(self, loop: asyncio.AbstractEventLoop,
                                      conn: socket.socket | TlsChannel, peer: object,
                                      session: Session, owed: deque[_Owed]) -> None:
        """What a closing connection owes, as far as it still can be written."""
        with contextlib.suppress(_Ended, _ConnectionClosed, OSError, LazyconvError):
            while owed:
                await self._write_owed(loop, conn, peer, session, owed)

    def _request_done(self, session: Session, request: tuple[int, int] | None, started: float,
                      request_size: int, response_size: int, throttled: float = 0.0) -> None:
        """Tell the observer of an answered request (of ``request``'s API and version, which may
        be earlier than the request the session reads now); ``throttled``: the seconds its
        answer was held for a throttle, left out of its duration."""
        current, session.request = session.request, request
        try:
            self.observer.request_done(
                session, max(0.0, time.perf_counter() - started - throttled), request_size,
                response_size, throttled)
        finally:
            session.request = current

    async def _write_answer(self, loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                            peer: object, session: Session, response: Response, started: float,
                            request_size: int, request: tuple[int, int] | None) -> bool:
        """Write one response (a sender process's, where one takes it: then True) and count it;
        raises :class:`_Ended` when it had to be abandoned midway."""
        try:
            if response.remote is not None and self.senders is not None and \
                    type(conn) is socket.socket and await self._write_remote(conn, peer, response):
                session.bytes_out += response.send.size
                self._request_done(session, request, started, request_size, response.send.size,
                                   response.throttled_s)
                return True
            await _write_send(loop, conn, response, self.limits.write_timeout_ms / 1000,
                              self.workers if response.off_loop else None)
            session.bytes_out += response.send.size
            if response.written is not None:
                response.written()
            self._request_done(session, request, started, request_size, response.send.size,
                               response.throttled_s)
            return False
        except LazyconvError as exc:
            # e.g. a segment truncated under a zero-copy send: the committed size can no longer
            # be honoured, so the connection must end.
            log.error("aborting the response to %s: %s", peer, exc)
            raise _Ended("response_error") from None
        finally:
            response.close()

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
            raise _ConnectionClosed(f"the client read nothing for {timeout:.0f} s", "write_timeout")
        if report.outcome == PEER_GONE:
            raise _ConnectionClosed(report.error)
        raise LocalProtocolError(report.error)  # logged as an aborted response


def frame_buffer(size: int) -> bytearray:
    """The buffer a frame is received into (a request here, a response on the gateway's upstream
    connections): not zeroed where the kernel is in use, since every byte is received before
    the frame is read, and zeroing 1 MiB per upstream response was 3-4 % of the gateway's CPU."""
    return _impl.uninitialized_bytearray(size)


def _host_of(peer: object) -> str:
    """The client host as Kafka's DescribeGroups shows it ("/127.0.0.1")."""
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return ""


async def _recv_when_readable(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                              limit: int, timeout: float, try_now: bool = False) -> bytes:
    """At most ``limit`` bytes, once the socket has some (``b""`` when the peer closed); raises
    ``asyncio.TimeoutError`` after ``timeout`` seconds without any. ``try_now``: read at once
    when bytes are there, without waiting on the loop (only for a caller that has just waited
    on it: a client that never stops sending must not keep the loop from the others)."""
    fd = conn.fileno()
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    if try_now or type(conn) is not socket.socket:  # TLS: bytes may be decrypted already
        if not try_now:
            # epoll cannot tell of bytes TLS decrypted already, so they are read at once; but
            # after a turn of the loop: a TLS client that never stops sending must not keep the
            # loop from the others (a plaintext one waits on the loop below)
            await asyncio.sleep(0)
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


# a client that retries what fails with acks=0 reconnects and fails again: said at info once,
# then at most once a minute with the count (Kafka says it at info each time)
_UNANSWERED = RepeatedLines()


def _unanswerable(peer: object, exc: LazyconvError) -> _Ended:
    """Say why a request got no answer; the connection ends for it."""
    if isinstance(exc, UnansweredRequestError):
        _UNANSWERED.log(log, logging.INFO, "unanswered", "closing %s so that it notices: %s",
                        peer, exc)
        return _Ended("unanswered_error")
    if isinstance(exc, LocalProtocolError):  # our answer did not encode: our bug, not the client's
        log.error("closing %s: the answer to its request could not be encoded "
                  "(a lazyconv bug, please report it): %s", peer, exc)
        return _Ended("internal_error")
    log.warning("closing %s: invalid request: %s", peer, exc)
    return _Ended("invalid_request")


def _recv_now(conn: socket.socket | TlsChannel) -> bytes | None:
    """What the client has sent already (``b""``: it closed), or ``None`` without waiting."""
    if conn.fileno() < 0:
        raise _ConnectionClosed("socket closed")
    try:
        return conn.recv(_READ_AHEAD)
    except (BlockingIOError, InterruptedError):
        return None


async def _answered_or_readable(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                                answer: asyncio.Future[Any]) -> bool:
    """Until ``answer`` is done (True) or the client sent more (False), whichever is first."""
    if answer.done():
        return True
    fd = conn.fileno()
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        _set_done(woken)

    loop.add_reader(fd, _set_done, woken)
    answer.add_done_callback(wake)
    try:
        await woken
    finally:
        loop.remove_reader(fd)
        answer.remove_done_callback(wake)
    return answer.done()


def _abandon(owed: deque[_Owed]) -> None:
    """Let go of the answers a closing connection still owed."""
    while owed:
        answer = owed.popleft()[0]
        if isinstance(answer, Response):
            answer.close()
            continue
        future = answer.answer
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            if future.exception() is None:
                response = future.result()
                if response is not None:
                    response.close()


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _set_timed_out(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())


async def _recv_within(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel, n: int,
                       timeout: float) -> bytes:
    """At most ``n`` bytes (at least one) of a request that has begun, within ``timeout``
    seconds (else the connection is closed)."""
    try:
        piece = await asyncio.wait_for(loop.sock_recv(conn, n) if type(conn) is socket.socket
                                       else tls_recv(loop, conn, n), timeout)  # type: ignore[arg-type]
    except asyncio.TimeoutError:
        raise _ConnectionClosed(f"no request bytes for {timeout:.0f} s inside a size field",
                                "read_timeout") from None
    if not piece:
        raise _ConnectionClosed("peer closed inside a size field")
    return piece


async def _recv_rest(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                     frames: FrameReader, timeout: float, reservation: Reservation,
                     deadline: float | None = None) -> None:
    """The rest of the frame ``frames`` is filling, read straight into it; each piece must
    arrive within ``timeout`` seconds of the previous one (else the connection is closed), and
    all of it by ``deadline`` (the loop's clock; a client that has not authenticated yet: a
    frame trickled byte by byte must not outlast the authentication bound). A large request's
    ``reservation`` learns of every piece, and while the bytes stop the loop looks every
    ``STALL_CHECK_S`` whether the pool took the reservation back (then the connection
    closes)."""
    watch = reservation.large
    last = time.monotonic()
    # what is in the socket already is read at once (the rest of a 64 KiB Produce usually is):
    # no task, future or timer for it; up to a budget, so a client that never stops sending
    # still lets the loop serve the others
    budget = _READ_AT_ONCE
    while frames.missing:
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            size = frames.next_size() or 0
            raise _ConnectionClosed(f"its authentication deadline passed with {size - frames.missing} "
                                    f"of {size} bytes of a request read", "authentication")
        view = frames.buffer_for_rest()[:_RECV_PIECE]
        n = -1
        if budget > 0:
            try:
                n = conn.recv_into(view)
                budget -= n
            except (BlockingIOError, InterruptedError):
                budget = 0
        if n < 0:
            wait = min(timeout, STALL_CHECK_S) if watch else timeout
            deadline_bound = left is not None and left < wait
            if left is not None and deadline_bound:
                wait = max(0.001, left)
            try:
                n = await asyncio.wait_for(
                    loop.sock_recv_into(conn, view) if type(conn) is socket.socket
                    else tls_recv_into(loop, conn, view), wait)  # type: ignore[arg-type]
            except asyncio.TimeoutError:
                size = frames.next_size() or 0
                got = size - frames.missing
                if reservation.reclaimed:
                    raise _reclaimed(frames) from None
                if deadline_bound:
                    continue  # the deadline's own message, at the top of the loop
                if not watch or time.monotonic() - last >= timeout:
                    raise _ConnectionClosed(
                        f"no request bytes for {timeout:.0f} s after {got} of {size}",
                        "read_timeout") from None
                continue
            finally:
                del view
            budget = _READ_AT_ONCE  # the loop served the others meanwhile
        else:
            del view
        if not n:
            raise _ConnectionClosed(f"peer closed with {frames.missing} bytes of its request unread")
        frames.received(n)
        if watch:
            reservation.progressed(n)
            last = reservation.last_progress
            if reservation.reclaimed and frames.missing:
                # taken back as too slow: bytes trickled faster than the checks above wait
                # never time out, so the room is given back here (else it was never freed)
                raise _reclaimed(frames)


def _reclaimed(frames: FrameReader) -> _ConnectionClosed:
    """Why a request whose reservation the pool took back ends its connection."""
    size = frames.next_size() or 0
    return _ConnectionClosed(f"its request stalled after {size - frames.missing} of {size} bytes "
                             "while others waited for queued.max.request.bytes; its room was "
                             "given to them", "request_memory")


async def _write_send(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel,
                      response: Response, timeout: float | None = None,
                      workers: ConversionWorkers | None = None) -> None:
    """Write a Send to the non-blocking socket (or TLS channel), waiting for writability when
    it would block; a reader that takes nothing for ``timeout`` seconds ends the connection.
    With ``workers`` each ``write_to`` step (which may convert a chunk) runs on that pool.

    A TLS channel takes plaintext until its ciphertext buffer is full; the socket's
    writability then lets it flush, and its last bytes are flushed before the next request is
    read."""
    send: Send = response.send
    tls = cast(TlsChannel, conn) if type(conn) is not socket.socket else None
    while not send.completed:
        if workers is not None:
            await workers.run(send.write_to, conn)
        else:
            send.write_to(conn)
        if send.completed:
            break
        # A send's write_to returns before it is complete only once the socket would block, so
        # the next step waits for room instead of first running a step that finds none: half
        # the trips through the pool (and the loop's wake-ups) of a converting response. A send
        # that relays bytes may wait for them instead (its source's readability).
        source = send.source_fileno()
        if source is not None:
            if tls is not None:  # what it has encrypted goes out while the source is awaited
                tls.flush()
            await _ready(loop, source, False, send.source_timeout,
                         f"the bytes of a relayed response stopped for {send.source_timeout:.0f} s",
                         "response_error")
            continue
        if timeout is None or tls is not None:
            await _within(_wait_writable(loop, conn), timeout)
        else:
            await _ready(loop, conn.fileno(), True, timeout,
                         f"the client read nothing for {timeout:.0f} s", "write_timeout")
        if tls is not None:
            tls.flush()
    if tls is not None and not tls.flush():
        await _within(tls_flush(loop, tls), timeout)


async def _within(waiting: Awaitable[None], timeout: float | None) -> None:
    """``waiting``, or the connection ends as a write timeout after ``timeout`` seconds."""
    try:
        await asyncio.wait_for(waiting, timeout)
    except asyncio.TimeoutError:
        raise _ConnectionClosed(f"the client read nothing for {timeout:.0f} s",
                                "write_timeout") from None


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, writable: bool, timeout: float,
                 message: str, reason: str) -> None:
    """Until ``fd`` is writable (else readable); after ``timeout`` seconds the connection ends
    with ``message``. A timer, not ``wait_for``: no task per wait (a response waits many times)."""
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    future: asyncio.Future[None] = loop.create_future()
    if writable:
        loop.add_writer(fd, _set_done, future)
    else:
        loop.add_reader(fd, _set_done, future)
    timer = loop.call_later(timeout, _set_timed_out, future)
    try:
        await future
    except asyncio.TimeoutError:
        raise _ConnectionClosed(message, reason) from None
    finally:
        timer.cancel()
        if writable:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _wait_writable(loop: asyncio.AbstractEventLoop, conn: socket.socket | TlsChannel) -> None:
    fd = conn.fileno()
    if fd < 0:
        raise _ConnectionClosed("socket closed")
    future: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _set_done, future)
    try:
        await future
    finally:
        loop.remove_writer(fd)
