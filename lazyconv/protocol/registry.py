"""Every API this library speaks, by key: the one table the server's ApiVersions is built from."""

from __future__ import annotations

from lazyconv.protocol import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    describe_groups,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
)
from lazyconv.protocol.api import ApiSpec

__all__ = ["ALL_APIS", "API_BY_KEY", "api_versions_table"]

ALL_APIS: tuple[ApiSpec, ...] = tuple(sorted(
    (
        produce.SPEC,
        fetch.SPEC,
        list_offsets.SPEC,
        metadata.SPEC,
        offset_commit.SPEC,
        offset_fetch.SPEC,
        find_coordinator.SPEC,
        join_group.SPEC,
        heartbeat.SPEC,
        leave_group.SPEC,
        sync_group.SPEC,
        describe_groups.SPEC,
        list_groups.SPEC,
        api_versions.SPEC,
        init_producer_id.SPEC,
        add_partitions_to_txn.SPEC,
        add_offsets_to_txn.SPEC,
        end_txn.SPEC,
        txn_offset_commit.SPEC,
    ),
    key=lambda spec: spec.key,
))

API_BY_KEY: dict[int, ApiSpec] = {spec.key: spec for spec in ALL_APIS}


def api_versions_table(max_versions: dict[int, int] | None = None) -> list[dict[str, int]]:
    """ApiVersions' ``api_keys`` list for every API, optionally capping some max versions."""
    caps = max_versions or {}
    return [
        {"api_key": spec.key, "min_version": spec.min_version,
         "max_version": min(spec.max_version, caps.get(spec.key, spec.max_version))}
        for spec in ALL_APIS
    ]
