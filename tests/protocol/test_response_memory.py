"""Memory bound of a converted FetchResponse: 250 partitions × 1 MiB of stored data.

While the whole response is built and written, the memory held beyond the start never exceeds
the chunk bound plus each partition's first converted batch (cached from construction until its
partition's turn): nothing like the 250 MiB an eager conversion would hold.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from lazyconv.conversion._chunks import DEFAULT_CHUNK_SIZE
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.protocol import FetchResponse
from lazyconv.records import FileRecords, RecordsBuilder

PARTITIONS = 250
STORED = 1 << 20
VALUE = 8 * 1024


class CountingSink:
    """A channel that accepts everything and keeps only a count and a running checksum."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, data) -> int:
        n = len(data)
        self.count += n
        return n


def write_log(path) -> int:
    offset = 0
    with open(path, "wb") as f:
        while f.tell() < STORED:
            b = RecordsBuilder(2, base_offset=offset)
            for _ in range(4):
                b.append(offset=offset, timestamp=1000 + offset, key=b"k",
                         value=offset.to_bytes(8, "big") * (VALUE // 8))
                offset += 1
            f.write(b.build())
    return offset


@pytest.mark.slow
def test_250_partitions_of_1_mib_stay_within_the_chunk_bound(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.log"
    write_log(path)
    with FileRecords.open(path) as log:
        gc.collect()
        tracemalloc.start()
        try:
            baseline, _ = tracemalloc.get_traced_memory()
            lazies = [LazyDownConvertedRecords(log.slice(0, log.size_in_bytes), 1, 0)
                      for _ in range(PARTITIONS)]
            first_batches = sum(lazy.first_converted_size or 0 for lazy in lazies)
            body = {"responses": [{"topic": "t", "partitions": [
                {"partition_index": i, "high_watermark": 1, "records": lazy}
                for i, lazy in enumerate(lazies)]}]}
            response = FetchResponse(3, body)
            send = response.to_send(1)
            built, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            sink = CountingSink()
            while not send.completed:
                send.write_to(sink)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    held_built = built - baseline
    held_sending = peak - built
    assert sink.count == send.size == response.size_in_bytes + 4
    assert response.size_in_bytes > PARTITIONS * STORED
    assert send.conversion_stats.records_converted >= PARTITIONS * (STORED // (VALUE + 100))
    # Built: each partition's first converted batch plus per-partition bookkeeping (the
    # records slice, the lazy object, the response metadata: well under 4 KiB each).
    assert held_built <= first_batches + PARTITIONS * 4096, (held_built, first_batches)
    # Sending never adds more than the chunk bound: the file is read through a window of one
    # chunk (plus a batch header), and while the next window is read the current chunk's window
    # is still held; then the converted output and the converter's temporaries, each at most
    # about a chunk: four chunks, whatever the fetch size.
    chunk_bound = 4 * DEFAULT_CHUNK_SIZE
    assert held_sending <= chunk_bound, (held_sending, chunk_bound)
    assert peak - baseline < PARTITIONS * STORED // 20  # eager conversion would hold 250 MiB
