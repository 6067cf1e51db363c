"""Spliced fetches (:mod:`lazyconv.gateway._fetch_splice`): a Fetch v12+ that one upstream leader
answers goes from the broker's socket to the client's; the client reads what the usual path
answers, every record, whatever the upstream's pieces, and a response cut short ends only its
own connection."""

from __future__ import annotations

import os
import random
import selectors
import socket
import struct
import threading
import time
from typing import Any

import pytest

from lazyconv.errors import UpstreamError
from lazyconv.gateway._fetch_splice import SPLICE_AVAILABLE, SplicedFetchSend, SpliceLane
from lazyconv.gateway._upstream import BrokerAddress
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._fetch import FetchResponse
from lazyconv.protocol._fetch_scan import FetchResponseScanner
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from tests.serve.wire import WireClient

# servers, upstream sockets and timed waits (12 s in all): the full suite runs them, the quick look does not
pytestmark = [pytest.mark.skipif(not SPLICE_AVAILABLE, reason="os.splice is Linux-only"),
              pytest.mark.slow]

TOPICS = [("codecs", 2), ("nulls", 2), ("headers", 2), ("compacted", 2), ("transactions", 2),
          ("tiny", 2)]


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of one loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        a = socket.create_connection(server.getsockname())
        b, _ = server.accept()
    return a, b


def batches(count: int, per_batch: int = 5, codec: Compression = Compression.NONE) -> bytes:
    out = bytearray()
    offset = 0
    for _ in range(count):
        builder = RecordsBuilder(magic=2, compression=codec, base_offset=offset)
        for i in range(per_batch):
            builder.append(key=b"k%d" % (offset + i), value=os.urandom(300), timestamp=1000 + i)
        out += builder.build()
        offset += per_batch
    return bytes(out)


def response_frame(version: int, correlation_id: int = 99) -> tuple[bytes, int]:
    """An upstream Fetch response (size first) of two topics, and how many records it holds."""
    first, second = batches(4), batches(3, codec=Compression.GZIP)
    partial = batches(1)[:-17]  # a last batch cut by the broker's size limit
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "a", "topic_id": __import__("uuid").UUID(int=1), "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 20, "records": first,
             "preferred_read_replica": 3},
            {"partition_index": 1, "error_code": 6, "high_watermark": -1, "records": None,
             "current_leader": {"leader_id": 2, "leader_epoch": 7}}]},
        {"topic": "b", "topic_id": __import__("uuid").UUID(int=2), "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 20,
             "records": second + partial}]}]}
    return FetchResponse(version, body).to_send(correlation_id).to_bytes(), 20 + 15


def rewrite_nothing(step, framing) -> None:  # noqa: ANN001
    pass


def drive(send: SplicedFetchSend, channel: Any, reader: socket.socket | None) -> bytes:
    """Write ``send`` to ``channel`` as a server loop would, waiting on the source or the channel
    as it says; returns what ``reader`` (the channel's other end) received."""
    got = bytearray()
    selector = selectors.DefaultSelector()
    deadline = time.monotonic() + 20
    while not send.completed:
        assert time.monotonic() < deadline, "the send stalled"
        send.write_to(channel)
        if reader is not None:  # keep the channel drained
            try:
                while True:
                    piece = reader.recv(1 << 20)
                    if not piece:
                        break
                    got += piece
            except BlockingIOError:
                pass
        if send.completed:
            break
        fd = send.source_fileno()
        if fd is not None:
            selector.register(fd, selectors.EVENT_READ)
            selector.select(1)
            selector.unregister(fd)
    if reader is not None:
        reader.settimeout(5)
        while len(got) < send.size:
            got += reader.recv(1 << 20)
    return bytes(got)


def feed(sock: socket.socket, data: bytes, seed: int) -> threading.Thread:
    """Write ``data`` to ``sock`` in random pieces with pauses, from a thread."""
    rnd = random.Random(seed)

    def run() -> None:
        position = 0
        while position < len(data):
            n = rnd.choice([1, 7, 61, 500, 4096, 70000])
            sock.sendall(data[position:position + n])
            position += n
            if rnd.random() < 0.3:
                time.sleep(0.001)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("version", [10, 11, 12, 13, 15])
@pytest.mark.parametrize("to_socket", [True, False], ids=["spliced", "copied"])
@pytest.mark.parametrize("counting", ["peek-ahead", "batch-by-batch"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_response_reaches_the_client_byte_for_byte(version: int, to_socket: bool,
                                                       counting: str, seed: int) -> None:
    frame, records = response_frame(version)
    upstream_broker, upstream_gateway = tcp_pair()
    client, gateway_side = tcp_pair()
    upstream_gateway.setblocking(False)
    client.setblocking(False)
    lane = SpliceLane(BrokerAddress("127.0.0.1", 1), "test")
    lane.sock = upstream_gateway
    if counting == "batch-by-batch":  # a kernel without SO_PEEK_OFF for TCP
        lane.peeks_ahead = False
    # the lane has read the size and the correlation id (SpliceLane.ask)
    size = struct.unpack(">i", frame[:4])[0]
    thread = feed(upstream_broker, frame[8:], seed)
    send = SplicedFetchSend(lane, FetchResponseScanner(version, size), size, 1234,
                            rewrite_nothing, 5.0)
    if to_socket:
        gateway_side.setblocking(False)
        got = drive(send, gateway_side, client)
    else:
        sink = _Sink()
        drive(send, sink, None)
        got = bytes(sink.data)
    thread.join(5)
    assert got == frame[:4] + struct.pack(">i", 1234) + frame[8:]
    assert send.records_out == records
    import uuid
    a, b = ("a", "b") if version < 13 else (uuid.UUID(int=1).bytes, uuid.UUID(int=2).bytes)
    assert send.next_offsets == {(a, 0): 20, (b, 0): 15}  # b's last batch is cut: asked again
    if counting == "peek-ahead" and _kernel() >= (6, 9):  # TCP's SO_PEEK_OFF came with 6.9
        assert lane.peeks_ahead is True
    send.close()
    assert not lane.closed  # the whole response went through: the lane is kept
    lane.close()
    for s in (upstream_broker, client, gateway_side):
        s.close()


def _kernel() -> tuple[int, ...]:
    import platform
    release = platform.release().split("-")[0].split(".")
    return tuple(int(p) for p in release[:2] if p.isdigit())


class _Sink:
    """A channel that is not a socket, taking a few bytes at a time."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes | memoryview) -> int:
        n = min(len(data), 3000)
        self.data += data[:n]
        return n


def _lane_and_send(frame: bytes, version: int = 12) -> tuple[Any, ...]:
    upstream_broker, upstream_gateway = tcp_pair()
    client, gateway_side = tcp_pair()
    for s in (upstream_gateway, gateway_side, client):
        s.setblocking(False)
    lane = SpliceLane(BrokerAddress("127.0.0.1", 1), "test")
    lane.sock = upstream_gateway
    size = struct.unpack(">i", frame[:4])[0]
    send = SplicedFetchSend(lane, FetchResponseScanner(version, size), size, 1, rewrite_nothing, 5.0)
    return upstream_broker, client, gateway_side, lane, send


def test_an_upstream_that_closes_inside_the_records_fails_the_response_and_the_lane() -> None:
    frame, _ = response_frame(12)
    upstream_broker, client, gateway_side, lane, send = _lane_and_send(frame)
    upstream_broker.sendall(frame[8:600])
    upstream_broker.close()
    with pytest.raises(UpstreamError, match="closed the connection inside a response"):
        drive(send, gateway_side, client)
    send.close()
    assert lane.closed


class _Counting:
    """Counts the write_to calls of a send (each wake of the writer)."""

    def __init__(self, send: SplicedFetchSend) -> None:
        self.send, self.calls = send, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.send, name)

    def write_to(self, channel: Any) -> int:
        self.calls += 1
        return self.send.write_to(channel)


@pytest.mark.parametrize("cut", [8 + 3, 8 + 40, 8 + 90], ids=["framing", "first-header", "batch"])
def test_bytes_that_stop_inside_a_field_are_awaited_not_spun_on(cut: int) -> None:
    # the upstream sends the response up to inside the framing or a batch header, pauses, then
    # the rest: the writer sleeps until enough bytes are there (SO_RCVLOWAT), a few wakes, not
    # one per loop turn for the whole pause
    frame, _ = response_frame(12)
    upstream_broker, client, gateway_side, lane, send = _lane_and_send(frame)
    upstream_broker.sendall(frame[8:cut])

    def rest() -> None:
        time.sleep(0.4)
        upstream_broker.sendall(frame[cut:])

    thread = threading.Thread(target=rest, daemon=True)
    thread.start()
    counting = _Counting(send)
    got = drive(counting, gateway_side, client)  # type: ignore[arg-type]
    thread.join(5)
    assert got[8:] == frame[8:]
    assert counting.calls < 200, counting.calls
    lane.close()


def test_an_upstream_that_closes_inside_a_field_fails_at_once() -> None:
    frame, _ = response_frame(12)
    upstream_broker, client, gateway_side, lane, send = _lane_and_send(frame)
    upstream_broker.sendall(frame[8:8 + 40])  # inside the first batch's header
    upstream_broker.close()
    started = time.monotonic()
    with pytest.raises(UpstreamError, match="closed the connection inside a response"):
        drive(send, gateway_side, client)
    assert time.monotonic() - started < 2
    send.close()
    assert lane.closed


def test_framing_that_does_not_parse_fails_the_response() -> None:
    # header tags 0, throttle, error, session, then 100 topics in a 40-byte response
    body = b"\x00" + bytes(10) + bytes([101]) + bytes(30)
    upstream_broker, client, gateway_side, lane, send = _lane_and_send(
        struct.pack(">ii", 4 + len(body), 1) + body)
    upstream_broker.sendall(body)
    with pytest.raises(UpstreamError, match="does not parse"):
        drive(send, gateway_side, client)
    send.close()
    assert lane.closed
    upstream_broker.close()


# -- through the gateway, in front of lazyconv serve ------------------------------------------


def topic_ids(port: int) -> dict[str, Any]:
    with WireClient(port) as client:
        answer = client.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
    return {t["name"]: t["topic_id"] for t in answer["topics"]}


def fetch_request(version: int, topics: list[tuple[str, Any, list[int]]], offset: int,
                  partition_max_bytes: int) -> dict[str, Any]:
    # max_bytes within the usual path's cap on what it holds of an upstream response (1 MiB),
    # which the spliced path, holding none of it, does not apply
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": name, "topic_id": topic_id, "partitions": [
                {"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes,
                 "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
                for p in partitions]} for name, topic_id, partitions in topics],
            "forgotten_topics_data": [], "rack_id": ""}


def read_all(port: int, version: int, ids: dict[str, Any], partition_max_bytes: int
             ) -> list[dict[str, Any]]:
    """Every answer to fetches of all the topics' partitions from offsets 0, 3, 6, ... 39. No
    aborted transactions reads the same as null (a broker sends null to read_uncommitted
    consumers, which the spliced path passes on, and the usual path writes as none)."""
    answers = []
    topics = [(name, ids[name], list(range(n))) for name, n in TOPICS]
    with WireClient(port) as client:
        for offset in range(0, 40, 3):
            answer = client.call(fetch.SPEC, version,
                                 fetch_request(version, topics, offset, partition_max_bytes))
            for topic in answer["responses"]:
                for part in topic["partitions"]:
                    part["aborted_transactions"] = part["aborted_transactions"] or []
            answers.append(answer)
    return answers


def raw_answers(port: int, version: int, ids: dict[str, Any], partition_max_bytes: int,
                max_bytes: int) -> list[bytes]:
    """The response frames (size first) of fetches of every topic's partitions from offsets 0,
    3, 6, ... 39, on one connection."""
    topics = [(name, ids[name], list(range(n))) for name, n in TOPICS]
    frames = []
    with WireClient(port, client_id="raw") as client:
        for offset in range(0, 40, 3):
            body = fetch_request(version, topics, offset, partition_max_bytes)
            body["max_bytes"] = max_bytes
            frames.append(client.call_frame(fetch.SPEC, version, body))
    return frames


@pytest.mark.parametrize("version", [10, 11, 12, 13, 15, 16, 17])
def test_a_spliced_fetch_is_the_broker_s_own_answer_byte_for_byte(serve_upstream, gateway_factory,
                                                                  version: int) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap)
    ids = topic_ids(gateway.port)
    for partition_max_bytes, max_bytes in ((1 << 20, 50 << 20), (700, 50 << 20), (1 << 20, 300_000)):
        through = raw_answers(gateway.port, version, ids, partition_max_bytes, max_bytes)
        direct = raw_answers(serve_upstream.port, version, ids, partition_max_bytes, max_bytes)
        assert through == direct
        assert sum(len(f) for f in through) > 100_000
    assert gateway.handler.fetches.spliced_fetches == 3 * 14


@pytest.mark.parametrize("version", [12, 13, 16, 17])
def test_a_spliced_fetch_answers_what_the_usual_path_answers(serve_upstream, gateway_factory,
                                                             version: int) -> None:
    spliced = gateway_factory(serve_upstream.bootstrap)
    usual = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)
    ids = topic_ids(spliced.port)
    # 12 partitions of 64 KiB: within the usual path's cap, and no partition's first batch is
    # larger than its limit (which only the first partition a broker fills may return, and the
    # usual path asks them in turn)
    got = read_all(spliced.port, version, ids, 64 << 10)
    expected = read_all(usual.port, version, ids, 64 << 10)
    assert got == expected
    assert sum(len(p["records"] or b"") for a in got for t in a["responses"]
               for p in t["partitions"]) > 0
    assert spliced.handler.fetches.spliced_fetches > 0
    assert usual.handler.fetches.spliced_fetches == 0


def test_a_fetch_with_an_unknown_topic_is_answered_the_usual_way(serve_upstream,
                                                                 gateway_factory) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap)
    with WireClient(gateway.port) as client:
        answer = client.call(fetch.SPEC, 12, fetch_request(12, [("codecs", None, [0]),
                                                                ("no-such-topic", None, [0])],
                                                           0, 1 << 20))
    parts = [p for t in answer["responses"] for p in t["partitions"]]
    assert parts[0]["error_code"] == 0 and parts[0]["records"]
    assert parts[1]["error_code"] != 0
    assert gateway.handler.fetches.spliced_fetches == 0


def test_a_client_that_leaves_inside_a_spliced_response_harms_no_one(serve_upstream,
                                                                     gateway_factory) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap)
    ids = topic_ids(gateway.port)
    topics = [(name, ids[name], list(range(n))) for name, n in TOPICS]
    from lazyconv.protocol._headers import encode_request_header
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", gateway.port))
        header = encode_request_header(fetch.SPEC.request_header_version(12), fetch.SPEC.key, 12,
                                       1, "leaver")
        payload = header + fetch.SPEC.encode_request(12, fetch_request(12, topics, 0, 1 << 20))
        sock.sendall(len(payload).to_bytes(4, "big") + payload)
        sock.recv(100)  # the response has begun
        sock.close()
    assert raw_answers(gateway.port, 12, ids, 1 << 20, 50 << 20) == \
        raw_answers(serve_upstream.port, 12, ids, 1 << 20, 50 << 20)


def _read_partition(port: int, version: int, topic: tuple[str, Any], partition: int,
                    limit: int, max_wait_ms: int = 0) -> list[tuple[int, bytes | None]]:
    """A sequential consumer: every record of one partition, each fetch from the offset after
    the last whole batch of the answer before."""
    name, topic_id = topic
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    with WireClient(port) as client:
        while True:
            body = fetch_request(version, [(name, topic_id, [partition])], offset, limit)
            body["max_wait_ms"] = max_wait_ms
            part = client.call(fetch.SPEC, version, body)["responses"][0]["partitions"][0]
            assert part["error_code"] == 0, part
            after = offset
            for batch in MemoryRecords(part["records"] or b"").batches():
                out += [(r.offset, r.value) for r in batch if r.offset >= offset]
                after = batch.last_offset + 1
            if after == offset:
                return out
            offset = after


@pytest.mark.parametrize("version", [11, 12, 13])
def test_a_sequential_consumer_is_answered_from_the_fetch_sent_ahead(serve_upstream,
                                                                     gateway_factory,
                                                                     version: int) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap)
    ids = topic_ids(gateway.port)
    relay = gateway.handler.fetches
    for name in ("codecs", "headers", "transactions"):
        for partition in (0, 1):
            got = _read_partition(gateway.port, version, (name, ids[name]), partition, 4096)
            want = _read_partition(serve_upstream.port, version, (name, ids[name]), partition, 4096)
            assert got == want and got
    assert relay.ahead_hits > 10 and relay.spliced_fetches > 10
    assert relay.ahead_budget.used <= 8 * 4096  # what the lanes' answers waiting now hold


def test_a_consumer_at_the_end_still_waits_as_it_asked(serve_upstream, gateway_factory) -> None:
    # what was fetched ahead of it (without waiting) is empty: the client's own fetch, which
    # waits up to max_wait_ms for records, is asked instead of answering at once
    gateway = gateway_factory(serve_upstream.bootstrap)
    ids = topic_ids(gateway.port)
    records = _read_partition(gateway.port, 12, ("tiny", ids["tiny"]), 0, 1 << 20)
    end = records[-1][0] + 1
    with WireClient(gateway.port) as client:
        for _ in range(3):
            body = fetch_request(12, [("tiny", None, [0])], end, 1 << 20)
            body["max_wait_ms"], body["min_bytes"] = 300, 1
            started = time.monotonic()
            part = client.call(fetch.SPEC, 12, body)["responses"][0]["partitions"][0]
            assert time.monotonic() - started >= 0.25
            assert part["error_code"] == 0 and not part["records"]


def test_an_answer_sent_ahead_and_never_asked_for_is_let_go(serve_upstream,
                                                            gateway_factory) -> None:
    gateway = gateway_factory(serve_upstream.bootstrap)
    ids = topic_ids(gateway.port)
    relay = gateway.handler.fetches
    with WireClient(gateway.port) as client:
        client.call(fetch.SPEC, 12, fetch_request(12, [("codecs", ids["codecs"], [0])], 0, 4096))
        assert relay.ahead_budget.used > 0  # the next range, asked ahead
        deadline = time.monotonic() + 10
        while relay.ahead_budget.used and time.monotonic() < deadline:
            time.sleep(0.1)
        assert relay.ahead_budget.used == 0  # the client did not ask within keep_s
        # and the connection goes on as before
        part = client.call(fetch.SPEC, 12, fetch_request(12, [("codecs", ids["codecs"], [0])],
                                                         0, 4096))["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["records"]


@pytest.mark.slow  # fetches that wait out max_wait_ms
def test_a_waiting_client_at_the_log_end_waits_even_when_the_framing_is_long(
        serve_upstream, gateway_factory) -> None:
    """A client at the high watermark that waits for a first byte: an answer fetched ahead whose
    framing is too long to see whether it holds records (here 500 partition entries) is not
    handed over, so the client waits as a broker would make it wait, instead of being answered
    at once, empty, again and again (found by a review)."""
    import time

    gateway = gateway_factory(serve_upstream.bootstrap)
    with WireClient(gateway.port) as client:
        first = client.call(fetch.SPEC, 12, fetch_request(12, [("tiny", None, [0])], 0, 1 << 20))
        end = first["responses"][0]["partitions"][0]["high_watermark"]
        body = fetch_request(12, [("tiny", None, [0])] * 500, end, 1 << 20)
        body["max_wait_ms"], body["min_bytes"] = 300, 1
        waited = []
        for _ in range(4):
            started = time.monotonic()
            client.call(fetch.SPEC, 12, body)
            waited.append(time.monotonic() - started)
    assert min(waited) > 0.25, waited
