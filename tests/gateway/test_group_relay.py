"""The group relay's translations for old versions, against a stand-in coordinator (no
broker): what an old client reads when Kafka 4 answers a group's error at the top level."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.gateway._group_relay import GroupRelay
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _offset_fetch as offset_fetch


class _Coordinator:
    """One connection that answers FindCoordinator with node 1 and anything else as given."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.sent: list[tuple[str, int]] = []

    def version(self, spec: Any) -> int:
        return 4 if spec.key == find_coordinator.SPEC.key else spec.max_version

    async def request(self, spec: Any, version: int, body: dict, timeout: float | None = None) -> dict:
        self.sent.append((spec.name, version))
        if spec.key == find_coordinator.SPEC.key:
            return {"coordinators": [{"key": "g", "node_id": 1, "host": "h", "port": 1,
                                      "error_code": 0, "error_message": None}]}
        return self.answer


class _Cluster:
    brokers = {1: None}
    request_timeout = 30.0
    state = types.SimpleNamespace(warn=lambda *args: None)


class _Session:
    identity = types.SimpleNamespace(key="-")

    def __init__(self, conn: _Coordinator) -> None:
        self.conn = conn
        self.cluster = _Cluster()

    async def any_connection(self) -> _Coordinator:
        return self.conn

    async def connection(self, node: int) -> _Coordinator:
        return self.conn


@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                  ErrorCode.GROUP_AUTHORIZATION_FAILED])
@pytest.mark.parametrize("version", [0, 1])
def test_offset_fetch_v0_v1_get_a_group_error_on_every_partition(version: int, code: int) -> None:
    """Kafka 4 answers OffsetFetch v2+ for a moved coordinator or a refused group with a
    top-level error and no topics; v0-1 have no top-level error, so it went nowhere and the old
    client read "no offsets" (and might reset). It gets the code on every partition it asked,
    offset -1, as Kafka answered those versions."""
    conn = _Coordinator({"throttle_time_ms": 0, "error_code": int(code), "topics": []})
    request = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    answer = asyncio.run(GroupRelay(_Cluster()).relay(_Session(conn), offset_fetch.SPEC, version,
                                                      request))
    decoded = offset_fetch.SPEC.decode_response(
        version, offset_fetch.SPEC.encode_response(version, answer))
    assert [(p["partition_index"], p["committed_offset"], p["error_code"])
            for t in decoded["topics"] for p in t["partitions"]] == [(0, -1, code), (1, -1, code)]
    assert conn.sent[-1][0] == "OffsetFetch" and conn.sent[-1][1] >= 2
