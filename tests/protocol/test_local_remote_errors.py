"""Whose fault: bytes from the peer that do not decode are RemoteProtocolError; a message we
were asked to encode that the protocol cannot carry is LocalProtocolError (h11's distinction).
Both are ProtocolError, and the server logs them differently."""

from __future__ import annotations

import logging

import pytest

from lazyconv.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from lazyconv.protocol import _join_group as join_group
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._fetch import FetchRequest


def test_truncated_bytes_from_the_peer_are_remote() -> None:
    body = metadata.SPEC.encode_request(1, {"topics": [{"name": "t"}]})
    with pytest.raises(RemoteProtocolError) as caught:
        metadata.SPEC.decode_request(1, body[:-2])
    assert isinstance(caught.value, ProtocolError) and caught.value.position is not None
    with pytest.raises(RemoteProtocolError, match="not supported"):
        metadata.SPEC.decode_request(99, body)
    with pytest.raises(RemoteProtocolError):
        FetchRequest.decode(4, b"\x00\x01")


def test_an_invalid_message_of_ours_is_local() -> None:
    with pytest.raises(LocalProtocolError, match="null given for a non-nullable string"):
        join_group.SPEC.encode_response(1, {"error_code": 0, "protocol_name": None,
                                            "leader": "", "member_id": "", "members": []})
    with pytest.raises(LocalProtocolError, match="out of range"):
        metadata.SPEC.encode_response(1, {"brokers": [{"node_id": 2**40, "host": "h", "port": 1}],
                                          "topics": []})
    with pytest.raises(LocalProtocolError, match="not supported"):
        metadata.SPEC.encode_request(99, {})


def test_the_server_blames_itself_for_an_answer_it_cannot_encode(caplog) -> None:
    """A handler whose answer does not encode: the connection ends, logged as our error."""
    import asyncio
    import socket

    from lazyconv.net import KafkaServer, ListenerSpec
    from lazyconv.protocol._connection import ApiTable

    class Broken:
        apis = ApiTable([metadata.SPEC])

        def start(self, loop): ...
        def close(self): ...
        def open_session(self, session): ...

        async def handle(self, request, session):
            join_group.SPEC.encode_response(1, {"protocol_name": None})

    async def main() -> None:
        server = KafkaServer(lambda ls: Broken(), [ListenerSpec("127.0.0.1", 0)])
        await server.start()
        port = server.listeners[0].port
        loop = asyncio.get_running_loop()

        def client() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"\x00\x00\x00\x0a" + b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xff")
                return sock.recv(10)

        assert await loop.run_in_executor(None, client) == b""
        await server.close()

    with caplog.at_level(logging.WARNING, logger="lazyconv.net._server"):
        asyncio.run(main())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "a lazyconv bug" in errors[0].getMessage()
    assert not any("invalid request" in r.getMessage() for r in caplog.records)
