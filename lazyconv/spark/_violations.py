"""What the validation job reports: a violation is a dict located by topic, partition, segment,
file, byte position and Kafka offset, with a kind and a severity.

``file`` is ``log``, ``index``, ``timeindex``, ``txnindex`` or ``partition`` (findings about a
partition as a whole: its segments' order, the manifest), ``position`` a byte position in that
file (-1 when the finding has none), ``offset`` the Kafka offset concerned (``None`` when there
is none). ``severity`` is ``error`` (the log is damaged: exit status 1) or ``warning`` (worth
knowing, Kafka reads the log fine: e.g. preallocated zeros at the end of the active segment).
"""

from __future__ import annotations

from typing import Any

from lazyconv.logdir._naming import KIND_SUFFIXES, sibling_path

__all__ = ["VIOLATION_KINDS", "ERROR", "WARNING", "file_path", "violation", "is_error",
           "marker_without_entry"]

ERROR = "error"
WARNING = "warning"

VIOLATION_KINDS = {
    "not_a_segment": "a .log file whose first bytes are no log entry (another kind of file)",
    "truncated": "an entry runs past the end of the segment (a torn write)",
    "bad_size": "size field below 14: the rest of the segment cannot be delimited",
    "bad_magic": "magic byte not 0, 1 or 2",
    "crc": "stored CRC differs from the computed one",
    "structure": "the batch does not decode (lengths, counts, varints, codec)",
    "timestamp": "a batch's max timestamp differs from its records'",
    "trailing_zeros": "zero bytes after the last entry (preallocation): warning at the end of "
                      "a partition, error before another segment",
    "offset_order": "offsets not increasing within a segment or between its byte ranges",
    "segment_base": "an offset below the segment's base offset (its file name)",
    "segment_overlap": "a segment's base offset at or below the previous segment's last offset",
    "segment_order": "a segment's first offset not after the previous segment's last offset",
    "range_gap": "a byte range of a segment does not start where the previous one ended",
    "leader_epoch": "partition leader epochs going backwards",
    "index": "an .index entry or the file disagrees with the log",
    "timeindex": "a .timeindex entry or the file disagrees with the log",
    "txnindex": "a .txnindex entry or the file disagrees with the log's abort markers, or "
                "a segment with ABORT markers has no .txnindex",
    "manifest": "counts or checksum differ from the fixture manifest",
    "max_message_bytes": "an entry larger than the topic's max.message.bytes (--topic-config)",
    "timestamp_type": "an entry whose timestamp type is not the topic's message.timestamp.type "
                      "(--topic-config)",
    "offset_gap": "offsets missing in a topic whose cleanup.policy is delete (--topic-config)",
    "null_key": "records without a key in a compacted topic (--topic-config)",
    "conversion": "the lazy send would deliver other records than expected",
    "unreadable": "a file or partition folder cannot be read (missing permission, a symlink "
                  "loop, a FIFO, directory or device where a file belongs)",
    "internal_error": "the check itself failed here (a bug or an unexpected input)",
}


def marker_without_entry(producer_id: int, offset: int) -> str:
    """The message of an ABORT marker missing from the ``.txnindex`` (a range reports it, or the
    partition's reduce when the range could not decide alone)."""
    return f"ABORT marker of producer {producer_id} at offset {offset} has no entry"


def violation(topic: str | None, partition: int | None, segment: str, file: str,
              position: int, kind: str, message: str, *, offset: int | None = None,
              severity: str = ERROR, last_offset: int | None = None,
              batch_bytes: int | None = None, path: str | None = None) -> dict[str, Any]:
    """One finding at its place; ``last_offset`` and ``batch_bytes`` describe the entry (batch
    or top-level message) it is about, when it is about one; ``path`` is the file's (or the
    partition folder's) absolute path."""
    return {
        "topic": topic,
        "partition": partition,
        "segment": segment,
        "file": file,
        "path": path,
        "position": position,
        "offset": offset,
        "last_offset": last_offset,
        "batch_bytes": batch_bytes,
        "kind": kind,
        "severity": severity,
        "message": message,
    }


def file_path(log_path: str, file: str) -> str:
    """The path of ``file`` (``log``, ``index``, ``timeindex``, ``txnindex`` or ``partition``)
    of the segment whose ``.log`` is ``log_path``."""
    if file == "partition":
        return log_path.rsplit("/", 1)[0]
    if file == "log":
        return log_path
    return sibling_path(log_path, KIND_SUFFIXES[file])


def is_error(v: dict[str, Any]) -> bool:
    """True for a violation that makes the log invalid (not a warning)."""
    return v.get("severity", ERROR) == ERROR
