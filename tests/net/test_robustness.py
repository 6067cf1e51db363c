"""The server survives bad clients: disconnects mid-response, malformed and oversized requests."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.protocol import FetchRequest
from lazyconv.protocol._headers import encode_request_header
from lazyconv.records import Compression, RecordsBuilder


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def big_log(root, topic="big", batches=60, records=200, value=600, codec=Compression.NONE) -> int:
    """A partition of v2 batches (uncompressed by default: the response size is the stored size)."""
    part = root / f"{topic}-0"
    part.mkdir(parents=True)
    offset = 0
    with open(part / f"{0:020d}.log", "wb") as f:
        for _ in range(batches):
            builder = RecordsBuilder(2, compression=codec, base_offset=offset)
            for _ in range(records):
                builder.append(offset=offset, timestamp=1, key=b"k", value=bytes([offset % 251]) * value)
                offset += 1
            f.write(builder.build())
    return offset


def fetch_frame(version: int, topic: str, max_bytes: int = 50 << 20, correlation_id: int = 1) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}]}]}
    payload = encode_request_header(1, 1, version, correlation_id, "robust") + FetchRequest.encode(version, body)
    return struct.pack(">i", len(payload)) + payload


def metadata_roundtrip(port: int) -> bool:
    """A Metadata v0 request for no topic list; True if a well-formed answer comes back."""
    payload = encode_request_header(1, 3, 0, 42, "probe") + struct.pack(">i", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        answer = _recv(sock, size)
    return struct.unpack(">i", answer[:4])[0] == 42


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        piece = sock.recv(n - len(data))
        if not piece:
            raise ConnectionError("closed")
        data += piece
    return bytes(data)


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_disconnect_mid_response_leaks_nothing(serve_logdir, tmp_path):
    big_log(tmp_path)
    server = serve_logdir(tmp_path, chunk_size=16384)
    assert metadata_roundtrip(server.port)
    baseline = open_fds()
    for round_ in range(30):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        version = (1, 3, 5)[round_ % 3]  # converted to v0, to v1, zero-copy
        sock.sendall(fetch_frame(version, "big"))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        assert size > 1 << 20
        _recv(sock, 1000 + 997 * round_)  # a part of the response, then hang up
        if round_ % 2:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        sock.close()
    broker_server = server.server
    assert wait_for(lambda: broker_server.open_connections == 0)
    # Every file the aborted responses opened is closed again (the sockets too), but for the
    # segment files the server's cache keeps open on purpose (bounded by its capacity).
    cache = broker_server.handler.segment_files
    assert wait_for(lambda: open_fds() <= baseline + cache.open_files)
    assert cache.open_files <= cache.capacity
    assert broker_server.handler.stats.converted_partitions >= 20
    assert metadata_roundtrip(server.port)


@pytest.mark.parametrize("frame", [
    struct.pack(">i", -5),                                   # negative size
    struct.pack(">i", 3) + b"abc",                          # shorter than any header
    struct.pack(">i", 200 << 20),                            # above the request size limit
    struct.pack(">i", 10) + struct.pack(">hhi", 99, 0, 1) + b"\x00\x00",  # unknown API key
    struct.pack(">i", 10) + struct.pack(">hhi", 1, 99, 1) + b"\x00\x00",  # unknown Fetch version
    struct.pack(">i", 12) + struct.pack(">hhi", 1, 4, 1) + b"\x00\x00" + b"\xff\xff",  # truncated body
    struct.pack(">i", 14) + struct.pack(">hhi", 3, 1, 1) + b"\x00\x00" + struct.pack(">i", 1 << 30),  # huge array count
], ids=["negative-size", "tiny", "oversized", "unknown-key", "unknown-version", "truncated", "huge-count"])
def test_malformed_request_closes_only_that_connection(serve_logdir, tmp_path, frame):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, max_request_size=1 << 20)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(frame)
        try:
            answer = sock.recv(100)
        except ConnectionResetError:  # closed with unread request bytes still queued
            answer = b""
        assert answer == b""  # the server closed the connection without answering
    assert metadata_roundtrip(server.port)


def test_unknown_api_versions_version_gets_the_fallback_answer(serve_logdir, tmp_path):
    """KIP-511: an ApiVersions request newer than the server gets a v0 answer with error 35
    and the version table, so the client can retry with a version the server speaks."""
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path)
    payload = encode_request_header(2, 18, 77, 5, "future-client") + b"\x00garbage-body"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        answer = _recv(sock, size)
    correlation_id, error_code, count = struct.unpack_from(">ihi", answer)
    assert (correlation_id, error_code) == (5, 35)
    table = {struct.unpack_from(">h", answer, 10 + 6 * i)[0]: struct.unpack_from(">hh", answer, 12 + 6 * i)
             for i in range(count)}
    assert table[18] == (0, 4) and table[1] == (0, 17)
    assert len(answer) == 10 + 6 * count  # v0 layout: no throttle time, no tagged fields


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_random_request_bodies_never_stop_the_server(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, max_request_size=4096)

    @settings(max_examples=60)
    @given(api_key=st.sampled_from([0, 1, 2, 3, 10, 18]), version=st.integers(0, 12),
           body=st.binary(max_size=200))
    def one_request(api_key: int, version: int, body: bytes) -> None:
        payload = struct.pack(">hhi", api_key, version, 7) + body
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            sock.shutdown(socket.SHUT_WR)
            data = b""
            try:
                while piece := sock.recv(65536):
                    data += piece
            except ConnectionResetError:
                pass
        if data:  # an answer must be one well-formed frame with our correlation id
            size = struct.unpack(">i", data[:4])[0]
            assert size == len(data) - 4 and struct.unpack(">i", data[4:8])[0] == 7
        assert metadata_roundtrip(server.port)

    one_request()


def test_corrupt_log_data_is_a_partition_error_not_a_dead_server(serve_logdir, tmp_path):
    from tests.serve.test_e2e_errors_and_librdkafka import fetch_raw

    part = tmp_path / "t-0"
    part.mkdir()
    builder = RecordsBuilder(2)
    builder.append(offset=0, timestamp=1, value=b"ok")
    good = builder.build()
    # a size no broker writes, then bytes that are not zeros (zeros would be a torn header,
    # which recovery cuts off)
    (part / f"{0:020d}.log").write_bytes(good + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x01" * 20)
    server = serve_logdir(tmp_path)
    ok = fetch_raw(server.port, 6, "t", 0, offset=0)["responses"][0]["partitions"][0]
    assert ok["error_code"] == 0 and bytes(ok["records"]) == good
    for version, code in ((6, 56), (5, 6)):  # KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER below v6
        bad = fetch_raw(server.port, version, "t", 0, offset=1)["responses"][0]["partitions"][0]
        assert bad["error_code"] == code
    assert metadata_roundtrip(server.port)
