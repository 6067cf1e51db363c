"""error_response: the answer refusing any declared request with one error code, mirroring the
request as Kafka's ``getErrorResponse`` does (a result per topic, partition, group, resource...)."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS, ApiSpec
from lazyconv.protocol._error_response import error_response
from lazyconv.protocol._schema import ArrayOf, Struct
from tests.protocol.schema_values import every_field_set

CODE = 35
# Kafka's own answer has no code to carry below these versions: DescribeLogDirs' ErrorCode is v3+
NO_CODE = {("DescribeLogDirs", 1), ("DescribeLogDirs", 2)}


def _codes(struct: Struct, value: dict[str, Any], version: int) -> list[int]:
    out: list[int] = []
    for f in struct.fields:
        if not f.present_in(version):
            continue
        item = value.get(f.name)
        if f.name == "error_code" or f.name.endswith("_error_code"):
            out.append(item)
        elif isinstance(f.type, ArrayOf) and isinstance(f.type.element, Struct):
            for element in item or []:
                out += _codes(f.type.element, element, version)
        elif isinstance(f.type, Struct) and item:
            out += _codes(f.type, item, version)
    return out


VERSIONS = [(spec, version) for spec in KAFKA_APIS
            for version in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize(("spec", "version"), VERSIONS,
                         ids=[f"{spec.name}-v{version}" for spec, version in VERSIONS])
def test_every_request_is_refused_with_the_code_everywhere(spec: ApiSpec, version: int) -> None:
    request = every_field_set(spec.request, version)
    body = error_response(spec, version, request, CODE)
    decoded = spec.decode_response(version, spec.encode_response(version, body))
    codes = _codes(spec.response, decoded, version)
    if (spec.name, version) in NO_CODE:
        assert codes == []
    else:
        assert codes and set(codes) == {CODE}, (spec.name, version, decoded)


def test_results_mirror_what_the_request_named() -> None:
    produce = KAFKA_API_BY_KEY[0]
    answer = error_response(produce, 9, {"topic_data": [
        {"name": "a", "partition_data": [{"index": 0}, {"index": 3}]},
        {"name": "b", "partition_data": [{"index": 1}]}]}, 6)
    assert [(t["name"], [(p["index"], p["error_code"]) for p in t["partition_responses"]])
            for t in answer["responses"]] == [("a", [(0, 6), (3, 6)]), ("b", [(1, 6)])]
    fetch = KAFKA_API_BY_KEY[1]
    answer = error_response(fetch, 4, {"topics": [{"topic": "t", "partitions": [
        {"partition": 2}]}]}, 6)
    assert answer["responses"][0]["topic"] == "t"
    assert answer["responses"][0]["partitions"][0]["partition_index"] == 2
    # strings named by the request: DescribeGroups' groups, DeleteGroups' names
    answer = error_response(KAFKA_API_BY_KEY[15], 6, {"groups": ["g1", "g2"]}, 15)
    assert [(g["group_id"], g["error_code"]) for g in answer["groups"]] == [("g1", 15), ("g2", 15)]
    answer = error_response(KAFKA_API_BY_KEY[42], 2, {"groups_names": ["g"]}, 15)
    assert answer["results"] == [{"group_id": "g", "error_code": 15}]
    # two request arrays answered by one list; an array inside another flattened
    answer = error_response(KAFKA_API_BY_KEY[51], 0, {"deletions": [{"name": "u1"}],
                                                      "upsertions": [{"name": "u2"}]}, 35)
    assert [r["user"] for r in answer["results"]] == ["u1", "u2"]
    answer = error_response(KAFKA_API_BY_KEY[34], 2, {"dirs": [
        {"path": "/a", "topics": [{"name": "t", "partitions": [0, 1]}]},
        {"path": "/b", "topics": [{"name": "u", "partitions": [2]}]}]}, 35)
    assert [(r["topic_name"], [p["partition_index"] for p in r["partitions"]])
            for r in answer["results"]] == [("t", [0, 1]), ("u", [2])]
    # config resources keep their type and name
    answer = error_response(KAFKA_API_BY_KEY[32], 4, {"resources": [
        {"resource_type": 4, "resource_name": "1"}]}, 35, message="not here")
    assert answer["results"] == [{"error_code": 35, "error_message": "not here",
                                  "resource_type": 4, "resource_name": "1", "configs": []}]


def test_a_listing_stays_empty_and_the_top_level_code_is_set() -> None:
    answer = error_response(KAFKA_API_BY_KEY[29], 3, {"resource_type_filter": 2}, 35)
    assert answer["error_code"] == 35 and answer["resources"] == []
    answer = error_response(KAFKA_API_BY_KEY[16], 5, None, 15)
    assert answer == {"error_code": 15, "groups": []}



def _sent(spec: ApiSpec, version: int, request: dict[str, Any], code: int) -> dict[str, Any]:
    """error_response as a client reads it (encoded and decoded: defaults filled in)."""
    body = error_response(spec, version, request, code)
    return spec.decode_response(version, spec.encode_response(version, body))


def test_partition_results_carry_kafka_s_unknown_values_not_the_request_s() -> None:
    """The entries of the partition-leader APIs hold what Kafka's ``getErrorResponse`` sets, as
    Kafka 4.0.1 and 3.9.0 answered an unknown topic (seen live): OffsetForLeaderEpoch leader
    epoch and end offset -1 (the request's leader epoch was copied), ListOffsets v1+ timestamp
    and offset -1 (the request's timestamp was copied), DeleteRecords low watermark -1 (was 0);
    DescribeProducers no error message (``getErrorResponse`` sets none)."""
    epochs = _sent(KAFKA_API_BY_KEY[23], 4, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 7,
                                       "leader_epoch": 5}]}]}, 3)
    assert epochs["topics"] == [{"topic": "t", "partitions": [
        {"error_code": 3, "partition": 0, "leader_epoch": -1, "end_offset": -1}]}]
    for version in (1, 4, 7, 10):
        offsets = _sent(KAFKA_API_BY_KEY[2], version, {"replica_id": -1, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": 3,
                                          "timestamp": 5}]}]}, 3)
        part = offsets["topics"][0]["partitions"][0]
        assert (part["error_code"], part["timestamp"], part["offset"], part["leader_epoch"]) == \
            (3, -1, -1, -1), version
    offsets = _sent(KAFKA_API_BY_KEY[2], 0, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": 5,
                                      "max_num_offsets": 1}]}]}, 3)
    assert offsets["topics"][0]["partitions"][0]["old_style_offsets"] == []
    deleted = _sent(KAFKA_API_BY_KEY[21], 2, {"topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 3}]}], "timeout_ms": 1}, 3)
    assert deleted["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "low_watermark": -1, "error_code": 3}]}]
    producers = _sent(KAFKA_API_BY_KEY[61], 0, {"topics": [
        {"name": "t", "partition_indexes": [0]}]}, 3)
    assert producers["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 3, "error_message": None, "active_producers": []}]}]
