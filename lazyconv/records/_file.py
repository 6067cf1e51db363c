"""Records in a log segment file, read with positioned reads (never the whole file)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import chain
from typing import BinaryIO

from lazyconv._send import FileRegionSend
from lazyconv.errors import ConfigurationError, TruncatedDataError
from lazyconv.records._compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from lazyconv.records._entries import BatchIterator
from lazyconv.records._memory import check_max_decompressed_size, check_slice
from lazyconv.records._types import Record, RecordBatch

__all__ = ["FileRecords"]


class _FileSource:
    """Reads exact byte ranges of a file descriptor with ``os.pread``; counts bytes read.

    ``root`` is the FileRecords that opened the descriptor: once it is closed the descriptor
    number may belong to another file, so every read checks it first.
    """

    __slots__ = ("fd", "bytes_read", "root")

    def __init__(self, fd: int, root: FileRecords) -> None:
        self.fd = fd
        self.bytes_read = 0
        self.root = root

    @property
    def cache_key(self) -> tuple[int, int]:
        """The file (device, inode), for the conversion cache (which compares the bytes it
        reuses)."""
        self.root._check_open()
        st = os.fstat(self.fd)
        return (st.st_dev, st.st_ino)

    def lend_fd(self) -> int:
        """The descriptor, for one read by the compiled kernel (:meth:`return_fd` after it)."""
        self.root._check_open()
        return self.fd

    def return_fd(self) -> None:
        """The kernel's read is done (the descriptor stays open with the records)."""

    def read(self, position: int, size: int) -> bytes:
        self.root._check_open()
        data = os.pread(self.fd, size, position)
        if len(data) < size:
            # pread may return short reads; only a true end of file is an error
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(self.fd, size - got, position + got)
                if not more:
                    raise TruncatedDataError(
                        f"file ends after {got} of the {size} bytes expected here", position + got
                    )
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        self.bytes_read += size
        return data


# The largest file offset (an off_t: what os.pread and sendfile take); past it they raise
# OverflowError or EINVAL instead of reading.
_MAX_FILE_OFFSET = (1 << 63) - 1


def _range_error(start: object, end: object) -> ConfigurationError:
    return ConfigurationError(f"file records need 0 <= start <= end, got start={start!r:.40}, end={end!r:.40}")


class FileRecords:
    """The records of a file region ``[start, end)``, typically a log segment or a slice of one.

    ``batches()`` reads each entry's header (at most 61 bytes) with ``os.pread``; a batch's
    bytes are read only when it is iterated, validated or its :meth:`buffer` is requested.
    Batch positions and error positions are file positions.

    Construct with a path (the file is opened and owned: :meth:`close` closes it) or an open
    binary file / file descriptor (not closed by :meth:`close`). Also a context manager.
    """

    def __init__(
        self,
        path_or_file: str | os.PathLike[str] | BinaryIO | int,
        start: int = 0,
        end: int | None = None,
        *,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        _owner: FileRecords | None = None,
    ) -> None:
        self._file: BinaryIO | None = None
        self._owns = False
        self._closed = False
        # checked before a path is opened, so that a refused argument leaves no file open
        if not isinstance(start, int) or not isinstance(end, int | None) or start < 0 or (
                end is not None and end < start):
            raise _range_error(start, end)
        if start > _MAX_FILE_OFFSET:
            raise ConfigurationError(f"file records start must be at most 2**63 - 1 (the largest file "
                                     f"offset), got start={start!r:.40}")
        check_max_decompressed_size(max_decompressed_size)
        if isinstance(path_or_file, int):
            if not 0 <= path_or_file < 1 << 31:
                raise ConfigurationError(f"a file descriptor is an int from 0 to 2**31 - 1, got {path_or_file}")
            fd = path_or_file
        elif isinstance(path_or_file, (str, os.PathLike)):
            self._file = open(path_or_file, "rb")  # noqa: SIM115 - closed by close()
            self._owns = True
            fd = self._file.fileno()
        elif callable(getattr(path_or_file, "fileno", None)):
            self._file = path_or_file
            fd = path_or_file.fileno()
        else:
            raise ConfigurationError(
                f"FileRecords needs a path, an open binary file or a file descriptor, got {type(path_or_file).__name__}")
        self._fd = fd
        self._owner = _owner  # keeps the owning FileRecords (and its open file) alive for slices
        try:
            file_size = os.fstat(fd).st_size
            if end is None and start > file_size:
                raise _range_error(start, file_size)
        except (OSError, ConfigurationError):
            self.close()
            raise
        self.start = start
        self.end = min(file_size if end is None else end, file_size)
        if self.end < self.start:
            self.end = self.start
        self.max_decompressed_size = max_decompressed_size
        self._source = _FileSource(fd, _owner or self)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> FileRecords:
        """Open a log segment file (closed by :meth:`close` or the ``with`` block)."""
        if not isinstance(path, (str, os.PathLike)):  # an int would be taken as a descriptor
            raise ConfigurationError(f"FileRecords.open needs a path, got {type(path).__name__}")
        return cls(path, max_decompressed_size=max_decompressed_size)

    @property
    def fileno(self) -> int:
        return self._fd

    @property
    def size_in_bytes(self) -> int:
        return self.end - self.start

    @property
    def bytes_read(self) -> int:
        """Bytes read from the file by this object so far (headers and loaded batches)."""
        return self._source.bytes_read

    def batches(self) -> Iterator[RecordBatch]:
        """Complete batches in order; a trailing partial batch is skipped silently."""
        return BatchIterator(self._source, self.start, self.end, self.max_decompressed_size)

    def __iter__(self) -> Iterator[RecordBatch]:
        return self.batches()

    def records(self) -> Iterator[Record]:
        """Every record of every batch, in order (loads one batch at a time)."""
        return chain.from_iterable(self.batches())  # no generator frame per record

    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position`` relative to :attr:`start`, all within the records'
        region ``[start, end)`` (bytes the file has past :attr:`end` are never returned).

        Raises :class:`~lazyconv.errors.ConfigurationError` for a position or size that is not
        an int >= 0 or that runs past the largest file offset (2**63 - 1), and
        :class:`~lazyconv.errors.TruncatedDataError` when the records (or the file, cut since)
        end first."""
        check_slice(position, size)
        begin = self.start + position
        if begin > _MAX_FILE_OFFSET:
            raise ConfigurationError(f"FileRecords.read position {position!r:.40} is past the largest "
                                     f"file offset (2**63 - 1)")
        if begin + size > _MAX_FILE_OFFSET:
            raise ConfigurationError(f"FileRecords.read size {size!r:.40} at position {position} runs past "
                                     f"the largest file offset (2**63 - 1)")
        if begin > self.end:
            raise TruncatedDataError(f"FileRecords.read position {position} is past the records' end "
                                     f"({self.size_in_bytes} bytes)", self.end)
        if begin + size > self.end:
            raise TruncatedDataError(f"the records end after {self.end - begin} of the {size} bytes asked "
                                     f"for at position {position}", self.end)
        return self._read_at(begin, size)

    def _read_at(self, begin: int, size: int) -> bytes:
        """``size`` bytes at file position ``begin``, a range of the records already checked."""
        self._source.root._check_open()
        file_size = os.fstat(self._fd).st_size
        if begin + size > file_size:  # cut since it was opened: refused before a buffer is allocated
            got = max(0, file_size - begin)
            raise TruncatedDataError(f"file ends after {got} of the {size} bytes expected here",
                                     begin + got)
        return self._source.read(begin, size)

    def slice(self, position: int, size: int) -> FileRecords:
        """The region ``[start + position, start + position + size)`` clamped to :attr:`end`
        (Kafka's ``FileRecords.slice``); shares the file descriptor."""
        self._source.root._check_open()
        check_slice(position, size)
        if position > self.size_in_bytes:
            raise ConfigurationError(f"slice position {position} is past the end ({self.size_in_bytes})")
        begin = self.start + position
        return FileRecords(
            self._fd,
            begin,
            min(self.end, begin + size),
            max_decompressed_size=self.max_decompressed_size,
            _owner=self._owner or self,
        )

    def to_send(self) -> FileRegionSend:
        """A zero-copy capable send of exactly this region."""
        self._source.root._check_open()
        return FileRegionSend(self._fd, self.start, self.size_in_bytes)

    def close(self) -> None:
        """Close the file if this object opened it."""
        if self._owns and self._file is not None:
            self._file.close()
            self._file = None
            self._owns = False
            self._closed = True

    def _check_open(self) -> None:
        if self._closed or (self._file is not None and self._file.closed):
            raise ConfigurationError("FileRecords is closed (its file descriptor may now belong to another file)")

    def __enter__(self) -> FileRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRecords(fd={self._fd}, start={self.start}, end={self.end})"
