"""Produce v2+ appends to the served log; three listeners play three brokers with their own delays."""

from __future__ import annotations

import struct
import time

import pytest

from lazyconv.errors import CorruptRecordError, InvalidRecordError
from lazyconv.logdir._directory import LogDirectory
from lazyconv.records import FileRecords, RecordsBuilder
from lazyconv.serve._offsets import split_entries

kafka = pytest.importorskip("kafka", reason="needs the dev extra: pip install -e '.[dev]'")


def make_topic(root, name: str, partitions: int) -> None:
    for p in range(partitions):
        (root / f"{name}-{p}").mkdir()


def poll_until(consumer, count: int, timeout: float = 10.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=100).values():
            got.extend(messages)
    return got


@pytest.mark.slow
def test_three_listeners_take_produce_and_consumers_see_the_log_grow(serve_logdir, tmp_path):
    make_topic(tmp_path, "events", 3)
    server = serve_logdir(tmp_path, listeners=3, produce_delays=(0, 0, 150))
    listeners = server.server.listeners
    assert [li.node_id for li in listeners] == [0, 1, 2]

    # An old consumer waits at the end of the (empty) log before anything is produced.
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 10),
                                   fetch_max_wait_ms=100)
    tps = [kafka.TopicPartition("events", p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    assert poll_until(consumer, 1, timeout=0.5) == []

    # Default settings: an idempotent producer (InitProducerId, then Produce v3+ with acks=all).
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=2)
    futures = [producer.send("events", key=b"k%d" % i, value=b"value-%d" % i) for i in range(300)]
    producer.flush()
    metadata = [f.get(timeout=10) for f in futures]
    assert {m.partition for m in metadata} == {0, 1, 2}  # Metadata told it partition p lives on node p
    # Every listener took Produce requests for the partitions it leads (Produce v3+: magic v2).
    assert any(key == 0 and version >= 3 for key, version in server.server.request_counts)
    assert any(key == 22 for key, _version in server.server.request_counts)

    # The per-listener delay: node 2 (partition 2) answers Produce 150 ms late, node 0 does not.
    started = time.monotonic()
    producer.send("events", partition=0, value=b"fast").get(timeout=10)
    fast = time.monotonic() - started
    started = time.monotonic()
    producer.send("events", partition=2, value=b"slow").get(timeout=10)
    slow = time.monotonic() - started
    producer.close()
    assert slow >= 0.15 > fast

    got = poll_until(consumer, 302)
    consumer.close()
    values = sorted(m.value for m in got)
    assert values == sorted([b"value-%d" % i for i in range(300)] + [b"fast", b"slow"])
    by_partition: dict[int, list[int]] = {}  # offsets are dense per partition
    for m in got:
        by_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())

    # What is on disk is valid Kafka log data with the offsets the server assigned.
    log = LogDirectory(tmp_path)
    for p in range(3):
        with FileRecords.open(tmp_path / f"events-{p}" / f"{0:020d}.log") as records:
            offsets = [r.offset for b in records.batches() for r in b]
            for batch in records.batches():
                batch.validate()
        assert offsets == list(range(len(offsets))) == by_partition[p]
        assert log.partition("events", p).high_watermark == len(offsets)


def test_offsets_are_rewritten_and_bad_records_refused(tmp_path):
    make_topic(tmp_path, "t", 1)
    log = LogDirectory(tmp_path)
    plog = log.partition("t", 0)
    v2 = RecordsBuilder(2, base_offset=999)
    for i in range(3):
        v2.append(offset=999 + i, timestamp=5, value=b"x%d" % i)
    v1 = RecordsBuilder(1, base_offset=50)
    v1.append(offset=50, timestamp=5, value=b"legacy")
    assert plog.append(split_entries(v2.build())) == (0, 0)
    assert plog.append(split_entries(v1.build() + v2.build())) == (3, 0)
    with FileRecords.open(plog.segments[0].path) as records:
        assert [r.offset for b in records.batches() for r in b] == list(range(7))
        for batch in records.batches():
            batch.validate()
    corrupt = bytearray(v2.build())
    corrupt[-1] ^= 0xFF  # breaks the CRC
    # the RecordsError subclass the docstring promises, and where: the CRC field, the set's start
    with pytest.raises(CorruptRecordError, match="v2 batch CRC mismatch") as info:
        split_entries(bytes(corrupt))
    assert info.value.position == 17
    cut = v2.build()[:-3] + struct.pack(">q", 0)[:2]
    with pytest.raises(InvalidRecordError, match=f"end with {len(cut)} bytes of a partial entry") as info:
        split_entries(cut)
    assert info.value.position == 0
