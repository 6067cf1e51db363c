"""Admin clients through the gateway against Kafka 4.0.1 (marker ``kafka``): what they ask of
the answers the gateway builds itself (Metadata, ApiVersions) is what Kafka answers straight.

- confluent-kafka's ``describe_topics`` and ``describe_cluster`` with
  ``include_authorized_operations`` (librdkafka asks Metadata v10 for both) get the operations
  the cluster grants, as straight on Kafka; a Metadata request that does not ask for them gets
  −2147483648 ("not asked") in both fields;
- ApiVersions lists the supported features Kafka lists at each version (v4 every one, v3 those
  whose minimum version is not 0), which Admin.describeFeatures reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_broker import KafkaBroker

from lazyconv.protocol import KAFKA_API_BY_KEY
from tests.gateway.conftest import GatewayThread, create_topic_retrying
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

NOT_ASKED = -(2**31)


@pytest.fixture(scope="module")
def gateway(kafka_broker: KafkaBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(kafka_broker.bootstrap)
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def topic(kafka_broker: KafkaBroker) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    create_topic_retrying(kafka_broker.bootstrap, name, 2)
    return name


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                        "log_level": 3})


def _authorized(bootstrap: str, topic: str) -> tuple[list[str], list[str]]:
    """The topic's and the cluster's authorized operations, as confluent-kafka gives them."""
    from confluent_kafka import TopicCollection

    admin = _admin(bootstrap)
    described = admin.describe_topics(TopicCollection([topic]),
                                      include_authorized_operations=True)[topic].result(30)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    return (sorted(str(op) for op in described.authorized_operations or []),
            sorted(str(op) for op in cluster.authorized_operations or []))


def test_authorized_operations_asked_of_metadata_are_the_clusters(
        kafka_broker: KafkaBroker, gateway: GatewayThread, topic: str) -> None:
    direct = _authorized(kafka_broker.bootstrap, topic)
    assert direct[0] and direct[1]  # a broker without an authorizer grants every operation
    assert _authorized(gateway.bootstrap, topic) == direct


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_authorized_operations_at_each_version(
        kafka_broker: KafkaBroker, gateway: GatewayThread, topic: str, version: int) -> None:
    spec = KAFKA_API_BY_KEY[3]

    def ask(port: int, include: bool) -> tuple[int | None, int]:
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": include,
                "include_topic_authorized_operations": include}
        with WireClient(port) as client:
            answer = client.call(spec, version, body)
        return answer.get("cluster_authorized_operations"), \
            answer["topics"][0]["topic_authorized_operations"]

    for include in (True, False):
        direct = ask(kafka_broker.port, include)
        assert ask(gateway.port, include) == direct, include
    assert ask(gateway.port, False)[1] == NOT_ASKED
    assert ask(gateway.port, True)[1] != NOT_ASKED


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_lists_the_features_kafka_lists_at_each_version(
        kafka_broker: KafkaBroker, gateway: GatewayThread, version: int) -> None:
    """ApiVersions v4 lists every supported feature (Admin.describeFeatures shows them); v3 and
    below leave out those whose minimum version is 0 (KAFKA-17011), on Kafka as on the gateway
    (which asks the cluster at v4)."""
    def supported(port: int) -> list[tuple[str, int, int]]:
        with WireClient(port) as client:
            answer = client.call(KAFKA_API_BY_KEY[18], version, {
                "client_software_name": "lazyconv-test", "client_software_version": "1"})
        return sorted((f["name"], f["min_version"], f["max_version"])
                      for f in answer["supported_features"])

    direct = supported(kafka_broker.port)
    assert ("metadata.version" in {name for name, _, _ in direct})
    assert supported(gateway.port) == direct
    if version >= 4:
        assert any(low == 0 for _, low, _ in direct)  # group.version, transaction.version, ...
