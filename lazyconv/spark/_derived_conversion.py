"""The consumer-driven lazy send, derived from one conversion per batch instead of re-run.

:mod:`lazyconv.spark._conversion_check` plays an old consumer through the real
``LazyDownConvertedRecords`` once per chunk size. This module gets the same answers from a single
conversion of every input batch per target magic, fed in log order by the segment scan
(:mod:`lazyconv.spark._scan_conversions`):

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
  :func:`lazyconv.conversion._lazy_records.chunk_groups` does and stopping at the first chunk that reaches the cut.

The records a consumer receives are compared with the expected ones by running sums of record
digests (counts and sums), never by lists; a test holds every figure equal to the real lazy
send for every chunk size. Memory: the batches of one fetch window (``fetch_max_bytes`` of
input, or one larger batch) and the run being added, with their conversions; the batches are
columns with prefix sums and the conversions one buffer, so a fetch costs a slice and a few
binary searches, not a loop over its batches.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import Any

from lazyconv.records._digest import MASK64
from lazyconv.records._format import LOG_HEADER, LOG_OVERHEAD

__all__ = ["ConvertedBatch", "ChunkTally", "DerivedConsumer"]

_LOG_OVERHEAD = LOG_OVERHEAD
_ENTRY_HEADER = LOG_HEADER
_PADDING_HEADER = LOG_OVERHEAD  # a fetch whose first batch converts to nothing commits one padding header


@dataclass(slots=True)
class ConvertedBatch:
    """One input batch as the emulated consumer needs it, converted once to the target magic.

    ``conv`` is the conversion with no first-offset filter (empty for a control batch below v2
    or a zstd batch below v2, which is never converted); ``records`` and ``temporary`` its
    :class:`~lazyconv.conversion._down.ConversionStats` figures; ``filterable`` says the conversion is one
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

    def snapshot(self) -> _Totals:
        """A copy to go back to (a fetch that must be run again later); taken before every
        fetch, so built field by field rather than through :func:`copy.copy`."""
        copied = object.__new__(_Totals)
        copied.__dict__.update(self.__dict__)
        copied.tallies = {c: ChunkTally(t.chunks, t.records_converted, t.temporary_memory_bytes)
                          for c, t in self.tallies.items()}
        return copied


_NO_ZSTD = 1 << 62  # an index past every window


class DerivedConsumer:
    """An old consumer reading one byte range through the lazy send, for one target magic and
    every chunk size at once. Feed batches in log order with :meth:`add` (one batch) or
    :meth:`add_run` (a run of plain v2 batches converted in one call into
    :attr:`conversion_buffer`), then :meth:`finish`.

    ``digest_delivered(data, min_offset)`` reads converted bytes as a consumer does (complete
    entries; a trailing partial one is not received) and returns ``(bytes of complete entries,
    last offset of the last complete entry or None, count, digest sum)``: the records at or
    above ``min_offset`` and the sum of their :func:`~lazyconv.records._digest.record_digest`
    values as received, without headers (the segment scan passes its kernel-backed digest).

    The batches held are columns (lists with a moving head) and their conversions one buffer in
    log order, so a fetch's stream is one slice of it and the per-chunk-size grouping is binary
    searches over prefix sums: the work per fetch does not grow with the batches in it.
    """

    def __init__(self, to_magic: int, chunk_sizes: tuple[int, ...], fetch_max_bytes: int,
                 start_offset: int, digest_delivered: Any) -> None:
        self.to_magic = to_magic
        self.chunk_sizes = chunk_sizes
        self.fetch_max_bytes = fetch_max_bytes
        self.next_offset = start_offset
        self._digest = digest_delivered
        # per batch held, from index self._head on:
        self._pos: list[int] = []  # log position
        self._end: list[int] = []  # log position after it (increasing)
        self._last: list[int] = []  # header last offset
        self._filterable: list[bool] = []  # converted to one standalone message per record
        self._last_record: list[int | None] = []  # last record a consumer must receive
        self._zstd: list[int] = []  # indexes of zstd batches (never converted), increasing
        # prefix sums with one leading element: batch k's figures are [k + 1] - [k]
        self._size_cum: list[int] = [0]
        self._conv_cum: list[int] = [0]  # absolute offsets in the conversion buffer
        self._rec_cum: list[int] = [0]
        self._temp_cum: list[int] = [0]
        self._buffer = bytearray()  # conversions of the batches held, in log order
        self._buffer_base = 0  # absolute offset of self._buffer[0]
        self._head = 0
        self._floor = 0  # after a stall: the window index the next fetch may start at
        self.totals = _Totals(tallies={c: ChunkTally() for c in chunk_sizes})
        self.peak_window_bytes = 0
        self.error: str | None = None
        self._done = False
        self._range_end = 1 << 62  # known at finish(); until then fetches need whole slices
        self._drain_from = 0  # log position the input must reach before draining can go on

    # -- expectations -------------------------------------------------------------------------

    def expect_records(self, count: int, hash_sum: int) -> None:
        """Count ``count`` records a consumer of this magic must receive, whose
        :func:`~lazyconv.records._digest.record_digest` values (without headers) sum to
        ``hash_sum``."""
        t = self.totals
        t.expected += count
        t.expected_hash = (t.expected_hash + hash_sum) & MASK64

    # -- input ------------------------------------------------------------------------------------

    @property
    def conversion_buffer(self) -> bytearray:
        """Where :meth:`add_run`'s caller appends a run's conversion before calling it (nothing
        else may write to it)."""
        return self._buffer

    def _append(self, position: int, size: int, last_offset: int, conv_end: int, records: int,
                temporary: int, filterable: bool, last_record: int | None) -> None:
        self._pos.append(position)
        self._end.append(position + size)
        self._last.append(last_offset)
        self._filterable.append(filterable)
        self._last_record.append(last_record)
        self._size_cum.append(self._size_cum[-1] + size)
        self._conv_cum.append(conv_end)
        self._rec_cum.append(self._rec_cum[-1] + records)
        self._temp_cum.append(self._temp_cum[-1] + temporary)

    def add(self, batch: ConvertedBatch) -> None:
        """The next complete batch of the range (in log order)."""
        if batch.zstd:
            self.totals.zstd_batches += 1
            self._zstd.append(len(self._pos))
        self._buffer += batch.conv
        self._append(batch.position, batch.size, batch.last_offset,
                     self._buffer_base + len(self._buffer), batch.records, batch.temporary,
                     batch.filterable, batch.last_record)
        self._after_add()

    def add_run(self, positions: list[int], run_end: int, last_offsets: list[int],
                conv_ends: list[int], records: list[int], last_records: list[int | None],
                temporaries: dict[int, int] | None = None, zstd: tuple[int, ...] | list[int] = ()) -> None:
        """The next batches of the range: a run of adjacent v2 batches at ``positions``, ending
        at log byte ``run_end``, whose conversions were appended to :attr:`conversion_buffer`;
        ``conv_ends[k]`` is ``len(conversion_buffer)`` after batch ``k``, ``records[k]`` the
        records converted and ``last_records[k]`` the last record a consumer must receive
        (``None``: none). Uncompressed batches convert to one standalone message per record and
        cost their size plus the bytes written; ``temporaries`` maps the index of each
        compressed batch (one wrapper, not filterable) to its temporary memory, and ``zstd``
        lists the zstd batches (never converted)."""
        base = self._buffer_base
        ends = positions[1:]
        ends.append(run_end)
        sizes = [e - p for p, e in zip(positions, ends, strict=True)]
        conv_cum = [base + e for e in conv_ends]
        written = [b - a for a, b in zip([self._conv_cum[-1], *conv_cum], conv_cum, strict=False)]
        temporary = [size + w if w else 0 for size, w in zip(sizes, written, strict=True)]
        filterable = [True] * len(positions)
        if temporaries:
            for k, value in temporaries.items():
                temporary[k] = value
                filterable[k] = False
        if zstd:
            first = len(self._pos)
            self._zstd += [first + k for k in zstd]
            self.totals.zstd_batches += len(zstd)
            for k in zstd:
                filterable[k] = False
        self._pos += positions
        self._end += ends
        self._last += last_offsets
        self._filterable += filterable
        self._last_record += last_records
        self._conv_cum += conv_cum
        for prefix, values in ((self._size_cum, sizes), (self._rec_cum, records),
                               (self._temp_cum, temporary)):
            prefix += islice(accumulate(values, initial=prefix[-1]), 1, None)
        self._after_add()

    def _after_add(self) -> None:
        head = self._head
        held = (self._size_cum[-1] - self._size_cum[head]) + (self._conv_cum[-1] - self._conv_cum[head])
        if held > self.peak_window_bytes:
            self.peak_window_bytes = held
        if self._end[-1] >= self._drain_from:
            self._drain(final=False)

    def finish(self, range_end: int) -> None:
        """The range has no more batches and ends at byte ``range_end``: run the remaining
        fetches."""
        self._range_end = range_end
        self._drain(final=True)
        self._forget(len(self._pos))

    # -- the fetch loop -------------------------------------------------------------------------

    def _forget(self, head: int) -> None:
        """Drop the columns and conversions before window index ``head``."""
        for column in (self._pos, self._end, self._last, self._filterable, self._last_record):
            del column[:head]
        for prefix in (self._size_cum, self._conv_cum, self._rec_cum, self._temp_cum):
            del prefix[:head]
        self._zstd = [z - head for z in self._zstd if z >= head]
        keep_from = self._conv_cum[0]
        del self._buffer[:keep_from - self._buffer_base]
        self._buffer_base = keep_from
        self._head = 0

    def _drop_front(self) -> None:
        """Forget the batches before the fetch offset (no fetch can start at them any more)."""
        last = self._last
        head = self._head
        count = len(last)
        next_offset = self.next_offset
        while head < count and last[head] < next_offset:
            head += 1
        self._head = head
        if head > 1024 and head * 2 > count:
            self._forget(head)

    def _drain(self, final: bool) -> None:
        self._drain_from = 0
        while not self._done:
            if self._floor == 0:
                self._drop_front()
            count = len(self._pos)
            i = self._head + self._floor
            if i >= count:
                return
            first = self._pos[i]
            fetch_end = first + max(self.fetch_max_bytes, self._end[i] - first)
            if not final and self._end[-1] < fetch_end:
                self._drain_from = fetch_end  # nothing to do before the input reaches it
                return  # the fetch's slice is not complete yet
            n = bisect.bisect_right(self._end, fetch_end, i, count)
            slice_size = min(fetch_end, self._range_end) - first
            before = self.totals.snapshot()
            if not self._fetch(i, n, slice_size, final):
                # the fetch stalled and whether the consumer goes on depends on batches not
                # seen yet: forget it and run it again when they are here
                self.totals = before
                return

    def _expected_ahead(self) -> bool:
        """Whether a record at or above the fetch offset is among the batches held."""
        next_offset = self.next_offset
        return any(r is not None and r >= next_offset for r in self._last_record[self._head:])

    def _next_zstd(self, at: int) -> int:
        """The index of the first zstd batch at or after ``at`` (or a number past them all)."""
        k = bisect.bisect_left(self._zstd, at)
        return self._zstd[k] if k < len(self._zstd) else _NO_ZSTD

    def _filtered_first(self, i: int) -> tuple[int, int, int, int]:
        """Batch ``i``'s conversion for a fetch at the fetch offset: ``(start, end, records,
        temporary)``, start and end absolute in the conversion buffer; leading standalone
        messages below the fetch offset are dropped (only the fetch's first batch can have
        them)."""
        start = self._conv_cum[i]
        end = self._conv_cum[i + 1]
        records = self._rec_cum[i + 1] - self._rec_cum[i]
        temporary = self._temp_cum[i + 1] - self._temp_cum[i]
        if not self._filterable[i] or start == end:
            return start, end, records, temporary
        buffer = self._buffer
        base = self._buffer_base
        first_offset = self.next_offset
        pos = start
        skipped = 0
        while pos < end:
            offset, size = _ENTRY_HEADER.unpack_from(buffer, pos - base)
            if offset >= first_offset:
                break
            pos += _LOG_OVERHEAD + size
            skipped += 1
        if pos == start:
            return start, end, records, temporary
        if pos >= end:
            return end, end, 0, 0
        size = self._end[i] - self._pos[i]
        return pos, end, records - skipped, size + (end - pos)

    def _fetch(self, i: int, n: int, slice_size: int, final: bool) -> bool:
        zstd_at = self._next_zstd(i)
        if zstd_at == i:
            return self._zstd_first(i)
        f_start, f_end, f_records, f_temp = self._filtered_first(i)
        f_index = i
        if f_start == f_end:  # the first batch with a conversion, unless a zstd batch comes first
            conv_cum = self._conv_cum
            f_index = bisect.bisect_right(conv_cum, conv_cum[i + 1], i + 1) - 1
            if zstd_at < min(f_index, n):
                return self._zstd_first(i)
            if f_index < n:
                f_start, f_end = conv_cum[f_index], conv_cum[f_index + 1]
                f_records = self._rec_cum[f_index + 1] - self._rec_cum[f_index]
                f_temp = self._temp_cum[f_index + 1] - self._temp_cum[f_index]
        t = self.totals
        t.fetches += 1
        if f_start == f_end:
            committed = _PADDING_HEADER
            t.bytes_committed += committed
            t.padding_bytes += committed
            return self._after_fetch(i, None, final)
        f_len = f_end - f_start
        committed = max(slice_size, f_len)
        t.bytes_committed += committed
        # the stream: F, then every later batch's conversion until a zstd batch
        stop = min(n, self._next_zstd(f_index + 1))
        stream_end = self._conv_cum[stop] if stop > f_index else f_end
        stream_len = stream_end - f_start
        written = min(committed, stream_len)
        t.padding_bytes += committed - written
        self._tally_chunks(committed, f_len, f_records, f_temp, f_index + 1, stop)
        # the consumer: the complete entries within the committed size, digested in one call
        start = f_start - self._buffer_base
        with memoryview(self._buffer) as view, view[start:start + written] as stream:
            valid, last_complete, count, digest_sum = self._digest(stream, self.next_offset)
        t.delivered += count
        t.delivered_hash = (t.delivered_hash + digest_sum) & MASK64
        t.bytes_valid += valid
        return self._after_fetch(i, last_complete, final)

    def _zstd_first(self, i: int) -> bool:
        """A zstd batch before any conversion: error 76 for the partition; the consumer steps
        past the fetch's first batch. Where the log's offsets go back (reported by the checks)
        that step would not advance the fetch offset, and a consumer would fetch the same
        batches for ever: the emulation moves on to the next batch instead, never back."""
        past = self._last[i] + 1
        if past > self.next_offset:
            self.next_offset = past
            self._floor = 0
        else:
            self._floor = i + 1 - self._head
        return True

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
                      first: int, stop: int) -> None:
        """Chunks of the send per chunk size: after F, batches ``first .. stop - 1`` grouped as
        :func:`lazyconv.conversion._lazy_records.chunk_groups` groups them (the first batch always, then while the
        input sizes stay within the chunk size) until the written bytes reach ``committed``."""
        size_cum = self._size_cum
        conv_cum = self._conv_cum
        rec_cum = self._rec_cum
        temp_cum = self._temp_cum
        for chunk_size, tally in self.totals.tallies.items():
            tally.chunks += 1
            tally.records_converted += f_records
            tally.temporary_memory_bytes += f_temp
            written = f_len
            k = first
            while written < committed and k < stop:
                j = k
                k = max(j + 1, bisect.bisect_right(size_cum, size_cum[j] + chunk_size, j + 1, stop + 1) - 1)
                conv_len = conv_cum[k] - conv_cum[j]
                if conv_len == 0:
                    continue  # converted to nothing: skipped, its stats dropped (as Kafka)
                tally.chunks += 1
                tally.records_converted += rec_cum[k] - rec_cum[j]
                tally.temporary_memory_bytes += temp_cum[k] - temp_cum[j]
                written += conv_len
