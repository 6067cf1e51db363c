"""Produce refuses a batch whose records decompress past what Fetch down-conversion inflates
(``--max-decompressed-batch-bytes``, one setting for both; issue 23): MESSAGE_TOO_LARGE, nothing
appended, and decompression stops at the bound. Before, a 122 KB gzip batch that inflates to
120 MiB was appended and every old consumer was then stuck at its offset."""

from __future__ import annotations

import tracemalloc

import pytest

from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from lazyconv.serve._append_validation import AppendConfig, AppendErrorCode, validate_produce
from tests.serve.test_append_validation import v2_batch
from tests.serve.test_produce_validation_e2e import answers, produce_body
from tests.serve.wire import WireClient

MIB = 1 << 20


def inflating_batch(codec: Compression, inflated: int, magic: int = 2, piece: int = MIB) -> bytes:
    """One compressed batch (a v1 wrapper for ``magic`` 1) of zero-filled values that
    decompresses to about ``inflated`` bytes of records."""
    builder = RecordsBuilder(magic, compression=codec)
    for i in range(max(1, inflated // piece)):
        builder.append(i, 1_000 + i, None, b"\x00" * piece)
    return builder.build()


def old_consumer_offsets(port: int, topic: str, partition: int) -> list[int]:
    """The offsets an old consumer's Fetch v2 (magic 1, down-converted) gets from offset 0."""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                         "partition_max_bytes": 64 * MIB}]}]}
    with WireClient(port) as client:
        answer = client.call(fetch.SPEC, 2, body)
    (part,) = answer["responses"][0]["partitions"]
    assert part["error_code"] == 0
    records = MemoryRecords(part["records"] or b"", 64 * MIB)
    assert all(batch.magic == 1 for batch in records.batches())
    return [record.offset for batch in records.batches() for record in batch]


@pytest.fixture
def two_partitions(tmp_path):
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("version", [3, 9])
def test_the_issues_gzip_bomb_is_refused_with_the_default_bound(serve_logdir, two_partitions, version):
    bomb = inflating_batch(Compression.GZIP, 120 * MIB)
    assert len(bomb) < 130_000  # 122 KB on the wire, under max.message.bytes
    server = serve_logdir(two_partitions)  # --max-decompressed-batch-bytes 32M, the default
    with WireClient(server.port) as client:
        got = answers(client.call(produce.SPEC, version,
                                  produce_body({0: bomb, 1: v2_batch(3)}, version)))
    assert got[0]["error_code"] == int(AppendErrorCode.MESSAGE_TOO_LARGE)
    assert got[0]["base_offset"] == -1
    if version >= 8:
        assert "decompresses to more than the maximum allowed (33554432" in got[0]["error_message"]
    assert server.logdir.partition("t", 0).high_watermark == 0  # nothing appended
    assert got[1]["error_code"] == 0 and got[1]["base_offset"] == 0  # the other partition is
    assert old_consumer_offsets(server.port, "t", 1) == [0, 1, 2]


@pytest.mark.parametrize("codec,magic,version", [
    (Compression.GZIP, 2, 3), (Compression.LZ4, 2, 3), (Compression.SNAPPY, 2, 3),
    (Compression.ZSTD, 2, 7), (Compression.GZIP, 1, 2), (Compression.LZ4, 1, 2),
])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_one_setting_bounds_produce_and_fetch_conversion(serve_logdir, tmp_path, codec, magic, version):
    """With a 4 MiB bound: a batch inflating to 3 MiB is appended and an old consumer reads it
    down-converted; one inflating to 5 MiB is refused. Both fit max.message.bytes compressed."""
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path, max_decompressed_batch=4 * MIB)
    fits = inflating_batch(codec, 3 * MIB, magic)
    too_large = inflating_batch(codec, 5 * MIB, magic)
    with WireClient(server.port) as client:
        first = answers(client.call(produce.SPEC, version, produce_body({0: fits}, version)))
        second = answers(client.call(produce.SPEC, version, produce_body({0: too_large}, version)))
    assert first[0]["error_code"] == 0 and first[0]["base_offset"] == 0
    assert second[0]["error_code"] == int(AppendErrorCode.MESSAGE_TOO_LARGE)
    assert server.logdir.partition("t", 0).high_watermark == 3
    if codec != Compression.ZSTD:  # zstd is never down-converted (UNSUPPORTED_COMPRESSION_TYPE)
        assert old_consumer_offsets(server.port, "t", 0) == [0, 1, 2]  # no consumer is stuck


@pytest.mark.parametrize("codec,magic,version", [
    (Compression.GZIP, 2, 3), (Compression.LZ4, 2, 3), (Compression.SNAPPY, 2, 3),
    (Compression.ZSTD, 2, 7), (Compression.GZIP, 1, 2),
])
@pytest.mark.slow
def test_validation_stops_decompressing_at_the_bound(codec, magic, version):
    """120 MiB of records behind a 1 MiB bound: validation allocates a few MiB at most, so it
    inflated no more than about the bound (streamed, stopped)."""
    bomb = inflating_batch(codec, 120 * MIB, magic)
    config = AppendConfig(max_decompressed_size=MIB, max_message_bytes=64 * MIB)
    tracemalloc.start()
    try:
        decision = validate_produce(bomb, produce_version=version, config=config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decision.error_code == AppendErrorCode.MESSAGE_TOO_LARGE
    assert not decision.entries
    assert peak < len(bomb) + 4 * MIB, peak
