"""Plant known faults in a copy of a fixture log directory (used by the validation tests).

Each planter edits one segment and returns where the validator must report it:
``(topic, partition, segment, file, position, kind)``.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from lazyconv.fixtures.layout import SegmentFiles, list_segments

Fault = tuple[str, int, str, str, int, str]


def entries(path: str) -> list[tuple[int, int, int]]:
    """(position, total size, magic) of every entry of a well-formed segment."""
    data = Path(path).read_bytes()
    out = []
    pos = 0
    while pos + 17 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, 12 + size, data[pos + 16]))
        pos += 12 + size
    return out


def _segments(root: Path, topic: str, partition: int) -> list[SegmentFiles]:
    return [s for s in list_segments(str(root)) if (s.topic, s.partition) == (topic, partition)]


def _loc(seg: SegmentFiles, file: str, position: int, kind: str) -> Fault:
    return (seg.topic, seg.partition, seg.name, file, position, kind)


def flip_crc_covered_byte(root: Path, topic: str, partition: int) -> Fault:
    """Flip the last byte of the third batch of the partition's first segment."""
    seg = _segments(root, topic, partition)[0]
    pos, size, _ = entries(seg.log_path)[2]
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + size - 1)
        byte = f.read(1)[0]
        f.seek(pos + size - 1)
        f.write(bytes((byte ^ 0x5A,)))
    return _loc(seg, "log", pos, "crc")


def truncate_mid_batch(root: Path, topic: str, partition: int) -> Fault:
    """Cut the partition's last segment in the middle of its last batch (a torn write)."""
    seg = _segments(root, topic, partition)[-1]
    pos, size, _ = entries(seg.log_path)[-1]
    with open(seg.log_path, "r+b") as f:
        f.truncate(pos + size // 2)
    return _loc(seg, "log", pos, "truncated")


def offset_backwards(root: Path, topic: str, partition: int) -> Fault:
    """Give the fourth v2 batch of the first segment the base offset of the second (the base
    offset is not covered by the v2 CRC, so only the offset checks can see it)."""
    seg = _segments(root, topic, partition)[0]
    batches = [e for e in entries(seg.log_path) if e[2] == 2]
    with open(seg.log_path, "r+b") as f:
        f.seek(batches[1][0])
        earlier = f.read(8)
        f.seek(batches[3][0])
        f.write(earlier)
    return _loc(seg, "log", batches[3][0], "offset_order")


def wrong_index_entry(root: Path, topic: str, partition: int) -> Fault:
    """Move the second offset index entry of the first segment one byte off its batch."""
    seg = _segments(root, topic, partition)[0]
    with open(seg.index_path, "r+b") as f:
        f.seek(8)
        rel, position = struct.unpack(">ii", f.read(8))
        f.seek(8)
        f.write(struct.pack(">ii", rel, position + 1))
    return _loc(seg, "index", 8, "index")


def wrong_time_index_entry(root: Path, topic: str, partition: int) -> Fault:
    """Lower the first time index entry's timestamp of the first segment by one."""
    seg = _segments(root, topic, partition)[0]
    with open(seg.timeindex_path, "r+b") as f:
        ts, rel = struct.unpack(">qi", f.read(12))
        f.seek(0)
        f.write(struct.pack(">qi", ts - 1, rel))
    return _loc(seg, "timeindex", 0, "timeindex")


def overlapping_segment(root: Path, topic: str, partition: int) -> Fault:
    """Give the second segment's first (v2) batch an offset inside the first segment."""
    first, second = _segments(root, topic, partition)[:2]
    pos, _, magic = entries(second.log_path)[0]
    assert magic == 2
    with open(second.log_path, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">q", first.base_offset + 1))
    return (second.topic, second.partition, second.name, "partition", -1, "segment_order")


def corrupted_copy(source: Path, target: Path) -> list[Fault]:
    """Copy ``source`` to ``target`` and plant one fault of each kind in different partitions."""
    shutil.copytree(source, target)
    return [
        flip_crc_covered_byte(target, "codecs", 0),
        flip_crc_covered_byte(target, "upgraded", 0),  # a v0 message: CRC-32, not CRC-32C
        truncate_mid_batch(target, "idempotent", 0),
        offset_backwards(target, "headers", 0),
        wrong_index_entry(target, "transactions", 0),
        wrong_time_index_entry(target, "logappend", 0),
        overlapping_segment(target, "codecs", 1),
    ]
