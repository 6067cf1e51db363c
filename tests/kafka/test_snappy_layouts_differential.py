"""Down-converted snappy answers hold the records Kafka 3.9's hold, whatever the batch layout.

A down-converting Fetch is cut at its committed size (the input's, as Kafka's lazy send), so
which records fit depends on the size of every compressed wrapper before the cut: lazyconv's
snappy must be Kafka's byte for byte, not merely valid. With Rust's snap (which lazyconv used
before; docs/kernel.md, "snappy with Kafka's bytes") the oracle log's ``codec-snappy`` topic
answered the same as Kafka only for the batches librdkafka happened to make on a quiet machine:
under CI load it made smaller ones and ``serve`` sent a batch more. Here the layouts are fixed
(``batch.num.messages`` 1, 3 and 20 with a long linger: the layouts that differed), Kafka 3.9
writes them, and ``serve`` on a copy must answer Fetch v0-v3 with the same records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import KafkaBroker, produce_records
from kafka_logs import _records, copy_log_dir

from lazyconv.protocol import _fetch as fetch
from lazyconv.records import MemoryRecords
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread

pytestmark = pytest.mark.kafka

LAYOUTS = (1, 3, 20)  # records per batch
MIB = 1 << 20


@pytest.fixture(scope="module")
def pair(kafka_dist_3: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WireClient, WireClient]]:
    root = tmp_path_factory.mktemp("snappy-layouts")
    broker = KafkaBroker(kafka_dist_3, root / "broker")
    broker.start()
    try:
        for count in LAYOUTS:
            produce_records(broker.bootstrap, f"snappy-{count}", _records(400, seed=6), "snappy",
                            config={"linger.ms": 1000, "batch.num.messages": count})
    finally:
        broker.stop()
    copy = copy_log_dir(broker, root / "copy")
    broker.start()
    server = ServerThread(copy)
    kafka, serve = WireClient(broker.port, "layouts"), WireClient(server.port, "layouts")
    try:
        yield kafka, serve
    finally:
        kafka.close()
        serve.close()
        server.stop()
        broker.stop()


def _records_of(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    data = bytes(part["records"] or b"")
    return [(r.offset, r.timestamp, r.key, r.value) for r in MemoryRecords(data).records()]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_down_converted_snappy_holds_kafkas_records(pair: tuple[WireClient, WireClient], version: int) -> None:
    kafka, serve = pair
    differ = []
    for count in LAYOUTS:
        for offset in (0, 1, 37, 200):
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 * MIB,
                    "isolation_level": 0, "topics": [{"topic": f"snappy-{count}", "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": MIB}]}]}
            theirs = _records_of(kafka.call(fetch.SPEC, version, body))
            ours = _records_of(serve.call(fetch.SPEC, version, body))
            if ours != theirs:
                differ.append(f"snappy-{count}@{offset}: lazyconv {len(ours)} records, Kafka {len(theirs)}")
    assert not differ, differ
