"""Typed contracts shared by the layers: what a record set and a channel must offer.

These are :class:`typing.Protocol` s, checked structurally: :class:`~lazyconv.MemoryRecords`,
:class:`~lazyconv.FileRecords` and :class:`~lazyconv.LazyDownConvertedRecords` satisfy them
without inheriting from them, and so can a user's own classes. The channels a Send writes to are
the Send contract's own (:mod:`lazyconv._send`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lazyconv._send import Send

if TYPE_CHECKING:
    from lazyconv.records._types import RecordBatch

__all__ = ["Records", "SendableRecords"]


@runtime_checkable
class SendableRecords(Protocol):
    """Records that know their exact size and can be written out as a :class:`~lazyconv._send.Send`
    (what a FetchResponse carries in a partition's ``records`` field)."""

    @property
    def size_in_bytes(self) -> int:
        """The exact number of bytes :meth:`to_send` writes."""
        ...

    def to_send(self) -> Send:
        """A fresh, resumable send of exactly :attr:`size_in_bytes` bytes."""
        ...


@runtime_checkable
class Records(SendableRecords, Protocol):
    """A record set that can also be read batch by batch (a log segment, a byte buffer)."""

    def batches(self) -> Iterator[RecordBatch]:
        """The complete batches in order (a trailing partial batch is not yielded)."""
        ...

    def slice(self, position: int, size: int) -> Records:
        """The records ``[position, position + size)``, clamped to the end."""
        ...
