"""Secured Kafka brokers for the session (marker ``kafka``): TLS, SASL (SCRAM, PLAIN), mTLS and
StandardAuthorizer ACLs, from LAZYCONV_KAFKA_DIST (4.x) and LAZYCONV_KAFKA_DIST_3 (3.x). See
:class:`tests.kafka_broker.SecuredKafka`.

Each broker gets topics A and B (one partition each) and the default ACLs: alice reads and
writes A and uses group gA; bob reads B (group gB). Shared: a test may add topics and ACLs of
its own (with names of its own) but must not stop or reconfigure the broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka_broker import TOPIC_A, TOPIC_B, SecuredKafka, create_topic


def _start(dist: Path, folder: Path) -> SecuredKafka:
    kafka = SecuredKafka(dist, folder, mtls=True)
    kafka.start()
    try:
        create_topic(kafka.bootstrap, TOPIC_A, 1)
        create_topic(kafka.bootstrap, TOPIC_B, 1)
        kafka.grant_default_acls()
    except BaseException:
        kafka.stop()
        raise
    return kafka


@pytest.fixture(scope="session")
def secured_kafka_4(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A secured Kafka 4.x node for the session."""
    kafka = _start(kafka_dist, tmp_path_factory.mktemp("secured-kafka-4"))
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def secured_kafka_3(kafka_dist_3: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A secured Kafka 3.x node for the session (it still speaks the old clients' versions)."""
    kafka = _start(kafka_dist_3, tmp_path_factory.mktemp("secured-kafka-3"))
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="session", params=["kafka-4", "kafka-3"])
def secured_kafka(request: pytest.FixtureRequest) -> SecuredKafka:
    """Each secured broker in turn (4.x, then 3.x)."""
    name = "secured_kafka_4" if request.param == "kafka-4" else "secured_kafka_3"
    return request.getfixturevalue(name)
