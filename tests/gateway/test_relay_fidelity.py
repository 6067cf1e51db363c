"""What the upstream says that the gateway's own answers must pass on: the throttle time of the
cluster's quotas (a client backs off only when its answer asks it to), the tagged fields it does
not know; and an upstream answer it cannot read is the upstream's failure, not the client's."""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from lazyconv._send import drain
from lazyconv.errors import ErrorCode
from lazyconv.gateway._api_relay import ApiRelay
from lazyconv.gateway._cluster_state import ClusterState
from lazyconv.gateway._coordinators import Coordinators
from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY
from lazyconv.net._model import Listener
from lazyconv.protocol import KAFKA_API_BY_KEY
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._connection import ClientConnection, Pending, Request, response_frame
from lazyconv.protocol._headers import decode_response_header
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import UnknownTags
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from tests.gateway.conftest import GatewayThread
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread

_THROTTLED = (fetch.SPEC.key, produce.SPEC.key)


@pytest.fixture
def throttled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every Fetch and Produce answer of the upstream (``lazyconv serve``, which
    never throttles) says 100, 101, 102... ms, as a cluster over its quotas does; the list of
    the times said."""
    said: list[int] = []
    times = itertools.count(100)
    decode = ClientConnection.decode_response

    def with_throttle(pending: Pending, frame: bytes | bytearray, **kwargs: Any) -> dict[str, Any]:
        answer = decode(pending, frame, **kwargs)
        if pending.spec is not None and pending.spec.key in _THROTTLED:
            said.append(next(times))
            answer["throttle_time_ms"] = said[-1]
        return answer

    monkeypatch.setattr(ClientConnection, "decode_response", staticmethod(with_throttle))
    return said


def _fetch_body(offset: int, limit: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "headers", "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": limit}]}],
            "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize("version", [1, 4, 12])
def test_a_fetch_answer_asks_the_client_to_back_off_as_the_upstream_did(
        serve_upstream: ServerThread, gateway_factory, throttled: list[int], version: int) -> None:
    """Fetch v1 (down-converted), v4 (relayed) and v12 (not spliced): each answer carries the
    throttle time of the upstream answer it is made of, also when it was fetched ahead; it was
    always 0 (found by a review)."""
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)
    offset = 0
    with WireClient(gateway.port) as client:
        for _ in range(4):
            answer = client.call(fetch.SPEC, version, _fetch_body(offset, 8192))
            part = answer["responses"][0]["partitions"][0]
            assert part["error_code"] == 0 and part["records"]
            assert answer["throttle_time_ms"] in throttled, (answer["throttle_time_ms"], throttled)
            offset = _after(part["records"])
    if version >= 4:  # sequential reads of magic 2: the later ones were fetched ahead
        assert gateway.handler.fetches.ahead_hits >= 1


def _after(records: bytes) -> int:
    return max(b.last_offset + 1 for b in MemoryRecords(records).batches())


def test_an_up_converted_produce_answer_carries_the_upstream_throttle(
        served_fixtures, gateway_factory, throttled: list[int]) -> None:
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway: GatewayThread = gateway_factory(upstream.bootstrap)
        builder = RecordsBuilder(1, Compression.NONE, base_offset=0)
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v")
        with WireClient(gateway.port) as client:
            sent = client.call(produce.SPEC, 2, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                    {"name": "sink", "partition_data": [{"index": 0, "records": builder.build()}]}]})
            assert sent["responses"][0]["partition_responses"][0]["error_code"] == 0
            assert sent["throttle_time_ms"] in throttled, (sent["throttle_time_ms"], throttled)
    finally:
        upstream.stop()


class _Broker:
    """A stand-in upstream broker that answers every relayed request with ``answer(body)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.answer = answer

    async def relay(self, spec: Any, version: int, payload: Any, timeout: float | None = None) -> bytes:
        body = spec.decode_request(version, bytes(payload))
        return response_frame(1, spec.response_header_version(version),
                              spec.encode_response(version, self.answer(body)))[4:]


class _Session:
    identity = ANONYMOUS_IDENTITY

    def __init__(self, brokers: dict[int, _Broker], cluster: Any) -> None:
        self.brokers = brokers
        self.cluster = cluster

    async def connection(self, node: int) -> _Broker:
        return self.brokers[node]

    async def any_connection(self) -> _Broker:
        return self.brokers[min(self.brokers)]


def _relayed_answer(spec: Any, version: int, body: dict[str, Any], brokers: dict[int, _Broker],
                    cluster: Any, coordinators: Coordinators | None = None) -> dict[str, Any]:
    request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                      memoryview(spec.encode_request(version, body)), 0)
    relay = ApiRelay(cluster, coordinators or Coordinators(cluster))
    response = asyncio.run(relay.relay(request, _Session(brokers, cluster),  # type: ignore[arg-type]
                                       Listener(0, "gateway", 9092)))  # type: ignore[arg-type]
    out = io.BytesIO()
    drain(response.send, out)
    reader = Reader(out.getvalue()[4:])
    decode_response_header(reader, spec.response_header_version(version))
    return spec.decode_response(version, reader)


def test_an_answer_merged_from_several_brokers_carries_the_longest_throttle() -> None:
    """DescribeGroups split between two coordinators and ListOffsets between two leaders: the
    merged answer took the first answer's throttle time, whichever came first (found by a
    review); it is the longest of them, as the client must wait for the most throttled."""
    from lazyconv.gateway._upstream import PartitionInfo, TopicInfo

    def groups(throttle: int) -> _Broker:
        return _Broker(lambda body: {"throttle_time_ms": throttle, "groups": [
            {"error_code": 0, "group_id": g, "group_state": "Empty", "protocol_type": "",
             "protocol_data": "", "members": []} for g in body["groups"]]})

    cluster = SimpleNamespace(brokers={1: "a", 2: "b"}, request_timeout=30,
                              state=SimpleNamespace(warn=lambda *a: None))
    coordinators = Coordinators(cluster)  # type: ignore[arg-type]
    for group, node in (("g1", 1), ("g2", 2)):
        coordinators._nodes[(ANONYMOUS_IDENTITY.key, 0, group)] = node
    spec = KAFKA_API_BY_KEY[15]
    for throttles in ((0, 300), (300, 0)):
        answer = _relayed_answer(spec, 4, {"groups": ["g1", "g2"]},
                                 {1: groups(throttles[0]), 2: groups(throttles[1])}, cluster,
                                 coordinators)
        assert [g["group_id"] for g in answer["groups"]] == ["g1", "g2"]
        assert answer["throttle_time_ms"] == 300

    def offsets(throttle: int) -> _Broker:
        return _Broker(lambda body: {"throttle_time_ms": throttle, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                 "offset": 5} for p in t["partitions"]]} for t in body["topics"]]})

    topic = TopicInfo("t", partitions={0: PartitionInfo(0, 1), 1: PartitionInfo(1, 2)})

    async def topics_for(names: list[str]) -> dict[str, TopicInfo]:
        return {"t": topic}

    view = SimpleNamespace(request_timeout=30, topics={"t": topic}, topics_for=topics_for,
                           leader=lambda name, index: topic.partitions[index].leader,
                           invalidate=lambda *a: None, brokers={1: "a", 2: "b"},
                           state=SimpleNamespace(warn=lambda *a: None, broker_failed=lambda *a: None))
    spec = KAFKA_API_BY_KEY[2]
    for throttles in ((0, 300), (300, 0)):
        answer = _relayed_answer(spec, 4, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1},
                                         {"partition_index": 1, "timestamp": -1}]}]},
                                 {1: offsets(throttles[0]), 2: offsets(throttles[1])}, view)
        assert [p["offset"] for p in answer["topics"][0]["partitions"]] == [5, 5]
        assert answer["throttle_time_ms"] == 300


def test_an_answer_that_does_not_decode_is_a_retriable_error_not_a_closed_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    """DescribeCluster names brokers, so its answer is decoded to be rewritten: a malformed one
    escaped as the client's protocol error, which closed the client's connection and was
    logged as its invalid request (found by a review). The request is answered
    REQUEST_TIMED_OUT (retriable at every version), the next one goes through, and the failure
    is logged once (its repeats at the debug level)."""
    spec, version = KAFKA_API_BY_KEY[60], 1
    good = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": "c", "controller_id": 3,
            "brokers": [{"broker_id": 3, "host": "kafka3", "port": 9092, "rack": None}]}
    cut = _Broker(lambda body: good)
    whole = cut.relay

    async def cut_short(spec_: Any, version_: int, payload: Any, timeout: float | None = None) -> bytes:
        return (await whole(spec_, version_, payload, timeout))[:12]

    cut.relay = cut_short  # type: ignore[method-assign]
    cluster = SimpleNamespace(brokers={3: "a"}, request_timeout=30,
                              state=ClusterState(max_age=60))
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    with caplog.at_level(logging.DEBUG, logger="lazyconv.gateway"):
        for _ in range(2):
            answer = _relayed_answer(spec, version, body, {3: cut}, cluster)
            assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "DescribeCluster upstream failed: an answer that does not decode" \
        in warned[0].getMessage()
    answer = _relayed_answer(spec, version, body, {3: _Broker(lambda body: good)}, cluster)
    assert (answer["error_code"], answer["controller_id"], answer["brokers"][0]["host"]) == \
        (0, 0, "gateway")


def test_a_coordinator_answer_that_does_not_decode_is_warned_of_once_a_minute(
        caplog: pytest.LogCaptureFixture) -> None:
    """A group coordinator's answer that does not decode (Heartbeat, relayed to the group's
    coordinator) was warned of for every request, a line per client heartbeat while the
    upstream misbehaves (found by a review); as the other upstream faults, it is warned of
    once, then at most once a minute with the repeats counted (the rest at the debug level),
    and each request is answered COORDINATOR_NOT_AVAILABLE."""
    spec, version = KAFKA_API_BY_KEY[12], 4
    cut = _Broker(lambda body: {"throttle_time_ms": 0, "error_code": 0})
    whole = cut.relay

    async def cut_short(spec_: Any, version_: int, payload: Any, timeout: float | None = None) -> bytes:
        return (await whole(spec_, version_, payload, timeout))[:5]

    cut.relay = cut_short  # type: ignore[method-assign]
    cluster = SimpleNamespace(brokers={1: "a"}, request_timeout=30,
                              state=ClusterState(max_age=60))
    coordinators = Coordinators(cluster)  # type: ignore[arg-type]
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    with caplog.at_level(logging.DEBUG, logger="lazyconv.gateway"):
        for _ in range(3):
            # forgotten after each such answer: found again on the same broker
            coordinators._nodes[(ANONYMOUS_IDENTITY.key, 0, "g")] = 1
            answer = _relayed_answer(spec, version, body, {1: cut}, cluster, coordinators)
            assert answer["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1, warned
    assert "Heartbeat at a coordinator failed: an answer for 'g' that does not decode" in warned[0]


def _element(struct: Any, name: str) -> Any:
    """The struct of the elements of ``struct``'s array field ``name``."""
    return next(f.type.element for f in struct.fields if f.name == name)


def test_a_rewritten_answer_keeps_the_upstream_s_unknown_tagged_fields() -> None:
    """DescribeCluster (its brokers rewritten to the gateway) and DescribeGroups merged from two
    coordinators: the tagged fields a newer broker adds, which the gateway does not know, reach
    the client as they came; they were dropped (found by a review)."""
    spec, version = KAFKA_API_BY_KEY[60], 1
    answer = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
              "cluster_id": "c", "controller_id": 3,
              "_unknown_tagged_fields": UnknownTags(spec.response, {9: b"\xbe\xef"}),
              "brokers": [{"broker_id": 3, "host": "kafka3", "port": 9092, "rack": None,
                           "_unknown_tagged_fields": UnknownTags(
                               _element(spec.response, "brokers"), {4: b"\x01"})}]}
    cluster = SimpleNamespace(brokers={3: "a"}, request_timeout=30,
                              state=ClusterState(max_age=60))
    got = _relayed_answer(spec, version, {"endpoint_type": 1}, {3: _Broker(lambda body: answer)},
                          cluster)
    assert (got["controller_id"], got["brokers"][0]["host"]) == (0, "gateway")
    assert got["_unknown_tagged_fields"] == {9: b"\xbe\xef"}
    assert got["brokers"][0]["_unknown_tagged_fields"] == {4: b"\x01"}

    spec = KAFKA_API_BY_KEY[15]
    group = _element(spec.response, "groups")

    def groups(node: int) -> _Broker:
        return _Broker(lambda body: {
            "throttle_time_ms": 0,
            "_unknown_tagged_fields": UnknownTags(spec.response, {20: b"%d" % node}),
            "groups": [{"error_code": 0, "group_id": g, "group_state": "Empty",
                        "protocol_type": "", "protocol_data": "", "members": [],
                        "_unknown_tagged_fields": UnknownTags(group, {30: g.encode()})}
                       for g in body["groups"]]})

    cluster = SimpleNamespace(brokers={1: "a", 2: "b"}, request_timeout=30,
                              state=ClusterState(max_age=60))
    coordinators = Coordinators(cluster)  # type: ignore[arg-type]
    for name, node in (("g1", 1), ("g2", 2)):
        coordinators._nodes[(ANONYMOUS_IDENTITY.key, 0, name)] = node
    got = _relayed_answer(spec, 5, {"groups": ["g1", "g2"]}, {1: groups(1), 2: groups(2)},
                          cluster, coordinators)
    assert [g["_unknown_tagged_fields"] for g in got["groups"]] == [{30: b"g1"}, {30: b"g2"}]
    assert got["_unknown_tagged_fields"] in ({20: b"1"}, {20: b"2"})  # the first answer's


def test_list_offsets_v0_refuses_the_timestamps_its_version_lacks(
        gateway_over_serve: GatewayThread) -> None:
    """ListOffsets v0 is asked upstream at a later version, which reads -3 as the largest
    timestamp and -4 and -5 as the local and tiered logs' offsets (KIP-734, KIP-405,
    KIP-1005): a v0 client got those offsets (found by a review). A broker that served v0
    refused every timestamp below -2 with UNSUPPORTED_VERSION, which it now gets; -1 and -2
    are answered as before."""
    from lazyconv.protocol import _list_offsets as list_offsets

    def offsets(timestamp: int) -> tuple[int, list[int]]:
        answer = client.call(list_offsets.SPEC, 0, {"replica_id": -1, "topics": [
            {"name": "tiny", "partitions": [
                {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 1}]}]})
        part = answer["topics"][0]["partitions"][0]
        return part["error_code"], part["old_style_offsets"]

    with WireClient(gateway_over_serve.port) as client:
        for timestamp in (-3, -4, -5, -7):
            assert offsets(timestamp) == (ErrorCode.UNSUPPORTED_VERSION, []), timestamp
        latest, earliest = offsets(-1), offsets(-2)
    assert latest[0] == 0 and latest[1][0] > 0 and earliest == (0, [0])


# -- KIP-219: a client older than it does not back off; the gateway holds its answer ---------


@pytest.fixture
def throttle_ms(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every Fetch and Produce answer of the upstream (``lazyconv serve``) says the throttle
    time in the returned one-item list (set it to change it), as a cluster over its quotas."""
    said = [600]
    decode = ClientConnection.decode_response

    def with_throttle(pending: Pending, frame: bytes | bytearray, **kwargs: Any) -> dict[str, Any]:
        answer = decode(pending, frame, **kwargs)
        if pending.spec is not None and pending.spec.key in _THROTTLED:
            answer["throttle_time_ms"] = said[0]
        return answer

    monkeypatch.setattr(ClientConnection, "decode_response", staticmethod(with_throttle))
    return said


@pytest.mark.slow  # holds answers for 3 s
@pytest.mark.parametrize(("version", "held"), [(2, True), (7, True), (8, False), (12, False)])
def test_a_throttled_fetch_answer_is_held_for_a_client_older_than_kip219(
        serve_upstream: ServerThread, gateway_factory, throttle_ms: list[int], version: int,
        held: bool) -> None:
    """Below Fetch v8 a client does not back off itself (a broker held its answer): the
    gateway holds it for the throttle time, and meanwhile answers another client at once; from
    v8 the client gets it at once and waits itself. It was passed on at once to every client,
    so an old consumer fetched again and again over its quota (found by a review)."""
    # 3 s: a margin a loaded CI machine keeps (its first fetch through a new gateway took 1.3 s
    # once, past a throttle of 0.6 s)
    throttle_ms[0] = 3000
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)
    with WireClient(gateway.port) as client, WireClient(gateway.port) as other:
        started = time.monotonic()
        client.send(fetch.SPEC, version, _fetch_body(0, 8192))
        answer = other.call(fetch.SPEC, 12, _fetch_body(0, 8192))  # a client that backs off
        assert answer["throttle_time_ms"] == 3000
        assert time.monotonic() - started < 3.0  # the other connection is not held
        _, answer = client.receive(fetch.SPEC, version)
        took = time.monotonic() - started
        assert answer["throttle_time_ms"] == 3000 and answer["responses"][0]["partitions"][0]["records"]
        assert (took >= 3.0) is held, took


def test_a_held_answer_is_held_at_most_the_cap(
        serve_upstream: ServerThread, gateway_factory, throttle_ms: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A throttle time of ten minutes holds the answer for MAX_THROTTLE_HOLD_MS, not longer:
    an old client would take an answer that late for lost."""
    from lazyconv.gateway import _throttle
    monkeypatch.setattr(_throttle, "MAX_THROTTLE_HOLD_MS", 400)
    throttle_ms[0] = 600_000
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap)
    with WireClient(gateway.port) as client:
        started = time.monotonic()
        answer = client.call(fetch.SPEC, 2, _fetch_body(0, 8192))
        assert answer["throttle_time_ms"] == 600_000
        assert 0.4 <= time.monotonic() - started < 5


@pytest.mark.parametrize(("version", "held"), [(2, True), (5, True), (6, False)])
def test_a_throttled_produce_answer_is_held_for_a_client_older_than_kip219(
        served_fixtures, gateway_factory, throttle_ms: list[int], version: int,
        held: bool) -> None:
    """Produce below v6 (v2: up-converted; v5: relayed at its version), answered by a Deferred
    while the connection may go on reading: held for the throttle time all the same."""
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway: GatewayThread = gateway_factory(upstream.bootstrap)
        builder = RecordsBuilder(1 if version < 3 else 2, Compression.NONE, base_offset=0)
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v")
        with WireClient(gateway.port) as client:
            started = time.monotonic()
            sent = client.call(produce.SPEC, version, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                    {"name": "sink", "partition_data": [{"index": 0, "records": builder.build()}]}]})
            took = time.monotonic() - started
            assert sent["responses"][0]["partition_responses"][0]["error_code"] == 0
            assert sent["throttle_time_ms"] == 600
            assert (took >= 0.6) is held, took
    finally:
        upstream.stop()


def test_the_throttle_of_a_relayed_answer_is_read_where_it_is_held() -> None:
    """An answer relayed as it came (CreateTopics, any broker) carries its throttle time to the
    handler below v3, the first version whose client backs off; from v3 it is not read (the
    bytes pass as they came, the throttle time in them)."""
    from lazyconv.gateway._throttle import holds_throttled_answers

    spec = KAFKA_API_BY_KEY[19]
    broker = _Broker(lambda body: {"throttle_time_ms": 250, "topics": [
        {"name": t["name"], "error_code": 0, "error_message": None} for t in body["topics"]]})
    cluster = SimpleNamespace(brokers={1: "a"}, request_timeout=30, invalidate=lambda *a: None,
                              state=SimpleNamespace(warn=lambda *a: None))
    for version, throttle in ((2, 250), (3, 0), (4, 0)):
        body = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 1000,
                "validate_only": False}
        request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                          memoryview(spec.encode_request(version, body)), 0)
        relay = ApiRelay(cluster, Coordinators(cluster))  # type: ignore[arg-type]
        response = asyncio.run(relay.relay(request, _Session({1: broker}, cluster),  # type: ignore[arg-type]
                                           Listener(0, "gateway", 9092)))
        assert holds_throttled_answers(19, version) is (version < 3)
        assert response.throttle_ms == throttle, version
        out = io.BytesIO()
        drain(response.send, out)
        reader = Reader(out.getvalue()[4:])
        decode_response_header(reader, spec.response_header_version(version))
        assert spec.decode_response(version, reader)["throttle_time_ms"] == 250


def test_the_gateway_holds_the_versions_the_declarations_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway holds a throttled answer below its API's first client-throttled version, as
    declared with the API (ApiSpec.first_client_throttled, the one place of that fact; the
    gateway kept its own table): Fetch v7 but not v8, Produce v5 but not v6, no version of an
    API whose client never backs off (DescribeCluster), none of an undeclared API."""
    import dataclasses

    from lazyconv.gateway import _throttle
    from lazyconv.protocol import KAFKA_APIS

    assert _throttle.holds_throttled_answers(1, 7) and not _throttle.holds_throttled_answers(1, 8)
    assert _throttle.holds_throttled_answers(0, 5) and not _throttle.holds_throttled_answers(0, 6)
    assert not _throttle.holds_throttled_answers(60, 0)
    assert not _throttle.holds_throttled_answers(999, 0)
    for spec in KAFKA_APIS:
        for version in range(spec.min_version, spec.max_version + 1):
            assert _throttle.holds_throttled_answers(spec.key, version) is (
                version < spec.first_client_throttled), (spec.name, version)
    # read from the declaration, not from a copy: a Fetch declared otherwise is held otherwise
    wider = dataclasses.replace(KAFKA_API_BY_KEY[1], first_client_throttled=12)
    monkeypatch.setattr(_throttle, "KAFKA_API_BY_KEY", {**KAFKA_API_BY_KEY, 1: wider})
    assert _throttle.holds_throttled_answers(1, 11) and not _throttle.holds_throttled_answers(1, 12)


def test_a_held_deferred_answer_let_go_closes_its_response() -> None:
    """A Produce's answer held on its timer when the connection ends: the response is closed
    and the timer cancelled; one let go before it came cancels what it waits for."""
    from lazyconv._send import BytesSend
    from lazyconv.gateway._throttle import ThrottleHold
    from lazyconv.net._model import Response

    class Resource:
        closed = False

        def close(self) -> None:
            self.closed = True

    async def run() -> None:
        loop = asyncio.get_running_loop()
        hold = ThrottleHold()
        answer: asyncio.Future[Response | None] = loop.create_future()
        held = hold.hold_when_answered(answer)
        resource = Resource()
        answer.set_result(Response(BytesSend(b""), resources=[resource], throttle_ms=60_000))
        await asyncio.sleep(0)
        assert not held.done() and hold.until > loop.time() + 9
        held.cancel()
        await asyncio.sleep(0)
        assert resource.closed
        waiting: asyncio.Future[Response | None] = loop.create_future()
        hold.hold_when_answered(waiting).cancel()
        await asyncio.sleep(0)
        assert waiting.cancelled()
        quick = ThrottleHold()
        answer = loop.create_future()
        held = quick.hold_when_answered(answer)
        answer.set_result(Response(BytesSend(b""), throttle_ms=50))
        started = loop.time()
        assert (await held) is answer.result() and loop.time() - started >= 0.04

    asyncio.run(run())


@pytest.mark.slow  # holds an answer for 3 s
def test_a_held_answer_does_not_hold_the_answers_before_it(
        served_fixtures, gateway_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Produce v2 pipelined: the first answer says 800 ms, the second 3 s. A broker mutes a
    throttled connection (it reads none of its requests) but the answers owed go out; the
    gateway, waiting for the second's hold before acting on a third request, wrote nothing
    meanwhile, so the first answer came with the second, 3 s late (found by a review). The
    first comes after its own 800 ms, and the request durations leave the holds out (Kafka
    counts a throttle apart from a request's total time): they are counted apart."""
    import threading

    said = [800, 3000]
    second_in = threading.Event()
    decode = ClientConnection.decode_response

    def with_throttle(pending: Pending, frame: bytes | bytearray, **kwargs: Any) -> dict[str, Any]:
        answer = decode(pending, frame, **kwargs)
        if pending.spec is not None and pending.spec.key == produce.SPEC.key:
            answer["throttle_time_ms"] = said.pop(0) if said else 0
            if not said:
                second_in.set()
        return answer

    monkeypatch.setattr(ClientConnection, "decode_response", staticmethod(with_throttle))
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway: GatewayThread = gateway_factory(upstream.bootstrap, metrics_port=0)
        builder = RecordsBuilder(1, Compression.NONE, base_offset=0)
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v")
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": "sink", "partition_data": [{"index": 0, "records": builder.build()}]}]}
        with WireClient(gateway.port) as client:
            started = time.monotonic()
            client.send(produce.SPEC, 2, body)
            client.send(produce.SPEC, 2, body)
            assert second_in.wait(10)
            time.sleep(0.1)  # the gateway holds the second answer (3 s) from now on
            client.send(produce.SPEC, 2, body)
            answers = []
            for _ in range(3):
                answers.append(client.receive(produce.SPEC, 2)[1])
                answers[-1]["at"] = time.monotonic() - started
        assert [a["throttle_time_ms"] for a in answers] == [800, 3000, 0]
        assert 0.8 <= answers[0]["at"] < 2.5, answers  # its own hold, not the second's
        assert answers[1]["at"] >= 3.0
        metrics = gateway.gateway.metrics
        assert metrics is not None
        deadline = time.monotonic() + 5  # counted once written: maybe after the client read it
        while sum(metrics.request_seconds.series[produce.SPEC.key][:-1]) < 3 and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        counts = metrics.request_seconds.series[produce.SPEC.key]
        assert sum(counts[:-1]) == 3 and counts[-1] < 1.5, counts  # the holds left out
        held = metrics.throttle_seconds.series[produce.SPEC.key]
        assert sum(held[:-1]) == 2 and 3.7 <= held[-1] < 4.5, held
    finally:
        upstream.stop()


def test_each_deferred_answer_is_held_for_its_own_throttle_time() -> None:
    """Two Produce answers held at once, the later request's answered first (another leader)
    with 2 s, the earlier's then with 50 ms: the earlier one waited for the end of the 2 s
    (each answer was held until the latest end of any; found by a review). Each is held for
    its own throttle time; the client's next requests wait for the latest end."""
    from lazyconv._send import BytesSend
    from lazyconv.gateway._throttle import ThrottleHold
    from lazyconv.net._model import Response

    async def run() -> None:
        loop = asyncio.get_running_loop()
        hold = ThrottleHold()
        first: asyncio.Future[Response | None] = loop.create_future()
        second: asyncio.Future[Response | None] = loop.create_future()
        held_first, held_second = hold.hold_when_answered(first), hold.hold_when_answered(second)
        started = loop.time()
        second.set_result(Response(BytesSend(b""), throttle_ms=2000))
        await asyncio.sleep(0)
        first.set_result(Response(BytesSend(b""), throttle_ms=50))
        response = await asyncio.wait_for(held_first, 1.5)
        assert response is not None and 0.04 <= response.throttled_s < 1.5
        assert hold.until >= started + 2 and not held_second.done()
        held_second.cancel()

    asyncio.run(run())


@pytest.mark.parametrize(("version", "held"), [(0, True), (1, True), (2, False)])
def test_find_coordinator_carries_the_cluster_s_throttle(
        serve_upstream: ServerThread, gateway_factory, monkeypatch: pytest.MonkeyPatch,
        version: int, held: bool) -> None:
    """The gateway answers FindCoordinator itself, from the cluster's FindCoordinator answer:
    it said a throttle time of 0 whatever the cluster said (found by a review). It carries the
    cluster's, so a v2+ client backs off, and a v0-1 client's answer is held (v0 has no field
    for it); a coordinator already known asks the cluster nothing and says 0."""
    from lazyconv.protocol import _find_coordinator as find_coordinator

    decode = ClientConnection.decode_response

    def with_throttle(pending: Pending, frame: bytes | bytearray, **kwargs: Any) -> dict[str, Any]:
        answer = decode(pending, frame, **kwargs)
        if pending.spec is not None and pending.spec.key == find_coordinator.SPEC.key:
            answer["throttle_time_ms"] = 600
        return answer

    monkeypatch.setattr(ClientConnection, "decode_response", staticmethod(with_throttle))
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap)
    body = {"key": "throttled-group", "key_type": 0}
    with WireClient(gateway.port) as client:
        started = time.monotonic()
        answer = client.call(find_coordinator.SPEC, version, body)
        took = time.monotonic() - started
        assert answer["error_code"] == 0 and answer["host"]
        assert answer["throttle_time_ms"] == (600 if version else 0)  # v0: no such field
        assert (took >= 0.6) is held, took
        started = time.monotonic()
        again = client.call(find_coordinator.SPEC, version, body)  # known: nothing asked
        assert again["throttle_time_ms"] == 0 and time.monotonic() - started < 0.6
