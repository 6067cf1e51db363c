"""KIP-283 lazy down-conversion: a committed size up front, conversion one chunk at a time.

:class:`LazyDownConvertedRecords` wraps input records (``MemoryRecords`` or a ``FileRecords``
slice) that a consumer wants in an older magic. Its ``size_in_bytes`` is the committed size
S_pre, known before the bulk of the data is converted; :meth:`~LazyDownConvertedRecords.to_send`
returns a :class:`LazyDownConvertSend` that converts one chunk of whole input batches at a time
while the channel takes the bytes, and writes *exactly* S_pre bytes:

- the whole converted output while it fits;
- when the converted data is larger than S_pre, the bytes are cut at S_pre, possibly inside a
  message (consumers skip the incomplete entry), and no further chunk is converted;
- when it is smaller, the rest is overflow padding: steps of at most 131 072 bytes, each
  ``int64 -1 ‖ int32 max(R + 1, 61) ‖ zeros`` for the R bytes still owed (docs/guide/down-conversion.md).

Where Kafka's Java code has defects this module does the evident intended thing
(docs/differences.md, "The lazy send"):

- the send resumes right after the input batch the first converted chunk came from, so no batch
  is sent twice (Kafka resumes after input batch 1 and re-sends batch k when k > 1);
- a chunk never contains a zstd batch below magic 2: it ends before it, so every good batch
  before the zstd one is converted and sent, then the rest is padded (Kafka loses the whole
  chunk);
- padding continues for any length after a zstd error (Kafka fails after 131 072 bytes);
- a corrupt batch met after the size is committed is handled like a zstd one (Kafka aborts the
  whole response): everything converted before it is sent, then the rest is padded, so the
  response stays well-formed and the other partitions arrive; the error is kept in the send's
  ``error`` (and passed to ``on_error``) for the server to report.

Conversions of compressed batches read from a file, or from records in memory that carry a
``cache_key``, go through the process's conversion cache (:mod:`lazyconv.conversion._cache`):
another send of the same bytes reuses them, exactly. The cache's memory is the process's,
bounded by its own size, and not counted below.

On a socket, the chunks of uncompressed v2 batches read from a file are read, converted and
written by the compiled kernel in one call each (``send_plain_chunk``: the same chunks, bytes and
stats as the Python steps, which take every chunk the kernel declines).

Memory: one converted chunk at a time (its input batches are at most ``chunk_size`` bytes unless
a single batch is larger), plus the first converted batch until it has been written. A
compressed batch is converted whole: up to about 6 times ``max_decompressed_size`` for a batch
of tiny records (see :mod:`lazyconv.conversion._down`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from lazyconv.conversion._cache import conversion_cache
from lazyconv.conversion._chunks import (
    DEFAULT_CHUNK_SIZE,
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    Chunk,
    GuardedBatches,
    chunk_groups,
    position_after,
    skip,
)
from lazyconv.conversion._down import (
    ZERO_STATS,
    ConversionStats,
    check_conversion_input,
    check_target_magic,
    down_convert_bytes,
)
from lazyconv.conversion._lazy_send import LazyDownConvertSend, PlainWindow
from lazyconv.conversion._to_legacy import convert_plain_chunk
from lazyconv.errors import (
    ConfigurationError,
    CorruptRecordError,
    RecordsError,
    TruncatedDataError,
    UnsupportedCompressionError,
)
from lazyconv.records import _impl
from lazyconv.records._entries import BatchIterator, ReadAheadSource, iter_batches, read_ahead
from lazyconv.records._format import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from lazyconv.records._scan import ShiftedSource

if TYPE_CHECKING:
    from lazyconv._types import Records
    from lazyconv.records._types import RecordBatch

__all__ = ["CommittedState", "LazyDownConvertedRecords"]

log = logging.getLogger(__name__)

_LOG_OVERHEAD = LOG_OVERHEAD


class CommittedState(NamedTuple):
    """A :class:`LazyDownConvertedRecords`' committed size and where its first converted batch
    F came from (``resume_after``: input batches up to and including F's; ``first_size``: len(F);
    ``first_batch_size``: the size of F's input batch when it is the first batch, so the send
    reads and converts it in one step). A tuple, so a sender's job carries it as a plain one
    (``state[:]``)."""

    size: int
    resume_after: int
    first_found: bool
    first_size: int | None
    first_batch_size: int | None = None



def _convert_group(group: list[Any], to_magic: int, first_offset: int) -> Iterator[Chunk]:
    """The conversion of a chunk; if a batch of it is corrupt, the conversion of the batches
    before that one (if any), then the error. If the chunk failed but each of its batches
    converts, the bytes changed between the two conversions (a file overwritten in place, a
    buffer rewritten by another thread while the GIL was released): nothing more is sent and
    :class:`~lazyconv.errors.CorruptRecordError` says so (the send pads to its committed size)."""
    try:
        yield down_convert_bytes(group, to_magic, first_offset)
        return
    except UnsupportedCompressionError:
        raise
    except RecordsError:
        pass
    out = bytearray()
    stats = ZERO_STATS
    for batch in group:
        try:
            data, batch_stats = down_convert_bytes([batch], to_magic, first_offset)
        except RecordsError:
            if out:
                yield out, stats
            raise
        if data:
            out += data
            stats = stats + batch_stats
    raise CorruptRecordError(
        f"the records changed while they were being sent: the {len(group)} batches from byte "
        f"{group[0].position} failed to convert together but convert one by one",
        group[0].position,
    )



def _convert_batch(batch: RecordBatch, to_magic: int, first_offset: int,
                   reused: list[int]) -> Chunk:
    """One input batch converted (a send's first), or its conversion kept by the process's
    :data:`~lazyconv.conversion._cache.conversion_cache` (then ``reused[0]`` is counted up)."""
    cache = conversion_cache
    source = getattr(batch, "_source", None)
    max_decompressed = getattr(batch, "max_decompressed_size", 0)
    key = None
    # only compressed batches that are converted (not copied) are worth keeping
    if batch.compression_id and batch.magic > to_magic and cache.fits(batch.size_in_bytes, 0):
        key = cache.key(source, batch.position, to_magic, first_offset, max_decompressed, 0)
    if key is None:
        return down_convert_bytes([batch], to_magic, first_offset)
    started = time.perf_counter_ns()
    hit = cache.lookup(key, source, batch.position + batch.size_in_bytes)
    if hit is not None:
        reused[0] += 1
        return hit.data, replace(hit.stats, conversion_time_ns=time.perf_counter_ns() - started)
    copies = _batches_of_copy(source, batch.position, batch.position + batch.size_in_bytes,
                              max_decompressed)
    if copies is None or len(copies[1]) != 1:
        return down_convert_bytes([batch], to_magic, first_offset)
    kept, (copy,) = copies
    data, stats = down_convert_bytes([copy], to_magic, first_offset)
    cache.store(key, kept, data, stats)
    return data, stats


def _plain_first_batch(records: Records, to_magic: int, first_offset: int,
                       size: int | None) -> tuple[Chunk, int] | None:
    """The first converted batch F and where its input batch ends, read and converted in one
    step when the caller knows the first batch's ``size`` (a log's index does) and it is a
    plain v2 batch the kernel converts to something; None otherwise (also for a wrong size,
    a read error or a batch that converts to nothing): the reference path then converts batch
    by batch and meets every error as always. Same bytes and stats as that path (the kernel's
    chunk conversion, one batch long)."""
    if size is None or to_magic >= 2 or not _impl.current.converts_runs or \
            not 0 < size <= records.size_in_bytes:
        return None
    batches = records.batches()
    if not isinstance(batches, BatchIterator) or not batches.untouched:
        return None
    started = time.perf_counter_ns()
    try:
        data = batches.source.read(batches.start, size)
    except (RecordsError, OSError):
        return None
    out = bytearray()
    # a chunk of size 0 is the first entry alone
    chunk = convert_plain_chunk(data, out, 0, to_magic, first_offset)
    if chunk is None or chunk.end != size or not out:
        return None
    stats = ConversionStats(chunk.converted, chunk.temporary, time.perf_counter_ns() - started)
    return (out, stats), batches.start + size


def _batches_of_copy(source: Any, start: int, stop: int,
                     max_decompressed: int) -> tuple[bytes | memoryview, list[RecordBatch]] | None:
    """``[start, stop)`` of ``source`` read once, and its batches over that copy (positions as
    in the file), for a conversion whose input is kept: a file rewritten meanwhile cannot pair
    other bytes with it. None when the read fails: the conversion from the file meets the error
    and reports it as always."""
    try:
        kept = source.read(start, stop - start)
        if isinstance(kept, memoryview) and not kept.readonly:
            kept = bytes(kept)  # records in a writable buffer: converted from the copy kept
        return kept, list(iter_batches(ShiftedSource(memoryview(kept), start), start, start + len(kept),
                                       max_decompressed))
    except (RecordsError, OSError):
        return None



class LazyDownConvertedRecords:
    """Input records to be down-converted lazily while they are sent (KIP-283).

    ``records`` is anything with ``batches()`` and ``size_in_bytes`` (``MemoryRecords``, a
    ``FileRecords`` slice); ``to_magic`` is 0, 1 or 2; ``first_offset`` is the fetch offset;
    ``chunk_size`` (16 KiB – 1 MiB, default 128 KiB) bounds the input bytes converted at once;
    ``first_batch_size``, when the caller knows it (a log's index does), is the size of an
    uncompressed first input batch: it is then read and converted in one step (give it for no
    other batch: a wrong size or a compressed batch costs that step, then the batch is read as
    without it).

    Construction converts input batches one at a time until one converts to something (the
    first converted batch F, kept for the send) and fixes the committed size
    ``size_in_bytes = max(records.size_in_bytes, len(F))``; 12 if no batch converts to anything
    but there is at least one complete batch, 0 if there is none. A zstd batch met there (target
    0/1) raises :class:`~lazyconv.errors.UnsupportedCompressionError` (Kafka answers the
    partition with error 76, UNSUPPORTED_COMPRESSION_TYPE), a corrupt one its
    :class:`~lazyconv.errors.RecordsError`.

    Errors met by a send after the size is committed end its conversion (the rest is padded):
    ``on_error(error)`` is called with each, and :attr:`send_error` holds the latest send's.
    """

    _first: Chunk | None
    _first_size: int | None
    _first_batch_size: int | None
    _first_plain: bool
    _resume_position: int | None
    _reused: list[int]
    _last_send: LazyDownConvertSend | None

    def __init__(
        self,
        records: Records,
        to_magic: int,
        first_offset: int,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        on_error: Callable[[RecordsError], None] | None = None,
        *,
        first_batch_size: int | None = None,
    ) -> None:
        self._setup(records, to_magic, first_offset, chunk_size, on_error)
        if not isinstance(first_batch_size, int | None):
            raise ConfigurationError(f"first_batch_size must be an int or None, got {first_batch_size!r:.40}")
        scanned = 0
        plain = _plain_first_batch(records, to_magic, first_offset, first_batch_size)
        if plain is not None:
            scanned = 1
            self._first, self._resume_position = plain
            self._first_batch_size = first_batch_size
            self._first_plain = True
        else:
            for batch in records.batches():
                scanned += 1
                data, stats = _convert_batch(batch, to_magic, first_offset, self._reused)
                if data:
                    self._first = (data, stats)
                    self._resume_position = batch.position + batch.size_in_bytes
                    if scanned == 1 and batch.magic == 2 and not batch.compression_id:
                        # only an uncompressed one: reading any other in one step would be
                        # wasted (the kernel declines it and the batch is read again)
                        self._first_batch_size = batch.size_in_bytes
                    break
        self._resume_after = scanned
        self._first_found = self._first is not None
        input_size = records.size_in_bytes
        if self._first is not None:
            self._size = max(input_size, len(self._first[0]))
        else:
            self._size = _LOG_OVERHEAD if scanned else 0
        log.debug(
            "lazy down-conversion to v%d from offset %d: %d input bytes, committed %d bytes, "
            "first converted batch is input batch %d",
            to_magic, first_offset, input_size, self._size, scanned,
        )

    def _setup(self, records: Records, to_magic: int, first_offset: int, chunk_size: int,
               on_error: Callable[[RecordsError], None] | None) -> None:
        check_target_magic(to_magic)
        check_conversion_input(records, first_offset)
        if not isinstance(chunk_size, int) or not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigurationError(
                f"chunk_size must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} bytes "
                f"(16 KiB - 1 MiB), got {chunk_size!r}"
            )
        self.records = records
        self.to_magic = to_magic
        self.first_offset = first_offset
        self.chunk_size = chunk_size
        self.on_error = on_error
        self._last_send = None
        self._first = None
        self._first_size = None  # len(F) once F was released
        # Number of input batches up to and including the one F came from: the send resumes
        # after them, at _resume_position once F was converted here (None: not yet known).
        self._resume_after = 0
        self._resume_position = None
        self._first_found = False
        self._first_batch_size = None  # F's input batch, when it is the first
        self._first_plain = False  # F was a plain batch converted in one step
        self._size = 0
        # conversions the process's conversion cache answered, construction and sends together
        # (a list: the chunk generators count into it)
        self._reused = [0]

    @property
    def committed_state(self) -> CommittedState:
        """What construction found besides the input itself: with :meth:`from_state` another
        process rebuilds the same send over the same input bytes without converting the first
        batch again to size it."""
        return CommittedState(self._size, self._resume_after, self._first_found,
                              self.first_converted_size, self._first_batch_size)

    @classmethod
    def from_state(
        cls,
        records: Records,
        to_magic: int,
        first_offset: int,
        state: CommittedState,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        on_error: Callable[[RecordsError], None] | None = None,
    ) -> LazyDownConvertedRecords:
        """The object :attr:`committed_state` came from, over the same input ``records``, with
        the first converted batch released (its send converts that batch again first)."""
        self = cls.__new__(cls)
        self._setup(records, to_magic, first_offset, chunk_size, on_error)
        if state.size < 0 or state.resume_after < 0:
            raise ConfigurationError(f"invalid committed state {state!r}")
        self._size = state.size
        self._resume_after = state.resume_after
        self._first_found = state.first_found
        self._first_size = state.first_size
        if state.resume_after == 1:
            self._first_batch_size = state.first_batch_size
        return self

    @property
    def size_in_bytes(self) -> int:
        """The committed size S_pre: exactly the number of bytes the send writes."""
        return self._size

    @property
    def first_converted_size(self) -> int | None:
        """Size of the first converted batch F, or ``None`` when nothing converts."""
        if self._first is not None:
            return len(self._first[0])
        if self._last_send is not None:
            return self._last_send.first_converted_size
        return self._first_size

    def release_first_batch(self) -> None:
        """Drop the first converted batch F kept since construction (its memory); the send
        converts that input batch again when it starts. For servers that plan many partitions
        at once and want a waiting response to hold no converted bytes."""
        if self._first is not None:
            self._first_size = len(self._first[0])
            self._first = None

    @property
    def reused_conversions(self) -> int:
        """Conversions (a first batch, a chunk) the process's conversion cache answered so far,
        construction and sends together."""
        return self._reused[0]

    @property
    def send_error(self) -> RecordsError | None:
        """The error that ended the latest send's conversion early (zstd or corrupt data)."""
        return self._last_send.error if self._last_send is not None else None

    @property
    def stats(self) -> ConversionStats:
        """Conversion stats of the latest send so far (summed over the chunks it took,
        including the first converted batch); zero before any send."""
        return self._last_send.stats if self._last_send is not None else ZERO_STATS

    def _first_chunk(self) -> Chunk | None:
        # The first send takes ownership of F (so its memory goes once written); a second send
        # converts the same batch again.
        if self._first is not None:
            first, self._first = self._first, None
            return first
        self._resume_position = None
        if not self._first_found:
            return None
        if self._resume_after == 1:
            plain = _plain_first_batch(self.records, self.to_magic, self.first_offset, self._first_batch_size)
            if plain is not None:
                first, self._resume_position = plain
                self._first_plain = True
                return first
        batches = skip(iter(self.records.batches()), self._resume_after - 1)
        batch = next(batches, None)
        if batch is None:
            return None
        data, stats = _convert_batch(batch, self.to_magic, self.first_offset, self._reused)
        if not data:
            return None
        self._resume_position = batch.position + batch.size_in_bytes
        return data, stats

    def _later_chunks(self) -> tuple[Iterator[Chunk], PlainWindow | None]:
        """The chunks after F, and the window they come from when the kernel may write them
        straight to a socket (``None`` otherwise)."""
        batches = self.records.batches()
        if (self.to_magic < 2 and isinstance(batches, BatchIterator) and batches.untouched
                and (_impl.current.converts_runs or not batches.memory_backed)):
            window = PlainWindow(batches, self._resume_position, self.chunk_size, self.to_magic,
                                 self.first_offset, self._first_plain)
            return self._window_chunks(batches, window), (window if window.usable else None)
        return self._reference_chunks(batches), None

    def _window_chunks(self, batches: BatchIterator, shared: PlainWindow) -> Iterator[Chunk]:
        # A chunk at a time from a window of the input: one kernel call decides where the chunk
        # ends and converts it when it is all plain v2; any other chunk (every chunk without the
        # kernel) is grouped and converted by the reference policy, so chunks, bytes, stats and
        # errors are those of _reference_chunks. Nothing of a window is kept across a yield, so
        # a send waiting for a slow reader holds its converted chunk only. `shared.position` is
        # where the next chunk starts: the kernel's writes straight to a socket move it too.
        kernel = _impl.current.converts_runs
        window = shared.window
        source = batches.source
        end = batches.end
        max_decompressed = batches.max_decompressed_size
        position = batches.start
        reader = ReadAheadSource(source, end, window)
        # Where F's batch ends is known once F was converted (the send's first chunk, made
        # before this generator starts): no window is read just to skip the batches before it.
        if shared.position is None:
            shared.position = position_after(iter_batches(reader, position, end, max_decompressed), position,
                                              self._resume_after)
            if shared.position is None:
                return
        while shared.position < end:
            position = shared.position
            started = time.perf_counter_ns()
            window_bytes: bytes | memoryview | None = None
            if kernel:
                try:
                    window_bytes = reader.read(position, min(window, end - position))
                except TruncatedDataError:
                    pass  # the file got shorter: batch by batch below, as far as it goes
            if window_bytes is not None:
                out = bytearray()
                chunk = convert_plain_chunk(window_bytes, out, self.chunk_size, self.to_magic, self.first_offset)
                window_bytes = None
                if chunk is not None:  # uncompressed: converting costs about what reusing would
                    shared.position = position + chunk.end
                    shared.declined = False  # plain again: the kernel may write the next ones
                    # Each yield below waits for the reader: the window goes first (the next
                    # chunk starts past it), so a slow reader holds only the converted chunk.
                    reader.release()
                    if out:  # empty conversions are skipped and their stats dropped, as in Kafka
                        yield out, ConversionStats(chunk.converted, chunk.temporary, time.perf_counter_ns() - started)
                    continue
            guarded = GuardedBatches(iter_batches(reader, position, end, max_decompressed))
            group = next(chunk_groups(guarded, self.chunk_size, self.to_magic), None)
            read_error = guarded.error
            del guarded  # its generator holds a view of the window
            if group is None:
                if read_error is not None:
                    raise read_error
                return
            stop = group[-1].position + group[-1].size_in_bytes
            pieces: list[Chunk] = []
            failure: RecordsError | None = None
            try:
                pieces.extend(self._convert_group_cached(group))
            except RecordsError as exc:
                failure = exc
            del group  # its batches hold views of the window: a slow reader keeps neither
            reader.release()
            shared.busy = True  # its pieces go first: the kernel must not write past them
            for data, stats in pieces:
                if data:
                    yield data, stats
            shared.busy = False
            if failure is not None:
                raise failure
            if read_error is not None:
                raise read_error
            shared.position = stop

    def _reference_chunks(self, batches: Iterator[RecordBatch]) -> Iterator[Chunk]:
        # file-backed records: headers and chunk bytes come from windows of a chunk and a batch
        # header (a few reads per chunk instead of one per batch; memory stays one chunk)
        window = self.chunk_size + RECORD_BATCH_OVERHEAD
        guarded = GuardedBatches(skip(read_ahead(batches, window), self._resume_after))
        for group in chunk_groups(guarded, self.chunk_size, self.to_magic):
            for data, stats in self._convert_group_cached(group):
                if data:  # empty conversions are skipped and their stats dropped, as in Kafka
                    yield data, stats
        if guarded.error is not None:
            raise guarded.error

    def _convert_group_cached(self, group: list[Any]) -> Iterator[Chunk]:
        """:func:`_convert_group`, or the conversion of the same bytes kept by the process's
        conversion cache: a group holding a converted compressed batch is read once, converted
        from that copy and kept."""
        cache = conversion_cache
        first = group[0]
        start, stop = first.position, group[-1].position + group[-1].size_in_bytes
        source = getattr(first, "_source", None)
        max_decompressed = getattr(first, "max_decompressed_size", 0)
        key = None
        if (cache.fits(stop - start, 0)
                and any(b.compression_id and b.magic > self.to_magic for b in group)):
            key = cache.key(source, start, self.to_magic, self.first_offset, max_decompressed,
                            self.chunk_size)
        if key is None:
            yield from _convert_group(group, self.to_magic, self.first_offset)
            return
        started = time.perf_counter_ns()
        hit = cache.lookup(key, source, stop)
        if hit is not None:
            self._reused[0] += 1
            yield hit.data, replace(hit.stats, conversion_time_ns=time.perf_counter_ns() - started)
            return
        copies = _batches_of_copy(source, start, stop, max_decompressed)
        if copies is None or [(b.position, b.size_in_bytes) for b in copies[1]] != [
                (b.position, b.size_in_bytes) for b in group]:
            yield from _convert_group(group, self.to_magic, self.first_offset)
            return
        kept, batches = copies
        pieces: list[Chunk] = []
        try:
            for piece in _convert_group(batches, self.to_magic, self.first_offset):
                pieces.append(piece)
        except RecordsError:
            yield from pieces
            raise
        if len(pieces) == 1:  # kept before it is written, for the sends converting it now
            cache.store(key, kept, *pieces[0])
        yield from pieces

    def to_send(self) -> LazyDownConvertSend:
        """A :class:`~lazyconv._send.Send` of exactly ``size_in_bytes`` bytes."""
        first = self._first_chunk()
        chunks, window = self._later_chunks()
        send = LazyDownConvertSend(self._size, first, chunks, on_error=self.on_error, window=window)
        self._last_send = send
        return send

    def __repr__(self) -> str:
        return (
            f"LazyDownConvertedRecords(to_magic={self.to_magic}, first_offset={self.first_offset}, "
            f"size_in_bytes={self._size}, chunk_size={self.chunk_size})"
        )


