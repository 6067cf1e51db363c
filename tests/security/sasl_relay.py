"""A test-only secured front door: TlsChannel and SaslServerExchange in front of a plain Kafka
broker, relaying frames once a client has authenticated.

It is what the connection loop will do with these modules, written plainly with threads (one
per connection, one more per upstream pump): the handshake under a deadline, frames read with
the exchange's size bound, every :class:`~lazyconv.net._sasl.SaslOutcome` field honoured
(``reply``, ``verify``, ``forward``, ``close``, ``authenticated``), ciphertext flushed after
each write. Behind it, a Kafka 3.9 broker whose ``advertised.listeners`` names the relay's
port, so that old clients see one broker, at the relay, and speak their own versions to it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from dataclasses import dataclass, field

from lazyconv.errors import LazyconvError
from lazyconv.net._listener_config import ListenerConfig
from lazyconv.net._sasl import SaslServerExchange
from lazyconv.net._tls import HandshakeStatus, TlsChannel

MAX_REQUEST = 100 << 20


@dataclass
class Session:
    """What the relay saw of one connection."""

    peer: str
    principal: str | None = None
    mechanism: str | None = None
    handshake_version: int | None = None
    closed: str = ""  # why the relay closed it ("" when the peer did, or still open)
    forwarded: list[int] = field(default_factory=list)  # API keys relayed, in order


class SaslRelay:
    """Serve ``listener`` (SASL_SSL or SASL_PLAINTEXT) on ``port``, relaying authenticated
    traffic to ``upstream`` (host, port)."""

    def __init__(self, listener: ListenerConfig, upstream: tuple[str, int], port: int) -> None:
        assert listener.sasl is not None
        self.listener = listener
        self.upstream = upstream
        self.sasl_config = listener.sasl.server_config()
        self.context = listener.ssl.context() if listener.ssl is not None else None
        self.sessions: list[Session] = []
        self._server = socket.create_server(("127.0.0.1", port))
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> SaslRelay:
        thread = threading.Thread(target=self._accept, daemon=True, name="sasl-relay-accept")
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.close()

    def __enter__(self) -> SaslRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, peer = self._server.accept()
            except OSError:
                return
            session = Session(f"{peer[0]}:{peer[1]}")
            self.sessions.append(session)
            thread = threading.Thread(target=self._serve, args=(sock, session), daemon=True)
            thread.start()

    # -- one connection --------------------------------------------------------------------

    def _serve(self, sock: socket.socket, session: Session) -> None:
        sock.setblocking(False)
        chan: socket.socket | TlsChannel = sock
        up: socket.socket | None = None
        lock = threading.Lock()
        exchange = SaslServerExchange(self.sasl_config, time.monotonic())
        deadline = exchange.deadline() or time.monotonic() + 10
        try:
            if self.context is not None:
                chan = TlsChannel(sock, self.context, server_side=True)
                while (state := chan.handshake_step()) is not HandshakeStatus.DONE:
                    _wait(sock, state is HandshakeStatus.WANT_WRITE, deadline)
            up = socket.create_connection(self.upstream, timeout=10)
            up.settimeout(None)
            pump = threading.Thread(target=self._pump, args=(up, chan, sock, lock), daemon=True)
            pump.start()
            while True:
                limit = exchange.max_frame_size or MAX_REQUEST
                auth_deadline = exchange.deadline()
                size = int.from_bytes(_read(chan, sock, 4, auth_deadline), "big")
                if not 0 <= size <= limit:
                    session.closed = f"frame of {size} bytes (limit {limit})"
                    return
                frame = _read(chan, sock, size, auth_deadline)
                now = time.monotonic()
                out = exchange.receive(frame, now)
                if out.verify is not None:
                    users = self.listener.sasl.plain_users  # type: ignore[union-attr]
                    out = exchange.complete_plain(users is not None and users.check(out.verify), now)
                if out.reply is not None:
                    with lock:
                        _write(chan, sock, out.reply)
                if out.authenticated is not None:
                    session.principal = str(out.authenticated)
                    session.mechanism = exchange.mechanism
                    session.handshake_version = exchange.handshake_version
                if out.forward:
                    session.forwarded.append(int.from_bytes(frame[:2], "big", signed=True))
                    up.sendall(size.to_bytes(4, "big") + frame)
                if out.close:
                    session.closed = out.reason
                    return
        except (EOFError, ConnectionError, TimeoutError, LazyconvError, OSError) as exc:
            session.closed = session.closed or f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(OSError):
                chan.close()
            if up is not None:
                with contextlib.suppress(OSError):
                    up.close()

    @staticmethod
    def _pump(up: socket.socket, chan: socket.socket | TlsChannel, sock: socket.socket,
              lock: threading.Lock) -> None:
        try:
            while data := up.recv(65536):
                with lock:
                    _write(chan, sock, data)
        except (OSError, LazyconvError, TimeoutError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _wait(sock: socket.socket, write: bool, deadline: float | None) -> None:
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        raise TimeoutError("the client did not authenticate in time")
    select.select([] if write else [sock], [sock] if write else [], [], 1.0 if left is None
                  else min(left, 1.0))


def _read(chan: socket.socket | TlsChannel, sock: socket.socket, n: int,
          deadline: float | None) -> bytes:
    out = bytearray()
    while len(out) < n:
        try:
            chunk = chan.recv(n - len(out))
        except BlockingIOError:
            _wait(sock, False, deadline)
            continue
        if not chunk:
            raise EOFError("the client closed the connection")
        out += chunk
    return bytes(out)


def _write(chan: socket.socket | TlsChannel, sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    deadline = time.monotonic() + 30
    while view.nbytes:
        try:
            view = view[chan.send(view):]
        except BlockingIOError:
            _wait(sock, True, deadline)
    if isinstance(chan, TlsChannel):
        while not chan.flush():
            _wait(sock, True, deadline)
