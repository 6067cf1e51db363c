"""error_response: the answer refusing any declared request with one error code, mirroring the
request as Kafka's ``getErrorResponse`` does (a result per topic, partition, group, resource...)."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS, ApiSpec
from lazyconv.protocol._error_response import error_response
from lazyconv.protocol._schema import ArrayOf, Struct
from tests.protocol.schema_values import every_field_set, refused_requests

CODE = 35
# Kafka's own answer has no code to carry below these versions: DescribeLogDirs' ErrorCode is v3+
NO_CODE = {("DescribeLogDirs", 1), ("DescribeLogDirs", 2)}
# codes Kafka's getErrorResponse leaves at 0: CreateTopicsRequest sets no topic config error
NOT_SET_CODES = {"topic_config_error_code"}


def _codes(struct: Struct, value: dict[str, Any], version: int) -> list[int]:
    out: list[int] = []
    for f in struct.fields:
        if not f.present_in(version):
            continue
        item = value.get(f.name)
        if f.name in NOT_SET_CODES:
            assert item == 0, f.name
        elif f.name == "error_code" or f.name.endswith("_error_code"):
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


# -- Kafka's getErrorResponse, API by API --------------------------------------------------------
#
# What each request class's ``getErrorResponse(throttleTimeMs, e)`` (apache/kafka,
# clients/src/main/java/org/apache/kafka/common/requests/*Request.java, 3.9.0 and 4.0.1) builds,
# written as its setters: a function of the request (decoded), the version and the error code to
# the response fields it sets. A field it does not set keeps the response JSON's default, which
# encoding the body gives it here as in Kafka's generated classes. 4.0.1's answer; 3.9.0's at the
# versions only it serves (but Fetch's empty records).

Body = dict[str, Any]
# Errors.message() of the codes refused with here
KAFKA_MESSAGES = {35: "The version of API is not supported."}


def _each(items: list[Any] | None, build: Any) -> list[Any]:
    return [build(item) for item in items or []]


def _produce(r: Body, v: int, c: int) -> Body:
    # ProduceRequest: per partition (partitionSizes), INVALID_OFFSET / NO_TIMESTAMP, ApiError's
    # message (null for an exception with the error's own)
    return {"responses": _each(r["topic_data"], lambda t: {
        "name": t["name"], "partition_responses": _each(t["partition_data"], lambda p: {
            "index": p["index"], "error_code": c, "record_errors": [], "base_offset": -1,
            "log_append_time_ms": -1, "log_start_offset": -1, "error_message": None})})}


def _fetch(r: Body, v: int, c: int) -> Body:
    # FetchRequest, FetchResponse.partitionResponse: high watermark INVALID_HIGH_WATERMARK;
    # records MemoryRecords.EMPTY in 4.0.1 (3.9.0 leaves them null: at v0-3, which only 3.9.0
    # serves, lazyconv's are empty too, docs/differences.md); no topics from v13
    return {"error_code": c, "session_id": r.get("session_id", 0), "responses": [] if v >= 13 else
            _each(r["topics"], lambda t: {"topic": t["topic"], "partitions": _each(
                t["partitions"], lambda p: {"partition_index": p["partition"], "error_code": c,
                                            "high_watermark": -1, "records": b""})})}


def _list_offsets(r: Body, v: int, c: int) -> Body:
    # ListOffsetsRequest: v0 old-style offsets empty, else UNKNOWN_OFFSET / UNKNOWN_TIMESTAMP
    return {"topics": _each(r["topics"], lambda t: {"name": t["name"], "partitions": _each(
        t["partitions"], lambda p: {"partition_index": p["partition_index"], "error_code": c,
                                    **({"old_style_offsets": []} if v == 0 else
                                       {"offset": -1, "timestamp": -1})})})}


def _metadata(r: Body, v: int, c: int) -> Body:
    # MetadataRequest: a topic asked by id (null name) answered with the name ""; the top-level
    # code (v13+) in 4.0.1
    return {"error_code": c, "topics": _each(r["topics"], lambda t: {
        "name": "" if t["name"] is None else t["name"], "topic_id": t.get("topic_id"),
        "error_code": c, "is_internal": False, "partitions": []})}


def _partitions(topics: str, name: str, parts: str, index: str, **extra: Any) -> Any:
    """The answer naming the request's topics and partitions (the same field names), each
    partition with the code and ``extra``."""
    return lambda r, v, c: {topics: _each(r[topics], lambda t: {name: t[name], parts: _each(
        t[parts], lambda p: {index: p[index], "error_code": c, **extra})})}


def _offset_fetch(r: Body, v: int, c: int) -> Body:
    # OffsetFetchRequest: v0-1 per partition (INVALID_OFFSET, NO_METADATA ""), v2-7 the
    # top-level code only, v8+ per group (no partitions)
    if v < 2:
        return {"topics": _each(r["topics"], lambda t: {"name": t["name"], "partitions": _each(
            t["partition_indexes"], lambda p: {"partition_index": p, "committed_offset": -1,
                                               "metadata": "", "error_code": c})})}
    if v < 8:
        return {"error_code": c, "topics": []}
    return {"groups": _each(r["groups"], lambda g: {"group_id": g["group_id"], "error_code": c,
                                                    "topics": []})}


def _find_coordinator(r: Body, v: int, c: int) -> Body:
    # FindCoordinatorRequest, FindCoordinatorResponse.prepareOldResponse / prepareErrorResponse:
    # Node.noNode() (id -1, host "", port -1), the error's message
    m = KAFKA_MESSAGES[c]
    if v < 4:
        return {"error_code": c, "error_message": m, "node_id": -1, "host": "", "port": -1}
    return {"coordinators": _each(r["coordinator_keys"], lambda k: {
        "key": k, "error_code": c, "error_message": m, "node_id": -1, "host": "", "port": -1})}


def _join_group(r: Body, v: int, c: int) -> Body:
    # JoinGroupRequest: UNKNOWN_GENERATION_ID, UNKNOWN_MEMBER_ID "" (member id and leader),
    # protocol name "" (null from v7); the protocol type is not set (null)
    return {"error_code": c, "generation_id": -1, "protocol_name": None if v >= 7 else "",
            "leader": "", "member_id": "", "members": []}


def _describe_groups(r: Body, v: int, c: int) -> Body:
    # DescribeGroupsRequest, DescribeGroupsResponse.groupError: UNKNOWN_STATE,
    # UNKNOWN_PROTOCOL_TYPE, UNKNOWN_PROTOCOL (all ""), AUTHORIZED_OPERATIONS_OMITTED
    return {"groups": _each(r["groups"], lambda g: {
        "group_id": g, "error_code": c, "group_state": "", "protocol_type": "",
        "protocol_data": "", "members": [], "authorized_operations": -(1 << 31)})}


def _create_topics(r: Body, v: int, c: int) -> Body:
    # CreateTopicsRequest: name, code and ApiError's message only: partitions and replication
    # factor keep -1, the topic config error code 0
    return {"topics": _each(r["topics"], lambda t: {"name": t["name"], "error_code": c,
                                                    "error_message": None})}


def _delete_topics(r: Body, v: int, c: int) -> Body:
    # DeleteTopicsRequest.topics(): v6 names (null for a topic named by id) and ids, v0-5 names
    if v >= 6:
        return {"responses": _each(r["topics"], lambda t: {
            "name": t["name"], "topic_id": t["topic_id"], "error_code": c})}
    return {"responses": _each(r["topic_names"], lambda n: {"name": n, "error_code": c})}


def _add_partitions_to_txn(r: Body, v: int, c: int) -> Body:
    # AddPartitionsToTxnRequest: v0-3 per partition, v4+ the top-level code only
    if v >= 4:
        return {"error_code": c}
    return {"results_by_topic_v3_and_below": _each(r["v3_and_below_topics"], lambda t: {
        "name": t["name"], "results_by_partition": _each(t["partitions"], lambda p: {
            "partition_index": p, "partition_error_code": c})})}


def _write_txn_markers(r: Body, v: int, c: int) -> Body:
    # WriteTxnMarkersRequest: per producer id, topic and partition
    return {"markers": _each(r["markers"], lambda m: {
        "producer_id": m["producer_id"], "topics": _each(m["topics"], lambda t: {
            "name": t["name"], "partitions": _each(t["partition_indexes"], lambda p: {
                "partition_index": p, "error_code": c})})})}


def _resources(results: str, r_list: str, **extra: Any) -> Any:
    """Config resources answered with their type and name."""
    return lambda r, v, c: {results: _each(r[r_list], lambda x: {
        "resource_type": x["resource_type"], "resource_name": x["resource_name"],
        "error_code": c, **extra})}


def _alter_replica_log_dirs(r: Body, v: int, c: int) -> Body:
    # AlterReplicaLogDirsRequest: the topics of every dir, each partition
    return {"results": [{"topic_name": t["name"], "partitions": _each(t["partitions"], lambda p: {
        "partition_index": p, "error_code": c})} for d in r["dirs"] for t in d["topics"]]}


def _create_delegation_token(r: Body, v: int, c: int) -> Body:
    # CreateDelegationTokenRequest, CreateDelegationTokenResponse.prepareResponse:
    # KafkaPrincipal.ANONYMOUS as owner (and requester, v3+), timestamps -1, token id "", no hmac
    return {"error_code": c, "principal_type": "User", "principal_name": "ANONYMOUS",
            "token_requester_principal_type": "User", "token_requester_principal_name": "ANONYMOUS",
            "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1,
            "token_id": "", "hmac": b""}


def _elect_leaders(r: Body, v: int, c: int) -> Body:
    # ElectLeadersRequest: per partition named (none when all are asked: null)
    return {"error_code": c, "replica_election_results": _each(r["topic_partitions"], lambda t: {
        "topic": t["topic"], "partition_result": _each(t["partitions"], lambda p: {
            "partition_id": p, "error_code": c, "error_message": None})})}


def _alter_partition_reassignments(r: Body, v: int, c: int) -> Body:
    # AlterPartitionReassignmentsRequest: the top-level code and one per partition, ApiError's
    # message on each
    return {"error_code": c, "error_message": None, "responses": _each(r["topics"], lambda t: {
        "name": t["name"], "partitions": _each(t["partitions"], lambda p: {
            "partition_index": p["partition_index"], "error_code": c, "error_message": None})})}


def _list_partition_reassignments(r: Body, v: int, c: int) -> Body:
    # ListPartitionReassignmentsRequest: each partition asked, with no replicas (none when all
    # are asked: null)
    return {"error_code": c, "error_message": None, "topics": _each(r["topics"], lambda t: {
        "name": t["name"], "partitions": _each(t["partition_indexes"], lambda p: {
            "partition_index": p})})}


def _alter_client_quotas(r: Body, v: int, c: int) -> Body:
    # AlterClientQuotasRequest: each entry's entities as asked (a null name stays null), the
    # error's message
    return {"entries": _each(r["entries"], lambda e: {
        "error_code": c, "error_message": KAFKA_MESSAGES[c], "entity": _each(
        e["entity"], lambda x: {"entity_type": x["entity_type"], "entity_name": x["entity_name"]})})}


def _describe_user_scram_credentials(r: Body, v: int, c: int) -> Body:
    # DescribeUserScramCredentialsRequest: a result per user asked, without the user's name;
    # ApiError's message
    return {"error_code": c, "error_message": None, "results": _each(r["users"], lambda u: {
        "error_code": c, "error_message": None})}


def _alter_user_scram_credentials(r: Body, v: int, c: int) -> Body:
    # AlterUserScramCredentialsRequest: the users of deletions and upsertions, each once, sorted
    users = {x["name"] for x in r["deletions"]} | {x["name"] for x in r["upsertions"]}
    return {"results": [{"user": u, "error_code": c, "error_message": None}
                        for u in sorted(users)]}


def _describe_topic_partitions(r: Body, v: int, c: int) -> Body:
    # DescribeTopicPartitionsRequest: per topic, not internal, no partitions; no next cursor
    return {"topics": _each(r["topics"], lambda t: {"name": t["name"], "error_code": c,
                                                    "is_internal": False, "partitions": []})}


def _code(r: Body, v: int, c: int) -> Body:
    return {"error_code": c}


def _code_and_api_error_message(r: Body, v: int, c: int) -> Body:
    # ApiError.fromThrowable(e).message(): null for an exception with the error's own message
    return {"error_code": c, "error_message": None}


def _code_and_error_message(r: Body, v: int, c: int) -> Body:
    # Errors.message()
    return {"error_code": c, "error_message": KAFKA_MESSAGES[c]}


def _keyed(results: str, r_list: str, key: str, **extra: Any) -> Any:
    """A result per string of the request's list, the string as ``key``."""
    return lambda r, v, c: {results: _each(r[r_list], lambda k: {key: k, "error_code": c, **extra})}


KAFKA_ERROR_ANSWERS: dict[str, Any] = {
    "Produce": _produce,
    "Fetch": _fetch,
    "ListOffsets": _list_offsets,
    "Metadata": _metadata,
    # OffsetCommitRequest.getErrorResponse(data, error)
    "OffsetCommit": _partitions("topics", "name", "partitions", "partition_index"),
    "OffsetFetch": _offset_fetch,
    "FindCoordinator": _find_coordinator,
    "JoinGroup": _join_group,
    "Heartbeat": _code,  # HeartbeatRequest
    "LeaveGroup": _code,  # LeaveGroupRequest: the top-level code only (no members, v3+)
    # SyncGroupRequest: an empty assignment; protocol type and name not set (null)
    "SyncGroup": lambda r, v, c: {"error_code": c, "assignment": b""},
    "DescribeGroups": _describe_groups,
    "ListGroups": lambda r, v, c: {"error_code": c, "groups": []},  # ListGroupsRequest
    "SaslHandshake": _code,  # SaslHandshakeRequest
    # ApiVersionsRequest: with UNSUPPORTED_VERSION, ApiVersions' own versions (KIP-511)
    "ApiVersions": lambda r, v, c: {"error_code": c, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 4}] if c == 35 else []},
    "CreateTopics": _create_topics,
    "DeleteTopics": _delete_topics,
    # DeleteRecordsRequest: DeleteRecordsResponse.INVALID_LOW_WATERMARK
    "DeleteRecords": _partitions("topics", "name", "partitions", "partition_index",
                                 low_watermark=-1),
    # InitProducerIdRequest: RecordBatch.NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    "InitProducerId": lambda r, v, c: {"error_code": c, "producer_id": -1, "producer_epoch": -1},
    # OffsetsForLeaderEpochRequest: UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    "OffsetForLeaderEpoch": _partitions("topics", "topic", "partitions", "partition",
                                        leader_epoch=-1, end_offset=-1),
    "AddPartitionsToTxn": _add_partitions_to_txn,
    "AddOffsetsToTxn": _code,  # AddOffsetsToTxnRequest
    "EndTxn": _code,  # EndTxnRequest: producer id and epoch (v5+) not set (-1)
    "WriteTxnMarkers": _write_txn_markers,
    # TxnOffsetCommitRequest.getErrorResponseTopics
    "TxnOffsetCommit": _partitions("topics", "name", "partitions", "partition_index"),
    "DescribeAcls": _code_and_api_error_message,  # DescribeAclsRequest: no resources
    # CreateAclsRequest.aclResult, once per creation: ApiError's message
    "CreateAcls": lambda r, v, c: {"results": _each(r["creations"], lambda x: {
        "error_code": c, "error_message": None})},
    # DeleteAclsRequest: once per filter, no matching ACLs, ApiError's message
    "DeleteAcls": lambda r, v, c: {"filter_results": _each(r["filters"], lambda x: {
        "error_code": c, "error_message": None})},
    # DescribeConfigsRequest: the error's message
    "DescribeConfigs": lambda r, v, c: _resources("results", "resources",
                                                  error_message=KAFKA_MESSAGES[c])(r, v, c),
    # AlterConfigsRequest: ApiError's message
    "AlterConfigs": _resources("responses", "resources", error_message=None),
    "AlterReplicaLogDirs": _alter_replica_log_dirs,
    # DescribeLogDirsRequest: the top-level code (v3+) only
    "DescribeLogDirs": lambda r, v, c: {"error_code": c, "results": []},
    # SaslAuthenticateRequest: code and ApiError's message only: no auth bytes
    "SaslAuthenticate": _code_and_api_error_message,
    # CreatePartitionsRequest: ApiError's message
    "CreatePartitions": lambda r, v, c: {"results": _each(r["topics"], lambda t: {
        "name": t["name"], "error_code": c, "error_message": None})},
    "CreateDelegationToken": _create_delegation_token,
    "RenewDelegationToken": _code,  # RenewDelegationTokenRequest
    "ExpireDelegationToken": _code,  # ExpireDelegationTokenRequest
    "DescribeDelegationToken": _code,  # DescribeDelegationTokenRequest: no tokens
    # DeleteGroupsRequest.getErrorResultCollection
    "DeleteGroups": _keyed("results", "groups_names", "group_id"),
    "ElectLeaders": _elect_leaders,
    # IncrementalAlterConfigsRequest: ApiError's message
    "IncrementalAlterConfigs": _resources("responses", "resources", error_message=None),
    "AlterPartitionReassignments": _alter_partition_reassignments,
    "ListPartitionReassignments": _list_partition_reassignments,
    "OffsetDelete": _code,  # OffsetDeleteRequest: the top-level code only, no topics
    # DescribeClientQuotasRequest: entries null, ApiError's message
    "DescribeClientQuotas": lambda r, v, c: {"error_code": c, "error_message": None,
                                             "entries": None},
    "AlterClientQuotas": _alter_client_quotas,
    "DescribeUserScramCredentials": _describe_user_scram_credentials,
    "AlterUserScramCredentials": _alter_user_scram_credentials,
    # DescribeQuorumRequest.getTopLevelErrorResponse: no topics, the error's message
    "DescribeQuorum": _code_and_error_message,
    # UpdateFeaturesRequest, UpdateFeaturesResponse.createWithErrors: no results, ApiError's
    # message
    "UpdateFeatures": _code_and_api_error_message,
    # DescribeClusterRequest: code and ApiError's message only: endpoint type 1 (brokers)
    "DescribeCluster": _code_and_api_error_message,
    # DescribeProducersRequest: per partition, no message
    "DescribeProducers": lambda r, v, c: {"topics": _each(r["topics"], lambda t: {
        "name": t["name"], "partitions": _each(t["partition_indexes"], lambda p: {
            "partition_index": p, "error_code": c})})},
    "UnregisterBroker": _code,  # UnregisterBrokerRequest
    # DescribeTransactionsRequest
    "DescribeTransactions": _keyed("transaction_states", "transactional_ids", "transactional_id"),
    "ListTransactions": _code,  # ListTransactionsRequest
    # ConsumerGroupHeartbeatRequest: member id, epoch and assignment not set (null, 0, null)
    "ConsumerGroupHeartbeat": _code,
    # ConsumerGroupDescribeRequest
    "ConsumerGroupDescribe": _keyed("groups", "group_ids", "group_id"),
    "ListClientMetricsResources": _code,  # ListClientMetricsResourcesRequest
    "DescribeTopicPartitions": _describe_topic_partitions,
    "AddRaftVoter": _code_and_error_message,  # AddRaftVoterRequest
    "RemoveRaftVoter": _code_and_error_message,  # RemoveRaftVoterRequest
}


SHAPES = ("set", "null-fields", "null")  # schema_values.refused_requests


def test_every_api_has_kafka_s_error_answer() -> None:
    assert sorted(KAFKA_ERROR_ANSWERS) == sorted(spec.name for spec in KAFKA_APIS)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("spec", "version"), VERSIONS,
                         ids=[f"{spec.name}-v{version}" for spec, version in VERSIONS])
def test_the_answer_is_kafka_s_field_by_field(spec: ApiSpec, version: int, shape: str) -> None:
    """error_response gives every field the value Kafka's getErrorResponse gives it (the answer
    as a client decodes it: defaults and nulls included), for every API and version."""
    request = refused_requests(spec.request, version)[shape]
    request = spec.decode_request(version, spec.encode_request(version, request))
    kafka = KAFKA_ERROR_ANSWERS[spec.name](request, version, CODE)
    expected = spec.decode_response(version, spec.encode_response(version, kafka))
    assert _sent(spec, version, request, CODE) == expected


def test_api_versions_lists_itself_only_for_unsupported_version() -> None:
    spec = KAFKA_API_BY_KEY[18]
    for version in (0, 3, 4):
        assert _sent(spec, version, {}, 35)["api_keys"] == [
            {"api_key": 18, "min_version": 0, "max_version": 4}]
        assert _sent(spec, version, {}, 15)["api_keys"] == []


def test_alter_user_scram_credentials_answers_each_user_once_sorted() -> None:
    spec = KAFKA_API_BY_KEY[51]
    answer = _sent(spec, 0, {"deletions": [{"name": "b", "mechanism": 1},
                                           {"name": "a", "mechanism": 2}],
                             "upsertions": [{"name": "b", "mechanism": 1, "iterations": 4096,
                                             "salt": b"", "salted_password": b""}]}, 35)
    assert [(r["user"], r["error_code"]) for r in answer["results"]] == [("a", 35), ("b", 35)]
    # Java's String order compares UTF-16 code units: a surrogate pair (U+1F600) before U+FF21
    answer = _sent(spec, 0, {"deletions": [{"name": "\uff21", "mechanism": 1},
                                           {"name": "\U0001f600", "mechanism": 1}],
                             "upsertions": []}, 35)
    assert [r["user"] for r in answer["results"]] == ["\U0001f600", "\uff21"]
