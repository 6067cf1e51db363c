"""Whose identity a client's upstream connections carry: the gateway's two identity modes.

The gateway opens several upstream connections per client (one per broker it needs) and a SCRAM
exchange cannot be replayed to several brokers (its nonces), so a client's identity reaches the
cluster in one of two ways (``gateway.identity``):

- **passthrough** (SASL/PLAIN listeners): the gateway checks a client's user name and password
  by authenticating upstream with them (:meth:`GatewayIdentities.check_plain`), keeps that
  connection as the client's first, and opens every further upstream connection of that
  client with the same credentials. The cluster's ACLs, quotas and audit log see the client's
  own principal; the gateway stores no password (it holds a client's in memory while that
  client is connected).
- **gateway**: the listener authenticates the client (PLAIN users of its JAAS line, SCRAM
  credentials from the gateway's file, or the client certificate's subject for mTLS, mapped by
  ``ssl.principal.mapping.rules``), and its upstream connections authenticate with the
  credentials configured for that principal, or with the gateway's own service identity
  (``gateway.upstream.credentials.fallback=service``). A principal with neither is refused
  when it authenticates.

Either way the client's :class:`~lazyconv.gateway._upstream.UpstreamSession` is made here, as
that identity: its metadata view (the topics it may describe) is the identity's own.
:class:`GatewayIdentities` is the :class:`~lazyconv.net._secure_connection.ClientAuthenticator`
the gateway hands the connection loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from lazyconv.errors import AuthenticationError, UpstreamAuthenticationError
from lazyconv.gateway._settings import GatewaySettings, UpstreamCredentials
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY, UpstreamIdentity
from lazyconv.net._sasl import PLAIN, PlainCredentials
from lazyconv.net._secure_connection import ListenerSecurity
from lazyconv.net._session import Session

log = logging.getLogger(__name__)

__all__ = ["GatewayIdentities", "PASSTHROUGH", "GATEWAY"]

PASSTHROUGH = "passthrough"
GATEWAY = "gateway"
_USER_PREFIX = "User:"


def principal_name(principal: str) -> str:
    """``User:alice`` -> ``alice`` (the name the credentials map is keyed by)."""
    return principal[len(_USER_PREFIX):] if principal.startswith(_USER_PREFIX) else principal


class GatewayIdentities:
    """Authenticates clients and gives each the upstream identity its mode says (see the
    module docstring)."""

    def __init__(self, cluster: UpstreamCluster, mode: str = GATEWAY, *,
                 principal_credentials: Mapping[str, UpstreamCredentials] | None = None,
                 service: UpstreamCredentials | None = None, fallback: str = "service") -> None:
        """``principal_credentials``: the upstream credentials by principal name (gateway
        mode); ``service``: the gateway's own (None: connect without SASL); ``fallback``:
        ``service`` or ``none`` for a principal without credentials of its own."""
        if mode not in (PASSTHROUGH, GATEWAY):
            raise ValueError(f"unknown identity mode {mode!r}")
        self.cluster = cluster
        self.mode = mode
        self._credentials = dict(principal_credentials or {})
        self._service = service
        self._fallback = fallback
        self.refused = 0  # principals refused for want of upstream credentials

    @classmethod
    def from_settings(cls, settings: GatewaySettings, cluster: UpstreamCluster) -> GatewayIdentities:
        upstream_sasl = settings.upstream.uses_sasl
        return cls(cluster, settings.identity,
                   principal_credentials=settings.principal_credentials if upstream_sasl else {},
                   service=settings.upstream.credentials if upstream_sasl else None,
                   fallback=settings.credentials_fallback if upstream_sasl else "service")

    def __repr__(self) -> str:
        return f"GatewayIdentities({self.mode}, {len(self._credentials)} principals mapped)"

    def replace_credentials(self, principal_credentials: Mapping[str, UpstreamCredentials]) -> None:
        """The principals' upstream credentials from now on (a reload): clients that
        authenticate afterwards get them; a connected client keeps the upstream identity it
        got (its connections are already authenticated upstream)."""
        self._credentials = dict(principal_credentials)

    @property
    def mapped_principals(self) -> int:
        """How many principals have upstream credentials of their own."""
        return len(self._credentials)

    # -- the connection loop's ClientAuthenticator -------------------------------------------

    async def check_plain(self, credentials: PlainCredentials, session: Session,
                          security: ListenerSecurity) -> bool:
        """Gateway mode: the listener's PLAIN users. Passthrough: the cluster's answer to the
        same credentials (a refusal is False; an unreachable cluster raises
        :class:`~lazyconv.errors.UpstreamError` and the client is closed without an answer)."""
        if self.mode == GATEWAY:
            users = security.plain_users
            return users is not None and users.check(credentials)
        if credentials.authzid not in ("", credentials.username):
            return False
        identity = UpstreamIdentity(UpstreamCredentials(PLAIN, credentials.username,
                                                        credentials.password))
        try:
            conn = await self.cluster.open_any(identity)
        except UpstreamAuthenticationError as exc:
            log.debug("passthrough: the cluster refused the credentials: %s", exc.message)
            return False
        upstream = session.state
        if isinstance(upstream, UpstreamSession):  # re-authentication (KIP-368)
            conn.close()
            if upstream.identity.key == identity.key:
                upstream.identity = identity  # new connections use the password just proved
            return True
        upstream = UpstreamSession(self.cluster, identity=identity)
        upstream.adopt(conn)
        session.state = upstream
        return True

    def admit(self, session: Session) -> str | None:
        """Whether a principal has an upstream identity to use."""
        reason = self._refusal(session)
        if reason is not None and self.mode == GATEWAY:
            self.refused += 1
        return reason

    def _refusal(self, session: Session) -> str | None:
        """Why ``session``'s principal has no upstream identity, None when it has one."""
        if self.mode == PASSTHROUGH:
            if isinstance(session.state, UpstreamSession):  # made by its PLAIN check
                return None
            return "passthrough mode serves SASL/PLAIN clients only"
        if self.identity_for(session) is None:
            return (f"no upstream credentials for principal {principal_name(session.principal)!r} "
                    "(gateway.upstream.credentials.<principal>.*, or "
                    "gateway.upstream.credentials.fallback=service)")
        return None

    # -- the handler's side -------------------------------------------------------------

    def identity_for(self, session: Session) -> UpstreamIdentity | None:
        """The upstream identity of an authenticated session (gateway mode), None when its
        principal has none."""
        if self._service is None and not self._credentials:
            return ANONYMOUS_IDENTITY
        found = self._credentials.get(principal_name(session.principal))
        if found is None and self._fallback == "service":
            found = self._service
        return UpstreamIdentity(found) if found is not None else None

    def upstream_session(self, session: Session) -> UpstreamSession:
        """The client's upstream connections, as its identity (already made by the PLAIN check
        in passthrough mode). Raises :class:`~lazyconv.errors.AuthenticationError` for a
        principal :meth:`admit` refuses (a caller without a connection loop, which never asked):
        it gets no one's identity, the service's neither."""
        if isinstance(session.state, UpstreamSession):
            return session.state
        reason = self._refusal(session)
        if reason is not None:
            raise AuthenticationError(f"{session.principal} is not admitted: {reason}")
        identity = self.identity_for(session)
        assert identity is not None
        return UpstreamSession(self.cluster, identity=identity)
