"""Control records of v2 control batches: record types and end-transaction markers (6.7)."""

from __future__ import annotations

import struct
from typing import NamedTuple

from lazyconv._buffers import byte_view
from lazyconv.errors import InvalidRecordError
from lazyconv.records._format import ArgumentEnum

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "control_type_id",
    "parse_control_key",
    "parse_end_txn_marker",
    "control_key",
    "end_txn_marker_value",
]

_KEY = struct.Struct(">hh")
_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(ArgumentEnum):
    """Type field of a control record key (``UNKNOWN`` for any other value)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class EndTransactionMarker(NamedTuple):
    """A parsed COMMIT/ABORT control record."""

    commit: bool
    coordinator_epoch: int


def control_type_id(key: bytes | None) -> int:
    """The type id a control record's key holds (at least 4 bytes: version, type), as stored:
    :func:`parse_control_key` maps an id it does not know to ``UNKNOWN``."""
    if key is not None and type(key) is not bytes:
        key = byte_view(key, "a control record's key")  # type: ignore[assignment]
    if key is None or len(key) < 4:
        raise InvalidRecordError(f"control record key needs 4 bytes, got {0 if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"control record key with negative version {version}")
    return int(type_id)


def parse_control_key(key: bytes | None) -> ControlRecordType:
    """The type of a control record from its key (at least 4 bytes: version, type)."""
    type_id = control_type_id(key)
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker:
    """Parse an ABORT/COMMIT control record (value: version int16, coordinator epoch int32)."""
    kind = parse_control_key(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record of type {kind.name} is not a transaction marker")
    if value is not None and type(value) is not bytes:
        value = byte_view(value, "a transaction marker's value")  # type: ignore[assignment]
    if value is None or len(value) < 6:
        raise InvalidRecordError(
            f"transaction marker value needs 6 bytes, got {0 if value is None else len(value)}"
        )
    version, epoch = _TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise InvalidRecordError(f"transaction marker with negative version {version}")
    return EndTransactionMarker(kind == ControlRecordType.COMMIT, epoch)


def control_key(kind: ControlRecordType, version: int = 0) -> bytes:
    """The 4-byte key of a control record."""
    return _KEY.pack(version, int(kind))


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    """The 6-byte value of a COMMIT/ABORT control record."""
    return _TXN_VALUE.pack(version, coordinator_epoch)
