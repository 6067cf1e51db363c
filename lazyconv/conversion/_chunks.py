"""KIP-283's chunk plan and overflow padding: what a lazy send converts at once, and what it
writes for the bytes it owes once the converted data has run out.

A chunk is whole input batches: the next batch unconditionally, then following batches while
their sizes total at most ``chunk_size`` (16 KiB – 1 MiB, Kafka's 128 KiB by default); below
magic 2 a chunk also ends before a zstd batch. Padding is written in steps of at most 131 072
bytes, each ``int64 -1 ‖ int32 max(R + 1, 61) ‖ zeros`` for the R bytes still owed
(docs/guide/down-conversion.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lazyconv.conversion._down import ConversionStats, is_zstd_below_v2
from lazyconv.errors import ConfigurationError, RecordsError, UnsupportedCompressionError
from lazyconv.records._format import LOG_HEADER, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from lazyconv.records._types import RecordBatch

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MIN_CHUNK_SIZE",
    "MAX_CHUNK_SIZE",
    "OVERFLOW_STEP_SIZE",
    "Chunk",
    "GuardedBatches",
    "chunk_groups",
    "overflow_padding_step",
    "overflow_padding",
    "position_after",
    "skip",
]

DEFAULT_CHUNK_SIZE = 128 * 1024  # Kafka's LazyDownConversionRecords.MAX_READ_SIZE
MIN_CHUNK_SIZE = 16 * 1024
MAX_CHUNK_SIZE = 1024 * 1024
# Each overflow padding step is at most this long, whatever the chunk size (Kafka sizes the
# padding buffer with MAX_READ_SIZE; keeping the constant keeps the padding bytes Kafka's).
OVERFLOW_STEP_SIZE = 128 * 1024
# The size field of a padding header is at least the v2 batch overhead, so readers see a
# plausible (never complete) entry, and at most the largest int32 (a send of more than 2 GiB,
# which Kafka's int sizes never reach, would owe R + 1 > 2**31 - 1 there).
_MIN_OVERFLOW_LENGTH = RECORD_BATCH_OVERHEAD
_MAX_OVERFLOW_LENGTH = (1 << 31) - 1
_LOG_OVERHEAD = LOG_OVERHEAD
_OVERFLOW_HEADER = LOG_HEADER  # an entry header: offset -1, size

# A converted chunk: its bytes and what converting it cost.
Chunk = tuple[bytes | bytearray, ConversionStats]


def overflow_padding_step(remaining: int) -> bytes:
    """The bytes of one overflow padding step when ``remaining`` (R ≥ 1) bytes are still owed.

    ``int64 -1 ‖ int32 max(R + 1, 61)`` (at most 2**31 - 1) then zeros,
    ``min(max(12, min(R + 1, 131072)), R)`` bytes in all: a prefix of the header when R < 12, at
    most 131 072 bytes.
    """
    if remaining < 1:
        raise ConfigurationError(f"padding needs at least 1 remaining byte, got {remaining}")
    buffer_len = max(_LOG_OVERHEAD, min(remaining + 1, OVERFLOW_STEP_SIZE))
    header = _OVERFLOW_HEADER.pack(-1, max(min(remaining + 1, _MAX_OVERFLOW_LENGTH), _MIN_OVERFLOW_LENGTH))
    step_len = min(buffer_len, remaining)
    if step_len <= _LOG_OVERHEAD:
        return header[:step_len]
    return header + bytes(step_len - _LOG_OVERHEAD)


def overflow_padding(remaining: int) -> bytes:
    """All the padding a send writes for ``remaining`` bytes: consecutive steps (tests, tools)."""
    if not isinstance(remaining, int):
        raise ConfigurationError(f"padding needs a number of remaining bytes, got {remaining!r:.40}")
    out = bytearray()
    while remaining > 0:
        step = overflow_padding_step(remaining)
        out += step
        remaining -= len(step)
    return bytes(out)


def chunk_groups(
    batches: Iterator[RecordBatch], chunk_size: int, to_magic: int
) -> Iterator[list[RecordBatch]]:
    """Group ``batches`` into chunks of whole batches.

    A chunk takes the next batch unconditionally, then following batches while the total of
    their ``size_in_bytes`` stays ``<= chunk_size``. With a target below magic 2 a chunk also
    ends before a zstd batch, so the good batches before it are converted on their own; a chunk
    that would *start* with a zstd batch raises
    :class:`~lazyconv.errors.UnsupportedCompressionError` instead (the send pads from there).
    """
    pending: RecordBatch | None = None
    while True:
        first = pending if pending is not None else next(batches, None)
        pending = None
        if first is None:
            return
        if is_zstd_below_v2(first, to_magic):
            raise UnsupportedCompressionError(
                "Down-conversion of zstandard-compressed batches is not supported: "
                f"batch with last offset {first.last_offset} is zstd",
                first.position,
            )
        group = [first]
        taken = first.size_in_bytes
        for batch in batches:
            if taken + batch.size_in_bytes > chunk_size or is_zstd_below_v2(batch, to_magic):
                pending = batch
                break
            group.append(batch)
            taken += batch.size_in_bytes
        yield group



class GuardedBatches:
    """Iterates batches but stops at a read error instead of raising it, keeping the error in
    ``error``: the batches already taken into a chunk are converted before it is raised."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches
        self.error: RecordsError | None = None

    def __iter__(self) -> GuardedBatches:
        return self

    def __next__(self) -> Any:
        if self.error is not None:
            raise StopIteration
        try:
            return next(self._batches)
        except RecordsError as exc:
            self.error = exc
            raise StopIteration from None



def position_after(batches: Iterator[RecordBatch], start: int, count: int) -> int | None:
    """The position after the first ``count`` of ``batches`` (``start`` for none); ``None`` if
    there are fewer."""
    # A function of its own so that no skipped batch (a view of a read-ahead window) outlives
    # the skip: a generator's local would keep the window alive while a slow reader waits.
    position = start
    for _ in range(count):
        batch = next(batches, None)
        if batch is None:
            return None
        position = batch.position + batch.size_in_bytes
    return position



def skip(batches: Iterator[RecordBatch], count: int) -> Iterator[RecordBatch]:
    for _ in range(count):
        if next(batches, None) is None:
            break
    return batches


