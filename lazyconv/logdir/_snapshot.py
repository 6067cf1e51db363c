"""Kafka's producer state snapshots: ``<offset, 20 digits>.snapshot`` in a partition directory.

A snapshot holds the producer state of the partition as of its offset (the offsets below it;
the file is named by the next offset, as Kafka's ``ProducerStateManager.takeSnapshot`` does).
Format (version 1, big-endian)::

    int16  version = 1
    uint32 crc          CRC-32C of everything after this field
    int32  count        then ``count`` entries of 46 bytes:
      int64 producer id, int16 epoch, int32 last sequence, int64 last offset,
      int32 offset delta (last offset - first offset of the last batch, = its last sequence -
      first sequence), int64 timestamp (max timestamp of the last batch), int32 coordinator
      epoch, int64 first offset of the open transaction (-1 when none)

A producer whose only entry in the log is a transaction marker has last sequence and last
offset -1. Kafka keeps only each producer's last batch in a snapshot, so after a restart the
duplicate window of a producer holds that batch plus whatever the log after the snapshot adds.
"""

from __future__ import annotations

import os
import struct
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from crc32c import crc32c

from lazyconv.errors import CorruptRecordError, TruncatedDataError
from lazyconv.logdir._naming import SNAPSHOT_SUFFIX, offset_file_name, offset_from_name

__all__ = [
    "SNAPSHOT_VERSION",
    "SNAPSHOT_FIELDS",
    "SnapshotEntry",
    "encode_snapshot",
    "decode_snapshot",
    "snapshot_path",
    "snapshot_offsets",
]

SNAPSHOT_VERSION = 1
_PREFIX = struct.Struct(">hI")  # version, CRC-32C of everything after it
_COUNT = struct.Struct(">i")  # the number of entries
_HEADER_SIZE = _PREFIX.size + _COUNT.size
_CRC_AT = struct.calcsize(">h")
_ENTRY = struct.Struct(">qhiqiqiq")  # the fields of SnapshotEntry, in order

@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer of a snapshot (Kafka's ``ProducerStateEntry`` as serialised)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


SNAPSHOT_FIELDS = tuple(f.name for f in fields(SnapshotEntry))  # an entry's fields, in file order


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot file holding ``entries``."""
    body = _COUNT.pack(len(entries)) + b"".join(_ENTRY.pack(*astuple(e)) for e in entries)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes, path: Path | str = "<snapshot>") -> list[SnapshotEntry]:
    """The entries of a snapshot file. Raises :class:`~lazyconv.errors.TruncatedDataError` or
    :class:`~lazyconv.errors.CorruptRecordError` (a wrong version, CRC or length)."""
    if len(data) < _HEADER_SIZE:
        raise TruncatedDataError(
            f"{path}: producer snapshot of {len(data)} bytes is shorter than its "
            f"{_HEADER_SIZE}-byte header", 0)
    version, crc = _PREFIX.unpack_from(data, 0)
    (count,) = _COUNT.unpack_from(data, _PREFIX.size)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"{path}: producer snapshot version {version} is not "
                                 f"{SNAPSHOT_VERSION}", 0)
    actual = crc32c(memoryview(data)[_PREFIX.size:])
    if actual != crc:
        raise CorruptRecordError(
            f"{path}: producer snapshot CRC {crc} does not match the computed {actual}", _CRC_AT)
    if count < 0 or _HEADER_SIZE + count * _ENTRY.size != len(data):
        raise CorruptRecordError(
            f"{path}: producer snapshot holds {count} entries but is {len(data)} bytes long", _PREFIX.size)
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER_SIZE + i * _ENTRY.size))
            for i in range(count)]


def snapshot_path(directory: Path, offset: int) -> Path:
    """``directory/00000000000000000042.snapshot`` for offset 42."""
    return directory / offset_file_name(offset, SNAPSHOT_SUFFIX)


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshot files in a partition directory, lowest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = (offset_from_name(name, SNAPSHOT_SUFFIX) for name in names)
    return sorted(offset for offset in found if offset is not None)
