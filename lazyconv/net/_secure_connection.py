"""TLS and SASL for one client connection: what the connection loop
(:mod:`lazyconv.net._server`) does between accepting a socket and handing request frames to the
front door, on every listener of ``serve`` and the gateway alike.

- :class:`ListenerSecurity`: one listener's security, built once from its
  :class:`~lazyconv.net._listener_config.ListenerConfig` (the SSL context, the SASL
  configuration its exchanges share, the PLAIN users, the certificate principal mapping) and
  the bound on how long a client may take to authenticate.
- :class:`ClientAuthenticator`: who checks a PLAIN password and who may stay once a principal is
  known. :class:`ListenerUsers` (``serve``) checks the listener's ``user_<name>`` entries and
  admits everyone who authenticated; the gateway brings its own (its identity modes).
- :class:`SecureConnection`: one connection's TLS handshake (over
  :class:`~lazyconv.net._tls.TlsChannel`, the raw non-blocking socket underneath) and its SASL
  exchange (:class:`~lazyconv.net._sasl.SaslServerExchange`), both before the deadline, then
  re-authentication (KIP-368) while requests flow.

Before a connection has authenticated it gets ApiVersions and the SASL APIs only, as a broker
answers: the exchange closes it on anything else, and nothing reaches the server's handler. A
refused connection is closed with one log line saying why (never a secret: passwords, tokens
and keys are not in any message this module makes).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lazyconv.errors import AuthenticationError, LazyconvError, TlsError
from lazyconv.net._listener_config import ListenerConfig
from lazyconv.net._principal import SslPrincipalMapper
from lazyconv.net._sasl import (
    AUTHENTICATE,
    HANDSHAKE,
    PlainCredentials,
    PlainUsers,
    SaslOutcome,
    SaslServerConfig,
    SaslServerExchange,
)
from lazyconv.net._scram_credentials import ScramCredentialStore
from lazyconv.net._session import Session
from lazyconv.net._tls import HandshakeStatus, TlsChannel
from lazyconv.protocol._connection import MIN_REQUEST_SIZE

log = logging.getLogger(__name__)

__all__ = [
    "ListenerSecurity",
    "ClientAuthenticator",
    "ListenerUsers",
    "SecureConnection",
    "ConnectionRefused",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "SASL_API_KEYS",
]

DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
SASL_API_KEYS = (HANDSHAKE.key, AUTHENTICATE.key)


class ConnectionRefused(Exception):
    """The connection must close: ``reason`` is the one log line (never a secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ListenerSecurity:
    """One listener's security, shared by its connections (see the module docstring).

    ``context``: the server SSL context (SSL, SASL_SSL); ``sasl``: the exchanges' configuration
    (SASL_*); ``plain_users``: PLAIN users of the listener's JAAS line (None: checked elsewhere);
    ``principal_mapper``: how a client certificate becomes a principal;
    ``handshake_timeout_s``: how long a client may take from connecting to being authenticated
    (the TLS handshake and the SASL exchange together); ``trust_warning``: what the server
    warns of when it starts (:meth:`ListenerConfig.trust_warning`: client certificates verified
    against the system's CAs), None when nothing."""

    name: str
    protocol: str = "PLAINTEXT"
    context: ssl.SSLContext | None = field(default=None, repr=False)
    client_auth: str = "none"
    principal_mapper: SslPrincipalMapper | None = None
    sasl: SaslServerConfig | None = None
    plain_users: PlainUsers | None = None
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
    trust_warning: str | None = None

    @property
    def uses_tls(self) -> bool:
        return self.context is not None

    @property
    def uses_sasl(self) -> bool:
        return self.sasl is not None

    @classmethod
    def from_config(cls, config: ListenerConfig, *,
                    scram_store: ScramCredentialStore | None = None) -> ListenerSecurity:
        """Build the contexts and the SASL configuration of ``config`` (the SCRAM credentials
        are read now, from ``scram_store`` or the listener's credentials file)."""
        context = config.ssl.context() if config.ssl is not None else None
        sasl = config.sasl.server_config(scram_store) if config.sasl is not None else None
        timeout = (config.sasl.authentication_timeout_s if config.sasl is not None
                   else DEFAULT_HANDSHAKE_TIMEOUT_S)
        return cls(config.name, config.security_protocol, context,
                   config.ssl.client_auth if config.ssl is not None else "none",
                   config.ssl.principal_mapper if config.ssl is not None else None,
                   sasl, config.sasl.plain_users if config.sasl is not None else None, timeout,
                   config.trust_warning())

    def with_handshake_timeout(self, seconds: float) -> ListenerSecurity:
        """The same listener with another authentication bound (TLS-only listeners take the
        server's; SASL listeners have theirs in :attr:`sasl`)."""
        from dataclasses import replace

        return replace(self, handshake_timeout_s=seconds)


class ClientAuthenticator(Protocol):
    """Who checks PLAIN passwords and who may use the server once authenticated."""

    async def check_plain(self, credentials: PlainCredentials, session: Session,
                          security: ListenerSecurity) -> bool:
        """Whether ``credentials`` are right. Raising a
        :class:`~lazyconv.errors.LazyconvError` (they cannot be checked now, e.g. the cluster
        is unreachable) closes the connection without an answer."""
        ...

    def admit(self, session: Session) -> str | None:
        """Once ``session.principal`` is known (authenticated, a certificate's subject, or
        ANONYMOUS): None to serve it, else why it is refused (the connection closes)."""
        ...


class ListenerUsers:
    """The plain authenticator: PLAIN users from the listener's JAAS line, everyone admitted."""

    async def check_plain(self, credentials: PlainCredentials, session: Session,
                          security: ListenerSecurity) -> bool:
        users = security.plain_users
        return users is not None and users.check(credentials)

    def admit(self, session: Session) -> str | None:
        return None


class SecureConnection:
    """One client connection's TLS and SASL (see the module docstring).

    The loop calls :meth:`open` first (the TLS handshake; a non-SASL listener's principal),
    then, for each frame :meth:`needs_exchange` claims, :meth:`receive`, which returns what to
    do with it (:class:`~lazyconv.net._sasl.SaslOutcome`, after any PLAIN check); other frames
    go to the front door. :meth:`frame_bounds` and :meth:`deadline` bound what it reads before
    the client has authenticated."""

    def __init__(self, security: ListenerSecurity, sock: socket.socket, session: Session,
                 authenticator: ClientAuthenticator, *,
                 current: Callable[[], ListenerSecurity | None] | None = None) -> None:
        """``current``: the listener's security of the moment (a reload replaces it), whose
        SASL users and credentials a re-authentication checks, as Kafka's broker does; without
        it, those the connection was accepted with."""
        self.security = security
        self._current = current
        self.session = session
        self.authenticator = authenticator
        self.channel: socket.socket | TlsChannel = sock
        self._started = time.monotonic()
        self.exchange = (SaslServerExchange(security.sasl, self._started)
                         if security.sasl is not None else None)
        self._authenticated = self.exchange is None and security.context is None
        self._tls_done = security.context is None

    def __repr__(self) -> str:
        return f"SecureConnection({self.security.name} {self.security.protocol}, {self.session!r})"

    @property
    def authenticated(self) -> bool:
        """Whether the connection has authenticated (a re-authentication in progress aside)."""
        return self._authenticated

    @property
    def mechanism(self) -> str:
        """What authenticates this connection, or failed to, as a metric's label
        (:data:`~lazyconv.net._observer.AUTHENTICATION_MECHANISMS`): the TLS handshake until it
        is done, then the SASL mechanism the handshake chose (``SASL`` before one was chosen), or
        on a TLS-only listener ``mTLS`` with a client certificate and ``TLS`` without."""
        if not self._tls_done:
            return "TLS"
        if self.exchange is not None:
            return self.exchange.mechanism or "SASL"
        channel = self.channel
        return "mTLS" if isinstance(channel, TlsChannel) and channel.peer_certificate() else "TLS"

    def deadline(self) -> float | None:
        """When the client must have authenticated (monotonic), None once it has."""
        if self._authenticated:
            return None
        if self.exchange is not None:
            return self.exchange.deadline()
        return self._started + self.security.handshake_timeout_s

    def frame_bounds(self) -> tuple[int, int | None]:
        """The smallest and largest frame to read next (None: the server's own limit). Raw
        SASL tokens (after SaslHandshake v0) may be shorter than a request header."""
        exchange = self.exchange
        if exchange is None:
            return MIN_REQUEST_SIZE, None
        return (0 if exchange.expects_raw_token else MIN_REQUEST_SIZE), exchange.max_frame_size

    def needs_exchange(self, frame: bytes | bytearray | memoryview, now: float) -> bool:
        """Whether ``frame`` goes to :meth:`receive` rather than straight to the front door:
        every frame before authentication, and afterwards the SASL APIs and anything once the
        session has expired (KIP-368)."""
        exchange = self.exchange
        if exchange is None:
            return False
        if not exchange.authenticated or exchange.session_expires_at is not None and \
                exchange.session_expired(now):
            return True
        return len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) in SASL_API_KEYS

    # -- TLS ---------------------------------------------------------------------------------

    async def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """The TLS handshake (TLS listeners), within the deadline; a listener without SASL
        knows its principal afterwards (the certificate's subject, or ANONYMOUS). Raises
        :class:`ConnectionRefused`."""
        context = self.security.context
        if context is None:
            return
        sock = self.channel
        assert isinstance(sock, socket.socket)
        channel = TlsChannel(sock, context, server_side=True)
        self.channel = channel
        deadline = self._started + self.security.handshake_timeout_s
        try:
            while (status := channel.handshake_step()) is not HandshakeStatus.DONE:
                await wait_ready(loop, channel.fileno(), status is HandshakeStatus.WANT_WRITE,
                                 deadline)
        except asyncio.TimeoutError:
            raise ConnectionRefused(f"the TLS handshake did not finish within "
                                    f"{self.security.handshake_timeout_s:g} s") from None
        except TlsError as exc:
            raise ConnectionRefused(f"TLS handshake failed: {exc.message}") from None
        except ConnectionError as exc:
            raise ConnectionRefused(f"the connection failed during the TLS handshake "
                                    f"({exc.strerror or type(exc).__name__})") from None
        self._tls_done = True
        mapper = self.security.principal_mapper
        # on SASL_SSL the principal is SASL's: Kafka's principal builder never maps the
        # certificate there, so a subject no rule maps must not refuse the client
        if self.exchange is None and mapper is not None and channel.peer_certificate() is not None:
            try:
                self.session.principal = str(channel.principal(mapper))
            except AuthenticationError as exc:
                raise ConnectionRefused(f"client certificate refused: {exc.message}") from None
        if self.exchange is None:
            self._authenticated = True
            self._admit()

    def _admit(self) -> None:
        reason = self.authenticator.admit(self.session)
        if reason is not None:
            raise ConnectionRefused(f"{self.session.principal} is not admitted: {reason}")

    # -- SASL --------------------------------------------------------------------------------

    async def receive(self, frame: bytes | bytearray | memoryview, now: float) -> SaslOutcome:
        """What to do with one frame the exchange claims (:meth:`needs_exchange`): a PLAIN
        check is run here (the authenticator's), the principal set on the session when the
        client authenticated. Raises :class:`ConnectionRefused` when the connection must close
        without an answer (the check could not be made, or the principal is not admitted)."""
        exchange = self.exchange
        assert exchange is not None
        if exchange.authenticated and len(frame) >= 2 and \
                int.from_bytes(frame[:2], "big", signed=True) == HANDSHAKE.key:
            self._take_current_credentials(exchange)
        outcome = exchange.receive(frame, now)
        if outcome.verify is not None:
            outcome = await self._check_plain(exchange, outcome.verify)
        if outcome.authenticated is not None:
            first = not self._authenticated
            self.session.principal = str(outcome.authenticated)
            self._authenticated = True
            if first and not outcome.close:
                self._admit()
        return outcome

    def _take_current_credentials(self, exchange: SaslServerExchange) -> None:
        """Before a SaslHandshake that may begin a re-authentication: the listener's users and
        credentials of the moment (a user a reload removed, or whose password it changed, no
        longer re-authenticates with the old one)."""
        latest = self._current() if self._current is not None else None
        if latest is None or latest is self.security or latest.sasl is None:
            return
        self.security = latest
        exchange.config = latest.sasl

    async def _check_plain(self, exchange: SaslServerExchange,
                           credentials: PlainCredentials) -> SaslOutcome:
        try:
            ok = await self.authenticator.check_plain(credentials, self.session, self.security)
        except LazyconvError as exc:
            raise ConnectionRefused(f"the credentials could not be checked: {exc.message}") from None
        if ok and not self._authenticated:
            # refused principals fail the authentication itself (a client sees error 58),
            # rather than being closed after a success
            previous, self.session.principal = self.session.principal, f"User:{credentials.username}"
            reason = self.authenticator.admit(self.session)
            self.session.principal = previous
            if reason is not None:
                log.debug("PLAIN user refused by the authenticator: %s", reason)
                ok = False
        return exchange.complete_plain(ok, time.monotonic())


async def wait_ready(loop: asyncio.AbstractEventLoop, fd: int, write: bool,
                     deadline: float | None = None) -> None:
    """Until ``fd`` is readable (or writable); ``asyncio.TimeoutError`` at ``deadline``
    (monotonic, the loop's clock)."""
    if fd < 0:
        raise ConnectionResetError("socket closed")
    future: asyncio.Future[None] = loop.create_future()
    add, remove = (loop.add_writer, loop.remove_writer) if write else (loop.add_reader, loop.remove_reader)
    add(fd, _set_done, future)
    timer = loop.call_at(deadline, _set_timed_out, future) if deadline is not None else None
    try:
        await future
    finally:
        if timer is not None:
            timer.cancel()
        remove(fd)


async def tls_recv(loop: asyncio.AbstractEventLoop, channel: TlsChannel, n: int) -> bytes:
    """At least one and at most ``n`` decrypted bytes (``b""``: the stream ended)."""
    while True:
        try:
            return channel.recv(n)
        except BlockingIOError:
            await wait_ready(loop, channel.fileno(), False)


async def tls_recv_into(loop: asyncio.AbstractEventLoop, channel: TlsChannel,
                        view: memoryview) -> int:
    """Decrypted bytes into ``view`` (0: the stream ended)."""
    while True:
        try:
            return channel.recv_into(view)
        except BlockingIOError:
            await wait_ready(loop, channel.fileno(), False)


async def tls_flush(loop: asyncio.AbstractEventLoop, channel: TlsChannel) -> None:
    """Until every byte of ciphertext the channel holds is in the socket."""
    while not channel.flush():
        await wait_ready(loop, channel.fileno(), True)


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _set_timed_out(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())
