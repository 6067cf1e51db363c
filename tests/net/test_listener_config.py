"""Listeners and their security from a broker's properties (Kafka's names and override rules)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme
from cryptography import x509

from lazyconv.errors import ConfigurationError
from lazyconv.net._listener_config import parse_listener_list, parse_listeners
from lazyconv.net._properties import Properties, parse_properties
from lazyconv.net._sasl import PlainCredentials
from lazyconv.net._scram_credentials import add_scram_user

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(folder / "ks.pem"))
    ca.issue_cert("other").private_key_and_cert_chain_pem.write_to_path(str(folder / "ks2.pem"))
    return {"ca": folder / "ca.pem", "ks": folder / "ks.pem", "ks2": folder / "ks2.pem"}


def props(text: str) -> Properties:
    return Properties(parse_properties(text, "gw.properties"))


def test_listener_list() -> None:
    assert parse_listener_list("PLAINTEXT://127.0.0.1:9092, sasl_ssl://:9094,X://[::1]:0") == [
        ("PLAINTEXT", "127.0.0.1", 9092), ("SASL_SSL", "", 9094), ("X", "::1", 0)]
    for bad in ("PLAINTEXT://host", "localhost:9092", "A://h:99999"):
        with pytest.raises(ConfigurationError):
            parse_listener_list(bad)


def test_every_protocol_with_overrides(certs: dict[str, Path], tmp_path: Path) -> None:
    scram = tmp_path / "scram.json"
    add_scram_user(scram, "alice", "alice-secret", ["SCRAM-SHA-512"])
    text = f"""
listeners=PLAINTEXT://127.0.0.1:9092,SSL://:9093,SASL_SSL://0.0.0.0:9094,INTERNAL://:9095
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT
advertised.listeners=SASL_SSL://gw.example:19094
ssl.keystore.location={certs['ks']}
ssl.truststore.location={certs['ca']}
listener.name.ssl.ssl.client.auth=required
listener.name.ssl.ssl.keystore.location={certs['ks2']}
listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1/
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms=60000
listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512
connections.max.reauth.ms=5000
"""
    listeners = {lc.name: lc for lc in parse_listeners(props(text), scram_credentials_file=scram)}
    assert [lc.security_protocol for lc in listeners.values()] == [
        "PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"]
    plain, ssl_l, sasl_ssl, internal = listeners.values()
    assert plain.ssl is None and plain.sasl is None and not plain.uses_tls
    assert ssl_l.ssl is not None and ssl_l.ssl.client_auth == "required"
    assert ssl_l.ssl.principal_mapper.rules_text == "RULE:^CN=(.*)$/$1/"
    assert sasl_ssl.ssl is not None and sasl_ssl.ssl.client_auth == "none"
    assert (sasl_ssl.advertised_host, sasl_ssl.advertised_port) == ("gw.example", 19094)
    assert sasl_ssl.sasl is not None and sasl_ssl.sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert sasl_ssl.sasl.max_reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-512": 60000}
    assert sasl_ssl.sasl.plain_users.check(PlainCredentials("", "bob", "bob-secret"))
    config = sasl_ssl.sasl.server_config()
    assert config.scram_lookup("SCRAM-SHA-512", "alice") is not None
    assert internal.sasl.mechanisms == ("SCRAM-SHA-512",) and internal.ssl is None
    assert "alice-secret" not in repr(listeners)
    assert sasl_ssl.describe() == ("SASL_SSL SASL_SSL 0.0.0.0:9094 (advertised gw.example:19094) "
                                   "PLAIN,SCRAM-SHA-512")


def test_listener_key_store_override_is_used(certs: dict[str, Path]) -> None:
    text = (f"listeners=SSL://:9093\nssl.keystore.location={certs['ks']}\n"
            f"listener.name.ssl.ssl.keystore.location={certs['ks2']}\n")
    (listener,) = parse_listeners(props(text))
    names = listener.ssl.key_store.certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName)
    assert names.value.get_values_for_type(x509.DNSName) == ["other"]


@pytest.mark.parametrize(("text", "message"), [
    ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093", "name is used twice"),
    ("listeners=A://:9092,B://:9092\nlistener.security.protocol.map=A:PLAINTEXT,B:SSL", "port is used twice"),
    ("listeners=INTERNAL://:9092", "no security protocol"),
    ("listeners=A://:9092\nlistener.security.protocol.map=A:TLS", "NAME:PROTOCOL"),
    ("listeners=SSL://:9093", "needs a key store"),
    ("listeners=SASL_PLAINTEXT://:9094", "GSSAPI is not supported"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN", "has no users"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=SCRAM-SHA-256",
     "no SCRAM credentials file"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN\n"
     "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.scram."
     "ScramLoginModule required;", "PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule"),
    ("listeners=PLAINTEXT://:9092\nadvertised.listeners=OTHER://h:1", "not one of the listeners"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN\n"
     "connections.max.reauth.ms=soon\nlistener.name.sasl_plaintext.plain.sasl.jaas.config=" + PLAIN_JAAS,
     "gw.properties:3 connections.max.reauth.ms: 'soon' is not a whole number"),
])
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_listeners(props(text))


def test_passthrough_plain_needs_no_users() -> None:
    text = "listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN\n"
    (listener,) = parse_listeners(props(text), plain_checked_elsewhere=True)
    assert listener.sasl.plain_users is None
    assert listener.sasl.server_config().mechanisms == ("PLAIN",)


def test_a_global_jaas_line_is_not_a_listener_one() -> None:
    # Kafka reads a listener's JAAS only from listener.name.<l>.<mech>.sasl.jaas.config
    text = f"listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN\nsasl.jaas.config={PLAIN_JAAS}\n"
    with pytest.raises(ConfigurationError, match="has no users"):
        parse_listeners(props(text))
