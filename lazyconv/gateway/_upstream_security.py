"""How the gateway's upstream connections are secured: TLS toward the brokers and SASL
authentication as an upstream identity, with re-authentication (KIP-368).

- :class:`UpstreamSecurity`: the ``--upstream-config`` file's ``security.protocol`` and TLS
  settings, the SSL context built once (the chain always verified, the host name too unless
  ``ssl.endpoint.identification.algorithm`` is empty; SNI from the broker's host name).
- :class:`UpstreamIdentity`: who a connection authenticates as: SASL credentials, or nobody
  (a PLAINTEXT or SSL cluster; with a client certificate in the key store, the cluster's
  principal is its subject). :attr:`UpstreamIdentity.key` names what the cluster sees, so that
  what is cached per identity (the topics a principal may describe) is never shared with
  another.
- :func:`authenticate`: SaslHandshake v1 and SaslAuthenticate (the highest version both sides
  speak, at most 2) on an open connection, through :class:`~lazyconv.net._sasl.SaslClientExchange`;
  the broker's session lifetime (``connections.max.reauth.ms``) gives the time to begin again,
  85-95 % of it, as Kafka's own client does.

There is no silent fallback: a certificate that does not verify, a broker that is not TLS, a
refused password all fail the connection with a one-line :class:`~lazyconv.errors.UpstreamError`
(:class:`~lazyconv.errors.UpstreamAuthenticationError` for the credentials) that never holds a
secret.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lazyconv.errors import (
    AuthenticationError,
    ProtocolError,
    UpstreamAuthenticationError,
    UpstreamError,
)
from lazyconv.net._sasl import SaslClientExchange
from lazyconv.protocol import _sasl_authenticate

if TYPE_CHECKING:
    from lazyconv.gateway._settings import UpstreamCredentials, UpstreamSettings
    from lazyconv.gateway._upstream import UpstreamConnection

__all__ = ["UpstreamSecurity", "UpstreamIdentity", "ANONYMOUS_IDENTITY", "authenticate",
           "handshake_error"]

_MAX_AUTHENTICATE_VERSION = 2


@dataclass(frozen=True)
class UpstreamSecurity:
    """TLS toward the cluster (None context: PLAINTEXT or SASL_PLAINTEXT) and whether SASL is
    spoken (see the module docstring)."""

    protocol: str = "PLAINTEXT"
    context: ssl.SSLContext | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_settings(cls, settings: UpstreamSettings) -> UpstreamSecurity:
        context = settings.ssl.context() if settings.ssl is not None else None
        return cls(settings.security_protocol, context,
                   settings.ssl.check_hostname if settings.ssl is not None else True)


@dataclass(frozen=True)
class UpstreamIdentity:
    """Who upstream connections authenticate as (``credentials`` None: no SASL)."""

    credentials: UpstreamCredentials | None = None

    @property
    def key(self) -> str:
        """What the cluster sees this identity as: ``User:<name>`` for SASL with a user name
        (every such mechanism gives Kafka's default principal builder the same name); for
        OAUTHBEARER the token file's path (the principal is in the token, which may change: two
        files are two identities, never one); ``-`` for the connection's own (TLS subject or
        ANONYMOUS)."""
        credentials = self.credentials
        if credentials is None:
            return "-"
        if credentials.token_file is not None:
            return f"OAUTHBEARER:{credentials.token_file}"
        return f"User:{credentials.username}"

    def __repr__(self) -> str:
        return f"UpstreamIdentity({self.key})"


ANONYMOUS_IDENTITY = UpstreamIdentity()


def handshake_error(address: object, exc: BaseException) -> UpstreamError:
    """The one-line error for a connection that failed to open (TLS facts named plainly)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return UpstreamError(f"upstream broker {address}: its certificate does not verify "
                             f"({exc.verify_message}); check ssl.truststore.* and "
                             "ssl.endpoint.identification.algorithm in the --upstream-config file")
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNEXPECTED_EOF_WHILE_READING"):
            return UpstreamError(f"upstream broker {address} does not speak TLS ({reason}): is "
                                 "security.protocol right for this port?")
        return UpstreamError(f"upstream broker {address}: TLS handshake failed ({reason})")
    return UpstreamError(f"cannot connect to upstream broker {address}: {exc or 'timed out'}")


async def authenticate(conn: UpstreamConnection, credentials: UpstreamCredentials) -> float | None:
    """Authenticate ``conn`` (open, ApiVersions done) as ``credentials``; when to begin again
    (monotonic), or None when the broker sets no session lifetime. Raises
    :class:`UpstreamAuthenticationError` when the broker refuses them, :class:`UpstreamError`
    when the exchange cannot run."""
    low_high = conn.versions.get(_sasl_authenticate.SPEC.key)
    if low_high is None:
        raise UpstreamError(f"upstream broker {conn.address} does not offer SaslAuthenticate "
                            "(is security.protocol SASL_* on a SASL listener?)")
    version = min(low_high[1], _MAX_AUTHENTICATE_VERSION)
    exchange = SaslClientExchange(credentials.mechanism, credentials.username, credentials.password,
                                  authenticate_version=version, client_id=conn.client_id,
                                  correlation_ids=conn.correlation_ids(),
                                  token=credentials.token if credentials.token_file else None)
    try:
        frame: bytes | None = exchange.start(time.monotonic())
        while frame is not None:
            answer = await conn.exchange_frame(frame)
            step = exchange.receive(answer, time.monotonic())
            if step.done:
                return step.reauthenticate_at
            frame = step.send
    except AuthenticationError as exc:
        raise UpstreamAuthenticationError(f"upstream broker {conn.address}: {exc.message}") from None
    except ProtocolError as exc:
        raise UpstreamError(f"upstream broker {conn.address}: SASL exchange failed: "
                            f"{exc.message}") from None
    raise UpstreamError(f"upstream broker {conn.address}: the SASL exchange ended early")
