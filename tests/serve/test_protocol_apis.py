"""The non-Fetch APIs the server speaks, cross-checked with kafka-python's generated codecs
(built from Kafka's own JSON schemas): our responses decode there, its requests decode here."""

from __future__ import annotations

import pytest

from lazyconv.errors import ProtocolError
from lazyconv.protocol import (
    _api_versions as api_versions,
)
from lazyconv.protocol import (
    _find_coordinator as find_coordinator,
)
from lazyconv.protocol import (
    _init_producer_id as init_producer_id,
)
from lazyconv.protocol import (
    _list_offsets as list_offsets,
)
from lazyconv.protocol import (
    _metadata as metadata,
)
from lazyconv.protocol import (
    _produce as produce,
)
from lazyconv.records import RecordsBuilder

kp_metadata = pytest.importorskip("kafka.protocol.metadata", reason="needs the dev extra: pip install -e '.[dev]'")
kp_consumer = pytest.importorskip("kafka.protocol.consumer", reason="needs the dev extra: pip install -e '.[dev]'")
kp_producer = pytest.importorskip("kafka.protocol.producer", reason="needs the dev extra: pip install -e '.[dev]'")


@pytest.mark.parametrize("version", range(api_versions.MIN_VERSION, api_versions.MAX_VERSION + 1))
def test_api_versions(version):
    keys = [{"api_key": 1, "min_version": 0, "max_version": 12}, {"api_key": 18, "min_version": 0, "max_version": 4}]
    body = api_versions.encode_response(version, {"error_code": 0, "api_keys": keys, "throttle_time_ms": 7})
    decoded = kp_metadata.ApiVersionsResponse.decode(body, version=version).to_dict()
    assert [(k["api_key"], k["min_version"], k["max_version"]) for k in decoded["api_keys"]] == [(1, 0, 12), (18, 0, 4)]
    assert decoded.get("throttle_time_ms") == (7 if version >= 1 else None)
    request = kp_metadata.ApiVersionsRequest(client_software_name="kp", client_software_version="3",
                                             version=version).encode(version=version)
    ours = api_versions.decode_request(version, request)
    if version >= 3:
        assert ours == {"client_software_name": "kp", "client_software_version": "3"}


def test_api_versions_fallback_answer_is_v0():
    body = api_versions.unsupported_version_response([{"api_key": 18, "min_version": 0, "max_version": 4}])
    decoded = kp_metadata.ApiVersionsResponse.decode(body, version=0).to_dict()
    assert decoded["error_code"] == 35 and decoded["api_keys"][0]["max_version"] == 4


@pytest.mark.parametrize("version", range(metadata.MIN_VERSION, metadata.MAX_VERSION + 1))
def test_metadata(version):
    body = metadata.encode_response(version, {
        "throttle_time_ms": 3, "cluster_id": "cid", "controller_id": 1,
        "brokers": [{"node_id": 0, "host": "h0", "port": 9092}, {"node_id": 1, "host": "h1", "port": 9093}],
        "topics": [
            {"error_code": 0, "name": "t", "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 4,
                 "replica_nodes": [1], "isr_nodes": [1]}]},
            {"error_code": 3, "name": "missing", "partitions": []},
        ],
    })
    decoded = kp_metadata.MetadataResponse.decode(body, version=version).to_dict()
    assert [(b["node_id"], b["host"], b["port"]) for b in decoded["brokers"]] == [(0, "h0", 9092), (1, "h1", 9093)]
    assert [(t["name"], t["error_code"]) for t in decoded["topics"]] == [("t", 0), ("missing", 3)]
    part = decoded["topics"][0]["partitions"][0]
    assert (part["partition_index"], part["leader_id"], part["replica_nodes"], part["isr_nodes"]) == (0, 1, [1], [1])
    if version >= 1:
        assert decoded["controller_id"] == 1
    if version >= 2:
        assert decoded["cluster_id"] == "cid"
    if version >= 7:
        assert part["leader_epoch"] == 4

    topics = [kp_metadata.MetadataRequest.MetadataRequestTopic(name="t", version=version)]
    request = kp_metadata.MetadataRequest(topics=topics, allow_auto_topic_creation=False, version=version)
    ours = metadata.decode_request(version, request.encode(version=version))
    assert [t["name"] for t in ours["topics"]] == ["t"]
    everything = kp_metadata.MetadataRequest(topics=None if version >= 1 else [], version=version)
    assert metadata.decode_request(version, everything.encode(version=version))["topics"] is None


@pytest.mark.parametrize("version", range(list_offsets.MIN_VERSION, list_offsets.MAX_VERSION + 1))
def test_list_offsets(version):
    body = list_offsets.encode_response(version, {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 2, "error_code": 0, "old_style_offsets": [42], "timestamp": -1, "offset": 42,
         "leader_epoch": 0}]}]})
    decoded = kp_consumer.ListOffsetsResponse.decode(body, version=version).to_dict()
    part = decoded["topics"][0]["partitions"][0]
    assert part["partition_index"] == 2
    assert (part["old_style_offsets"] if version == 0 else part["offset"]) == ([42] if version == 0 else 42)

    req_cls = kp_consumer.ListOffsetsRequest
    topic_cls = req_cls.ListOffsetsTopic
    part_cls = topic_cls.ListOffsetsPartition
    request = req_cls(replica_id=-1, topics=[topic_cls(name="t", partitions=[
        part_cls(partition_index=2, timestamp=-2, max_num_offsets=1, version=version)], version=version)],
        version=version)
    ours = list_offsets.decode_request(version, request.encode(version=version))
    assert ours["topics"][0]["name"] == "t"
    assert ours["topics"][0]["partitions"][0]["partition_index"] == 2
    assert ours["topics"][0]["partitions"][0]["timestamp"] == -2


@pytest.mark.parametrize("version", range(find_coordinator.MIN_VERSION, find_coordinator.MAX_VERSION + 1))
def test_find_coordinator(version):
    if version >= 4:  # batched keys (KIP-699)
        body = find_coordinator.encode_response(version, {"coordinators": [
            {"key": "g1", "node_id": 3, "host": "h", "port": 9, "error_code": 0},
            {"key": "g2", "node_id": 3, "host": "h", "port": 9, "error_code": 0}]})
        decoded = kp_metadata.FindCoordinatorResponse.decode(body, version=version).to_dict()
        assert [(c["key"], c["node_id"], c["host"], c["port"]) for c in decoded["coordinators"]] == [
            ("g1", 3, "h", 9), ("g2", 3, "h", 9)]
        request = kp_metadata.FindCoordinatorRequest(coordinator_keys=["g1", "g2"], key_type=0,
                                                     version=version)
        ours = find_coordinator.decode_request(version, request.encode(version=version))
        assert ours["coordinator_keys"] == ["g1", "g2"]
        return
    body = find_coordinator.encode_response(version, {"error_code": 0, "node_id": 3, "host": "h", "port": 9})
    decoded = kp_metadata.FindCoordinatorResponse.decode(body, version=version).to_dict()
    assert (decoded["node_id"], decoded["host"], decoded["port"]) == (3, "h", 9)
    request = kp_metadata.FindCoordinatorRequest(key="group", key_type=0, version=version)
    assert find_coordinator.decode_request(version, request.encode(version=version))["key"] == "group"


@pytest.mark.parametrize("version", range(produce.MIN_VERSION, produce.MAX_VERSION + 1))
def test_produce(version):
    builder = RecordsBuilder(2 if version >= 3 else 1 if version == 2 else 0)
    builder.append(offset=0, timestamp=1, key=b"k", value=b"v")
    records = builder.build()
    req = kp_producer.ProduceRequest
    topic_cls = req.TopicProduceData
    part_cls = topic_cls.PartitionProduceData
    request = req(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[topic_cls(
        name="t", partition_data=[part_cls(index=1, records=records, version=version)], version=version)],
        version=version)
    ours = produce.decode_request(version, request.encode(version=version))
    assert ours["acks"] == 1 and ours["topic_data"][0]["name"] == "t"
    assert ours["topic_data"][0]["partition_data"][0] == {"index": 1, "records": records}

    body = produce.encode_response(version, {"throttle_time_ms": 5, "responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 0, "base_offset": 77, "log_append_time_ms": -1, "log_start_offset": 0}]}]})
    decoded = kp_producer.ProduceResponse.decode(body, version=version).to_dict()
    part = decoded["responses"][0]["partition_responses"][0]
    assert (part["index"], part["error_code"], part["base_offset"]) == (1, 0, 77)
    assert decoded.get("throttle_time_ms") == (5 if version >= 1 else None)


@pytest.mark.parametrize("version", range(init_producer_id.MIN_VERSION, init_producer_id.MAX_VERSION + 1))
def test_init_producer_id(version):
    request = kp_producer.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                version=version)
    ours = init_producer_id.decode_request(version, request.encode(version=version))
    assert ours["transactional_id"] is None and ours["transaction_timeout_ms"] == 60000
    body = init_producer_id.encode_response(version, {"throttle_time_ms": 0, "error_code": 0,
                                                      "producer_id": 1234, "producer_epoch": 0})
    decoded = kp_producer.InitProducerIdResponse.decode(body, version=version).to_dict()
    assert (decoded["producer_id"], decoded["producer_epoch"]) == (1234, 0)


def test_truncated_request_raises_protocol_error_with_position():
    with pytest.raises(ProtocolError) as info:
        metadata.decode_request(1, b"\x00\x00\x00\x02\x00\x01t")
    assert info.value.position is not None
