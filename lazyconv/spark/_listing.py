"""The driver's listing of a log directory: absolute paths, and hostile entries as findings.

:func:`list_log_directory` runs before Spark starts. A local ``LOGDIR`` is made absolute (the
executors of a cluster do not share the driver's working directory). Every ``<topic>-<N>``
entry and every ``<20 digits>.log`` file in one is listed without reading any of them: a
partition folder that cannot be entered (a symlink loop, no permission) becomes an
``unreadable`` violation of that partition, and a ``.log`` that is not a regular file or cannot
be examined (a FIFO, a directory, a symlink loop) is listed with size 0, for the scan to report
as ``unreadable`` (:class:`lazyconv.spark._reader.SegmentReader` never opens such a file for
reading). The run goes on with everything else.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from lazyconv.errors import ValidationError
from lazyconv.logdir._layout import SegmentFiles, list_segments
from lazyconv.logdir._naming import offset_from_name, split_partition_dir
from lazyconv.spark._violations import violation

__all__ = ["LogListing", "list_log_directory", "resolve_logdir"]

log = logging.getLogger(__name__)


@dataclass
class LogListing:
    """The segments of a log directory (sorted by topic, partition and base offset) and what
    could not be listed (``unreadable`` violations of whole partitions)."""

    logdir: str
    segments: list[SegmentFiles]
    problems: list[dict[str, Any]] = field(default_factory=list)


def resolve_logdir(logdir: str) -> str:
    """``logdir`` as the executors must see it: an absolute path (URLs are kept). A ``file://``
    URL is read as the local path it names: through fsspec, a FIFO named like a segment would
    block its task for ever (a local path's files are checked before they are read)."""
    if "://" not in logdir:
        return os.path.abspath(logdir)
    if logdir.startswith(("file://", "local://")):
        from fsspec.core import url_to_fs
        from fsspec.implementations.local import LocalFileSystem

        fs, path = url_to_fs(logdir)
        if isinstance(fs, LocalFileSystem):
            return os.path.abspath(path)
    return logdir


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _list_local(root: str) -> LogListing:
    segments: list[SegmentFiles] = []
    problems: list[dict[str, Any]] = []
    with os.scandir(root) as entries:
        partitions = sorted((e.name, e.path) for e in entries)
    for name, path in partitions:
        parsed = split_partition_dir(name)
        if parsed is None:
            continue
        topic, partition = parsed
        try:
            if not stat.S_ISDIR(os.stat(path).st_mode):
                continue  # a file named like a partition: not a partition
            with os.scandir(path) as entries:
                files = sorted((e.name, e.path) for e in entries)
        except OSError as exc:
            problems.append(violation(topic, partition, "", "partition", -1, "unreadable",
                                      f"partition folder {path} cannot be listed: "
                                      f"{_reason(exc)}", path=path))
            continue
        for file_name, file_path in files:
            base = offset_from_name(file_name)
            if base is None:
                continue
            try:
                st = os.stat(file_path)
                size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            except OSError:
                size = 0  # the scan reports why it cannot be opened
            segments.append(SegmentFiles.beside(topic, partition, base, file_path, size))
    segments.sort(key=lambda s: (s.topic, s.partition, s.base_offset))
    return LogListing(root, segments, problems)


def list_log_directory(logdir: str) -> LogListing:
    """The segments of ``logdir`` with absolute paths; raises
    :class:`~lazyconv.errors.ValidationError` (one line) for a missing path, a file, a folder
    that cannot be listed, or one without any segment or partition."""
    root = resolve_logdir(logdir)
    if "://" in root:
        try:
            listing = LogListing(root, list_segments(root))
        except (OSError, ValueError) as exc:
            raise ValidationError(f"cannot list log directory {logdir}: {exc}") from None
    else:
        if not os.path.exists(root):
            raise ValidationError(f"log directory {logdir} does not exist")
        if not os.path.isdir(root):
            raise ValidationError(f"{logdir} is a file, not a log directory")
        try:
            listing = _list_local(root)
        except OSError as exc:
            raise ValidationError(f"cannot list log directory {logdir}: {_reason(exc)}") from None
    if not listing.segments and not listing.problems:
        raise ValidationError(f"{logdir} holds no segments (no <topic>-<N>/<20 digits>.log "
                              "files): nothing to validate")
    log.info("%s: %d segments, %d partitions that cannot be listed", root,
             len(listing.segments), len(listing.problems))
    return listing
