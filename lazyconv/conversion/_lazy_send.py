"""The send of a lazy down-conversion (KIP-283): converts a chunk, writes it, repeats, then pads
to the committed size; on a socket, plain chunks of a file go through the kernel in one call
each (``send_plain_chunk``: read, convert and write, GIL released).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from lazyconv._send import Send, write_to_channel
from lazyconv.conversion._chunks import Chunk, overflow_padding_step
from lazyconv.conversion._down import ConversionStats
from lazyconv.errors import RecordsError, UnsupportedCompressionError
from lazyconv.records import _impl
from lazyconv.records._format import RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from lazyconv._send import Channel

__all__ = ["LazyDownConvertSend", "PlainWindow"]

log = logging.getLogger(__name__)


class PlainWindow:
    """Where a send's window path stands, shared by its chunk generator and the kernel's writes
    straight to a socket (:meth:`LazyDownConvertSend.write_to`): ``position`` is where the next
    chunk starts (``None`` until the generator has stepped over F's batches)."""

    __slots__ = ("position", "end", "source", "window", "chunk_size", "to_magic", "first_offset",
                 "usable", "declined", "busy")

    def __init__(self, batches: Any, position: int | None, chunk_size: int, to_magic: int,
                 first_offset: int, first_plain: bool) -> None:
        """``batches``: the records' untouched ``BatchIterator``; ``position``: where the chunk
        after F starts, if known; ``first_plain``: F was a plain batch converted in one step."""
        self.position = position
        self.end = batches.end
        self.source: Any = batches.source  # used only when it lends its descriptor (usable)
        self.window = chunk_size + RECORD_BATCH_OVERHEAD
        self.chunk_size = chunk_size
        self.to_magic = to_magic
        self.first_offset = first_offset
        # a file whose descriptor the source lends (FileRecords, serve's segments)
        self.usable = (_impl.current.converts_runs and not batches.memory_backed
                       and hasattr(batches.source, "lend_fd") and 0 <= first_offset < 1 << 63)
        # the kernel declined the chunk at `position` (or F was not plain): the generator takes
        # the chunks until one is plain again
        self.declined = not first_plain
        self.busy = False  # the generator is yielding the pieces of a chunk it converted itself

    def step(self, sock_fd: int, remaining: int) -> tuple[Any, ...] | None:
        """The kernel's ``send_plain_chunk`` for the chunk at ``position`` (moved past it), or
        None when it declined (nothing was written)."""
        position = self.position
        assert position is not None
        length = min(self.window, self.end - position)
        source = self.source
        fd = source.lend_fd()
        try:
            result = _impl.send_plain_chunk(fd, position, length, sock_fd, remaining, self.chunk_size,
                                            self.to_magic, self.first_offset)
        finally:
            source.return_fd()
        if result[0] != _impl.SEND_CONVERTED:
            self.declined = True
            return None
        source.bytes_read += length
        self.position = position + result[1]
        return result



class LazyDownConvertSend(Send):
    """The send of a :class:`LazyDownConvertedRecords`: converts a chunk, writes it, repeats.

    ``write_to`` resumes exactly after partial writes. It writes the first converted batch, then
    each later chunk's conversion, each limited to the bytes still owed (the cut), then overflow
    padding until ``size`` bytes have gone out. ``stats`` sums the conversion stats of every
    chunk written; ``chunks`` counts them; ``padding_bytes`` counts padding; ``error`` is the
    error that ended conversion early, if any: a zstd batch, or corrupt data met after the size
    was committed (``on_error`` is called with it once).
    """

    def __init__(
        self,
        size: int,
        first: Chunk | None,
        chunks: Iterator[Chunk],
        on_error: Callable[[RecordsError], None] | None = None,
        window: PlainWindow | None = None,
    ) -> None:
        self._size = size
        self._window = window
        self._on_error = on_error
        self._written = 0
        self._first = first
        self._chunks: Iterator[Chunk] | None = chunks
        self._piece: memoryview | None = None
        self._piece_pos = 0
        self.first_converted_size: int | None = len(first[0]) if first is not None else None
        # the chunks' stats, summed as plain numbers (a ConversionStats per chunk costs more)
        self._records_converted = 0
        self._temporary_bytes = 0
        self._conversion_ns = 0
        self.chunks = 0
        self.converted_bytes_written = 0
        self.padding_bytes = 0
        # Length of each piece written, in order: converted chunks (the last one possibly cut)
        # and padding steps; Kafka writes each with one writeTo call.
        self.piece_sizes: list[int] = []
        self.truncated = False
        self.error: RecordsError | None = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def written(self) -> int:
        return self._written

    @property
    def stats(self) -> ConversionStats:
        """The conversion stats of every chunk written so far, summed."""
        return ConversionStats(self._records_converted, self._temporary_bytes, self._conversion_ns)

    def _next_chunk(self) -> Chunk | None:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if self._chunks is None:
            return None
        try:
            return next(self._chunks)
        except StopIteration:
            self._chunks = None
            return None
        except RecordsError as exc:
            # A zstd batch after the first chunk: the committed size is padded from here on;
            # the consumer refetches from the zstd batch and then gets error 76. Corrupt data
            # the same way: the consumer refetches from it and the server answers its error.
            if isinstance(exc, UnsupportedCompressionError):
                log.warning("lazy down-conversion stopped, padding the rest: %s", exc)
            else:
                log.error("lazy down-conversion met corrupt data, padding the rest: %s", exc)
            self.error = exc
            self._chunks = None
            if self._on_error is not None:
                self._on_error(exc)
            return None

    def _next_piece(self, remaining: int) -> memoryview:
        chunk = self._next_chunk()
        if chunk is not None:
            data, stats = chunk
            self._records_converted += stats.records_converted
            self._temporary_bytes += stats.temporary_memory_bytes
            self._conversion_ns += stats.conversion_time_ns
            self.chunks += 1
            if len(data) > remaining:
                self.truncated = True
                self._chunks = None  # nothing after a cut is ever converted
            piece = memoryview(data)[:remaining]
            self.converted_bytes_written += len(piece)
            self.piece_sizes.append(len(piece))
            return piece
        step = overflow_padding_step(remaining)
        self.padding_bytes += len(step)
        self.piece_sizes.append(len(step))
        return memoryview(step)

    def write_to(self, channel: Channel) -> int:
        total = 0
        while self._written < self._size:
            if self._piece is None or self._piece_pos >= len(self._piece):
                window = self._window
                if (window is not None and type(channel) is socket.socket and self._first is None
                        and self._chunks is not None and not window.declined and not window.busy):
                    written, full = self._write_plain(window, channel)
                    total += written
                    if full or self._written >= self._size:
                        break
                self._piece = self._next_piece(self._size - self._written)
                self._piece_pos = 0
            n = write_to_channel(channel, self._piece[self._piece_pos :])
            if n <= 0:
                break
            self._piece_pos += n
            self._written += n
            total += n
        if self._written >= self._size:
            self._piece = None  # release the last chunk as soon as it is out
            self._chunks = None
        return total

    def _write_plain(self, window: PlainWindow, sock: socket.socket) -> tuple[int, bool]:
        """Chunks read, converted and written by the kernel in one call each, while they are
        plain (the generator takes the chunk it declines): the bytes written, and whether the
        socket is full (the rest of the chunk it took in part is the current piece)."""
        total = 0
        fileno = sock.fileno()
        while (self._written < self._size and self._chunks is not None and not window.declined
               and window.position is not None and window.position < window.end):
            remaining = self._size - self._written
            result = window.step(fileno, remaining)
            if result is None:
                break
            _, _, converted, temporary, out_len, sent, rest, elapsed_ns, failure = result
            if not out_len:
                continue  # converted to nothing: no piece and no stats, as in Kafka
            piece_len = min(out_len, remaining)
            self._records_converted += converted
            self._temporary_bytes += temporary
            self._conversion_ns += elapsed_ns
            self.chunks += 1
            if out_len > remaining:
                self.truncated = True
                self._chunks = None  # nothing after a cut is ever converted
            self.converted_bytes_written += piece_len
            self.piece_sizes.append(piece_len)
            self._written += sent
            total += sent
            if failure:
                raise OSError(failure, os.strerror(failure))
            if rest is not None:
                self._piece = memoryview(rest)
                self._piece_pos = 0
                return total, True
        return total, False

    def __repr__(self) -> str:
        return (
            f"LazyDownConvertSend(size={self._size}, written={self._written}, chunks={self.chunks}, "
            f"padding_bytes={self.padding_bytes})"
        )
