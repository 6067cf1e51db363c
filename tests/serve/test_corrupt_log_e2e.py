"""A corrupt batch planted in a served log stays that partition's problem: the partition answers
KAFKA_STORAGE_ERROR (NOT_LEADER_OR_FOLLOWER below Fetch v6), or, when the corrupt batch is met
after the lazy send committed its size, the good records before it arrive followed by padding;
the second partition of the same fetch arrives exactly (read with kafka-python's decoder)."""

from __future__ import annotations

import socket

import pytest
from lazy_support import consumer_records

from lazyconv.errors import ErrorCode
from lazyconv.logdir._directory import LogDirectory
from lazyconv.net._model import Listener
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol._fetch import FetchRequest, FetchResponse
from lazyconv.protocol._headers import encode_request_header
from lazyconv.records import RecordsBuilder
from lazyconv.serve._broker import Broker
from tests.net.test_robustness import wait_for
from tests.serve.test_append_validation import recrafted
from tests.serve.wire import WireClient

RECORDS_EACH = 40
VALUE = 700  # 40 records of 700 bytes: each batch is above the 16 KiB chunk


def batch(base: int) -> bytes:
    builder = RecordsBuilder(2, base_offset=base)
    for i in range(RECORDS_EACH):
        builder.append(offset=base + i, timestamp=1_000 + base + i, key=b"k%d" % (base + i),
                       value=bytes([(base + i) % 251]) * VALUE)
    return builder.build()


def expected(first: int, count: int) -> list[tuple]:
    return [(o, 1_000 + o, b"k%d" % o, bytes([o % 251]) * VALUE) for o in range(first, first + count)]


@pytest.fixture
def planted(tmp_path):
    """bad-0: batches 0, 1 good, batch 2 CRC-valid with garbage records, batch 3 good;
    good-0: four good batches."""
    good = [batch(i * RECORDS_EACH) for i in range(4)]
    corrupt = recrafted(good[2], payload=b"\xff" * (len(good[2]) - 61))
    for name, batches in (("bad", good[:2] + [corrupt, good[3]]), ("good", good)):
        (tmp_path / f"{name}-0").mkdir()
        (tmp_path / f"{name}-0" / f"{0:020d}.log").write_bytes(b"".join(batches))
    return tmp_path


def fetch_two(port: int, version: int, bad_offset: int | None) -> dict[str, dict]:
    """One Fetch naming bad-0 (at ``bad_offset``; left out if None) then good-0 (at 0)."""
    limit = 16 << 20
    asked = [("bad", bad_offset)] if bad_offset is not None else []
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": limit,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "topics": [
                {"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": limit}]}
                for topic, offset in asked + [("good", 0)]]}
    payload = encode_request_header(1, 1, version, 7, "corrupt-test") + FetchRequest.encode(version, body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(len(payload).to_bytes(4, "big") + payload)
        data = bytearray()
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            piece = sock.recv(1 << 20)
            assert piece, "the server closed the connection"
            data += piece
    _header, decoded = FetchResponse.decode_framed(version, bytes(data))
    return {t["topic"]: t["partitions"][0] for t in decoded["responses"]}


@pytest.mark.parametrize("version", [1, 3])
def test_corrupt_batch_at_the_fetch_offset_is_a_partition_error(serve_logdir, planted, version):
    """Down-conversion (Fetch v0-3) reads the records: the corrupt batch at the fetch offset is
    a storage error, answered NOT_LEADER_OR_FOLLOWER (6) below Fetch v6 as Kafka does."""
    server = serve_logdir(planted)
    alone = fetch_two(server.port, version, bad_offset=None)["good"]
    got = fetch_two(server.port, version, bad_offset=2 * RECORDS_EACH)
    assert got["bad"]["error_code"] == 6
    assert not got["bad"]["records"]
    assert got["good"]["error_code"] == 0
    assert bytes(got["good"]["records"]) == bytes(alone["records"])  # exactly as if fetched alone
    assert_records(got["good"]["records"], expected(0, 4 * RECORDS_EACH), version)
    assert server.server.handler.stats.storage_errors == 1


def assert_records(data, wanted: list[tuple], version: int) -> None:
    """The complete records of ``data`` are a non-empty prefix of ``wanted`` (a converted
    partition is cut at its committed size), timestamps only from magic 1."""
    got = consumer_records(bytes(data))
    assert got
    if version <= 1:  # magic 0: no timestamps
        got = [(o, k, v) for o, _t, k, v in got]
        wanted = [(o, k, v) for o, _t, k, v in wanted]
    assert got == wanted[:len(got)]


@pytest.mark.parametrize("senders", [False, True], ids=["in-process", "sender-process"])
@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.slow  # over a second: kept out of the quick look
def test_corrupt_batch_met_after_the_size_is_committed_pads(serve_logdir, planted, version, senders):
    """Also when a sender process writes the response: its padding and the corrupt send reach
    the server's counters and log."""
    from lazyconv.net._sender_pool import SenderPool

    pool = SenderPool(1) if senders else None
    server = serve_logdir(planted, chunk_size=16384, senders=pool)
    alone = fetch_two(server.port, version, bad_offset=None)["good"]
    got = fetch_two(server.port, version, bad_offset=0)
    assert got["bad"]["error_code"] == 0
    # the good records before the corrupt batch arrive (cut at the committed size at most),
    # then padding: nothing of the corrupt batch or after it
    assert_records(got["bad"]["records"], expected(0, 2 * RECORDS_EACH), version)
    assert bytes(got["good"]["records"]) == bytes(alone["records"])
    stats = server.server.handler.stats
    # the send is accounted for once the server has finished the response
    assert wait_for(lambda: stats.padded_bytes > 0 and stats.corrupt_sends == 1)
    # both fetches that convert were written by the sender (none by the server itself)
    assert pool is None or (pool.jobs_done, pool.jobs_not_started) == (2, 0)


def test_a_compression_bomb_is_that_partitions_storage_error(serve_logdir, planted):
    from lazyconv.records import Compression

    builder = RecordsBuilder(2, compression=Compression.GZIP)
    builder.append(offset=0, timestamp=1, key=None, value=bytes(2 << 20))  # 2 MiB of zeros
    bomb = builder.build()
    assert len(bomb) < 10_000
    (planted / "bad-0" / f"{0:020d}.log").write_bytes(bomb)
    server = serve_logdir(planted, max_decompressed_batch=1 << 20)
    alone = fetch_two(server.port, 1, bad_offset=None)["good"]
    got = fetch_two(server.port, 1, bad_offset=0)
    assert got["bad"]["error_code"] == 6  # KAFKA_STORAGE_ERROR as Fetch v1 sees it
    assert bytes(got["good"]["records"]) == bytes(alone["records"])


def test_list_offsets_reaching_a_corrupt_batch_is_that_partitions_storage_error(planted):
    # a lookup by timestamp reads records: the corrupt batch's error once escaped list_offsets
    # and closed the connection, so good-0 of the same request went unanswered too
    broker = Broker(LogDirectory(planted), [Listener(0, "127.0.0.1", 9092)], offsets_in_memory=True)
    wanted = 2 * RECORDS_EACH + 5  # in the corrupt batch of bad-0
    timestamp = 1_000 + wanted
    request = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
        for name in ("bad", "good")]}
    bad, good = (t["partitions"][0] for t in broker.list_offsets(7, request)["topics"])
    assert (bad["error_code"], bad["offset"]) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
    assert (good["error_code"], good["offset"], good["timestamp"]) == (0, wanted, 1_000 + wanted)
    assert broker.stats.storage_errors == 1


@pytest.mark.parametrize("session_id", [0, 1234])
def test_an_incremental_fetch_of_an_unknown_session_is_session_id_not_found(serve_logdir, planted,
                                                                             session_id) -> None:
    """serve keeps no sessions; Kafka's FetchManager answers any session id its cache lacks, 0
    included, with FETCH_SESSION_ID_NOT_FOUND (70); session id 0 got INVALID_FETCH_SESSION_EPOCH
    (71) here (found by a review)."""
    server = serve_logdir(planted)
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": 3,
            "forgotten_topics_data": [], "rack_id": "", "topics": []}
    with WireClient(server.port) as client:
        decoded = client.call(fetch.SPEC, 12, body)
    assert decoded["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
