"""The Send contract: resumable, exactly-sized writes of bytes to a channel.

A :class:`Send` knows its total ``size`` before it writes anything and writes exactly that many
bytes over one or more :meth:`Send.write_to` calls (Kafka's ``Send.writeTo``). Each call writes
what the channel accepts and returns the number of bytes written in that call; a call that
returns 0 while the send is not ``completed`` means the channel would block (a non-blocking
socket with a full buffer): call again when it is writable. Partial writes always resume at the
exact next byte.

Channels: a ``socket.socket`` (blocking or not), a file object, or any object with ``send(b)`` or
``write(b)`` returning the number of bytes taken (``None`` from a raw non-blocking file means 0).

Implementations here: :class:`BytesSend` (a buffer), :class:`FileRegionSend` (a region of a file,
zero-copy with ``os.sendfile`` when the channel is a socket and the platform has it) and
:class:`SequenceSend` (sends one after another, pulled lazily). ``LazyDownConvertedRecords`` and
the FetchResponse encoder build on these.
"""

from __future__ import annotations

import abc
import os
import selectors
import socket
from collections.abc import Iterable, Iterator
from typing import BinaryIO, Protocol, Union, cast, runtime_checkable

from lazyconv.errors import ConfigurationError, TruncatedDataError

__all__ = [
    "Channel",
    "SendingChannel",
    "WritableChannel",
    "Send",
    "BytesSend",
    "FileRegionSend",
    "SequenceSend",
    "write_to_channel",
    "drain",
]

# Largest piece read from a file per write when no zero-copy path exists: bounds memory.
FILE_READ_PIECE = 64 * 1024

_HAS_SENDFILE = hasattr(os, "sendfile")

# drain() gives up on a non-socket channel that accepts nothing this many calls in a row.
MAX_IDLE_CALLS = 100_000


def write_to_channel(channel: Channel, data: memoryview | bytes) -> int:
    """Write as much of ``data`` as ``channel`` accepts now and return how many bytes it took.

    Returns 0 when a non-blocking channel would block. A channel with a ``send`` method is
    written with it (a socket), any other with ``write``: looked up on the object, not by a
    runtime ``Protocol`` check (which costs hundreds of times more, on every write).
    """
    try:
        if type(channel) is socket.socket:
            return channel.send(data)
        send = getattr(channel, "send", None)
        if send is not None:
            written: int | None = send(data)
        else:
            written = channel.write(data)  # type: ignore[union-attr]  # no send: a WritableChannel
    except (BlockingIOError, InterruptedError):
        return 0
    if written is None:  # raw non-blocking file objects return None when they would block
        return 0
    return int(written)


@runtime_checkable
class SendingChannel(Protocol):
    """A socket-like channel: ``send`` returns how many bytes it took (raises BlockingIOError
    or returns 0 when a non-blocking channel would block)."""

    def send(self, data: bytes | memoryview, /) -> int:
        """Take as much of ``data`` as possible now."""
        ...


@runtime_checkable
class WritableChannel(Protocol):
    """A file-like channel: ``write`` returns how many bytes it took (``None`` when a raw
    non-blocking file would block)."""

    def write(self, data: bytes | memoryview, /) -> int | None:
        """Take as much of ``data`` as possible now."""
        ...


Channel = Union[SendingChannel, WritableChannel]  # noqa: UP007 (a runtime alias on 3.10)
"""Where a :class:`~lazyconv._send.Send` writes: a socket, or any object with ``send`` or
``write`` (a file, a ``BytesIO``, a test double accepting a few bytes at a time)."""


class Send(abc.ABC):
    """Bytes of a known total ``size``, written to a channel over resumable calls."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Total number of bytes this send writes, known before the first write."""

    @property
    @abc.abstractmethod
    def written(self) -> int:
        """Bytes written so far."""

    @property
    def remaining(self) -> int:
        """Bytes still to write."""
        return self.size - self.written

    @property
    def completed(self) -> bool:
        """True once every byte has been written."""
        return self.written >= self.size

    @abc.abstractmethod
    def write_to(self, channel: Channel) -> int:
        """Write the next bytes to ``channel``; return how many were written by this call."""

    #: how long a writer waits for :meth:`source_fileno` to become readable before giving up
    source_timeout: float = 30.0

    def source_fileno(self) -> int | None:
        """The file descriptor to wait on, readable, when the last :meth:`write_to` stopped
        because the bytes it passes on had not arrived yet (a relay's upstream socket) rather
        than because the channel was full; ``None`` (every send here) when its bytes are at
        hand and only the channel can make it wait."""
        return None

    def to_bytes(self) -> bytes:
        """Drive the send to completion into memory (tests and small payloads only)."""
        sink = _ByteSink()
        drain(self, sink)
        return bytes(sink.buffer)


class _ByteSink:
    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data: memoryview | bytes) -> int:
        self.buffer += data
        return len(data)


class BytesSend(Send):
    """A send of an in-memory buffer (kept as a memoryview, never copied)."""

    __slots__ = ("_view", "_written")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        self._written = 0

    @property
    def size(self) -> int:
        return len(self._view)

    @property
    def written(self) -> int:
        return self._written

    def write_to(self, channel: Channel) -> int:
        total = 0
        view = self._view
        while self._written < len(view):
            n = write_to_channel(channel, view[self._written :])
            if n <= 0:
                break
            self._written += n
            total += n
        return total

    def __repr__(self) -> str:
        return f"BytesSend(size={self.size}, written={self._written})"


class FileRegionSend(Send):
    """A send of ``size`` bytes of a file starting at ``position``.

    With a socket channel and ``os.sendfile`` available the bytes go from the page cache to the
    socket without passing through Python (zero-copy); otherwise they are read with ``os.pread``
    in pieces of at most 64 KiB. ``file`` is a path, a file descriptor or an object with
    ``fileno()``; a path is opened on first write and closed when the send completes.

    If the file turns out shorter than the region (truncated while being sent), the send raises
    :class:`~lazyconv.errors.TruncatedDataError` rather than writing fewer bytes than it promised.
    """

    def __init__(
        self,
        file: str | os.PathLike[str] | int | BinaryIO,
        position: int,
        size: int,
        *,
        use_sendfile: bool = True,
    ) -> None:
        if position < 0 or size < 0:
            raise ConfigurationError(f"file region needs position >= 0 and size >= 0, got {position}, {size}")
        self._file = file
        self._position = position
        self._size = size
        self._written = 0
        self._fd: int | None = None
        self._owns_fd = False
        self._pending: memoryview | None = None  # bytes read but not yet accepted by the channel
        self.use_sendfile = use_sendfile
        self.zero_copy_bytes = 0  # bytes that went out through os.sendfile

    @property
    def size(self) -> int:
        return self._size

    @property
    def written(self) -> int:
        return self._written

    @property
    def position(self) -> int:
        return self._position

    def _fileno(self) -> int:
        if self._fd is None:
            f = self._file
            if isinstance(f, int):
                self._fd = f
            elif hasattr(f, "fileno"):
                self._fd = f.fileno()
            else:
                self._fd = os.open(os.fspath(f), os.O_RDONLY)
                self._owns_fd = True
        return self._fd

    def close(self) -> None:
        """Close the file descriptor if this send opened it."""
        if self._owns_fd and self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._owns_fd = False

    def write_to(self, channel: Channel) -> int:
        if self.completed:
            return 0
        fd = self._fileno()
        total = 0
        try:
            if (
                self.use_sendfile
                and _HAS_SENDFILE
                and self._pending is None
                and isinstance(channel, socket.socket)
            ):
                total = self._write_sendfile(fd, channel)
            else:
                total = self._write_copying(fd, channel)
        finally:
            if self.completed:
                self.close()
        return total

    def _write_sendfile(self, fd: int, channel: socket.socket) -> int:
        total = 0
        while self._written < self._size:
            offset = self._position + self._written
            try:
                n = os.sendfile(channel.fileno(), fd, offset, self._size - self._written)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                raise TruncatedDataError(
                    f"file ended before the region of {self._size} bytes starting at "
                    f"{self._position} was sent",
                    offset,
                )
            self._written += n
            self.zero_copy_bytes += n
            total += n
        return total

    def _write_copying(self, fd: int, channel: Channel) -> int:
        total = 0
        while self._written < self._size:
            if self._pending is None or len(self._pending) == 0:
                offset = self._position + self._written
                want = min(FILE_READ_PIECE, self._size - self._written)
                piece = os.pread(fd, want, offset)
                if not piece:
                    raise TruncatedDataError(
                        f"file ended before the region of {self._size} bytes starting at "
                        f"{self._position} was sent",
                        offset,
                    )
                self._pending = memoryview(piece)
            n = write_to_channel(channel, self._pending)
            if n <= 0:
                break
            self._pending = self._pending[n:]
            self._written += n
            total += n
        if self._pending is not None and len(self._pending) == 0:
            self._pending = None
        return total

    def __repr__(self) -> str:
        return f"FileRegionSend(position={self._position}, size={self._size}, written={self._written})"


class SequenceSend(Send):
    """Several sends written one after another.

    ``sends`` may be any iterable (a generator pulls each child only when its turn comes, so
    children can be built lazily); ``size`` must then be given, otherwise it is the sum of the
    children's sizes. A child that writes fewer bytes than its size claims is a bug, detected
    by the size check when the sequence runs out.
    """

    def __init__(self, sends: Iterable[Send], size: int | None = None) -> None:
        if size is None:
            sends = list(sends)
            size = sum(s.size for s in sends)
        self._size = size
        self._iter: Iterator[Send] = iter(sends)
        self._current: Send | None = None
        self._written = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def written(self) -> int:
        return self._written

    def write_to(self, channel: Channel) -> int:
        total = 0
        while self._written < self._size:
            if self._current is None:
                self._current = next(self._iter, None)
                if self._current is None:
                    raise self._ran_out_error()
            child = self._current
            n = 0 if child.completed else child.write_to(channel)
            self._written += n
            total += n
            if child.completed:
                # Released at once: memory stays bounded by the child being written.
                self._current = None
                self._on_child_done(child)
            elif n == 0:
                break  # the channel would block
        if self._written >= self._size:
            self._release_children()
        return total

    def _release_children(self) -> None:
        """Drop the iterator of children once all bytes are written: a generator whose frame
        refers back to this send (FetchResponseSend's) would otherwise keep both, and whatever
        the generator holds (a whole upstream response in the gateway), alive until Python's
        cyclic collector runs."""
        children, self._iter = self._iter, iter(())
        close = getattr(children, "close", None)
        if close is not None:
            close()

    def _on_child_done(self, child: Send) -> None:
        """Called once per child as soon as it has written all its bytes (subclass hook)."""

    def _ran_out_error(self) -> Exception:
        """The error raised when the children end before ``size`` bytes (subclass hook)."""
        return RuntimeError(
            f"sequence send ran out of children after {self._written} of {self._size} bytes"
        )

    def __repr__(self) -> str:
        return f"SequenceSend(size={self._size}, written={self._written})"


def drain(send: Send, channel: Channel, *, timeout: float | None = None) -> int:
    """Write ``send`` to ``channel`` until it completes; return the bytes written.

    For a non-blocking socket, waits for writability between calls (at most ``timeout``
    seconds per wait; ``None`` waits forever). For other channels a call that writes nothing
    is retried, which suits channels that accept a few bytes at a time.
    """
    total = 0
    idle_calls = 0
    selector: selectors.BaseSelector | None = None
    try:
        while not send.completed:
            n = send.write_to(channel)
            total += n
            idle_calls = 0 if n else idle_calls + 1
            if n == 0 and not send.completed and not isinstance(channel, socket.socket):
                if idle_calls >= MAX_IDLE_CALLS:
                    raise TimeoutError(f"channel accepted nothing in {MAX_IDLE_CALLS} calls")
            elif n == 0 and not send.completed:
                if selector is None:
                    selector = selectors.DefaultSelector()
                    selector.register(cast(socket.socket, channel), selectors.EVENT_WRITE)
                if not selector.select(timeout):
                    raise TimeoutError("channel stayed unwritable")
    finally:
        if selector is not None:
            selector.close()
    return total
