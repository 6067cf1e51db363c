"""Releasing the first converted batch of a lazy conversion changes nothing on the wire."""

from __future__ import annotations

import io

import pytest

from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.records import MemoryRecords, RecordsBuilder


def log(batches: int = 6) -> bytes:
    out = b""
    for i in range(batches):
        builder = RecordsBuilder(2, base_offset=10 * i)
        for j in range(10):
            builder.append(offset=10 * i + j, timestamp=5 + j, key=b"k", value=b"v%d" % j * 100)
        out += builder.build()
    return out


def sent(records: LazyDownConvertedRecords) -> bytes:
    channel = io.BytesIO()
    send = records.to_send()
    while not send.completed:
        send.write_to(channel)
    return channel.getvalue()


@pytest.mark.parametrize("to_magic, first_offset", [(0, 0), (1, 0), (1, 25)])
def test_released_first_batch_sends_the_same_bytes(to_magic, first_offset):
    data = log()
    kept = LazyDownConvertedRecords(MemoryRecords(data), to_magic, first_offset, chunk_size=16384)
    released = LazyDownConvertedRecords(MemoryRecords(data), to_magic, first_offset, chunk_size=16384)
    first_size = released.first_converted_size
    released.release_first_batch()
    assert released.first_converted_size == first_size  # still known
    assert released.size_in_bytes == kept.size_in_bytes
    assert sent(released) == sent(kept)
