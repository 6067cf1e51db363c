"""The compression contract as the record codecs use it.

``lazyconv.records.compression`` is built in a parallel branch; until it is merged this module
provides the codec enum and refuses every codec except ``NONE`` with a clear error, so the
uncompressed read/write path works on its own.
"""

from __future__ import annotations

try:
    from lazyconv.records.compression import (
        DEFAULT_MAX_DECOMPRESSED_SIZE,
        Compression,
        compress,
        decompress,
    )
except ModuleNotFoundError:  # pragma: no cover - removed once compression is merged
    from enum import IntEnum

    from lazyconv.errors import UnknownCompressionError, UnsupportedCompressionError

    DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

    class Compression(IntEnum):  # type: ignore[no-redef]
        NONE = 0
        GZIP = 1
        SNAPPY = 2
        LZ4 = 3
        ZSTD = 4

    def _check(codec: int) -> None:
        if codec not in (0, 1, 2, 3, 4):
            raise UnknownCompressionError(f"unknown compression codec id {codec}")
        raise UnsupportedCompressionError(
            f"codec {Compression(codec).name.lower()} needs lazyconv.records.compression"
        )

    def compress(codec: int, data: bytes, magic: int, level: int | None = None) -> bytes:  # type: ignore[misc]
        if codec == 0:
            return bytes(data)
        _check(codec)
        raise AssertionError("unreachable")

    def decompress(  # type: ignore[misc]
        codec: int, data: bytes, magic: int, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> bytes:
        if codec == 0:
            return bytes(data)
        _check(codec)
        raise AssertionError("unreachable")

from lazyconv.errors import CompressionError  # noqa: E402

__all__ = ["DEFAULT_MAX_DECOMPRESSED_SIZE", "Compression", "compress", "decompress", "decompress_at"]


def decompress_at(codec: int, data: bytes | memoryview, magic: int, max_size: int, position: int) -> bytes:
    """:func:`decompress` whose errors carry byte positions in the records, not in ``data``.

    ``position`` is where ``data`` starts in the records; an error position from the codec
    (relative to the compressed stream) is shifted by it.
    """
    try:
        return decompress(codec, data, magic, max_size=max_size)
    except CompressionError as exc:
        raise type(exc)(exc.message, position + (exc.position or 0)) from exc
