"""A minimal sensible request body for every API of KAFKA_APIS (empty lists, names that do not
exist, validate-only where there is such a flag): what the live declaration tests
(tests/kafka/test_kafka_apis_live.py) and the gateway's every-API test send."""

from __future__ import annotations

import base64
import uuid
from typing import Any

__all__ = ["MINIMAL", "member_id"]


def member_id() -> str:
    """A fresh KIP-848 member id (a client makes its own)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# A minimal sensible request per API: empty lists, names that do not exist, validate-only.
MINIMAL: dict[str, dict[str, Any]] = {
    "Produce": {"acks": -1, "timeout_ms": 1000, "topic_data": []},
    "Fetch": {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1024, "topics": []},
    "ListOffsets": {"replica_id": -1, "topics": []},
    "Metadata": {"topics": [], "allow_auto_topic_creation": False},
    "OffsetCommit": {"group_id": "probe-group", "topics": []},
    "OffsetFetch": {"group_id": "probe-group", "topics": [],
                    "groups": [{"group_id": "probe-group", "topics": []}]},
    "FindCoordinator": {"key": "probe-group", "key_type": 0, "coordinator_keys": ["probe-group"]},
    "JoinGroup": {"group_id": "probe-join", "session_timeout_ms": 10000,
                  "rebalance_timeout_ms": 10000, "protocol_type": "consumer", "protocols": []},
    "Heartbeat": {"group_id": "probe-none", "generation_id": 1, "member_id": "m"},
    "LeaveGroup": {"group_id": "probe-none", "member_id": "m", "members": [{"member_id": "m"}]},
    "SyncGroup": {"group_id": "probe-none", "generation_id": 1, "member_id": "m", "assignments": []},
    "DescribeGroups": {"groups": ["probe-none"]},
    "ListGroups": {},
    "SaslHandshake": {"mechanism": "PLAIN"},
    "ApiVersions": {"client_software_name": "lazyconv-test", "client_software_version": "1.0"},
    "CreateTopics": {"topics": [], "timeout_ms": 1000},
    "DeleteTopics": {"topic_names": [], "topics": [], "timeout_ms": 1000},
    "DeleteRecords": {"topics": [], "timeout_ms": 1000},
    "InitProducerId": {"transactional_id": None, "transaction_timeout_ms": 60000},
    "OffsetForLeaderEpoch": {"replica_id": -1, "topics": []},
    # v4+ (sent by brokers) with no transaction at all is never answered by Kafka 4.0.1: its
    # handler answers from the last transaction's callback (KafkaApis); so one unknown id
    "AddPartitionsToTxn": {"v3_and_below_transactional_id": "probe-none",
                           "v3_and_below_producer_id": 1, "v3_and_below_topics": [],
                           "transactions": [{"transactional_id": "probe-none", "producer_id": 1,
                                             "verify_only": True, "topics": []}]},
    "AddOffsetsToTxn": {"transactional_id": "probe-none", "producer_id": 1, "group_id": "probe-group"},
    "EndTxn": {"transactional_id": "probe-none", "producer_id": 1, "committed": False},
    "WriteTxnMarkers": {"markers": []},
    "TxnOffsetCommit": {"transactional_id": "probe-none", "group_id": "probe-group",
                        "producer_id": 1, "topics": []},
    "DescribeAcls": {"resource_type_filter": 1, "resource_name_filter": None,
                     "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                     "operation": 1, "permission_type": 1},
    "CreateAcls": {"creations": []},
    "DeleteAcls": {"filters": []},
    "DescribeConfigs": {"resources": []},
    "AlterConfigs": {"resources": []},
    "AlterReplicaLogDirs": {"dirs": []},
    "DescribeLogDirs": {"topics": []},
    "SaslAuthenticate": {"auth_bytes": b""},
    "CreatePartitions": {"topics": [], "timeout_ms": 1000},
    "CreateDelegationToken": {"renewers": [], "max_lifetime_ms": -1},
    "RenewDelegationToken": {"hmac": b"probe", "renew_period_ms": 1000},
    "ExpireDelegationToken": {"hmac": b"probe", "expiry_time_period_ms": 1000},
    "DescribeDelegationToken": {"owners": []},
    "DeleteGroups": {"groups_names": []},
    "ElectLeaders": {"election_type": 0, "topic_partitions": [], "timeout_ms": 1000},
    "IncrementalAlterConfigs": {"resources": []},
    "AlterPartitionReassignments": {"timeout_ms": 1000, "topics": []},
    "ListPartitionReassignments": {"timeout_ms": 1000, "topics": []},
    "OffsetDelete": {"group_id": "probe-none", "topics": []},
    "DescribeClientQuotas": {"components": []},
    "AlterClientQuotas": {"entries": [], "validate_only": True},
    "DescribeUserScramCredentials": {"users": []},
    "AlterUserScramCredentials": {"deletions": [], "upsertions": []},
    "DescribeQuorum": {"topics": [{"topic_name": "__cluster_metadata",
                                   "partitions": [{"partition_index": 0}]}]},
    "UpdateFeatures": {"timeout_ms": 1000, "feature_updates": [], "validate_only": True},
    "DescribeCluster": {},
    "DescribeProducers": {"topics": []},
    "UnregisterBroker": {"broker_id": 999},
    "DescribeTransactions": {"transactional_ids": []},
    "ListTransactions": {},
    "ConsumerGroupHeartbeat": {"group_id": "probe-cgh", "member_id": member_id(), "member_epoch": -1},
    "ConsumerGroupDescribe": {"group_ids": ["probe-none"]},
    "ListClientMetricsResources": {},
    "DescribeTopicPartitions": {"topics": []},
    "AddRaftVoter": {"cluster_id": None, "timeout_ms": 1000, "voter_id": 999,
                     "voter_directory_id": uuid.UUID(int=7), "listeners": []},
    "RemoveRaftVoter": {"cluster_id": None, "voter_id": 999, "voter_directory_id": uuid.UUID(int=7)},
}
