"""Requests split per partition leader (ListOffsets, DeleteRecords, OffsetForLeaderEpoch,
DescribeProducers), relayed against stand-in brokers (no cluster): the entries the gateway
builds itself for the partitions it cannot route are the ones Kafka answers for them (Kafka
4.0.1's and 3.9.0's answers, seen live, in the expectations)."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace
from typing import Any

from lazyconv._send import drain
from lazyconv.errors import ErrorCode
from lazyconv.gateway._api_relay import ApiRelay
from lazyconv.gateway._coordinators import Coordinators
from lazyconv.gateway._upstream import PartitionInfo, TopicInfo
from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY
from lazyconv.net._model import Listener
from lazyconv.protocol import KAFKA_API_BY_KEY
from lazyconv.protocol._connection import Request, response_frame
from lazyconv.protocol._headers import decode_response_header
from lazyconv.protocol._primitives import Reader

UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
REFUSED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
INVALID_TOPIC = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)


class _Leader:
    """Node 1, the leader of every partition that has one: answers each partition as asked
    (``answer(request partition)``), recording what it was sent."""

    def __init__(self, spec: Any, answer: Any) -> None:
        self.spec = spec
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    async def relay(self, spec: Any, version: int, payload: Any, timeout: float | None = None) -> bytes:
        body = spec.decode_request(version, bytes(payload))
        self.sent.append(body)
        return response_frame(1, spec.response_header_version(version),
                              spec.encode_response(version, self.answer(body)))[4:]


class _View:
    """The metadata of the client's identity: t (partitions 0 and 1, only 0 with a leader),
    gone (does not exist), secret (may not be described), "a b" (an invalid name), "x y" (an
    invalid name that may not be described: Metadata checks that first)."""

    request_timeout = 30
    brokers = {1: "a"}
    state = SimpleNamespace(warn=lambda *a: None, broker_failed=lambda *a: None)

    def __init__(self) -> None:
        self.topics = {
            "t": TopicInfo("t", partitions={0: PartitionInfo(0, 1), 1: PartitionInfo(1, -1)}),
            "gone": TopicInfo("gone", UNKNOWN), "secret": TopicInfo("secret", REFUSED),
            "a b": TopicInfo("a b", INVALID_TOPIC), "x y": TopicInfo("x y", REFUSED)}

    async def topics_for(self, names: list[str]) -> dict[str, TopicInfo]:
        return {n: self.topics[n] for n in names if n in self.topics}

    def leader(self, topic: str, partition: int) -> int | None:
        info = self.topics.get(topic)
        part = info.partitions.get(partition) if info else None
        return part.leader if part is not None and part.leader >= 0 else None

    def invalidate(self, topic: str | None = None) -> None:
        pass


class _Session:
    identity = ANONYMOUS_IDENTITY

    def __init__(self, leader: _Leader, view: _View) -> None:
        self.leader = leader
        self.cluster = view

    async def connection(self, node: int) -> _Leader:
        assert node == 1
        return self.leader

    async def any_connection(self) -> _Leader:
        return self.leader


def _relay(name: str, version: int, body: dict[str, Any], answer: Any) -> tuple[dict[str, Any], _Leader]:
    """``body`` relayed by the gateway; its answer as the client reads it, and the leader."""
    spec = next(s for s in KAFKA_API_BY_KEY.values() if s.name == name)
    view = _View()
    leader = _Leader(spec, answer)
    request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                      memoryview(spec.encode_request(version, body)), 0)
    relay = ApiRelay(view, Coordinators(view))  # type: ignore[arg-type]
    response = asyncio.run(relay.relay(request, _Session(leader, view),  # type: ignore[arg-type]
                                       Listener(0, "gateway", 9092)))
    out = io.BytesIO()
    drain(response.send, out)
    reader = Reader(out.getvalue()[4:])
    decode_response_header(reader, spec.response_header_version(version))
    return spec.decode_response(version, reader), leader


# what the request names: a partition with a leader, then the ones the gateway cannot route
_NAMED = [("t", 0), ("t", 5), ("t", 1), ("gone", 0), ("secret", 0), ("a b", 0), ("x y", 0)]


def _topics(name_field: str, partitions_field: str, partition: Any) -> list[dict[str, Any]]:
    topics: dict[str, list[Any]] = {}
    for topic, index in _NAMED:
        topics.setdefault(topic, []).append(partition(index))
    return [{name_field: t, partitions_field: parts} for t, parts in topics.items()]


def test_unroutable_partitions_are_answered_as_kafka_answers_them() -> None:
    """Kafka 4.0.1 and 3.9.0 answer a partition of a topic that does not exist (or may not be
    described, or a partition the topic lacks) OffsetForLeaderEpoch with leader epoch and end
    offset -1, ListOffsets with timestamp and offset -1, DeleteRecords with low watermark -1,
    and DescribeProducers with the error's message when the whole topic is refused (unknown:
    "This server does not host this topic-partition.", not authorized: "Topic authorization
    failed.", an invalid name: Topic.validate's reason) and none for one partition. The gateway
    copied the request's leader epoch and timestamp, gave low watermark 0 and no message."""
    codes = {("t", 5): UNKNOWN, ("t", 1): NOT_LEADER, ("gone", 0): UNKNOWN,
             ("secret", 0): REFUSED, ("a b", 0): UNKNOWN, ("x y", 0): REFUSED}

    epochs, leader = _relay("OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": _topics(
        "topic", "partitions", lambda p: {"partition": p, "current_leader_epoch": 7,
                                          "leader_epoch": 5})},
        lambda body: {"throttle_time_ms": 0, "topics": [{"topic": t["topic"], "partitions": [
            {"error_code": 0, "partition": p["partition"], "leader_epoch": 5, "end_offset": 40}
            for p in t["partitions"]]} for t in body["topics"]]})
    got = {(t["topic"], p["partition"]): (p["error_code"], p["leader_epoch"], p["end_offset"])
           for t in epochs["topics"] for p in t["partitions"]}
    assert got == {("t", 0): (0, 5, 40), **{tp: (code, -1, -1) for tp, code in codes.items()}}

    offsets, leader = _relay("ListOffsets", 7, {"replica_id": -1, "isolation_level": 0,
                                                "topics": _topics(
        "name", "partitions", lambda p: {"partition_index": p, "current_leader_epoch": 3,
                                         "timestamp": 1000})},
        lambda body: {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": 0, "timestamp": 1001,
             "offset": 40, "leader_epoch": 3} for p in t["partitions"]]} for t in body["topics"]]})
    got = {(t["name"], p["partition_index"]): (p["error_code"], p["timestamp"], p["offset"],
                                               p["leader_epoch"])
           for t in offsets["topics"] for p in t["partitions"]}
    assert got == {("t", 0): (0, 1001, 40, 3),
                   **{tp: (code, -1, -1, -1) for tp, code in codes.items()}}

    deleted, leader = _relay("DeleteRecords", 2, {"timeout_ms": 1000, "topics": _topics(
        "name", "partitions", lambda p: {"partition_index": p, "offset": 3})},
        lambda body: {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "low_watermark": 3, "error_code": 0}
            for p in t["partitions"]]} for t in body["topics"]]})
    got = {(t["name"], p["partition_index"]): (p["error_code"], p["low_watermark"])
           for t in deleted["topics"] for p in t["partitions"]}
    assert got == {("t", 0): (0, 3), **{tp: (code, -1) for tp, code in codes.items()}}

    producers, leader = _relay("DescribeProducers", 0, {"topics": _topics(
        "name", "partition_indexes", lambda p: p)},
        lambda body: {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p, "error_code": 0, "error_message": None,
             "active_producers": []} for p in t["partition_indexes"]]} for t in body["topics"]]})
    got = {(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
           for t in producers["topics"] for p in t["partitions"]}
    assert got == {
        ("t", 0): (0, None), ("t", 5): (UNKNOWN, None), ("t", 1): (NOT_LEADER, None),
        ("gone", 0): (UNKNOWN, "This server does not host this topic-partition."),
        ("secret", 0): (REFUSED, "Topic authorization failed."),
        ("a b", 0): (INVALID_TOPIC, "Topic name is invalid: 'a b' contains one or more "
                                    "characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("x y", 0): (INVALID_TOPIC, "Topic name is invalid: 'x y' contains one or more "
                                    "characters other than ASCII alphanumerics, '.', '_' and '-'")}
    assert [[(t["name"], t["partition_indexes"]) for t in body["topics"]]
            for body in leader.sent] == [[("t", [0])]]


def test_list_offsets_naming_a_partition_twice_is_refused_as_kafka_refuses_it() -> None:
    """Kafka (3.9 KafkaApis, 4.0 ReplicaManager.fetchOffset) checks the client may describe the
    topic, then a partition named twice, before it looks for the partition: INVALID_REQUEST on
    a partition named twice whatever its topic or leader, TOPIC_AUTHORIZATION_FAILED on a topic
    the client may not describe. The gateway answered the ones it could not route with the
    routing error (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_TOPIC_EXCEPTION)
    instead; a topic whose metadata it could not get keeps the retriable NOT_LEADER_OR_FOLLOWER.
    A partition with a leader is the leader's to refuse (as the stand-in, Kafka 3.9, does)."""
    named = [("t", 0), ("t", 5), ("t", 1), ("gone", 0), ("secret", 0), ("a b", 0), ("dark", 0)]
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index in named + named:
        topics.setdefault(topic, []).append(
            {"partition_index": index, "current_leader_epoch": -1, "timestamp": -1})

    def leader(body: dict[str, Any]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": INVALID_REQUEST,
             "timestamp": -1, "offset": -1} for p in t["partitions"]]} for t in body["topics"]]}

    for version in (1, 7, 10):
        offsets, upstream = _relay("ListOffsets", version, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}, leader)
        got = [(t["name"], p["partition_index"], p["error_code"])
               for t in offsets["topics"] for p in t["partitions"]]
        assert got == [(t, q["partition_index"], {"secret": REFUSED, "dark": NOT_LEADER}.get(
            t, INVALID_REQUEST)) for t, parts in topics.items() for q in parts], version
        assert [[(t["name"], [p["partition_index"] for p in t["partitions"]])
                 for t in body["topics"]] for body in upstream.sent] == [[("t", [0, 0])]]



def test_a_topic_with_an_invalid_name_is_answered_as_kafka_answers_it() -> None:
    """Kafka's Metadata answers a topic whose name is invalid INVALID_TOPIC_EXCEPTION, but the
    partition-routed APIs never look at the name: ListOffsets, OffsetForLeaderEpoch and
    DeleteRecords (and Fetch and Produce) answer UNKNOWN_TOPIC_OR_PARTITION for it, as for any
    topic that does not exist (Kafka 4.0.1 and 3.9.0, seen live); DescribeProducers checks the
    name first of all (KafkaApis' checkValidTopic, before the client's authorization):
    INVALID_TOPIC_EXCEPTION with Topic.validate's reason, also in a topic the client may not
    describe. The gateway passed the metadata's code on (INVALID_TOPIC_EXCEPTION,
    TOPIC_AUTHORIZATION_FAILED)."""
    from lazyconv.gateway._routing import route_to_leaders

    failed: dict[str, int] = {}
    view = _View()
    assert route_to_leaders(view, ["a b", "x y", "gone"], lambda name: (name, 0),  # type: ignore[arg-type]
                            failed.__setitem__) == {}
    assert failed == {"a b": UNKNOWN, "x y": REFUSED, "gone": UNKNOWN}
    producers, leader = _relay("DescribeProducers", 0, {"topics": [
        {"name": n, "partition_indexes": [0, 1]} for n in ("x y", ".", "")]},
        lambda body: {"throttle_time_ms": 0, "topics": []})
    assert [(t["name"], [(p["partition_index"], p["error_code"], p["error_message"])
                         for p in t["partitions"]]) for t in producers["topics"]] == [
        (name, [(p, INVALID_TOPIC, f"Topic name is invalid: {reason}") for p in (0, 1)])
        for name, reason in (
            ("x y", "'x y' contains one or more characters other than ASCII alphanumerics, "
                    "'.', '_' and '-'"),
            (".", "'.' is not allowed"), ("", "the empty string is not allowed"))]
    assert leader.sent == []
