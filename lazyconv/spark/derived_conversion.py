"""The consumer-driven lazy send, derived from one conversion per batch instead of re-run.

:mod:`lazyconv.spark.conversion_check` plays an old consumer through the real
``LazyDownConvertedRecords`` once per chunk size. This module gets the same answers from a single
conversion of every input batch per target magic, fed in log order by the segment scan
(:mod:`lazyconv.spark.segment_scan`):

- the bytes a lazy send writes do not depend on the chunk size: they are the first converted
  batch F followed by the conversion of every later complete batch of the fetch (stopping before
  a zstd batch below magic 2), cut at the committed size ``S = max(fetch size, len(F))`` and
  padded up to it. A batch's conversion is the concatenation of its entries, the same whether it
  is converted alone or in a chunk, so each batch is converted once;
- the first-offset filter touches only the first batch of a fetch (every later batch starts
  above the fetch offset) and only when it converts to one standalone message per record: it
  drops the leading entries below the fetch offset, arithmetic on the converted entry headers;
- what does depend on the chunk size (how many chunks were converted, the records and
  temporary memory they cost) follows from grouping the batches' input sizes the way
  :func:`lazyconv.lazy.chunk_groups` does and stopping at the first chunk that reaches the cut.

The records a consumer receives are compared with the expected ones by running sums of record
digests (counts and sums), never by lists; a test holds every figure equal to the real lazy
send for every chunk size. Memory: the batches of one fetch window (``fetch_max_bytes`` of
input, or one larger batch) and their conversions.
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass, field
from typing import Any

from lazyconv.records._format import LOG_OVERHEAD
from lazyconv.records.digest import MASK64

__all__ = ["ConvertedBatch", "ChunkTally", "DerivedConsumer"]

_LOG_OVERHEAD = LOG_OVERHEAD
_ENTRY_HEADER = struct.Struct(">qi")
_PADDING_HEADER = 12


@dataclass(slots=True)
class ConvertedBatch:
    """One input batch as the emulated consumer needs it, converted once to the target magic.

    ``conv`` is the conversion with no first-offset filter (empty for a control batch below v2
    or a zstd batch below v2, which is never converted); ``records`` and ``temporary`` its
    :class:`~lazyconv.convert.ConversionStats` figures; ``filterable`` says the conversion is one
    standalone message per record (so the first-offset filter applies per entry);
    ``last_record`` is the offset of its last record a consumer must receive (``None`` if none).
    """

    position: int
    size: int
    last_offset: int
    zstd: bool
    conv: bytes | bytearray
    records: int
    temporary: int
    filterable: bool
    last_record: int | None

    @property
    def end(self) -> int:
        return self.position + self.size


@dataclass(slots=True)
class ChunkTally:
    """Per chunk size: what the sends converted (the rest of the figures are the same for all
    chunk sizes and live in :class:`DerivedConsumer`)."""

    chunks: int = 0
    records_converted: int = 0
    temporary_memory_bytes: int = 0


@dataclass
class _Totals:
    fetches: int = 0
    bytes_committed: int = 0
    bytes_valid: int = 0
    padding_bytes: int = 0
    stalls: int = 0
    delivered: int = 0
    delivered_hash: int = 0
    expected: int = 0
    expected_hash: int = 0
    zstd_batches: int = 0
    tallies: dict[int, ChunkTally] = field(default_factory=dict)


def _filtered(batch: ConvertedBatch, first_offset: int) -> tuple[memoryview, int, int]:
    """The conversion of ``batch`` for a fetch at ``first_offset``: (bytes, records, temporary)."""
    conv = memoryview(batch.conv)
    if not batch.filterable or not conv:
        return conv, batch.records, batch.temporary
    skipped = 0
    pos = 0
    end = len(conv)
    while pos < end:
        offset, size = _ENTRY_HEADER.unpack_from(conv, pos)
        if offset >= first_offset:
            break
        pos += _LOG_OVERHEAD + size
        skipped += 1
    if pos == 0:
        return conv, batch.records, batch.temporary
    if pos >= end:
        return conv[:0], 0, 0
    kept = conv[pos:]
    return kept, batch.records - skipped, batch.size + len(kept)


class DerivedConsumer:
    """An old consumer reading one byte range through the lazy send, for one target magic and
    every chunk size at once. Feed batches in log order with :meth:`add`, then :meth:`finish`.

    ``digest_delivered(data, min_offset)`` reads converted bytes as a consumer does (complete
    entries; a trailing partial one is not received) and returns ``(bytes of complete entries,
    last offset of the last complete entry or None, count, digest sum)``: the records at or
    above ``min_offset`` and the sum of their :func:`~lazyconv.records.digest.record_digest`
    values as received, without headers (the segment scan passes its kernel-backed digest).
    """

    def __init__(self, to_magic: int, chunk_sizes: tuple[int, ...], fetch_max_bytes: int,
                 start_offset: int, digest_delivered: Any) -> None:
        self.to_magic = to_magic
        self.chunk_sizes = chunk_sizes
        self.fetch_max_bytes = fetch_max_bytes
        self.next_offset = start_offset
        self._digest = digest_delivered
        # batches held: self._window[self._head:] (a list with a moving head, so indexing is
        # O(1) and dropping from the front is amortized O(1))
        self._window: list[ConvertedBatch] = []
        self._head = 0
        self._held_bytes = 0
        self._floor = 0  # after a stall: the window index the next fetch may start at
        self.totals = _Totals(tallies={c: ChunkTally() for c in chunk_sizes})
        self.peak_window_bytes = 0
        self.error: str | None = None
        self._done = False
        self._range_end = 1 << 62  # known at finish(); until then fetches need whole slices

    # -- expectations -------------------------------------------------------------------------

    def expect_records(self, count: int, hash_sum: int) -> None:
        """Count ``count`` records a consumer of this magic must receive, whose
        :func:`~lazyconv.records.digest.record_digest` values (without headers) sum to
        ``hash_sum``."""
        t = self.totals
        t.expected += count
        t.expected_hash = (t.expected_hash + hash_sum) & MASK64

    def add(self, batch: ConvertedBatch) -> None:
        """The next complete batch of the range (in log order)."""
        if batch.zstd:
            self.totals.zstd_batches += 1
        self._window.append(batch)
        self._held_bytes += len(batch.conv) + batch.size
        if self._held_bytes > self.peak_window_bytes:
            self.peak_window_bytes = self._held_bytes
        self._drain(final=False)

    def finish(self, range_end: int) -> None:
        """The range has no more batches and ends at byte ``range_end``: run the remaining
        fetches."""
        self._range_end = range_end
        self._drain(final=True)
        self._window = []
        self._head = 0
        self._held_bytes = 0

    # -- the fetch loop -------------------------------------------------------------------------

    def _drop_front(self) -> None:
        """Forget the batches before the fetch offset (no fetch can start at them any more)."""
        window = self._window
        head = self._head
        while head < len(window) and window[head].last_offset < self.next_offset:
            self._held_bytes -= len(window[head].conv) + window[head].size
            head += 1
        if head > 1024 and head * 2 > len(window):
            del window[:head]
            head = 0
        self._head = head

    def _drain(self, final: bool) -> None:
        window = self._window
        while self._head < len(self._window) and not self._done:
            if self._floor == 0:
                self._drop_front()
            window = self._window
            head = self._head
            if head >= len(window):
                return
            i = head + self._floor
            if i >= len(window):
                return
            first = window[i]
            fetch_end = first.position + max(self.fetch_max_bytes, first.size)
            if not final and window[-1].end < fetch_end:
                return  # the fetch's slice is not complete yet
            n = i
            while n < len(window) and window[n].end <= fetch_end:
                n += 1
            slice_size = min(fetch_end, self._range_end) - first.position
            before = copy.deepcopy(self.totals)
            if not self._fetch(i, n, slice_size, final):
                # the fetch stalled and whether the consumer goes on depends on batches not
                # seen yet: forget it and run it again when they are here
                self.totals = before
                return

    def _expected_ahead(self) -> bool:
        """Whether a record at or above the fetch offset is among the batches held."""
        return any(b.last_record is not None and b.last_record >= self.next_offset
                   for b in self._window[self._head:])

    def _fetch(self, i: int, n: int, slice_size: int, final: bool) -> bool:
        batches = self._window[i:n]
        f_index = None
        f_bytes: memoryview | None = None
        f_records = f_temp = 0
        for k, b in enumerate(batches):
            if b.zstd:
                # error 76 for the partition: the consumer steps past the fetch's first batch
                self.next_offset = batches[0].last_offset + 1
                self._floor = 0
                return True
            data, recs, temp = _filtered(b, self.next_offset) if k == 0 else (
                memoryview(b.conv), b.records, b.temporary)
            if data:
                f_index, f_bytes, f_records, f_temp = k, data, recs, temp
                break
        t = self.totals
        t.fetches += 1
        if f_bytes is None or f_index is None:
            committed = _PADDING_HEADER if batches else 0
            t.bytes_committed += committed
            t.padding_bytes += committed
            return self._after_fetch(i, None, final)
        committed = max(slice_size, len(f_bytes))
        t.bytes_committed += committed
        # the stream: F, then every later batch's conversion until a zstd batch
        pieces: list[memoryview] = [f_bytes]
        later = batches[f_index + 1:]
        stop = len(later)
        for k, b in enumerate(later):
            if b.zstd:
                stop = k
                break
            if b.conv:
                pieces.append(memoryview(b.conv))
        later = later[:stop]
        stream_len = sum(len(p) for p in pieces)
        written = min(committed, stream_len)
        t.padding_bytes += committed - written
        self._tally_chunks(committed, len(f_bytes), f_records, f_temp, later)
        # the consumer: the complete entries within the committed size, digested in one call
        stream = memoryview(b"".join(pieces) if len(pieces) > 1 else pieces[0])[:committed]
        valid, last_complete, count, digest_sum = self._digest(stream, self.next_offset)
        t.delivered += count
        t.delivered_hash = (t.delivered_hash + digest_sum) & MASK64
        t.bytes_valid += valid
        return self._after_fetch(i, last_complete, final)

    def _after_fetch(self, i: int, last_complete: int | None, final: bool) -> bool:
        if last_complete is None or last_complete < self.next_offset:
            if not self._expected_ahead():
                if final:
                    self._done = True  # nothing left to receive: the consumer is done
                    return True
                return False  # decided by batches not seen yet
            self.totals.stalls += 1
            self._floor = i + 1 - self._head
            return True
        self._floor = 0
        self.next_offset = last_complete + 1
        return True

    def _tally_chunks(self, committed: int, f_len: int, f_records: int, f_temp: int,
                      later: list[ConvertedBatch]) -> None:
        for chunk_size, tally in self.totals.tallies.items():
            tally.chunks += 1
            tally.records_converted += f_records
            tally.temporary_memory_bytes += f_temp
            written = f_len
            k = 0
            while written < committed and k < len(later):
                taken = later[k].size
                conv_len = len(later[k].conv)
                records = later[k].records
                temp = later[k].temporary
                k += 1
                while k < len(later) and taken + later[k].size <= chunk_size:
                    taken += later[k].size
                    conv_len += len(later[k].conv)
                    records += later[k].records
                    temp += later[k].temporary
                    k += 1
                if conv_len == 0:
                    continue  # converted to nothing: skipped, its stats dropped (as Kafka)
                tally.chunks += 1
                tally.records_converted += records
                tally.temporary_memory_bytes += temp
                written += conv_len

