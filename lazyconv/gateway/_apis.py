"""What the gateway answers, how, and at which versions: its ApiVersions table, built once the
cluster's own ApiVersions answer is known.

Every API of :data:`~lazyconv.protocol._kafka_apis.KAFKA_APIS` is one of:

- **answered by the gateway** (:data:`OWN`): ApiVersions, Metadata and FindCoordinator (the
  gateway is the cluster's only broker and every group's and transaction's coordinator), Fetch
  and Produce (split per partition leader, converted for old versions), at every version
  lazyconv declares;
- **converted and relayed** (:data:`CONVERTED`): ListOffsets and the classic group APIs. Their
  old versions (below Kafka 4.0's floor, or any version the cluster does not serve) are
  translated by their relays (:mod:`~lazyconv.gateway._list_offsets_relay`,
  :mod:`~lazyconv.gateway._group_relay`); every version the cluster serves is relayed as it
  came (:mod:`~lazyconv.gateway._api_relay`);
- **relayed** (the rest): at the versions both the declarations and the cluster serve, to where
  Kafka routes it (:mod:`lazyconv.protocol._routing`), never below Kafka 4.0's floor;
- **not routed** (:data:`NOT_ROUTED`, with the reason): not advertised, and answered with
  UNSUPPORTED_VERSION (35) when a client sends it anyway.

The table advertises, per API, the union of what the gateway converts and what the cluster
serves; every declared version stays parseable, so a version or API that is not advertised is
answered with UNSUPPORTED_VERSION rather than a closed connection. The cluster's feature levels
(ApiVersions v3+: ``transaction.version``, ``group.version``, ...) are passed on as the cluster
gave them, so modern clients choose the same protocol they would choose directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyconv.gateway._floor import upstream_floor
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _alter_replica_log_dirs as alter_replica_log_dirs
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _describe_groups as describe_groups
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _leave_group as leave_group
from lazyconv.protocol import _list_groups as list_groups
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _offset_commit as offset_commit
from lazyconv.protocol import _offset_fetch as offset_fetch
from lazyconv.protocol import _produce as produce
from lazyconv.protocol import _sasl_authenticate as sasl_authenticate
from lazyconv.protocol import _sasl_handshake as sasl_handshake
from lazyconv.protocol import _sync_group as sync_group
from lazyconv.protocol import _unregister_broker as unregister_broker
from lazyconv.protocol import _write_txn_markers as write_txn_markers
from lazyconv.protocol._connection import ApiTable
from lazyconv.protocol._kafka_apis import KAFKA_APIS

__all__ = ["OWN", "CONVERTED", "NOT_ROUTED", "RELAY_MAX", "gateway_api_table", "relays"]

#: answered by the gateway itself, at every declared version (key -> why)
OWN: Mapping[int, str] = {
    produce.SPEC.key: "split per partition leader; v0–2 up-converted",
    fetch.SPEC.key: "split per partition leader; v0–3 down-converted",
    metadata.SPEC.key: "the gateway as the only broker",
    find_coordinator.SPEC.key: "the gateway as every coordinator",
    api_versions.SPEC.key: "the gateway's own table",
}
#: key -> the highest version the converting relay answers, whatever the cluster serves
CONVERTED: Mapping[int, int] = {
    list_offsets.SPEC.key: list_offsets.SPEC.max_version,
    join_group.SPEC.key: join_group.SPEC.max_version,
    sync_group.SPEC.key: sync_group.SPEC.max_version,
    heartbeat.SPEC.key: heartbeat.SPEC.max_version,
    leave_group.SPEC.key: leave_group.SPEC.max_version,
    offset_commit.SPEC.key: offset_commit.SPEC.max_version,
    # v8+ batch groups, which may have different coordinators: the relay splits those
    offset_fetch.SPEC.key: 7,
    describe_groups.SPEC.key: describe_groups.SPEC.max_version,
    list_groups.SPEC.key: list_groups.SPEC.max_version,
}
#: not routed, with the reason (docs/guide/gateway.md lists them)
NOT_ROUTED: Mapping[int, str] = {
    sasl_handshake.SPEC.key: "the listener's own: a SASL listener runs the exchange "
                             "before any other request; on one without SASL the API is "
                             "not served",
    sasl_authenticate.SPEC.key: "the listener's own: a SASL listener runs the exchange "
                                "before any other request; on one without SASL the API is "
                                "not served",
    write_txn_markers.SPEC.key: "the brokers' own (a coordinator writing transaction markers); "
                                "an admin's abort of a hanging transaction names partition "
                                "leaders the gateway hides: run it against the cluster",
    alter_replica_log_dirs.SPEC.key: "moves replicas between one broker's log directories; the "
                                     "gateway stands for every broker: run it against the broker",
    unregister_broker.SPEC.key: "names a real broker, which the gateway hides: run it against "
                                "the cluster",
}
#: relayed versions capped below what the cluster serves (key -> max, why in the comment)
RELAY_MAX: Mapping[int, int] = {
    # v4+ is the brokers' own (KIP-890: a partition leader verifying a transaction); Kafka 4.0.1
    # never answers one without transactions
    add_partitions_to_txn.SPEC.key: 3,
}


def relays(api_key: int, version: int, cluster: Mapping[int, tuple[int, int]]) -> bool:
    """Whether ``version`` of ``api_key`` is relayed as it came (the cluster serves it, it is
    not below Kafka 4.0's floor, the gateway routes the API), rather than answered or converted
    by the gateway."""
    if api_key in OWN or api_key in NOT_ROUTED:
        return False
    served = cluster.get(api_key)
    return (served is not None and served[0] <= version <= served[1]
            and version >= upstream_floor(api_key) and version <= RELAY_MAX.get(api_key, version))


def gateway_api_table(cluster: Mapping[int, tuple[int, int]],
                      features: Mapping[str, Any] | None = None) -> ApiTable:
    """The gateway's :class:`~lazyconv.protocol._connection.ApiTable`: every declared API
    parseable at every declared version; advertised, the versions the gateway answers (see the
    module docstring). ``cluster``: the upstream's ApiVersions (key -> (min, max)); empty
    before the cluster was reached, which leaves only what the gateway answers itself."""
    advertised: dict[int, tuple[int, int]] = {}
    for spec in KAFKA_APIS:
        key = spec.key
        if key in NOT_ROUTED:
            continue
        if key in OWN:
            high = spec.max_version
            if key == produce.SPEC.key:  # v12 only where the cluster takes it (TV2 producers)
                high = max(produce.SPEC.max_version, min(spec.max_version,
                                                         cluster.get(key, (0, -1))[1]))
            advertised[key] = (spec.min_version, high)
            continue
        relayed = [v for v in range(spec.min_version, spec.max_version + 1)
                   if relays(key, v, cluster)]
        converted_max = CONVERTED.get(key, -1)
        low = spec.min_version if converted_max >= 0 else min(relayed, default=None)
        high = max([converted_max, *relayed])
        if low is None or high < low:
            continue
        # a gap between converted and relayed versions would be answered by the converter,
        # which speaks every version up to its own maximum
        advertised[key] = (low, high)
    return ApiTable(KAFKA_APIS, advertised=advertised, features=features)
