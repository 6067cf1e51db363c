"""Every API this library speaks, by key: the one table the server's ApiVersions is built from."""

from __future__ import annotations

from collections.abc import Mapping

from lazyconv.errors import ConfigurationError
from lazyconv.protocol import (
    _add_offsets_to_txn as add_offsets_to_txn,
)
from lazyconv.protocol import (
    _add_partitions_to_txn as add_partitions_to_txn,
)
from lazyconv.protocol import (
    _api_versions as api_versions,
)
from lazyconv.protocol import (
    _describe_groups as describe_groups,
)
from lazyconv.protocol import (
    _end_txn as end_txn,
)
from lazyconv.protocol import (
    _fetch as fetch,
)
from lazyconv.protocol import (
    _find_coordinator as find_coordinator,
)
from lazyconv.protocol import (
    _heartbeat as heartbeat,
)
from lazyconv.protocol import (
    _init_producer_id as init_producer_id,
)
from lazyconv.protocol import (
    _join_group as join_group,
)
from lazyconv.protocol import (
    _leave_group as leave_group,
)
from lazyconv.protocol import (
    _list_groups as list_groups,
)
from lazyconv.protocol import (
    _list_offsets as list_offsets,
)
from lazyconv.protocol import (
    _metadata as metadata,
)
from lazyconv.protocol import (
    _offset_commit as offset_commit,
)
from lazyconv.protocol import (
    _offset_fetch as offset_fetch,
)
from lazyconv.protocol import (
    _produce as produce,
)
from lazyconv.protocol import (
    _sync_group as sync_group,
)
from lazyconv.protocol import (
    _txn_offset_commit as txn_offset_commit,
)
from lazyconv.protocol._api import ApiSpec

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
    if not isinstance(caps, Mapping) or not all(isinstance(v, int) for v in caps.values()):
        raise ConfigurationError(f"max_versions must map api keys to int versions, got {max_versions!r:.60}")
    return [
        {"api_key": spec.key, "min_version": spec.min_version,
         "max_version": min(spec.max_version, caps.get(spec.key, spec.max_version))}
        for spec in ALL_APIS
    ]
