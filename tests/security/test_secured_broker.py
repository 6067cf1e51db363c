"""The secured broker fixture does what the gateway's security tests rely on: SCRAM and PLAIN
over SASL_SSL, mTLS principals, and ACLs that allow alice A and bob B and nothing else."""

from __future__ import annotations

import uuid

import pytest

from tests.kafka_broker import GROUP_A, GROUP_B, TOPIC_A, TOPIC_B, SecuredKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC_AUTHORIZATION_FAILED = 29


def produce(conf: dict, topic: str, values: list[bytes]) -> list[object]:
    """Produce ``values``; the delivery errors (None for each success)."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": "all", "message.timeout.ms": 20000})
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors


def consume(conf: dict, topic: str, group: str, want: set[bytes]) -> tuple[list[bytes], object]:
    """Group-consume from the start until every value of ``want`` was read (or an error, or
    30 s); (values read, the first error or None)."""
    import time

    from confluent_kafka import Consumer

    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    values: list[bytes] = []
    error = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not want <= set(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                error = msg.error()
                break
            values.append(msg.value())
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, error


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_alice_writes_and_reads_a_but_cannot_write_b(secured_kafka: SecuredKafka, mechanism: str) -> None:
    conf = secured_kafka.client_config("alice", mechanism)
    marker = uuid.uuid4().hex.encode()
    values = [marker + b"-%d" % i for i in range(5)]
    assert produce(conf, TOPIC_A, values) == [None] * 5
    got, error = consume(conf, TOPIC_A, GROUP_A, set(values))
    assert error is None and set(values) <= set(got)
    errors = produce(conf, TOPIC_B, [b"not allowed"])
    assert errors[0] is not None and errors[0].code() == TOPIC_AUTHORIZATION_FAILED, errors


def test_bob_is_denied_a_and_reads_b(secured_kafka: SecuredKafka) -> None:
    super_user = secured_kafka.client_config(None, listener="PLAINTEXT")
    assert produce(super_user, TOPIC_B, [b"for bob"]) == [None]
    bob = secured_kafka.client_config("bob", "SCRAM-SHA-512")
    errors = produce(bob, TOPIC_A, [b"bob writes A"])
    assert errors[0] is not None and errors[0].code() == TOPIC_AUTHORIZATION_FAILED
    _, error = consume(bob, TOPIC_A, GROUP_B, {b"anything"})
    assert error is not None and error.code() == TOPIC_AUTHORIZATION_FAILED, error
    got, error = consume(bob, TOPIC_B, GROUP_B, {b"for bob"})
    assert error is None and b"for bob" in got


def test_wrong_password_is_refused(secured_kafka: SecuredKafka) -> None:
    import time

    from confluent_kafka import KafkaError, Producer

    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        errors: list[KafkaError] = []
        producer = Producer({**secured_kafka.client_config("alice", mechanism, password="nope"),
                             "error_cb": errors.append})
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert "Authentication failed" in errors[0].str()


def test_mtls_principal_gets_the_users_acls(secured_kafka: SecuredKafka) -> None:
    conf = secured_kafka.client_config("alice", listener="SSL")
    assert produce(conf, TOPIC_A, [b"over mTLS"]) == [None]
    errors = produce(conf, TOPIC_B, [b"still not allowed"])
    assert errors[0] is not None and errors[0].code() == TOPIC_AUTHORIZATION_FAILED
