"""Positioned reads from a segment or index file, local or at an fsspec URL.

One reader for every Spark module: local files use ``os.pread`` on one descriptor (no shared file
position, so nothing to seek), URLs go through fsspec with a seek per read.
"""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["NotARegularFileError", "SegmentReader", "open_regular_file", "read_regular_file"]

_FILE_TYPES = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
               stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


class NotARegularFileError(OSError):
    """A segment or index path names a directory, FIFO, socket or device (never read: a FIFO
    would block the reader for ever)."""


def open_regular_file(path: str) -> int:
    """A read-only descriptor of the regular file at ``path``; raises
    :class:`NotARegularFileError` for anything else, without blocking (the file is opened with
    ``O_NONBLOCK``, so a FIFO without a writer does not hang the open, and then refused), and
    ``OSError`` as ``open`` does (missing, a symlink loop, no permission)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")
            raise NotARegularFileError(f"{kind}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str) -> bytes:
    """The whole regular file at ``path`` (see :func:`open_regular_file` for what is refused)."""
    with os.fdopen(open_regular_file(path), "rb") as f:
        return f.read()


class SegmentReader:
    """Positioned reads from a local file or an fsspec URL; ``size`` is the file's length."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        if "://" in path:
            import fsspec

            self._file: Any = fsspec.open(path, "rb").open()
            self._file.seek(0, os.SEEK_END)
            self.size: int = self._file.tell()
        else:
            fd = open_regular_file(path)
            self._file = os.fdopen(fd, "rb")
            self._fd = fd
            self.size = os.fstat(fd).st_size

    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position`` (fewer at the end of the file)."""
        if self._fd is not None:
            return os.pread(self._fd, size, position)
        self._file.seek(position)
        return bytes(self._file.read(size))

    def read_all(self) -> bytes:
        return self.read(0, self.size)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
