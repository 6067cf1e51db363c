"""The group relay's translations for old versions, against a stand-in coordinator (no
broker): what an old client reads when Kafka 4 answers a group's error at the top level. And
ListOffsets v0's, against a stand-in leader."""

from __future__ import annotations

import asyncio
import types
from collections import Counter
from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.gateway._group_relay import GroupRelay
from lazyconv.gateway._list_offsets_relay import ListOffsetsRelay
from lazyconv.gateway._upstream import PartitionInfo, TopicInfo
from lazyconv.protocol import _describe_groups as describe_groups
from lazyconv.protocol import _find_coordinator as find_coordinator
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _list_groups as list_groups
from lazyconv.protocol import _list_offsets as list_offsets
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


class _Leader:
    """The leader of t-0, answering ListOffsets as Kafka 4 does (ReplicaManager.fetchOffset): a
    partition named twice in one request is INVALID_REQUEST, each time."""

    OFFSETS = {-1: 17, -2: 3}  # the latest and earliest offsets; 10 for any timestamp

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def version(self, spec: Any) -> int:
        return spec.max_version

    async def request(self, spec: Any, version: int, body: dict, timeout: float | None = None) -> dict:
        self.sent.append(body)
        named = Counter((t["name"], p["partition_index"])
                        for t in body["topics"] for p in t["partitions"])
        return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "timestamp": -1, "leader_epoch": 0,
             **({"error_code": int(ErrorCode.INVALID_REQUEST), "offset": -1}
                if named[(t["name"], p["partition_index"])] > 1 else
                {"error_code": 0, "offset": self.OFFSETS.get(p["timestamp"], 10)})}
            for p in t["partitions"]]} for t in body["topics"]]}


class _View:
    topics = {"t": TopicInfo("t", partitions={0: PartitionInfo(0, leader=1)})}
    state = types.SimpleNamespace(broker_failed=lambda *args: None)

    async def topics_for(self, names: list[str], **kwargs: Any) -> dict[str, TopicInfo]:
        return {name: self.topics[name] for name in names}

    def leader(self, topic: str, partition: int) -> int | None:
        return self.topics[topic].partitions[partition].leader

    def invalidate(self, topic: str | None = None) -> None:
        pass


def _list_offsets_v0(*timestamps: int) -> tuple[list[tuple[int, list[int]]], _Leader]:
    """ListOffsets v0 naming t-0 once per timestamp, through the relay: each entry's (error,
    old_style_offsets), and the leader that answered."""
    leader = _Leader()
    session = types.SimpleNamespace(cluster=_View())

    async def connection(node: int) -> _Leader:
        return leader

    session.connection = connection
    asked = [{"partition_index": 0, "timestamp": t, "max_num_offsets": 1} for t in timestamps]
    answer = asyncio.run(ListOffsetsRelay(None).list_offsets(  # type: ignore[arg-type]
        session, 0, {"replica_id": -1, "topics": [{"name": "t", "partitions": asked}]}))
    decoded = list_offsets.SPEC.decode_response(0, list_offsets.SPEC.encode_response(0, answer))
    return [(p["error_code"], p["old_style_offsets"]) for t in decoded["topics"]
            for p in t["partitions"]], leader


def test_list_offsets_v0_naming_a_partition_twice_gets_its_offset_twice() -> None:
    """v0 answered each entry; v1+ refuses a partition named twice with INVALID_REQUEST (42),
    which a v0 client predates, and the relay sent both upstream, so neither got its offset
    (found by a review). The partition is asked once and both entries get its answer, as the
    guide says."""
    entries, leader = _list_offsets_v0(-1, -1)
    assert entries == [(0, [17]), (0, [17])]
    assert len(leader.sent) == 1
    assert [len(t["partitions"]) for t in leader.sent[-1]["topics"]] == [1]


def test_list_offsets_v0_answers_each_entry_for_its_own_timestamp() -> None:
    """Kafka 3.9 answered each v0 entry for its own timestamp (handleListOffsetRequestV0); the
    relay gave a partition named twice with another timestamp the first one's answer (the
    latest offset for the earliest). Each further timestamp is one more request upstream, each
    naming the partition once."""
    entries, leader = _list_offsets_v0(-1, -2, 1000, -2, -1)
    assert entries == [(0, [17]), (0, [3]), (0, [10]), (0, [3]), (0, [17])]
    assert len(leader.sent) == 3
    assert all(len(t["partitions"]) == 1 for body in leader.sent for t in body["topics"])


@pytest.mark.parametrize("version", [1, 4, 8])
def test_list_offsets_v1_up_refuses_a_partition_named_twice_as_kafka_does(version: int) -> None:
    """Converted v1+ (a version the cluster does not serve) answered a partition named twice
    each entry for its own timestamp, as v0 is answered, where Kafka 3.9 (KafkaApis, its
    duplicatePartitions) and serve answer INVALID_REQUEST on each entry (found by a review).
    It is refused so without asking; a partition named once is answered as before."""
    leader, view = _Leader(), _View()
    view.topics = {"t": TopicInfo("t", partitions={p: PartitionInfo(p, leader=1) for p in (0, 1)})}
    session = types.SimpleNamespace(cluster=view)

    async def connection(node: int) -> _Leader:
        return leader

    session.connection = connection
    asked = [{"partition_index": p, "timestamp": t, "current_leader_epoch": -1,
              "max_num_offsets": 1} for p, t in ((0, -1), (1, -2), (0, -2))]
    request = {"replica_id": -1, "isolation_level": 0,
               "topics": [{"name": "t", "partitions": asked}]}
    answer = asyncio.run(ListOffsetsRelay(None).list_offsets(  # type: ignore[arg-type]
        session, version, request))
    decoded = list_offsets.SPEC.decode_response(
        version, list_offsets.SPEC.encode_response(version, answer))
    assert [(p["partition_index"], p["error_code"], p["offset"]) for t in decoded["topics"]
            for p in t["partitions"]] == [(0, ErrorCode.INVALID_REQUEST, -1), (1, 0, 3),
                                           (0, ErrorCode.INVALID_REQUEST, -1)]
    assert [[(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
            for body in leader.sent] == [[("t", 1)]]



@pytest.mark.parametrize("version", [1, 4, 8])
def test_list_offsets_v1_up_naming_a_partition_twice_in_a_topic_it_may_not_describe(
        version: int) -> None:
    """Kafka checks the client may describe each topic before it looks for partitions named
    twice (3.9 KafkaApis.handleListOffsetRequestV1AndAbove, 4.0 the same, then
    ReplicaManager.fetchOffset): a partition named twice in a topic the client may not describe
    is TOPIC_AUTHORIZATION_FAILED, seen live on Kafka 4.0.1 and 3.9.0. The converted request
    answered INVALID_REQUEST without asking; the metadata of the client's identity says which
    (a topic that does not exist is INVALID_REQUEST, as Kafka answers it), still without asking
    the leader. While that metadata cannot be had, the retriable NOT_LEADER_OR_FOLLOWER."""
    leader, view = _Leader(), _View()
    view.topics = {"t": TopicInfo("t", partitions={p: PartitionInfo(p, leader=1) for p in (0, 1)}),
                   "secret": TopicInfo("secret", int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)),
                   "gone": TopicInfo("gone", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))}
    session = types.SimpleNamespace(cluster=view)

    async def connection(node: int) -> _Leader:
        return leader

    async def topics_for(names: list[str], **kwargs: Any) -> dict[str, TopicInfo]:
        return {name: view.topics[name] for name in names if name in view.topics}

    view.topics_for = topics_for  # type: ignore[method-assign]
    session.connection = connection
    twice = [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
              "max_num_offsets": 1}] * 2
    request = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "secret", "partitions": twice}, {"name": "gone", "partitions": twice},
        {"name": "dark", "partitions": twice},
        {"name": "t", "partitions": [*twice, {**twice[0], "partition_index": 1}]}]}
    answer = asyncio.run(ListOffsetsRelay(None).list_offsets(  # type: ignore[arg-type]
        session, version, request))
    decoded = list_offsets.SPEC.decode_response(
        version, list_offsets.SPEC.encode_response(version, answer))
    refused, invalid = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST
    unreachable = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert [(t["name"], p["partition_index"], p["error_code"]) for t in decoded["topics"]
            for p in t["partitions"]] == [
        ("secret", 0, refused), ("secret", 0, refused), ("gone", 0, invalid),
        ("gone", 0, invalid), ("dark", 0, unreachable), ("dark", 0, unreachable),
        ("t", 0, invalid), ("t", 0, invalid), ("t", 1, 0)]
    assert [[(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
            for body in leader.sent] == [[("t", 1)]]


class _NoCoordinator(_Coordinator):
    """A broken upstream: FindCoordinator v4 and DescribeGroups answer with empty lists."""

    async def request(self, spec: Any, version: int, body: dict, timeout: float | None = None) -> dict:
        self.sent.append((spec.name, version))
        if spec.key == find_coordinator.SPEC.key:
            return {"throttle_time_ms": 0, "coordinators": []}
        return {"throttle_time_ms": 0, "groups": []}


def test_an_upstream_answer_with_no_coordinator_is_a_retriable_error_not_a_crash() -> None:
    """An empty coordinator list raised IndexError, which closed the client's connection (found
    by a review); it is an upstream error, answered COORDINATOR_NOT_AVAILABLE."""
    conn = _NoCoordinator({})
    request = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
    answer = asyncio.run(GroupRelay(_Cluster()).relay(_Session(conn), offset_fetch.SPEC, 1, request))
    assert [p["error_code"] for t in answer["topics"] for p in t["partitions"]] == [
        ErrorCode.COORDINATOR_NOT_AVAILABLE]


def test_an_upstream_describe_groups_answer_without_the_group_is_a_retriable_error() -> None:
    conn = _NoCoordinator({})
    relay = GroupRelay(_Cluster())
    relay.coordinators._nodes[("-", find_coordinator.GROUP_KEY, "g")] = 1  # coordinator known
    answer = asyncio.run(relay.relay(_Session(conn), describe_groups.SPEC, 0, {"groups": ["g"]}))
    assert [(g["group_id"], g["error_code"]) for g in answer["groups"]] == [
        ("g", ErrorCode.COORDINATOR_NOT_AVAILABLE)]


@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE])
def test_a_describe_groups_coordinator_that_moved_is_forgotten(code: int) -> None:
    """DescribeGroups converted by the group relay (a version the cluster does not serve) kept
    the cached coordinator when the group's answer said it was not (or not yet) the one, so
    every retry went back to the same broker (found by a review). It is forgotten, as Kafka's
    client marks the coordinator unknown, and the next request asks the cluster again."""
    conn = _Coordinator({"throttle_time_ms": 0, "groups": [
        {"error_code": int(code), "group_id": "g", "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": [], "authorized_operations": -2147483648}]})
    relay = GroupRelay(_Cluster())
    relay.coordinators._nodes[("-", find_coordinator.GROUP_KEY, "g")] = 1  # coordinator known
    answer = asyncio.run(relay.relay(_Session(conn), describe_groups.SPEC, 0, {"groups": ["g"]}))
    assert [(g["group_id"], g["error_code"]) for g in answer["groups"]] == [("g", code)]
    assert relay.coordinators.cached(find_coordinator.GROUP_KEY, "g", "-") is None
    asyncio.run(relay.relay(_Session(conn), describe_groups.SPEC, 0, {"groups": ["g"]}))
    assert [name for name, _version in conn.sent] == ["DescribeGroups", "FindCoordinator",
                                                      "DescribeGroups"]


def test_a_join_with_a_negative_session_timeout_waits_a_request_timeout() -> None:
    """A negative wait timed the upstream request out at once: COORDINATOR_NOT_AVAILABLE, which
    the client retries for ever, where the coordinator answers INVALID_SESSION_TIMEOUT."""
    relay = GroupRelay(_Cluster())
    assert relay._timeout(join_group.SPEC, {"session_timeout_ms": -60_000,
                                            "rebalance_timeout_ms": -60_000}) == 30.0


class _Throttled(_Coordinator):
    """A broker over the client's request quota: every answer says ``throttle`` ms, and
    FindCoordinator names node 1 (or answers ``find_error``)."""

    def __init__(self, throttle: int, find_error: int = 0) -> None:
        super().__init__({})
        self.throttle = throttle
        self.find_error = find_error

    async def request(self, spec: Any, version: int, body: dict, timeout: float | None = None) -> dict:
        self.sent.append((spec.name, version))
        if spec.key == find_coordinator.SPEC.key:
            return {"throttle_time_ms": self.throttle, "coordinators": [
                {"key": k, "node_id": -1 if self.find_error else 1, "host": "h", "port": 1,
                 "error_code": self.find_error, "error_message": None}
                for k in body["coordinator_keys"]]}
        if spec.key == describe_groups.SPEC.key:
            return {"throttle_time_ms": self.throttle, "groups": [
                {"error_code": 0, "group_id": g, "group_state": "Empty", "protocol_type": "",
                 "protocol_data": "", "members": []} for g in body["groups"]]}
        if spec.key == list_groups.SPEC.key:
            return {"throttle_time_ms": self.throttle, "error_code": 0, "groups": []}
        return {"throttle_time_ms": self.throttle, "error_code": 0}


def test_the_answers_the_group_relay_makes_carry_the_upstream_throttle() -> None:
    """FindCoordinator (answered by the gateway, from the cluster's FindCoordinator),
    DescribeGroups and ListGroups (merged from the coordinators' and brokers' answers) said a
    throttle time of 0 whatever the cluster said (found by a review): a client over its quota
    never backed off, nor was an old client's answer held. They carry the longest throttle of
    the upstream answers they are made of; an answer made of none (the coordinator known
    already) says 0, the gateway having no quota of its own."""
    relay = GroupRelay(_Cluster())
    session = _Session(_Throttled(250))
    me = types.SimpleNamespace(node_id=0, host="gateway", port=9092)
    find = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
    for version in (1, 4):
        relay.coordinators._nodes.clear()
        answer = asyncio.run(relay.find_coordinator(session, version, find, me))  # type: ignore[arg-type]
        assert answer["throttle_time_ms"] == 250, version
        cached = asyncio.run(relay.find_coordinator(session, version, find, me))  # type: ignore[arg-type]
        assert cached["throttle_time_ms"] == 0, version  # no upstream answer: nothing to say
    answer = asyncio.run(relay.relay(session, describe_groups.SPEC, 5,  # type: ignore[arg-type]
                                     {"groups": ["g"], "include_authorized_operations": False}))
    assert answer["throttle_time_ms"] == 250
    answer = asyncio.run(relay.relay(session, list_groups.SPEC, 4,  # type: ignore[arg-type]
                                     {"states_filter": []}))
    assert answer["throttle_time_ms"] == 250
    # a FindCoordinator refused: the refusal carries the cluster's throttle all the same
    refused = GroupRelay(_Cluster())
    answer = asyncio.run(refused.relay(
        _Session(_Throttled(300, int(ErrorCode.GROUP_AUTHORIZATION_FAILED))),  # type: ignore[arg-type]
        heartbeat.SPEC, 4, {"group_id": "g", "generation_id": 1, "member_id": "m",
                            "group_instance_id": None}))
    assert (answer["error_code"], answer["throttle_time_ms"]) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED, 300)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("find_error", [0, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)])
def test_a_join_refused_by_the_relay_is_kafka_s_join_group_error(version: int,
                                                                 find_error: int) -> None:
    """A JoinGroup the relay translates (v0-1) and cannot send (no coordinator found, or the
    cluster refuses the group) is answered as Kafka's JoinGroupRequest.getErrorResponse answers:
    UNKNOWN_MEMBER_ID "" as member id and leader, generation -1, no members; the relay's own
    answer echoed the client's member id (found by a review)."""
    conn = _Throttled(0, find_error) if find_error else _NoCoordinator({})
    request = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
               "member_id": "consumer-1-4f2a", "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": b""}]}
    answer = asyncio.run(GroupRelay(_Cluster()).relay(_Session(conn), join_group.SPEC, version,
                                                      request))
    kafka = {"error_code": find_error or ErrorCode.COORDINATOR_NOT_AVAILABLE,
             "generation_id": -1, "protocol_name": "", "leader": "", "member_id": "",
             "members": []}

    def sent(body: dict[str, Any]) -> dict[str, Any]:
        return join_group.SPEC.decode_response(version,
                                               join_group.SPEC.encode_response(version, body))

    assert sent(answer) == sent(kafka)


@pytest.mark.parametrize("version", [1, 3, 4])
@pytest.mark.parametrize("find_error", [0, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)])
def test_find_coordinator_s_message_is_kafka_s(version: int, find_error: int) -> None:
    """The gateway's own FindCoordinator answer said no message; Kafka 4.0.1 and 3.9.0 write
    their Errors' message(): "NONE" for no error at v1-3, "" in a v4+ coordinator, and the
    error's own text for an error (checked against both brokers when this was fixed)."""
    relay = GroupRelay(_Cluster())
    session = _Session(_Throttled(0, find_error))
    me = types.SimpleNamespace(node_id=0, host="gateway", port=9092)
    find = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
    answer = asyncio.run(relay.find_coordinator(session, version, find, me))
    said = answer["coordinators"][0]["error_message"] if version >= 4 else answer["error_message"]
    if find_error:
        assert said == "Group authorization failed."
    else:
        assert said == ("" if version >= 4 else "NONE")
