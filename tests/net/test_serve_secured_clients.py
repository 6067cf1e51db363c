"""``lazyconv serve`` with a SASL_SSL listener (and an mTLS one), answered with the same code as
the gateway's listeners, to real clients: kafka-python with SASL/PLAIN and with a client
certificate, confluent-kafka (librdkafka) with SCRAM-SHA-512 and PLAIN. Each produces and reads
its records back; a wrong password is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lazyconv.net._listener_config import parse_listeners
from lazyconv.net._properties import Properties
from lazyconv.net._secure_connection import ListenerSecurity
from lazyconv.net._server import ListenerSpec
from tests.net.secure_support import USERS, Material, listener_props, make_material
from tests.server_thread import ServerThread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPICS = ("scram-sha-512", "plain", "sasl-ssl-plain", "ssl-client-certificate")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, Material]]:
    material = make_material(tmp_path_factory.mktemp("serve-secured"))
    props = listener_props(material, listeners="SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0")
    configs = parse_listeners(Properties.from_mapping(props, "test"),
                              scram_credentials_file=material.scram_file)
    # serve plays one broker per listener: these two tests use one listener each
    logdirs = [tmp_path_factory.mktemp("logdir") for _ in configs]
    for logdir in logdirs:  # serve creates no topics: these are the ones the tests use
        for topic in TOPICS:
            (logdir / f"{topic}-0").mkdir()
    servers = [ServerThread(logdir,
                            specs=[ListenerSpec(c.host, c.port, 0, None,
                                                security=ListenerSecurity.from_config(c))])
               for logdir, c in zip(logdirs, configs, strict=True)]
    try:
        yield servers, material
    finally:
        for server in servers:
            server.stop()


def _confluent(server: ServerThread, material: Material, mechanism: str, password: str) -> dict:
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism, "sasl.username": "alice", "sasl.password": password,
            "ssl.ca.location": str(material.ca_pem), "broker.address.family": "v4"}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_sasl_ssl(served: tuple, mechanism: str) -> None:
    from confluent_kafka import Consumer, Producer

    (server, _), material = served
    topic = mechanism.lower()
    conf = _confluent(server, material, mechanism, USERS["alice"])
    producer = Producer(conf)
    values = [f"{mechanism} {i}".encode() for i in range(5)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"nothing after {got}"
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    assert got == values


def test_confluent_kafka_wrong_password(served: tuple) -> None:
    from confluent_kafka import KafkaError, Producer

    (server, _), material = served
    errors = []
    producer = Producer({**_confluent(server, material, "SCRAM-SHA-512", "wrong-secret"),
                         "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce("never", b"x")
    producer.flush(8)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def _kafka_python(server: ServerThread, material: Material, **security) -> dict:
    return {"bootstrap_servers": server.bootstrap, "ssl_cafile": str(material.ca_pem),
            **security}


@pytest.mark.parametrize("how", ["SASL_SSL PLAIN", "SSL client certificate"])
def test_kafka_python(served: tuple, how: str) -> None:
    import kafka

    (sasl_server, ssl_server), material = served
    if how == "SASL_SSL PLAIN":
        server = sasl_server
        security = {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                    "sasl_plain_username": "bob", "sasl_plain_password": USERS["bob"]}
    else:
        server = ssl_server
        cert, key = material.certs["bob"]
        security = {"security_protocol": "SSL", "ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    conf = _kafka_python(server, material, **security)
    topic = how.lower().replace(" ", "-").replace("_", "-")
    producer = kafka.KafkaProducer(**conf)
    try:
        for i in range(5):
            producer.send(topic, f"{how} {i}".encode(), partition=0).get(30)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=15000, **conf)
    got = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) == 5:
                break
    finally:
        consumer.close()
    assert got == [f"{how} {i}".encode() for i in range(5)]


def test_confluent_kafka_reauthenticates(tmp_path_factory: pytest.TempPathFactory,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """KIP-368: with connections.max.reauth.ms the session has a lifetime; librdkafka
    re-authenticates on the same connection before it ends, and its records keep flowing."""
    import logging
    import time

    from confluent_kafka import Producer

    caplog.set_level(logging.DEBUG, logger="lazyconv.net._server")
    material = make_material(tmp_path_factory.mktemp("serve-reauth"))
    props = listener_props(material, listeners="SASL_SSL://127.0.0.1:0",
                           **{"connections.max.reauth.ms": "1500"})
    (config,) = parse_listeners(Properties.from_mapping(props, "test"),
                                scram_credentials_file=material.scram_file)
    logdir = tmp_path_factory.mktemp("reauth-logdir")
    (logdir / "reauth-0").mkdir()
    server = ServerThread(logdir, specs=[ListenerSpec(config.host, config.port, 0, None,
                                                      security=ListenerSecurity.from_config(config))])
    try:
        failures = []
        producer = Producer({**_confluent(server, material, "SCRAM-SHA-512", USERS["alice"]),
                             "linger.ms": 0})
        for i in range(12):
            producer.produce("reauth", f"{i}".encode(), partition=0,
                             on_delivery=lambda err, msg: failures.append(err) if err else None)
            producer.poll(0)
            time.sleep(0.5)
        assert producer.flush(20) == 0 and not failures
    finally:
        server.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "lazyconv.net._server"]
    assert sum("re-authenticated as User:alice" in line for line in lines) >= 2, lines
    assert not [line for line in lines if "expired" in line]
