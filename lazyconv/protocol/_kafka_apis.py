"""Every API lazyconv declares, by key: the second registry table, beside ``ALL_APIS``.

``ALL_APIS`` (:mod:`lazyconv.protocol._registry`) is what ``serve`` answers and advertises in its
ApiVersions. ``KAFKA_APIS`` declares every API a Kafka 4.0.1 broker listener serves (its
ApiVersions answer; the controller-only APIs are left out), each at the union of the versions
Kafka 4.0.1 serves and the older ones lazyconv still speaks for old clients (Produce v0–2,
Fetch v0–3, ...): a spec's ``KAFKA_SPEC`` where ``serve`` answers fewer versions, else its
``SPEC``. It is for code that relays or inspects what a Kafka cluster speaks (a gateway, tests);
how each API is routed and where its answers name brokers is :mod:`lazyconv.protocol._routing`.

This module is imported on first use, not by ``import lazyconv`` (it loads about forty
declaration modules that ``serve`` never needs); ``lazyconv.protocol.KAFKA_APIS`` loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from lazyconv.protocol import _add_offsets_to_txn as add_offsets_to_txn
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _add_raft_voter as add_raft_voter
from lazyconv.protocol import _alter_client_quotas as alter_client_quotas
from lazyconv.protocol import _alter_configs as alter_configs
from lazyconv.protocol import _alter_partition_reassignments as alter_partition_reassignments
from lazyconv.protocol import _alter_replica_log_dirs as alter_replica_log_dirs
from lazyconv.protocol import _alter_user_scram_credentials as alter_user_scram_credentials
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _consumer_group_describe as consumer_group_describe
from lazyconv.protocol import _consumer_group_heartbeat as consumer_group_heartbeat
from lazyconv.protocol import _create_acls as create_acls
from lazyconv.protocol import _create_delegation_token as create_delegation_token
from lazyconv.protocol import _create_partitions as create_partitions
from lazyconv.protocol import _create_topics as create_topics
from lazyconv.protocol import _delete_acls as delete_acls
from lazyconv.protocol import _delete_groups as delete_groups
from lazyconv.protocol import _delete_records as delete_records
from lazyconv.protocol import _delete_topics as delete_topics
from lazyconv.protocol import _describe_acls as describe_acls
from lazyconv.protocol import _describe_client_quotas as describe_client_quotas
from lazyconv.protocol import _describe_cluster as describe_cluster
from lazyconv.protocol import _describe_configs as describe_configs
from lazyconv.protocol import _describe_delegation_token as describe_delegation_token
from lazyconv.protocol import _describe_groups as describe_groups
from lazyconv.protocol import _describe_log_dirs as describe_log_dirs
from lazyconv.protocol import _describe_producers as describe_producers
from lazyconv.protocol import _describe_quorum as describe_quorum
from lazyconv.protocol import _describe_topic_partitions as describe_topic_partitions
from lazyconv.protocol import _describe_transactions as describe_transactions
from lazyconv.protocol import _describe_user_scram_credentials as describe_user_scram_credentials
from lazyconv.protocol import _elect_leaders as elect_leaders
from lazyconv.protocol import _end_txn as end_txn
from lazyconv.protocol import _expire_delegation_token as expire_delegation_token
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _incremental_alter_configs as incremental_alter_configs
from lazyconv.protocol import _init_producer_id as init_producer_id
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _leave_group as leave_group
from lazyconv.protocol import _list_client_metrics_resources as list_client_metrics_resources
from lazyconv.protocol import _list_groups as list_groups
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _list_partition_reassignments as list_partition_reassignments
from lazyconv.protocol import _list_transactions as list_transactions
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _offset_commit as offset_commit
from lazyconv.protocol import _offset_delete as offset_delete
from lazyconv.protocol import _offset_fetch as offset_fetch
from lazyconv.protocol import _offset_for_leader_epoch as offset_for_leader_epoch
from lazyconv.protocol import _produce as produce
from lazyconv.protocol import _remove_raft_voter as remove_raft_voter
from lazyconv.protocol import _renew_delegation_token as renew_delegation_token
from lazyconv.protocol import _sasl_authenticate as sasl_authenticate
from lazyconv.protocol import _sasl_handshake as sasl_handshake
from lazyconv.protocol import _sync_group as sync_group
from lazyconv.protocol import _txn_offset_commit as txn_offset_commit
from lazyconv.protocol import _unregister_broker as unregister_broker
from lazyconv.protocol import _update_features as update_features
from lazyconv.protocol import _write_txn_markers as write_txn_markers
from lazyconv.protocol._api import ApiSpec

__all__ = ["KAFKA_APIS", "KAFKA_API_BY_KEY"]

KAFKA_APIS: tuple[ApiSpec, ...] = tuple(sorted(
    (
        produce.KAFKA_SPEC,
        fetch.SPEC,
        list_offsets.KAFKA_SPEC,
        metadata.KAFKA_SPEC,
        offset_commit.KAFKA_SPEC,
        offset_fetch.KAFKA_SPEC,
        find_coordinator.KAFKA_SPEC,
        join_group.SPEC,
        heartbeat.SPEC,
        leave_group.SPEC,
        sync_group.SPEC,
        describe_groups.KAFKA_SPEC,
        list_groups.SPEC,
        sasl_handshake.SPEC,
        api_versions.SPEC,
        create_topics.SPEC,
        delete_topics.SPEC,
        delete_records.SPEC,
        init_producer_id.SPEC,
        offset_for_leader_epoch.SPEC,
        add_partitions_to_txn.KAFKA_SPEC,
        add_offsets_to_txn.KAFKA_SPEC,
        end_txn.KAFKA_SPEC,
        write_txn_markers.SPEC,
        txn_offset_commit.KAFKA_SPEC,
        describe_acls.SPEC,
        create_acls.SPEC,
        delete_acls.SPEC,
        describe_configs.SPEC,
        alter_configs.SPEC,
        alter_replica_log_dirs.SPEC,
        describe_log_dirs.SPEC,
        sasl_authenticate.SPEC,
        create_partitions.SPEC,
        create_delegation_token.SPEC,
        renew_delegation_token.SPEC,
        expire_delegation_token.SPEC,
        describe_delegation_token.SPEC,
        delete_groups.SPEC,
        elect_leaders.SPEC,
        incremental_alter_configs.SPEC,
        alter_partition_reassignments.SPEC,
        list_partition_reassignments.SPEC,
        offset_delete.SPEC,
        describe_client_quotas.SPEC,
        alter_client_quotas.SPEC,
        describe_user_scram_credentials.SPEC,
        alter_user_scram_credentials.SPEC,
        describe_quorum.SPEC,
        update_features.SPEC,
        describe_cluster.SPEC,
        describe_producers.SPEC,
        unregister_broker.SPEC,
        describe_transactions.SPEC,
        list_transactions.SPEC,
        consumer_group_heartbeat.SPEC,
        consumer_group_describe.SPEC,
        list_client_metrics_resources.SPEC,
        describe_topic_partitions.SPEC,
        add_raft_voter.SPEC,
        remove_raft_voter.SPEC,
    ),
    key=lambda spec: spec.key,
))

KAFKA_API_BY_KEY: Mapping[int, ApiSpec] = MappingProxyType({spec.key: spec for spec in KAFKA_APIS})
