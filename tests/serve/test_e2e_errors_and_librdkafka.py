"""librdkafka consumers through the server; zstd and no-down-conversion errors to real clients."""

from __future__ import annotations

import socket
import time

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.protocol import FetchRequest, FetchResponse
from lazyconv.protocol._headers import encode_request_header
from lazyconv.serve import TopicConfig
from tests.serve.logbuild import build_mixed_log, build_zstd_log

kafka = pytest.importorskip("kafka", reason="needs the dev extra: pip install -e '.[dev]'")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs the dev extra: pip install -e '.[dev]'")

TOPIC = "legacy-consumers"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("logs")
    expected = build_mixed_log(root)
    zstd_values = build_zstd_log(root)
    return root, expected, zstd_values


@pytest.mark.slow
@pytest.mark.parametrize(("fallback", "max_fetch"), [("0.9.0", 12), ("0.10.0", 12), ("0.10.0", 2)],
                         ids=["0.9.0", "0.10.0", "0.10.0-vs-fetch-v2-broker"])
def test_librdkafka_reads_every_record(serve_logdir, logs, fallback, max_fetch):
    """fallback 0.9.0: no ApiVersions, Fetch v1 (magic 0). librdkafka 2.x treats a fallback of
    0.10.0 or later as "send ApiVersions anyway", so against a full server it fetches v12 (no
    conversion); against a server capped at Fetch v2 (an 0.10.0 broker) it gets magic 1."""
    root, expected, _ = logs
    server = serve_logdir(root, chunk_size=16384, max_fetch_version=max_fetch)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": "serve-test",
        "api.version.request": False, "broker.version.fallback": fallback,
        "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3,
    })
    try:
        for partition in (0, 1):
            # librdkafka's Metadata v0 parser sizes its scratch buffer at 4x the response; the
            # topic name here is long enough for that estimate (a one-letter topic is not).
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, partition, 0)])
            want = expected[partition].visible(0, 2)
            got = []
            deadline = time.monotonic() + 20
            while len(got) < len(want) and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                ts_type, ts = message.timestamp()
                got.append((message.offset(), ts if ts_type != confluent_kafka.TIMESTAMP_NOT_AVAILABLE else -1,
                            message.key(), message.value()))
            fetch_versions = {v for (key, v) in server.server.request_counts if key == 1}
            read_magic = 0 if max(fetch_versions) <= 1 else 1 if max(fetch_versions) <= 3 else 2
            assert got == expected[partition].visible(0, read_magic)
            consumer.unassign()
    finally:
        consumer.close()
    print(f"librdkafka fallback {fallback}: requests {dict(server.server.request_counts)}")
    if fallback == "0.9.0":
        assert fetch_versions == {1}  # no ApiVersions: Fetch v1, converted to magic 0 here
    if fallback == "0.9.0" or max_fetch <= 3:
        assert max(fetch_versions) <= 3
        assert server.server.handler.stats.converted_partitions > 0


def fetch_raw(port: int, version: int, topic: str, partition: int, offset: int = 0,
              replica_id: int = -1) -> dict:
    """Send one Fetch request with our encoder, decode the answer with our decoder."""
    body = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    header = encode_request_header(2 if version >= 12 else 1, 1, version, 99, "raw")
    payload = header + FetchRequest.encode(version, body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(len(payload).to_bytes(4, "big") + payload)
        size = int.from_bytes(_recv(sock, 4), "big")
        _header, decoded = FetchResponse.decode_framed(version, size.to_bytes(4, "big") + _recv(sock, size))
    return decoded


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        piece = sock.recv(n - len(data))
        assert piece, "server closed the connection"
        data += piece
    return bytes(data)


@pytest.mark.slow
def test_zstd_topic_below_fetch_v10_gets_unsupported_compression_type(serve_logdir, logs):
    root, _, zstd_values = logs
    server = serve_logdir(root, topic_configs={"zstd-topic": TopicConfig(compression_type="zstd")})
    for version in (1, 3, 5, 9):  # converted (v1, v3) and unconverted (v5, v9) alike
        partition = fetch_raw(server.port, version, "zstd-topic", 0)["responses"][0]["partitions"][0]
        assert partition["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert partition["high_watermark"] == -1 and partition["records"] == b""
    ok = fetch_raw(server.port, 10, "zstd-topic", 0)["responses"][0]["partitions"][0]
    assert ok["error_code"] == 0 and ok["high_watermark"] == len(zstd_values)

    # A real consumer: kafka-python 0.11 (Fetch v5) surfaces the error; an auto-negotiating
    # one uses Fetch v10+ and reads every record.
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 11),
                                   fetch_max_wait_ms=100)
    tp = kafka.TopicPartition("zstd-topic", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    with pytest.raises(kafka.errors.UnsupportedCompressionTypeError):
        consumer.poll(timeout_ms=5000)
    consumer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, fetch_max_wait_ms=100)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < len(zstd_values) and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200).values():
            got.extend(m.value for m in messages)
    consumer.close()
    assert got == zstd_values


def test_zstd_batches_in_a_producer_topic_fail_only_on_conversion(serve_logdir, logs):
    """compression.type=producer: v4-9 get the zstd batches unchanged, the conversion path
    (v0-3) meets zstd in the first batch and answers 76 (docs/guide/fetch-response.md: the zstd gate is the topic's config)."""
    root, _, _ = logs
    server = serve_logdir(root)
    v5 = fetch_raw(server.port, 5, "zstd-topic", 0)["responses"][0]["partitions"][0]
    assert v5["error_code"] == 0 and len(v5["records"]) > 0
    v3 = fetch_raw(server.port, 3, "zstd-topic", 0)["responses"][0]["partitions"][0]
    assert v3["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and v3["records"] == b""


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_no_downconversion_gives_old_consumers_unsupported_version(serve_logdir, logs):
    root, expected, _ = logs
    server = serve_logdir(root, downconversion_enable=False)
    for version in (0, 1, 2, 3):
        partition = fetch_raw(server.port, version, TOPIC, 0)["responses"][0]["partitions"][0]
        assert partition["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert partition["records"] == b""
    assert fetch_raw(server.port, 4, TOPIC, 0)["responses"][0]["partitions"][0]["error_code"] == 0

    # A follower (replica id >= 0) is exempt (docs/guide/fetch-response.md): it gets converted records.
    for version in (1, 3):
        partition = fetch_raw(server.port, version, TOPIC, 0, replica_id=1)["responses"][0]["partitions"][0]
        assert partition["error_code"] == 0
        assert len(partition["records"]) > 0

    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 10),
                                   fetch_max_wait_ms=100)
    tp = kafka.TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    with pytest.raises(kafka.errors.UnsupportedVersionError):
        consumer.poll(timeout_ms=5000)
    consumer.close()
    # A consumer that reads magic v2 (Fetch v5) needs no conversion and is unaffected.
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 11),
                                   fetch_max_wait_ms=100)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < len(expected[0].records) and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200).values():
            got.extend(messages)
    consumer.close()
    assert [m.offset for m in got] == [r[0] for r in expected[0].records]


@pytest.mark.slow
def test_librdkafka_fallback_0_9_sees_error_76_instead_of_spinning(serve_logdir, logs):
    """Issue 14: with null records librdkafka failed to parse the Fetch v1 response ("invalid
    MessageSetSize -1"), never saw error 76 and refetched thousands of times per second. With
    empty records it parses the partition and reports the error to the application."""
    root, _, _ = logs
    server = serve_logdir(root, topic_configs={"zstd-topic": TopicConfig(compression_type="zstd")})
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": "serve-test-76",
        "api.version.request": False, "broker.version.fallback": "0.9.0",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3,
        "fetch.error.backoff.ms": 200,
    })
    errors = []
    try:
        consumer.assign([confluent_kafka.TopicPartition("zstd-topic", 0, 0)])
        started = time.monotonic()
        while not errors and time.monotonic() - started < 10:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                errors.append(message.error())
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    assert errors, "librdkafka never reported the partition error"
    assert errors[0].code() == confluent_kafka.KafkaError.UNSUPPORTED_COMPRESSION_TYPE
    fetches = sum(n for (key, _v), n in server.server.request_counts.items() if key == 1)
    assert fetches < 50 * max(elapsed, 1), f"{fetches} fetches in {elapsed:.1f}s: spinning"
