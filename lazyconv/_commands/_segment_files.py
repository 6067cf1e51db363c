"""Kafka's other per-segment files, read for ``lazyconv dump`` (as ``kafka-dump-log.sh`` does).

The formats are :mod:`lazyconv.logdir`'s: ``.index`` / ``.timeindex``
(:mod:`~lazyconv.logdir._index`), ``.txnindex`` (:mod:`~lazyconv.logdir._txnindex`) and
``.snapshot`` (:mod:`~lazyconv.logdir._snapshot`); the kind of a file is its suffix
(:mod:`~lazyconv.logdir._naming`).

The base offset of an index is the number in its file name (``00000000000000000042.index``).
A broker pre-allocates the index of the active segment with zeros: as Kafka's tool does, the
listing stops at the first entry after the first one that points back at the base offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lazyconv.errors import CorruptRecordError, TruncatedDataError
from lazyconv.logdir._index import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    parse_offset_index,
    parse_time_index,
)
from lazyconv.logdir._naming import FILE_KINDS, file_kind, offset_in_name
from lazyconv.logdir._snapshot import (
    SNAPSHOT_FIELDS,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)
from lazyconv.logdir._txnindex import TXNINDEX_ENTRY_SIZE, TXNINDEX_VERSION, iter_txnindex

FILE_TYPES = tuple(FILE_KINDS.values())


def file_type(path: str | Path) -> str | None:
    """``log``, ``index``, ``timeindex``, ``txnindex`` or ``snapshot`` from the file name."""
    return file_kind(path)


def base_offset(path: str | Path) -> int | None:
    """The base offset a segment file's name carries, or None when the name is not a number."""
    return offset_in_name(path)


def whole_entries(data: bytes, size: int, kind: str) -> int:
    """How many ``size``-byte entries ``data`` holds; raises :class:`TruncatedDataError` at a
    partial last one. The listings call it after their whole entries, so that those are
    printed first (Kafka's index readers list them and leave the partial one out)."""
    if len(data) % size:
        raise TruncatedDataError(
            f"{kind} size {len(data)} is not a multiple of its {size}-byte entries",
            len(data) - len(data) % size,
        )
    return len(data) // size


def offset_index(data: bytes, base: int) -> Iterator[dict[str, int]]:
    """The entries of an offset index: ``{"offset", "position"}``."""
    for i, entry in enumerate(parse_offset_index(data, base)):
        if i > 0 and entry.offset == base:
            break  # the zero-filled, pre-allocated tail
        yield {"offset": entry.offset, "position": entry.position}
    whole_entries(data, OFFSET_ENTRY_SIZE, "offset index")


def time_index(data: bytes, base: int) -> Iterator[dict[str, int]]:
    """The entries of a time index: ``{"timestamp", "offset"}``."""
    for i, entry in enumerate(parse_time_index(data, base)):
        if i > 0 and entry.offset == base and entry.timestamp == 0:
            break
        yield {"timestamp": entry.timestamp, "offset": entry.offset}
    whole_entries(data, TIME_ENTRY_SIZE, "time index")


def transaction_index(data: bytes) -> Iterator[dict[str, int]]:
    """The aborted transactions of a ``.txnindex`` file."""
    yield from _transactions(data)
    whole_entries(data, TXNINDEX_ENTRY_SIZE, "transaction index")


def _transactions(data: bytes) -> Iterator[dict[str, int]]:
    for position, version, txn in iter_txnindex(data):
        if version != TXNINDEX_VERSION:
            raise CorruptRecordError(
                f"aborted transaction version {version} is not {TXNINDEX_VERSION}", position)
        yield {
            "version": version,
            "producer_id": txn.producer_id,
            "first_offset": txn.first_offset,
            "last_offset": txn.last_offset,
            "last_stable_offset": txn.last_stable_offset,
        }


def producer_snapshot(data: bytes) -> list[dict[str, Any]]:
    """The producer entries of a ``.snapshot`` file (version 1, CRC checked)."""
    return [asdict(entry) for entry in decode_snapshot(data, "producer snapshot")]


def encode_producer_snapshot(entries: list[dict[str, int]]) -> bytes:
    """Write a version-1 producer snapshot (for tests and fixtures)."""
    return encode_snapshot([SnapshotEntry(**{name: entry[name] for name in SNAPSHOT_FIELDS})
                            for entry in entries])
