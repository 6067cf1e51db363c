"""Positioned reads from a segment or index file, local or at an fsspec URL.

One reader for every Spark module: local files use ``os.pread`` on one descriptor (no shared file
position, so nothing to seek), URLs go through fsspec with a seek per read.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SegmentReader"]


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
            self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
            self._fd = self._file.fileno()
            self.size = os.fstat(self._fd).st_size

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
