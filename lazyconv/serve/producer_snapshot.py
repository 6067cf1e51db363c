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
import re
import struct
from dataclasses import astuple, dataclass
from pathlib import Path

from crc32c import crc32c

from lazyconv.errors import CorruptRecordError, TruncatedDataError

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "SnapshotEntry",
    "encode_snapshot",
    "decode_snapshot",
    "snapshot_path",
    "snapshot_offsets",
]

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_FROM = 6  # the CRC covers the bytes after version and crc
_ENTRY = struct.Struct(">qhiqiqiq")
_NAME = re.compile(r"^(?P<offset>\d{20})\.snapshot$")


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


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot file holding ``entries``."""
    body = struct.pack(">i", len(entries)) + b"".join(_ENTRY.pack(*astuple(e)) for e in entries)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes, path: Path | str = "<snapshot>") -> list[SnapshotEntry]:
    """The entries of a snapshot file. Raises :class:`~lazyconv.errors.TruncatedDataError` or
    :class:`~lazyconv.errors.CorruptRecordError` (a wrong version, CRC or length)."""
    if len(data) < _HEADER.size:
        raise TruncatedDataError(
            f"{path}: producer snapshot of {len(data)} bytes is shorter than its "
            f"{_HEADER.size}-byte header", 0)
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"{path}: producer snapshot version {version} is not "
                                 f"{SNAPSHOT_VERSION}", 0)
    actual = crc32c(memoryview(data)[_CRC_FROM:])
    if actual != crc:
        raise CorruptRecordError(
            f"{path}: producer snapshot CRC {crc} does not match the computed {actual}", 2)
    if count < 0 or _HEADER.size + count * _ENTRY.size != len(data):
        raise CorruptRecordError(
            f"{path}: producer snapshot holds {count} entries but is {len(data)} bytes long", 6)
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size))
            for i in range(count)]


def snapshot_path(directory: Path, offset: int) -> Path:
    """``directory/00000000000000000042.snapshot`` for offset 42."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshot files in a partition directory, lowest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group("offset")) for m in map(_NAME.match, names) if m)
