"""A single-node classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), sans-IO.

It follows Kafka's GroupCoordinator state machine for the classic protocol (clients compute
the assignment; the leader's SyncGroup carries it):

    Empty ──join──▶ PreparingRebalance ──every member joined / rebalance timeout──▶
    CompletingRebalance ──leader's SyncGroup──▶ Stable ──join/leave/expiry──▶ PreparingRebalance

Nothing here does I/O or reads a clock by itself: every call takes ``now`` (seconds, monotonic)
and the owner calls :meth:`GroupCoordinator.tick` periodically to expire sessions and finish
rebalances that timed out. A JoinGroup or SyncGroup that must wait is parked with a callback;
the callback runs (synchronously, inside a later call) when its answer is known.

Kafka's error codes apply: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID and, for JoinGroup v4+,
the MEMBER_ID_REQUIRED round trip of KIP-394 (dynamic members only). Static membership
(``group.instance.id``) is only approximated: a member joining with a known instance id replaces
the previous member of that instance, through a rebalance (Kafka would keep its assignment).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lazyconv.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["GroupCoordinator", "GroupState", "Group", "Member", "JoinResult", "SyncResult",
           "CoordinatorConfig"]


class GroupState(Enum):
    """Kafka's classic group states, with the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class CoordinatorConfig:
    """Kafka's group.* broker settings (defaults as Kafka's)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka: 3000)
    # how often empty groups without committed offsets are removed (Kafka's cleanup runs
    # every offsets.retention.check.interval.ms)
    offsets_retention_check_interval_ms: int = 600000


@dataclass
class JoinResult:
    """What a JoinGroup answers (the response body minus version-specific fields)."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SyncResult:
    """What a SyncGroup answers."""

    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass
class Member:
    """One member of a group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_heartbeat: float
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def session_expired(self, now: float) -> bool:
        # A member parked in JoinGroup or SyncGroup is alive (Kafka's shouldKeepAlive).
        if self.join_callback is not None or self.sync_callback is not None:
            return False
        return now >= self.last_heartbeat + self.session_timeout_ms / 1000


@dataclass
class Group:
    """One consumer group's membership state."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, float] = field(default_factory=dict)  # member id -> expiry
    rebalance_deadline: float = 0.0
    join_not_before: float = 0.0  # the initial rebalance delay
    # Kafka's InitialDelayedJoin: while members keep arriving, the delay starts over (within
    # the rebalance timeout); the delay last waited and the time left to extend into
    initial_delay: float = 0.0
    initial_remaining: float = 0.0
    new_member_added: bool = False
    sync_deadline: float = 0.0

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-preference votes (Kafka)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])


class GroupCoordinator:
    """Every classic group of one broker. All methods take the current time ``now``."""

    def __init__(self, config: CoordinatorConfig | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.groups: dict[str, Group] = {}

    # -- JoinGroup -------------------------------------------------------------------------

    def join(self, now: float, *, group_id: str, member_id: str, group_instance_id: str | None,
             client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
             protocol_type: str, protocols: list[tuple[str, bytes]], require_known_member_id: bool,
             callback: JoinCallback) -> None:
        """Handle a JoinGroup; ``callback`` gets the answer now or when the rebalance completes."""
        def fail(code: ErrorCode) -> None:
            callback(JoinResult(int(code), member_id))

        if not group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if rebalance_timeout_ms < 0:  # JoinGroup v0: the session timeout serves as both
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                # Kafka creates a group only for a join without a member id: an id names a
                # member of a group that does not exist (and a group made for it would stay)
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = Group(group_id)
        if group.state == GroupState.DEAD:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not protocols or not self._protocols_compatible(group, protocol_type, protocols):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        if not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if group_instance_id is not None:
                # A static member restarting: it replaces its previous incarnation at once
                # (Kafka keeps the old id and skips the rebalance; here the group rebalances).
                for old in list(group.members.values()):
                    if old.group_instance_id == group_instance_id:
                        log.info("group %s: instance %s replaces member %s", group_id,
                                 group_instance_id, old.member_id)
                        self._remove_member(group, old.member_id, now, "was replaced")
                require_known_member_id = False  # KIP-394 applies to dynamic members only
            if require_known_member_id:
                # KIP-394: hand out the id and let the client come back with it.
                group.pending_members[new_id] = now + session_timeout_ms / 1000
                callback(JoinResult(int(ErrorCode.MEMBER_ID_REQUIRED), new_id))
                return None
            member_id = new_id
        elif member_id not in group.members and member_id not in group.pending_members:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)

        member = group.members.get(member_id)
        if member is None:
            group.pending_members.pop(member_id, None)
            if not group.members:  # the first member sets the type the others must have (Kafka)
                group.protocol_type = protocol_type
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols), now)
            group.members[member_id] = member
            if group.state == GroupState.PREPARING_REBALANCE:
                group.new_member_added = True
            if group.leader_id is None:
                group.leader_id = member_id
            member.join_callback = callback
            log.info("group %s: member %s joins", group_id, member_id)
            self._prepare_rebalance(group, now, f"member {member_id} joined")
        else:
            changed = member.protocols != list(protocols)
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.last_heartbeat = now
            if group.state == GroupState.PREPARING_REBALANCE:
                member.join_callback = callback
            elif group.state == GroupState.COMPLETING_REBALANCE and not changed:
                callback(self._join_result(group, member))  # a retried join: same answer
                return None
            elif group.state == GroupState.STABLE and not changed and member_id != group.leader_id:
                callback(self._join_result(group, member))
                return None
            else:
                member.join_callback = callback
                self._prepare_rebalance(group, now, f"member {member_id} rejoined")
        self._try_complete_join(group, now)
        return None

    def _protocols_compatible(self, group: Group, protocol_type: str,
                              protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type:
            return False
        if not group.members:
            return True
        if group.protocol_type != protocol_type:
            return False
        candidates = group.candidate_protocols()
        return not candidates or bool(candidates & {name for name, _ in protocols})

    # -- SyncGroup -------------------------------------------------------------------------

    def sync(self, now: float, *, group_id: str, member_id: str, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: list[tuple[str, bytes]], callback: SyncCallback) -> None:
        """Handle a SyncGroup; followers wait for the leader's assignments."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return callback(SyncResult(int(ErrorCode.UNKNOWN_MEMBER_ID)))
        if generation_id != group.generation_id:
            return callback(SyncResult(int(ErrorCode.ILLEGAL_GENERATION)))
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return callback(SyncResult(int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)))
        member = group.members[member_id]
        member.last_heartbeat = now
        if group.state == GroupState.PREPARING_REBALANCE:
            return callback(SyncResult(int(ErrorCode.REBALANCE_IN_PROGRESS)))
        if group.state == GroupState.STABLE:
            return callback(self._sync_result(group, member))
        if group.state != GroupState.COMPLETING_REBALANCE:
            return callback(SyncResult(int(ErrorCode.UNKNOWN_MEMBER_ID)))
        member.sync_callback = callback
        if member_id == group.leader_id:
            given = dict(assignments)
            for mid, m in group.members.items():
                m.assignment = given.get(mid, b"")
            group.state = GroupState.STABLE
            log.info("group %s: generation %d is stable with %d members", group_id,
                     group.generation_id, len(group.members))
            for m in group.members.values():
                m.last_heartbeat = now
                if m.sync_callback is not None:
                    cb, m.sync_callback = m.sync_callback, None
                    cb(self._sync_result(group, m))
        return None

    # -- Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, now: float, *, group_id: str, member_id: str, generation_id: int) -> int:
        """Handle a Heartbeat; returns its error code."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return int(ErrorCode.ILLEGAL_GENERATION)
        group.members[member_id].last_heartbeat = now
        if group.state == GroupState.PREPARING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return int(ErrorCode.NONE)

    def leave(self, now: float, *, group_id: str, member_id: str) -> int:
        """Handle one member of a LeaveGroup; returns its error code."""
        group = self.groups.get(group_id)
        if group is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return int(ErrorCode.NONE)
        if member_id not in group.members:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        log.info("group %s: member %s leaves", group_id, member_id)
        self._remove_member(group, member_id, now, "left the group")
        return int(ErrorCode.NONE)

    # -- timers ----------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Expire dead members and pending ids, finish timed-out rebalances."""
        for group in list(self.groups.values()):
            for pending, expiry in list(group.pending_members.items()):
                if now >= expiry:
                    del group.pending_members[pending]
            for member in list(group.members.values()):
                if member.member_id in group.members and member.session_expired(now):
                    log.info("group %s: member %s's session expired", group.group_id, member.member_id)
                    self._remove_member(group, member.member_id, now, "session expired")
            if group.state == GroupState.PREPARING_REBALANCE:
                if now >= group.rebalance_deadline:
                    # members that did not rejoin in time are out
                    for member in list(group.members.values()):
                        if member.join_callback is None:
                            log.info("group %s: member %s did not rejoin in time", group.group_id,
                                     member.member_id)
                            del group.members[member.member_id]
                    group.pending_members.clear()
                    self._complete_join(group, now)
                else:
                    self._try_complete_join(group, now)
            elif group.state == GroupState.COMPLETING_REBALANCE and now >= group.sync_deadline:
                # the leader never sent the assignment: start over without the silent members
                for member in list(group.members.values()):
                    if member.sync_callback is None:
                        del group.members[member.member_id]
                self._prepare_rebalance(group, now, "the leader's SyncGroup did not come")

    def remove_empty_groups(self, keep: Callable[[str], bool]) -> list[str]:
        """Remove every Empty group for which ``keep(group_id)`` is false (the owner keeps the
        groups with committed offsets); returns their ids.

        Kafka's periodic cleanup (every offsets.retention.check.interval.ms) does the same: an
        Empty group whose offsets are all gone becomes Dead and is forgotten, whatever ids it
        had handed out to pending members (their next JoinGroup gets UNKNOWN_MEMBER_ID)."""
        removed = [group_id for group_id, group in self.groups.items()
                   if group.state == GroupState.EMPTY and not keep(group_id)]
        for group_id in removed:
            self.groups.pop(group_id).state = GroupState.DEAD
        if removed:
            log.info("removed %d empty groups without committed offsets", len(removed))
        return removed

    # -- state transitions -----------------------------------------------------------------

    def _remove_member(self, group: Group, member_id: str, now: float, why: str) -> None:
        member = group.members.pop(member_id)
        if member.join_callback is not None:
            cb, member.join_callback = member.join_callback, None
            cb(JoinResult(int(ErrorCode.UNKNOWN_MEMBER_ID), member_id))
        if member.sync_callback is not None:
            cb2, member.sync_callback = member.sync_callback, None
            cb2(SyncResult(int(ErrorCode.UNKNOWN_MEMBER_ID)))
        if group.leader_id == member_id:
            group.leader_id = next(iter(group.members), None)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, f"member {member_id} {why}")
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now)
        elif not group.members:
            group.state = GroupState.EMPTY

    def _prepare_rebalance(self, group: Group, now: float, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                if member.sync_callback is not None:
                    cb, member.sync_callback = member.sync_callback, None
                    cb(SyncResult(int(ErrorCode.REBALANCE_IN_PROGRESS)))
        if group.state != GroupState.PREPARING_REBALANCE:
            log.info("group %s: preparing a rebalance (%s)", group.group_id, reason)
            timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            if group.state == GroupState.EMPTY:
                delay_ms = self.config.initial_rebalance_delay_ms
                group.initial_delay = delay_ms / 1000
                group.initial_remaining = max(timeout - delay_ms, 0) / 1000 if delay_ms else 0.0
                group.join_not_before = now + group.initial_delay
            else:
                group.initial_remaining = 0.0
                group.join_not_before = now
            group.new_member_added = False
            group.state = GroupState.PREPARING_REBALANCE
            group.rebalance_deadline = now + timeout / 1000

    def _try_complete_join(self, group: Group, now: float) -> None:
        if group.state != GroupState.PREPARING_REBALANCE or now < group.join_not_before:
            return
        if group.new_member_added and group.initial_remaining > 0:
            # someone joined during the initial delay: wait once more for the ones behind
            delay = min(self.config.initial_rebalance_delay_ms / 1000, group.initial_remaining)
            group.initial_remaining = max(group.initial_remaining - group.initial_delay, 0.0)
            group.initial_delay = delay
            group.new_member_added = False
            group.join_not_before = now + delay
            return
        if group.pending_members:
            return
        if all(m.join_callback is not None for m in group.members.values()):
            self._complete_join(group, now)

    def _complete_join(self, group: Group, now: float) -> None:
        group.generation_id += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            return
        first = next(iter(group.members.values()))
        group.protocol_type = first.protocol_type
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = first.member_id
        group.state = GroupState.COMPLETING_REBALANCE
        group.sync_deadline = now + max(m.rebalance_timeout_ms for m in group.members.values()) / 1000
        log.info("group %s: generation %d with %d members, leader %s, protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.leader_id, group.protocol_name)
        for member in group.members.values():
            member.last_heartbeat = now
            member.assignment = b""
            if member.join_callback is not None:
                cb, member.join_callback = member.join_callback, None
                cb(self._join_result(group, member))

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name or "")}
                       for m in group.members.values()]
        return JoinResult(int(ErrorCode.NONE), member.member_id, group.generation_id,
                          group.protocol_type, group.protocol_name, group.leader_id or "", members)

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(int(ErrorCode.NONE), member.assignment, group.protocol_type,
                          group.protocol_name)

    # -- for OffsetCommit and tools ----------------------------------------------------------

    def commit_allowed(self, now: float, group_id: str, member_id: str, generation_id: int) -> int:
        """Error code for an OffsetCommit from ``member_id`` at ``generation_id`` (Kafka's rules:
        a "simple" commit, generation < 0, needs an empty group)."""
        group = self.groups.get(group_id)
        if generation_id < 0 and (group is None or group.state in (GroupState.EMPTY, GroupState.DEAD)):
            return int(ErrorCode.NONE)
        if group is None or member_id not in group.members:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return int(ErrorCode.ILLEGAL_GENERATION)
        if group.state == GroupState.COMPLETING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        group.members[member_id].last_heartbeat = now  # a commit counts as a heartbeat (Kafka)
        return int(ErrorCode.NONE)
