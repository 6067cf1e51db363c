"""The old clients' security settings, proved against a secured Kafka 3.9 broker directly (3.9
still speaks their protocol versions): each produces to topic A as alice and reads every
record back (by partition assignment, and in group gA where its driver can), over SASL_SSL
(PLAIN, SCRAM-SHA-512) or SSL with a client certificate; bob is refused on A. Once the
gateway has security, the same settings go through it."""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid

import pytest

from tests.interop.checks import received
from tests.kafka_broker import (
    GROUP_A,
    STORE_PASSWORD,
    TOPIC_A,
    TOPIC_B,
    SecuredKafka,
    produce_records,
)
from tests.oldclients.clients import (
    BY_ID,
    ClientSecurity,
    OldClient,
    OldClientTools,
    run,
    secured,
)
from tests.oldclients.clients import start as start_client

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TIMEOUT_S = 45

# (client id, protocol, mechanism): what each client's release supports
CASES = [
    ("java-0.10.2.2", "SASL_SSL", "PLAIN"),
    ("java-0.10.2.2", "SASL_SSL", "SCRAM-SHA-512"),
    ("java-0.10.2.2", "SSL", None),
    ("kafka-python-1.4.7-0.10", "SASL_SSL", "PLAIN"),
    ("kafka-python-1.4.7-0.10", "SSL", None),
    ("kafka-python-1.3.5-0.10", "SASL_PLAINTEXT", "PLAIN"),
    ("confluent-kafka-fallback-0.10.0", "SASL_SSL", "SCRAM-SHA-512"),
    ("kafka-node-5.0.0", "SASL_SSL", "PLAIN"),
]


@pytest.fixture(scope="module")
def tools(kafka_old_clients) -> OldClientTools:
    return OldClientTools(java_clients=kafka_old_clients)


def security(kafka: SecuredKafka, user: str, protocol: str, mechanism: str | None) -> ClientSecurity:
    material = kafka.material
    return ClientSecurity(
        protocol, mechanism, user if mechanism else None, kafka.users[user] if mechanism else None,
        ca_pem=str(material.ca_pem), truststore_p12=str(material.truststore_p12),
        cert_pem=str(material.client_cert_pem(user)) if protocol == "SSL" else None,
        key_pem=str(material.client_key_pem(user)) if protocol == "SSL" else None,
        keystore_p12=str(material.client_keystore_p12(user)) if protocol == "SSL" else None,
        store_password=STORE_PASSWORD)


def bootstrap(kafka: SecuredKafka, protocol: str) -> str:
    return {"SASL_SSL": kafka.sasl_ssl_bootstrap, "SASL_PLAINTEXT": kafka.sasl_plaintext_bootstrap,
            "SSL": kafka.ssl_bootstrap}[protocol]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(("client_id", "protocol", "mechanism"), CASES,
                         ids=[f"{c}-{p}-{m or 'cert'}" for c, p, m in CASES])
def test_old_client_round_trip_as_alice(secured_kafka_3: SecuredKafka, tools: OldClientTools,
                                        client_id: str, protocol: str, mechanism: str | None) -> None:
    kafka = secured_kafka_3
    base = BY_ID[client_id]
    tools.require(base)
    client = secured(base, security(kafka, "alice", protocol, mechanism))
    marker = uuid.uuid4().hex
    records = [{"partition": 0, "key": _b64(f"k{i}".encode()),
                "value": _b64(f"{marker} {client_id} {i}".encode())} for i in range(6)]
    produced = run(client, tools, bootstrap(kafka, protocol),
                   {"action": "produce", "topic": TOPIC_A, "records": records}, timeout=TIMEOUT_S)
    offsets = [e["o"] for e in produced.of("produced")]
    assert len(offsets) == 6 and offsets == sorted(offsets)
    jobs = [{"action": "consume", "mode": "assign", "partitions": [[TOPIC_A, 0]],
             "last": {f"{TOPIC_A}/0": offsets[-1]}}]
    if client.groups:
        jobs.append({"action": "consume", "mode": "subscribe", "topics": [TOPIC_A],
                     "group": GROUP_A, "commit": True, "last": {f"{TOPIC_A}/0": offsets[-1]}})
    for job in jobs:
        events = run(client, tools, bootstrap(kafka, protocol), job, timeout=TIMEOUT_S)
        got = {r[0]: r for r in received(events.events).get((TOPIC_A, 0), [])}
        for offset, record in zip(offsets, records, strict=True):
            assert offset in got, f"{client_id} ({job['mode']}) did not read offset {offset}"
            _, _, key, value, _ = got[offset]
            assert (key, value) == (base64.b64decode(record["key"]),
                                    base64.b64decode(record["value"]))


DENIED = [("java-0.10.2.2", "SASL_SSL", "SCRAM-SHA-512"), ("java-0.10.2.2", "SASL_SSL", "PLAIN"),
          ("kafka-python-1.4.7-0.10", "SASL_SSL", "PLAIN")]
# how each refusal reaches the client when Kafka 3.9 answers its Metadata for A with
# TOPIC_AUTHORIZATION_FAILED: the Java client raises it; kafka-python 1.4.7's producer keeps
# asking for metadata until max_block_ms and times out (it never surfaces the error)
REFUSAL = {"java": "TopicAuthorizationException", "kafka-python-1.4.7": "Failed to update metadata"}


@pytest.mark.parametrize(("client_id", "protocol", "mechanism"), DENIED,
                         ids=[f"{c}-{m}" for c, _, m in DENIED])
def test_bob_is_refused_on_a_and_reads_b(secured_kafka_3: SecuredKafka, tools: OldClientTools,
                                         client_id: str, protocol: str, mechanism: str) -> None:
    kafka = secured_kafka_3
    base: OldClient = BY_ID[client_id]
    tools.require(base)
    client = secured(base, security(kafka, "bob", protocol, mechanism))
    producer = client
    if client.family.startswith("kafka-python"):  # a producer setting: not for its consumer
        producer = dataclasses.replace(client, settings={
            **client.settings, "config": {**client.settings["config"], "max_block_ms": 8000}})
    events = start_client(producer, tools, bootstrap(kafka, protocol),
                          {"action": "produce", "topic": TOPIC_A,
                           "records": [{"partition": 0, "key": None, "value": _b64(b"bob")}]},
                          timeout=40)
    try:
        deadline = time.monotonic() + 50
        while (event := events.next(deadline)) is not None and event["ev"] != "error":
            assert event["ev"] != "produced", f"bob's record was accepted: {event}"
    finally:
        events.child.kill()
    assert event is not None, f"no error from {client_id}: {events.events}"
    assert REFUSAL[client.family] in event["message"], event
    # the same credentials read B, which bob may: the refusal was authorization, not a login
    (offset,) = produce_records(kafka.bootstrap, TOPIC_B, [(0, b"k", f"for bob via {client_id}".encode(),
                                                            None, None)])
    events = run(client, tools, bootstrap(kafka, protocol),
                 {"action": "consume", "mode": "assign", "partitions": [[TOPIC_B, 0]],
                  "last": {f"{TOPIC_B}/0": offset}}, timeout=TIMEOUT_S)
    got = {r[0]: r[3] for r in received(events.events).get((TOPIC_B, 0), [])}
    assert got.get(offset) == f"for bob via {client_id}".encode()
