"""The front door both servers share (lazyconv.net._requests.FrontDoor): a frame is parsed against
the handler's table, ApiVersions is answered from it, the session learns who the client says it
is, and only requests the table serves reach the handler."""

from __future__ import annotations

import asyncio

import pytest

from lazyconv.errors import RemoteProtocolError
from lazyconv.net import FrontDoor, Listener, Session
from lazyconv.net._model import reply
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._connection import ApiTable
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader


class RecordingHandler:
    apis = ApiTable([api_versions.SPEC, heartbeat.SPEC])

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str | None]] = []

    def start(self, loop): ...
    def close(self): ...
    def open_session(self, session): ...

    async def handle(self, request, session):
        self.seen.append((request.api_key, request.api_version, session.client_id))
        return reply(request, {"error_code": 0})


def _frame(spec, version, body, client_id="app-1", correlation_id=3) -> bytes:
    return encode_request_header(spec.request_header_version(version), spec.key, version,
                                 correlation_id, client_id) + spec.encode_request(version, body)


def _written(response) -> bytes:
    out = bytearray()

    class Sink:
        def write(self, data):
            out.extend(data)
            return len(data)

    while not response.send.completed:
        response.send.write_to(Sink())
    return bytes(out)


def test_api_versions_is_answered_from_the_table_and_names_the_client_software():
    handler = RecordingHandler()
    door = FrontDoor(handler)
    session = Session(Listener(0, "127.0.0.1", 9092), "/127.0.0.1")
    frame = _frame(api_versions.SPEC, 3, {"client_software_name": "librdkafka",
                                          "client_software_version": "2.0.2"})
    response = asyncio.run(door.answer(frame, session))
    data = _written(response)
    reader = Reader(data[4:])
    assert decode_response_header(reader, 0)["correlation_id"] == 3
    body = api_versions.SPEC.decode_response(3, reader)
    assert {e["api_key"] for e in body["api_keys"]} == {api_versions.API_KEY, heartbeat.SPEC.key}
    assert (session.client_software_name, session.client_software_version) == ("librdkafka", "2.0.2")
    assert session.client_id == "app-1"
    assert handler.seen == []  # ApiVersions never reaches the handler


def test_requests_reach_the_handler_counted_per_session_and_server():
    handler = RecordingHandler()
    door = FrontDoor(handler)
    session = Session(Listener(0, "127.0.0.1", 9092), "/127.0.0.1")
    body = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    for version in (0, 1, 1):
        asyncio.run(door.answer(_frame(heartbeat.SPEC, version, body, client_id="app-2"), session))
    assert handler.seen == [(12, 0, "app-2"), (12, 1, "app-2"), (12, 1, "app-2")]
    assert session.api_versions == {(12, 0): 1, (12, 1): 2}
    assert door.request_counts == {(12, 0): 1, (12, 1): 2}


def test_an_api_the_handler_does_not_serve_ends_the_connection():
    door = FrontDoor(RecordingHandler())
    session = Session(Listener(0, "127.0.0.1", 9092))
    with pytest.raises(RemoteProtocolError, match="unsupported API key 3"):
        asyncio.run(door.answer(_frame(metadata.SPEC, 1, {"topics": []}), session))
