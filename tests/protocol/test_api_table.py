"""The one protocol table: each API declares its versions and schemas once; everything derives."""

from __future__ import annotations

import uuid

import pytest

from lazyconv.errors import ProtocolError
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._fetch import FetchResponse
from lazyconv.protocol._kafka_apis import KAFKA_API_BY_KEY, KAFKA_APIS
from lazyconv.protocol._registry import ALL_APIS, API_BY_KEY, api_versions_table

# (key, min, max, first flexible) the issue asks for, with Kafka's flexibleVersions
EXPECTED = {
    0: (0, 11, 9), 1: (0, 17, 12), 2: (0, 8, 6), 3: (0, 12, 9), 8: (0, 8, 8), 9: (0, 8, 6),
    10: (0, 4, 3), 11: (0, 9, 6), 12: (0, 4, 4), 13: (0, 5, 4), 14: (0, 5, 4), 15: (0, 5, 5),
    16: (0, 5, 3), 18: (0, 4, 3), 22: (0, 5, 2), 24: (0, 3, 3), 25: (0, 3, 3), 26: (0, 3, 3),
    28: (0, 3, 3),
}


def test_versions_table_is_derived_from_the_declarations() -> None:
    table = api_versions_table()
    assert [row["api_key"] for row in table] == sorted(EXPECTED)
    for row in table:
        spec = API_BY_KEY[row["api_key"]]
        assert (row["min_version"], row["max_version"]) == (spec.min_version, spec.max_version)
        assert (spec.min_version, spec.max_version, spec.first_flexible) == EXPECTED[spec.key]
    capped = {row["api_key"]: row["max_version"] for row in api_versions_table({1: 4})}
    assert capped[1] == 4 and capped[3] == 12


# The first version whose client throttles itself (KIP-219): Kafka 4.0.1's
# <Api>Response.shouldClientThrottle, "version >= N"; the APIs answering true at every version,
# and those answering false (AbstractResponse's default), have none below which a broker holds.
KAFKA_CLIENT_THROTTLED_FROM = {
    "Produce": 6, "Fetch": 8, "ListOffsets": 3, "Metadata": 6, "OffsetCommit": 4,
    "OffsetFetch": 4, "FindCoordinator": 2, "JoinGroup": 3, "Heartbeat": 2, "LeaveGroup": 2,
    "SyncGroup": 2, "DescribeGroups": 2, "ListGroups": 2, "ApiVersions": 2, "CreateTopics": 3,
    "DeleteTopics": 2, "DeleteRecords": 1, "InitProducerId": 1, "AddPartitionsToTxn": 1,
    "AddOffsetsToTxn": 1, "EndTxn": 1, "TxnOffsetCommit": 1, "DescribeAcls": 1, "CreateAcls": 1,
    "DeleteAcls": 1, "DescribeConfigs": 2, "AlterConfigs": 1, "AlterReplicaLogDirs": 1,
    "DescribeLogDirs": 1, "CreatePartitions": 1, "CreateDelegationToken": 1,
    "RenewDelegationToken": 1, "ExpireDelegationToken": 1, "DescribeDelegationToken": 1,
    "DeleteGroups": 1,
}


def test_each_api_declares_its_first_client_throttled_version_as_kafka() -> None:
    """The KIP-219 versions are declared with each API (ApiSpec.first_client_throttled), the
    same in serve's declaration and in the wider one for Kafka's versions."""
    assert {spec.name: spec.first_client_throttled for spec in KAFKA_APIS
            if spec.first_client_throttled} == KAFKA_CLIENT_THROTTLED_FROM
    for spec in ALL_APIS:
        assert spec.first_client_throttled == KAFKA_API_BY_KEY[spec.key].first_client_throttled
    fetch = KAFKA_API_BY_KEY[1]
    assert fetch.holds_throttled_answers(7) and not fetch.holds_throttled_answers(8)
    assert not KAFKA_API_BY_KEY[60].holds_throttled_answers(0)  # DescribeCluster


@pytest.mark.parametrize("spec", ALL_APIS, ids=lambda s: s.name)
def test_header_versions_follow_flexibility(spec) -> None:
    for version in range(spec.min_version, spec.max_version + 1):
        flexible = spec.first_flexible is not None and version >= spec.first_flexible
        assert spec.request_header_version(version) == (2 if flexible else 1)
        expected_response_header = 0 if spec.name == "ApiVersions" else (1 if flexible else 0)
        assert spec.response_header_version(version) == expected_response_header


def test_encoder_rejects_a_misspelt_field_instead_of_sending_its_default() -> None:
    partition = {"partition_index": 0, "error_code": 0, "high_water_mark": 10, "records": b""}
    with pytest.raises(ProtocolError, match="has no field 'high_water_mark'"):
        FetchResponse(4, {"responses": [{"topic": "t", "partitions": [partition]}]})
    with pytest.raises(ProtocolError, match=r"MetadataResponse\.topics\[0\].*'nmae'"):
        metadata.encode_response(1, {"brokers": [], "topics": [{"nmae": "t", "partitions": []}]})


def test_bookkeeping_keys_pass_through() -> None:
    decoded = metadata.SPEC.decode_response(9, metadata.encode_response(9, {"brokers": [], "topics": []}))
    decoded["_unknown_tagged_fields"] = {}
    assert metadata.encode_response(9, decoded) == metadata.encode_response(9, {"brokers": [], "topics": []})


def test_out_of_range_versions_are_refused() -> None:
    with pytest.raises(ProtocolError, match="Metadata version 13 is not supported"):
        metadata.encode_response(13, {})


def test_strict_drops_a_request_topic_id_before_metadata_v10_as_kafka_does() -> None:
    # MetadataRequest.json marks TopicId ignorable: Kafka's serializer drops it below v10.
    body = {"topics": [{"topic_id": uuid.UUID(int=5), "name": "t"}]}
    assert metadata.SPEC.encode_request(9, body, strict=True) == metadata.SPEC.encode_request(
        9, {"topics": [{"name": "t"}]})
