"""``lazyconv serve --config FILE``: serve's listeners with TLS and SASL, configured as a
broker's (the same keys and code as the gateway's listeners: :mod:`lazyconv.net._listener_config`).

The file holds Kafka broker properties for listeners only — ``listeners``,
``advertised.listeners``, ``listener.security.protocol.map``, ``ssl.*`` (key store, trust
store, ``ssl.client.auth``, ``ssl.principal.mapping.rules``, protocols, cipher suites),
``sasl.enabled.mechanisms``, ``connections.max.reauth.ms``, ``sasl.server.max.receive.size``,
the per-listener ``listener.name.<listener>.*`` forms with the PLAIN users of
``listener.name.<listener>.plain.sasl.jaas.config`` (``user_<name>="<password>"``) — and two of
serve's own: ``serve.scram.credentials.file`` (SCRAM users, as ``lazyconv gateway
scram-credentials`` writes them) and ``serve.authentication.timeout.ms`` (how long a client may
take to complete its TLS and SASL handshakes, default 10000). Secrets may be ``${env:NAME}`` or
``${file:PATH}``.

``serve`` plays one broker per listener (docs/guide/serve.md), so its listeners must share one
security protocol: Metadata sends a client to every node, and a node of another protocol would
be a port it cannot speak to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lazyconv.errors import ConfigurationError
from lazyconv.net._listener_config import ListenerConfig, is_listener_key, parse_listeners
from lazyconv.net._properties import Properties, did_you_mean, load_properties
from lazyconv.net._secure_connection import ListenerSecurity
from lazyconv.net._server import ListenerSpec

__all__ = ["SERVE_KEYS", "load_listener_specs", "listener_specs"]

SERVE_KEYS = ("serve.scram.credentials.file", "serve.authentication.timeout.ms")
DEFAULT_AUTHENTICATION_TIMEOUT_MS = 10000


def load_listener_specs(path: str | os.PathLike[str], *, advertised_host: str | None = None,
                        environ: Mapping[str, str] | None = None) -> list[ListenerSpec]:
    """The listeners a ``--config`` file describes (see the module docstring); every mistake
    is a :class:`ConfigurationError` naming the key and where it was given."""
    return listener_specs(load_properties(path, environ=environ), advertised_host=advertised_host)


def listener_specs(props: Properties, *, advertised_host: str | None = None) -> list[ListenerSpec]:
    """:func:`load_listener_specs` for properties already read."""
    for key in props:
        if key not in SERVE_KEYS and not is_listener_key(key):
            where = props.where(key)
            hint = did_you_mean(key, SERVE_KEYS)
            raise ConfigurationError(f"{where} {key}: not a listener setting serve reads{hint}")
    scram_file = None
    if props.get("serve.scram.credentials.file"):
        scram_file = Path(props["serve.scram.credentials.file"]).expanduser()
        entry = props.entry("serve.scram.credentials.file")
        if not scram_file.is_absolute() and entry.line:
            scram_file = Path(entry.source).resolve().parent / scram_file
    timeout_ms = DEFAULT_AUTHENTICATION_TIMEOUT_MS
    if "serve.authentication.timeout.ms" in props:
        text = props["serve.authentication.timeout.ms"]
        if not text.strip().isdigit() or int(text) < 1:
            raise ConfigurationError(f"{props.where('serve.authentication.timeout.ms')} "
                                     f"serve.authentication.timeout.ms: {text!r} is not a "
                                     "positive whole number")
        timeout_ms = int(text)
    configs = parse_listeners(props, scram_credentials_file=scram_file,
                              authentication_timeout_s=timeout_ms / 1000)
    _one_protocol(configs)
    return [_spec(config, timeout_ms / 1000, advertised_host) for config in configs]


def _one_protocol(configs: list[ListenerConfig]) -> None:
    protocols = {c.security_protocol for c in configs}
    if len(protocols) > 1:
        raise ConfigurationError(
            "serve plays one broker per listener, so its listeners must share one security "
            f"protocol (given: {', '.join(sorted(protocols))}): a client would be sent to a "
            "node it cannot speak to")


def _spec(config: ListenerConfig, timeout_s: float, advertised_host: str | None) -> ListenerSpec:
    security = ListenerSecurity.from_config(config).with_handshake_timeout(timeout_s)
    return ListenerSpec(config.host or "0.0.0.0", config.port, 0,
                        config.advertised_host or advertised_host,
                        config.advertised_port or None, security=security)
