"""The group coordinator's state machine with an injected clock (no sockets, no sleeping)."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.serve._group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
    SyncResult,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class Answers:
    """Collects callback answers."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def __call__(self, result: Any) -> None:
        self.got.append(result)

    @property
    def last(self) -> Any:
        assert self.got, "no answer yet"
        return self.got[-1]


def join(c: GroupCoordinator, now: float, member_id: str = "", *, group: str = "g", v4: bool = True,
         protocols=(("range", b"m"),), client_id: str = "cli") -> Answers:
    answers = Answers()
    c.join(now, group_id=group, member_id=member_id, group_instance_id=None, client_id=client_id,
           client_host="/h", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
           protocol_type="consumer", protocols=list(protocols), require_known_member_id=v4,
           callback=answers)
    return answers


def sync(c: GroupCoordinator, now: float, member_id: str, generation: int,
         assignments=(), group: str = "g") -> Answers:
    answers = Answers()
    c.sync(now, group_id=group, member_id=member_id, generation_id=generation, protocol_type=None,
           protocol_name=None, assignments=list(assignments), callback=answers)
    return answers


def joined_member(c: GroupCoordinator, now: float, **kw) -> tuple[str, Answers]:
    """The v4 round trip: MEMBER_ID_REQUIRED with an id, then the real join."""
    first = join(c, now, **kw)
    assert first.last.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.last.member_id
    return first.last.member_id, join(c, now, first.last.member_id, **kw)


def state_of(c: GroupCoordinator, group: str = "g") -> GroupState:
    """The group's state, read through a call so that checks between transitions type-check."""
    return c.groups[group].state


def two_member_group(c: GroupCoordinator, now: float = 0.0) -> tuple[str, str, int]:
    """a joins (generation 1 alone), b joins, a rejoins: generation 2 with both, not synced."""
    a, _ = joined_member(c, now)
    b, b_join = joined_member(c, now)
    join(c, now, a)
    assert b_join.last.error_code == 0 and set(c.groups["g"].members) == {a, b}
    return a, b, b_join.last.generation_id


def test_single_member_join_sync_heartbeat() -> None:
    c = GroupCoordinator()
    member, answers = joined_member(c, 0.0)
    result: JoinResult = answers.last
    assert (result.error_code, result.generation_id, result.leader, result.protocol_name) == (0, 1, member, "range")
    assert result.members == [{"member_id": member, "group_instance_id": None, "metadata": b"m"}]
    s = sync(c, 0.1, member, 1, [(member, b"assignment")])
    assert s.last == SyncResult(0, b"assignment", "consumer", "range")
    assert c.groups["g"].state == GroupState.STABLE
    assert c.heartbeat(1.0, group_id="g", member_id=member, generation_id=1) == 0
    assert c.heartbeat(1.0, group_id="g", member_id=member, generation_id=0) == ErrorCode.ILLEGAL_GENERATION
    assert c.heartbeat(1.0, group_id="g", member_id="nobody", generation_id=1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat(1.0, group_id="other", member_id=member, generation_id=1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_below_v4_gets_an_id_at_once() -> None:
    c = GroupCoordinator()
    answers = join(c, 0.0, v4=False)
    assert answers.last.error_code == 0 and answers.last.member_id.startswith("cli-")


def test_unknown_member_id_on_join() -> None:
    c = GroupCoordinator()
    assert join(c, 0.0, "made-up").last.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_second_member_triggers_a_rebalance_and_the_leader_assigns_both() -> None:
    c = GroupCoordinator()
    a, a_join = joined_member(c, 0.0, client_id="a")
    sync(c, 0.0, a, 1, [(a, b"all")])
    b, b_join = joined_member(c, 1.0, client_id="b")
    assert b_join.got == []  # waits for the existing member to rejoin
    assert state_of(c) == GroupState.PREPARING_REBALANCE
    assert c.heartbeat(1.5, group_id="g", member_id=a, generation_id=1) == ErrorCode.REBALANCE_IN_PROGRESS
    a_rejoin = join(c, 2.0, a)
    assert a_rejoin.last.generation_id == b_join.last.generation_id == 2
    assert a_rejoin.last.leader == a and b_join.last.leader == a
    assert {m["member_id"] for m in a_rejoin.last.members} == {a, b}
    assert b_join.last.members == []  # only the leader sees the members
    b_sync = sync(c, 2.1, b, 2)
    assert b_sync.got == []  # a follower waits for the leader's assignment
    a_sync = sync(c, 2.2, a, 2, [(a, b"p0"), (b, b"p1")])
    assert a_sync.last.assignment == b"p0" and b_sync.last.assignment == b"p1"
    assert state_of(c) == GroupState.STABLE


def test_a_stable_leader_rejoining_unchanged_rebalances_and_waits_for_the_follower() -> None:
    """Kafka: the leader's JoinGroup in a stable group always starts a rebalance (it may have seen
    new metadata), a follower's unchanged one just gets the current generation back. The leader's
    join then waits for the follower, which learns of it from its heartbeat."""
    c = GroupCoordinator()
    a, b, generation = two_member_group(c)
    sync(c, 0.1, b, generation)
    sync(c, 0.1, a, generation, [(a, b"p0"), (b, b"p1")])
    follower_again = join(c, 0.5, b)
    assert follower_again.last.generation_id == generation and state_of(c) == GroupState.STABLE
    leader_again = join(c, 1.0, a)
    assert leader_again.got == [] and state_of(c) == GroupState.PREPARING_REBALANCE
    c.tick(2.0)
    assert leader_again.got == []  # still waiting for b, well inside the rebalance timeout
    assert c.heartbeat(2.5, group_id="g", member_id=b, generation_id=generation) == ErrorCode.REBALANCE_IN_PROGRESS
    b_again = join(c, 3.0, b)
    assert leader_again.last.generation_id == b_again.last.generation_id == generation + 1
    b_sync = sync(c, 3.1, b, generation + 1)
    sync(c, 3.2, a, generation + 1, [(a, b"p0"), (b, b"p1")])
    assert b_sync.last.assignment == b"p1" and state_of(c) == GroupState.STABLE
    # a leader that then goes silent (kafka-python 3.0.x after a lost rejoin) is expired alone
    c.heartbeat(3.2 + SESSION_MS / 1000 - 0.5, group_id="g", member_id=b, generation_id=generation + 1)
    c.tick(3.2 + SESSION_MS / 1000)
    assert set(c.groups["g"].members) == {b} and state_of(c) == GroupState.PREPARING_REBALANCE


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    c = GroupCoordinator()
    a, _ = joined_member(c, 0.0)
    sync(c, 0.0, a, 1, [(a, b"x")])
    b, b_join = joined_member(c, 1.0)
    t = 1.0
    while t < 1.0 + REBALANCE_MS / 1000 - 3:  # a stays alive but never rejoins
        t += 3
        c.heartbeat(t, group_id="g", member_id=a, generation_id=1)
        c.tick(t)
    c.tick(1.0 + REBALANCE_MS / 1000 - 0.01)
    assert b_join.got == []
    c.tick(1.0 + REBALANCE_MS / 1000)
    assert b_join.last.error_code == 0 and b_join.last.generation_id == 2 and b_join.last.leader == b
    assert set(c.groups["g"].members) == {b}


def test_session_timeout_evicts_a_silent_member_and_rebalances() -> None:
    c = GroupCoordinator()
    a, b, gen = two_member_group(c)
    group = c.groups["g"]
    sync(c, 0.0, b, gen)
    sync(c, 0.0, a, gen, [(a, b"1"), (b, b"2")])
    for t in (3.0, 6.0, 9.0):
        assert c.heartbeat(t, group_id="g", member_id=a, generation_id=gen) == 0
        c.tick(t)
    assert set(group.members) == {a, b}
    c.tick(SESSION_MS / 1000 + 0.01)  # b never heartbeat
    assert set(group.members) == {a} and group.state == GroupState.PREPARING_REBALANCE
    assert c.heartbeat(10.5, group_id="g", member_id=a, generation_id=gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert join(c, 10.6, a).last.generation_id == gen + 1


def test_leave_group_rebalances_the_rest() -> None:
    c = GroupCoordinator()
    a, b, gen = two_member_group(c)
    sync(c, 0.0, b, gen)
    sync(c, 0.0, a, gen, [(a, b"1"), (b, b"2")])
    assert c.leave(1.0, group_id="g", member_id=a) == 0
    assert c.leave(1.0, group_id="g", member_id=a) == ErrorCode.UNKNOWN_MEMBER_ID
    rejoin = join(c, 1.1, b)
    assert rejoin.last.generation_id == gen + 1 and rejoin.last.leader == b
    assert c.leave(2.0, group_id="g", member_id=b) == 0
    assert c.groups["g"].state == GroupState.EMPTY


def test_sync_errors() -> None:
    c = GroupCoordinator()
    a, _ = joined_member(c, 0.0)
    assert sync(c, 0.0, a, 7).last.error_code == ErrorCode.ILLEGAL_GENERATION
    assert sync(c, 0.0, "x", 1).last.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    sync(c, 0.0, a, 1, [(a, b"1")])
    joined_member(c, 1.0)
    assert sync(c, 1.0, a, 1).last.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_rebalance_during_completing_fails_waiting_followers() -> None:
    c = GroupCoordinator()
    a, b, gen = two_member_group(c)
    waiting = sync(c, 0.1, b, gen)
    joined_member(c, 0.2)  # a third member arrives before the leader synced
    assert waiting.last.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_leader_that_never_syncs_restarts_the_rebalance() -> None:
    c = GroupCoordinator()
    a, b, gen = two_member_group(c)
    waiting = sync(c, 0.1, b, gen)
    t = 0.0
    while t < REBALANCE_MS / 1000 - 3:  # the leader heartbeats but never sends SyncGroup
        t += 3
        assert c.heartbeat(t, group_id="g", member_id=a, generation_id=gen) == 0
        c.tick(t)
    assert waiting.got == []
    c.tick(REBALANCE_MS / 1000 + 0.01)
    assert c.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert set(c.groups["g"].members) == {b}
    assert waiting.last.error_code == ErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"group": ""}, ErrorCode.INVALID_GROUP_ID),
    ({"protocols": ()}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
])
def test_invalid_joins(kwargs, code) -> None:
    assert join(GroupCoordinator(), 0.0, **kwargs).last.error_code == code


def test_session_timeout_bounds_and_incompatible_protocols() -> None:
    c = GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=20_000))
    assert join(c, 0.0).last.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    c = GroupCoordinator()
    joined_member(c, 0.0)
    assert join(c, 0.1, protocols=(("roundrobin", b""),)).last.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_type_is_the_first_members_also_before_the_first_generation() -> None:
    """Kafka's group takes its protocol type from the member that joins it empty: during the
    first (delayed) rebalance a member of another type was let in, and after the group emptied
    the old type turned away members of a new one (found by a review)."""
    def typed_join(c: GroupCoordinator, now: float, protocol_type: str) -> Answers:
        answers = Answers()
        c.join(now, group_id="g", member_id="", group_instance_id=None, client_id="cli",
               client_host="/h", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
               protocol_type=protocol_type, protocols=[("range", b"")], require_known_member_id=False,
               callback=answers)
        return answers

    c = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    typed_join(c, 0.0, "consumer")
    assert typed_join(c, 1.0, "connect").last.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    c.tick(3.0)
    (member,) = c.groups["g"].members
    assert c.leave(4.0, group_id="g", member_id=member) == 0
    x, y = typed_join(c, 10.0, "connect"), typed_join(c, 11.0, "connect")
    c.tick(13.0)
    c.tick(16.0)  # (y joined during the delay, which starts over)
    assert x.last.error_code == y.last.error_code == 0 and x.last.protocol_type == "connect"


def test_protocol_is_chosen_by_votes_among_common_ones() -> None:
    c = GroupCoordinator()
    a, _ = joined_member(c, 0.0, protocols=(("range", b"ra"), ("sticky", b"sa")))
    b, b_join = joined_member(c, 0.0, protocols=(("sticky", b"sb"), ("range", b"rb")))
    c_id, c_join = joined_member(c, 0.0, protocols=(("sticky", b"sc"),))
    a_join = join(c, 0.0, a, protocols=(("range", b"ra"), ("sticky", b"sa")))
    assert a_join.last.protocol_name == "sticky"
    assert {m["member_id"]: m["metadata"] for m in a_join.last.members} == {a: b"sa", b: b"sb", c_id: b"sc"}


def test_initial_rebalance_delay_lets_members_arrive_together() -> None:
    c = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    a, a_join = joined_member(c, 0.0)
    c.tick(2.9)
    assert a_join.got == []
    c.tick(3.0)
    assert a_join.last.generation_id == 1


def test_initial_rebalance_delay_starts_over_while_members_keep_arriving() -> None:
    """Kafka's InitialDelayedJoin: a member joining during the delay earns the group another
    delay, up to the rebalance timeout; the group completed after the first delay, so consumers
    started a few seconds apart went through a rebalance each (found by a review)."""
    c = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    _, a_join = joined_member(c, 0.0)
    _, b_join = joined_member(c, 2.5)
    c.tick(3.0)
    _, c_join = joined_member(c, 5.0)
    c.tick(6.0)
    c.tick(8.9)
    assert a_join.got == b_join.got == c_join.got == []
    c.tick(9.0)
    assert a_join.last.generation_id == b_join.last.generation_id == c_join.last.generation_id == 1
    assert len(a_join.last.members) == 3
    # the extensions end with the rebalance timeout (30 s): 3 s, then ten more at most
    c = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    _, first = joined_member(c, 0.0)
    now = 0.0
    while not first.got:
        now += 1.0
        joined_member(c, now)
        c.tick(now)
    assert now == 30.0 and first.last.generation_id == 1


def test_commit_rules() -> None:
    c = GroupCoordinator()
    assert c.commit_allowed(0.0, "simple", "", -1) == 0  # no group: a "simple" commit
    a, _ = joined_member(c, 0.0)
    assert c.commit_allowed(0.0, "g", a, 1) == ErrorCode.REBALANCE_IN_PROGRESS  # completing
    sync(c, 0.0, a, 1, [(a, b"")])
    assert c.commit_allowed(0.0, "g", a, 1) == 0
    assert c.commit_allowed(0.0, "g", a, 0) == ErrorCode.ILLEGAL_GENERATION
    assert c.commit_allowed(0.0, "g", "x", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.commit_allowed(0.0, "g", "", -1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_restarting_replaces_its_previous_incarnation() -> None:
    c = GroupCoordinator()

    def static_join(now: float) -> Answers:
        answers = Answers()
        c.join(now, group_id="g", member_id="", group_instance_id="instance-1", client_id="cli",
               client_host="/h", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
               protocol_type="consumer", protocols=[("range", b"m")], require_known_member_id=True,
               callback=answers)
        return answers

    first = static_join(0.0)
    assert first.last.error_code == 0  # no MEMBER_ID_REQUIRED round trip for static members
    old_id = first.last.member_id
    sync(c, 0.0, old_id, first.last.generation_id, [(old_id, b"a")])
    second = static_join(1.0)
    assert second.last.error_code == 0 and second.last.member_id != old_id
    assert set(c.groups["g"].members) == {second.last.member_id}
    assert c.heartbeat(1.0, group_id="g", member_id=old_id, generation_id=1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_join_with_a_member_id_creates_no_group() -> None:
    # Kafka creates a group only for a join without a member id; each of these made one that
    # stayed (a client looping such joins grew serve's memory without bound)
    c = GroupCoordinator()
    for i in range(1000):
        assert join(c, 0.0, "made-up", group=f"g{i}").last.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.groups == {}


def test_empty_groups_without_committed_offsets_are_removed_every_check_interval() -> None:
    from lazyconv.serve._group_apis import GroupApis
    from lazyconv.serve._offset_store import CommittedOffset, OffsetStore

    store = OffsetStore(None)
    apis = GroupApis(store, lambda topic, partition: True,
                     config=CoordinatorConfig(offsets_retention_check_interval_ms=60_000))
    c = apis.coordinator
    apis.tick(0.0)  # the first check is one interval later, as Kafka schedules it
    for i in range(500):
        join(c, 0.0, group=f"v4-{i}")  # MEMBER_ID_REQUIRED, never followed: Empty with a pending id
        join(c, 0.0, group=f"v3-{i}", v4=False)  # a member whose session will expire
    kept, _ = joined_member(c, 0.0, group="kept")
    store.commit("kept", {("t", 0): CommittedOffset(5)})
    assert len(c.groups) == 1001
    apis.tick(SESSION_MS / 1000 + 1)  # sessions and pending ids expired: every group Empty
    assert len(c.groups) == 1001 and state_of(c, "kept") == GroupState.EMPTY
    apis.tick(59.0)
    assert len(c.groups) == 1001  # not yet the interval
    apis.tick(60.0)
    assert list(c.groups) == ["kept"]  # the one with committed offsets stays, generation and all
    assert c.groups["kept"].generation_id > 0
    apis.tick(120.0)
    assert list(c.groups) == ["kept"]
    # a removed group is created again by the next join without an id
    assert join(c, 121.0, group="v4-0").last.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert "v4-0" in c.groups


def test_only_empty_groups_are_removed() -> None:
    c = GroupCoordinator()
    member, _ = joined_member(c, 0.0)
    assert c.remove_empty_groups(lambda group_id: False) == []
    assert c.leave(1.0, group_id="g", member_id=member) == 0
    assert c.remove_empty_groups(lambda group_id: False) == ["g"] and c.groups == {}
