"""Hypothesis fuzzing of record reading: random bytes and mutated valid record sets.

Whatever the input, reading (batches, header fields, validate, iteration) either succeeds or
raises a lazyconv error whose position lies inside the input, and memory-backed and
file-backed records see exactly the same batches, records and error.
"""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import LazyconvError
from lazyconv.records import FileRecords, MemoryRecords
from tests.records.test_records_fuzz import corpus

MAX_DECOMPRESSED = 1 << 20
CORPUS = corpus()


def read_all(records: MemoryRecords | FileRecords) -> tuple[list, tuple | None]:
    """Everything a reader can observe, and the error (type, position) that stopped it."""
    seen: list = []
    try:
        for batch in records.batches():
            seen.append((batch.position, batch.size_in_bytes, batch.magic, batch.last_offset))
            for attr in ("timestamp_type", "max_timestamp", "crc", "record_count", "is_control"):
                seen.append(getattr(batch, attr))
            seen.append(batch.is_valid())
            seen.append(batch.compression)
            seen.append(batch.base_offset)
            seen.extend(batch)
    except LazyconvError as exc:
        return seen, (type(exc), exc.position)
    return seen, None


def check(data: bytes) -> None:
    memory_seen, memory_error = read_all(MemoryRecords(data, max_decompressed_size=MAX_DECOMPRESSED))
    if memory_error is not None:
        position = memory_error[1]
        assert position is not None and 0 <= position <= len(data), (memory_error, len(data))
    fd, path = tempfile.mkstemp()
    try:
        os.write(fd, data)
        with FileRecords(fd, max_decompressed_size=MAX_DECOMPRESSED) as records:
            file_seen, file_error = read_all(records)
    finally:
        os.close(fd)
        os.unlink(path)
    assert file_seen == memory_seen
    assert file_error == memory_error


@settings(max_examples=150)
@given(st.binary(max_size=200))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_random_bytes(data: bytes) -> None:
    check(data)


@settings(max_examples=150)
@given(
    st.binary(min_size=17, max_size=120),
    st.sampled_from([0, 1, 2]),
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_random_bytes_behind_a_plausible_frame(body: bytes, magic: int) -> None:
    # Size field and magic made consistent, so the fuzz reaches the batch parsers.
    data = bytearray(body)
    struct.pack_into(">i", data, 8, len(data) - 12)
    data[16] = magic
    check(bytes(data))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(CORPUS)))
    if draw(st.booleans()):
        data = bytearray(draw(st.sampled_from(CORPUS))) + data  # a valid entry first
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        position = draw(st.integers(0, len(data) - 4))
        value = draw(st.sampled_from([0, 1, 13, 14, 48, 49, -1, -(2**31), 2**31 - 1]))
        struct.pack_into(">i", data, position, value)
    cut = draw(st.integers(0, 40))
    return bytes(data[: len(data) - cut] if draw(st.booleans()) else data)


@pytest.mark.slow  # 300 examples: kept out of the quick look
@settings(max_examples=300)
@given(mutated())
def test_mutated_record_sets(data: bytes) -> None:
    check(data)
