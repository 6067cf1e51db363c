"""Mutated batches (bit flips, truncation, size fields set huge or negative, overlong varints)
raise only lazyconv errors, quickly and with bounded memory."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

from lazyconv.errors import LazyconvError
from lazyconv.records import (
    Compression,
    MemoryRecords,
    RecordsBuilder,
    TimestampType,
    build_end_txn_marker,
)

MAX_DECOMPRESSED = 1 << 20


def corpus() -> list[bytes]:
    out = []
    for magic in (0, 1, 2):
        for codec in Compression:
            if codec == Compression.ZSTD and magic < 2:
                continue
            b = RecordsBuilder(
                magic,
                codec,
                TimestampType.LOG_APPEND_TIME if magic == 1 and codec == Compression.GZIP else TimestampType.CREATE_TIME,
                base_offset=100,
                log_append_time=1_700_000_000_000,
            )
            for i in range(5):
                headers = [(f"h{i}", b"x" * i), ("n", None)] if magic == 2 else []
                b.append(100 + 2 * i, 1_650_000_000_000 + i, b"key-%d" % i, b"value-%d" % i * (i + 1), headers)
            out.append(b.build())
    out.append(build_end_txn_marker(7, 2000, 5, 1, commit=False, coordinator_epoch=3))
    return out


def mutations(data: bytes, rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(12):  # bit flips
        m = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(m))
            m[pos] ^= 1 << rng.randrange(8)
        out.append(bytes(m))
    for _ in range(4):  # truncation
        out.append(data[: rng.randrange(len(data))])
    for value in (0x7FFFFFFF, -1, -(2**31), 14, 48, 60, len(data)):  # size field
        m = bytearray(data)
        struct.pack_into(">i", m, 8, value)
        out.append(bytes(m))
    if data[16] == 2:
        for value in (0x7FFFFFFF, -1, 0, 1000):  # records count
            m = bytearray(data)
            struct.pack_into(">i", m, 57, value)
            out.append(bytes(m))
        for run in (5, 6, 10, 11):  # overlong varints in the record area
            m = bytearray(data)
            pos = rng.randrange(61, len(m))
            m[pos : pos + run] = b"\xff" * run
            out.append(bytes(m))
    else:
        for field in (18, 22, 26, 30):  # key/value lengths huge or negative
            if field + 4 <= len(data):
                for value in (0x7FFFFFFF, -5):
                    m = bytearray(data)
                    struct.pack_into(">i", m, field, value)
                    out.append(bytes(m))
    # several entries in a row, the last one mutated
    out.append(data + out[rng.randrange(len(out))])
    return out


def exercise(data: bytes) -> None:
    records = MemoryRecords(data, max_decompressed_size=MAX_DECOMPRESSED)
    for batch in records.batches():
        for attr in ("base_offset", "last_offset", "compression", "timestamp_type", "max_timestamp", "crc"):
            getattr(batch, attr)
        batch.is_valid()
        for _ in batch:
            pass


def test_mutated_batches_raise_only_lazyconv_errors() -> None:
    rng = random.Random(20241025)
    cases = [m for data in corpus() for m in mutations(data, rng)]
    assert len(cases) > 400
    errors = 0
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for case in cases:
            try:
                exercise(case)
            except LazyconvError:
                errors += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert errors > len(cases) // 3  # the mutations do hit the validation paths
    assert peak < 8 * MAX_DECOMPRESSED, f"peak traced memory {peak} bytes"
    assert elapsed < 20, f"{len(cases)} mutated inputs took {elapsed:.1f}s"


def test_lying_lengths_never_allocate_their_claim() -> None:
    b = RecordsBuilder(2)
    b.append(0, 1, b"k", b"v" * 100)
    data = bytearray(b.build())
    data[61:66] = b"\xfe\xff\xff\xff\x07"  # record body length 2^30 - 1
    legacy = bytearray()
    lb = RecordsBuilder(1)
    lb.append(0, 1, b"k", b"v" * 100)
    legacy = bytearray(lb.build())
    struct.pack_into(">i", legacy, 26, 2**31 - 1)  # key length
    tracemalloc.start()
    try:
        for case in (data, legacy):
            raised = False
            try:
                exercise(bytes(case))
            except LazyconvError:
                raised = True
            assert raised
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
