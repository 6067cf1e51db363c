"""Build small Kafka log directories for the serve tests, with the records each partition holds.

Until the committed fixtures are used everywhere, these logs cover what the served path must
handle: several segments per partition, every legacy codec plus none in v2 batches, a topic
upgraded from magic v0 to v1 to v2, and records larger than the 16 KiB chunk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from lazyconv.records import Compression, RecordsBuilder

BASE_TS = 1_700_000_000_000


@dataclass
class Expected:
    """Records of one partition: (offset, timestamp, key, value), and the magic they were written in."""

    records: list[tuple[int, int, bytes | None, bytes | None, int]] = field(default_factory=list)

    def visible(self, from_offset: int, magic: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """What a consumer reading ``magic`` sees from ``from_offset`` (v0 carries no timestamp)."""
        out = []
        for offset, ts, key, value, _written_magic in self.records:
            if offset >= from_offset:
                out.append((offset, -1 if magic == 0 else ts, key, value))
        return out


def _write_segment(directory: Path, base_offset: int, entries: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{base_offset:020d}.log").write_bytes(b"".join(entries))


def build_mixed_log(root: Path, topic: str = "legacy-consumers", seed: int = 7,
                    batches_per_segment: int = 12, big_value: int = 40_000,
                    max_batch_records: int = 25) -> dict[int, Expected]:
    """Partition 0: v2 batches (none/gzip/snappy/lz4) in 3 segments, including a few records
    larger than 16 KiB. Partition 1: one segment each of magic v0, v1 (plain and compressed
    wrappers) and v2. Returns the expected records per partition."""
    rng = random.Random(seed)
    expected = {0: Expected(), 1: Expected()}
    codecs = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]

    offset = 0
    for segment in range(3):
        base = offset
        entries = []
        for b in range(batches_per_segment):
            codec = codecs[(segment * batches_per_segment + b) % len(codecs)]
            builder = RecordsBuilder(2, compression=codec, base_offset=offset)
            for _ in range(rng.randint(1, max_batch_records)):
                size = big_value if rng.random() < 0.02 else rng.randint(0, 300)
                key = None if rng.random() < 0.1 else b"k%d" % offset
                value = None if rng.random() < 0.05 else bytes(rng.getrandbits(8) for _ in range(size))
                ts = BASE_TS + offset * 10
                builder.append(offset=offset, timestamp=ts, key=key, value=value)
                expected[0].records.append((offset, ts, key, value, 2))
                offset += 1
            entries.append(builder.build())
        _write_segment(root / f"{topic}-0", base, entries)

    offset = 0
    for magic in (0, 1, 2):
        base = offset
        entries = []
        for b in range(batches_per_segment):
            codec = Compression.NONE if b % 2 == 0 else codecs[1 + b % 3]
            builder = RecordsBuilder(magic, compression=codec, base_offset=offset)
            for _ in range(rng.randint(1, 10)):
                value = b"m%d-o%d-" % (magic, offset) + bytes(rng.randint(0, 200))
                ts = BASE_TS + offset if magic > 0 else -1
                builder.append(offset=offset, timestamp=ts, key=b"key-%d" % offset, value=value)
                expected[1].records.append((offset, ts, b"key-%d" % offset, value, magic))
                offset += 1
            entries.append(builder.build())
        _write_segment(root / f"{topic}-1", base, entries)
    return expected


def build_zstd_log(root: Path, topic: str = "zstd-topic", records: int = 50) -> list[bytes]:
    """One partition of v2 zstd batches; returns the values."""
    values = []
    entries = []
    for b in range(0, records, 10):
        builder = RecordsBuilder(2, compression=Compression.ZSTD, base_offset=b)
        for i in range(b, min(records, b + 10)):
            values.append(b"zstd-%d" % i)
            builder.append(offset=i, timestamp=BASE_TS + i, key=None, value=values[-1])
        entries.append(builder.build())
    _write_segment(root / f"{topic}-0", 0, entries)
    return values
