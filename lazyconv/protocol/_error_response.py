"""The answer that refuses a request with one error code, for any declared API (sans-IO).

Kafka's request classes each build theirs (``AbstractRequest.getErrorResponse``): the response
mirrors the request — a result per topic, partition, group, resource, ACL creation… that the
request named, each carrying the error — plus the top-level ``ErrorCode`` where the response
has one. :func:`error_response` builds the same from the declarations alone: it walks the
response schema beside the request's, gives each response array that answers a request array
(:data:`_ANSWERS`, per API) an element per request element, copies the identifying fields
(names, partition indexes, resource types: the same names or :data:`_SAME_AS`), sets the values
Kafka's class sets for "not known" and leaves unset what it leaves unset (:data:`_UNKNOWN`:
where a field of the answer shares a name with one of the request that says something else, or
Kafka's value is not the declared default) and sets every error code on the way. Each
``error_message`` holds ``message`` where one is given (a relay's own words: every message
field has it); without one, what Kafka's class puts there for an exception carrying the error's
own message: null (``ApiError.message()``), the error's message (``Errors.message()``:
:mod:`lazyconv.protocol._error_messages`) or nothing (the field's default). A relay uses it when
it cannot or will not forward a request (an API it does not route, an upstream it cannot
reach). tests/protocol/test_error_response.py holds every API's answer against Kafka's, field
by field, and tests/kafka/test_error_response_kafka.py against Kafka's own classes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._error_messages import kafka_message
from lazyconv.protocol._schema import INT16, ArrayOf, Field, ScalarType, Struct

__all__ = ["error_response"]

# API -> {(response struct, array field): the request arrays (relative to the request element
# the struct answers) it has one element for}; a dotted source is flattened ("dirs.topics": the
# topics of every dir). An array not listed (a listing: DescribeAcls' resources, JoinGroup's
# members, ...) stays empty.
_ANSWERS: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {
    "Produce": {("ProduceResponse", "responses"): ("topic_data",),
                ("TopicProduceResponse", "partition_responses"): ("partition_data",)},
    "Fetch": {("FetchResponse", "responses"): ("topics",),
              ("FetchableTopicResponse", "partitions"): ("partitions",)},
    "ListOffsets": {("ListOffsetsResponse", "topics"): ("topics",),
                    ("ListOffsetsTopicResponse", "partitions"): ("partitions",)},
    "Metadata": {("MetadataResponse", "topics"): ("topics",)},
    "OffsetCommit": {("OffsetCommitResponse", "topics"): ("topics",),
                     ("OffsetCommitResponseTopic", "partitions"): ("partitions",)},
    "OffsetFetch": {("OffsetFetchResponse", "topics"): ("topics",),
                    ("OffsetFetchResponseTopic", "partitions"): ("partition_indexes",),
                    ("OffsetFetchResponse", "groups"): ("groups",)},
    "FindCoordinator": {("FindCoordinatorResponse", "coordinators"): ("coordinator_keys",)},
    "DescribeGroups": {("DescribeGroupsResponse", "groups"): ("groups",)},
    "CreateTopics": {("CreateTopicsResponse", "topics"): ("topics",)},
    "DeleteTopics": {("DeleteTopicsResponse", "responses"): ("topics", "topic_names")},
    "DeleteRecords": {("DeleteRecordsResponse", "topics"): ("topics",),
                      ("DeleteRecordsTopicResult", "partitions"): ("partitions",)},
    "OffsetForLeaderEpoch": {("OffsetForLeaderEpochResponse", "topics"): ("topics",),
                             ("OffsetForLeaderTopicResult", "partitions"): ("partitions",)},
    "AddPartitionsToTxn": {
        ("AddPartitionsToTxnResponse", "results_by_topic_v3_and_below"): ("v3_and_below_topics",),
        ("AddPartitionsToTxnTopicResult", "results_by_partition"): ("partitions",)},
    "WriteTxnMarkers": {("WriteTxnMarkersResponse", "markers"): ("markers",),
                        ("WritableTxnMarkerResult", "topics"): ("topics",),
                        ("WritableTxnMarkerTopicResult", "partitions"): ("partition_indexes",)},
    "TxnOffsetCommit": {("TxnOffsetCommitResponse", "topics"): ("topics",),
                        ("TxnOffsetCommitResponseTopic", "partitions"): ("partitions",)},
    "CreateAcls": {("CreateAclsResponse", "results"): ("creations",)},
    "DeleteAcls": {("DeleteAclsResponse", "filter_results"): ("filters",)},
    "DescribeConfigs": {("DescribeConfigsResponse", "results"): ("resources",)},
    "AlterConfigs": {("AlterConfigsResponse", "responses"): ("resources",)},
    "AlterReplicaLogDirs": {("AlterReplicaLogDirsResponse", "results"): ("dirs.topics",),
                            ("AlterReplicaLogDirTopicResult", "partitions"): ("partitions",)},
    "CreatePartitions": {("CreatePartitionsResponse", "results"): ("topics",)},
    "DeleteGroups": {("DeleteGroupsResponse", "results"): ("groups_names",)},
    "ElectLeaders": {("ElectLeadersResponse", "replica_election_results"): ("topic_partitions",),
                     ("ReplicaElectionResult", "partition_result"): ("partitions",)},
    "IncrementalAlterConfigs": {("IncrementalAlterConfigsResponse", "responses"): ("resources",)},
    "AlterPartitionReassignments": {
        ("AlterPartitionReassignmentsResponse", "responses"): ("topics",),
        ("ReassignableTopicResponse", "partitions"): ("partitions",)},
    "ListPartitionReassignments": {
        ("ListPartitionReassignmentsResponse", "topics"): ("topics",),
        ("OngoingTopicReassignment", "partitions"): ("partition_indexes",)},
    "AlterClientQuotas": {("AlterClientQuotasResponse", "entries"): ("entries",),
                          ("EntryData", "entity"): ("entity",)},
    "DescribeUserScramCredentials": {
        ("DescribeUserScramCredentialsResponse", "results"): ("users",)},
    "AlterUserScramCredentials": {
        ("AlterUserScramCredentialsResponse", "results"): ("deletions", "upsertions")},
    "DescribeProducers": {("DescribeProducersResponse", "topics"): ("topics",),
                          ("TopicResponse", "partitions"): ("partition_indexes",)},
    "DescribeTransactions": {
        ("DescribeTransactionsResponse", "transaction_states"): ("transactional_ids",)},
    "ConsumerGroupDescribe": {("ConsumerGroupDescribeResponse", "groups"): ("group_ids",)},
    "DescribeTopicPartitions": {("DescribeTopicPartitionsResponse", "topics"): ("topics",)},
}


@dataclass(frozen=True)
class _From:
    """``value`` from ``version`` on; below it the field is answered as if not listed."""

    version: int
    value: Any


_NOT_SET: Final = object()  # Kafka's class does not set the field: the response's declared default
_ABSENT: Final = object()  # no entry
# Kafka's message for the code (Errors.message(), which some classes set); where a class sets
# ApiError.fromThrowable(e).message() the entry is None: null for an exception carrying the
# error's own message, as the refusals without a message of their own are
_ERROR_MESSAGE: Final = object()

# API -> {(response struct, field): what Kafka's getErrorResponse puts there}, where that is not
# what mirroring the request gives: a field of the answer sharing a name with one of the request
# that says something else (a ListOffsets timestamp asked for, an InitProducerId producer id), a
# field Kafka leaves at its default (_NOT_SET) or sets to its own "not known" value, an array it
# leaves empty (or null) although the request names what it would list. Each entry names the
# Java class it comes from.
_UNKNOWN: dict[str, dict[tuple[str, str], Any]] = {
    # ProduceRequest: INVALID_OFFSET (log append time and log start offset: their defaults, -1)
    "Produce": {("PartitionProduceResponse", "base_offset"): -1},
    # FetchRequest, FetchResponse.partitionResponse: INVALID_HIGH_WATERMARK, the log start
    # offset not set, records MemoryRecords.EMPTY (4.0.1; 3.9.0 leaves them null, which
    # librdkafka refuses at v0-3: empty there too, as serve's error partitions,
    # docs/differences.md); from v13 the top-level code alone
    "Fetch": {("FetchResponse", "responses"): _From(13, []),
              ("PartitionData", "high_watermark"): -1,
              ("PartitionData", "log_start_offset"): _NOT_SET,
              ("PartitionData", "records"): b""},
    # ListOffsetsRequest: UNKNOWN_TIMESTAMP, UNKNOWN_OFFSET
    "ListOffsets": {("ListOffsetsPartitionResponse", "timestamp"): -1,
                    ("ListOffsetsPartitionResponse", "offset"): -1},
    # OffsetFetchRequest: v0-1 INVALID_OFFSET per partition; v2-7 the top-level code alone;
    # v8+ each group's code, no partitions
    "OffsetFetch": {("OffsetFetchResponsePartition", "committed_offset"): -1,
                    ("OffsetFetchResponse", "topics"): _From(2, []),
                    ("OffsetFetchResponseGroup", "topics"): []},
    # FindCoordinatorResponse.prepareOldResponse / prepareErrorResponse: Node.noNode(), the
    # error's message
    "FindCoordinator": {("FindCoordinatorResponse", "node_id"): -1,
                        ("FindCoordinatorResponse", "port"): -1,
                        ("FindCoordinatorResponse", "error_message"): _ERROR_MESSAGE,
                        ("Coordinator", "node_id"): -1, ("Coordinator", "port"): -1,
                        ("Coordinator", "error_message"): _ERROR_MESSAGE},
    # JoinGroupRequest: UNKNOWN_MEMBER_ID, the protocol name null from v7 ("" before), the
    # protocol type not set
    "JoinGroup": {("JoinGroupResponse", "member_id"): "",
                  ("JoinGroupResponse", "protocol_type"): _NOT_SET,
                  ("JoinGroupResponse", "protocol_name"): _From(7, None)},
    # SyncGroupRequest: neither protocol type nor name set
    "SyncGroup": {("SyncGroupResponse", "protocol_type"): _NOT_SET,
                  ("SyncGroupResponse", "protocol_name"): _NOT_SET},
    # CreateTopicsRequest: name, code and ApiError's message only
    "CreateTopics": {("CreatableTopicResult", "error_message"): None,
                     ("CreatableTopicResult", "num_partitions"): _NOT_SET,
                     ("CreatableTopicResult", "replication_factor"): _NOT_SET,
                     ("CreatableTopicResult", "topic_config_error_code"): _NOT_SET},
    # DeleteRecordsRequest: DeleteRecordsResponse.INVALID_LOW_WATERMARK
    "DeleteRecords": {("DeleteRecordsPartitionResult", "low_watermark"): -1},
    # InitProducerIdRequest: RecordBatch.NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    "InitProducerId": {("InitProducerIdResponse", "producer_id"): -1,
                       ("InitProducerIdResponse", "producer_epoch"): -1},
    # OffsetsForLeaderEpochRequest: UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    "OffsetForLeaderEpoch": {("EpochEndOffset", "leader_epoch"): -1,
                             ("EpochEndOffset", "end_offset"): -1},
    # EndTxnRequest: the code alone (v5's producer id and epoch not set)
    "EndTxn": {("EndTxnResponse", "producer_id"): _NOT_SET,
               ("EndTxnResponse", "producer_epoch"): _NOT_SET},
    # SaslAuthenticateRequest: code and ApiError's message only
    "SaslAuthenticate": {("SaslAuthenticateResponse", "auth_bytes"): _NOT_SET,
                         ("SaslAuthenticateResponse", "error_message"): None},
    # DescribeAclsRequest, CreateAclsRequest.aclResult, DeleteAclsRequest: ApiError's message
    "DescribeAcls": {("DescribeAclsResponse", "error_message"): None},
    "CreateAcls": {("AclCreationResult", "error_message"): None},
    "DeleteAcls": {("DeleteAclsFilterResult", "error_message"): None},
    # DescribeConfigsRequest: the error's message; AlterConfigsRequest,
    # IncrementalAlterConfigsRequest: ApiError's
    "DescribeConfigs": {("DescribeConfigsResult", "error_message"): _ERROR_MESSAGE},
    "AlterConfigs": {("AlterConfigsResourceResponse", "error_message"): None},
    "IncrementalAlterConfigs": {("AlterConfigsResourceResponse", "error_message"): None},
    # ElectLeadersRequest: ApiError's message on each partition
    "ElectLeaders": {("PartitionResult", "error_message"): None},
    # AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest: ApiError's message
    "AlterPartitionReassignments": {
        ("AlterPartitionReassignmentsResponse", "error_message"): None,
        ("ReassignablePartitionResponse", "error_message"): None},
    "ListPartitionReassignments": {("ListPartitionReassignmentsResponse", "error_message"): None},
    # AlterClientQuotasRequest: the error's message on each entry
    "AlterClientQuotas": {("EntryData", "error_message"): _ERROR_MESSAGE},
    # AlterUserScramCredentialsRequest: ApiError's message
    "AlterUserScramCredentials": {("AlterUserScramCredentialsResult", "error_message"): None},
    # DescribeQuorumRequest.getTopLevelErrorResponse: the error's message
    "DescribeQuorum": {("DescribeQuorumResponse", "error_message"): _ERROR_MESSAGE},
    # UpdateFeaturesResponse.createWithErrors: ApiError's message
    "UpdateFeatures": {("UpdateFeaturesResponse", "error_message"): None},
    # AddRaftVoterRequest, RemoveRaftVoterRequest: the error's message
    "AddRaftVoter": {("AddRaftVoterResponse", "error_message"): _ERROR_MESSAGE},
    "RemoveRaftVoter": {("RemoveRaftVoterResponse", "error_message"): _ERROR_MESSAGE},
    # CreateDelegationTokenResponse.prepareResponse: KafkaPrincipal.ANONYMOUS as owner and
    # requester, timestamps -1
    "CreateDelegationToken": {
        ("CreateDelegationTokenResponse", "principal_type"): "User",
        ("CreateDelegationTokenResponse", "principal_name"): "ANONYMOUS",
        ("CreateDelegationTokenResponse", "token_requester_principal_type"): "User",
        ("CreateDelegationTokenResponse", "token_requester_principal_name"): "ANONYMOUS",
        ("CreateDelegationTokenResponse", "issue_timestamp_ms"): -1,
        ("CreateDelegationTokenResponse", "expiry_timestamp_ms"): -1,
        ("CreateDelegationTokenResponse", "max_timestamp_ms"): -1},
    # DescribeClientQuotasRequest: entries null, ApiError's message
    "DescribeClientQuotas": {("DescribeClientQuotasResponse", "entries"): None,
                             ("DescribeClientQuotasResponse", "error_message"): None},
    # DescribeUserScramCredentialsRequest: a result per user asked, its name not set; ApiError's
    # message
    "DescribeUserScramCredentials": {
        ("DescribeUserScramCredentialsResult", "user"): _NOT_SET,
        ("DescribeUserScramCredentialsResult", "error_message"): None,
        ("DescribeUserScramCredentialsResponse", "error_message"): None},
    # DescribeClusterRequest: code and message only (the endpoint type's default: brokers)
    "DescribeCluster": {("DescribeClusterResponse", "endpoint_type"): _NOT_SET},
    # ConsumerGroupHeartbeatRequest: the code alone
    "ConsumerGroupHeartbeat": {("ConsumerGroupHeartbeatResponse", "member_id"): _NOT_SET,
                               ("ConsumerGroupHeartbeatResponse", "member_epoch"): _NOT_SET,
                               ("ConsumerGroupHeartbeatResponse", "assignment"): _NOT_SET},
    # DescribeTopicPartitionsRequest: no next cursor
    "DescribeTopicPartitions": {("DescribeTopicPartitionsResponse", "next_cursor"): _NOT_SET},
}
# API -> the (response struct, field)s Kafka copies a null into (elsewhere a null of the
# request leaves the answer's default: Metadata's name of a topic asked by id is "")
_KEEPS_NULL: dict[str, frozenset[tuple[str, str]]] = {
    "DeleteTopics": frozenset({("DeletableTopicResult", "name")}),  # DeleteTopicsRequest
    "AlterClientQuotas": frozenset({("EntityData", "entity_name")}),  # AlterClientQuotasRequest
}

# a response field -> request fields holding the same value under another name
_SAME_AS: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition", "index"),
    "partition": ("partition_index",),
    "partition_id": ("partition", "partition_index"),
    "index": ("partition_index", "partition"),
    "name": ("topic", "topic_name"),
    "topic": ("name",),
    "topic_name": ("name", "topic"),
    "user": ("name",),
}


def error_response(spec: ApiSpec, version: int, request: Mapping[str, Any] | None, code: int, *,
                   message: str | None = None) -> dict[str, Any]:
    """``spec``'s response at ``version`` refusing ``request`` (its decoded body; ``None``:
    only the top-level fields) with ``code`` everywhere a code goes."""
    answers = _ANSWERS.get(spec.name, {})
    out = _Mirror(answers, _UNKNOWN.get(spec.name, {}), _KEEPS_NULL.get(spec.name, frozenset()),
                  version, code, message).struct(spec.response, spec.request, request or {})
    finish = _FINISH.get(spec.name)
    if finish is not None:
        finish(spec, code, out)
    return out


def _own_versions(spec: ApiSpec, code: int, out: dict[str, Any]) -> None:
    """ApiVersionsRequest: refused UNSUPPORTED_VERSION, the answer lists the versions of
    ApiVersions itself (KIP-511), which the client asks again with."""
    if code == _UNSUPPORTED_VERSION:
        out["api_keys"] = [{"api_key": spec.key, "min_version": spec.min_version,
                            "max_version": spec.max_version}]


def _each_user_once(spec: ApiSpec, code: int, out: dict[str, Any]) -> None:
    """AlterUserScramCredentialsRequest: a result per user of the deletions and upsertions,
    each once, in the order of the names (Java's String order: by UTF-16 code units)."""
    users = {result["user"]: result for result in out.get("results", ())}
    out["results"] = [users[user] for user in sorted(users, key=lambda u: u.encode("utf-16-be"))]


_UNSUPPORTED_VERSION = 35
# API -> what Kafka's class does that depends on more than a field: the code, or the whole list
_FINISH: dict[str, Callable[[ApiSpec, int, dict[str, Any]], None]] = {
    "ApiVersions": _own_versions,
    "AlterUserScramCredentials": _each_user_once,
}


def _is_code(name: str) -> bool:
    return name == "error_code" or name.endswith("_error_code")


class _Mirror:
    def __init__(self, answers: Mapping[tuple[str, str], tuple[str, ...]],
                 unknown: Mapping[tuple[str, str], Any], keeps_null: frozenset[tuple[str, str]],
                 version: int, code: int, message: str | None) -> None:
        self.answers = answers
        self.unknown = unknown
        self.keeps_null = keeps_null
        self.version = version
        self.code = code
        self.message = message

    def _unknown(self, struct: Struct, f: Field) -> Any:
        """What :data:`_UNKNOWN` puts in ``f`` at this version (``_ABSENT``: nothing)."""
        value = self.unknown.get((struct.name, f.name), _ABSENT)
        if isinstance(value, _From):
            value = value.value if self.version >= value.version else _ABSENT
        if value is _ERROR_MESSAGE:
            value = kafka_message(self.code)
        return value

    def struct(self, struct: Struct, source_struct: Struct | None,
               source: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        source_fields = {f.name: f for f in source_struct.fields} if source_struct else {}
        for f in struct.fields:
            if not f.present_in(self.version):
                continue
            unknown = self._unknown(struct, f)
            if f.name == "error_message" and self.message is not None:
                out[f.name] = self.message
            elif unknown is _NOT_SET:
                continue
            elif unknown is not _ABSENT:
                out[f.name] = copy.deepcopy(unknown)
            elif _is_code(f.name) and f.type == INT16:
                out[f.name] = self.code
            elif isinstance(f.type, ArrayOf) and isinstance(f.type.element, Struct):
                sources = self.answers.get((struct.name, f.name), ())
                out[f.name] = self.array(f.type.element, sources, source_fields, source)
            elif isinstance(f.type, Struct):
                sub = self.answers.get((struct.name, f.name))
                other = source_fields.get(sub[0]) if sub else None
                if other is not None and isinstance(other.type, Struct):
                    value = source.get(other.name)
                    out[f.name] = self.struct(f.type, other.type,
                                              value if isinstance(value, Mapping) else {})
                else:
                    out[f.name] = self.struct(f.type, None, {})
            elif isinstance(f.type, ScalarType):
                keeps_null = (struct.name, f.name) in self.keeps_null and f.nullable_in(self.version)
                for name in (f.name, *_SAME_AS.get(f.name, ())):
                    other = source_fields.get(name)
                    if other is not None and other.type == f.type and name in source and (
                            source[name] is not None or keeps_null):
                        out[f.name] = source[name]
                        break
        return out

    def array(self, element: Struct, sources: tuple[str, ...], source_fields: Mapping[str, Field],
              source: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One element per element of the request arrays ``sources`` name."""
        out: list[dict[str, Any]] = []
        for path in sources:
            for of, item in _items(path.split("."), source_fields, source, self.version):
                if isinstance(of, Struct) and isinstance(item, Mapping):
                    out.append(self.struct(element, of, item))
                elif isinstance(of, ScalarType):
                    answer = self.struct(element, None, {})
                    key = next((e for e in element.fields if e.present_in(self.version)
                                and e.type == of and not e.name.startswith("error")), None)
                    if key is not None:
                        answer[key.name] = item
                    out.append(answer)
        return out


def _items(path: list[str], fields: Mapping[str, Field], value: Mapping[str, Any],
           version: int) -> list[tuple[Struct | ScalarType, Any]]:
    """The elements of the request array at ``path`` (flattened through the arrays on the
    way), with their type."""
    f = fields.get(path[0])
    items = value.get(path[0])
    if f is None or not f.present_in(version) or not isinstance(f.type, ArrayOf) or not items:
        return []
    of = f.type.element
    if len(path) == 1:
        return [(of, item) for item in items]
    if not isinstance(of, Struct):
        return []
    inner = {g.name: g for g in of.fields}
    return [found for item in items if isinstance(item, Mapping)
            for found in _items(path[1:], inner, item, version)]
