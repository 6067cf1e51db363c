"""Plant known faults in a copy of a fixture log directory (used by the validation tests).

Each planter edits one segment and returns where the validator must report it:
``(topic, partition, segment, file, position, kind)``.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from lazyconv.logdir._layout import SegmentFiles, list_segments

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


# --- the checks of issue 13 ------------------------------------------------------------------

_V2_EPOCH = 12  # partition leader epoch: not covered by the CRC
_V2_CRC = 17
_V2_ATTRIBUTES = 21
_V2_MAX_TIMESTAMP = 35
_V2_RECORDS = 61  # the (compressed) records follow the 61-byte header


def _v2_entries(seg: SegmentFiles) -> list[tuple[int, int, int]]:
    return [e for e in entries(seg.log_path) if e[2] == 2]


def _recompute_crc(f, pos: int, size: int) -> None:
    from crc32c import crc32c

    f.seek(pos + _V2_ATTRIBUTES)
    body = f.read(size - _V2_ATTRIBUTES)
    f.seek(pos + _V2_CRC)
    f.write(struct.pack(">I", crc32c(body)))


def segment_base_overlap(root: Path, topic: str, partition: int) -> Fault:
    """Rename the second segment (all three files) to a base offset inside the first one: the
    batches still follow the first segment's, only the file name is wrong."""
    first, second = _segments(root, topic, partition)[:2]
    new_base = first.base_offset + 1
    folder = Path(second.log_path).parent
    for suffix in (".log", ".index", ".timeindex"):
        old = folder / f"{second.base_offset:020d}{suffix}"
        if old.exists():
            old.rename(folder / f"{new_base:020d}{suffix}")
    return (topic, partition, f"{new_base:020d}.log", "log", 0, "segment_overlap")


def leader_epoch_backwards(root: Path, topic: str, partition: int) -> Fault:
    """Give the first three v2 batches of the first segment leader epoch 7: the fourth (epoch 0)
    goes backwards."""
    seg = _segments(root, topic, partition)[0]
    batches = _v2_entries(seg)
    with open(seg.log_path, "r+b") as f:
        for pos, _, _ in batches[:3]:
            f.seek(pos + _V2_EPOCH)
            f.write(struct.pack(">i", 7))
    return _loc(seg, "log", batches[3][0], "leader_epoch")


def leader_epoch_backwards_across_segments(root: Path, topic: str, partition: int) -> Fault:
    """Give every v2 batch of the first segment leader epoch 7: the second segment's first v2
    batch (epoch 0) goes backwards, which only the per-partition reduce can see."""
    first, second = _segments(root, topic, partition)[:2]
    with open(first.log_path, "r+b") as f:
        for pos, _, _ in _v2_entries(first):
            f.seek(pos + _V2_EPOCH)
            f.write(struct.pack(">i", 7))
    return _loc(second, "log", _v2_entries(second)[0][0], "leader_epoch")


def wrong_max_timestamp(root: Path, topic: str, partition: int) -> Fault:
    """Raise the stated max timestamp of the third v2 batch (create time) of the first segment
    by one second, CRC recomputed: only the records disagree."""
    seg = _segments(root, topic, partition)[0]
    with open(seg.log_path, "r+b") as f:
        for pos, size, _ in _v2_entries(seg)[2:]:
            f.seek(pos + _V2_ATTRIBUTES)
            attributes = struct.unpack(">h", f.read(2))[0]
            if attributes & 0x28:  # log-append time or control: not this fault
                continue
            f.seek(pos + _V2_MAX_TIMESTAMP)
            stated = struct.unpack(">q", f.read(8))[0]
            f.seek(pos + _V2_MAX_TIMESTAMP)
            f.write(struct.pack(">q", stated + 1000))
            _recompute_crc(f, pos, size)
            return _loc(seg, "log", pos, "timestamp")
    raise AssertionError(f"no create-time v2 batch in {seg.log_path}")


def short_v2_length(root: Path, topic: str, partition: int) -> Fault:
    """Set the length field of the second v2 batch of the first segment to 40 (< 49)."""
    seg = _segments(root, topic, partition)[0]
    pos = _v2_entries(seg)[1][0]
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + 8)
        f.write(struct.pack(">i", 40))
    return _loc(seg, "log", pos, "structure")


def trailing_zeros(root: Path, topic: str, partition: int, *, last: bool = True,
                   count: int = 4096) -> Fault:
    """Append ``count`` zero bytes (preallocation) to the partition's last (or first) segment."""
    segs = _segments(root, topic, partition)
    seg = segs[-1] if last else segs[0]
    size = Path(seg.log_path).stat().st_size
    with open(seg.log_path, "ab") as f:
        f.write(bytes(count))
    return _loc(seg, "log", size, "trailing_zeros")


def write_txn_index(seg: SegmentFiles) -> list[tuple[int, int, int, int]]:
    """Write the ``.txnindex`` Kafka keeps for ``seg`` (one 34-byte entry per ABORT marker:
    version 0, producer id, first offset of the aborted transaction, marker offset, LSO) and
    return the entries ``(producer id, first, last, file position)``."""
    data = Path(seg.log_path).read_bytes()
    open_txn: dict[int, int] = {}
    out = bytearray()
    written = []
    for pos, size, magic in entries(seg.log_path):
        if magic != 2:
            continue
        base = struct.unpack_from(">q", data, pos)[0]
        attributes = struct.unpack_from(">h", data, pos + 21)[0]
        pid = struct.unpack_from(">q", data, pos + 43)[0]
        if attributes & 0x20:  # control: the marker's key type is 0 for ABORT
            first = open_txn.pop(pid, None)
            # the single control record: attributes(1) delta ts/offset varints, key length...
            record = data[pos + 61: pos + size]
            key_type = _control_key_type(record)
            if key_type == 0 and first is not None:
                written.append((pid, first, base, len(out)))
                out += struct.pack(">hqqqq", 0, pid, first, base, first)
        elif attributes & 0x10:
            open_txn.setdefault(pid, base)
    Path(seg.log_path[: -len(".log")] + ".txnindex").write_bytes(bytes(out))
    return written


def _control_key_type(record: bytes) -> int:
    """The type of the (uncompressed) control record at the start of ``record``."""
    def varint(buf: bytes, i: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            b = buf[i]
            value |= (b & 0x7F) << shift
            i += 1
            if not b & 0x80:
                return (value >> 1) ^ -(value & 1), i
            shift += 7

    _, i = varint(record, 0)  # record length
    i += 1  # attributes
    _, i = varint(record, i)  # timestamp delta
    _, i = varint(record, i)  # offset delta
    key_len, i = varint(record, i)
    return struct.unpack_from(">h", record, i + 2)[0] if key_len >= 4 else -1


def txn_index_wrong_last_offset(root: Path, topic: str, partition: int) -> Fault:
    """Write the partition's first segment's ``.txnindex``, then move its second entry's last
    offset one past its ABORT marker."""
    seg = _segments(root, topic, partition)[0]
    written = write_txn_index(seg)
    pid, first, last, position = written[1]
    with open(seg.log_path[: -len(".log")] + ".txnindex", "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">hqqqq", 0, pid, first, last + 1, first))
    return _loc(seg, "txnindex", position, "txnindex")


def random_payload(root: Path, topic: str, partition: int, codec: int, seed: int = 1) -> Fault:
    """Replace the compressed records of the first v2 batch of ``codec`` in the partition with
    random bytes of the same length (CRC-32C recomputed: only the payload is wrong)."""
    import random

    for seg in _segments(root, topic, partition):
        data = Path(seg.log_path).read_bytes()
        for pos, size, _ in _v2_entries(seg):
            if data[pos + _V2_ATTRIBUTES + 1] & 0x07 == codec:
                noise = random.Random(seed).randbytes(size - _V2_RECORDS)
                with open(seg.log_path, "r+b") as f:
                    f.seek(pos + _V2_RECORDS)
                    f.write(noise)
                    _recompute_crc(f, pos, size)
                return _loc(seg, "log", pos, "structure")
    raise AssertionError(f"no batch of codec {codec} in {topic}-{partition}")
