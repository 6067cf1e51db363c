"""KAFKA_APIS against a live Kafka 4.x broker (LAZYCONV_KAFKA_DIST): our version ranges cover
what its ApiVersions says it serves; every API at every version it serves answers a request we
encode with a response we decode exactly (no byte left over, no tagged field we do not know);
and requests with content (topics, configs, records, groups, transactions, ACLs, quotas, SCRAM
credentials) decode to what the broker says.

One broker for the module (KRaft, broker and controller in one JVM, the StandardAuthorizer with
ANONYMOUS as a super user so that the ACL APIs work on its PLAINTEXT listener).
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import KafkaBroker
from minimal_requests import MINIMAL, member_id

from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS, ApiSpec
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from lazyconv.records import RecordsBuilder

pytestmark = pytest.mark.kafka

CLIENT_ID = "lazyconv-kafka-apis"
# Kafka 4 advertises Produce 0-2 in ApiVersions (a librdkafka workaround) but refuses them: it
# closes the connection instead of answering (tested below).
PRODUCE_REFUSED = range(0, 3)


@pytest.fixture(scope="module")
def broker(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    node = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("kafka-apis") / "broker", extra_props={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    })
    node.start()
    try:
        yield node
    finally:
        node.stop()


class Wire:
    """One request, one response, on a connection of its own (an API that fails the connection,
    SASL on a PLAINTEXT listener for one, cannot disturb the next)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._correlation = 0

    def raw(self, spec: ApiSpec, version: int, body: bytes) -> tuple[int, bytes]:
        self._correlation += 1
        header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                       self._correlation, CLIENT_ID)
        with socket.create_connection(("127.0.0.1", self.port), timeout=15) as sock:
            sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            return self._correlation, _recv(sock, size)

    def call(self, spec: ApiSpec | str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """The decoded response, read exactly (an error if a byte is left over)."""
        return self.exchange(spec, version, body)[0]

    def exchange(self, spec: ApiSpec | str, version: int,
                 body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """The decoded response and its body's bytes."""
        spec = _spec(spec)
        correlation, data = self.raw(spec, version, spec.encode_request(version, body))
        reader = Reader(data)
        header = decode_response_header(reader, spec.response_header_version(version))
        assert header["correlation_id"] == correlation
        assert not header.get("_unknown_tagged_fields")
        response_body = bytes(reader.view[reader.pos:])
        return spec.decode_response(version, reader, exact=True), response_body


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def _spec(spec: ApiSpec | str) -> ApiSpec:
    if isinstance(spec, ApiSpec):
        return spec
    return next(s for s in KAFKA_APIS if s.name == spec)


def _unknown_tags(value: Any, path: str = "") -> list[str]:
    """Where a decoded message kept tagged fields our declaration does not know."""
    found: list[str] = []
    if isinstance(value, dict):
        if value.get("_unknown_tagged_fields"):
            found.append(f"{path or '.'}: tags {sorted(value['_unknown_tagged_fields'])}")
        for key, item in value.items():
            found += _unknown_tags(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _unknown_tags(item, f"{path}[{i}]")
    return found


def _until(probe: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """``probe()``'s first truthy result (KRaft metadata reaches the broker's cache a moment
    after the controller commits it)."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen after {timeout:.0f} s")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def wire(broker: KafkaBroker) -> Wire:
    return Wire(broker.port)


@pytest.fixture(scope="module")
def served(wire: Wire) -> dict[int, tuple[int, int]]:
    """What the broker's ApiVersions (v3) says it serves."""
    answer = wire.call("ApiVersions", 3, {"client_software_name": "lazyconv-test",
                                          "client_software_version": "1.0"})
    assert answer["error_code"] == 0
    return {row["api_key"]: (row["min_version"], row["max_version"]) for row in answer["api_keys"]}


# -- versions ---------------------------------------------------------------------------------


def test_our_ranges_cover_every_version_the_broker_serves(served: dict[int, tuple[int, int]]) -> None:
    assert sorted(served) == sorted(KAFKA_API_BY_KEY)
    uncovered = {KAFKA_API_BY_KEY[key].name: (versions, (KAFKA_API_BY_KEY[key].min_version,
                                                         KAFKA_API_BY_KEY[key].max_version))
                 for key, versions in served.items()
                 if not (KAFKA_API_BY_KEY[key].min_version <= versions[0]
                         and versions[1] <= KAFKA_API_BY_KEY[key].max_version)}
    assert uncovered == {}


def test_api_versions_answer_carries_the_feature_levels(wire: Wire) -> None:
    """ApiVersions v3+: the tagged SupportedFeatures / FinalizedFeatures, read by name."""
    answer = wire.call("ApiVersions", 4, {"client_software_name": "lazyconv-test",
                                          "client_software_version": "1.0"})
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in answer["supported_features"]}
    finalized = {f["name"]: (f["min_version_level"], f["max_version_level"])
                 for f in answer["finalized_features"]}
    assert "metadata.version" in supported and "metadata.version" in finalized
    low, high = supported["metadata.version"]
    assert low <= finalized["metadata.version"][1] <= high
    assert answer["finalized_features_epoch"] >= 0


def test_every_declared_api_has_a_minimal_request() -> None:
    assert sorted(MINIMAL) == sorted(spec.name for spec in KAFKA_APIS)


@pytest.mark.parametrize("spec", KAFKA_APIS, ids=lambda spec: spec.name)
def test_every_served_version_answers_a_minimal_request_we_decode_exactly(
        spec: ApiSpec, wire: Wire, served: dict[int, tuple[int, int]]) -> None:
    low, high = served[spec.key]
    versions = [v for v in range(low, high + 1) if not (spec.name == "Produce" and v in PRODUCE_REFUSED)]
    for version in versions:
        answer, body = wire.exchange(spec, version, MINIMAL[spec.name])
        assert _unknown_tags(answer) == [], f"{spec.name} v{version}"
        # nothing lost in decoding: the answer encodes back to the broker's bytes
        assert spec.encode_response(version, answer) == body, f"{spec.name} v{version}"


def test_produce_versions_kafka_4_advertises_but_refuses_close_the_connection(wire: Wire) -> None:
    spec = KAFKA_API_BY_KEY[0]
    for version in PRODUCE_REFUSED:
        with pytest.raises((ConnectionError, OSError)):
            wire.raw(spec, version, spec.encode_request(version, MINIMAL["Produce"]))


# -- requests with content ----------------------------------------------------------------------

ZERO_UUID = uuid.UUID(int=0)
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigResource.Type


def _create_topic(wire: Wire, name: str, partitions: int, configs: dict[str, str] | None = None,
                  ) -> dict[str, Any]:
    answer = wire.call("CreateTopics", 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 10000})
    (result,) = answer["topics"]
    assert (result["name"], result["error_code"], result["error_message"]) == (name, 0, None)
    _until(lambda: _partitions(wire, name) == partitions, f"{name}'s {partitions} partitions")
    return result


def _metadata_topic(wire: Wire, name: str) -> dict[str, Any]:
    answer = wire.call("Metadata", 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    (topic,) = answer["topics"]
    return topic


def _partitions(wire: Wire, name: str) -> int:
    topic = _metadata_topic(wire, name)
    if topic["error_code"] or any(p["leader_id"] < 0 for p in topic["partitions"]):
        return -1
    return len(topic["partitions"])


def _describe_configs(wire: Wire, kind: int, name: str, keys: list[str]) -> dict[str, Any]:
    answer = wire.call("DescribeConfigs", 4, {"resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": keys}]})
    (result,) = answer["results"]
    return result


def test_a_topic_created_described_altered_grown_and_deleted(wire: Wire, broker: KafkaBroker) -> None:
    name = "lazyconv-apis-topic"
    created = _create_topic(wire, name, 2, {"retention.ms": "123456789"})
    assert (created["num_partitions"], created["replication_factor"]) == (2, 1)
    assert created["topic_id"] != ZERO_UUID
    assert {"name": "retention.ms", "value": "123456789"}.items() <= next(
        c for c in created["configs"] if c["name"] == "retention.ms").items()

    topic = _metadata_topic(wire, name)
    assert (topic["name"], topic["topic_id"], topic["is_internal"]) == (name, created["topic_id"], False)
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1]
    assert {p["leader_id"] for p in topic["partitions"]} == {broker.node_id}
    described = wire.call("DescribeTopicPartitions", 0, {"topics": [{"name": name}]})
    (dtp,) = described["topics"]
    assert (dtp["topic_id"], [p["replica_nodes"] for p in dtp["partitions"]]) == (
        created["topic_id"], [[broker.node_id], [broker.node_id]])

    config = _describe_configs(wire, TOPIC_RESOURCE, name, ["retention.ms"])
    assert [(c["name"], c["value"], c["read_only"]) for c in config["configs"]] == [
        ("retention.ms", "123456789", False)]
    altered = wire.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": TOPIC_RESOURCE, "resource_name": name,
        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "987654321"}]}]})
    assert [(r["error_code"], r["resource_name"]) for r in altered["responses"]] == [(0, name)]
    _until(lambda: _describe_configs(wire, TOPIC_RESOURCE, name, ["retention.ms"])["configs"][0]["value"]
           == "987654321", "the altered retention.ms")

    # assignments null: the controller places the new partition (an empty list is refused)
    grown = wire.call("CreatePartitions", 3, {"topics": [{"name": name, "count": 3, "assignments": None}],
                                              "timeout_ms": 10000})
    assert [(r["name"], r["error_code"]) for r in grown["results"]] == [(name, 0)]
    _until(lambda: _partitions(wire, name) == 3, "the third partition")

    deleted = wire.call("DeleteTopics", 6, {"topics": [{"name": None, "topic_id": created["topic_id"]}],
                                            "timeout_ms": 10000})
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in deleted["responses"]] == [
        (name, created["topic_id"], 0)]
    _until(lambda: _metadata_topic(wire, name)["error_code"] == 3, "the topic gone")  # UNKNOWN_TOPIC


def test_cluster_quorum_coordinators_and_broker_resources(wire: Wire, broker: KafkaBroker) -> None:
    cluster = wire.call("DescribeCluster", 2, {"include_fenced_brokers": True})
    assert cluster["error_code"] == 0 and cluster["controller_id"] == broker.node_id
    assert [(b["broker_id"], b["host"], b["port"], b["is_fenced"]) for b in cluster["brokers"]] == [
        (broker.node_id, "127.0.0.1", broker.port, False)]
    metadata = wire.call("Metadata", 13, {"topics": []})
    assert metadata["cluster_id"] == cluster["cluster_id"] and metadata["error_code"] == 0

    quorum = wire.call("DescribeQuorum", 2, MINIMAL["DescribeQuorum"])
    (partition,) = quorum["topics"][0]["partitions"]
    assert partition["leader_id"] == broker.node_id
    assert [v["replica_id"] for v in partition["current_voters"]] == [broker.node_id]
    # v2's voter endpoints: the controller listener, its port a uint16
    assert [(n["node_id"], [(lst["host"], lst["port"]) for lst in n["listeners"]])
            for n in quorum["nodes"]] == [(broker.node_id, [("127.0.0.1", broker.controller_port)])]

    def group_coordinator() -> dict[str, Any] | None:
        found = wire.call("FindCoordinator", 6, {"key_type": 0, "coordinator_keys": ["lazyconv-g"]})
        (coordinator,) = found["coordinators"]
        return coordinator if coordinator["error_code"] == 0 else None

    coordinator = _until(group_coordinator, "the group coordinator")
    assert (coordinator["key"], coordinator["node_id"], coordinator["host"], coordinator["port"]) == (
        "lazyconv-g", broker.node_id, "127.0.0.1", broker.port)

    # a BROKER config resource names its broker: that broker answers it, no other does
    own = _describe_configs(wire, BROKER_RESOURCE, str(broker.node_id), ["node.id"])
    assert (own["error_code"], [(c["name"], c["value"]) for c in own["configs"]]) == (
        0, [("node.id", str(broker.node_id))])
    other = _describe_configs(wire, BROKER_RESOURCE, str(broker.node_id + 1), ["node.id"])
    assert other["error_code"] == 42  # INVALID_REQUEST: "Unexpected broker id"

    log_dirs = wire.call("DescribeLogDirs", 4, {"topics": None})
    assert log_dirs["error_code"] == 0
    (log_dir,) = log_dirs["results"]
    assert Path(log_dir["log_dir"]).is_relative_to(broker.workdir)
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0


def _records(count: int, producer_id: int = -1, producer_epoch: int = -1, sequence: int = -1,
             transactional: bool = False) -> bytes:
    builder = RecordsBuilder(2, producer_id=producer_id, producer_epoch=producer_epoch,
                             base_sequence=sequence, is_transactional=transactional)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i)
    return builder.build()


def _list_offset(wire: Wire, name: str, timestamp: int) -> int:
    answer = wire.call("ListOffsets", 10, {"replica_id": -1, "timeout_ms": 1000, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    (partition,) = answer["topics"][0]["partitions"]
    assert partition["error_code"] == 0
    offset: int = partition["offset"]
    return offset


def test_records_producers_offsets_and_deletion(wire: Wire) -> None:
    name = "lazyconv-apis-records"
    topic_id = _create_topic(wire, name, 1)["topic_id"]
    producer = _until(lambda: (lambda r: r if r["error_code"] == 0 else None)(wire.call(
        "InitProducerId", 5, {"transactional_id": None, "transaction_timeout_ms": 60000})),
        "a producer id")
    assert producer["producer_id"] >= 0
    pid, epoch = producer["producer_id"], producer["producer_epoch"]

    produced = wire.call("Produce", 12, {"acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": _records(3, pid, epoch, 0)}]}]})
    (partition,) = produced["responses"][0]["partition_responses"]
    assert (partition["error_code"], partition["base_offset"]) == (0, 0)
    assert (_list_offset(wire, name, -2), _list_offset(wire, name, -1)) == (0, 3)

    producers = wire.call("DescribeProducers", 0, {"topics": [{"name": name, "partition_indexes": [0]}]})
    (state,) = producers["topics"][0]["partitions"][0]["active_producers"]
    assert (state["producer_id"], state["producer_epoch"], state["last_sequence"]) == (pid, epoch, 2)

    fetched = wire.call("Fetch", 17, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0,
                                               "partition_max_bytes": 1 << 20}]}]})
    (data,) = fetched["responses"][0]["partitions"]
    assert (data["error_code"], data["high_watermark"]) == (0, 3)
    assert data["records"] == _records(3, pid, epoch, 0)[:12] + data["records"][12:]  # base offset 0

    epochs = wire.call("OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": [
        {"topic": name, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    (end,) = epochs["topics"][0]["partitions"]
    assert (end["error_code"], end["leader_epoch"], end["end_offset"]) == (0, 0, 3)

    deleted = wire.call("DeleteRecords", 2, {"timeout_ms": 10000, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "offset": 2}]}]})
    (low,) = deleted["topics"][0]["partitions"]
    assert (low["error_code"], low["low_watermark"]) == (0, 2)
    assert _list_offset(wire, name, -2) == 2


def test_groups_offsets_and_the_consumer_protocol(wire: Wire) -> None:
    name = "lazyconv-apis-groups"
    topic_id = _create_topic(wire, name, 2)["topic_id"]
    group = "lazyconv-apis-simple"
    _until(lambda: wire.call("FindCoordinator", 6, {"key_type": 0, "coordinator_keys": [group]})
           ["coordinators"][0]["error_code"] == 0, "the group coordinator")
    committed = wire.call("OffsetCommit", 9, {"group_id": group, "topics": [
        {"name": name, "partitions": [{"partition_index": 1, "committed_offset": 42,
                                       "committed_metadata": "m"}]}]})
    assert committed["topics"][0]["partitions"] == [{"partition_index": 1, "error_code": 0}]
    fetched = wire.call("OffsetFetch", 9, {"groups": [{"group_id": group, "topics": None}]})
    (offsets,) = fetched["groups"]
    assert [(p["partition_index"], p["committed_offset"], p["metadata"])
            for t in offsets["topics"] for p in t["partitions"]] == [(1, 42, "m")]
    old = wire.call("OffsetFetch", 1, {"group_id": group, "topics": [{"name": name, "partition_indexes": [1]}]})
    assert old["topics"][0]["partitions"][0]["committed_offset"] == 42

    listed = wire.call("ListGroups", 5, {"states_filter": [], "types_filter": []})
    assert {(g["group_id"], g["group_state"], g["group_type"]) for g in listed["groups"]} >= {
        (group, "Empty", "classic")}
    (described,) = wire.call("DescribeGroups", 6, {"groups": [group]})["groups"]
    assert (described["error_code"], described["group_state"], described["members"]) == (0, "Empty", [])

    # the KIP-848 consumer protocol: join, get the partitions, be described, leave
    consumer_group, member = "lazyconv-apis-cg", member_id()
    joined = wire.call("ConsumerGroupHeartbeat", 1, {
        "group_id": consumer_group, "member_id": member, "member_epoch": 0,
        "rebalance_timeout_ms": 30000, "subscribed_topic_names": [name], "topic_partitions": []})
    assert (joined["error_code"], joined["member_id"]) == (0, member) and joined["member_epoch"] >= 1

    def assigned() -> list[tuple[uuid.UUID, list[int]]]:
        beat = wire.call("ConsumerGroupHeartbeat", 1, {
            "group_id": consumer_group, "member_id": member, "member_epoch": joined["member_epoch"]})
        assignment = beat["assignment"] or joined["assignment"]
        return [(tp["topic_id"], sorted(tp["partitions"])) for tp in
                (assignment["topic_partitions"] if assignment else [])]

    assert _until(assigned, "an assignment") == [(topic_id, [0, 1])]
    (cg,) = wire.call("ConsumerGroupDescribe", 1, {"group_ids": [consumer_group]})["groups"]
    assert cg["error_code"] == 0 and cg["group_state"] == "Stable"
    assert [(m["member_id"], m["client_id"], m["member_type"]) for m in cg["members"]] == [
        (member, CLIENT_ID, 1)]  # 1: a member of the consumer protocol (KIP-1099)
    left = wire.call("ConsumerGroupHeartbeat", 1, {"group_id": consumer_group, "member_id": member,
                                                   "member_epoch": -1})
    assert (left["error_code"], left["member_epoch"]) == (0, -1)

    removed = wire.call("OffsetDelete", 0, {"group_id": group, "topics": [
        {"name": name, "partitions": [{"partition_index": 1}]}]})
    assert removed["error_code"] == 0
    gone = wire.call("DeleteGroups", 2, {"groups_names": [group]})
    assert gone["results"] == [{"group_id": group, "error_code": 0}]


def test_transactions_are_described_and_listed(wire: Wire) -> None:
    name, txn = "lazyconv-apis-txn", "lazyconv-apis-tx"
    _create_topic(wire, name, 1)
    _until(lambda: wire.call("FindCoordinator", 6, {"key_type": 1, "coordinator_keys": [txn]})
           ["coordinators"][0]["error_code"] == 0, "the transaction coordinator")
    producer = _until(lambda: (lambda r: r if r["error_code"] == 0 else None)(
        wire.call("InitProducerId", 5, {"transactional_id": txn, "transaction_timeout_ms": 60000})),
        "a transactional producer id")
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    added = wire.call("AddPartitionsToTxn", 3, {
        "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": name, "partitions": [0]}]})
    assert added["results_by_topic_v3_and_below"] == [{"name": name, "results_by_partition": [
        {"partition_index": 0, "partition_error_code": 0}]}]

    (state,) = wire.call("DescribeTransactions", 0, {"transactional_ids": [txn]})["transaction_states"]
    assert (state["error_code"], state["transaction_state"], state["producer_id"]) == (0, "Ongoing", pid)
    assert state["topics"] == [{"topic": name, "partitions": [0]}]
    listed = wire.call("ListTransactions", 1, {"state_filters": ["Ongoing"], "duration_filter": -1})
    assert [(t["transactional_id"], t["producer_id"], t["transaction_state"])
            for t in listed["transaction_states"]] == [(txn, pid, "Ongoing")]

    ended = wire.call("EndTxn", 3, {"transactional_id": txn, "producer_id": pid,
                                    "producer_epoch": epoch, "committed": False})
    assert ended["error_code"] == 0
    _until(lambda: wire.call("DescribeTransactions", 0, {"transactional_ids": [txn]})
           ["transaction_states"][0]["transaction_state"] == "CompleteAbort", "the abort")


def test_acls_client_quotas_and_scram_credentials(wire: Wire) -> None:
    acl = {"resource_type": 2, "resource_name": "lazyconv-acl", "resource_pattern_type": 3,
           "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    created = wire.call("CreateAcls", 3, {"creations": [acl]})
    assert [r["error_code"] for r in created["results"]] == [0]
    acl_filter = {"resource_type_filter": 2, "resource_name_filter": "lazyconv-acl",
                  "pattern_type_filter": 3, "principal_filter": "User:alice", "host_filter": None,
                  "operation": 1, "permission_type": 1}

    def described() -> list[tuple[Any, ...]]:
        answer = wire.call("DescribeAcls", 3, acl_filter)
        return [(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"],
                 a["host"], a["operation"], a["permission_type"])
                for r in answer["resources"] for a in r["acls"]]

    assert _until(described, "the ACL") == [(2, "lazyconv-acl", 3, "User:alice", "*", 3, 3)]
    deleted = wire.call("DeleteAcls", 3, {"filters": [acl_filter]})
    (matched,) = deleted["filter_results"]
    assert [(m["principal"], m["operation"]) for m in matched["matching_acls"]] == [("User:alice", 3)]

    entity = [{"entity_type": "client-id", "entity_name": "lazyconv-quota"}]
    # request_percentage is a double quota (byte rates must be whole numbers)
    altered = wire.call("AlterClientQuotas", 1, {"entries": [{"entity": entity, "ops": [
        {"key": "request_percentage", "value": 12.75, "remove": False}]}]})
    assert [(e["error_code"], e["error_message"]) for e in altered["entries"]] == [(0, None)]

    def quotas() -> list[tuple[str, float]]:
        answer = wire.call("DescribeClientQuotas", 1, {"components": [
            {"entity_type": "client-id", "match_type": 0, "match": "lazyconv-quota"}], "strict": True})
        return [(v["key"], v["value"]) for e in answer["entries"] or [] for v in e["values"]]

    assert _until(quotas, "the quota") == [("request_percentage", 12.75)]  # a float64, exactly

    upsert = {"name": "alice", "mechanism": 1, "iterations": 8192, "salt": os.urandom(16),
              "salted_password": os.urandom(32)}
    scram = wire.call("AlterUserScramCredentials", 0, {"deletions": [], "upsertions": [upsert]})
    assert scram["results"] == [{"user": "alice", "error_code": 0, "error_message": None}]

    def credentials() -> list[tuple[int, int]]:
        answer = wire.call("DescribeUserScramCredentials", 0, {"users": [{"name": "alice"}]})
        (result,) = answer["results"]
        return [(c["mechanism"], c["iterations"]) for c in result["credential_infos"]]

    assert _until(credentials, "the SCRAM credential") == [(1, 8192)]  # 1: SCRAM-SHA-256
