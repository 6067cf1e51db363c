"""The sans-IO connection objects (lazyconv.protocol._connection) that every server's connection
loop and the gateway's upstream client drive: framing, request parsing with Kafka's ApiVersions
fallback, the client's correlation table."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import RemoteProtocolError
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._connection import (
    ApiTable,
    ApiVersionsFallback,
    ClientConnection,
    FrameReader,
    Request,
    parse_request,
)
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _request(spec, version: int, body: dict, correlation_id: int = 7, client_id: str = "c") -> bytes:
    header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                   correlation_id, client_id)
    return header + spec.encode_request(version, body)


# -- FrameReader ----------------------------------------------------------------------------


def _stale(size: int) -> bytearray:
    """A frame buffer as an allocator that does not zero may give it: old bytes throughout."""
    return bytearray(b"\xee" * size)


@pytest.mark.parametrize("allocate", [bytearray, _stale], ids=["zeroed", "stale"])
@given(st.lists(st.binary(min_size=8, max_size=300), min_size=1, max_size=6),
       st.lists(st.integers(1, 50), min_size=1, max_size=40))
@settings(max_examples=80)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_frames_come_out_whole_whatever_the_pieces_they_arrive_in(allocate, frames, cuts):
    # with an allocator that leaves old bytes in the buffer, no old byte reaches a frame either
    stream = b"".join(_frame(f) for f in frames)
    reader = FrameReader(1 << 20, allocate=allocate)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        if reader.missing:  # the rest of a frame goes straight into it (recv_into)
            view = reader.buffer_for_rest()
            n = min(len(view), cuts[i % len(cuts)], len(stream) - pos)
            view[:n] = stream[pos:pos + n]
            del view
            reader.received(n)
        else:
            n = cuts[i % len(cuts)]
            reader.feed(stream[pos:pos + n])
        pos += n
        i += 1
        while (frame := reader.next_frame()) is not None:
            out.append(bytes(frame))
    assert out == frames
    assert reader.buffered == 0


def test_a_size_outside_the_bounds_is_refused_before_the_frame_is_read():
    reader = FrameReader(100, min_size=8)
    reader.feed(struct.pack(">i", 101))
    with pytest.raises(RemoteProtocolError, match="size 101 outside"):
        reader.next_size()
    small = FrameReader(100, min_size=8)
    small.feed(struct.pack(">i", 7))
    with pytest.raises(RemoteProtocolError, match="size 7 outside"):
        small.next_size()
    negative = FrameReader(100, min_size=8)
    negative.feed(struct.pack(">i", -1))
    with pytest.raises(RemoteProtocolError):
        negative.next_size()


def test_the_size_is_known_before_the_frame_and_the_rest_has_its_own_buffer():
    reader = FrameReader(1 << 20, allocate=_stale)  # the frame is handed out only once whole
    reader.feed(struct.pack(">i", 1000) + b"x" * 10)
    assert reader.next_size() == 1000
    assert reader.next_frame() is None
    assert reader.missing == 990
    view = reader.buffer_for_rest()
    assert len(view) == 990
    view[:] = b"y" * 990
    del view
    reader.received(989)
    assert reader.next_frame() is None  # one byte short: still the allocator's there
    reader.buffer_for_rest()[:] = b"y"
    reader.received(1)
    frame = reader.next_frame()
    assert frame == b"x" * 10 + b"y" * 990
    with pytest.raises(RuntimeError):
        reader.received(1)


# -- parse_request --------------------------------------------------------------------------

TABLE = ApiTable([metadata.SPEC, api_versions.SPEC, fetch.SPEC, heartbeat.SPEC], {fetch.SPEC.key: 2})


def test_a_request_is_parsed_against_the_table():
    frame = _request(metadata.SPEC, 1, {"topics": [{"name": "t"}]}, correlation_id=42, client_id="me")
    request = parse_request(frame, TABLE)
    assert isinstance(request, Request)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (3, 1, 42, "me")
    assert request.decode(exact=True)["topics"][0]["name"] == "t"
    reply = request.reply({"brokers": [], "topics": []})
    reader = Reader(reply[4:])
    assert decode_response_header(reader, 0)["correlation_id"] == 42
    assert struct.unpack(">i", reply[:4])[0] == len(reply) - 4


def test_an_unknown_api_or_version_ends_the_connection():
    with pytest.raises(RemoteProtocolError, match="unsupported API key 1000"):
        parse_request(struct.pack(">hhi", 1000, 0, 1) + b"\x00\x00", TABLE)
    with pytest.raises(RemoteProtocolError, match="unsupported version 3 of Fetch"):  # capped at 2
        parse_request(_request(fetch.SPEC, 3, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                                               "max_bytes": 1, "topics": []}), TABLE)
    with pytest.raises(RemoteProtocolError, match="shorter than a header"):
        parse_request(b"\x00\x03\x00", TABLE)


def test_an_api_versions_version_the_server_does_not_know_gets_the_v0_fallback():
    frame = struct.pack(">hhi", api_versions.API_KEY, 99, 5) + struct.pack(">h", 2) + b"cl" + b"\xff\xfe"
    request = parse_request(frame, TABLE)
    assert isinstance(request, ApiVersionsFallback)
    reply = request.reply(TABLE)
    reader = Reader(reply[4:])
    assert decode_response_header(reader, 0)["correlation_id"] == 5
    body = api_versions.SPEC.decode_response(0, reader)
    assert body["error_code"] == 35
    assert {e["api_key"]: e["max_version"] for e in body["api_keys"]}[fetch.SPEC.key] == 2


# -- ClientConnection -----------------------------------------------------------------------


def test_an_api_versions_fallback_answer_is_read_as_v0():
    """A broker that does not know the ApiVersions version asked (Kafka 2.1-2.3 and v3) answers
    with a v0 body: the client reads it (error 35, the table), as Kafka's client does, and can
    ask again at a version the table allows."""
    client = ClientConnection("gw", max_response_size=1 << 20)
    pending, data = client.send_request(api_versions.SPEC, 3, {"client_software_name": "gw",
                                                               "client_software_version": "1"})
    old_broker = ApiTable([api_versions.SPEC, fetch.SPEC], {api_versions.API_KEY: 2})
    fallback = parse_request(data[4:], old_broker)
    assert isinstance(fallback, ApiVersionsFallback)
    client.frames.feed(fallback.reply(old_broker))
    answered = client.next_response()
    assert answered is not None and answered[0] is pending
    body = ClientConnection.decode_response(pending, answered[1])
    assert body["error_code"] == 35
    assert {e["api_key"]: e["max_version"] for e in body["api_keys"]}[api_versions.API_KEY] == 2


def _response(correlation_id: int, spec, version: int, body: dict) -> bytes:
    from lazyconv.protocol._connection import response_frame
    return response_frame(correlation_id, spec.response_header_version(version),
                          spec.encode_response(version, body))


def test_responses_are_matched_to_their_requests_in_any_order():
    client = ClientConnection("gw", max_response_size=1 << 20)
    first, data1 = client.send_request(heartbeat.SPEC, 1, {"group_id": "g", "generation_id": 1,
                                                         "member_id": "m"}, token="first")
    second, data2 = client.send_request(heartbeat.SPEC, 1, {"group_id": "g", "generation_id": 1,
                                                          "member_id": "m"}, token="second")
    assert first.correlation_id != second.correlation_id
    assert parse_request(data1[4:], ApiTable([heartbeat.SPEC])).client_id == "gw"
    client.frames.feed(_response(second.correlation_id, heartbeat.SPEC, 1, {"error_code": 27})
                       + _response(first.correlation_id, heartbeat.SPEC, 1, {"error_code": 0}))
    got = []
    while (answered := client.next_response()) is not None:
        pending, frame = answered
        assert pending is not None
        got.append((pending.token, ClientConnection.decode_response(pending, frame)["error_code"]))
    assert got == [("second", 27), ("first", 0)]
    assert client.pending == 0


def test_an_abandoned_request_s_response_is_dropped_and_an_unknown_one_is_an_error():
    client = ClientConnection(None, max_response_size=1 << 20)
    pending, _ = client.send_request(heartbeat.SPEC, 0, {"group_id": "g", "generation_id": 1,
                                                        "member_id": "m"})
    client.abandon(pending.correlation_id)
    assert client.pending == 0
    client.frames.feed(_response(pending.correlation_id, heartbeat.SPEC, 0, {"error_code": 0}))
    answered = client.next_response()
    assert answered is not None and answered[0] is None
    client.frames.feed(_response(999, heartbeat.SPEC, 0, {"error_code": 0}))
    with pytest.raises(RemoteProtocolError, match="correlation id 999, which is not pending"):
        client.next_response()


def test_a_connection_that_ends_hands_back_what_was_pending():
    client = ClientConnection(None, max_response_size=1 << 20)
    tokens = [client.send_request(heartbeat.SPEC, 0, {"group_id": "g", "generation_id": 1,
                                                      "member_id": "m"}, token=i)[0] for i in range(3)]
    client.abandon(tokens[1].correlation_id)
    _, _ = client.send_request(heartbeat.SPEC, 0, {"group_id": "g", "generation_id": 1,
                                                   "member_id": "m"}, expect_response=False)
    assert sorted(p.token for p in client.take_pending()) == [0, 2]
    assert client.pending == 0
