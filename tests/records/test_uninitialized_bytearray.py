"""``_impl.uninitialized_bytearray``: the buffer a frame is received into. The kernel's does not
zero it (the reference's does); both take the same sizes and refuse the same arguments, and the
server's and the gateway's frame readers use it."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from lazyconv.gateway._upstream import BrokerAddress, UpstreamConnection
from lazyconv.net import _server
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._headers import encode_request_header
from lazyconv.records import _impl

TWINS = [_impl.REFERENCE] + ([_impl.NATIVE] if _impl.NATIVE is not None else [])


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.name)
@pytest.mark.parametrize("size", [0, 1, 4095, 1 << 20])
def test_a_buffer_of_the_size_asked_and_writable(twin, size):
    buffer = twin.uninitialized_bytearray(size)
    assert type(buffer) is bytearray and len(buffer) == size
    buffer[:] = b"\x5a" * size
    assert buffer == b"\x5a" * size


def test_the_reference_twin_zeroes():
    assert _impl.REFERENCE.uninitialized_bytearray(100) == bytes(100)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.5, TypeError), (b"ab", TypeError),
                                        ("3", TypeError), (None, TypeError), (1 << 70, OverflowError),
                                        (-(1 << 70), OverflowError)])
def test_both_twins_refuse_the_same_arguments_alike(bad, error):
    messages = set()
    for twin in TWINS:
        with pytest.raises(error) as caught:
            twin.uninitialized_bytearray(bad)
        messages.add(str(caught.value))
    assert len(messages) == 1  # the same message from both


def _junk_allocator(sizes: list[int]):
    """Stands in for the kernel's twin: records each size and leaves junk in the buffer."""
    def allocate(size: int) -> bytearray:
        sizes.append(size)
        return bytearray(b"\xee" * size)

    return allocate


def test_the_gateway_receives_its_upstream_responses_into_it(monkeypatch):
    sizes: list[int] = []
    monkeypatch.setattr(_impl, "uninitialized_bytearray", _junk_allocator(sizes))
    connection = UpstreamConnection(BrokerAddress("127.0.0.1", 9))
    assert connection._client.frames._allocate is _server.frame_buffer
    assert _server.frame_buffer(16) == b"\xee" * 16 and sizes == [16]  # the twin, at call time


def test_the_server_receives_a_request_that_arrives_in_pieces_into_it(monkeypatch, tmp_path,
                                                                     serve_logdir):
    sizes: list[int] = []
    monkeypatch.setattr(_impl, "uninitialized_bytearray", _junk_allocator(sizes))
    server = serve_logdir(tmp_path)
    header = encode_request_header(metadata.SPEC.request_header_version(1), metadata.SPEC.key, 1,
                                   5, "pieces")
    body = header + metadata.SPEC.encode_request(1, {"topics": [{"name": "t" * 300}]})
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body[:10])  # the size and a little
        time.sleep(0.2)  # the server reads that much, then the rest into the frame's buffer
        sock.sendall(body[10:])
        size = struct.unpack(">i", _read(sock, 4))[0]
        answer = _read(sock, size)
    assert len(body) in sizes  # the frame was received into the allocator's buffer
    assert struct.unpack(">i", answer[:4])[0] == 5  # answered, junk and all overwritten
    decoded = metadata.SPEC.decode_response(1, answer[4:])
    assert [t["name"] for t in decoded["topics"]] == ["t" * 300]


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        piece = sock.recv(n - len(out))
        assert piece, "the server closed the connection"
        out += piece
    return out
