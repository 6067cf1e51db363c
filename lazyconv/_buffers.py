"""The one definition of a bytes-like argument, for every layer that takes one: the records
(records, keys, values, header values) and the partitioner (the keys it hashes, the sizes it
counts) alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyconv.errors import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["byte_view", "byte_size"]


def byte_view(buffer: Buffer, what: str = "records") -> memoryview:
    """``buffer`` as a flat view of unsigned bytes (format ``"B"``), which every implementation
    reads alike: any C-contiguous buffer (bytes, bytearray, mmap, array, a ctypes or numpy
    array, a view of any of these) is accepted as its bytes; anything else (a released view
    too) raises :class:`~lazyconv.errors.ConfigurationError` naming the argument, ``what``."""
    try:
        view = memoryview(buffer)
        if not view.c_contiguous:
            raise TypeError("a strided (non-contiguous) buffer")
        if view.format != "B" or view.ndim != 1:  # ctypes' "<B", "c", "b", wider items, ndim > 1
            view = view.cast("B")
    except (TypeError, ValueError) as exc:  # not a buffer, not C-contiguous, or released
        raise ConfigurationError(
            f"{what} must be bytes-like (a C-contiguous buffer), got {type(buffer).__name__}: {exc}"
        ) from None
    return view


def byte_size(buffer: Buffer, what: str) -> int:
    """The number of bytes :func:`byte_view` would read from ``buffer`` (refused alike), without
    a view for ``bytes`` (always one flat run of unsigned bytes): a size on a per-record path."""
    if type(buffer) is bytes:
        return len(buffer)
    return byte_view(buffer, what).nbytes
