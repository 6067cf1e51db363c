"""Streaming a many-partition FetchResponse through a real socket pair to a slow reader.

Mixed partitions: lazily down-converted ones (several chunks each), zero-copy file slices and
error partitions. The peer reads in small random pieces with pauses; the bytes it gets must
parse to the declared size and carry exactly the expected records.
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from lazyconv._send import BytesSend, drain
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.protocol import (
    ErrorCode,
    FetchBudget,
    FetchResponse,
    broker_partition_response,
    error_partition,
)
from lazyconv.records import Compression, FileRecords, MemoryRecords, RecordsBuilder

VERSION = 3  # reads magic <= 1: v2 topics are converted, v1 topics go out as stored
CHUNK = 16 * 1024


def build_log(magic: int, batches: int, per_batch: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    offset = 0
    for i in range(batches):
        codec = Compression.GZIP if i % 4 == 3 else Compression.NONE
        b = RecordsBuilder(magic, codec, base_offset=offset)
        for _ in range(per_batch):
            b.append(offset=offset, timestamp=1_600_000_000_000 + offset, key=b"key-%d" % offset,
                     value=rng.randbytes(rng.randrange(50, 900)))
            offset += 1
        out += b.build()
    return bytes(out)


class SlowReader(threading.Thread):
    """Reads everything from a socket in small random pieces, pausing now and then."""

    def __init__(self, sock: socket.socket, seed: int) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.rng = random.Random(seed)
        self.data = bytearray()
        self.reads = 0

    def run(self) -> None:
        while True:
            piece = self.sock.recv(self.rng.randrange(1, 3000))
            if not piece:
                return
            self.data += piece
            self.reads += 1
            if self.reads % 40 == 0:
                time.sleep(0.001)


@pytest.fixture
def logs(tmp_path):
    conv_path = tmp_path / "conv.log"
    conv_path.write_bytes(build_log(2, 40, 20, seed=1))
    legacy_path = tmp_path / "legacy.log"
    legacy_path.write_bytes(build_log(1, 30, 10, seed=2))
    with FileRecords.open(conv_path) as conv, FileRecords.open(legacy_path) as legacy:
        yield conv, legacy


def offsets_and_values(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in MemoryRecords(data).records()]


def test_many_partition_response_through_a_socket_pair(logs) -> None:
    conv, legacy = logs
    budget = FetchBudget(VERSION, max_bytes=50 << 20)

    def lazy_factory(records, to_magic, first_offset):
        return LazyDownConvertedRecords(records, to_magic, first_offset, chunk_size=CHUNK)

    conv_parts, legacy_parts, expected = [], [], {}
    for index, fetch_offset in enumerate([0, 7, 100, 333, 512, 790]):
        read = budget.read(conv, fetch_offset, partition_max_bytes=96 * 1024)
        p = broker_partition_response(VERSION, index, read, fetch_offset=fetch_offset,
                                      high_watermark=800, lazy_records_factory=lazy_factory)
        assert isinstance(p["records"], LazyDownConvertedRecords)
        expected[("conv", index)] = ("converted", read, fetch_offset)
        conv_parts.append(p)
    conv_parts.append(broker_partition_response(VERSION, 6, MemoryRecords(bytes(conv.read(0, 500))),
                                                fetch_offset=0, topic_compression="zstd"))
    conv_parts.append(broker_partition_response(VERSION, 7, MemoryRecords(bytes(conv.read(0, 500))),
                                                fetch_offset=0, downconversion_enable=False))
    for index, fetch_offset in enumerate([0, 45, 150, 299]):
        read = budget.read(legacy, fetch_offset, partition_max_bytes=64 * 1024)
        p = broker_partition_response(VERSION, index, read, fetch_offset=fetch_offset,
                                      high_watermark=300, topic_magic=1)
        assert isinstance(p["records"], FileRecords)
        expected[("legacy", index)] = ("zero-copy", read, fetch_offset)
        legacy_parts.append(p)
    legacy_parts.append(error_partition(4, ErrorCode.NOT_LEADER_OR_FOLLOWER))

    body = {"throttle_time_ms": 0, "responses": [
        {"topic": "conv", "partitions": conv_parts},
        {"topic": "legacy", "partitions": legacy_parts},
    ]}
    response = FetchResponse(VERSION, body)
    declared = response.size_in_bytes
    send = response.to_send(correlation_id=4242)
    assert send.size == declared + 4

    sender, receiver = socket.socketpair()
    try:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sender.setblocking(False)
        reader = SlowReader(receiver, seed=3)
        reader.start()
        written = drain(send, sender, timeout=30)
        sender.shutdown(socket.SHUT_WR)
        reader.join(timeout=60)
        assert not reader.is_alive()
    finally:
        sender.close()
        receiver.close()

    data = bytes(reader.data)
    assert written == len(data) == declared + 4
    assert int.from_bytes(data[:4], "big") == declared
    assert reader.reads > 100  # the peer really read in many small pieces
    assert send.zero_copy_bytes > 0
    assert send.zero_copy_bytes == sum(r.size_in_bytes for _, r, _ in
                                       (v for k, v in expected.items() if k[0] == "legacy"))
    assert send.conversion_stats is not None and send.conversion_stats.records_converted > 0

    header, decoded = FetchResponse.decode_framed(VERSION, data)
    assert header["correlation_id"] == 4242
    got = {(t["topic"], p["partition_index"]): p for t in decoded["responses"] for p in t["partitions"]}
    for key, (kind, read, fetch_offset) in expected.items():
        p = got[key]
        assert p["error_code"] == 0
        if kind == "zero-copy":
            assert p["records"] == read.read(0, read.size_in_bytes)
            stored = offsets_and_values(p["records"])
        else:
            # identical to what the lazy send produces on its own, and readable as magic 1
            again = LazyDownConvertedRecords(read, 1, fetch_offset, chunk_size=CHUNK)
            assert p["records"] == again.to_send().to_bytes()
            assert {b.magic for b in MemoryRecords(p["records"]).batches()} == {1}
            stored = offsets_and_values(bytes(read.read(0, read.size_in_bytes)))
        received = [rv for rv in offsets_and_values(p["records"]) if rv[0] >= fetch_offset]
        complete = [rv for rv in stored if rv[0] >= fetch_offset]
        # the consumer sees every record of the complete batches; a cut may drop the tail
        assert received and received == complete[: len(received)]
        assert len(received) >= len(complete) - 60
    assert got[("conv", 6)]["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert got[("conv", 6)]["records"] == b""
    assert got[("conv", 7)]["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert got[("legacy", 4)]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_kafka_python_reads_the_streamed_response(logs) -> None:
    kp_fetch = pytest.importorskip("kafka.protocol.consumer.fetch", reason="needs the dev extra: pip install -e '.[dev]'")
    kp_records = pytest.importorskip("kafka.record.memory_records", reason="needs the dev extra: pip install -e '.[dev]'")
    conv, legacy = logs
    parts = [broker_partition_response(1, 0, conv.slice(0, 40_000), fetch_offset=3),
             broker_partition_response(1, 1, legacy.slice(0, 20_000), fetch_offset=0, topic_magic=0)]
    response = FetchResponse(1, {"responses": [{"topic": "t", "partitions": parts}]})
    data = response.to_bytes(9)
    decoded = kp_fetch.FetchResponse.decode(data, version=1, header=True, framed=True)
    first = kp_records.MemoryRecords(decoded.responses[0].partitions[0].records)
    offsets = []
    while (b := first.next_batch()) is not None:
        offsets.extend(r.offset for r in b)
    assert offsets[0] == 3 and offsets == sorted(offsets)


class _WrongSize:
    size_in_bytes = 10

    def to_send(self):
        return BytesSend(b"12345")


def test_records_whose_send_breaks_its_committed_size_are_refused() -> None:
    from lazyconv.errors import ProtocolError

    response = FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": _WrongSize()}]}]})
    with pytest.raises(ProtocolError, match="committed 10 bytes"):
        response.to_bytes(1)


def test_records_sends_are_created_only_when_their_turn_comes() -> None:
    created: list[int] = []

    class Tracking:
        def __init__(self, i: int) -> None:
            self.i = i
            self.size_in_bytes = 3

        def to_send(self):
            created.append(self.i)
            return BytesSend(b"abc")

    response = FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": i, "records": Tracking(i)} for i in range(3)]}]})
    send = response.to_send(1)
    assert created == []

    class Trickle:
        """Takes at most ``budget`` bytes per write_to call, like a full socket buffer."""

        def __init__(self) -> None:
            self.out = bytearray()
            self.budget = 0

        def write(self, b) -> int:
            n = min(self.budget, len(b))
            self.out += bytes(b[:n])
            self.budget -= n
            return n

    sink = Trickle()
    while not created:
        sink.budget = 7
        send.write_to(sink)
    assert created == [0]
    while not send.completed:
        sink.budget = 7
        send.write_to(sink)
    assert created == [0, 1, 2]
    assert bytes(sink.out) == response.to_bytes(1)
    assert send.records_sends_completed == 3


def _records_strategy():
    from hypothesis import strategies as st

    def build(kind: int, base: int, count: int, magic: int):
        b = RecordsBuilder(magic, base_offset=base)
        for i in range(count):
            b.append(offset=base + i, timestamp=1000 + i, key=b"k", value=b"v" * (i * 37 % 300))
        data = b.build()
        if kind == 0:
            return data
        if kind == 1:
            return MemoryRecords(data)
        if kind == 2:
            return LazyDownConvertedRecords(MemoryRecords(data), 0 if magic < 2 else 1, base + 1)
        return None

    return st.builds(build, st.integers(0, 3), st.integers(0, 1000), st.integers(1, 6),
                     st.sampled_from([1, 2]))


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_written_bytes_always_equal_the_declared_size() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60)
    @given(st.integers(0, 17), st.lists(st.lists(_records_strategy(), min_size=0, max_size=4),
                                        min_size=0, max_size=3), st.integers(1, 50))
    def check(version: int, topics, piece: int) -> None:
        body = {"responses": [
            {"topic": f"t{t}", "partitions": [
                {"partition_index": i, "high_watermark": 5, "records": r}
                for i, r in enumerate(parts)]}
            for t, parts in enumerate(topics)]}
        response = FetchResponse(version, body)
        send = response.to_send(3)

        class Pieces:
            def __init__(self) -> None:
                self.out = bytearray()
                self.budget = 0

            def write(self, b) -> int:
                n = min(self.budget, len(b))
                self.out += bytes(b[:n])
                self.budget -= n
                return n

        sink = Pieces()
        while not send.completed:
            sink.budget = piece
            send.write_to(sink)
        assert len(sink.out) == 4 + response.size_in_bytes
        _, decoded = FetchResponse.decode_framed(version, bytes(sink.out))
        assert [len(t["partitions"]) for t in decoded["responses"]] == [len(p) for p in topics]

    check()
