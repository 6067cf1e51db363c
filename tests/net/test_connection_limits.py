"""What a connection may cost: idle, request-read and write timeouts, queued.max.request.bytes,
the cap on partitions per Fetch (small limits so the tests are fast)."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from lazyconv.net._limits import ConnectionLimits
from lazyconv.protocol import FetchRequest
from lazyconv.protocol._headers import encode_request_header
from tests.net.test_robustness import _recv, big_log, fetch_frame, metadata_roundtrip, wait_for

FAST = dict(connections_max_idle_ms=300, request_read_timeout_ms=300, write_timeout_ms=300)


def closed_by_server(sock: socket.socket, within: float) -> float | None:
    """Seconds until the server closed ``sock`` (None if it did not within ``within``)."""
    start = time.monotonic()
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(1 << 20):
                return time.monotonic() - start
    except ConnectionResetError:
        return time.monotonic() - start
    except TimeoutError:
        return None


@pytest.mark.slow
def test_idle_connections_are_closed_after_connections_max_idle_ms(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, limits=ConnectionLimits(**FAST))
    with socket.create_connection(("127.0.0.1", server.port)) as idle:
        assert metadata_roundtrip(server.port)
        took = closed_by_server(idle, 5)
        assert took is not None and 0.2 < took < 2
    assert wait_for(lambda: server.server.open_connections == 0)


@pytest.mark.slow
def test_a_stalled_request_is_closed_after_the_read_timeout(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, limits=ConnectionLimits(**FAST))
    with socket.create_connection(("127.0.0.1", server.port)) as stalled:
        stalled.sendall(struct.pack(">i", 1 << 20) + b"x" * 1000)  # 1000 of 1 MiB, then nothing
        took = closed_by_server(stalled, 5)
        assert took is not None and took < 2
    assert server.server.request_memory.in_use == 0  # its reservation was given back


@pytest.mark.slow
def test_a_reader_that_takes_nothing_is_closed_after_the_write_timeout(serve_logdir, tmp_path):
    big_log(tmp_path)  # ~7 MB of records: far more than the socket buffers hold
    server = serve_logdir(tmp_path, limits=ConnectionLimits(**FAST))
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(fetch_frame(1, "big"))  # converted: the response holds a chunk and the segment
    broker = server.server.handler
    assert wait_for(lambda: broker.stats.converted_partitions == 1)
    assert wait_for(lambda: server.server.open_connections == 0, timeout=5)
    assert wait_for(lambda: broker.segment_files.open_files <= broker.segment_files.capacity)
    sock.close()
    assert metadata_roundtrip(server.port)


@pytest.mark.slow
def test_requests_wait_for_room_in_queued_max_request_bytes(serve_logdir, tmp_path):
    """Two connections each announce a 600 KiB request in a 1 MiB pool: the second waits
    unread and is closed after the read timeout; the first is served; the pool empties."""
    (tmp_path / "t-0").mkdir()
    limits = ConnectionLimits(max_request_size=600 << 10, queued_max_request_bytes=1 << 20,
                              connections_max_idle_ms=5000, request_read_timeout_ms=300,
                              write_timeout_ms=5000)
    server = serve_logdir(tmp_path, limits=limits)
    pool = server.server.request_memory
    first = socket.create_connection(("127.0.0.1", server.port))
    first.sendall(struct.pack(">i", 600 << 10) + b"y" * 100)
    assert wait_for(lambda: pool.in_use == 600 << 10)
    second = socket.create_connection(("127.0.0.1", server.port))
    second.sendall(struct.pack(">i", 600 << 10) + b"z" * 100)
    time.sleep(0.1)
    assert pool.in_use == 600 << 10  # the second did not fit: it waits, its bytes unread
    assert closed_by_server(second, 5) is not None
    assert closed_by_server(first, 5) is not None  # stalled too: the read timeout ends it
    assert wait_for(lambda: pool.in_use == 0)
    assert pool.peak <= limits.queued_max_request_bytes
    assert metadata_roundtrip(server.port)


@pytest.mark.parametrize("version", [1, 9, 12])  # counted before decoding (v0-11) or after
def test_a_fetch_naming_too_many_partitions_closes_the_connection(serve_logdir, tmp_path, version):
    big_log(tmp_path, batches=1, records=1, value=10)
    server = serve_logdir(tmp_path, max_partitions_per_request=100)

    def fetch(count: int) -> bytes:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                     "partition_max_bytes": 100}] * (count - 1)},
                    {"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                     "partition_max_bytes": 100}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        payload = encode_request_header(2 if version >= 12 else 1, 1, version, 9, "many") + \
            FetchRequest.encode(version, body)
        return struct.pack(">i", len(payload)) + payload

    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(fetch(100))  # at the limit: answered
        size = struct.unpack(">i", _recv(sock, 4))[0]
        _recv(sock, size)
        sock.sendall(fetch(101))
        assert closed_by_server(sock, 5) is not None
    assert metadata_roundtrip(server.port)


def test_the_partition_count_is_read_without_decoding_for_fetch_v0_to_v11():
    from lazyconv.serve._fetch_handler import _announced_partitions

    def part(p: int) -> dict:
        return {"partition": p, "fetch_offset": 0, "partition_max_bytes": 100}

    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "a", "partitions": [part(p) for p in range(3)]},
                       {"topic": "bcd", "partitions": [part(p) for p in range(4)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    for version in range(12):
        assert _announced_partitions(version, memoryview(FetchRequest.encode(version, body))) == 7
    assert _announced_partitions(12, memoryview(FetchRequest.encode(12, body))) is None


def _metadata_frame(correlation_id: int, topics: list[str] | None = None) -> bytes:
    names = topics or []
    payload = encode_request_header(1, 3, 0, correlation_id, "framing") + struct.pack(">i", len(names)) + \
        b"".join(struct.pack(">h", len(n)) + n.encode() for n in names)
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("how", ["byte by byte", "size split", "many at once", "larger than a read"])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_requests_are_framed_however_their_bytes_arrive(serve_logdir, tmp_path, how):
    """Requests come in one piece, byte by byte, with the size field split, several in one
    write, or larger than what the server reads at once: each is answered, in order."""
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, limits=ConnectionLimits(**FAST))
    frames = [_metadata_frame(c, ["t"] + ([f"topic-{i:05d}" for i in range(2000)]
                                         if how == "larger than a read" else [])) for c in (1, 2, 3)]
    # a busy machine answers 2,000 topics slowly: wait for the answers as long as a client would
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        if how == "many at once":
            sock.sendall(b"".join(frames))
        for correlation, frame in enumerate(frames, 1):
            if how == "byte by byte":
                for i in range(len(frame)):
                    sock.sendall(frame[i:i + 1])
                    time.sleep(0.002)  # well within the 300 ms read timeout
            elif how == "size split":
                sock.sendall(frame[:2])
                time.sleep(0.05)
                sock.sendall(frame[2:])
            elif how == "larger than a read":
                assert len(frame) > 16384
                sock.sendall(frame)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            assert struct.unpack(">i", _recv(sock, size)[:4])[0] == correlation
