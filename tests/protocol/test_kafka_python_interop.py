"""Cross-check against kafka-python: its Fetch classes read our responses, we read its requests.

kafka-python 3.x keeps the schema-driven classes in ``kafka.protocol.consumer.fetch`` (every
version 0-18) and the older hand-written structs in ``kafka.protocol.old.fetch`` (v0-v11).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lazyconv.protocol import FetchRequest, FetchResponse, error_partition, readable_magic

kp_fetch = pytest.importorskip("kafka.protocol.consumer.fetch", reason="needs the dev extra: pip install -e '.[dev]'")
kp_old = pytest.importorskip("kafka.protocol.old.fetch", reason="needs the dev extra: pip install -e '.[dev]'")
kp_records = pytest.importorskip("kafka.record.memory_records", reason="needs the dev extra: pip install -e '.[dev]'")

VERSIONS = range(0, 18)
TOPIC_A = uuid.UUID("11111111-2222-3333-4444-555555555555")
TOPIC_B = uuid.UUID("66666666-7777-8888-9999-aaaaaaaaaaaa")


def build_records(magic: int, base_offset: int, count: int, compression: int = 0) -> bytes:
    builder = kp_records.MemoryRecordsBuilder(magic, compression, 1 << 20, offset=base_offset)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i if magic else None,
                       key=f"k{i}".encode(), value=f"value-{base_offset + i}".encode())
    builder.close()
    return bytes(builder.buffer())


def read_records(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    records = kp_records.MemoryRecords(data)
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        out.extend((r.offset, r.key, r.value) for r in batch)


def response_body(version: int) -> dict[str, Any]:
    magic = readable_magic(version)
    gzip = 1
    p0 = {
        "partition_index": 0, "error_code": 0, "high_watermark": 100, "last_stable_offset": 90,
        "log_start_offset": 3, "aborted_transactions": [{"producer_id": 7, "first_offset": 40}],
        "preferred_read_replica": 2 if version >= 11 else -1,
        "records": build_records(magic, 10, 3),
        "current_leader": {"leader_id": 4, "leader_epoch": 9},
        "diverging_epoch": {"epoch": 5, "end_offset": 77},
    }
    p1 = error_partition(1, 76)
    p2 = {
        "partition_index": 2, "error_code": 0, "high_watermark": 12, "last_stable_offset": 12,
        "log_start_offset": 0, "aborted_transactions": None,
        "records": build_records(magic, 0, 4, gzip) + build_records(magic, 4, 2),
        "snapshot_id": {"end_offset": 500, "epoch": 8},
    }
    p3 = {"partition_index": 3, "error_code": 1, "high_watermark": 5, "records": b""}
    return {
        "throttle_time_ms": 17,
        "error_code": 0,
        "session_id": 123 if version >= 7 else 0,
        "responses": [
            {"topic": "topic-a", "topic_id": TOPIC_A, "partitions": [p0, p1]},
            {"topic": "topic-b", "topic_id": TOPIC_B, "partitions": [p2, p3]},
        ],
        "node_endpoints": [{"node_id": 4, "host": "broker-4", "port": 9094, "rack": "r1"},
                           {"node_id": 2, "host": "broker-2", "port": 9092, "rack": None}],
    }


def expected_partition(version: int, p: dict[str, Any]) -> dict[str, Any]:
    exp = {"partition_index": p["partition_index"], "error_code": p["error_code"],
           "high_watermark": p["high_watermark"]}
    if version >= 4:
        exp["last_stable_offset"] = p.get("last_stable_offset", -1)
        aborted = p.get("aborted_transactions", [])
        exp["aborted_transactions"] = None if aborted is None else list(aborted)
    if version >= 5:
        exp["log_start_offset"] = p.get("log_start_offset", -1)
    if version >= 11:
        exp["preferred_read_replica"] = p.get("preferred_read_replica", -1)
    if version >= 12:
        for name in ("diverging_epoch", "current_leader", "snapshot_id"):
            exp[name] = p.get(name)  # kafka-python reports a tag that was not sent as None
    exp["records"] = p["records"]
    return exp


def kp_to_plain(obj: Any) -> Any:
    return obj.to_dict(json=False) if hasattr(obj, "to_dict") else obj


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_decodes_our_response(version: int) -> None:
    body = response_body(version)
    data = FetchResponse(version, body).to_bytes(correlation_id=99)
    decoded = kp_fetch.FetchResponse.decode(data, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 99
    plain = decoded.to_dict(json=False)
    if version >= 1:
        assert plain["throttle_time_ms"] == 17
    if version >= 7:
        assert plain["error_code"] == 0 and plain["session_id"] == 123
    if version >= 16:
        assert plain["node_endpoints"] == body["node_endpoints"]
    assert len(plain["responses"]) == 2
    for topic_in, topic_out in zip(body["responses"], plain["responses"], strict=True):
        if version >= 13:
            assert topic_out["topic_id"] == topic_in["topic_id"]
        else:
            assert topic_out["topic"] == topic_in["topic"]
        assert len(topic_out["partitions"]) == len(topic_in["partitions"])
        for p_in, p_out in zip(topic_in["partitions"], topic_out["partitions"], strict=True):
            exp = expected_partition(version, p_in)
            got = {k: p_out[k] for k in exp}
            assert got == exp
            if p_in["records"]:
                assert read_records(p_out["records"]) == read_records(p_in["records"])


@pytest.mark.parametrize("version", range(0, 12))
def test_kafka_python_old_structs_decode_our_response(version: int) -> None:
    body = response_body(version)
    # The old structs' to_object() cannot represent a null array (Kafka's aborted transactions
    # outside read_committed, and of error partitions): send empty ones here.
    for topic in body["responses"]:
        for partition in topic["partitions"]:
            if partition.get("aborted_transactions") is None:
                partition["aborted_transactions"] = []
    data = FetchResponse(version, body).to_bytes(correlation_id=1)
    cls = getattr(kp_old, f"FetchResponse_v{version}")
    obj = cls.decode(data[8:]).to_object()  # size and v0 header stripped
    partitions = [p for t in obj["responses"] for p in t["partitions"]]
    expected = [p for t in body["responses"] for p in t["partitions"]]
    assert [p["partition_index"] for p in partitions] == [0, 1, 2, 3]
    for p_out, p_in in zip(partitions, expected, strict=True):
        assert p_out["error_code"] == p_in["error_code"]
        assert p_out["high_watermark"] == p_in["high_watermark"]
        assert p_out["records"] == p_in["records"]


def test_records_in_each_version_are_readable_by_kafka_python() -> None:
    for version in VERSIONS:
        body = response_body(version)
        data = FetchResponse(version, body).to_bytes(correlation_id=1)
        decoded = kp_fetch.FetchResponse.decode(data, version=version, header=True, framed=True)
        records = decoded.responses[1].partitions[0].records
        assert [r[0] for r in read_records(records)] == [0, 1, 2, 3, 4, 5]
        assert read_records(records)[5][2] == b"value-5"


def test_our_decoder_reads_our_response_identically() -> None:
    for version in VERSIONS:
        body = response_body(version)
        data = FetchResponse(version, body).to_bytes(correlation_id=5)
        header, decoded = FetchResponse.decode_framed(version, data)
        assert header["correlation_id"] == 5
        for topic_in, topic_out in zip(body["responses"], decoded["responses"], strict=True):
            for p_in, p_out in zip(topic_in["partitions"], topic_out["partitions"], strict=True):
                exp = expected_partition(version, p_in)
                for tag in ("diverging_epoch", "current_leader", "snapshot_id"):
                    if tag in exp and exp[tag] is None:
                        exp[tag] = p_out[tag]  # decoded as the default struct
                assert {k: p_out[k] for k in exp} == exp


# -- requests ------------------------------------------------------------------------------


def kp_request(version: int) -> Any:
    FetchTopic = kp_fetch.FetchRequest.FetchTopic
    FetchPartition = FetchTopic.FetchPartition
    ForgottenTopic = kp_fetch.FetchRequest.ForgottenTopic
    partitions = [
        FetchPartition(partition=p, current_leader_epoch=3 if version >= 9 else -1,
                       fetch_offset=1000 + p, last_fetched_epoch=2 if version >= 12 else -1,
                       log_start_offset=10 if version >= 5 else -1, partition_max_bytes=65536 * (p + 1),
                       **({"replica_directory_id": uuid.UUID(int=0xABC)} if version >= 17 else {}))
        for p in (0, 5)
    ]
    topic_kw = {"topic_id": TOPIC_A} if version >= 13 else {"topic": "topic-a"}
    forgotten_kw = {"topic_id": TOPIC_B} if version >= 13 else {"topic": "topic-b"}
    kwargs: dict[str, Any] = {
        "max_wait_ms": 500, "min_bytes": 1,
        "topics": [FetchTopic(partitions=partitions, **topic_kw)],
    }
    if version <= 14:
        kwargs["replica_id"] = -1
    if version >= 3:
        kwargs["max_bytes"] = 1 << 20
    if version >= 4:
        kwargs["isolation_level"] = 1
    if version >= 7:
        kwargs.update(session_id=42, session_epoch=3,
                      forgotten_topics_data=[ForgottenTopic(partitions=[1, 2], **forgotten_kw)])
    if version >= 11:
        kwargs["rack_id"] = "rack-1"
    if version >= 12:
        kwargs["cluster_id"] = "cluster-x"
    if version >= 15:
        # A follower's state (non-default). kafka-python also writes a *default* ReplicaState
        # tag, where Java compares with a default struct and omits it (tagged fields only when not default; we follow Java).
        kwargs["replica_state"] = kp_fetch.FetchRequest.ReplicaState(replica_id=1, replica_epoch=5)
    request = kp_fetch.FetchRequest(**kwargs)
    request.with_header(correlation_id=31, client_id="kp-client")
    return request


@pytest.mark.parametrize("version", VERSIONS)
def test_we_decode_kafka_python_requests(version: int) -> None:
    data = kp_request(version).encode(version=version, header=True, framed=True)
    header, body = FetchRequest.decode_framed(data)
    assert header["correlation_id"] == 31 and header["client_id"] == "kp-client"
    assert body["max_wait_ms"] == 500 and body["min_bytes"] == 1
    assert body["max_bytes"] == (1 << 20 if version >= 3 else 0x7FFFFFFF)
    assert body["isolation_level"] == (1 if version >= 4 else 0)
    topic = body["topics"][0]
    assert topic["topic_id" if version >= 13 else "topic"] == (TOPIC_A if version >= 13 else "topic-a")
    assert [p["partition"] for p in topic["partitions"]] == [0, 5]
    assert [p["fetch_offset"] for p in topic["partitions"]] == [1000, 1005]
    assert [p["partition_max_bytes"] for p in topic["partitions"]] == [65536, 393216]
    if version >= 5:
        assert topic["partitions"][0]["log_start_offset"] == 10
    if version >= 7:
        assert (body["session_id"], body["session_epoch"]) == (42, 3)
        assert body["forgotten_topics_data"][0]["partitions"] == [1, 2]
    if version >= 9:
        assert topic["partitions"][1]["current_leader_epoch"] == 3
    if version >= 11:
        assert body["rack_id"] == "rack-1"
    if version >= 12:
        assert body["cluster_id"] == "cluster-x"
        assert topic["partitions"][0]["last_fetched_epoch"] == 2
    if version >= 15:
        assert body["replica_state"] == {"replica_id": 1, "replica_epoch": 5}
    if version >= 17:
        assert topic["partitions"][0]["replica_directory_id"] == uuid.UUID(int=0xABC)


@pytest.mark.parametrize("version", VERSIONS)
def test_our_request_encoding_equals_kafka_python(version: int) -> None:
    kp = kp_request(version)
    expected = kp.encode(version=version, header=True, framed=True)
    _, body = FetchRequest.decode_framed(expected)
    assert FetchRequest.encode_framed(version, body, 31, "kp-client") == expected
    # and kafka-python reads what we encode
    again = kp_fetch.FetchRequest.decode(
        FetchRequest.encode(version, body), version=version
    )
    assert again.to_dict(json=False)["topics"][0]["partitions"][1]["fetch_offset"] == 1005
