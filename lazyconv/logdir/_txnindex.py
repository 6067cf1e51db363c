"""A segment's ``.txnindex``: Kafka's TransactionIndex, one entry per aborted transaction.

Entry (34 bytes, big-endian, no header; Kafka's ``AbortedTxn``)::

    int16 version = 0 | int64 producer id | int64 first offset | int64 last offset (the ABORT
    marker's) | int64 last stable offset (once the transaction ended)

A broker creates the file when the first abort marker lands in a segment, and appends one entry
per abort marker after it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lazyconv.errors import CorruptRecordError

log = logging.getLogger(__name__)

__all__ = [
    "TXNINDEX_ENTRY",
    "TXNINDEX_ENTRY_SIZE",
    "TXNINDEX_VERSION",
    "AbortedTxn",
    "encode_txnindex_entry",
    "iter_txnindex",
    "parse_txnindex",
    "trim_txnindex",
]

TXNINDEX_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
TXNINDEX_ENTRY_SIZE = TXNINDEX_ENTRY.size  # 34
TXNINDEX_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """Kafka's AbortedTxn: one aborted transaction of one producer."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_txnindex_entry(txn: AbortedTxn) -> bytes:
    """One 34-byte TransactionIndex entry (version 0)."""
    return TXNINDEX_ENTRY.pack(TXNINDEX_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                               txn.last_stable_offset)


def iter_txnindex(data: bytes) -> Iterator[tuple[int, int, AbortedTxn]]:
    """``(byte position, version, transaction)`` of each whole entry of ``data``, whatever its
    version; a trailing partial entry is left out (the caller checks the size)."""
    usable = len(data) - len(data) % TXNINDEX_ENTRY_SIZE
    for position in range(0, usable, TXNINDEX_ENTRY_SIZE):
        version, pid, first, last, lso = TXNINDEX_ENTRY.unpack_from(data, position)
        yield position, version, AbortedTxn(pid, first, last, lso)


def parse_txnindex(data: bytes, path: Path | str = "<txnindex>") -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file; raises :class:`CorruptRecordError` naming the place."""
    if len(data) % TXNINDEX_ENTRY_SIZE:
        raise CorruptRecordError(
            f"{path}: {len(data)} bytes is not a whole number of {TXNINDEX_ENTRY_SIZE}-byte entries",
            len(data) - len(data) % TXNINDEX_ENTRY_SIZE)
    out = []
    for position, version, txn in iter_txnindex(data):
        if version != TXNINDEX_VERSION:
            raise CorruptRecordError(f"{path}: entry version {version} (only {TXNINDEX_VERSION} exists)",
                                     position)
        out.append(txn)
    return out


def trim_txnindex(path: Path, end: int) -> None:
    """Drop the aborted transactions of ``path`` whose marker lies at or after ``end`` (cut off
    the log), and a trailing partial entry; failures are logged."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return
    keep = bytearray()
    for position, _version, txn in iter_txnindex(data):
        if txn.last_offset < end:
            keep += data[position:position + TXNINDEX_ENTRY_SIZE]
    if bytes(keep) != data:
        try:
            path.write_bytes(bytes(keep))
        except OSError as exc:
            log.warning("cannot trim %s: %s", path, exc)
