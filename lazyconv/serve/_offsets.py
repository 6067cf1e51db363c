"""Offset assignment for produced record sets (what a leader does before appending).

A produced record set is split into its top-level entries, each entry validated (CRC and
structure, by the record codecs) and given offsets starting at the log's next offset:

- v2 batch: the base offset field is rewritten; the CRC does not cover it. The batch takes
  ``lastOffsetDelta + 1`` offsets.
- legacy uncompressed message: its offset field is rewritten; it takes one offset.
- v1 compressed wrapper: inner offsets are relative, so only the wrapper's offset (the absolute
  offset of its last inner message) is rewritten; it takes as many offsets as it has inner messages.
- v0 compressed wrapper: inner offsets are absolute, so assigning offsets means recompressing;
  Kafka does that, this server refuses it (:class:`~lazyconv.errors.InvalidRecordError`), which a
  Produce v2+ client never needs (they send v1 or v2).
"""

from __future__ import annotations

from lazyconv.errors import InvalidRecordError

__all__ = ["split_entries"]


def split_entries(data: bytes | memoryview) -> list[tuple[bytes, int]]:
    """Validate a produced record set and return ``(entry bytes, offsets it takes)`` per entry.

    Raises a :class:`~lazyconv.errors.RecordsError` subclass for corrupt or partial data (a
    produced set must not end in a partial entry).
    """
    from lazyconv.records import MemoryRecords

    records = MemoryRecords(bytes(data))
    entries: list[tuple[bytes, int]] = []
    consumed = 0
    for batch in records.batches():
        batch.validate()
        raw = bytes(batch.buffer())
        if batch.magic == 2:
            count = batch.last_offset - batch.base_offset + 1
        elif batch.compression == 0:
            count = 1
        elif batch.magic == 1:
            count = sum(1 for _ in batch)
        else:
            raise InvalidRecordError(
                "compressed magic v0 message sets need recompression to take new offsets; "
                "produce magic v1 or v2",
                batch.position,
            )
        if count <= 0:
            raise InvalidRecordError(f"entry with {count} offsets", batch.position)
        entries.append((raw, count))
        consumed += len(raw)
    if consumed != len(data):
        raise InvalidRecordError(
            f"produced records end with {len(data) - consumed} bytes of a partial entry", consumed
        )
    return entries

