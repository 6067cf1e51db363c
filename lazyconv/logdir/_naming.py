"""Names in a Kafka log directory, and what a name says.

As a broker lays a log directory out:

- a partition lives in a folder ``<topic>-<partition>`` (a topic name may hold ``-`` itself: the
  last one separates the partition number);
- a segment is a set of files named by its base offset as 20 zero-padded digits, one suffix per
  kind: ``.log`` (the entries), ``.index`` (offset index), ``.timeindex`` (time index) and, once
  an abort marker lands in the segment, ``.txnindex`` (aborted transactions);
- a producer snapshot is named the same way by the offset it covers up to, with ``.snapshot``;
- a partition folder holds ``partition.metadata`` (its topic id); the log directory holds
  ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``.

The entry formats of these files are in :mod:`~lazyconv.logdir._index`,
:mod:`~lazyconv.logdir._txnindex`, :mod:`~lazyconv.logdir._snapshot`,
:mod:`~lazyconv.logdir._topic_ids` and :mod:`~lazyconv.logdir._checkpoint`.
"""

from __future__ import annotations

import re
from pathlib import PurePath

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "TXNINDEX_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "FILE_KINDS",
    "KIND_SUFFIXES",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT",
    "offset_file_name",
    "segment_file_name",
    "offset_from_name",
    "offset_in_name",
    "file_kind",
    "sibling_path",
    "partition_dir_name",
    "split_partition_dir",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
# suffix -> the kind of file (the names ``lazyconv dump --type`` accepts)
FILE_KINDS = {
    LOG_SUFFIX: "log",
    INDEX_SUFFIX: "index",
    TIMEINDEX_SUFFIX: "timeindex",
    TXNINDEX_SUFFIX: "txnindex",
    SNAPSHOT_SUFFIX: "snapshot",
}
KIND_SUFFIXES = {kind: suffix for suffix, kind in FILE_KINDS.items()}  # "index" -> ".index"
PARTITION_METADATA_FILE = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # in each partition folder

_OFFSET_DIGITS = 20
_OFFSET_NAME = re.compile(rf"^(?P<offset>\d{{{_OFFSET_DIGITS}}})(?P<suffix>\.[a-z]+)$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def offset_file_name(offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000001234.log`` for offset 1234 (``suffix`` names the kind of file)."""
    return f"{offset:0{_OFFSET_DIGITS}d}{suffix}"


segment_file_name = offset_file_name  # a segment's files are named by its base offset


def offset_from_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    """The offset a file name carries when it is exactly ``<20 digits><suffix>``, else ``None``
    (how a broker recognises the files it lists)."""
    match = _OFFSET_NAME.match(name)
    if match is None or match.group("suffix") != suffix:
        return None
    return int(match.group("offset"))


def offset_in_name(path: str | PurePath) -> int | None:
    """The number a file's name carries before its suffix, whatever its length (a file given by
    hand, e.g. to ``lazyconv dump``), or ``None`` when that part is not a number."""
    stem = PurePath(path).stem
    return int(stem) if stem.isdigit() else None


def file_kind(path: str | PurePath) -> str | None:
    """``log``, ``index``, ``timeindex``, ``txnindex`` or ``snapshot`` from a file's suffix."""
    return FILE_KINDS.get(PurePath(path).suffix.lower())


def sibling_path(log_path: str, suffix: str) -> str:
    """The path of a segment's other file (``suffix``) beside its ``.log`` path; works on local
    paths and URLs alike."""
    if not log_path.endswith(LOG_SUFFIX):
        raise ValueError(f"{log_path} is not a {LOG_SUFFIX} file")
    return log_path[: -len(LOG_SUFFIX)] + suffix


def partition_dir_name(topic: str, partition: int) -> str:
    """``orders-3`` for partition 3 of ``orders``."""
    return f"{topic}-{partition}"


def split_partition_dir(name: str) -> tuple[str, int] | None:
    """``("orders", 3)`` for ``orders-3``; ``None`` for a folder that is not a partition."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))
