"""A log directory's segments as found on disk: :class:`SegmentFiles` and :func:`list_segments`.

Only names are read (:mod:`lazyconv.logdir._naming`): a folder ``<topic>-<N>`` is a partition, a
``<20 digits>.log`` file in it a segment, with its ``.index``, ``.timeindex`` and ``.txnindex``
beside it (which may be missing). Paths are local paths or fsspec URLs, as listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lazyconv.logdir._naming import (
    INDEX_SUFFIX,
    TIMEINDEX_SUFFIX,
    TXNINDEX_SUFFIX,
    offset_from_name,
    segment_file_name,
    sibling_path,
    split_partition_dir,
)

__all__ = ["SegmentFiles", "list_segments"]


@dataclass(frozen=True)
class SegmentFiles:
    """Where one segment lives. Paths are local paths or fsspec URLs (as listed)."""

    topic: str
    partition: int
    base_offset: int
    log_path: str
    index_path: str
    timeindex_path: str
    size: int

    @classmethod
    def beside(cls, topic: str, partition: int, base_offset: int, log_path: str,
               size: int) -> SegmentFiles:
        """The segment whose ``.log`` is ``log_path`` (``size`` bytes), its indexes beside it."""
        return cls(topic, partition, base_offset, log_path, sibling_path(log_path, INDEX_SUFFIX),
                   sibling_path(log_path, TIMEINDEX_SUFFIX), size)

    @property
    def name(self) -> str:
        """The ``.log`` file name, e.g. ``00000000000000000000.log``."""
        return segment_file_name(self.base_offset)

    @property
    def txnindex_path(self) -> str:
        """Where its ``.txnindex`` is (Kafka writes one only once an abort marker lands)."""
        return sibling_path(self.log_path, TXNINDEX_SUFFIX)


def list_segments(logdir: str) -> list[SegmentFiles]:
    """Every segment under ``logdir`` (a local folder or an fsspec URL), sorted by topic,
    partition and base offset. Folders that are not ``<topic>-<N>`` are ignored."""
    found: list[SegmentFiles] = []
    if "://" in logdir:
        import fsspec

        fs, root = fsspec.core.url_to_fs(logdir)
        # each file's URL is logdir's own plus the names below it: a listed name is a path
        # without the URL's host (hdfs://namenode:8020/..., webhdfs://, sftp://), which another
        # process could not open
        url = logdir.rstrip("/")
        for entry in fs.ls(root, detail=True):
            if entry["type"] != "directory":
                continue
            folder = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            parsed = split_partition_dir(folder)
            if parsed is None:
                continue
            for seg in fs.ls(entry["name"], detail=True):
                name = seg["name"].rsplit("/", 1)[-1]
                base = offset_from_name(name)
                if base is None:
                    continue
                found.append(SegmentFiles.beside(parsed[0], parsed[1], base,
                                                 f"{url}/{folder}/{name}", int(seg["size"])))
    else:
        root_path = Path(logdir)
        if not root_path.is_dir():
            raise FileNotFoundError(f"log directory {logdir} does not exist")
        for child in root_path.iterdir():
            parsed = split_partition_dir(child.name)
            if parsed is None or not child.is_dir():
                continue
            for seg in child.iterdir():
                base = offset_from_name(seg.name)
                if base is None:
                    continue
                found.append(SegmentFiles.beside(parsed[0], parsed[1], base, str(seg),
                                                 os.path.getsize(seg)))
    found.sort(key=lambda s: (s.topic, s.partition, s.base_offset))
    return found
