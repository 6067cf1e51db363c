"""Cross-checks with aiokafka's ``aiokafka.record`` (its compiled codecs): our bytes decode
identically there, and its builders' bytes decode identically here."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords

from lazyconv.records import Compression, MemoryRecords, RecordsBuilder

RECORDS = [
    (7, 1_650_000_000_000, b"key-0", b"value-0" * 20, (("h", b"x"), ("n", None))),
    (8, -1, None, b"", ()),
    (10, 1_650_000_000_009, b"", None, (("", b""),)),
    (11, 1_650_000_000_003, b"k" * 300, b"v" * 5000, ()),
]
COMBOS = [
    (magic, codec)
    for magic in (0, 1, 2)
    for codec in Compression
    if not (codec == Compression.ZSTD and magic < 2)
    # aiokafka refuses lz4 in magic 0 (its UnsupportedCodecError), both ways
    and not (codec == Compression.LZ4 and magic == 0)
]


def aio_records(data: bytes) -> list[tuple]:
    out = []
    records = AioMemoryRecords(data)
    while records.has_next():
        for r in records.next_batch():
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value, tuple(getattr(r, "headers", None) or ())))
    return out


def want(magic: int) -> list[tuple]:
    return [
        (o, -1 if magic == 0 else t, k, v, h if magic == 2 else ())
        for o, t, k, v, h in RECORDS
    ]


@pytest.mark.parametrize(("magic", "codec"), COMBOS)
def test_aiokafka_reads_our_bytes(magic: int, codec: Compression) -> None:
    b = RecordsBuilder(magic, codec, base_offset=7)
    for o, t, k, v, h in RECORDS:
        b.append(o, t, k, v, h if magic == 2 else ())
    data = b.build()
    assert aio_records(data) == want(magic)
    assert [tuple(r) for r in MemoryRecords(data).records()] == want(magic)


@pytest.mark.parametrize(("magic", "codec"), COMBOS)
def test_aiokafka_built_batches_decode_identically(magic: int, codec: Compression) -> None:
    if magic == 2:
        builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 20)
        for o, t, k, v, h in RECORDS:
            builder.append(o, max(t, 0), k, v, list(h))
    else:
        builder = LegacyRecordBatchBuilder(magic, int(codec), 1 << 20)
        for o, t, k, v, _h in RECORDS:
            builder.append(o, max(t, 0), k, v)
    data = bytes(builder.build())
    ours = MemoryRecords(data)
    for batch in ours.batches():
        batch.validate()
    assert [tuple(r) for r in ours.records()] == aio_records(data)
