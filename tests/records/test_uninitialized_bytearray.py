"""``_impl.uninitialized_bytearray``: the buffer a frame is received into. The kernel's does not
zero it (the reference's does); both take the same sizes and refuse the same arguments, and the
server's and the gateway's frame readers use it."""

from __future__ import annotations

import pytest

from lazyconv.gateway._upstream import BrokerAddress, UpstreamConnection
from lazyconv.net import _server
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
                                        ("3", TypeError), (None, TypeError), (1 << 70, OverflowError)])
def test_both_twins_refuse_the_same_arguments_alike(bad, error):
    messages = set()
    for twin in TWINS:
        with pytest.raises(error) as caught:
            twin.uninitialized_bytearray(bad)
        messages.add(str(caught.value))
    assert len(messages) == 1  # the same message from both


def test_the_server_and_the_gateway_receive_frames_into_it():
    with _impl.using(_impl.REFERENCE):  # looked up at call time: the twin in use
        assert _server.frame_buffer(16) == bytes(16)
    connection = UpstreamConnection(BrokerAddress("127.0.0.1", 9))
    assert connection._client.frames._allocate is _server.frame_buffer
