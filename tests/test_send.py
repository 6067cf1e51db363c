"""The Send contract: exact sizes, resumable partial writes, zero-copy file regions."""

from __future__ import annotations

import io
import socket
import threading

import pytest

from lazyconv._send import BytesSend, FileRegionSend, SequenceSend, drain
from lazyconv.errors import ConfigurationError, TruncatedDataError


class TrickleChannel:
    """Accepts at most ``per_call`` bytes per call and refuses every other call."""

    def __init__(self, per_call: int = 1) -> None:
        self.per_call = per_call
        self.data = bytearray()
        self.calls = 0

    def send(self, data) -> int:
        self.calls += 1
        if self.calls % 2 == 0:
            return 0
        taken = bytes(data[: self.per_call])
        self.data += taken
        return len(taken)


def test_bytes_send_resumes_after_partial_writes():
    send = BytesSend(b"hello kafka")
    channel = TrickleChannel(per_call=3)
    calls = 0
    while not send.completed:
        send.write_to(channel)
        calls += 1
    assert bytes(channel.data) == b"hello kafka"
    assert send.written == send.size == 11
    assert calls > 1


def test_file_region_send_reads_exact_region(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(range(256)) * 1000)
    send = FileRegionSend(path, 1000, 70_000)
    out = io.BytesIO()
    drain(send, out)
    assert out.getvalue() == (bytes(range(256)) * 1000)[1000:71_000]
    assert send.zero_copy_bytes == 0


def test_file_region_send_uses_sendfile_for_sockets(tmp_path):
    path = tmp_path / "seg.log"
    payload = bytes(range(256)) * 4096
    path.write_bytes(payload)
    left, right = socket.socketpair()
    received = bytearray()

    def reader():
        while len(received) < 500_000:
            chunk = right.recv(65536)
            if not chunk:
                break
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    send = FileRegionSend(path, 17, 500_000)
    drain(send, left)
    thread.join(10)
    left.close()
    right.close()
    assert bytes(received) == payload[17 : 17 + 500_000]
    assert send.zero_copy_bytes == 500_000


def test_file_region_send_raises_on_short_file(tmp_path):
    path = tmp_path / "short.log"
    path.write_bytes(b"x" * 10)
    send = FileRegionSend(path, 0, 20)
    with pytest.raises(TruncatedDataError, match="at byte 10"):
        drain(send, io.BytesIO())


def test_file_region_rejects_negative_region():
    with pytest.raises(ConfigurationError):
        FileRegionSend("/dev/null", -1, 5)


def test_sequence_send_is_exact_and_lazy(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(b"0123456789")
    built = []

    def children():
        for part in (BytesSend(b"ab"), FileRegionSend(path, 2, 5), BytesSend(b"")):
            built.append(part)
            yield part

    send = SequenceSend(children(), size=7)
    channel = TrickleChannel(per_call=2)
    assert built == []
    while not send.completed:
        send.write_to(channel)
    assert bytes(channel.data) == b"ab23456"


def test_sequence_send_detects_short_children():
    send = SequenceSend(iter([BytesSend(b"ab")]), size=5)
    with pytest.raises(RuntimeError, match="ran out"):
        send.to_bytes()


def test_write_to_channel_runs_no_runtime_protocol_check() -> None:
    """Issue 24: ``isinstance(channel, SendingChannel)`` (a runtime-checkable Protocol) on every
    write cost 558 times a ``hasattr``; the channel's method is looked up instead. A profiler
    sees every Python function called: none is typing's."""
    import sys

    from lazyconv._send import write_to_channel

    class Writer:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, data: memoryview | bytes) -> int:
            self.data += data
            return len(data)

    class Sender(Writer):
        def send(self, data: memoryview | bytes) -> int:
            return self.write(data[:3])

    called: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_filename)  # type: ignore[attr-defined]

    writer, sender = Writer(), Sender()
    sys.setprofile(profile)
    try:
        assert write_to_channel(writer, b"abcdef") == 6
        assert write_to_channel(sender, b"abcdef") == 3
    finally:
        sys.setprofile(None)
    assert writer.data == b"abcdef" and sender.data == b"abc"
    assert not [name for name in called if name.endswith("typing.py")], called


def test_a_completed_sequence_releases_its_children_without_the_cyclic_collector() -> None:
    """A FetchResponse's send refers to its parts' generator, whose frame refers back to the
    send: once completed, the send drops the generator, so what it held (the records) is freed
    by reference counting alone (the gateway held every sent upstream response until gc ran)."""
    import gc
    import io
    import weakref

    from lazyconv.protocol._fetch import FetchResponse

    class Records(bytearray):
        pass

    records = Records(b"x" * 1000)
    alive = weakref.ref(records)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": records}]}]}
    send = FetchResponse(4, body).to_send(1)
    del records, body
    gc.disable()
    try:
        sink = io.BytesIO()
        while not send.completed:
            send.write_to(sink)
        del send
        assert alive() is None
    finally:
        gc.enable()
