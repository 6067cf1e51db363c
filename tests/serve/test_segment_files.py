"""The shared segment file cache: one descriptor per segment whatever the fetches name, at most
``capacity`` kept open idle, zero-copy partitions hold none until written."""

from __future__ import annotations

import socket
import struct

import pytest

from lazyconv.protocol import FetchRequest
from lazyconv.protocol._headers import encode_request_header
from lazyconv.serve._segment_files import SegmentFileCache, SegmentSlice
from tests.net.test_robustness import _recv, big_log, metadata_roundtrip, open_fds, wait_for


def test_cache_shares_descriptors_and_keeps_at_most_capacity_idle(tmp_path):
    paths = [tmp_path / f"{i}.log" for i in range(5)]
    for path in paths:
        path.write_bytes(b"x" * 100)
    cache = SegmentFileCache(2)
    fds = [cache.acquire(paths[0]) for _ in range(1000)]
    assert len(set(fds)) == 1 and cache.open_files == 1 and cache.opened == 1
    for _ in fds:
        cache.release(paths[0])
    held = [cache.acquire(p) for p in paths]  # all in use: none may be closed
    assert cache.open_files == 5
    for path in paths:
        cache.release(path)
    assert cache.open_files == 2  # trimmed to capacity, least recently used first
    assert cache.acquire(paths[4]) == held[4]  # still open: a hit
    cache.release(paths[4])
    cache.close()
    assert cache.open_files == 0


def test_a_zero_copy_slice_holds_no_descriptor_until_written(tmp_path):
    path = tmp_path / "s.log"
    path.write_bytes(bytes(range(200)))
    cache = SegmentFileCache(1)
    region = SegmentSlice(cache, path, 10, 50)
    send = region.to_send()
    assert cache.open_files == 0
    left, right = socket.socketpair()
    with left, right:
        while not send.completed:
            send.write_to(left)
        assert _recv(right, 50) == bytes(range(10, 60))
    region.close()
    cache.close()
    assert cache.open_files == 0


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
def test_fetches_in_flight_on_many_connections_share_one_descriptor(serve_logdir, tmp_path):
    # One partition named many times in one fetch is answered once (test_fetch_duplicates), so
    # the sharing shows across connections: each response stays in flight behind a client that
    # reads only its first bytes, and all of them hold the one segment descriptor.
    big_log(tmp_path)  # about 7 MiB: more than loopback buffers hold with a small receive window
    server = serve_logdir(tmp_path)
    assert metadata_roundtrip(server.port)
    baseline = open_fds()
    connections = 8
    for version in (1, 5):  # converted and zero-copy
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 30,
                "isolation_level": 0, "topics": [{"topic": "big", "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 30}]}]}
        payload = encode_request_header(1, 1, version, 3, "many") + FetchRequest.encode(version, body)
        socks = []
        try:
            for _ in range(connections):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(30)
                sock.connect(("127.0.0.1", server.port))
                socks.append(sock)
                sock.sendall(struct.pack(">i", len(payload)) + payload)
            sizes = [struct.unpack(">i", _recv(sock, 4))[0] for sock in socks]
            for sock in socks:
                _recv(sock, 1000)  # every response is in flight: they share one descriptor
            # each connection's two ends, the segment, slack for the OS
            assert open_fds() <= baseline + 2 * connections + 3
            for sock, size in zip(socks, sizes, strict=True):
                _recv(sock, size - 1000)
        finally:
            for sock in socks:
                sock.close()
    assert server.server.handler.segment_files.opened == 1
    assert wait_for(lambda: open_fds() <= baseline + 1)  # the segment stays cached for reuse


def test_cached_file_records_read_only_their_region_and_refuse_a_position_past_any_file(tmp_path):
    """CachedFileRecords.read is FileRecords.read through the cache: bytes of the segment past
    the region's end are refused (they were returned), and a position past the largest file
    offset is a ConfigurationError (os.pread's OverflowError was)."""
    from lazyconv.errors import ConfigurationError, TruncatedDataError
    from lazyconv.serve._segment_files import CachedFileRecords

    path = tmp_path / "s.log"
    path.write_bytes(bytes(range(200)))
    cache = SegmentFileCache(1)
    records = CachedFileRecords(cache, path, 10, 60)
    try:
        assert records.read(0, 50) == bytes(range(10, 60))
        with pytest.raises(TruncatedDataError, match=r"the records end after 50 of the 51 bytes .* \(at byte 60\)"):
            records.read(0, 51)
        with pytest.raises(ConfigurationError, match="FileRecords.read position 1180591620717411303424 is past"):
            records.read(1 << 70, 1)
        with pytest.raises(ConfigurationError, match="slice needs"):
            records.read(-1, 1)
        assert cache.open_files == 1  # each read gave the descriptor back
    finally:
        records.close()
        cache.close()
