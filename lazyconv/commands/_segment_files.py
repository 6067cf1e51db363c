"""Kafka's other per-segment files, read for ``lazyconv dump`` (as ``kafka-dump-log.sh`` does).

Layouts (all big-endian):

- ``.index`` (offset index): 8-byte entries, ``int32 offset - base offset`` and
  ``int32 position`` of the batch in the ``.log`` file.
- ``.timeindex``: 12-byte entries, ``int64 timestamp`` and ``int32 offset - base offset``.
- ``.txnindex`` (aborted transactions): 34-byte entries, ``int16 version``, ``int64
  producer id``, ``int64 first offset``, ``int64 last offset``, ``int64 last stable offset``.
- ``.snapshot`` (producer state): ``int16 version`` (1), ``uint32 CRC-32C`` of the rest, then an
  ``int32`` count of 46-byte entries: producer id (int64), epoch (int16), last sequence
  (int32), last offset (int64), offset delta (int32), timestamp (int64), coordinator epoch
  (int32), first offset of the current transaction (int64, -1 when none).

The base offset of an index is the number in its file name (``00000000000000000042.index``).
A broker pre-allocates the index of the active segment with zeros: as Kafka's tool does, the
listing stops at the first entry after the first one that points back at the base offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lazyconv.errors import CorruptRecordError, TruncatedDataError
from lazyconv.fixtures.index import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    parse_offset_index,
    parse_time_index,
)
from lazyconv.serve.producer_snapshot import SnapshotEntry, decode_snapshot, encode_snapshot

SUFFIXES = {
    ".log": "log",
    ".index": "index",
    ".timeindex": "timeindex",
    ".txnindex": "txnindex",
    ".snapshot": "snapshot",
}
FILE_TYPES = ("log", "index", "timeindex", "txnindex", "snapshot")

_TXN_ENTRY = struct.Struct(">hqqqq")
_SNAPSHOT_FIELDS = (
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)


def file_type(path: str | Path) -> str | None:
    """``log``, ``index``, ``timeindex``, ``txnindex`` or ``snapshot`` from the file name."""
    return SUFFIXES.get(Path(path).suffix.lower())


def base_offset(path: str | Path) -> int | None:
    """The base offset a segment file's name carries, or None when the name is not a number."""
    stem = Path(path).stem
    return int(stem) if stem.isdigit() else None


def _whole_entries(data: bytes, size: int, kind: str) -> int:
    if len(data) % size:
        raise TruncatedDataError(
            f"{kind} size {len(data)} is not a multiple of its {size}-byte entries",
            len(data) - len(data) % size,
        )
    return len(data) // size


def offset_index(data: bytes, base: int) -> Iterator[dict[str, int]]:
    """The entries of an offset index: ``{"offset", "position"}``."""
    _whole_entries(data, OFFSET_ENTRY_SIZE, "offset index")
    for i, entry in enumerate(parse_offset_index(data, base)):
        if i > 0 and entry.offset == base:
            return  # the zero-filled, pre-allocated tail
        yield {"offset": entry.offset, "position": entry.position}


def time_index(data: bytes, base: int) -> Iterator[dict[str, int]]:
    """The entries of a time index: ``{"timestamp", "offset"}``."""
    _whole_entries(data, TIME_ENTRY_SIZE, "time index")
    for i, entry in enumerate(parse_time_index(data, base)):
        if i > 0 and entry.offset == base and entry.timestamp == 0:
            return
        yield {"timestamp": entry.timestamp, "offset": entry.offset}


def transaction_index(data: bytes) -> Iterator[dict[str, int]]:
    """The aborted transactions of a ``.txnindex`` file."""
    for i in range(_whole_entries(data, _TXN_ENTRY.size, "transaction index")):
        version, producer_id, first, last, stable = _TXN_ENTRY.unpack_from(data, i * _TXN_ENTRY.size)
        if version != 0:
            raise CorruptRecordError(f"aborted transaction version {version} is not 0", i * 34)
        yield {
            "version": version,
            "producer_id": producer_id,
            "first_offset": first,
            "last_offset": last,
            "last_stable_offset": stable,
        }


def producer_snapshot(data: bytes) -> list[dict[str, Any]]:
    """The producer entries of a ``.snapshot`` file (version 1, CRC checked)."""
    return [asdict(entry) for entry in decode_snapshot(data, "producer snapshot")]


def encode_producer_snapshot(entries: list[dict[str, int]]) -> bytes:
    """Write a version-1 producer snapshot (for tests and fixtures)."""
    return encode_snapshot([SnapshotEntry(**{name: entry[name] for name in _SNAPSHOT_FIELDS})
                            for entry in entries])
