"""What eager down-conversion holds in memory (issue 24), on both twins.

- Over a file, ``down_convert`` holds its output and at most ``MAX_RUN_READ`` bytes of input at
  a time (the kernel used to read a whole run of plain batches at once: 157 MiB for 64 MiB of
  input against 93 MiB in pure Python).
- One compressed batch is bounded by ``max_decompressed_size``: its decompressed records D
  (at most the bound), their legacy messages (a v2 record takes at least 7 bytes and becomes
  at most 27 bytes more as a legacy message, so at most D + 27 * count <= D * (1 + 27/7)), and
  the recompressed wrapper: about 6 x max_decompressed_size at worst (ten million empty records
  in one batch reach hundreds of MiB). That is the bound: a smaller ``max_decompressed_size``
  lowers it; nothing converts a batch in pieces, as Kafka does not.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lazyconv.conversion._down import down_convert
from lazyconv.conversion._to_legacy import MAX_RUN_READ
from lazyconv.records import Compression, FileRecords, RecordsBuilder, _impl, encode_v2_batch
from lazyconv.records._codec import append_v2_record
from lazyconv.records._compression import compress

TWINS = ["python"] + (["native"] if _impl.NATIVE is not None else [])


def _peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        result = fn()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # about a second: kept out of the quick look
@pytest.mark.parametrize("twin", TWINS)
def test_eager_conversion_of_a_file_holds_its_output_and_a_bounded_piece_of_input(tmp_path: Path, twin: str) -> None:
    path = tmp_path / "00000000000000000000.log"
    with path.open("wb") as f:
        for n in range(1000):  # 1000 plain batches of 10 KiB values: 10 MiB in one run
            builder = RecordsBuilder(2, base_offset=n * 10)
            for i in range(10):
                builder.append(n * 10 + i, 1_000, b"key", bytes(1000))
            f.write(builder.build())
    size = path.stat().st_size
    assert size > 8 * MAX_RUN_READ
    with _impl.using(twin), FileRecords.open(path) as records:
        peak, converted = _peak(lambda: down_convert(records.batches(), 1, 0))
    output = converted.records.size_in_bytes
    # the output (with a bytearray's over-allocation), the batch objects (about 1 KiB each with
    # their headers) and at most two pieces of input, far from the whole input
    assert peak < output * 1.2 + 1000 * 1024 + 2 * MAX_RUN_READ, (peak, output, size)


@pytest.mark.slow
@pytest.mark.parametrize("twin", TWINS)
def test_one_compressed_batch_of_tiny_records_stays_within_its_stated_bound(twin: str) -> None:
    count = 40_000
    records = bytearray()
    for i in range(count):
        append_v2_record(records, i, 0, None, None, ())
    decompressed = len(records)
    assert decompressed >= 7 * count
    entry = encode_v2_batch(
        base_offset=0, partition_leader_epoch=-1, attributes=int(Compression.GZIP), last_offset_delta=count - 1,
        base_timestamp=0, max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        record_count=count, payload=compress(Compression.GZIP, bytes(records), 2),
    )
    del records
    from lazyconv.records import MemoryRecords

    with _impl.using(twin):
        peak, converted = _peak(lambda: down_convert(MemoryRecords(entry).batches(), 1, 0))
    assert converted.stats.records_converted == count
    messages = decompressed + 27 * count  # the legacy messages' bound
    assert peak <= decompressed + messages + converted.records.size_in_bytes + (1 << 20), (peak, decompressed)
    assert messages <= decompressed * (1 + 27 / 7)
