"""The group APIs on the wire: decoded requests in, response bodies out, over the coordinator.

JoinGroup and SyncGroup may have to wait for other members; they return awaitables that the
request loop awaits (the connection stays muted meanwhile, as Kafka mutes it). The coordinator
itself is sans-IO (:mod:`lazyconv.serve._group_coordinator`); this module adds the clock, the
asyncio futures, the timer that expires sessions, and the committed-offset store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from lazyconv.errors import ErrorCode
from lazyconv.protocol._describe_groups import AUTHORIZED_OPERATIONS_OMITTED
from lazyconv.serve._group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
    SyncResult,
)
from lazyconv.serve._offset_store import CommittedOffset, OffsetStore

log = logging.getLogger(__name__)

__all__ = ["GroupApis", "TICK_INTERVAL_S", "MAX_METADATA_SIZE"]

TICK_INTERVAL_S = 0.1
MAX_METADATA_SIZE = 4096  # Kafka's offset.metadata.max.bytes


class GroupApis:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
    DescribeGroups over one :class:`GroupCoordinator` and one :class:`OffsetStore`."""

    def __init__(self, store: OffsetStore, partition_exists: Callable[[str, int], bool], *,
                 config: CoordinatorConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.coordinator = GroupCoordinator(config)
        self.store = store
        self.partition_exists = partition_exists
        self.clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._next_cleanup: float | None = None  # when empty groups are next removed

    # -- timers ----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop,
              extra_tick: Callable[[float], None] | None = None) -> None:
        """Tick the coordinator (and ``extra_tick``) every :data:`TICK_INTERVAL_S` on ``loop``."""
        def tick() -> None:
            try:
                now = self.clock()
                self.tick(now)
                if extra_tick is not None:
                    extra_tick(now)
            except Exception:  # a bug must not stop the timer
                log.exception("coordinator tick failed")
            self._timer = loop.call_later(TICK_INTERVAL_S, tick)

        if self._timer is None:
            self._timer = loop.call_later(TICK_INTERVAL_S, tick)

    def tick(self, now: float) -> None:
        """Expire sessions and finish timed-out rebalances; every
        ``offsets_retention_check_interval_ms`` remove the empty groups without committed
        offsets, as Kafka's group cleanup does (so joins that leave groups empty cannot grow
        memory without bound)."""
        self.coordinator.tick(now)
        interval = self.coordinator.config.offsets_retention_check_interval_ms / 1000
        if self._next_cleanup is None:
            self._next_cleanup = now + interval
        elif now >= self._next_cleanup:
            self._next_cleanup = now + interval
            self.coordinator.remove_empty_groups(self.store.has_offsets)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- membership ------------------------------------------------------------------------

    async def join_group(self, version: int, request: dict[str, Any], client_id: str | None,
                         client_host: str = "") -> dict[str, Any]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self.coordinator.join(
            self.clock(), group_id=request["group_id"], member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id"), client_id=client_id or "",
            client_host=client_host, session_timeout_ms=request["session_timeout_ms"],
            rebalance_timeout_ms=request["rebalance_timeout_ms"] if version >= 1 else -1,
            protocol_type=request["protocol_type"],
            protocols=[(p["name"], p["metadata"]) for p in request["protocols"]],
            require_known_member_id=version >= 4, callback=_resolver(future),
        )
        result = await future
        return {
            "throttle_time_ms": 0, "error_code": result.error_code, "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            # ProtocolName is nullable only from v7: older versions get "" on errors
            "protocol_name": result.protocol_name if (result.protocol_name is not None or version >= 7)
            else "",
            "leader": result.leader, "member_id": result.member_id, "members": result.members,
        }

    async def sync_group(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self.coordinator.sync(
            self.clock(), group_id=request["group_id"], member_id=request["member_id"],
            generation_id=request["generation_id"], protocol_type=request.get("protocol_type"),
            protocol_name=request.get("protocol_name"),
            assignments=[(a["member_id"], a["assignment"]) for a in request["assignments"]],
            callback=_resolver(future),
        )
        result = await future
        return {"throttle_time_ms": 0, "error_code": result.error_code,
                "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
                "assignment": result.assignment}

    def heartbeat(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        code = self.coordinator.heartbeat(self.clock(), group_id=request["group_id"],
                                          member_id=request["member_id"],
                                          generation_id=request["generation_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    def leave_group(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        now = self.clock()
        group_id = request["group_id"]
        if version <= 2:
            code = self.coordinator.leave(now, group_id=group_id, member_id=request["member_id"])
            return {"throttle_time_ms": 0, "error_code": code}
        members = []
        for identity in request["members"]:
            code = self.coordinator.leave(now, group_id=group_id, member_id=identity["member_id"])
            members.append({"member_id": identity["member_id"],
                            "group_instance_id": identity.get("group_instance_id"), "error_code": code})
        return {"throttle_time_ms": 0, "error_code": 0, "members": members}

    # -- offsets ---------------------------------------------------------------------------

    def offset_commit(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        group_id = request["group_id"]
        generation = request["generation_id_or_member_epoch"] if version >= 1 else -1
        member_id = request["member_id"] if version >= 1 else ""
        # The empty group id is a valid one here (Kafka keeps it for the clients before 2.2,
        # whose group.id defaulted to ""); only the group-management APIs refuse it.
        group_code = self.coordinator.commit_allowed(self.clock(), group_id, member_id, generation)
        now_ms = int(time.time() * 1000)
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        topics = []
        for topic in request["topics"]:
            partitions = []
            for part in topic["partitions"]:
                index = part["partition_index"]
                code = group_code
                metadata = part["committed_metadata"]
                if metadata is None:  # Kafka stores null as "" (OffsetAndMetadata.NO_METADATA)
                    metadata = ""
                if code == 0 and not self.partition_exists(topic["name"], index):
                    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif code == 0 and metadata is not None and len(metadata.encode()) > MAX_METADATA_SIZE:
                    code = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                if code == 0:
                    accepted[(topic["name"], index)] = CommittedOffset(
                        part["committed_offset"], part.get("committed_leader_epoch", -1),
                        metadata, now_ms)
                partitions.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic["name"], "partitions": partitions})
        if accepted:
            try:
                self.store.commit(group_id, accepted)
            except OSError as exc:  # e.g. a read-only or full log directory
                log.error("group %s: cannot persist committed offsets: %s", group_id, exc)
                for topic in topics:
                    for part in topic["partitions"]:
                        if part["error_code"] == 0:
                            part["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return {"throttle_time_ms": 0, "topics": topics}

    def offset_fetch(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        if version >= 8:
            groups = [{"group_id": g["group_id"], "error_code": 0,
                       "topics": self._fetched_topics(g["group_id"], g["topics"])}
                      for g in request["groups"]]
            return {"throttle_time_ms": 0, "groups": groups}
        topics = self._fetched_topics(request["group_id"], request["topics"])
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    def _fetched_topics(self, group_id: str, asked: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        if asked is None:  # every partition the group committed
            wanted = list(self.store.partitions(group_id).items())
        else:
            wanted = [(t["name"], t["partition_indexes"]) for t in asked]
        topics = []
        for name, indexes in wanted:
            partitions = []
            for index in indexes:
                committed = self.store.fetch(group_id, name, index)
                if committed is None:
                    partitions.append({"partition_index": index, "committed_offset": -1,
                                       "committed_leader_epoch": -1, "metadata": "", "error_code": 0})
                else:
                    partitions.append({"partition_index": index, "committed_offset": committed.offset,
                                       "committed_leader_epoch": committed.leader_epoch,
                                       "metadata": committed.metadata, "error_code": 0})
            topics.append({"name": name, "partitions": partitions})
        return topics

    # -- tools -----------------------------------------------------------------------------

    def list_groups(self, version: int, request: dict[str, Any]) -> dict[str, Any]:
        states = {s.lower() for s in request.get("states_filter") or []}
        types = {t.lower() for t in request.get("types_filter") or []}
        groups = []
        names = set(self.coordinator.groups) | set(self.store.groups())
        for group_id in sorted(names):
            group = self.coordinator.groups.get(group_id)
            state = group.state.value if group is not None else GroupState.EMPTY.value
            protocol_type = (group.protocol_type if group is not None else None) or "consumer"
            if states and state.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            groups.append({"group_id": group_id, "protocol_type": protocol_type, "group_state": state,
                           "group_type": "classic"})
        return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}

    def describe_groups(self, version: int, request: dict[str, Any],
                        client_hosts: dict[str, str] | None = None) -> dict[str, Any]:
        described = []
        for group_id in request["groups"]:
            group = self.coordinator.groups.get(group_id)
            if group is None:
                state = GroupState.EMPTY if group_id in self.store.groups() else GroupState.DEAD
                described.append({"error_code": 0, "group_id": group_id, "group_state": state.value,
                                  "protocol_type": "", "protocol_data": "", "members": [],
                                  "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                continue
            stable = group.state == GroupState.STABLE
            settled = group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
            members = [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol_name or "") if settled else b"",
                "member_assignment": m.assignment if stable else b"",
            } for m in group.members.values()]
            described.append({"error_code": 0, "group_id": group_id, "group_state": group.state.value,
                              "protocol_type": group.protocol_type or "",
                              "protocol_data": (group.protocol_name or "") if settled else "",
                              "members": members,
                              "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
        return {"throttle_time_ms": 0, "groups": described}


def _resolver(future: asyncio.Future[Any]) -> Callable[[Any], None]:
    """A coordinator callback that completes ``future`` (unless the connection went away)."""
    def resolve(result: Any) -> None:
        if not future.done():
            future.set_result(result)
    return resolve
