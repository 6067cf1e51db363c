"""The gateway's settings: one typed, frozen :class:`GatewaySettings` from three sources.

1. ``--config FILE``: the gateway's own settings, under Kafka's broker property names wherever
   Kafka has one (``listeners``, ``ssl.*``, ``sasl.enabled.mechanisms``,
   ``listener.name.<l>.<mechanism>.sasl.jaas.config`` ...: see
   :mod:`lazyconv.net._listener_config`) and ours under ``gateway.``;
2. ``--upstream-config FILE``: how to reach the cluster, as a Kafka client properties file
   (what Kafka's tools take with ``--command-config``: ``bootstrap.servers``,
   ``security.protocol``, ``ssl.*``, ``sasl.mechanism``, ``sasl.jaas.config`` ...);
3. command-line overrides (a dict of the same keys; the CLI maps its options to them). A
   secret is never taken from the command line: give it in a file, or as ``${env:NAME}`` or
   ``${file:PATH}`` there.

Every key either file may hold is in one table, :data:`GATEWAY_KEYS` and
:data:`UPSTREAM_KEYS` (type, default, documentation; issue 41 adds its keys to the first),
plus the patterns Kafka's per-listener and per-principal names form. An unknown key is an
error naming its file and line, with the closest known key.

**Identity** (``gateway.identity``):

- ``passthrough``: a client authenticates with SASL/PLAIN; the gateway checks its user and
  password by authenticating upstream with them, and uses them for every upstream connection
  of that client: the cluster's ACLs, quotas and audit log see the client's own principal.
  Every client listener must be SASL with PLAIN as its only mechanism (SCRAM cannot be
  replayed to several brokers: its nonces), and the upstream side must be SASL/PLAIN;
- ``gateway``: the gateway authenticates clients itself (PLAIN users from the listener's JAAS
  line, SCRAM users from ``gateway.scram.credentials.file``, certificate subjects for mTLS)
  and connects upstream with the credentials configured for the client's principal
  (``gateway.upstream.credentials.<principal>.*`` or the file
  ``gateway.upstream.credentials.file``; ``<principal>`` is the principal's name without
  ``User:``, with ``=``, ``:`` and spaces escaped by a backslash as properties keys need:
  ``gateway.upstream.credentials.CN\\=alice,OU\\=eng.username``), or with the upstream file's own identity
  (``gateway.upstream.credentials.fallback=service``; ``none`` refuses principals without
  credentials).

:meth:`GatewaySettings.describe` prints the effective settings for ``--check-config``,
secrets masked.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from lazyconv.errors import AuthenticationError, ConfigurationError
from lazyconv.net._jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
)
from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._listener_config import (
    LISTENER_LEVEL_SETTINGS,
    MECHANISM_LEVEL_SETTINGS,
    SECURITY_PROTOCOLS,
    ListenerConfig,
    parse_listeners,
)
from lazyconv.net._properties import (
    Properties,
    Property,
    did_you_mean,
    is_secret_key,
    load_properties,
    mask_value,
)
from lazyconv.net._sasl import (
    CLIENT_MECHANISMS,
    MAX_BEARER_TOKEN,
    OAUTHBEARER,
    PLAIN,
    SUPPORTED_MECHANISMS,
    check_scram_credentials,
)
from lazyconv.net._scram_credentials import SCRAM_MECHANISMS
from lazyconv.net._server import WILDCARD_HOSTS, send_buffer_problem
from lazyconv.net._tls import SslClientSettings
from lazyconv.protocol._primitives import MAX_STRING_BYTES

__all__ = [
    "Setting",
    "GATEWAY_KEYS",
    "UPSTREAM_KEYS",
    "UpstreamCredentials",
    "UpstreamSettings",
    "GatewaySettings",
    "IDENTITY_MODES",
    "DEFAULT_GATEWAY_CHUNK_SIZE",
    "DEFAULT_GATEWAY_SEND_BUFFER",
    "check_materials",
    "client_id_prefix_problem",
    "refuse_a_wildcard_host",
    "settings_reference",
]

IDENTITY_MODES = ("passthrough", "gateway")

# A request header's client id: a Kafka string, at most 32767 bytes of UTF-8.
MAX_CLIENT_ID_BYTES = MAX_STRING_BYTES

# The gateway converts up to 1 MiB of input per step, not Kafka's 128 KiB: every step costs it a
# fixed hand-off (to a conversion thread and back, and the Python that drives the kernel), and
# 8 consumers of lz4 or snappy records cost it 3-12 % less CPU per GiB with 1 MiB (three runs,
# docs/guide/benchmarks.md, "The conversion step"); the bytes sent do not depend on it.
DEFAULT_GATEWAY_CHUNK_SIZE = MAX_CHUNK_SIZE

# SO_SNDBUF of client connections: 1 MiB, not Kafka's 100 KiB (socket.send.buffer.bytes). A
# converted 1 MiB chunk then goes to the client's socket in one write instead of several, each
# after a wait for writability (a turn of the event loop); 100 KiB cost the gateway 1.04-1.09x the
# CPU per GiB for 8 consumers of uncompressed records (docs/guide/benchmarks.md, "The client
# socket's send buffer"). The kernel keeps these bytes, not the gateway's heap; Linux caps the
# size at net.core.wmem_max and doubles it.
DEFAULT_GATEWAY_SEND_BUFFER = 1 << 20


@dataclass(frozen=True)
class Setting:
    """One known key: its type (``str``, ``int``, ``bool``, ``list``, ``password``, ``path``,
    ``choice``), default (None: unset), the choices of a ``choice`` and what it does."""

    key: str
    type: str
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    kafka: bool = False  # a Kafka broker (or client) property name

    @property
    def secret(self) -> bool:
        return self.type == "password" or is_secret_key(self.key)


def _ssl_keys(kafka_client: bool) -> list[Setting]:
    keys = [
        Setting("ssl.keystore.type", "choice", None, "PEM or PKCS12 (JKS is refused with the keytool "
                "line that converts it); unset: taken from the file", ("PEM", "PKCS12", "JKS"), True),
        Setting("ssl.keystore.location", "path", None, "the key store file (PEM: key and certificate "
                "chain in one file)", kafka=True),
        Setting("ssl.keystore.password", "password", None, "the PKCS12 store's password (not for PEM)",
                kafka=True),
        Setting("ssl.key.password", "password", None, "the private key's password (an encrypted key)",
                kafka=True),
        Setting("ssl.keystore.key", "password", None, "the private key as PEM text (with "
                "ssl.keystore.certificate.chain)", kafka=True),
        Setting("ssl.keystore.certificate.chain", "str", None, "the certificate chain as PEM text",
                kafka=True),
        Setting("ssl.truststore.type", "choice", None, "PEM or PKCS12", ("PEM", "PKCS12", "JKS"), True),
        Setting("ssl.truststore.location", "path", None, "CA certificates to verify peers with "
                "(unset: the system's CAs)", kafka=True),
        Setting("ssl.truststore.password", "password", None, "the PKCS12 trust store's password",
                kafka=True),
        Setting("ssl.truststore.certificates", "str", None, "CA certificates as PEM text", kafka=True),
        Setting("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions allowed (a "
                "contiguous range)", kafka=True),
        Setting("ssl.cipher.suites", "list", None, "TLS 1.2 cipher suites (OpenSSL or IANA names); "
                "unset: OpenSSL's defaults", kafka=True),
        Setting("ssl.protocol", "str", "TLSv1.3", "accepted for compatibility; ssl.enabled.protocols "
                "decides", kafka=True),
    ]
    if kafka_client:
        keys.append(Setting("ssl.endpoint.identification.algorithm", "str", "https", "https: the "
                            "broker's certificate must name its host; empty: only the chain is "
                            "verified", kafka=True))
    else:
        keys += [
            Setting("ssl.client.auth", "choice", "none", "required: clients need a certificate the "
                    "trust store verifies (mTLS); requested: verified when given; none",
                    ("required", "requested", "none"), True),
            Setting("ssl.principal.mapping.rules", "str", "DEFAULT", "how a client certificate's "
                    "subject becomes a principal (RULE:pattern/replacement/[LU], DEFAULT)", kafka=True),
        ]
    return keys


GATEWAY_KEYS: tuple[Setting, ...] = (
    Setting("listeners", "list", "PLAINTEXT://127.0.0.1:9092", "NAME://host:port,... where the "
            "gateway accepts clients (an empty host: every interface)", kafka=True),
    Setting("advertised.listeners", "list", None, "NAME://host:port,... that Metadata announces "
            "(default: the listeners)", kafka=True),
    Setting("listener.security.protocol.map", "list", None, "NAME:PROTOCOL,... (default: each of "
            "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL named after itself)", kafka=True),
    Setting("sasl.enabled.mechanisms", "list", "GSSAPI", "SASL mechanisms of SASL listeners: "
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI is not served)", kafka=True),
    Setting("connections.max.reauth.ms", "int", 0, "a SASL session's lifetime: clients must "
            "re-authenticate (KIP-368) or are disconnected; 0: sessions never expire", kafka=True),
    Setting("sasl.server.max.receive.size", "int", 524288, "the largest frame before "
            "authentication", kafka=True),
    Setting("connections.max.idle.ms", "int", 600000, "an idle client connection is closed after "
            "this long", kafka=True),
    Setting("socket.request.max.bytes", "int", 104857600, "the largest request a client may send",
            kafka=True),
    Setting("queued.max.request.bytes", "int", 209715200, "bytes of requests held at once, over "
            "every connection; 0 or -1: unbounded (Kafka's default is -1)", kafka=True),
    Setting("socket.send.buffer.bytes", "int", DEFAULT_GATEWAY_SEND_BUFFER, "SO_SNDBUF of client "
            "connections; -1: the OS default (Kafka's default is 102400; --socket-send-buffer)",
            kafka=True),
    *_ssl_keys(kafka_client=False),
    Setting("gateway.identity", "choice", "gateway", "passthrough: clients' own PLAIN credentials "
            "upstream; gateway: the gateway authenticates clients and maps principals to "
            "upstream credentials", IDENTITY_MODES),
    Setting("gateway.scram.credentials.file", "path", None, "SCRAM users of the SASL listeners "
            "(salted hashes, written by 'lazyconv gateway scram-credentials')"),
    Setting("gateway.upstream.credentials.file", "path", None, "a properties file of "
            "<principal>.sasl.mechanism/.username/.password (or .token.file): the upstream "
            "credentials of each principal (gateway identity mode)"),
    Setting("gateway.upstream.credentials.fallback", "choice", None, "a principal without "
            "credentials: service (the --upstream-config identity) or none (refused); default: "
            "service when no principal has credentials, else none", ("service", "none")),
    Setting("gateway.client.id.prefix", "str", "", "prepended to every client id the gateway "
            "sends upstream"),
    Setting("gateway.authentication.timeout.ms", "int", 10000, "how long a client may take to "
            "complete its TLS and SASL handshakes"),
    Setting("gateway.chunk.size", "int", DEFAULT_GATEWAY_CHUNK_SIZE, "input bytes down-converted per step, 16384 to "
            "1048576 (--chunk-size)"),
    Setting("gateway.workers", "int", None, "conversion threads (--workers; unset: one per core)"),
    Setting("gateway.convert.on.loop", "choice", "quick", "quick: uncompressed fetches, and "
            "small none, snappy and lz4 message sets, are converted on the event loop, the rest "
            "on the conversion threads; never: every conversion on the threads "
            "(--convert-on-loop)",
            ("quick", "never")),
    Setting("gateway.conversion.cache", "int", 16 << 20, "bytes of recent down-conversions kept "
            "for consumers reading the same records (--conversion-cache; 0: off)"),
    Setting("gateway.fetch.ahead.bytes", "int", 32 << 20, "what the ranges fetched ahead for "
            "sequential consumers may hold over every connection (--fetch-ahead-bytes; 0: off)"),
    Setting("gateway.fetch.splice", "choice", "true", "pass the records of a v10+ fetch that "
            "one upstream leader answers from its socket to the client's with splice(2), "
            "without copying them through the gateway, where neither side is TLS and the "
            "upstream is PLAINTEXT (--fetch-splice)", ("true", "false")),
    Setting("gateway.request.read.timeout.ms", "int", 30000, "a client whose request bytes stop "
            "arriving for this long is closed (--request-read-timeout-ms)"),
    Setting("gateway.write.timeout.ms", "int", 30000, "a client that reads none of its response "
            "for this long is closed (--write-timeout-ms)"),
    Setting("gateway.metrics.listener", "str", None, "HOST:PORT of the HTTP listener of /metrics, "
            "/health/live, /health/ready and /clients (--metrics-host, --metrics-port; unset: no "
            "metrics are kept; port 0 picks a free one)"),
    Setting("gateway.clients.max", "int", 10000, "clients the clients report keeps, least "
            "recently seen forgotten first (--max-clients)"),
    Setting("gateway.drain.timeout.ms", "int", 20000, "on SIGTERM, how long requests in flight "
            "may take before their connections are cut (--drain-timeout-ms)"),
    Setting("gateway.log.format", "choice", "text", "log lines as text with a timestamp or one "
            "JSON object per line (--log-format)", ("text", "json")),
    Setting("gateway.log.file", "path", None, "log to this file instead of stderr, reopened on "
            "SIGHUP (--log-file)"),
)

UPSTREAM_KEYS: tuple[Setting, ...] = (
    Setting("bootstrap.servers", "list", None, "the cluster's bootstrap brokers (or --upstream)",
            kafka=True),
    Setting("security.protocol", "choice", "PLAINTEXT", "how to reach the cluster",
            SECURITY_PROTOCOLS, True),
    Setting("sasl.mechanism", "choice", "GSSAPI", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or "
            "OAUTHBEARER (a token from a file)", (*SUPPORTED_MECHANISMS, "GSSAPI", OAUTHBEARER), True),
    Setting("sasl.jaas.config", "str", None, "the gateway's own identity: PlainLoginModule or "
            "ScramLoginModule with username= and password=; OAuthBearerLoginModule (no options) "
            "with sasl.oauthbearer.token.endpoint.url", kafka=True),
    Setting("sasl.oauthbearer.token.endpoint.url", "str", None, "OAUTHBEARER: file:///PATH of a "
            "file holding the bearer token (a JWT), read again at each authentication, so a "
            "token refreshed in place is used from the next one on; no HTTP token endpoint",
            kafka=True),
    Setting("sasl.login.callback.handler.class", "str", None, "accepted for OAUTHBEARER as Kafka's "
            "clients set it (OAuthBearerLoginCallbackHandler); the token comes from the file",
            kafka=True),
    Setting("client.id", "str", None, "accepted; client ids come from the clients "
            "(gateway.client.id.prefix)", kafka=True),
    Setting("request.timeout.ms", "int", 30000, "how long an upstream request may take", kafka=True),
    Setting("metadata.max.age.ms", "int", 30000, "how long the cluster's metadata is trusted",
            kafka=True),
    Setting("fetch.max.bytes", "int", 1 << 20, "the most one upstream Fetch response may hold",
            kafka=True),
    *_ssl_keys(kafka_client=True),
)

_GATEWAY_BY_KEY = {s.key: s for s in GATEWAY_KEYS}
_UPSTREAM_BY_KEY = {s.key: s for s in UPSTREAM_KEYS}
_CREDENTIAL_FIELDS = ("sasl.mechanism", "username", "password", "token.file")
_LOGIN_CALLBACK_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
_CREDENTIALS_PREFIX = "gateway.upstream.credentials."


# -- values --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamCredentials:
    """SASL credentials for upstream connections (the password kept out of repr): a user name
    and password, or for OAUTHBEARER the file that holds the bearer token."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    token_file: Path | None = None

    def __post_init__(self) -> None:
        if self.mechanism not in CLIENT_MECHANISMS:
            raise ConfigurationError(f"upstream SASL mechanism {self.mechanism!r} is not supported "
                                     f"({', '.join(CLIENT_MECHANISMS)})")
        if self.mechanism == OAUTHBEARER:
            if self.token_file is None or self.username or self.password:
                raise ConfigurationError("upstream OAUTHBEARER credentials are a token file "
                                         "(no username or password)")
        elif not self.username or not self.password or self.token_file is not None:
            raise ConfigurationError(f"upstream {self.mechanism} credentials need a username and a "
                                     "password (a token file is for OAUTHBEARER)")
        elif self.mechanism != PLAIN:
            check_scram_credentials(self.username, self.password)

    def token(self) -> str:
        """OAUTHBEARER: the bearer token, read from its file now. Raises
        :class:`~lazyconv.errors.AuthenticationError` naming the file, never its content."""
        assert self.token_file is not None
        return read_token_file(self.token_file)

    def describe(self, masked: bool = True) -> str:
        """``SCRAM-SHA-512 as 'alice' (password [hidden])``, or ``OAUTHBEARER, token from PATH``."""
        if self.mechanism == OAUTHBEARER:
            return f"{self.mechanism}, token from {self.token_file}"
        password = "[hidden]" if masked else self.password
        return f"{self.mechanism} as {self.username!r} (password {password})"


def read_token_file(path: Path) -> str:
    """A bearer token file's token (surrounding white space stripped); an
    :class:`~lazyconv.errors.AuthenticationError` naming the file when it cannot be read or
    holds no token."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BEARER_TOKEN + 2)
    except OSError as exc:
        raise AuthenticationError(f"the OAUTHBEARER token file {path} cannot be read "
                                  f"({exc.strerror or type(exc).__name__})") from None
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        token = ""
    if not token or len(data) > MAX_BEARER_TOKEN + 1:
        raise AuthenticationError(f"the OAUTHBEARER token file {path} holds no token (empty, "
                                  f"not ASCII, or more than {MAX_BEARER_TOKEN} bytes)")
    return token


@dataclass(frozen=True)
class UpstreamSettings:
    """How the gateway reaches the cluster (``--upstream-config``)."""

    bootstrap_servers: tuple[str, ...]
    security_protocol: str
    ssl: SslClientSettings | None
    sasl_mechanism: str | None
    credentials: UpstreamCredentials | None  # the gateway's own identity (sasl.jaas.config)
    request_timeout_ms: int
    metadata_max_age_ms: int
    fetch_max_bytes: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class GatewaySettings:
    """Everything the gateway runs with (see the module docstring); build it with :meth:`load`."""

    listeners: tuple[ListenerConfig, ...]
    identity: str
    upstream: UpstreamSettings
    principal_credentials: Mapping[str, UpstreamCredentials]
    credentials_fallback: str
    scram_credentials_file: Path | None
    client_id_prefix: str
    authentication_timeout_ms: int
    chunk_size: int
    workers: int | None
    convert_on_loop: str
    conversion_cache_bytes: int
    connections_max_idle_ms: int
    socket_request_max_bytes: int
    queued_max_request_bytes: int
    socket_send_buffer_bytes: int
    request_read_timeout_ms: int
    write_timeout_ms: int
    fetch_ahead_bytes: int
    fetch_splice: bool
    metrics_listener: tuple[str, int] | None
    max_clients: int
    drain_timeout_ms: int
    log_format: str
    log_file: Path | None
    gateway_properties: Properties = field(repr=False)
    upstream_properties: Properties = field(repr=False)

    def connection_limits(self) -> ConnectionLimits:
        """The client connections' limits these settings give (Kafka's names)."""
        return ConnectionLimits(max_request_size=self.socket_request_max_bytes,
                                queued_max_request_bytes=self.queued_max_request_bytes,
                                connections_max_idle_ms=self.connections_max_idle_ms,
                                request_read_timeout_ms=self.request_read_timeout_ms,
                                write_timeout_ms=self.write_timeout_ms)

    def upstream_credentials_for(self, principal_name: str) -> UpstreamCredentials | None:
        """The credentials to connect upstream with for a client principal (gateway identity
        mode): its own, or the service identity under ``fallback=service``, else None (refuse)."""
        found = self.principal_credentials.get(principal_name)
        if found is not None:
            return found
        return self.upstream.credentials if self.credentials_fallback == "service" else None

    def describe(self, masked: bool = True) -> str:
        """The effective settings, one ``key=value`` per line, secrets masked unless ``masked``
        is False (``--check-config``)."""
        lines = ["# gateway (--config)"]
        given = set(self.gateway_properties)
        for entry in self.gateway_properties.entries():
            lines.append(f"{entry.key}={entry.shown if masked else entry.value}")
        for setting in GATEWAY_KEYS:
            if setting.key not in given and setting.default is not None:
                lines.append(f"{setting.key}={setting.default}  # default")
        lines.append(f"gateway.upstream.credentials.fallback={self.credentials_fallback}"
                     + ("" if "gateway.upstream.credentials.fallback" in given else "  # default"))
        for principal, creds in sorted(self.principal_credentials.items()):
            lines.append(f"# principal {principal}: {creds.describe(masked)}")
        lines.append("# listeners")
        lines += [f"#   {listener.describe()}" for listener in self.listeners]
        lines += [f"# WARNING {warning}" for listener in self.listeners
                  if (warning := listener.trust_warning()) is not None]
        lines.append("# upstream (--upstream-config)")
        upstream_given = set(self.upstream_properties)
        for entry in self.upstream_properties.entries():
            lines.append(f"{entry.key}={entry.shown if masked else entry.value}")
        for setting in UPSTREAM_KEYS:
            if setting.key not in upstream_given and setting.default is not None:
                lines.append(f"{setting.key}={setting.default}  # default")
        return "\n".join(lines) + "\n"

    # -- building ------------------------------------------------------------------------

    @classmethod
    def load(cls, config_file: str | os.PathLike[str] | None = None,
             upstream_config_file: str | os.PathLike[str] | None = None, *,
             overrides: Mapping[str, str] | None = None,
             upstream_overrides: Mapping[str, str] | None = None,
             environ: Mapping[str, str] | None = None,
             host: str | None = None, port: int | None = None,
             metrics_host: str | None = None, metrics_port: int | None = None,
             options: Mapping[str, str] | None = None,
             advertised_host: str | None = None) -> GatewaySettings:
        """Read the two files (either may be None), apply the overrides (command-line values
        for the gateway's keys and for the upstream's, e.g. ``bootstrap.servers`` from
        ``--upstream``), check everything, and build the settings.

        ``host``/``port`` (``--host``/``--port``): one PLAINTEXT listener (127.0.0.1 and 9092
        where one is not given), refused when the config file has ``listeners=``; a wildcard
        ``host`` is refused (as ``argument --host: ...``) unless ``advertised_host``
        (``--advertised-host``) or the file's ``advertised.listeners`` names what clients
        connect to (see :func:`refuse_a_wildcard_host`).
        ``metrics_host``/``metrics_port`` (``--metrics-host``/``--metrics-port``): each
        replaces only its part of the config file's ``gateway.metrics.listener``. ``options``:
        the command-line option that gave an override, by key (``gateway.chunk.size`` ->
        ``--chunk-size``); a refused value is then named as argparse names an option
        (``argument --chunk-size: ...``) instead of ``command line (gateway) gateway.chunk.size``."""
        gateway = (load_properties(config_file, environ=environ) if config_file is not None
                   else Properties())
        upstream = (load_properties(upstream_config_file, environ=environ)
                    if upstream_config_file is not None else Properties())
        gateway = gateway.merged(_listener_overrides(gateway, host, port, metrics_host,
                                                     metrics_port))
        gateway = _trimmed(gateway.merged(_overrides(overrides, "gateway", options)))
        upstream = _trimmed(upstream.merged(_overrides(upstream_overrides, "upstream", options)))
        _check_keys(gateway, _gateway_key_known, _GATEWAY_BY_KEY)
        _check_keys(upstream, lambda k: k in _UPSTREAM_BY_KEY, _UPSTREAM_BY_KEY)
        settings = cls._build(gateway, upstream, environ)
        if host is not None:  # the command line's listener (the file's listeners= is refused)
            for listener in settings.listeners:
                refuse_a_wildcard_host(listener.host, listener.advertised_host or advertised_host,
                                       option="--host")
        return settings

    @classmethod
    def _build(cls, gateway: Properties, upstream: Properties,
               environ: Mapping[str, str] | None) -> GatewaySettings:
        identity = _choice(gateway, "gateway.identity", _GATEWAY_BY_KEY)
        scram_file = _path(gateway, "gateway.scram.credentials.file")
        timeout_ms = _int(gateway, "gateway.authentication.timeout.ms", _GATEWAY_BY_KEY, 1)
        listeners = parse_listeners(gateway, scram_credentials_file=scram_file,
                                    plain_checked_elsewhere=identity == "passthrough",
                                    authentication_timeout_s=timeout_ms / 1000)
        upstream_settings = _upstream(upstream)
        principal_credentials = _principal_credentials(gateway, environ)
        _check_one_password_per_user(principal_credentials, upstream_settings.credentials)
        fallback = gateway.get("gateway.upstream.credentials.fallback") or (
            "none" if principal_credentials else "service")
        if fallback not in ("service", "none"):
            raise _refused(gateway, "gateway.upstream.credentials.fallback",
                           "expected service or none")
        if identity == "passthrough":
            _check_passthrough(listeners, upstream_settings, gateway, principal_credentials)
        elif upstream_settings.uses_sasl:
            if not principal_credentials and upstream_settings.credentials is None:
                raise ConfigurationError(
                    "gateway.identity=gateway with a SASL upstream needs credentials: the "
                    "--upstream-config file's sasl.jaas.config (one service identity) or "
                    "gateway.upstream.credentials.<principal>.* for each principal")
            if fallback == "service" and upstream_settings.credentials is None:
                raise ConfigurationError("gateway.upstream.credentials.fallback=service needs "
                                         "sasl.jaas.config in the --upstream-config file")
        chunk_size = _int(gateway, "gateway.chunk.size", _GATEWAY_BY_KEY, 1)
        if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise _refused(gateway, "gateway.chunk.size", "chunk size must be "
                           f"between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} bytes")
        settings = cls(
            listeners=tuple(listeners), identity=identity, upstream=upstream_settings,
            principal_credentials=principal_credentials, credentials_fallback=fallback,
            scram_credentials_file=scram_file,
            client_id_prefix=_client_id_prefix(gateway),
            authentication_timeout_ms=timeout_ms,
            chunk_size=chunk_size,
            workers=(_int(gateway, "gateway.workers", _GATEWAY_BY_KEY, 1)
                     if gateway.get("gateway.workers") else None),
            conversion_cache_bytes=_int(gateway, "gateway.conversion.cache", _GATEWAY_BY_KEY, 0),
            connections_max_idle_ms=_int(gateway, "connections.max.idle.ms", _GATEWAY_BY_KEY, 1),
            socket_request_max_bytes=_int(gateway, "socket.request.max.bytes", _GATEWAY_BY_KEY, 1024),
            # any value <= 0 is unbounded, as Kafka's SocketServer takes it
            queued_max_request_bytes=_int(gateway, "queued.max.request.bytes", _GATEWAY_BY_KEY,
                                          -(1 << 63)),
            socket_send_buffer_bytes=_send_buffer(gateway),
            request_read_timeout_ms=_int(gateway, "gateway.request.read.timeout.ms", _GATEWAY_BY_KEY, 1),
            write_timeout_ms=_int(gateway, "gateway.write.timeout.ms", _GATEWAY_BY_KEY, 1),
            fetch_ahead_bytes=_int(gateway, "gateway.fetch.ahead.bytes", _GATEWAY_BY_KEY, 0),
            fetch_splice=_choice(gateway, "gateway.fetch.splice", _GATEWAY_BY_KEY) == "true",
            convert_on_loop=_choice(gateway, "gateway.convert.on.loop", _GATEWAY_BY_KEY),
            metrics_listener=_host_port(gateway, "gateway.metrics.listener"),
            max_clients=_int(gateway, "gateway.clients.max", _GATEWAY_BY_KEY, 1),
            drain_timeout_ms=_int(gateway, "gateway.drain.timeout.ms", _GATEWAY_BY_KEY, 1),
            log_format=_choice(gateway, "gateway.log.format", _GATEWAY_BY_KEY),
            log_file=_path(gateway, "gateway.log.file"),
            gateway_properties=gateway, upstream_properties=upstream)
        queued, largest = settings.queued_max_request_bytes, settings.socket_request_max_bytes
        if 0 < queued < largest:  # named where it was given (ConnectionLimits names the keys)
            raise _refused(gateway, "queued.max.request.bytes", f"{queued} is "
                           f"below socket.request.max.bytes {largest} (or -1 for "
                           "unbounded)")
        # what the Gateway checks when it starts, checked here so that --check-config finds it
        settings.connection_limits()
        return settings


# -- checks and conversions ------------------------------------------------------------------


def client_id_prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot start the client ids sent upstream (None: it can): it must be
    UTF-8 text (not a stray byte of the command line) that fits in a client id."""
    try:
        size = len(prefix.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not UTF-8 text"
    if size > MAX_CLIENT_ID_BYTES:
        return f"is {size} bytes of UTF-8, longer than a client id may be ({MAX_CLIENT_ID_BYTES})"
    return None


def refuse_a_wildcard_host(host: str, advertised_host: str | None, *,
                           option: str | None = None) -> None:
    """Refuse to listen on a wildcard address (``0.0.0.0``, ``::``, every interface) with no
    ``advertised_host``: Metadata would name an address clients cannot connect to, and Kafka
    refuses the same (advertised.listeners cannot use a non-routable address). The one place
    of this rule, for :meth:`GatewaySettings.load` (``--host``, the error's ``option``) and for
    ``Gateway(host=...)``."""
    if advertised_host is not None or host not in WILDCARD_HOSTS:
        return
    shown = host or "(any)"
    what = f"argument {option}: {shown}" if option is not None else f"--host {shown}"
    raise ConfigurationError(f"{what} is a wildcard address, which clients cannot connect to: "
                             "give the address clients reach the gateway at with "
                             "--advertised-host", option=option)


def _client_id_prefix(props: Properties) -> str:
    key = "gateway.client.id.prefix"
    prefix = props.get(key, "")
    problem = client_id_prefix_problem(prefix)
    if problem is not None:
        raise _refused(props, key, f"the prefix {problem}")
    return prefix


_OPTION_SOURCE = "argument "  # the source of a setting a command-line option gave


def _refused(props: Properties, key: str, problem: str) -> ConfigurationError:
    """The error refusing ``key``'s value: ``problem`` named where the value was set, and with
    the option that gave it, if one did (its ``option``)."""
    return ConfigurationError(f"{_where(props, key)}: {problem}", option=_option(props, key))


def _option(props: Properties, key: str) -> str | None:
    """The command-line option that gave ``key`` (None: a file or no option gave it)."""
    try:
        source = props.entry(key).source
    except KeyError:
        return None
    return source[len(_OPTION_SOURCE):] if source.startswith(_OPTION_SOURCE) else None


def _where(props: Properties, key: str) -> str:
    try:
        entry = props.entry(key)
    except KeyError:
        return key
    if entry.source.startswith(_OPTION_SOURCE):
        return entry.source  # argument --chunk-size, as argparse names an option
    return f"{entry.where} {key}"


def _trimmed(props: Properties) -> Properties:
    """Every value without surrounding white space, as Kafka's ConfigDef parses every type
    (strings, passwords and class names too): a line copied with a trailing blank works on a
    broker, and here (``security.protocol=SSL `` was refused, ``gateway.log.file=x.log ``
    named another file)."""
    return Properties(Property(e.key, e.value.strip(), e.source, e.line,
                               None if e.raw_value is None else e.raw_value.strip())
                      for e in props.entries())


def _overrides(values: Mapping[str, str] | None, side: str,
               options: Mapping[str, str] | None = None) -> list[Property]:
    out = []
    for key, value in (values or {}).items():
        if is_secret_key(key) or key.endswith("sasl.jaas.config"):
            raise ConfigurationError(f"{key} is a secret: it is never taken from the command line "
                                     "(put it in the config file, or there as ${env:NAME} or "
                                     "${file:PATH})")
        option = (options or {}).get(key)
        source = f"{_OPTION_SOURCE}{option}" if option else f"command line ({side})"
        out.append(Property(key, str(value), source))
    return out


def _listener_overrides(file: Properties, host: str | None, port: int | None,
                        metrics_host: str | None, metrics_port: int | None) -> list[Property]:
    """``listeners`` and ``gateway.metrics.listener`` from the command line's host and port
    options (see :meth:`GatewaySettings.load`), with the config file's settings ``file``."""
    out = []
    if host is not None or port is not None:
        if "listeners" in file:
            raise ConfigurationError("--host/--port and the --config file's listeners= both give "
                                     "listeners: put them all in listeners=")
        host = host if host is not None else "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address, as Kafka writes it in listeners=
        out.append(Property("listeners", f"PLAINTEXT://{host}:{port if port is not None else 9092}",
                            "command line (gateway)"))
    if metrics_host is not None or metrics_port is not None:
        key = "gateway.metrics.listener"
        file_host, _, file_port = file.get(key, "").strip().rpartition(":")
        if metrics_port is None and not file_port:
            raise ConfigurationError("--metrics-host needs --metrics-port (or "
                                     "gateway.metrics.listener in --config)")
        out.append(Property(key, f"{metrics_host or file_host or '127.0.0.1'}:"
                                 f"{metrics_port if metrics_port is not None else file_port}",
                            "command line (gateway)"))
    return out


def _gateway_key_known(key: str) -> bool:
    if key in _GATEWAY_BY_KEY:
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):]
        listener, _, setting = rest.partition(".")
        if not listener or not setting:
            return False
        if setting in LISTENER_LEVEL_SETTINGS:
            return True
        mechanism, _, mech_setting = setting.partition(".")
        return (mechanism.upper() in SUPPORTED_MECHANISMS + ("GSSAPI", "OAUTHBEARER")
                and mech_setting in MECHANISM_LEVEL_SETTINGS)
    if key.startswith(_CREDENTIALS_PREFIX):
        rest = key[len(_CREDENTIALS_PREFIX):]
        return any(rest.endswith("." + f) and len(rest) > len(f) + 1 for f in _CREDENTIAL_FIELDS)
    return False


def _check_keys(props: Properties, known: Any, table: Mapping[str, Setting]) -> None:
    for key in props:
        if not known(key):
            candidates = list(table) + [f"listener.name.<listener>.{s}" for s in
                                        LISTENER_LEVEL_SETTINGS if table is _GATEWAY_BY_KEY]
            hint = did_you_mean(key, candidates)
            if not hint and key.startswith("listener.name."):
                hint = (" (per-listener settings: listener.name.<listener>.<ssl.*, "
                        "sasl.enabled.mechanisms, ...> or listener.name.<listener>.<mechanism>."
                        "sasl.jaas.config)")
            raise _refused(props, key, f"unknown setting{hint}")
        setting = table.get(key)
        if setting is not None and setting.type == "choice" and setting.choices:
            value = props[key]
            if value.upper() not in {c.upper() for c in setting.choices}:
                raise _refused(props, key, f"{mask_value(key, value)!r} is not "
                               f"one of {', '.join(setting.choices)}")


def _choice(props: Properties, key: str, table: Mapping[str, Setting]) -> str:
    value = props.get(key, table[key].default)
    assert isinstance(value, str)
    return value.lower() if key.startswith("gateway.") else value.upper()


def _int(props: Properties, key: str, table: Mapping[str, Setting], minimum: int) -> int:
    if key not in props:
        return int(table[key].default)
    try:
        value = int(props[key].strip())
    except ValueError:
        raise _refused(props, key, f"{props[key]!r} is not a whole number") from None
    if value < minimum:
        raise _refused(props, key, f"must be at least {minimum}")
    return value


def _send_buffer(props: Properties) -> int:
    """``socket.send.buffer.bytes``: -1 (the OS default) or a positive byte count, as Kafka."""
    key = "socket.send.buffer.bytes"
    if key not in props:
        return int(_GATEWAY_BY_KEY[key].default)
    try:
        value = int(props[key].strip())
    except ValueError:
        value = -2  # not a whole number: refused below, with the rule in the message
    problem = send_buffer_problem(value)
    if problem is not None:
        raise _refused(props, key, f"{props[key]!r} {problem}")
    return value


def _host_port(props: Properties, key: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (an empty host: 127.0.0.1; ``[::1]:PORT`` for IPv6), or None when unset."""
    text = (props.get(key) or "").strip()
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise _refused(props, key, f"{text!r} is not HOST:PORT (a port 0-65535)")
    return host.strip("[]") or "127.0.0.1", int(port)


def _path(props: Properties, key: str) -> Path | None:
    if not props.get(key):
        return None
    path = Path(props[key]).expanduser()
    entry = props.entry(key)
    if not path.is_absolute() and entry.line:  # relative to the file that names it
        path = Path(entry.source).resolve().parent / path
    return path


def _jaas_credentials(props: Properties, mechanism: str) -> UpstreamCredentials | None:
    key = "sasl.jaas.config"
    if mechanism == OAUTHBEARER:
        return _oauthbearer_credentials(props)
    for other in ("sasl.oauthbearer.token.endpoint.url", "sasl.login.callback.handler.class"):
        if other in props:
            raise _refused(props, other, "for sasl.mechanism=OAUTHBEARER, "
                           f"not {mechanism}")
    if key not in props:
        return None
    module = parse_jaas_config(props[key], _where(props, key))
    expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if module.class_name != expected:
        raise _refused(props, key, f"sasl.mechanism={mechanism} needs "
                       f"{expected}, not {module.class_name}")
    username = module.require_option("username", _where(props, key))
    password = module.require_option("password", _where(props, key))
    try:
        return UpstreamCredentials(mechanism, username, password)
    except ConfigurationError as exc:
        raise _refused(props, key, exc.message) from None


def _oauthbearer_credentials(props: Properties) -> UpstreamCredentials:
    """OAUTHBEARER's token file: ``sasl.oauthbearer.token.endpoint.url=file:///PATH`` (Kafka's
    clients read a token from a file: URL the same way), checked readable now."""
    key = "sasl.jaas.config"
    if key in props:
        module = parse_jaas_config(props[key], _where(props, key))
        if module.class_name != OAUTHBEARER_LOGIN_MODULE:
            raise _refused(props, key, "sasl.mechanism=OAUTHBEARER needs "
                           f"{OAUTHBEARER_LOGIN_MODULE}, not {module.class_name}")
        if module.options:
            raise ConfigurationError(
                f"{_where(props, key)}: the gateway takes no OAuthBearerLoginModule options "
                f"({', '.join(sorted(module.options))}): unsecured test tokens are made by Kafka's "
                "own login handler; give the token in a file")
    handler = "sasl.login.callback.handler.class"
    if handler in props and props[handler] not in _LOGIN_CALLBACK_HANDLERS:
        raise _refused(props, handler, "only Kafka's "
                       "OAuthBearerLoginCallbackHandler is accepted (the gateway reads "
                       "the token from the file of sasl.oauthbearer.token.endpoint.url)")
    url_key = "sasl.oauthbearer.token.endpoint.url"
    url = props.get(url_key, "")
    if not url.startswith("file:"):
        raise ConfigurationError(
            f"{_where(props, url_key)}: sasl.mechanism=OAUTHBEARER needs "
            "sasl.oauthbearer.token.endpoint.url=file:///PATH, a file holding the token (the "
            "gateway fetches none from an HTTP endpoint: refresh the file from outside)"
            if not url else
            f"{_where(props, url_key)}: {url.split(':', 1)[0]}: URLs are not supported, only "
            "file:///PATH (refresh the token file from outside)")
    parsed = urllib.parse.urlparse(url)
    if parsed.netloc not in ("", "localhost") or not parsed.path:
        raise _refused(props, url_key, "expected file:///PATH (an absolute "
                       "path on this machine)")
    path = Path(urllib.parse.unquote(parsed.path))
    credentials = UpstreamCredentials(OAUTHBEARER, "", "", token_file=path)
    try:
        credentials.token()
    except AuthenticationError as exc:
        raise _refused(props, url_key, exc.message) from None
    return credentials


def _upstream(props: Properties) -> UpstreamSettings:
    protocol = _choice(props, "security.protocol", _UPSTREAM_BY_KEY)
    servers = tuple(s.strip() for s in props.get("bootstrap.servers", "").split(",") if s.strip())
    if not servers:
        raise ConfigurationError("no upstream brokers: give --upstream or bootstrap.servers in the "
                                 "--upstream-config file")
    from lazyconv.gateway._upstream import parse_bootstrap  # the form the Gateway reads

    try:
        parse_bootstrap(",".join(servers))
    except ConfigurationError as exc:  # found by --check-config too, named where it was given
        raise _refused(props, "bootstrap.servers", exc.message) from None
    ssl_settings = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            ssl_settings = SslClientSettings.from_properties(
                {k: v for k, v in props.items() if k.startswith("ssl.")})
        except ConfigurationError as exc:
            raise ConfigurationError(f"upstream: {exc.message}") from None
    mechanism = credentials = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = _choice(props, "sasl.mechanism", _UPSTREAM_BY_KEY)
        if mechanism not in CLIENT_MECHANISMS:
            raise _refused(props, "sasl.mechanism", f"{mechanism} is not "
                           f"supported upstream ({', '.join(CLIENT_MECHANISMS)})")
        credentials = _jaas_credentials(props, mechanism)
    elif any(k in props for k in ("sasl.jaas.config", "sasl.mechanism",
                                  "sasl.oauthbearer.token.endpoint.url")):
        raise _refused(props, "security.protocol", "SASL settings are given "
                       f"but security.protocol is {protocol} (SASL_SSL or SASL_PLAINTEXT?)")
    return UpstreamSettings(servers, protocol, ssl_settings, mechanism, credentials,
                            _int(props, "request.timeout.ms", _UPSTREAM_BY_KEY, 1),
                            _int(props, "metadata.max.age.ms", _UPSTREAM_BY_KEY, 1),
                            _int(props, "fetch.max.bytes", _UPSTREAM_BY_KEY, 1024))


def _principal_credentials(props: Properties,
                           environ: Mapping[str, str] | None) -> dict[str, UpstreamCredentials]:
    """``gateway.upstream.credentials.<principal>.*`` and the credentials file, by principal."""
    fields: dict[str, dict[str, str]] = {}
    sources: list[tuple[str, Properties]] = [(_CREDENTIALS_PREFIX, props)]
    file = _path(props, "gateway.upstream.credentials.file")
    if file is not None:
        sources.append(("", load_properties(file, environ=environ)))
    for prefix, source in sources:
        for key in source:
            if not key.startswith(prefix) or key == "gateway.upstream.credentials.file" or \
                    key == "gateway.upstream.credentials.fallback":
                continue
            rest = key[len(prefix):]
            for name in _CREDENTIAL_FIELDS:
                if rest.endswith("." + name) and len(rest) > len(name) + 1:
                    principal = rest[:-len(name) - 1]
                    value = str(_path(source, key) or "") if name == "token.file" else source[key]
                    fields.setdefault(principal, {})[name] = value
                    break
            else:
                raise _refused(source, key, "expected <principal>."
                               f"{{{','.join(_CREDENTIAL_FIELDS)}}}")
    out = {}
    for principal, values in fields.items():
        mechanism = values.get("sasl.mechanism", PLAIN).upper()
        token_file = Path(values["token.file"]) if values.get("token.file") else None
        try:
            out[principal] = credentials = UpstreamCredentials(
                mechanism, values.get("username", ""), values.get("password", ""),
                token_file=token_file)
            if token_file is not None:
                credentials.token()  # readable now, or the gateway does not start
        except (ConfigurationError, AuthenticationError) as exc:
            raise ConfigurationError(f"upstream credentials of principal {principal!r}: "
                                     f"{exc.message}") from None
    return out


def _check_one_password_per_user(principal_credentials: Mapping[str, UpstreamCredentials],
                                 service: UpstreamCredentials | None) -> None:
    """Each upstream user name with one password, whatever principals (and the service
    identity) it is given for: the gateway keeps one metadata view per upstream user, whose
    connection authenticates with the password of whoever made it first, so a second password
    (a mistake: a Kafka user has one) would share a view it never proved."""
    seen: dict[str, tuple[str, str]] = {}
    given = [(f"principal {principal!r}", creds) for principal, creds in
             sorted(principal_credentials.items())]
    if service is not None:
        given.insert(0, ("the service identity (sasl.jaas.config)", service))
    for who, creds in given:
        if creds.token_file is not None:
            continue
        first = seen.setdefault(creds.username, (who, creds.password))
        if first[1] != creds.password:
            raise ConfigurationError(f"upstream user {creds.username!r} is given two passwords "
                                     f"({first[0]} and {who}): one upstream user, one password "
                                     "(the gateway keeps one metadata view per upstream user)")


def _check_passthrough(listeners: list[ListenerConfig], upstream: UpstreamSettings,
                       gateway: Properties, principal_credentials: Mapping[str, Any]) -> None:
    for listener in listeners:
        if listener.sasl is None or listener.sasl.mechanisms != (PLAIN,):
            what = (",".join(listener.sasl.mechanisms) if listener.sasl
                    else listener.security_protocol)
            raise ConfigurationError(
                f"gateway.identity=passthrough: listener {listener.name} ({what}) must be "
                "SASL_SSL or SASL_PLAINTEXT with PLAIN as its only mechanism (a SCRAM exchange "
                "cannot be replayed to several brokers; use gateway.identity=gateway)")
    if not upstream.uses_sasl or upstream.sasl_mechanism != PLAIN:
        raise ConfigurationError("gateway.identity=passthrough needs security.protocol=SASL_SSL (or "
                                 "SASL_PLAINTEXT) and sasl.mechanism=PLAIN in the --upstream-config "
                                 "file: the clients' PLAIN credentials are used upstream")
    if principal_credentials:
        raise ConfigurationError("gateway.upstream.credentials.* is for gateway.identity=gateway: in "
                                 "passthrough mode each client's own credentials are used")
    for mechanism in SCRAM_MECHANISMS:
        if mechanism in gateway.get("sasl.enabled.mechanisms", ""):
            raise ConfigurationError(f"gateway.identity=passthrough cannot serve {mechanism}")


def check_materials(settings: GatewaySettings) -> None:
    """Read what the gateway would read at start without connecting anywhere: each listener's
    SSL context and SCRAM credentials file (the upstream's SSL context was built by
    :meth:`GatewaySettings.load`); a :class:`ConfigurationError` for the first that fails."""
    from lazyconv.net._secure_connection import ListenerSecurity

    for listener in settings.listeners:
        try:
            ListenerSecurity.from_config(listener)
        except ConfigurationError as exc:
            raise ConfigurationError(f"listener {listener.name}: {exc.message}") from None


def settings_reference() -> str:
    """The property reference of docs/guide/gateway.md (kept equal to these tables by a test):
    one Markdown table per file, every key with its type, default and meaning, then the
    per-listener and per-principal forms."""

    def rows(table: tuple[Setting, ...]) -> list[str]:
        out = ["| key | type | default | what it does |", "|---|---|---|---|"]
        for setting in table:
            kind = setting.type if not setting.choices else " / ".join(setting.choices)
            default = "" if setting.default is None else f"`{setting.default}`"
            out.append(f"| `{setting.key}` | {kind} | {default} | {setting.doc.replace('|', '/')} |")
        return out

    forms = [
        "| form | what it does |", "|---|---|",
        "| `listener.name.<listener>.<setting>` | a listener's own value of a `ssl.*` setting, "
        "`sasl.enabled.mechanisms`, `connections.max.reauth.ms` or `sasl.server.max.receive.size` "
        "(the listener name in lower case, as Kafka writes it) |",
        "| `listener.name.<listener>.<mechanism>.sasl.jaas.config` | the listener's JAAS line for a "
        "mechanism: PLAIN users as `user_<name>=\"<password>\"` (SCRAM users come from "
        "`gateway.scram.credentials.file`) |",
        "| `listener.name.<listener>.<mechanism>.connections.max.reauth.ms` | a mechanism's session "
        "lifetime on a listener |",
        "| `gateway.upstream.credentials.<principal>.sasl.mechanism` | PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512 or OAUTHBEARER (default PLAIN): how the principal's upstream connections "
        "authenticate |",
        "| `gateway.upstream.credentials.<principal>.username`, `.password` | the principal's "
        "upstream credentials (`<principal>` without `User:`; `=`, `:` and spaces escaped with a "
        "backslash); several principals may share an upstream user, with one password (its "
        "metadata view is one) |",
        "| `gateway.upstream.credentials.<principal>.token.file` | OAUTHBEARER: the file holding "
        "the principal's bearer token, read at each authentication (relative: to the file that "
        "names it) |",
    ]
    return "\n".join(["**`--config`** (the gateway's own settings):", "", *rows(GATEWAY_KEYS), "",
                      "**Per listener, per principal** (`--config`):", "", *forms, "",
                      "**`--upstream-config`** (a Kafka client properties file):", "",
                      *rows(UPSTREAM_KEYS)]) + "\n"
