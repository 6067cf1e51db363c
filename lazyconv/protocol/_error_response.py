"""The answer that refuses a request with one error code, for any declared API (sans-IO).

Kafka's request classes each build theirs (``AbstractRequest.getErrorResponse``): the response
mirrors the request — a result per topic, partition, group, resource, ACL creation… that the
request named, each carrying the error — plus the top-level ``ErrorCode`` where the response
has one. :func:`error_response` builds the same from the declarations alone: it walks the
response schema beside the request's, gives each response array that answers a request array
(:data:`_ANSWERS`, per API) an element per request element, copies the identifying fields
(names, partition indexes, resource types: the same names or :data:`_SAME_AS`), sets the values
Kafka's class sets for "not known" (:data:`_UNKNOWN`: where a field of the answer shares a name
with one of the request that says something else, or has no such default) and sets every
error code (and, with ``message``, every ``error_message``) on the way. A relay uses it when it cannot or will not forward a request
(an API it does not route, an upstream it cannot reach).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.protocol._api import ApiSpec
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
                    ("OffsetFetchResponse", "groups"): ("groups",),
                    ("OffsetFetchResponseGroup", "topics"): ("topics",),
                    ("OffsetFetchResponseTopics", "partitions"): ("partition_indexes",)},
    "FindCoordinator": {("FindCoordinatorResponse", "coordinators"): ("coordinator_keys",)},
    "LeaveGroup": {("LeaveGroupResponse", "members"): ("members",)},
    "DescribeGroups": {("DescribeGroupsResponse", "groups"): ("groups",)},
    "CreateTopics": {("CreateTopicsResponse", "topics"): ("topics",)},
    "DeleteTopics": {("DeleteTopicsResponse", "responses"): ("topics", "topic_names")},
    "DeleteRecords": {("DeleteRecordsResponse", "topics"): ("topics",),
                      ("DeleteRecordsTopicResult", "partitions"): ("partitions",)},
    "OffsetForLeaderEpoch": {("OffsetForLeaderEpochResponse", "topics"): ("topics",),
                             ("OffsetForLeaderTopicResult", "partitions"): ("partitions",)},
    "AddPartitionsToTxn": {
        ("AddPartitionsToTxnResponse", "results_by_transaction"): ("transactions",),
        ("AddPartitionsToTxnResult", "topic_results"): ("topics",),
        ("AddPartitionsToTxnTopicResult", "results_by_partition"): ("partitions",),
        ("AddPartitionsToTxnResponse", "results_by_topic_v3_and_below"): ("v3_and_below_topics",)},
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
    "OffsetDelete": {("OffsetDeleteResponse", "topics"): ("topics",),
                     ("OffsetDeleteResponseTopic", "partitions"): ("partitions",)},
    "AlterClientQuotas": {("AlterClientQuotasResponse", "entries"): ("entries",),
                          ("EntryData", "entity"): ("entity",)},
    "DescribeUserScramCredentials": {
        ("DescribeUserScramCredentialsResponse", "results"): ("users",)},
    "AlterUserScramCredentials": {
        ("AlterUserScramCredentialsResponse", "results"): ("deletions", "upsertions")},
    "UpdateFeatures": {("UpdateFeaturesResponse", "results"): ("feature_updates",)},
    "DescribeProducers": {("DescribeProducersResponse", "topics"): ("topics",),
                          ("TopicResponse", "partitions"): ("partition_indexes",)},
    "DescribeTransactions": {
        ("DescribeTransactionsResponse", "transaction_states"): ("transactional_ids",)},
    "ConsumerGroupDescribe": {("ConsumerGroupDescribeResponse", "groups"): ("group_ids",)},
    "DescribeTopicPartitions": {("DescribeTopicPartitionsResponse", "topics"): ("topics",)},
    "DescribeQuorum": {("DescribeQuorumResponse", "topics"): ("topics",),
                       ("TopicData", "partitions"): ("partitions",)},
}
# API -> {(response struct, field): the value Kafka's getErrorResponse sets}, where the request
# has a field of the same name that is not the same thing (a ListOffsets timestamp asked for, an
# OffsetForLeaderEpoch epoch asked about) or the declared default is not Kafka's value
# (DeleteRecordsResponse.INVALID_LOW_WATERMARK)
_UNKNOWN: dict[str, dict[tuple[str, str], Any]] = {
    "ListOffsets": {("ListOffsetsPartitionResponse", "timestamp"): -1,
                    ("ListOffsetsPartitionResponse", "offset"): -1},
    "OffsetForLeaderEpoch": {("EpochEndOffset", "leader_epoch"): -1,
                             ("EpochEndOffset", "end_offset"): -1},
    "DeleteRecords": {("DeleteRecordsPartitionResult", "low_watermark"): -1},
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
    return _Mirror(answers, _UNKNOWN.get(spec.name, {}), version, code, message).struct(
        spec.response, spec.request, request or {})


def _is_code(name: str) -> bool:
    return name == "error_code" or name.endswith("_error_code")


class _Mirror:
    def __init__(self, answers: Mapping[tuple[str, str], tuple[str, ...]],
                 unknown: Mapping[tuple[str, str], Any], version: int, code: int,
                 message: str | None) -> None:
        self.answers = answers
        self.unknown = unknown
        self.version = version
        self.code = code
        self.message = message

    def struct(self, struct: Struct, source_struct: Struct | None,
               source: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        source_fields = {f.name: f for f in source_struct.fields} if source_struct else {}
        for f in struct.fields:
            if not f.present_in(self.version):
                continue
            if _is_code(f.name) and f.type == INT16:
                out[f.name] = self.code
            elif f.name == "error_message" and self.message is not None:
                out[f.name] = self.message
            elif (struct.name, f.name) in self.unknown:
                out[f.name] = self.unknown[(struct.name, f.name)]
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
                for name in (f.name, *_SAME_AS.get(f.name, ())):
                    other = source_fields.get(name)
                    if other is not None and other.type == f.type and source.get(name) is not None:
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
