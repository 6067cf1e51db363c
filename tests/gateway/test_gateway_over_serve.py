"""The gateway in front of ``lazyconv serve`` (a stand-in cluster that needs no JVM): what an old
client reads through the gateway is what it reads from a broker that down-converts itself, what
it produces arrives as v2 batches, and no request reaches the upstream below Kafka 4.0's floor."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
import uuid

import pytest

from lazyconv.conversion._cache import conversion_cache
from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._floor import upstream_floor
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _end_txn as end_txn
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _init_producer_id as init_producer_id
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from tests.gateway.conftest import GatewayThread
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

# (topic, partitions) of the committed fixture that a read_uncommitted consumer reads whole
TOPICS = [("codecs", 2), ("nulls", 2), ("logappend", 2), ("upgraded", 2), ("headers", 2),
          ("compacted", 2), ("transactions", 2), ("idempotent", 2), ("tiny", 2)]


def consume(port: int, version: int, topic: str, partition: int, *,
            partition_max_bytes: int = 1 << 20) -> tuple[list[tuple], int, int]:
    """Every record of one partition read with raw Fetch requests of ``version`` from offset 0:
    (records as (offset, key, value, timestamp, magic), the offset it stopped at, the error)."""
    records: list[tuple] = []
    offset = 0
    with WireClient(port) as client:
        for _ in range(10000):
            answer = client.call(fetch.SPEC, version, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "fetch_offset": offset,
                    "partition_max_bytes": partition_max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = answer["responses"][0]["partitions"][0]
            if part["error_code"]:
                return records, offset, part["error_code"]
            data = part["records"] or b""
            advanced = offset
            for batch in MemoryRecords(data).batches():
                for record in batch:
                    if record.offset >= offset:
                        records.append((record.offset, record.key, record.value,
                                        record.timestamp if batch.magic > 0 else None, batch.magic))
                advanced = max(advanced, batch.last_offset + 1)
            if advanced == offset:
                return records, offset, 0 if offset >= part["high_watermark"] else -99
            offset = advanced
    raise AssertionError("the consumer did not finish")


@pytest.mark.parametrize("version", [0, 2, 3])
@pytest.mark.slow  # over a second: kept out of the quick look
def test_old_fetch_versions_read_what_a_down_converting_broker_gives(serve_upstream: ServerThread,
                                                                     gateway_over_serve: GatewayThread,
                                                                     version: int) -> None:
    for topic, partitions in TOPICS:
        for p in range(partitions):
            direct = consume(serve_upstream.port, version, topic, p)
            relayed = consume(gateway_over_serve.port, version, topic, p)
            assert relayed == direct, f"{topic}-{p} at Fetch v{version}"
            assert direct[0], f"{topic}-{p}: nothing read"
            assert max(r[4] for r in relayed[0]) <= (0 if version < 2 else 1)
    # the codecs topic holds zstd batches: refused with error 76 at the same offset, as a broker
    stopped = consume(gateway_over_serve.port, version, "codecs", 0)
    assert stopped[2] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _raw_reads(port: int, topic: str, partition: int) -> list[bytes]:
    """The records bytes of every Fetch v2 response while one old consumer reads the partition
    from offset 0 (256 KiB per fetch), up to its end or an error."""
    reads: list[bytes] = []
    offset = 0
    with WireClient(port) as client:
        for _ in range(10000):
            answer = client.call(fetch.SPEC, 2, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "fetch_offset": offset, "partition_max_bytes": 256 << 10}]}]})
            part = answer["responses"][0]["partitions"][0]
            data = bytes(part["records"] or b"")
            if part["error_code"] or not data:
                return reads
            reads.append(data)
            advanced = max((batch.last_offset + 1 for batch in MemoryRecords(data).batches()), default=offset)
            if advanced <= offset:  # only part of a message larger than the fetch size
                return reads
            offset = advanced
    raise AssertionError("the consumer did not finish")


def test_old_consumers_of_the_same_records_reuse_the_conversions(serve_upstream: ServerThread,
                                                                 gateway_over_serve: GatewayThread) -> None:
    """A second old consumer of the same compressed records is answered from the conversions
    kept for the first (the upstream sends it the same bytes), with the very bytes converting
    again gives."""
    # gzip, lz4 and uncompressed batches; the codecs topic's zstd batch ends its old readers
    # (error 76): a conversion that meets an error is not kept, so each reader meets it
    kept = [("transactions", 0), ("transactions", 1)]
    stopped = [("codecs", 0), ("codecs", 1)]
    port = gateway_over_serve.port
    saved = conversion_cache.max_bytes
    try:
        conversion_cache.resize(0)
        uncached = [_raw_reads(port, t, p) for t, p in kept + stopped]
        conversion_cache.resize(16 << 20)
        first = [_raw_reads(port, t, p) for t, p in kept + stopped]
        before = conversion_cache.counts
        second = [_raw_reads(port, t, p) for t, p in kept]
        after = conversion_cache.counts
        second += [_raw_reads(port, t, p) for t, p in stopped]
    finally:
        conversion_cache.resize(saved)
    assert all(uncached) and first == second == uncached
    # every lookup of the second reader of the transactions topic (each response's first batch,
    # then each chunk) is answered
    assert after.hits > before.hits and after.misses == before.misses


@pytest.mark.parametrize("version", [4, 9, 11, 12])
def test_v2_readers_get_the_upstream_batches(serve_upstream: ServerThread,
                                            gateway_over_serve: GatewayThread, version: int) -> None:
    for topic, partitions in TOPICS:
        for p in range(partitions):
            direct = consume(serve_upstream.port, version, topic, p)
            relayed = consume(gateway_over_serve.port, version, topic, p)
            if version < 10 and relayed[2] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE:
                # A zstd batch is not handed to a client that cannot read it (a broker hands it
                # over when the topic's compression.type is not zstd: docs/differences.md).
                assert topic in ("codecs", "upgraded")
                assert relayed[0] == direct[0][:len(relayed[0])]
                assert len(relayed[0]) < len(direct[0])
                continue
            assert relayed == direct, f"{topic}-{p} at Fetch v{version}"


def test_fetch_by_topic_id(serve_upstream: ServerThread, gateway_over_serve: GatewayThread) -> None:
    with WireClient(gateway_over_serve.port) as client:
        meta = client.call(metadata.SPEC, 12, {"topics": [{"name": "nulls"}]})
        topic_id = meta["topics"][0]["topic_id"]
        answer = client.call(fetch.SPEC, 13, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    part = answer["responses"][0]["partitions"][0]
    assert answer["responses"][0]["topic_id"] == topic_id
    assert part["error_code"] == 0 and part["records"]


@pytest.mark.parametrize("version", [7, 12, 17])
def test_an_incremental_fetch_of_a_session_never_made_is_fetch_session_id_not_found(
        gateway_over_serve: GatewayThread, version: int) -> None:
    """The gateway answers session id 0, so it knows no session: a fetch of epoch > 0 (which
    names only what changed) gets FETCH_SESSION_ID_NOT_FOUND and no partitions, as from Kafka;
    a full fetch that closes a session (epoch 0 or -1) is answered."""
    with WireClient(gateway_over_serve.port) as client:
        topic_id = client.call(metadata.SPEC, 12, {"topics": [{"name": "nulls"}]})["topics"][0]["topic_id"]

    def ask(session_id: int, epoch: int) -> dict:
        with WireClient(gateway_over_serve.port) as client:
            return client.call(fetch.SPEC, version, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic": "nulls", "topic_id": topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})

    for session_id, epoch in ((7, 3), (0, 1)):
        answer = ask(session_id, epoch)
        assert (answer["error_code"], answer["session_id"], answer["responses"]) == \
            (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    for epoch in (0, -1):
        answer = ask(7, epoch)
        assert (answer["error_code"], answer["session_id"]) == (0, 0)
        assert answer["responses"][0]["partitions"][0]["records"]


def test_metadata_presents_the_gateway_as_the_cluster(gateway_over_serve: GatewayThread) -> None:
    for version in (0, 1, 9, 12):
        with WireClient(gateway_over_serve.port) as client:
            meta = client.call(metadata.SPEC, version, {"topics": [{"name": "codecs"},
                                                                   {"name": "no-such-topic"}],
                                                        "allow_auto_topic_creation": False})
        assert meta["brokers"] == [{"node_id": 0, "host": "127.0.0.1",
                                    "port": gateway_over_serve.port, "rack": None}] or \
            [(b["node_id"], b["port"]) for b in meta["brokers"]] == [(0, gateway_over_serve.port)]
        codecs, missing = meta["topics"]
        assert codecs["error_code"] == 0
        assert sorted(p["partition_index"] for p in codecs["partitions"]) == [0, 1]
        assert all(p["leader_id"] == 0 for p in codecs["partitions"])
        assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_v0_with_no_topic_lists_every_topic(gateway_over_serve: GatewayThread) -> None:
    with WireClient(gateway_over_serve.port) as client:
        every = client.call(metadata.SPEC, 0, {"topics": []})
        twice = client.call(metadata.SPEC, 1, {"topics": [{"name": "tiny"}, {"name": "tiny"}]})
    assert {t["name"] for t in every["topics"]} >= {"codecs", "nulls", "tiny", "transactions"}
    assert [t["name"] for t in twice["topics"]] == ["tiny"]


def test_a_topic_list_holds_no_topic_a_lookup_found_missing(gateway_over_serve: GatewayThread) -> None:
    """A Metadata lookup of a topic that does not exist, between two listings of every topic:
    the second listing does not name it (nor an empty name), as a broker's does not (found by a
    review: `kafka-topics --list` would have shown them)."""
    with WireClient(gateway_over_serve.port) as client:
        first = client.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
        missing = client.call(metadata.SPEC, 12, {"topics": [{"name": "nope"}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        again = client.call(metadata.SPEC, 1, {"topics": None})
    assert missing["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert {t["name"] for t in again["topics"]} == {t["name"] for t in first["topics"]}
    assert "nope" not in {t["name"] for t in again["topics"]}


def test_a_topic_list_in_an_outage_holds_no_topic_a_lookup_found_missing(served_fixtures,
                                                                         gateway_factory) -> None:
    """With the cluster down, a listing of every topic is answered from the cache: the topics
    it listed, not a name a lookup found missing."""
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap, metadata_max_age_ms=100)
        with WireClient(gateway.port) as client:
            first = client.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
            client.call(metadata.SPEC, 12, {"topics": [{"name": "nope"}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
            upstream.stop()
            time.sleep(0.2)  # the cache is older than its max age: the listing asks the cluster
            again = client.call(metadata.SPEC, 1, {"topics": None})
    finally:
        upstream.stop()
    assert {(t["name"], t["error_code"]) for t in again["topics"]} == \
        {(t["name"], 0) for t in first["topics"]}


def test_topics_asked_by_id_in_an_outage_are_answered_from_the_cache(served_fixtures,
                                                                     gateway_factory) -> None:
    """With the cluster down, Metadata v12 by topic id answers a topic the cache holds (it was
    left out of the answer) and an id it does not hold as retriable, not as unknown."""
    upstream = ServerThread(served_fixtures)
    unheard = uuid.uuid4()
    try:
        gateway = gateway_factory(upstream.bootstrap, metadata_max_age_ms=100)
        with WireClient(gateway.port) as client:
            every = client.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
            tiny = next(t["topic_id"] for t in every["topics"] if t["name"] == "tiny")
            upstream.stop()
            time.sleep(0.2)  # the cache is older than its max age: the lookup asks the cluster
            answer = client.call(metadata.SPEC, 12, {
                "topics": [{"name": None, "topic_id": tiny}, {"name": None, "topic_id": unheard}],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    finally:
        upstream.stop()
    got = {t["topic_id"]: (t["name"], t["error_code"]) for t in answer["topics"]}
    assert got == {tiny: ("tiny", 0), unheard: (None, 5)}  # LEADER_NOT_AVAILABLE


def test_metadata_by_an_unknown_topic_id_is_unknown_topic_id(gateway_over_serve: GatewayThread) -> None:
    """Metadata v12 by a topic id nobody knows: UNKNOWN_TOPIC_ID with the id asked and no name,
    as a broker answers (it was looked up upstream by an empty name and answered
    UNKNOWN_TOPIC_OR_PARTITION with a zero id, which Java's client cannot read); a known id next
    to it is answered with its name."""
    import uuid

    with WireClient(gateway_over_serve.port) as client:
        listing = client.call(metadata.SPEC, 12, {"topics": [{"name": "tiny"}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        tiny_id = listing["topics"][0]["topic_id"]
        unknown = uuid.uuid4()
        answer = client.call(metadata.SPEC, 12, {
            "topics": [{"name": None, "topic_id": unknown}, {"name": None, "topic_id": tiny_id}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    by_id = {t["topic_id"]: t for t in answer["topics"]}
    assert by_id[unknown]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    assert by_id[unknown]["name"] is None and by_id[unknown]["partitions"] == []
    assert by_id[tiny_id]["name"] == "tiny" and by_id[tiny_id]["error_code"] == 0
    assert len(answer["topics"]) == 2


@pytest.mark.parametrize("version", [1, 9, 12])
def test_an_empty_topic_name_is_answered_as_a_name(gateway_over_serve: GatewayThread,
                                                   version: int) -> None:
    """An empty name (its topic id, where the version has one, the zero id) is asked as that
    name and answered with it, never as an unknown id with a null name, which those versions
    cannot hold (the id lookup's first version broke this, found by the broker's fuzz test)."""
    body: dict = {"topics": [{"name": ""}, {"name": ""}]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    with WireClient(gateway_over_serve.port) as client:
        answer = client.call(metadata.SPEC, version, body)
    assert [t["name"] for t in answer["topics"]] == [""]
    assert answer["topics"][0]["error_code"] != 0


def test_list_offsets_v0_answers_from_v1(serve_upstream: ServerThread,
                                         gateway_over_serve: GatewayThread) -> None:
    with WireClient(gateway_over_serve.port) as client:
        answer = client.call(list_offsets.SPEC, 0, {"replica_id": -1, "topics": [
            {"name": "nulls", "partitions": [
                {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1},
                {"partition_index": 1, "timestamp": -2, "max_num_offsets": 1}]}]})
    latest, earliest = answer["topics"][0]["partitions"]
    with WireClient(serve_upstream.port) as client:
        direct = client.call(list_offsets.SPEC, 1, {"replica_id": -1, "topics": [
            {"name": "nulls", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert latest["old_style_offsets"] == [direct["topics"][0]["partitions"][0]["offset"]]
    assert earliest["old_style_offsets"] == [0]


def legacy_set(magic: int, codec: Compression, count: int, ts0: int = 1_700_000_000_000) -> bytes:
    builder = RecordsBuilder(magic, codec, base_offset=0)
    for i in range(count):
        builder.append(timestamp=ts0 + i if magic else -1, key=b"k%d" % i, value=b"v%d" % i)
    return builder.build()


def produce_request(version: int, topic: str, records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


@pytest.mark.parametrize("version,magic,codec", [
    (0, 0, Compression.NONE), (1, 0, Compression.GZIP), (2, 1, Compression.NONE),
    (2, 1, Compression.LZ4), (2, 1, Compression.SNAPPY), (1, 0, Compression.LZ4),
])
def test_old_produce_is_up_converted(served_fixtures, gateway_factory, version: int, magic: int,
                                     codec: Compression) -> None:
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap)
        with WireClient(gateway.port) as client:
            first = client.call(produce.SPEC, version, produce_request(version, "sink", legacy_set(magic, codec, 5)))
            second = client.call(produce.SPEC, version, produce_request(version, "sink", legacy_set(magic, codec, 3)))
        bases = [a["responses"][0]["partition_responses"][0] for a in (first, second)]
        assert [(b["error_code"], b["base_offset"]) for b in bases] == [(0, 0), (0, 5)]
        got = consume(upstream.port, 12, "sink", 0)[0]
        assert [(o, k, v) for o, k, v, _ts, _m in got] == \
            [(i, b"k%d" % j, b"v%d" % j) for i, j in enumerate([0, 1, 2, 3, 4, 0, 1, 2])]
        assert {m for *_, m in got} == {2}
        expected_ts = [1_700_000_000_000 + j if magic else -1 for j in [0, 1, 2, 3, 4, 0, 1, 2]]
        assert [ts for _o, _k, _v, ts, _m in got] == expected_ts
        batches = list(MemoryRecords(_log_bytes(served_fixtures / "sink-0")).batches())
        assert {b.compression for b in batches} == {codec}
        # nothing below the Kafka 4.0 floor reached the upstream
        counts = upstream.server.request_counts
        assert counts, "the upstream saw no request"
        for (key, v), _n in counts.items():
            assert v >= upstream_floor(key), f"api {key} v{v} sent upstream"
    finally:
        upstream.stop()


def test_a_producers_requests_in_flight_stay_in_flight_upstream(served_fixtures,
                                                                 gateway_factory) -> None:
    """Old producers keep several Produce requests in flight: the gateway sends each upstream
    before the previous one is answered (the upstream here takes 400 ms per Produce), answers
    them in order, and the records land in the order they were sent."""
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures, produce_delays=(400,))
    try:
        gateway = gateway_factory(upstream.bootstrap)
        server = gateway.gateway.server

        async def upstream_in_flight() -> int:  # read on the gateway's loop
            return max((conn._client.pending for session in server.sessions.values()
                        for conn in getattr(session.state, "_connections", {}).values()), default=0)

        counts = [5, 3, 4, 2]
        with WireClient(gateway.port) as client:
            # the first one opens the upstream connection and learns the leader
            client.call(produce.SPEC, 2, produce_request(2, "sink", legacy_set(1, Compression.NONE, 1)))
            sent = [client.send(produce.SPEC, 2, produce_request(
                2, "sink", legacy_set(1, Compression.NONE, n, ts0=1_700_000_000_000 + 100 * i)))
                for i, n in enumerate(counts)]
            in_flight = 0
            deadline = time.monotonic() + 0.3  # before the first answer
            while time.monotonic() < deadline and in_flight < len(counts):
                in_flight = max(in_flight, asyncio.run_coroutine_threadsafe(
                    upstream_in_flight(), gateway.loop).result(5))
                time.sleep(0.005)
            answers = [client.receive(produce.SPEC, 2) for _ in sent]
        assert in_flight == len(counts)
        assert [corr for corr, _ in answers] == sent
        bases = [a["responses"][0]["partition_responses"][0] for _, a in answers]
        assert [(b["error_code"], b["base_offset"]) for b in bases] == [(0, 1), (0, 6), (0, 9), (0, 13)]
        got = consume(upstream.port, 12, "sink", 0)[0][1:]
        assert [(o, ts) for o, _k, _v, ts, _m in got] == [
            (o + 1, 1_700_000_000_000 + 100 * i + j)
            for o, (i, j) in enumerate((i, j) for i, n in enumerate(counts) for j in range(n))]
    finally:
        upstream.stop()


def _log_bytes(folder) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.log")))


def test_a_refused_message_set_gets_the_brokers_error_and_others_go_through(
        served_fixtures, gateway_factory, caplog: pytest.LogCaptureFixture) -> None:
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap)
        good = legacy_set(1, Compression.NONE, 2)
        corrupt = bytearray(good)
        corrupt[20] ^= 0xFF  # inside the first message, after its CRC
        with WireClient(gateway.port) as client:
            answer = client.call(produce.SPEC, 2, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "sink", "partition_data": [{"index": 0, "records": bytes(corrupt)}]},
                {"name": "nulls", "partition_data": [{"index": 0, "records": good}]}]})
            # a producer retrying it (CORRUPT_MESSAGE is retriable) is not a line per request
            for _ in range(20):
                again = client.call(produce.SPEC, 2, produce_request(2, "sink", bytes(corrupt)))
                assert again["responses"][0]["partition_responses"][0]["error_code"] == \
                    ErrorCode.CORRUPT_MESSAGE
        codes = [t["partition_responses"][0]["error_code"] for t in answer["responses"]]
        assert codes == [ErrorCode.CORRUPT_MESSAGE, 0]
        assert _log_bytes(served_fixtures / "sink-0") == b""
        refused = [r.getMessage() for r in caplog.records
                   if r.levelno >= logging.WARNING and "refused produce to sink-0" in r.getMessage()]
        assert len(refused) == 1, refused
    finally:
        upstream.stop()


def test_upstream_records_that_do_not_convert_are_refused_and_logged_once(
        gateway_over_serve, caplog: pytest.LogCaptureFixture) -> None:
    """An old consumer stuck at a batch the gateway cannot down-convert (beyond the decompression
    bound, made small here) fetches it again and again: CORRUPT_MESSAGE each time, one line."""
    gateway_over_serve.handler.fetches.max_decompressed_batch = 64
    with WireClient(gateway_over_serve.port) as client:
        for _ in range(20):
            answer = client.call(fetch.SPEC, 2, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                    {"topic": "codecs", "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    lines = [r.getMessage() for r in caplog.records
             if r.levelno >= logging.WARNING and "codecs-0 at 0" in r.getMessage()]
    assert len(lines) == 1 and "do not decode" in lines[0], lines


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_timestamp_delta_beyond_int64_refuses_only_its_partition(
        served_fixtures, gateway_factory, codec: Compression) -> None:
    """Timestamps -1 then INT64_MAX in one magic 1 set: a v2 batch's timestamp delta cannot hold
    the difference (Kafka's Java wraps it around), so that partition gets INVALID_TIMESTAMP; the
    other partition is written and the connection goes on."""
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap)
        builder = RecordsBuilder(1, codec, base_offset=0)
        builder.append(timestamp=-1, key=b"a", value=b"b")
        builder.append(timestamp=(1 << 63) - 1, key=b"c", value=b"d")
        far = builder.build()
        with WireClient(gateway.port) as client:
            answer = client.call(produce.SPEC, 2, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "sink", "partition_data": [{"index": 0, "records": far}]},
                {"name": "nulls", "partition_data": [{"index": 0, "records": legacy_set(1, codec, 2)}]}]})
            codes = [t["partition_responses"][0]["error_code"] for t in answer["responses"]]
            assert codes == [ErrorCode.INVALID_TIMESTAMP, 0]
            assert client.call(produce.SPEC, 2, produce_request(2, "sink", legacy_set(1, codec, 1)))[
                "responses"][0]["partition_responses"][0]["error_code"] == 0
    finally:
        upstream.stop()


def test_acks_zero_gets_no_answer_but_is_written(served_fixtures, gateway_factory) -> None:
    (served_fixtures / "sink-0").mkdir()
    upstream = ServerThread(served_fixtures)
    try:
        gateway = gateway_factory(upstream.bootstrap)
        with WireClient(gateway.port) as client:
            client.correlation_id += 1
            from lazyconv.protocol._headers import encode_request_header
            header = encode_request_header(1, produce.SPEC.key, 2, client.correlation_id, "t")
            body = produce.SPEC.encode_request(2, produce_request(2, "sink", legacy_set(1, Compression.NONE, 4), acks=0))
            client.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            # the next request's answer comes first: nothing was sent for acks=0
            meta = client.call(api_versions.SPEC, 0, {})
            assert meta["error_code"] == 0
        for _ in range(100):
            if len(consume(upstream.port, 12, "sink", 0)[0]) == 4:
                break
            import time
            time.sleep(0.05)
        assert len(consume(upstream.port, 12, "sink", 0)[0]) == 4
    finally:
        upstream.stop()


def test_api_versions_lists_what_the_gateway_serves(gateway_over_serve: GatewayThread) -> None:
    with WireClient(gateway_over_serve.port) as client:
        answer = client.call(api_versions.SPEC, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"})
    table = {e["api_key"]: (e["min_version"], e["max_version"]) for e in answer["api_keys"]}
    assert table[produce.SPEC.key] == (0, produce.SPEC.max_version)
    assert table[fetch.SPEC.key] == (0, fetch.SPEC.max_version)
    assert table[list_offsets.SPEC.key][0] == 0
    # what the gateway answers or converts, and what this upstream (serve: the transaction
    # APIs too) serves, at its versions; nothing serve does not serve
    assert set(table) == {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 22, 24, 25, 26, 28}
    assert table[9] == (0, 8)  # OffsetFetch v8 (groups batched) because serve speaks it
    for spec in (init_producer_id.SPEC, add_partitions_to_txn.SPEC, end_txn.SPEC):
        assert table[spec.key] == (spec.min_version, spec.max_version)


def test_an_api_the_upstream_does_not_serve_is_refused_not_closed(
        gateway_over_serve: GatewayThread) -> None:
    """CreateTopics (serve has no admin APIs): not advertised; sent anyway, it is answered with
    UNSUPPORTED_VERSION per topic, and the connection stays."""
    from lazyconv.protocol import _create_topics as create_topics

    with WireClient(gateway_over_serve.port) as client:
        answer = client.call(create_topics.SPEC, 7, {"topics": [
            {"name": "new", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 1000})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == \
            [("new", ErrorCode.UNSUPPORTED_VERSION)]
        again = client.call(metadata.SPEC, 1, {"topics": [{"name": "tiny"}]})
        assert again["topics"][0]["error_code"] == 0


@pytest.mark.parametrize("frame", [
    b"\x00\x00\x00\x04garb",                       # shorter than a header
    b"\x7f\xff\xff\xff",                           # a size far beyond the limit
    struct.pack(">ihhi", 10, 99, 0, 1) + b"xx",    # an API key the gateway does not serve
    struct.pack(">ihhih", 14, 1, 2, 7, 0) + b"\x00\x00\xff\xff",  # a Fetch body cut short
])
def test_garbage_closes_only_that_connection(gateway_over_serve: GatewayThread, frame: bytes) -> None:
    bystander = WireClient(gateway_over_serve.port)
    with socket.create_connection(("127.0.0.1", gateway_over_serve.port), timeout=10) as sock:
        sock.sendall(frame)
        sock.settimeout(10)
        try:  # closed without an answer, as a broker does
            assert sock.recv(100) == b""
        except ConnectionResetError:  # unread bytes turn the close into a reset
            pass
    answer = bystander.call(metadata.SPEC, 1, {"topics": [{"name": "tiny"}]})
    assert answer["topics"][0]["error_code"] == 0
    bystander.close()


def test_an_unreachable_cluster_is_one_clear_error(gateway_factory) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UpstreamError, match="no upstream broker reachable"):
        gateway_factory(f"127.0.0.1:{port}")


def test_a_lost_upstream_is_a_retriable_error_then_recovers(served_fixtures, gateway_factory) -> None:
    upstream = ServerThread(served_fixtures)
    port = upstream.port
    gateway = gateway_factory(upstream.bootstrap, metadata_max_age_ms=200)
    before = consume(gateway.port, 2, "tiny", 0)
    upstream.stop()
    with WireClient(gateway.port) as client:
        answer = client.call(fetch.SPEC, 2, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                                             "topics": [{"topic": "tiny", "partitions": [
                                                 {"partition": 0, "fetch_offset": 0,
                                                  "partition_max_bytes": 1 << 20}]}]})
        assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        sent = client.call(produce.SPEC, 2, produce_request(2, "tiny", legacy_set(1, Compression.NONE, 1)))
        assert sent["responses"][0]["partition_responses"][0]["error_code"] == \
            ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the broker comes back on the same port: the same client connection reads again
    import asyncio
    import threading

    from lazyconv.serve import Broker, KafkaServer, ListenerSpec, LogDirectory
    logdir = LogDirectory(served_fixtures)
    server = KafkaServer(lambda ls: Broker(logdir, ls), [ListenerSpec("127.0.0.1", port)])
    loop = asyncio.new_event_loop()
    threading.Thread(target=lambda: (asyncio.set_event_loop(loop),
                                     loop.run_until_complete(server.start()),
                                     loop.run_forever()), daemon=True).start()
    try:
        import time
        deadline = time.monotonic() + 10
        while True:
            after = consume(gateway.port, 2, "tiny", 0)
            if after == before or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert after == before
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)


@pytest.mark.slow
def test_a_group_through_the_gateway_commits_and_resumes(serve_upstream: ServerThread,
                                                         gateway_over_serve: GatewayThread) -> None:
    """kafka-python pinned to 0.9 (JoinGroup v0, OffsetCommit v2, OffsetFetch v1) in a group
    whose coordinator is serve's, through the gateway: split nothing, commit, resume."""
    from tests.gateway.clients import BY_ID as DRIVERS
    from tests.gateway.clients import CLIENT_TIMEOUT_S
    from tests.interop.checks import received

    driver = DRIVERS["kafka-python-3.0-0.9"]
    topic, group = "nulls", "gw-serve-group"
    ends = {p: consume(serve_upstream.port, 12, topic, p)[0] for p in (0, 1)}
    mid = {p: rows[len(rows) // 2][0] for p, rows in ends.items()}
    job = {"action": "consume", "mode": "subscribe", "topics": [topic], "group": group,
           "expect_partitions": 2, "commit": True, "last": {f"{topic}/{p}": mid[p] for p in mid}}
    # the first member closes (LeaveGroup) before the second joins, as an application does: a
    # driver killed at "done" would leave the second JoinGroup waiting out its 10 s session
    events = driver.start(None, gateway_over_serve.bootstrap, job)
    try:
        events.wait_for("done", CLIENT_TIMEOUT_S + 10)
        events.child.proc.wait(CLIENT_TIMEOUT_S)
    finally:
        events.child.kill()
    first = received(events.events)
    job["last"] = {f"{topic}/{p}": rows[-1][0] for p, rows in ends.items()}
    second = received(driver.run(None, gateway_over_serve.bootstrap, job).events)
    for p, rows in ends.items():
        assert [r[0] for r in first[(topic, p)]] == [r[0] for r in rows if r[0] <= mid[p]]
        assert [r[0] for r in second[(topic, p)]] == [r[0] for r in rows if r[0] > mid[p]]
    counts = serve_upstream.server.request_counts
    assert all(v >= upstream_floor(key) for (key, v) in counts)
    assert (11, 0) not in counts and any(key == 11 for key, _v in counts)  # JoinGroup upstream >= 2
    assert any(key == 13 for key, _v in counts), counts  # the first member's LeaveGroup


def test_a_transaction_is_relayed_to_its_coordinator_and_leader(
        gateway_over_serve: GatewayThread) -> None:
    """FindCoordinator (transaction) answered with the gateway; InitProducerId, AddPartitionsToTxn,
    Produce with the producer's id and EndTxn relayed as they came (serve upstream); a
    read_committed fetch through the gateway then sees the committed record."""
    from lazyconv.protocol import KAFKA_API_BY_KEY

    find, init, add, end = (KAFKA_API_BY_KEY[k] for k in (10, 22, 24, 26))
    with WireClient(gateway_over_serve.port, "txn-app") as client:
        found = client.call(find, 4, {"key_type": 1, "coordinator_keys": ["t-1"]})
        coordinator = found["coordinators"][0]
        assert (coordinator["error_code"], coordinator["port"]) == (0, gateway_over_serve.port)
        ids = client.call(init, 2, {"transactional_id": "t-1", "transaction_timeout_ms": 60000})
        assert ids["error_code"] == 0 and ids["producer_id"] >= 0
        pid, epoch = ids["producer_id"], ids["producer_epoch"]
        added = client.call(add, 3, {"v3_and_below_transactional_id": "t-1",
                                     "v3_and_below_producer_id": pid,
                                     "v3_and_below_producer_epoch": epoch,
                                     "v3_and_below_topics": [{"name": "tiny", "partitions": [0]}]})
        assert [p["partition_error_code"] for t in added["results_by_topic_v3_and_below"]
                for p in t["results_by_partition"]] == [0]
        builder = RecordsBuilder(2, Compression.NONE, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=0, is_transactional=True)
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"committed")
        produced = client.call(produce.SPEC, 8, {"transactional_id": "t-1", "acks": -1,
                                                 "timeout_ms": 5000, "topic_data": [
            {"name": "tiny", "partition_data": [{"index": 0, "records": builder.build()}]}]})
        written = produced["responses"][0]["partition_responses"][0]
        assert written["error_code"] == 0
        ended = client.call(end, 3, {"transactional_id": "t-1", "producer_id": pid,
                                     "producer_epoch": epoch, "committed": True})
        assert ended["error_code"] == 0
        answer = client.call(fetch.SPEC, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "tiny", "partitions": [{"partition": 0,
                                                  "fetch_offset": written["base_offset"],
                                                  "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
    part = answer["responses"][0]["partitions"][0]
    values = [r.value for b in MemoryRecords(part["records"]).batches() if not b.is_control
              for r in b]
    assert values == [b"committed"]
    assert part["last_stable_offset"] == written["base_offset"] + 2  # the record and the marker


@pytest.mark.parametrize("convert_on_loop", ["quick", "never"])
def test_uncompressed_fetches_are_converted_on_the_loop_and_the_others_on_the_pool(
        serve_upstream: ServerThread, gateway_factory, monkeypatch: pytest.MonkeyPatch,
        convert_on_loop: str) -> None:
    """``--convert-on-loop quick`` (the default) down-converts fetches of uncompressed records
    on the event loop and the others on the worker pool; ``never`` sends every conversion to
    the pool. The records are those a down-converting broker gives either way."""
    gateway = gateway_factory(serve_upstream.bootstrap, convert_on_loop=convert_on_loop)
    workers = gateway.gateway.workers
    steps: list[object] = []
    run = workers.run

    async def counted(fn, *args):  # type: ignore[no-untyped-def]
        steps.append(fn)
        return await run(fn, *args)

    monkeypatch.setattr(workers, "run", counted)
    for topic, on_the_pool in (("tiny", convert_on_loop == "never"), ("headers", True),
                               ("nulls", True)):
        steps.clear()
        relayed = consume(gateway.port, 2, topic, 0, partition_max_bytes=64 << 10)
        assert relayed == consume(serve_upstream.port, 2, topic, 0, partition_max_bytes=64 << 10)
        assert relayed[0] and relayed[2] == 0
        assert bool(steps) == on_the_pool, f"{topic}: {len(steps)} steps on the pool"


def test_convert_on_loop_takes_only_quick_or_never(serve_upstream: ServerThread) -> None:
    from lazyconv.errors import ConfigurationError
    from lazyconv.gateway import Gateway

    with pytest.raises(ConfigurationError, match="quick or never"):
        Gateway(serve_upstream.bootstrap, port=0, convert_on_loop="always")
