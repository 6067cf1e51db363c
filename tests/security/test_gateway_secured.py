"""The gateway on the secured Kafka 4.0.1 (SASL_SSL upstream, ACLs: alice reads and writes A
and uses group gA, bob reads B), in both identity modes, with every old client of the report
through its SASL_SSL, SASL_PLAINTEXT or SSL (mTLS) listeners:

- alice produces to A and reads every record back, in group gA where the client has groups;
- bob is refused on A as his client's version knows it (in passthrough mode by the cluster
  itself: it saw bob), and reads B;
- bob never sees A in Metadata, nor A's records from the conversion cache (raw requests);
- refusals (wrong password, unknown user, a mechanism not enabled, client certificates that
  do not verify, the wrong security protocol, a stalled handshake) are clean and logged once,
  while an authenticated connection goes on;
- no log line of the whole module holds a password (the last test greps them all)."""

from __future__ import annotations

import base64
import dataclasses
import logging
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lazyconv.conversion._cache import conversion_cache
from lazyconv.errors import ErrorCode
from lazyconv.protocol import _fetch, _metadata
from tests.interop.checks import received
from tests.kafka_broker import (
    GROUP_A,
    STORE_PASSWORD,
    TOPIC_A,
    TOPIC_B,
    SecuredKafka,
    produce_records,
)
from tests.net.secure_support import RawClient
from tests.oldclients.clients import BY_ID, ClientSecurity, OldClient, OldClientTools, run, secured
from tests.oldclients.clients import start as start_client
from tests.security.gateway_secured import LogLines, SecuredGateway, start_gateway

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TIMEOUT_S = 45
_LOG = LogLines()


@pytest.fixture(scope="module", autouse=True)
def log_lines() -> Iterator[LogLines]:
    _LOG.install()
    try:
        yield _LOG
    finally:
        _LOG.remove()


@pytest.fixture(scope="module")
def gateways(secured_kafka_4: SecuredKafka,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SecuredGateway]]:
    folder = tmp_path_factory.mktemp("secured-gateways")
    started: dict[str, SecuredGateway] = {}
    try:
        for mode in ("passthrough", "gateway"):
            started[mode] = start_gateway(secured_kafka_4, folder / mode, mode,
                                          auth_timeout_ms=3000)
        yield started
    finally:
        for gateway in started.values():
            gateway.stop()


@pytest.fixture(scope="module")
def tools(kafka_old_clients) -> OldClientTools:
    return OldClientTools(java_clients=kafka_old_clients)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def client_security(kafka: SecuredKafka, gateway: SecuredGateway, user: str, protocol: str,
                    mechanism: str | None) -> ClientSecurity:
    material = kafka.material
    mtls = protocol == "SSL"
    return ClientSecurity(
        protocol, mechanism, None if mtls else user, None if mtls else gateway.passwords[user],
        ca_pem=str(material.ca_pem), truststore_p12=str(material.truststore_p12),
        cert_pem=str(material.client_cert_pem(user)) if mtls else None,
        key_pem=str(material.client_key_pem(user)) if mtls else None,
        keystore_p12=str(material.client_keystore_p12(user)) if mtls else None,
        store_password=STORE_PASSWORD)


# (identity mode, client id, the gateway listener it uses, mechanism)
CASES = [
    ("passthrough", "java-0.10.2.2", "SASL_SSL", "PLAIN"),
    ("passthrough", "kafka-python-1.4.7-0.10", "SASL_SSL", "PLAIN"),
    ("passthrough", "kafka-python-1.3.5-0.10", "SASL_PLAINTEXT", "PLAIN"),
    ("passthrough", "confluent-kafka-fallback-0.10.0", "SASL_SSL", "PLAIN"),
    ("passthrough", "kafka-node-5.0.0", "SASL_SSL", "PLAIN"),
    ("gateway", "java-0.10.2.2", "SASL_SSL", "SCRAM-SHA-512"),
    ("gateway", "java-0.10.2.2", "SSL", None),
    ("gateway", "kafka-python-1.4.7-0.10", "SASL_SSL", "PLAIN"),
    ("gateway", "kafka-python-1.4.7-0.10", "SSL", None),
    ("gateway", "kafka-python-1.3.5-0.10", "SASL_PLAINTEXT", "PLAIN"),
    ("gateway", "confluent-kafka-fallback-0.10.0", "SASL_SSL", "SCRAM-SHA-512"),
    ("gateway", "kafka-node-5.0.0", "SASL_SSL", "PLAIN"),
]


@pytest.mark.parametrize(("mode", "client_id", "listener", "mechanism"), CASES,
                         ids=[f"{m}-{c}-{p}-{s or 'cert'}" for m, c, p, s in CASES])
def test_alice_produces_and_consumes_a(secured_kafka_4: SecuredKafka, gateways: dict,
                                       tools: OldClientTools, mode: str, client_id: str,
                                       listener: str, mechanism: str | None) -> None:
    gateway: SecuredGateway = gateways[mode]
    base = BY_ID[client_id]
    tools.require(base)
    client = secured(base, client_security(secured_kafka_4, gateway, "alice", listener, mechanism))
    bootstrap = gateway.bootstrap(listener)
    marker = uuid.uuid4().hex
    records = [{"partition": 0, "key": _b64(f"k{i}".encode()),
                "value": _b64(f"{marker} {client_id} {i}".encode())} for i in range(6)]
    produced = run(client, tools, bootstrap, {"action": "produce", "topic": TOPIC_A,
                                              "records": records}, timeout=TIMEOUT_S)
    offsets = [e["o"] for e in produced.of("produced")]
    assert len(offsets) == 6 and offsets == sorted(offsets)
    last = {f"{TOPIC_A}/0": offsets[-1]}
    job = ({"action": "consume", "mode": "subscribe", "topics": [TOPIC_A], "group": GROUP_A,
            "commit": True, "last": last} if client.groups else
           {"action": "consume", "mode": "assign", "partitions": [[TOPIC_A, 0]], "last": last})
    events = run(client, tools, bootstrap, job, timeout=TIMEOUT_S)
    got = {r[0]: r for r in received(events.events).get((TOPIC_A, 0), [])}
    for offset, record in zip(offsets, records, strict=True):
        assert offset in got, f"{client_id} ({job['mode']}) did not read offset {offset}"
        _, _, key, value, _ = got[offset]
        assert (key, value) == (base64.b64decode(record["key"]), base64.b64decode(record["value"]))


# how a refusal on A reaches each client (Kafka's own answer to it through Metadata and
# Produce): the Java client raises it; kafka-python 1.4.7's producer retries its metadata
# until max_block_ms (it never surfaces the error, as against a broker)
REFUSAL = {"java": "TopicAuthorizationException", "kafka-python-1.4.7": "Failed to update metadata"}
DENIED = [("passthrough", "java-0.10.2.2", "SASL_SSL", "PLAIN"),
          ("passthrough", "kafka-python-1.4.7-0.10", "SASL_SSL", "PLAIN"),
          ("gateway", "java-0.10.2.2", "SASL_SSL", "SCRAM-SHA-512")]


@pytest.mark.parametrize(("mode", "client_id", "listener", "mechanism"), DENIED,
                         ids=[f"{m}-{c}-{s}" for m, c, _, s in DENIED])
def test_bob_is_refused_on_a_and_reads_b(secured_kafka_4: SecuredKafka, gateways: dict,
                                         tools: OldClientTools, mode: str, client_id: str,
                                         listener: str, mechanism: str) -> None:
    gateway: SecuredGateway = gateways[mode]
    base: OldClient = BY_ID[client_id]
    tools.require(base)
    client = secured(base, client_security(secured_kafka_4, gateway, "bob", listener, mechanism))
    bootstrap = gateway.bootstrap(listener)
    producer = client
    if client.family.startswith("kafka-python"):  # a producer setting: not for its consumer
        producer = dataclasses.replace(client, settings={
            **client.settings, "config": {**client.settings["config"], "max_block_ms": 6000}})
    events = start_client(producer, tools, bootstrap,
                          {"action": "produce", "topic": TOPIC_A,
                           "records": [{"partition": 0, "key": None, "value": _b64(b"bob")}]},
                          timeout=30)
    try:
        deadline = time.monotonic() + 40
        while (event := events.next(deadline)) is not None and event["ev"] != "error":
            assert event["ev"] != "produced", f"bob's record was accepted: {event}"
    finally:
        events.child.kill()
    assert event is not None, f"no error from {client_id}: {events.events}"
    assert REFUSAL[client.family] in event["message"], event
    (offset,) = produce_records(secured_kafka_4.bootstrap, TOPIC_B, [
        (0, b"k", f"for bob via {client_id}".encode(), None, None)])
    events = run(client, tools, bootstrap, {"action": "consume", "mode": "assign",
                                            "partitions": [[TOPIC_B, 0]],
                                            "last": {f"{TOPIC_B}/0": offset}}, timeout=TIMEOUT_S)
    got = {r[0]: r[3] for r in received(events.events).get((TOPIC_B, 0), [])}
    assert got.get(offset) == f"for bob via {client_id}".encode()


def test_bob_is_refused_group_ga_java(secured_kafka_4: SecuredKafka, gateways: dict,
                                      tools: OldClientTools) -> None:
    """A group bob may not use: GroupAuthorizationException, not a hang."""
    gateway: SecuredGateway = gateways["passthrough"]
    base = BY_ID["java-0.10.2.2"]
    tools.require(base)
    client = secured(base, client_security(secured_kafka_4, gateway, "bob", "SASL_SSL", "PLAIN"))
    events = start_client(client, tools, gateway.bootstrap("SASL_SSL"),
                          {"action": "consume", "mode": "subscribe", "topics": [TOPIC_B],
                           "group": GROUP_A, "commit": True, "last": {f"{TOPIC_B}/0": 0}},
                          timeout=30)
    try:
        deadline = time.monotonic() + 40
        while (event := events.next(deadline)) is not None and event["ev"] != "error":
            pass
    finally:
        events.child.kill()
    assert event is not None and "GroupAuthorizationException" in event["message"], events.events


# -- what bob sees: Metadata and the conversion cache (raw requests) -----------------------------


def _raw(gateway: SecuredGateway, kafka: SecuredKafka, user: str) -> RawClient:
    context = ssl.create_default_context(cafile=str(kafka.material.ca_pem))
    client = RawClient(gateway.ports["SASL_SSL"], tls=context)
    mechanism = "PLAIN" if gateway.mode == "passthrough" else "SCRAM-SHA-256"
    assert client.authenticate(mechanism, user, gateway.passwords[user])
    return client


def _fetch_v2(client: RawClient, topic: str) -> dict[str, Any]:
    answer = client.request(_fetch.SPEC, 2, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    assert answer is not None
    return answer["responses"][0]["partitions"][0]


@pytest.mark.parametrize("mode", ["passthrough", "gateway"])
def test_bob_never_sees_a(secured_kafka_4: SecuredKafka, gateways: dict, mode: str) -> None:
    gateway: SecuredGateway = gateways[mode]
    produce_records(secured_kafka_4.bootstrap, TOPIC_A, [
        (0, b"k", f"compressed for alice {i}".encode() * 20, None, None) for i in range(50)],
        compression="lz4")
    conversion_cache.resize(16 << 20)
    try:
        with _raw(gateway, secured_kafka_4, "alice") as alice, \
                _raw(gateway, secured_kafka_4, "bob") as bob:
            everything = {t["name"] for t in alice.metadata()["topics"]}
            assert TOPIC_A in everything
            assert {t["name"] for t in bob.metadata()["topics"]} == {TOPIC_B}
            asked = bob.request(_metadata.SPEC, 1, {"topics": [{"name": TOPIC_A}]})["topics"]
            assert [(t["name"], t["error_code"], t["partitions"]) for t in asked] == [
                (TOPIC_A, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]
            # alice's Fetch v2 of A is converted (magic 1) and kept in the conversion cache;
            # twice, so that the second is answered from it
            for _ in range(2):
                part = _fetch_v2(alice, TOPIC_A)
                assert part["error_code"] == 0 and len(part["records"]) > 0
            hits = conversion_cache.counts.hits
            assert hits > 0
            for _ in range(2):
                part = _fetch_v2(bob, TOPIC_A)
                assert part["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                assert not part["records"]
            assert conversion_cache.counts.hits == hits
    finally:
        conversion_cache.resize(0)


# -- refusals -------------------------------------------------------------------------------------


def _refusal_lines(since: int) -> list[str]:
    deadline = time.monotonic() + 3
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [line for line in _LOG.lines[since:]
                 if line.startswith("WARNING lazyconv.net._server closing")]
        if lines:
            time.sleep(0.2)  # a second line would come now
            return [line for line in _LOG.lines[since:]
                    if line.startswith("WARNING lazyconv.net._server closing")]
        time.sleep(0.05)
    return lines


def _refuse(gateway: SecuredGateway, kafka: SecuredKafka, case: str) -> str:
    material = kafka.material
    ca = ssl.create_default_context(cafile=str(material.ca_pem))
    if case in ("wrong password", "unknown user"):
        user = "alice" if case == "wrong password" else "mallory"
        with RawClient(gateway.ports["SASL_SSL"], tls=ca) as client:
            mechanism = "PLAIN" if gateway.mode == "passthrough" else "SCRAM-SHA-512"
            assert not client.authenticate(mechanism, user, "not-the-password")
            assert client.closed_by_server()
        return "authentication failed"
    if case == "mechanism not enabled":
        with RawClient(gateway.ports["SASL_PLAINTEXT"]) as client:
            assert client.handshake("SCRAM-SHA-512")["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert client.closed_by_server()
        return "not enabled"
    if case in ("expired certificate", "unknown CA"):
        from tests.net.secure_support import make_material

        other = make_material(Path(material.folder).parent / f"other-{uuid.uuid4().hex[:6]}")
        if case == "expired certificate":
            # issued by the CA the gateway trusts (SecuredKafka's), expired yesterday
            import datetime

            now = datetime.datetime.now(datetime.timezone.utc)
            leaf = material.ca.issue_cert("alice.clients.lazyconv.test", common_name="alice",
                                          not_before=now - datetime.timedelta(days=3),
                                          not_after=now - datetime.timedelta(days=1))
            cert, key = other._write("expired-kafka-ca", leaf)
        else:
            cert, key = other.certs["alice"]  # a CA nobody here trusts
        ca.load_cert_chain(str(cert), str(key))
        try:
            with RawClient(gateway.ports["SSL"], tls=ca) as client:
                assert client.metadata() is None
        except (ssl.SSLError, OSError):
            pass
        return "certificate"
    if case == "plaintext to a TLS port":
        with RawClient(gateway.ports["SASL_SSL"]) as client:
            assert client.api_versions() is None
        return "does not speak TLS"
    if case == "TLS to a plaintext port":
        with pytest.raises((ssl.SSLError, OSError)):
            RawClient(gateway.ports["SASL_PLAINTEXT"], tls=ca, timeout=5)
        return "TLS"
    assert case == "stalled handshake"
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", 30) + b"\x00\x11\x00\x01")  # half a SaslHandshake
        sock.settimeout(10)
        assert sock.recv(10) == b""  # cut at gateway.authentication.timeout.ms (3 s)
    return "did not authenticate"


REFUSALS = [("passthrough", "wrong password"), ("passthrough", "unknown user"),
            ("gateway", "wrong password"), ("gateway", "unknown user"),
            ("gateway", "mechanism not enabled"), ("gateway", "expired certificate"),
            ("gateway", "unknown CA"), ("gateway", "plaintext to a TLS port"),
            ("gateway", "TLS to a plaintext port"), ("gateway", "stalled handshake")]


@pytest.mark.parametrize(("mode", "case"), REFUSALS, ids=[f"{m}-{c}" for m, c in REFUSALS])
def test_refused_cleanly_logged_once_others_unaffected(secured_kafka_4: SecuredKafka,
                                                       gateways: dict, mode: str, case: str) -> None:
    gateway: SecuredGateway = gateways[mode]
    server = gateway.gateway.gateway.server
    deadline = time.monotonic() + 5  # the connections of the tests before have ended and logged
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    with _raw(gateway, secured_kafka_4, "alice") as alice:  # an authenticated neighbour
        assert alice.metadata() is not None
        since = len(_LOG.lines)
        expected = _refuse(gateway, secured_kafka_4, case)
        lines = _refusal_lines(since)
        assert len(lines) == 1 and expected in lines[0], lines
        answer = alice.metadata()
        assert answer is not None and TOPIC_A in {t["name"] for t in answer["topics"]}


def test_upstream_reauthentication(secured_kafka_4: SecuredKafka,
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """KIP-368 upstream: against a listener with connections.max.reauth.ms the gateway's
    connections re-authenticate before their session ends, so a client's requests keep being
    answered on the same upstream connections (none closed by the broker)."""
    from tests.kafka_broker import REAUTH_MS

    gateway = start_gateway(secured_kafka_4, tmp_path_factory.mktemp("reauth-gateway"), "gateway",
                            upstream_at=(secured_kafka_4.reauth_bootstrap, "SASL_PLAINTEXT"))
    since = len(_LOG.lines)
    try:
        with _raw(gateway, secured_kafka_4, "alice") as alice:
            started = time.monotonic()
            while time.monotonic() - started < 2.6 * REAUTH_MS / 1000:
                assert TOPIC_A in {t["name"] for t in alice.metadata()["topics"]}
                assert _fetch_v2(alice, TOPIC_A)["error_code"] == 0
                time.sleep(0.25)
    finally:
        gateway.stop()
    lines = _LOG.lines[since:]
    port = secured_kafka_4.reauth_port
    again = [line for line in lines if f"re-authenticated to 127.0.0.1:{port} as User:alice" in line]
    assert len(again) >= 2, lines[-20:]
    assert not [line for line in lines if "closed the connection" in line
                and f"127.0.0.1:{port}" in line and "re-authentication" not in line]


def test_upstream_mtls_is_the_certificates_principal(secured_kafka_4: SecuredKafka,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    """An upstream of security.protocol=SSL with a client certificate (PKCS12 key store, its
    password from a file): the cluster sees the certificate's principal (alice, by its CN), so
    the gateway's clients see alice's topics and read A."""
    from lazyconv.gateway import GatewaySettings
    from tests.gateway.conftest import GatewayThread

    folder = tmp_path_factory.mktemp("mtls-upstream")
    material = secured_kafka_4.material
    (folder / "store.password").write_text(STORE_PASSWORD + "\n")
    upstream = folder / "upstream.properties"
    upstream.write_text("\n".join([
        f"bootstrap.servers={secured_kafka_4.ssl_bootstrap}", "security.protocol=SSL",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={material.ca_pem}",
        "ssl.keystore.type=PKCS12", f"ssl.keystore.location={material.client_keystore_p12('alice')}",
        f"ssl.keystore.password=${{file:{folder / 'store.password'}}}"]) + "\n")
    config = folder / "gateway.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:0\n")
    gateway = GatewayThread(None, settings=GatewaySettings.load(config, upstream))
    try:
        with RawClient(gateway.gateway.listeners[0].port) as client:
            topics = {t["name"] for t in client.metadata()["topics"]}
            assert TOPIC_A in topics and TOPIC_B not in topics
            assert _fetch_v2(client, TOPIC_A)["error_code"] == 0
            assert _fetch_v2(client, TOPIC_B)["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        gateway.stop()


def test_acls_through_the_gateway_act_as_the_client(secured_kafka_4: SecuredKafka,
                                                   gateways: dict) -> None:
    """Kafka's Admin API through the gateway in passthrough mode (confluent-kafka's AdminClient,
    SASL_SSL PLAIN to the gateway): CreateAcls is relayed under the client's own principal, so
    bob (no ALTER on the cluster) is refused with CLUSTER_AUTHORIZATION_FAILED and alice, once
    granted ALTER, creates a binding that Kafka itself then describes; DescribeAcls through the
    gateway answers what Kafka holds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    gateway = gateways["passthrough"]
    topic = "acl-through-the-gateway"

    def admin(user: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": gateway.bootstrap("SASL_SSL"),
                            "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                            "sasl.username": user, "sasl.password": gateway.passwords[user],
                            "ssl.ca.location": str(secured_kafka_4.material.ca_pem)})

    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    wanted = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    bob = admin("bob")
    with pytest.raises(KafkaException) as refused:
        bob.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(timeout=TIMEOUT_S)
    assert refused.value.args[0].code() == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, refused.value
    secured_kafka_4.create_acls([("User:alice", "broker", "kafka-cluster", "alter"),
                                 ("User:alice", "broker", "kafka-cluster", "describe")])
    alice = admin("alice")
    alice.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(timeout=TIMEOUT_S)
    direct = AdminClient({"bootstrap.servers": secured_kafka_4.bootstrap})
    held = direct.describe_acls(wanted, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert held == [binding]
    assert alice.describe_acls(wanted, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S) == held



@pytest.mark.parametrize("mode", ["passthrough", "gateway"])
def test_list_offsets_naming_a_partition_twice_is_refused_as_the_cluster_refuses_it(
        secured_kafka_4: SecuredKafka, gateways: dict, mode: str) -> None:
    """ListOffsets v7 and v10 (relayed) as bob: a partition of A (bob may not describe it)
    named twice is TOPIC_AUTHORIZATION_FAILED, one of B named twice INVALID_REQUEST whether B
    has it or not, a partition B lacks named once UNKNOWN_TOPIC_OR_PARTITION; the same codes
    as Kafka 4.0.1 answers bob directly (Kafka 4 answers a partition named twice with one
    entry, the gateway each entry, as 3.9). The partition B lacks, named twice, was
    UNKNOWN_TOPIC_OR_PARTITION through the gateway (which answers it without asking)."""
    from lazyconv.protocol import _list_offsets

    named = [(TOPIC_A, 0), (TOPIC_A, 0), (TOPIC_B, 0), (TOPIC_B, 7), (TOPIC_B, 0), (TOPIC_B, 7),
             (TOPIC_B, 9)]
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index in named:
        topics.setdefault(topic, []).append(
            {"partition_index": index, "current_leader_epoch": -1, "timestamp": -1})
    body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 10000,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}
    direct = RawClient(secured_kafka_4.sasl_plaintext_port)
    assert direct.authenticate("PLAIN", "bob", secured_kafka_4.users["bob"])
    with direct, _raw(gateways[mode], secured_kafka_4, "bob") as through:
        for version in (7, 10):
            spec = _list_offsets.KAFKA_SPEC
            want = {(t["name"], p["partition_index"], p["error_code"])
                    for t in direct.request(spec, version, body)["topics"] for p in t["partitions"]}
            got = [(t["name"], p["partition_index"], p["error_code"])
                   for t in through.request(spec, version, body)["topics"] for p in t["partitions"]]
            assert set(got) == want == {
                (TOPIC_A, 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                (TOPIC_B, 0, ErrorCode.INVALID_REQUEST), (TOPIC_B, 7, ErrorCode.INVALID_REQUEST),
                (TOPIC_B, 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}, version
            assert sorted(got) == sorted((t, p, code) for t, p in named
                                         for tt, pp, code in want if (tt, pp) == (t, p)), version


def test_no_log_line_holds_a_secret(secured_kafka_4: SecuredKafka, gateways: dict) -> None:
    """Every line this module's gateways logged (DEBUG included), grepped for every password,
    key password and private key it used: the last test of the module."""
    assert len(_LOG.lines) > 100
    secrets = {*secured_kafka_4.users.values(), *gateways["gateway"].passwords.values(),
               STORE_PASSWORD, "not-the-password"}
    key = secured_kafka_4.material.client_key_pem("alice").read_text()
    secrets.add(key.splitlines()[1])  # a line of a private key's base64
    for line in _LOG.lines:
        for secret in secrets:
            assert secret not in line, f"a secret in: {line[:200]}"
    logging.getLogger(__name__).info("%d log lines checked for %d secrets", len(_LOG.lines),
                                     len(secrets))
