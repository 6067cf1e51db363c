"""Real kafka-python consumers read logs through the server and get exactly the expected records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.serve.logbuild import build_mixed_log

kafka = pytest.importorskip("kafka", reason="needs the dev extra: pip install -e '.[dev]'")

pytestmark = pytest.mark.slow  # the quick run reads the fixtures once with Fetch v1 instead

TOPIC = "legacy-consumers"
# api_version -> (Fetch version kafka-python sends, magic it reads)
API_VERSIONS = {(0, 9): (1, 0), (0, 10): (2, 1), (0, 10, 1): (3, 1), (0, 11): (5, 2)}


def consume(bootstrap: str, api_version, partition: int, start: int, count: int, *,
            max_partition_fetch_bytes: int = 1048576, timeout: float = 20.0):
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=api_version, enable_auto_commit=False,
        max_partition_fetch_bytes=max_partition_fetch_bytes, fetch_max_wait_ms=100,
        request_timeout_ms=10000,
    )
    try:
        tp = kafka.TopicPartition(TOPIC, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=200).values():
                got.extend(messages)
        return got
    finally:
        consumer.close()


def as_tuples(messages):
    return [(m.offset, -1 if m.timestamp is None else m.timestamp, m.key, m.value) for m in messages]


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("mixed")
    return root, build_mixed_log(root)


@pytest.mark.parametrize("api_version", list(API_VERSIONS), ids=lambda v: ".".join(map(str, v)))
@pytest.mark.parametrize("chunk_size", [16384, 131072], ids=["16K", "128K"])
def test_kafka_python_reads_every_record(serve_logdir, mixed_log, api_version, chunk_size):
    root, expected = mixed_log
    server = serve_logdir(root, chunk_size=chunk_size)
    fetch_version, magic = API_VERSIONS[api_version]
    for partition, start in ((0, 0), (1, 0), (0, 37)):  # 37: a seek into the middle of a batch
        want = expected[partition].visible(start, magic)
        got = consume(server.bootstrap, api_version, partition, start, len(want))
        assert as_tuples(got) == want, f"partition {partition} from {start}"
    assert server.server.request_counts[(1, fetch_version)] > 0


@pytest.mark.parametrize("api_version", list(API_VERSIONS), ids=lambda v: ".".join(map(str, v)))
def test_small_partition_fetch_bytes_cuts_and_pads(serve_logdir, tmp_path, api_version):
    """max_partition_fetch_bytes far below the batch sizes: responses end inside batches (cut)
    and converted partitions are padded up to their committed size; records still all arrive."""
    # Fetch v0-2 have a hard limit: a batch larger than the partition budget can never be
    # returned whole (old consumers raise RecordTooLarge), so batches stay below 8000 bytes.
    expected = build_mixed_log(tmp_path, big_value=2500, max_batch_records=8)
    server = serve_logdir(tmp_path, chunk_size=16384)
    _fetch_version, magic = API_VERSIONS[api_version]
    for partition in (0, 1):
        want = expected[partition].visible(0, magic)
        got = consume(server.bootstrap, api_version, partition, 0, len(want),
                      max_partition_fetch_bytes=8000)
        assert as_tuples(got) == want
    stats = server.server.handler.stats
    assert stats.partial_tail_responses > 0  # cut partitions, converted or zero-copy
    if magic < 2:
        assert stats.converted_partitions > 0
        assert stats.padded_bytes > 0  # the cut batch is dropped by conversion, then padded
