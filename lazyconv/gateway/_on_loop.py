"""Which conversions the gateway runs on its event loop and which on the worker pool.

Handing a step to a worker thread and back costs the loop two wake-ups of a thread and the
pool's queue; for records of a quick codec (none, snappy, lz4) that costs more than the
conversion itself, which the kernel does with the interpreter lock released. Measured on two
cores shared with the broker and the clients (docs/guide/benchmarks.md, "Conversions on the
event loop"): fetches of uncompressed or lz4 records down-converted on the loop cost the gateway
0.63-0.89x the CPU per GiB of the same fetches on the pool, and 8 old consumers read them
1.1-1.3x faster. gzip (and zstd, which old clients never get) stay on the pool: a 1 MiB gzip
conversion takes milliseconds, long enough to hold up every other connection of the loop, and
zlib lets the pool's threads run beside it.
"""

from __future__ import annotations

from collections.abc import Iterable

from lazyconv.records import Compression
from lazyconv.records._entries import summarize_entries
from lazyconv.records._format import (
    ATTRIBUTES_LOW_BYTE_OFFSET,
    COMPRESSION_CODEC_MASK,
    LEGACY_ENTRY_ATTRIBUTES_OFFSET,
    MAGIC_OFFSET,
)

__all__ = ["QUICK_CODECS", "QUICK_UP_BYTES", "quick_to_down_convert", "quick_to_up_convert"]

#: codecs whose conversions run on the loop
QUICK_CODECS = frozenset({int(Compression.NONE), int(Compression.SNAPPY), int(Compression.LZ4)})
_QUICK_MASK = sum(1 << codec for codec in QUICK_CODECS)

#: an old producer's request is up-converted on the loop up to this many bytes of message sets
#: (a 64 KiB lz4 set's hand-off to a worker cost the loop about as much as its conversion cost
#: the worker)
QUICK_UP_BYTES = 256 << 10


def quick_to_down_convert(record_sets: Iterable[bytes | bytearray | memoryview]) -> bool:
    """Whether every entry of these upstream record sets has a quick codec (read from the
    entries' headers): a fetch answered from them is down-converted on the loop. Its size
    needs no bound: a response converts one chunk per step as the client's socket takes it."""
    return all(not summarize_entries(records).codecs & ~_QUICK_MASK for records in record_sets)


def quick_to_up_convert(record_sets: Iterable[bytes | None]) -> bool:
    """Whether an old producer's message sets are small and of a quick codec (the codec bits of
    each set's first entry: byte 17 of a v0/v1 message, byte 22 of a v2 batch): up-converted on
    the loop."""
    total = 0
    for records in record_sets:
        if records is None or len(records) <= ATTRIBUTES_LOW_BYTE_OFFSET:
            continue
        total += len(records)
        attributes = LEGACY_ENTRY_ATTRIBUTES_OFFSET if records[MAGIC_OFFSET] < 2 else \
            ATTRIBUTES_LOW_BYTE_OFFSET
        if records[attributes] & COMPRESSION_CODEC_MASK not in QUICK_CODECS:
            return False
    return total <= QUICK_UP_BYTES
