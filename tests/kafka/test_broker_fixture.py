"""The real-Kafka fixtures themselves: a Kafka 4 broker round-trips records of every codec, and
what happens to an old Fetch v2 request on Kafka 4 (closed, unanswered: why the gateway exists)
and on Kafka 3.9 (answered, down-converted, in the request log).

tests/kafka has no __init__.py on purpose: a package named ``kafka`` would shadow kafka-python.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from kafka_broker import (
    KafkaBroker,
    consume_all,
    create_topic,
    delete_topic,
    parse_request_log_line,
    produce_records,
    unique_topic,
)

from lazyconv.protocol._fetch import FetchRequest, FetchResponse

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def _records(codec: str, count: int = 30) -> list[tuple]:
    base_ts = 1_600_000_000_000  # old timestamps: log.retention.ms=-1 keeps them
    return [
        (
            i % PARTITIONS,
            None if i % 7 == 0 else f"key-{codec}-{i}".encode(),
            None if i % 11 == 5 else (f"value-{codec}-{i}-" * (i % 5 + 1)).encode(),
            base_ts + i,
            [("h", f"{i}".encode()), ("empty", b"")] if i % 3 == 0 else [],
        )
        for i in range(count)
    ]


def _fetch_v2(topic: str, partition: int) -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
    }


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


@pytest.mark.kafka
def test_kafka_4_round_trips_every_codec(kafka_broker: KafkaBroker) -> None:
    assert kafka_broker.version_info[0] >= 4
    assert kafka_broker.is_running()
    topic = unique_topic("fixture-codecs")
    create_topic(kafka_broker.bootstrap, topic, partitions=PARTITIONS)
    try:
        written = []
        for codec in CODECS:
            records = _records(codec)
            offsets = produce_records(kafka_broker.bootstrap, topic, records, compression=codec)
            assert len(offsets) == len(records)
            for (partition, key, value, ts, headers), offset in zip(records, offsets, strict=True):
                written.append((partition, offset, key, value, ts, list(headers)))
        read = consume_all(kafka_broker.bootstrap, topic, PARTITIONS)
        assert read == sorted(written, key=lambda r: (r[0], r[1]))
        # offsets per partition are 0..n-1, in the order each codec's records were written
        for p in range(PARTITIONS):
            assert [r[1] for r in read if r[0] == p] == list(range(sum(r[0] == p for r in read)))
    finally:
        delete_topic(kafka_broker.bootstrap, topic)


@pytest.mark.kafka
def test_kafka_4_closes_the_connection_on_fetch_v2(kafka_broker: KafkaBroker) -> None:
    """Kafka 4 refuses Fetch v0–3 without an answer: it closes the connection (an old client
    sees a disconnection, reconnects and tries again forever)."""
    topic = unique_topic("fixture-fetch-v2")
    create_topic(kafka_broker.bootstrap, topic)
    try:
        produce_records(kafka_broker.bootstrap, topic, [(0, b"k", b"v", None, None)])
        with socket.create_connection(("127.0.0.1", kafka_broker.port), timeout=10) as sock:
            sock.sendall(FetchRequest.encode_framed(2, _fetch_v2(topic, 0), 42, "fixture-v2"))
            try:
                answer = sock.recv(4096)
            except ConnectionResetError:
                answer = b""
        assert answer == b"", f"Kafka {kafka_broker.version} answered a Fetch v2: {answer!r}"
    finally:
        delete_topic(kafka_broker.bootstrap, topic)


@pytest.mark.kafka
def test_kafka_3_answers_fetch_v2_and_logs_it(kafka_broker_3: KafkaBroker) -> None:
    """Kafka 3.9 still serves Fetch v2 (down-converting to magic v1); the request log shows
    it, parsed by request_log_entries()."""
    assert kafka_broker_3.version_info[0] == 3
    topic = unique_topic("fixture-fetch-v2")
    client_id = f"fixture-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_broker_3.bootstrap, topic)
    try:
        produce_records(kafka_broker_3.bootstrap, topic,
                        [(0, b"k", b"v", 1_600_000_000_000, None)], compression="lz4")
        with socket.create_connection(("127.0.0.1", kafka_broker_3.port), timeout=10) as sock:
            sock.sendall(FetchRequest.encode_framed(2, _fetch_v2(topic, 0), 42, client_id))
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            frame = struct.pack(">i", size) + _recv_exact(sock, size)
        header, body = FetchResponse.decode_framed(2, frame)
        assert header["correlation_id"] == 42
        (partition,) = body["responses"][0]["partitions"]
        assert partition["error_code"] == 0 and partition["high_watermark"] == 1
        assert partition["records"], "no records in the Fetch v2 answer"

        deadline = time.monotonic() + 10  # logged once the answer has been sent
        while True:
            mine = [e for e in kafka_broker_3.request_log_entries() if e.client_id == client_id]
            if mine or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert mine == [("FETCH", 2, client_id)]
        (entry,) = mine
        assert entry.api_key == 1 and entry.correlation_id == 42 and not entry.forwarded
        assert entry.details["request"]["topics"][0]["topic"] == topic
        # the records were down-converted for v2 (magic v1): the broker timed the conversion
        assert "messageConversionsTime" in entry.details
        # the fixture's own clients are in the log too
        names = {e.api for e in kafka_broker_3.request_log_entries()}
        assert {"API_VERSIONS", "METADATA", "PRODUCE", "CREATE_TOPICS"} <= names
    finally:
        delete_topic(kafka_broker_3.bootstrap, topic)


def test_request_log_line_format() -> None:
    """A line as Kafka 3.9 writes it (request logger at DEBUG), shortened."""
    line = (
        '[2026-11-26 07:08:23,871] DEBUG Completed request:{"isForwarded":false,"requestHeader":'
        '{"requestApiKey":1,"requestApiVersion":2,"correlationId":7,"clientId":"raw-v2",'
        '"requestApiKeyName":"FETCH","requestApiVersionDeprecated":true},"request":'
        '{"replicaId":-1,"maxWaitMs":100,"minBytes":1,"topics":[]},"response":{"throttleTimeMs":0,'
        '"responses":[]},"connection":"127.0.0.1:37997-127.0.0.1:47216-3","totalTimeMs":6.514,'
        '"messageConversionsTime":1.468} (kafka.request.logger)\n'
    )
    entry = parse_request_log_line(line)
    assert entry == ("FETCH", 2, "raw-v2")
    assert (entry.api_key, entry.correlation_id, entry.deprecated) == (1, 7, True)
    api, version, client_id = entry
    assert (api, version, client_id) == ("FETCH", 2, "raw-v2")
    # a cut line still gives its header; other lines give nothing
    assert parse_request_log_line(line[:200]) == ("FETCH", 2, "raw-v2")
    assert parse_request_log_line("[2026-11-26 07:08:23,871] INFO something else") is None
