"""Which conversions the gateway runs on its event loop and which on the worker pool.

Handing a step to a worker thread and back costs the loop two wake-ups of a thread and the
pool's queue. Where the conversion itself is cheaper than that, it runs on the loop:

- **Down-conversion of uncompressed records** (a fetch whose entries are all uncompressed):
  the kernel's copy and CRC of a chunk. On two cores shared with the broker and the clients,
  8 old consumers read 1.07–1.19× faster at 0.81–0.82× the gateway's CPU per GiB of the same
  fetches on the pool, one 1.03–1.10× at 0.68–0.88× (docs/guide/benchmarks.md, "Conversions
  on the event loop").
  Compressed records stay on the pool: their decompression is where the pool's threads, which
  convert with the GIL released, use every core (8 lz4 consumers read 1.18× faster on the
  pool, the conversion cache off, though at 1.2× the CPU).
- **Up-conversion of small message sets of a quick codec** (none, snappy, lz4, at most
  ``QUICK_UP_BYTES`` per request): a 64 KiB lz4 set's hand-off to a worker cost the loop about
  as much as its conversion cost the worker.
"""

from __future__ import annotations

from collections.abc import Iterable

from lazyconv.records import Compression
from lazyconv.records._entries import EntriesSummary
from lazyconv.records._format import (
    ATTRIBUTES_LOW_BYTE_OFFSET,
    COMPRESSION_CODEC_MASK,
    LEGACY_ENTRY_ATTRIBUTES_OFFSET,
    MAGIC_OFFSET,
)

__all__ = ["QUICK_CODECS", "QUICK_UP_BYTES", "quick_to_down_convert", "quick_to_up_convert"]

#: codecs whose small message sets are up-converted on the loop
QUICK_CODECS = frozenset({int(Compression.NONE), int(Compression.SNAPPY), int(Compression.LZ4)})

#: an old producer's request is up-converted on the loop up to this many bytes of message sets
QUICK_UP_BYTES = 256 << 10

_UNCOMPRESSED = 1 << int(Compression.NONE)


def quick_to_down_convert(summaries: Iterable[EntriesSummary]) -> bool:
    """Whether every entry of the upstream record sets these summaries (of
    :func:`~lazyconv.records._entries.summarize_entries`) describe is uncompressed: a fetch
    answered from them is down-converted on the loop. Its size needs no bound: a response
    converts one chunk per step as the client's socket takes it."""
    return all(not summary.codecs & ~_UNCOMPRESSED for summary in summaries)


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
