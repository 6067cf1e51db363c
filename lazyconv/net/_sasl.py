"""SASL, sans-IO: what a broker does with a connection before (and while re-) authenticating it,
and what a client does to authenticate to a broker.

Facts are Kafka's SaslServerAuthenticator, KafkaChannel and SaslClientAuthenticator (3.x/4.0);
no I/O happens here. A driver owns the socket and the frame reader and calls in with whole
frames (the bytes after a 4-byte size).

**Server** (:class:`SaslServerExchange`, one per connection, built from one
:class:`SaslServerConfig` per listener). Before authentication a connection may send:

- ``ApiVersions`` (once; a version newer than the server knows may be retried, KIP-511): the
  exchange answers :attr:`SaslOutcome.forward`, the driver answers it with its own handler;
- ``SaslHandshake`` v0 or v1 naming an enabled mechanism (else UNSUPPORTED_SASL_MECHANISM (33)
  with the enabled list, then close). After v0 the tokens follow as raw size-prefixed frames
  without Kafka headers (0.10 clients); after v1 inside ``SaslAuthenticate`` v0-2;

and nothing else: any other request, a second ApiVersions, a frame larger than
``max_receive_size`` (Kafka's ``sasl.server.max.receive.size``, 512 KiB) or bytes that are not a
Kafka request close the connection without an answer, as Kafka's broker does.

A failed authentication answers ``SASL_AUTHENTICATION_FAILED`` (58) with one message whatever
was wrong (unknown user, wrong password, bad token, authorization id) and closes; in raw-token
mode (v0) there is no error frame in the protocol, so the connection is closed, as a 0.10 broker
did. A SaslAuthenticate expected but another request received: ILLEGAL_SASL_STATE (34) in a
SaslHandshake answer when it is one, else close.

After authentication every request is forwarded, except:

- the session expired (``connections.max.reauth.ms`` set): any request but SaslHandshake closes
  the connection (KIP-368: also for clients that cannot re-authenticate);
- SaslHandshake: re-authentication (KIP-368) begins when the session has an expiry and the
  last one began at least a second ago, with the session's mechanism (another enabled one is
  accepted by the handshake and fails at the next frame; an unknown one gets 33 and close); the
  principal must not change (a PLAIN token naming another user fails before its password is
  checked, by the driver or upstream). Otherwise ILLEGAL_SASL_STATE, connection kept;
- SaslAuthenticate: ILLEGAL_SASL_STATE, connection kept.

PLAIN's check is the driver's (:attr:`SaslOutcome.verify`: it may be asynchronous, e.g. the
gateway authenticating upstream with the same credentials): it calls
:meth:`SaslServerExchange.complete_plain` with the result. SCRAM-SHA-256/512 run here with
``scramp`` over a credential lookup.

**Where this differs from Kafka, deliberately** (each tested):

- PLAIN follows RFC 4616: exactly two NULs, every part valid UTF-8 (Kafka cuts the message at
  its first two NULs and keeps any further NUL as part of the password);
- a SCRAM exchange for an unknown user goes on with a made-up credential (a salt derived from
  the name under ``fake_secret``, so the same on every try; a listener's is keyed by its
  credentials file, the same after a reload and in every process) and fails at the proof, like
  a wrong password; Kafka
  fails at the first message, which tells a prober the user does not exist;
- every failure message is the same, Kafka's generic one; Kafka tells PLAIN's "Invalid username
  or password" and an authorization-id mismatch apart;
- a SCRAM client-first must begin ``n,,``: no authorization id (scramp refuses one; Kafka
  accepts one equal to the user name, which no Kafka client sends);
- a request other than SaslAuthenticate/SaslHandshake in the middle of an exchange is closed
  without an answer (Kafka answers it with that API's error response first);
- a handshake must finish within ``authentication_timeout_s`` of the connection
  (:meth:`SaslServerExchange.deadline`; Kafka has no such bound).

**Client** (:class:`SaslClientExchange`): SaslHandshake v1 then SaslAuthenticate (the highest
version both speak, at most 2) with PLAIN or SCRAM-SHA-256/512; a positive session lifetime
makes it due for re-authentication at 85-95 % of the lifetime, as Kafka's client computes it.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import itertools
import json
import logging
import os
import random
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import scramp

from lazyconv.errors import (
    AuthenticationError,
    ConfigurationError,
    ErrorCode,
    LazyconvError,
    LocalProtocolError,
    ProtocolError,
)
from lazyconv.net._principal import KafkaPrincipal
from lazyconv.net._scram_credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
)
from lazyconv.protocol import _api_versions, _sasl_authenticate, _sasl_handshake
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from lazyconv.protocol._primitives import Reader

log = logging.getLogger(__name__)

__all__ = [
    "PLAIN",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SUPPORTED_MECHANISMS",
    "OAUTHBEARER",
    "CLIENT_MECHANISMS",
    "oauthbearer_initial_response",
    "DEFAULT_MAX_RECEIVE_SIZE",
    "PlainCredentials",
    "PlainUsers",
    "parse_plain_token",
    "plain_token",
    "SaslServerConfig",
    "SaslServerExchange",
    "SaslOutcome",
    "SaslState",
    "SaslClientExchange",
    "SaslClientStep",
    "reauthentication_delay_s",
    "check_scram_credentials",
    "VerifyPlain",
]

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
OAUTHBEARER = "OAUTHBEARER"
#: what the client side speaks: the listeners' mechanisms, and OAUTHBEARER with a token given
CLIENT_MECHANISMS = (*SUPPORTED_MECHANISMS, OAUTHBEARER)
# RFC 6750's b64token: what a bearer token may hold (never the 0x01 separators of RFC 7628)
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_BEARER_TOKEN = 65536

DEFAULT_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size
DEFAULT_AUTHENTICATION_TIMEOUT_S = 10.0
MIN_REAUTH_INTERVAL_S = 1.0  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS

API_VERSIONS_KEY = _api_versions.SPEC.key
HANDSHAKE = _sasl_handshake.SPEC
AUTHENTICATE = _sasl_authenticate.SPEC

NONE = int(ErrorCode.NONE)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
ILLEGAL_SASL_STATE = int(ErrorCode.ILLEGAL_SASL_STATE)
SASL_AUTHENTICATION_FAILED = int(ErrorCode.SASL_AUTHENTICATION_FAILED)


def _failure_message(mechanism: str, reauthenticating: bool) -> str:
    # Kafka's generic text (SaslServerAuthenticator), the same for every cause
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


class _Failed(Exception):
    """An exchange failed (internal: the exchange turns it into an outcome)."""


# -- PLAIN ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlainCredentials:
    """What a PLAIN client sent: authorization id (empty when none), user, password (kept out
    of repr)."""

    authzid: str
    username: str
    password: str = field(repr=False)


def parse_plain_token(token: bytes | bytearray | memoryview) -> PlainCredentials:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``, each part valid UTF-8, user and
    password not empty, no further NUL. Raises :class:`AuthenticationError` with one message
    whatever is wrong (it never says which part)."""
    data = bytes(token)
    parts = data.split(b"\0")
    try:
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ValueError
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except (ValueError, UnicodeDecodeError):
        raise AuthenticationError("invalid SASL/PLAIN credentials") from None
    return PlainCredentials(authzid, user, password)


def plain_token(username: str, password: str, authzid: str = "") -> bytes:
    """The PLAIN client token (RFC 4616)."""
    if "\0" in username + password + authzid:
        raise ConfigurationError("a SASL/PLAIN user name or password cannot contain NUL")
    return f"{authzid}\0{username}\0{password}".encode()


class PlainUsers:
    """PLAIN users as a broker's JAAS line lists them (``user_<name>="<password>"``), checked
    in constant time (an unknown user costs the same comparison as a known one)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = {name: password.encode() for name, password in users.items()}
        self._dummy = os.urandom(32)

    def __repr__(self) -> str:
        return f"PlainUsers({sorted(self._users)!r})"

    def __contains__(self, name: object) -> bool:
        return name in self._users

    def check(self, credentials: PlainCredentials) -> bool:
        """Whether the password is the user's (and the authorization id empty or the user)."""
        expected = self._users.get(credentials.username)
        same = hmac.compare_digest(expected if expected is not None else self._dummy,
                                   credentials.password.encode())
        return (expected is not None and same
                and credentials.authzid in ("", credentials.username))


# -- SCRAM, server side --------------------------------------------------------------------

ScramLookup = Callable[[str, str], "ScramCredential | None"]  # (mechanism, user)


def _client_first_username(text: str) -> str | None:
    """The user name of a SCRAM client-first message (``n,,n=<name>,r=<nonce>``) with RFC 5802's
    ``=2C`` and ``=3D`` unescaped, and nothing else done to it (Kafka's server does only that);
    None when the message does not have that shape (scramp then refuses it)."""
    bare = text[3:]
    if not bare.startswith("n="):
        return None
    name, comma, _rest = bare[2:].partition(",")
    if not comma:
        return None
    return name.replace("=2C", ",").replace("=3D", "=")


class _ScramServer:
    """One SCRAM exchange (client-first, client-final) over scramp."""

    def __init__(self, mechanism: str, lookup: ScramLookup, fake_secret: bytes,
                 fake_iterations: int) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._fake_secret = fake_secret
        self._fake_iterations = fake_iterations
        self._server: scramp.core.ScramServer | None = None
        self._username: str | None = None
        self._raw_username: str | None = None
        self._genuine = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        # the name as the client wrote it, as Kafka looks it up: scramp gives it SASLprep'd
        # (a soft hyphen dropped, "Ⅸ" made "IX"), which Kafka's server does not do
        username = self._raw_username if self._raw_username is not None else username
        self._username = username
        try:
            credential = self._lookup(self.mechanism, username)
        except Exception:  # a broken lookup must fail the exchange, not the connection loop
            log.exception("SCRAM credential lookup failed")
            credential = None
        if credential is not None:
            self._genuine = True
            return credential.salt, credential.stored_key, credential.server_key, credential.iterations
        digest = SCRAM_MECHANISMS[self.mechanism]
        salt = hmac.new(self._fake_secret, f"{self.mechanism}\0{username}".encode(),
                        "sha256").digest()
        size = hashlib.new(digest).digest_size
        return salt, os.urandom(size), os.urandom(size), self._fake_iterations

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """The server's next token, and whether the exchange is complete (raises _Failed)."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _Failed("not UTF-8") from None
        try:
            if self._server is None:
                # only "n,," : no channel binding (Kafka accepts no other flag) and no
                # authorization id (scramp refuses one; Kafka allows one equal to the user,
                # which no Kafka client sends)
                if not text.startswith("n,,"):
                    raise _Failed("gs2 header")
                if "tokenauth=" in text:  # delegation tokens: not served here
                    raise _Failed("token authentication")
                self._raw_username = _client_first_username(text)
                mech = scramp.ScramMechanism(self.mechanism)
                self._server = mech.make_server(self._auth_info)
                self._server.set_client_first(text)
                return self._server.get_server_first().encode(), False
            self._server.set_client_final(text)
            final = self._server.get_server_final()
        except _Failed:
            raise
        except Exception as exc:  # scramp's ScramException, or anything a hostile token provokes
            raise _Failed(type(exc).__name__) from None
        if not self._genuine:
            raise _Failed("unknown user")
        return final.encode(), True

    @property
    def username(self) -> str:
        assert self._username is not None
        return self._username


# -- the server exchange -------------------------------------------------------------------


class SaslState(enum.Enum):
    """Where a connection is in Kafka's server-side SASL state machine."""

    INITIAL = "initial"  # ApiVersions or SaslHandshake
    HANDSHAKE = "handshake"  # after ApiVersions: SaslHandshake only
    AUTHENTICATE = "authenticate"  # tokens (raw after v0, SaslAuthenticate after v1)
    VERIFYING = "verifying"  # a PLAIN check is with the driver
    COMPLETE = "complete"  # authenticated: requests are forwarded
    REAUTH_BAD_MECHANISM = "reauth-bad-mechanism"  # the next frame fails
    FAILED = "failed"  # closed


@dataclass(frozen=True)
class SaslOutcome:
    """What the driver does with a frame (several may hold: write ``reply`` then close).

    ``reply``: bytes to write as they are (a whole size-prefixed frame); ``forward``: answer the
    frame with the server's own request handler; ``close``: close the connection once ``reply``
    (if any) is written; ``verify``: PLAIN credentials to check, then call
    :meth:`SaslServerExchange.complete_plain`; ``authenticated``: this step completed
    authentication (or re-authentication) as that principal; ``reason``: why it closes, for
    one log line (never a secret)."""

    reply: bytes | None = None
    forward: bool = False
    close: bool = False
    verify: PlainCredentials | None = None
    authenticated: KafkaPrincipal | None = None
    reason: str = ""


_FORWARD = SaslOutcome(forward=True)


def _close(reason: str, reply: bytes | None = None) -> SaslOutcome:
    return SaslOutcome(reply=reply, close=True, reason=reason)


@dataclass(frozen=True)
class SaslServerConfig:
    """One listener's SASL settings (built once, shared by its connections).

    ``mechanisms``: enabled, in the order the handshake lists them; ``scram_lookup(mechanism,
    user)``: the stored credential or None (required when a SCRAM mechanism is enabled);
    ``max_reauth_ms``: ``connections.max.reauth.ms`` by mechanism (0 or absent: sessions never
    expire); ``max_receive_size``: the largest frame before authentication;
    ``authentication_timeout_s``: how long a connection may take to authenticate;
    ``fake_iterations``: the iteration count an unknown SCRAM user is shown (make it the one
    your users have)."""

    mechanisms: tuple[str, ...]
    scram_lookup: ScramLookup | None = None
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    authentication_timeout_s: float = DEFAULT_AUTHENTICATION_TIMEOUT_S
    fake_iterations: int = DEFAULT_ITERATIONS
    fake_secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)

    def __post_init__(self) -> None:
        mechanisms = tuple(dict.fromkeys(self.mechanisms))
        object.__setattr__(self, "mechanisms", mechanisms)
        if not mechanisms:
            raise ConfigurationError("sasl.enabled.mechanisms is empty: a SASL listener needs "
                                     "at least one mechanism")
        for mechanism in mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigurationError(f"SASL mechanism {mechanism!r} is not supported (supported: "
                                         f"{', '.join(SUPPORTED_MECHANISMS)})")
            if mechanism in SCRAM_MECHANISMS and self.scram_lookup is None:
                raise ConfigurationError(f"{mechanism} is enabled but no SCRAM credentials are "
                                         "configured")
        if self.max_receive_size < 1024:
            raise ConfigurationError("sasl.server.max.receive.size must be at least 1024")
        if self.authentication_timeout_s <= 0:
            raise ConfigurationError("the authentication timeout must be positive")


class SaslServerExchange:
    """Kafka's server-side SASL state machine for one connection (see the module docstring).

    The driver feeds every frame it reads to :meth:`receive` (the bytes after the 4-byte size;
    before authentication at most :attr:`max_frame_size` of them) and does what the returned
    :class:`SaslOutcome` says; ``now`` is ``time.monotonic()``. It never raises for what the
    peer sent: every bad input is an outcome that closes."""

    def __init__(self, config: SaslServerConfig, now: float) -> None:
        self.config = config
        self.state = SaslState.INITIAL
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_at: float | None = None
        self.client_supports_reauthentication = False
        self.handshake_version: int | None = None  # 0: raw tokens followed (0.10 clients)
        self.authentications = 0
        self._started_at = now
        self._raw_tokens = False
        self._reauthenticating = False
        self._reauth_started_at: float | None = None
        self._scram: _ScramServer | None = None
        # the SaslAuthenticate version (-1: raw token) and correlation id an answer is for
        self._pending_version = 0
        self._pending_correlation = 0
        self._pending_user: str | None = None  # whose PLAIN check is with the driver

    # -- what the driver asks ----------------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        """Whether requests are being forwarded (authenticated and not re-authenticating)."""
        return self.state is SaslState.COMPLETE

    @property
    def max_frame_size(self) -> int | None:
        """The largest frame the driver may read now: the SASL bound while authenticating,
        None (the server's own limit) once authenticated."""
        return None if self.state is SaslState.COMPLETE else self.config.max_receive_size

    @property
    def expects_raw_token(self) -> bool:
        """Whether the next frame is a raw SASL token (after SaslHandshake v0), not a request."""
        return self.state is SaslState.AUTHENTICATE and self._raw_tokens

    def deadline(self) -> float | None:
        """When the connection must have authenticated (monotonic), None once it has."""
        if self.authentications:
            return None
        return self._started_at + self.config.authentication_timeout_s

    def session_expired(self, now: float) -> bool:
        """Whether the authenticated session has ended (``connections.max.reauth.ms``)."""
        return self.session_expires_at is not None and now > self.session_expires_at

    # -- frames ------------------------------------------------------------------------------

    def receive(self, frame: bytes | bytearray | memoryview, now: float) -> SaslOutcome:
        """The outcome of one frame from the peer (see :class:`SaslOutcome`)."""
        try:
            return self._receive(bytes(frame), now)
        except LazyconvError as exc:  # a token that does not decode, a version we lack...
            return self._fail(f"bad frame: {exc}")
        except Exception as exc:  # never the connection loop's problem: close this one
            log.exception("SASL exchange failed unexpectedly")
            return self._fail(f"internal error ({type(exc).__name__})")

    def complete_plain(self, ok: bool, now: float) -> SaslOutcome:
        """The driver's answer to :attr:`SaslOutcome.verify`: whether the password is right."""
        if self.state is not SaslState.VERIFYING:
            raise LocalProtocolError(f"complete_plain() in state {self.state.value}: no PLAIN "
                                     "check is pending")
        assert self._pending_user is not None
        if not ok:
            self._pending_user = None
            return self._authentication_failed("PLAIN credentials refused")
        principal = KafkaPrincipal.user(self._pending_user)
        self._pending_user = None
        return self._succeed(principal, b"", now)

    def _receive(self, frame: bytes, now: float) -> SaslOutcome:
        state = self.state
        if state is SaslState.FAILED:
            return _close("the connection already failed authentication")
        if state is SaslState.VERIFYING:
            return self._fail("a frame arrived while the credentials were being checked")
        if state is not SaslState.COMPLETE and len(frame) > self.config.max_receive_size:
            return self._fail(f"a {len(frame)}-byte frame during authentication (at most "
                              f"{self.config.max_receive_size})")
        if state is SaslState.REAUTH_BAD_MECHANISM:
            return self._fail("re-authentication with another mechanism")
        if state is SaslState.AUTHENTICATE and self._raw_tokens:
            return self._token(frame, now, version=None, correlation_id=0)
        if len(frame) < 8:
            return self._fail("a frame too short to be a Kafka request")
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        api_version = int.from_bytes(frame[2:4], "big", signed=True)
        if state is SaslState.COMPLETE:
            return self._after_authentication(frame, api_key, api_version, now)
        if state is SaslState.AUTHENTICATE:
            return self._authenticate_request(frame, api_key, api_version, now)
        # INITIAL or HANDSHAKE
        if api_key == API_VERSIONS_KEY:
            if state is SaslState.HANDSHAKE:
                return self._fail("a second ApiVersions request before SaslHandshake")
            if 0 <= api_version <= _api_versions.MAX_VERSION:
                self.state = SaslState.HANDSHAKE
            return _FORWARD  # a too-new version is answered with UNSUPPORTED_VERSION: may retry
        if api_key == HANDSHAKE.key:
            return self._handshake(frame, api_version, now)
        if state is SaslState.INITIAL and not 0 <= api_key < 1000:
            return self._fail("not a Kafka request (a client with the wrong security protocol, "
                              "or one older than SaslHandshake)")
        return self._fail(f"API key {api_key} before authentication (only ApiVersions, "
                          "SaslHandshake and SaslAuthenticate are allowed)")

    def _handshake(self, frame: bytes, api_version: int, now: float) -> SaslOutcome:
        if not HANDSHAKE.supports(api_version):
            return self._fail(f"SaslHandshake v{api_version} is not supported")
        reader = Reader(frame)
        header = decode_request_header(reader, HANDSHAKE.request_header_version(api_version))
        body = HANDSHAKE.decode_request(api_version, reader)
        correlation_id = header["correlation_id"]
        mechanism = body["mechanism"]
        enabled = list(self.config.mechanisms)
        if mechanism not in enabled:
            reply = self._response(HANDSHAKE, api_version, correlation_id,
                                   {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            self.state = SaslState.FAILED
            return _close(f"SASL mechanism {mechanism!r} is not enabled", reply)
        reply = self._response(HANDSHAKE, api_version, correlation_id,
                               {"error_code": NONE, "mechanisms": enabled})
        self._raw_tokens = api_version == 0
        self.handshake_version = api_version
        if self._reauthenticating and mechanism != self.mechanism:
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return SaslOutcome(reply=reply)
        self.mechanism = mechanism
        self._scram = None
        self.state = SaslState.AUTHENTICATE
        return SaslOutcome(reply=reply)

    def _authenticate_request(self, frame: bytes, api_key: int, api_version: int,
                              now: float) -> SaslOutcome:
        if api_key == HANDSHAKE.key and HANDSHAKE.supports(api_version):
            reader = Reader(frame)
            header = decode_request_header(reader, HANDSHAKE.request_header_version(api_version))
            reply = self._response(HANDSHAKE, api_version, header["correlation_id"],
                                   {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []})
            self.state = SaslState.FAILED
            return _close("SaslHandshake again where SaslAuthenticate was expected", reply)
        if api_key != AUTHENTICATE.key:
            return self._fail(f"API key {api_key} where SaslAuthenticate was expected")
        if not AUTHENTICATE.supports(api_version):
            return self._fail(f"SaslAuthenticate v{api_version} is not supported")
        reader = Reader(frame)
        header = decode_request_header(reader, AUTHENTICATE.request_header_version(api_version))
        body = AUTHENTICATE.decode_request(api_version, reader)
        if api_version > 0:
            self.client_supports_reauthentication = True
        return self._token(body["auth_bytes"], now, api_version, header["correlation_id"])

    def _token(self, token: bytes, now: float, version: int | None,
               correlation_id: int) -> SaslOutcome:
        """One client token; ``version`` None: raw-token mode."""
        self._pending_version = -1 if version is None else version
        self._pending_correlation = correlation_id
        mechanism = self.mechanism
        assert mechanism is not None
        if mechanism == PLAIN:
            try:
                credentials = parse_plain_token(token)
            except AuthenticationError:
                return self._authentication_failed("a malformed PLAIN token")
            if self._reauthenticating and KafkaPrincipal.user(credentials.username) != self.principal:
                # refused before the driver's check: in passthrough mode that check is a login
                # upstream as the new user
                return self._authentication_failed("the principal changed in re-authentication")
            self._pending_user = credentials.username
            self.state = SaslState.VERIFYING
            return SaslOutcome(verify=credentials)
        if self._scram is None:
            lookup = self.config.scram_lookup
            assert lookup is not None
            self._scram = _ScramServer(mechanism, lookup, self.config.fake_secret,
                                       self.config.fake_iterations)
        try:
            answer, complete = self._scram.step(token)
        except _Failed:
            return self._authentication_failed("SCRAM exchange failed")
        if not complete:
            return SaslOutcome(reply=self._token_reply(answer, session_lifetime_ms=0))
        principal = KafkaPrincipal.user(self._scram.username)
        self._scram = None
        return self._succeed(principal, answer, now)

    def _succeed(self, principal: KafkaPrincipal, answer: bytes, now: float) -> SaslOutcome:
        assert self.mechanism is not None
        if self._reauthenticating and principal != self.principal:
            return self._authentication_failed("the principal changed in re-authentication")
        lifetime_ms = self.config.max_reauth_ms.get(self.mechanism, 0)
        lifetime_ms = max(0, lifetime_ms)
        self.session_expires_at = now + lifetime_ms / 1000 if lifetime_ms > 0 else None
        reply = self._token_reply(answer, session_lifetime_ms=lifetime_ms)
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._reauthenticating = False
        self.authentications += 1
        return SaslOutcome(reply=reply, authenticated=principal)

    def _token_reply(self, answer: bytes, session_lifetime_ms: int) -> bytes:
        if self._pending_version < 0:  # raw mode: the token size-prefixed, even when empty
            return len(answer).to_bytes(4, "big") + answer
        return self._response(AUTHENTICATE, self._pending_version, self._pending_correlation,
                              {"error_code": NONE, "error_message": None, "auth_bytes": answer,
                               "session_lifetime_ms": session_lifetime_ms})

    def _authentication_failed(self, reason: str) -> SaslOutcome:
        self.state = SaslState.FAILED
        self._scram = None
        if self._pending_version < 0:  # raw tokens: no error frame exists, close
            return _close(f"authentication failed ({reason})")
        assert self.mechanism is not None
        reply = self._response(AUTHENTICATE, self._pending_version, self._pending_correlation,
                               {"error_code": SASL_AUTHENTICATION_FAILED,
                                "error_message": _failure_message(self.mechanism,
                                                                  self._reauthenticating),
                                "auth_bytes": b""})
        return _close(f"authentication failed ({reason})", reply)

    def _after_authentication(self, frame: bytes, api_key: int, api_version: int,
                              now: float) -> SaslOutcome:
        if api_key == HANDSHAKE.key:
            last = self._reauth_started_at
            if (self.session_expires_at is not None
                    and (last is None or now - last >= MIN_REAUTH_INTERVAL_S)):
                self._reauth_started_at = now
                self._reauthenticating = True
                return self._handshake(frame, api_version, now)
        if self.session_expired(now):
            return self._fail("the session expired (connections.max.reauth.ms) and the client "
                              "did not re-authenticate")
        if api_key == HANDSHAKE.key:
            if not HANDSHAKE.supports(api_version):
                return self._fail(f"SaslHandshake v{api_version} is not supported")
            reader = Reader(frame)
            header = decode_request_header(reader, HANDSHAKE.request_header_version(api_version))
            return SaslOutcome(reply=self._response(HANDSHAKE, api_version, header["correlation_id"],
                                                    {"error_code": ILLEGAL_SASL_STATE,
                                                     "mechanisms": []}))
        if api_key == AUTHENTICATE.key:
            if not AUTHENTICATE.supports(api_version):
                return self._fail(f"SaslAuthenticate v{api_version} is not supported")
            reader = Reader(frame)
            header = decode_request_header(reader, AUTHENTICATE.request_header_version(api_version))
            return SaslOutcome(reply=self._response(
                AUTHENTICATE, api_version, header["correlation_id"],
                {"error_code": ILLEGAL_SASL_STATE,
                 "error_message": "SaslAuthenticate request received after successful authentication",
                 "auth_bytes": b""}))
        return _FORWARD

    def _fail(self, reason: str) -> SaslOutcome:
        self.state = SaslState.FAILED
        self._scram = None
        return _close(reason)

    @staticmethod
    def _response(spec: ApiSpec, version: int, correlation_id: int, body: dict[str, object]) -> bytes:
        payload = (encode_response_header(spec.response_header_version(version), correlation_id)
                   + spec.encode_response(version, body))
        return len(payload).to_bytes(4, "big") + payload


# -- the client exchange -------------------------------------------------------------------


def reauthentication_delay_s(session_lifetime_ms: int, rng: random.Random | None = None) -> float | None:
    """When a client re-authenticates, in seconds after authenticating: a random 85-95 % of a
    positive session lifetime (Kafka's SaslClientAuthenticator), None for no lifetime."""
    if session_lifetime_ms <= 0:
        return None
    fraction = 0.85 + (rng or random).random() * 0.10
    return int(session_lifetime_ms * fraction) / 1000


def check_scram_credentials(username: str, password: str) -> None:
    """That a SCRAM client can authenticate with ``username`` and ``password``: the SCRAM client
    (``scramp``) prepares both with SASLprep (RFC 4013), which refuses a control character, a
    private-use, unassigned or non-character code point, or mixed-direction text. Raises
    :class:`~lazyconv.errors.ConfigurationError` saying which of the two and why (never the
    password)."""
    try:
        scramp.ScramClient([SCRAM_SHA_256], username, "-")
    except scramp.ScramException as exc:
        raise ConfigurationError(f"SCRAM user name {username!r} is refused by SASLprep "
                                 f"(RFC 4013): {exc.args[0]}") from None
    try:
        scramp.ScramClient([SCRAM_SHA_256], "-", password)
    except scramp.ScramException as exc:
        raise ConfigurationError(f"the SCRAM password of user {username!r} is refused by "
                                 f"SASLprep (RFC 4013): {exc.args[0]}") from None


@dataclass(frozen=True)
class SaslClientStep:
    """What the upstream driver does next: write ``send`` (a whole frame) if any; ``done``:
    authenticated (``reauthenticate_at`` says when to begin again, monotonic, or None)."""

    send: bytes | None = None
    done: bool = False
    reauthenticate_at: float | None = None


def oauthbearer_initial_response(token: str) -> bytes:
    """The client's first (and only) OAUTHBEARER message (RFC 7628, as Kafka's client sends it:
    no authorization id, no extensions) for a bearer token. Raises
    :class:`AuthenticationError` for a token that is not one (it never quotes it)."""
    if not token or len(token) > MAX_BEARER_TOKEN or not _BEARER_TOKEN.fullmatch(token):
        raise AuthenticationError(f"the OAUTHBEARER token is not a bearer token (empty, longer "
                                  f"than {MAX_BEARER_TOKEN} characters, or characters other than "
                                  "letters, digits and -._~+/=)")
    return b"n,,\x01auth=Bearer " + token.encode("ascii") + b"\x01\x01"


class SaslClientExchange:
    """Authenticate one connection to a Kafka broker: SaslHandshake v1, then SaslAuthenticate
    (``authenticate_version``: the highest both sides speak, from ApiVersions, at most 2).
    OAUTHBEARER takes ``token`` instead of a user name and password: called at each
    (re-)authentication, it gives the bearer token to send (read afresh, e.g. from a file).

    ``start(now)`` gives the first frame; every response frame (the bytes after its size) goes
    to :meth:`receive`, which raises :class:`AuthenticationError` when the broker refuses (with
    its message, never the password) and :class:`~lazyconv.errors.ProtocolError` for an answer
    that does not fit. Call :meth:`start` again to re-authenticate on the same connection."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 authenticate_version: int = 2, client_id: str | None = None,
                 correlation_ids: Iterable[int] | None = None,
                 rng: random.Random | None = None,
                 token: Callable[[], str] | None = None) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise ConfigurationError(f"sasl.mechanism {mechanism!r} is not supported (supported: "
                                     f"{', '.join(CLIENT_MECHANISMS)})")
        if not AUTHENTICATE.supports(authenticate_version):
            raise ConfigurationError(f"SaslAuthenticate v{authenticate_version} does not exist")
        if mechanism == OAUTHBEARER:
            if token is None:
                raise ConfigurationError("OAUTHBEARER needs a token")
        elif not username or not password:
            raise ConfigurationError(f"{mechanism} needs a user name and a password")
        elif mechanism != PLAIN:
            check_scram_credentials(username, password)  # scramp's own error, else at the handshake
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._token = token
        self._oauth_status: str | None = None  # the broker's refusal, before its error
        self.authenticate_version = authenticate_version
        self.client_id = client_id
        self._ids = iter(correlation_ids) if correlation_ids is not None else itertools.count(1)
        self._rng = rng
        self._expected: tuple[ApiSpec, int] | None = None
        self._scram: scramp.ScramClient | None = None
        self._scram_stage = 0
        self.session_lifetime_ms = 0
        self.reauthenticate_at: float | None = None
        self.authenticated = False

    def __repr__(self) -> str:
        return f"SaslClientExchange({self.mechanism}, user={self.username!r})"

    @property
    def _as_whom(self) -> str:
        return f" as {self.username!r}" if self.username else ""

    def _request(self, spec: ApiSpec, version: int, body: dict[str, object]) -> bytes:
        correlation_id = next(self._ids)
        payload = (encode_request_header(spec.request_header_version(version), spec.key, version,
                                         correlation_id, self.client_id)
                   + spec.encode_request(version, body))
        self._expected = (spec, correlation_id)
        return len(payload).to_bytes(4, "big") + payload

    def start(self, now: float) -> bytes:
        """The SaslHandshake v1 frame that begins (or re-begins) authentication."""
        self.authenticated = False
        self._scram = None
        self._scram_stage = 0
        self._oauth_status = None
        return self._request(HANDSHAKE, 1, {"mechanism": self.mechanism})

    def _first_token(self) -> bytes:
        if self.mechanism == PLAIN:
            return plain_token(self.username, self._password)
        if self.mechanism == OAUTHBEARER:
            assert self._token is not None
            return oauthbearer_initial_response(self._token())
        self._scram = scramp.ScramClient([self.mechanism], self.username, self._password)
        self._scram_stage = 1
        return self._scram.get_client_first().encode()

    def receive(self, frame: bytes | bytearray | memoryview, now: float) -> SaslClientStep:
        """The next step after one response frame from the broker."""
        if self._expected is None:
            raise ProtocolError("a SASL response arrived but no SASL request is outstanding")
        spec, correlation_id = self._expected
        assert spec is HANDSHAKE or spec is AUTHENTICATE
        version = 1 if spec is HANDSHAKE else self.authenticate_version
        reader = Reader(bytes(frame))
        header = decode_response_header(reader, spec.response_header_version(version))
        if header["correlation_id"] != correlation_id:
            raise ProtocolError(f"{spec.name} response with correlation id "
                                f"{header['correlation_id']}, expected {correlation_id}")
        body = spec.decode_response(version, reader)
        self._expected = None
        if spec is HANDSHAKE:
            error = body["error_code"]
            if error == UNSUPPORTED_SASL_MECHANISM:
                raise AuthenticationError(f"the broker does not enable SASL mechanism "
                                          f"{self.mechanism} (it enables: "
                                          f"{', '.join(body['mechanisms']) or 'none'})")
            if error != NONE:
                raise AuthenticationError(f"SaslHandshake refused with error {error}")
            return SaslClientStep(send=self._request(AUTHENTICATE, self.authenticate_version,
                                                     {"auth_bytes": self._first_token()}))
        error = body["error_code"]
        if error != NONE:
            message = body.get("error_message") or ""
            if self._oauth_status is not None:
                raise AuthenticationError(f"the broker refused the OAUTHBEARER token "
                                          f"({self._oauth_status})")
            raise AuthenticationError(f"the broker refused {self.mechanism} authentication"
                                      f"{self._as_whom} (error {error}: {message})")
        return self._authenticated_or_next(body["auth_bytes"], body.get("session_lifetime_ms", 0), now)

    def _oauth_refused(self, answer: bytes) -> SaslClientStep:
        """The broker's error challenge (RFC 7628 3.2.2: a JSON status): the client answers
        with a single separator, and the broker then fails the authentication."""
        if self._oauth_status is not None:
            raise ProtocolError("a second OAUTHBEARER challenge after the client's separator")
        try:
            status = str(json.loads(answer.decode("utf-8")).get("status", "?"))[:64]
        except (UnicodeDecodeError, ValueError, AttributeError):
            status = "an error challenge that is not JSON"
        self._oauth_status = status if status.isprintable() else "?"
        return SaslClientStep(send=self._request(AUTHENTICATE, self.authenticate_version,
                                                 {"auth_bytes": b"\x01"}))

    def _authenticated_or_next(self, token: bytes, lifetime_ms: int, now: float) -> SaslClientStep:
        if self.mechanism == OAUTHBEARER:
            if token:
                return self._oauth_refused(bytes(token))
            if self._oauth_status is not None:
                raise ProtocolError("the broker accepted an OAUTHBEARER exchange it had refused")
        elif self.mechanism != PLAIN:
            assert self._scram is not None
            try:
                text = token.decode("utf-8")
                if self._scram_stage == 1:
                    self._scram.set_server_first(text)
                    self._scram_stage = 2
                    return SaslClientStep(send=self._request(
                        AUTHENTICATE, self.authenticate_version,
                        {"auth_bytes": self._scram.get_client_final().encode()}))
                self._scram.set_server_final(text)
            except (UnicodeDecodeError, scramp.ScramException) as exc:
                raise AuthenticationError(f"the broker's SCRAM answer does not verify "
                                          f"({type(exc).__name__}): it may not know this user's "
                                          "password") from None
            self._scram = None
        self.authenticated = True
        self.session_lifetime_ms = lifetime_ms
        delay = reauthentication_delay_s(lifetime_ms, self._rng)
        self.reauthenticate_at = None if delay is None else now + delay
        return SaslClientStep(done=True, reauthenticate_at=self.reauthenticate_at)



VerifyPlain = Callable[[PlainCredentials], "bool | Awaitable[bool]"]
"""The shape of a PLAIN check the driver runs for :attr:`SaslOutcome.verify` (``PlainUsers.check``
in gateway identity mode; an upstream authentication in passthrough mode)."""
