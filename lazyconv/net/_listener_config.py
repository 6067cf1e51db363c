"""Listeners and their security, from a broker's properties (what ``serve`` and the gateway
share): ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``, ``ssl.*``,
``sasl.enabled.mechanisms``, the JAAS lines and the per-listener overrides.

Kafka's rules, followed here:

- ``listeners=NAME://host:port,...``: an empty host binds every interface; names are unique,
  and so are ports (0 picks a free one);
- ``listener.security.protocol.map=NAME:PROTOCOL,...`` maps names to PLAINTEXT, SSL,
  SASL_PLAINTEXT or SASL_SSL; the default map names each protocol after itself, so
  ``SASL_SSL://:9094`` needs no map;
- ``advertised.listeners``: what Metadata announces per listener name (default: the listener);
- a listener-level setting wins over the global one:
  ``listener.name.<name>.<setting>`` (the name in lower case) for ``ssl.*``,
  ``sasl.enabled.mechanisms`` and ``connections.max.reauth.ms``;
  ``listener.name.<name>.<mechanism>.sasl.jaas.config`` for a mechanism's JAAS line and
  ``listener.name.<name>.<mechanism>.connections.max.reauth.ms`` for its session lifetime;
- PLAIN users are a PlainLoginModule line's ``user_<name>="<password>"`` options; SCRAM users
  come from a credentials file (:mod:`lazyconv.net._scram_credentials`), never a JAAS line.

:func:`parse_listeners` returns one :class:`ListenerConfig` per listener with everything its
connections need: the TLS settings (:class:`~lazyconv.net._tls.SslServerSettings`, which
builds SSL contexts) and the SASL settings (:class:`SaslListenerSettings`, which builds the
:class:`~lazyconv.net._sasl.SaslServerConfig` its exchanges share). Every mistake is a
:class:`ConfigurationError` naming the setting and where it was given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from lazyconv.errors import ConfigurationError
from lazyconv.net._jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas_config
from lazyconv.net._properties import Properties
from lazyconv.net._sasl import (
    DEFAULT_AUTHENTICATION_TIMEOUT_S,
    DEFAULT_MAX_RECEIVE_SIZE,
    PLAIN,
    SUPPORTED_MECHANISMS,
    PlainUsers,
    SaslServerConfig,
)
from lazyconv.net._scram_credentials import SCRAM_MECHANISMS, ScramCredentialStore
from lazyconv.net._tls import SslServerSettings

__all__ = [
    "SECURITY_PROTOCOLS",
    "ListenerConfig",
    "SaslListenerSettings",
    "parse_listeners",
    "parse_listener_list",
    "listener_setting",
    "LISTENER_LEVEL_SETTINGS",
    "LISTENER_KEYS",
    "is_listener_key",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}

# settings a listener may override with listener.name.<name>.<setting>
LISTENER_LEVEL_SETTINGS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.protocol",
    "ssl.principal.mapping.rules", "sasl.enabled.mechanisms", "connections.max.reauth.ms",
    "sasl.server.max.receive.size",
)
# listener.name.<name>.<mechanism>.<setting>
MECHANISM_LEVEL_SETTINGS = ("sasl.jaas.config", "connections.max.reauth.ms")

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_\-]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?\d+)$")
_JAAS_MODULES = {PLAIN: PLAIN_LOGIN_MODULE, **{m: SCRAM_LOGIN_MODULE for m in SCRAM_MECHANISMS}}


@dataclass(frozen=True)
class SaslListenerSettings:
    """A SASL listener's mechanisms and where its users come from.

    ``plain_users``: the PlainLoginModule's ``user_<name>`` options (None: PLAIN credentials are
    checked elsewhere, e.g. upstream in the gateway's passthrough mode);
    ``scram_credentials_file``: the SCRAM users; ``max_reauth_ms``: session lifetime by
    mechanism (0: none)."""

    mechanisms: tuple[str, ...]
    plain_users: PlainUsers | None = None
    scram_credentials_file: Path | None = None
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    authentication_timeout_s: float = DEFAULT_AUTHENTICATION_TIMEOUT_S

    def server_config(self, scram_store: ScramCredentialStore | None = None) -> SaslServerConfig:
        """The configuration the listener's exchanges share; ``scram_store``: the credentials
        (default: read from ``scram_credentials_file`` now, so a reload re-reads it)."""
        lookup = None
        fake_secret: bytes | None = None
        if any(m in SCRAM_MECHANISMS for m in self.mechanisms):
            if scram_store is None:
                if self.scram_credentials_file is None:
                    raise ConfigurationError("a SCRAM mechanism is enabled but no SCRAM credentials "
                                             "file is configured")
                scram_store = ScramCredentialStore.load(self.scram_credentials_file)
            lookup = scram_store.lookup
            # an unknown user's salt the same after a reload or a restart, in every gateway
            fake_secret = scram_store.fake_secret()
        config = SaslServerConfig(self.mechanisms, scram_lookup=lookup,
                                  max_reauth_ms=dict(self.max_reauth_ms),
                                  max_receive_size=self.max_receive_size,
                                  authentication_timeout_s=self.authentication_timeout_s)
        if fake_secret is not None:
            config = replace(config, fake_secret=fake_secret)
        return config


@dataclass(frozen=True)
class ListenerConfig:
    """One listener: where it binds, what it advertises, its security protocol, and its TLS
    and SASL settings (None where the protocol has none)."""

    name: str
    host: str
    port: int
    security_protocol: str
    advertised_host: str | None = None
    advertised_port: int | None = None
    ssl: SslServerSettings | None = None
    sasl: SaslListenerSettings | None = None

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def trust_warning(self) -> str | None:
        """The one line to warn with when this listener verifies client certificates against
        the system's CAs (:attr:`SslServerSettings.trusts_system_cas`), else None."""
        if self.ssl is None or not self.ssl.trusts_system_cas:
            return None
        return (f"listener {self.name}: ssl.client.auth={self.ssl.client_auth} without "
                "ssl.truststore.location: client certificates are verified against the "
                "system's CAs, so one any public CA issues with a chosen subject maps to that "
                "principal (as on Kafka, with the JVM's CAs); set ssl.truststore.location to the "
                "CA of your clients' certificates")

    def describe(self) -> str:
        """One line: ``NAME SASL_SSL 0.0.0.0:9094 (advertised host:port) PLAIN,SCRAM-SHA-512 mTLS``."""
        parts = [self.name, self.security_protocol, f"{self.host or '0.0.0.0'}:{self.port}"]
        if self.advertised_host is not None:
            parts.append(f"(advertised {self.advertised_host}:{self.advertised_port})")
        if self.sasl is not None:
            parts.append(",".join(self.sasl.mechanisms))
        if self.ssl is not None and self.ssl.client_auth != "none":
            parts.append(f"client-auth={self.ssl.client_auth}")
            if self.ssl.trusts_system_cas:
                parts.append("(verified by the system's CAs: no ssl.truststore.location)")
        return " ".join(parts)


# a broker's listener keys beside the per-listener forms (serve's --config reads only these)
LISTENER_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map",
                 "sasl.enabled.mechanisms", "connections.max.reauth.ms",
                 "sasl.server.max.receive.size",
                 *(s for s in LISTENER_LEVEL_SETTINGS if s.startswith("ssl.")))
_MECHANISM_NAMES = (*SUPPORTED_MECHANISMS, "GSSAPI", "OAUTHBEARER")


def is_listener_key(key: str) -> bool:
    """Whether ``key`` is one of a broker's listener settings: :data:`LISTENER_KEYS`,
    ``listener.name.<l>.<setting>`` or ``listener.name.<l>.<mechanism>.<setting>``."""
    if key in LISTENER_KEYS:
        return True
    if not key.startswith("listener.name."):
        return False
    listener, _, setting = key[len("listener.name."):].partition(".")
    if not listener or not setting:
        return False
    if setting in LISTENER_LEVEL_SETTINGS:
        return True
    mechanism, _, mech_setting = setting.partition(".")
    return mechanism.upper() in _MECHANISM_NAMES and mech_setting in MECHANISM_LEVEL_SETTINGS


def _where(props: Properties, key: str) -> str:
    try:
        return f"{props.where(key)} {key}"
    except KeyError:
        return key


def parse_listener_list(text: str, key: str = "listeners") -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` as ``(NAME, host, port)`` (the name upper-cased, as Kafka does)."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigurationError(f"{key}: {item!r} is not NAME://host:port")
        port = int(m.group("port"))
        if not 0 <= port <= 65535:
            raise ConfigurationError(f"{key}: port {port} of {item!r} is out of range")
        host = m.group("host")
        out.append((m.group("name").upper(), host[1:-1] if host.startswith("[") else host, port))
    return out


def _protocol_map(props: Properties) -> dict[str, str]:
    key = "listener.security.protocol.map"
    text = props.get(key)
    if not text:
        return dict(DEFAULT_PROTOCOL_MAP)
    mapping = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigurationError(f"{_where(props, key)}: {item!r} is not NAME:PROTOCOL with "
                                     f"PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def listener_setting(props: Mapping[str, str], listener: str, setting: str,
                     mechanism: str | None = None) -> tuple[str, str] | None:
    """``(key, value)`` of a setting for a listener: ``listener.name.<l>[.<mech>].<setting>``
    when given, else the global one; None when neither is."""
    base = f"listener.name.{listener.lower()}."
    keys = ([f"{base}{mechanism.lower()}.{setting}"] if mechanism else []) + [f"{base}{setting}",
                                                                              setting]
    for key in keys:
        if key in props:
            return key, props[key]
    return None


def _int(props: Properties, found: tuple[str, str] | None, default: int, minimum: int = 0) -> int:
    if found is None:
        return default
    key, value = found
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigurationError(f"{_where(props, key)}: {value!r} is not a whole number") from None
    if number < minimum:
        raise ConfigurationError(f"{_where(props, key)}: must be at least {minimum}")
    return number


def _ssl_settings(props: Properties, listener: str) -> SslServerSettings:
    resolved = {}
    for setting in LISTENER_LEVEL_SETTINGS:
        if setting.startswith("ssl."):
            found = listener_setting(props, listener, setting)
            if found is not None:
                resolved[setting] = found[1]
    try:
        return SslServerSettings.from_properties(resolved)
    except ConfigurationError as exc:
        raise ConfigurationError(f"listener {listener}: {exc.message}") from None


def _sasl_settings(props: Properties, listener: str, scram_credentials_file: Path | None,
                   plain_checked_elsewhere: bool,
                   authentication_timeout_s: float) -> SaslListenerSettings:
    found = listener_setting(props, listener, "sasl.enabled.mechanisms")
    text = found[1] if found is not None else "GSSAPI"  # Kafka's default
    mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    where = _where(props, found[0]) if found else "sasl.enabled.mechanisms (default GSSAPI)"
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigurationError(f"{where}: SASL mechanism {mechanism} is not supported on "
                                     f"listener {listener} (supported: {', '.join(SUPPORTED_MECHANISMS)})")
    if not mechanisms:
        raise ConfigurationError(f"{where}: no mechanism for SASL listener {listener}")
    plain_users = None
    for mechanism in mechanisms:
        jaas = listener_setting(props, listener, "sasl.jaas.config", mechanism)
        if jaas is not None and jaas[0] == "sasl.jaas.config":
            jaas = None  # a broker reads its listeners' JAAS only from listener.name.<l>.<mech>.
        module = None
        if jaas is not None:
            module = parse_jaas_config(jaas[1], _where(props, jaas[0]))
            if module.class_name != _JAAS_MODULES[mechanism]:
                raise ConfigurationError(f"{_where(props, jaas[0])}: {mechanism} needs "
                                         f"{_JAAS_MODULES[mechanism]}, not {module.class_name}")
        if mechanism == PLAIN:
            if module is not None and module.plain_users:
                plain_users = PlainUsers(module.plain_users)
            elif not plain_checked_elsewhere:
                raise ConfigurationError(
                    f"listener {listener} enables PLAIN but has no users: give "
                    f"listener.name.{listener.lower()}.plain.sasl.jaas.config="
                    f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;')
        elif scram_credentials_file is None:
            raise ConfigurationError(f"listener {listener} enables {mechanism} but no SCRAM "
                                     "credentials file is configured")
    reauth = {m: _int(props, listener_setting(props, listener, "connections.max.reauth.ms", m), 0)
              for m in mechanisms}
    max_receive = _int(props, listener_setting(props, listener, "sasl.server.max.receive.size"),
                       DEFAULT_MAX_RECEIVE_SIZE, 1024)
    return SaslListenerSettings(mechanisms, plain_users, scram_credentials_file, reauth,
                                max_receive, authentication_timeout_s)


def parse_listeners(props: Properties, *, default_listeners: str = "PLAINTEXT://127.0.0.1:9092",
                    scram_credentials_file: Path | None = None,
                    plain_checked_elsewhere: bool = False,
                    authentication_timeout_s: float = DEFAULT_AUTHENTICATION_TIMEOUT_S,
                    ) -> list[ListenerConfig]:
    """Every listener ``props`` configures (see the module docstring).

    ``plain_checked_elsewhere``: PLAIN listeners need no ``user_`` entries (the gateway's
    passthrough mode checks them upstream); ``scram_credentials_file``: where SCRAM users are."""
    key = "listeners"
    entries = parse_listener_list(props.get(key, default_listeners), _where(props, key))
    if not entries:
        raise ConfigurationError(f"{_where(props, key)}: no listener")
    protocol_map = _protocol_map(props)
    names = [name for name, _, _ in entries]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{_where(props, key)}: a listener name is used twice")
    ports = [port for _, _, port in entries if port]
    if len(set(ports)) != len(ports):
        raise ConfigurationError(f"{_where(props, key)}: a port is used twice")
    advertised: dict[str, tuple[str, int]] = {}
    if "advertised.listeners" in props:
        where = _where(props, "advertised.listeners")
        for name, host, port in parse_listener_list(props["advertised.listeners"], where):
            if name not in names:
                raise ConfigurationError(f"{where}: {name} is not one of the listeners "
                                         f"({', '.join(names)})")
            advertised[name] = (host, port)
    listeners = []
    for name, host, port in entries:
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigurationError(f"{_where(props, key)}: listener {name} has no security "
                                     "protocol: add it to listener.security.protocol.map")
        ssl_settings = _ssl_settings(props, name) if protocol in ("SSL", "SASL_SSL") else None
        sasl = (_sasl_settings(props, name, scram_credentials_file, plain_checked_elsewhere,
                               authentication_timeout_s)
                if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None)
        adv_host, adv_port = advertised.get(name, (None, None))
        listeners.append(ListenerConfig(name, host, port, protocol, adv_host, adv_port,
                                        ssl_settings, sasl))
    return listeners
