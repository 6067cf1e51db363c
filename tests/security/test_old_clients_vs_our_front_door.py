"""Real old clients against our server side: TlsChannel and SaslServerExchange (through
tests/security/sasl_relay.py, relaying to a plain Kafka 3.9 once a client has authenticated).
The 0.10 clients authenticate with SaslHandshake v0 and raw tokens, the newer ones with v1 and
SaslAuthenticate; a wrong password is refused and nothing of that connection reaches Kafka."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.net._listener_config import parse_listeners
from lazyconv.net._properties import Properties
from lazyconv.net._scram_credentials import add_scram_user
from tests.interop.checks import received
from tests.kafka_broker import KafkaBroker, SecurityMaterial, create_topic, free_ports
from tests.oldclients.clients import BY_ID, ClientSecurity, OldClientTools, run, secured
from tests.oldclients.clients import start as start_client
from tests.security.sasl_relay import SaslRelay

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "front-door"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def front_door(kafka_dist_3: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """A plain Kafka 3.9 advertising our relay's ports, and the two relays (SASL_SSL,
    SASL_PLAINTEXT) with PLAIN users and SCRAM credentials."""
    folder = tmp_path_factory.mktemp("front-door")
    material = SecurityMaterial(folder / "tls", users=("alice",))
    scram = folder / "scram.json"
    add_scram_user(scram, "alice", "alice-secret", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
    ssl_port, plain_port, admin_port, controller_port = free_ports(4)
    props = Properties.from_mapping({
        "listeners": f"SASL_SSL://127.0.0.1:{ssl_port},SASL_PLAINTEXT://127.0.0.1:{plain_port}",
        "ssl.keystore.location": str(material.broker_keystore_pem),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }, "test")
    tls_listener, plain_listener = parse_listeners(props, scram_credentials_file=scram)
    # PLAINTEXT (what the relays reach) is advertised as the SASL_SSL relay (a client that
    # came through the SASL_PLAINTEXT one is refused before it asks for Metadata); ADMIN is
    # the test's own way in
    broker = KafkaBroker(kafka_dist_3, folder / "broker", controller_port=controller_port,
                         extra_props={
        "listeners": (f"PLAINTEXT://127.0.0.1:0,ADMIN://127.0.0.1:{admin_port},"
                      f"CONTROLLER://127.0.0.1:{controller_port}"),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ssl_port},ADMIN://127.0.0.1:{admin_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,ADMIN:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "ADMIN"})
    broker.extra_props["listeners"] = broker.extra_props["listeners"].replace(
        "PLAINTEXT://127.0.0.1:0", f"PLAINTEXT://127.0.0.1:{broker.port}")
    broker.start()
    try:
        create_topic(f"127.0.0.1:{admin_port}", TOPIC, 1)
        upstream = ("127.0.0.1", broker.port)
        with SaslRelay(tls_listener, upstream, ssl_port) as tls_relay, \
                SaslRelay(plain_listener, upstream, plain_port) as plain_relay:
            yield material, tls_relay, plain_relay
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def tools(kafka_old_clients) -> OldClientTools:
    return OldClientTools(java_clients=kafka_old_clients)


# (client id, mechanism, the SaslHandshake version it uses)
CASES = [
    ("java-0.10.2.2", "PLAIN", 0),
    ("java-0.10.2.2", "SCRAM-SHA-512", 0),
    ("java-2.0.1", "SCRAM-SHA-256", 1),
    ("kafka-python-1.4.7-0.10", "PLAIN", 0),
    ("confluent-kafka-fallback-0.10.0", "SCRAM-SHA-512", 1),
    ("kafka-node-5.0.0", "PLAIN", 1),
]


def security(material: SecurityMaterial, mechanism: str, password: str) -> ClientSecurity:
    return ClientSecurity("SASL_SSL", mechanism, "alice", password, ca_pem=str(material.ca_pem),
                          truststore_p12=str(material.truststore_p12), store_password="store-secret")


@pytest.mark.parametrize(("client_id", "mechanism", "handshake"), CASES,
                         ids=[f"{c}-{m}" for c, m, _ in CASES])
def test_old_client_through_our_sasl_ssl(front_door: tuple, tools: OldClientTools, client_id: str,
                                         mechanism: str, handshake: int) -> None:
    material, relay, _ = front_door
    base = BY_ID[client_id]
    tools.require(base)
    client = secured(base, security(material, mechanism, "alice-secret"))
    bootstrap = f"127.0.0.1:{relay.port}"
    before = len(relay.sessions)
    marker = uuid.uuid4().hex
    records = [{"partition": 0, "key": None,
                "value": base64.b64encode(f"{marker} {i}".encode()).decode()} for i in range(4)]
    produced = run(client, tools, bootstrap, {"action": "produce", "topic": TOPIC,
                                              "records": records}, timeout=45)
    offsets = [e["o"] for e in produced.of("produced")]
    events = run(client, tools, bootstrap, {"action": "consume", "mode": "assign",
                                            "partitions": [[TOPIC, 0]],
                                            "last": {f"{TOPIC}/0": offsets[-1]}}, timeout=45)
    got = {r[0]: r[3] for r in received(events.events).get((TOPIC, 0), [])}
    assert [got.get(o) for o in offsets] == [f"{marker} {i}".encode() for i in range(4)]
    sessions = [s for s in relay.sessions[before:] if s.principal]
    assert sessions, f"no authenticated session: {relay.sessions[before:]}"
    assert {(s.principal, s.mechanism, s.handshake_version) for s in sessions} == {
        ("User:alice", mechanism, handshake)}
    assert not any(s.closed.startswith("authentication failed") for s in relay.sessions[before:])


WRONG = [("java-0.10.2.2", "PLAIN"), ("java-0.10.2.2", "SCRAM-SHA-512"),
         ("kafka-python-1.4.7-0.10", "PLAIN"), ("confluent-kafka-fallback-0.10.0", "SCRAM-SHA-512")]


@pytest.mark.parametrize(("client_id", "mechanism"), WRONG, ids=[f"{c}-{m}" for c, m in WRONG])
def test_wrong_password_is_refused_and_nothing_is_relayed(front_door: tuple, tools: OldClientTools,
                                                          client_id: str, mechanism: str) -> None:
    material, _, relay = front_door  # SASL_PLAINTEXT this time
    base = BY_ID[client_id]
    tools.require(base)
    plain = ClientSecurity("SASL_PLAINTEXT", mechanism, "alice", "wrong-secret")
    client = secured(base, plain)
    before = len(relay.sessions)
    events = start_client(client, tools, f"127.0.0.1:{relay.port}",
                          {"action": "produce", "topic": TOPIC,
                           "records": [{"partition": 0, "key": None, "value": "eA=="}]}, timeout=15)
    try:
        deadline = time.monotonic() + 25
        while (event := events.next(deadline)) is not None and event["ev"] != "error":
            assert event["ev"] != "produced"
    finally:
        events.child.kill()
    sessions = relay.sessions[before:]
    assert sessions and all(s.principal is None for s in sessions)
    assert any(s.closed.startswith("authentication failed") for s in sessions), sessions
    # before authentication only ApiVersions may have been relayed
    assert {key for s in sessions for key in s.forwarded} <= {18}
