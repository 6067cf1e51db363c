"""The per-partition reduce: what no single byte range can see.

Given the boundary of every range of a partition (first/last offset and epoch, the max
timestamp of the range, where its scan stopped, the time-index entries that depend on the log
before it), :func:`check_partition` checks, in segment and byte order: ranges of a segment
meet exactly; offsets keep increasing from one range and one segment to the next; a segment's
base offset (its file name) is above the previous segment's last offset; partition leader
epochs never go backwards; and the deferred ``.timeindex`` entries equal the max timestamp of
the log up to their batch.
"""

from __future__ import annotations

from typing import Any

from lazyconv.spark.violations import violation

__all__ = ["range_boundary", "check_partition"]


def range_boundary(result: dict[str, Any]) -> dict[str, Any]:
    """The small part of a :func:`~lazyconv.spark.segment_scan.scan_range` result the reduce
    needs (shipped per range through the shuffle)."""
    s = result["summary"]
    return {"segment": s["segment"], "base_offset": s["base_offset"], "start": s["start"],
            "end": s["end"], **result["boundary"]}


def check_partition(topic: str, partition: int,
                    ranges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Violations between the ranges and segments of one partition."""
    found: list[dict[str, Any]] = []

    def add(segment: str, file: str, position: int, kind: str, message: str,
            offset: int | None) -> None:
        found.append(violation(topic, partition, segment, file, position, kind, message,
                               offset=offset))

    prev: dict[str, Any] | None = None
    last_offset: int | None = None  # of the partition so far
    last_segment_name = ""
    epoch: int | None = None
    segment_max_ts = -1
    for r in sorted(ranges, key=lambda r: (r["base_offset"], r["start"])):
        same_segment = prev is not None and prev["base_offset"] == r["base_offset"]
        if not same_segment:
            segment_max_ts = -1
            if last_offset is not None and r["base_offset"] <= last_offset:
                add(r["segment"], "log", 0, "segment_overlap",
                    f"segment base offset {r['base_offset']} is not above offset {last_offset} "
                    f"where segment {last_segment_name} ends", r["base_offset"])
        elif prev is not None and prev["scan_end"] == prev["end"] and prev["scan_end"] != r["start"]:
            add(r["segment"], "log", r["start"], "range_gap",
                f"the previous byte range's last entry ends at byte {prev['scan_end']}, not at "
                f"this range's start {r['start']}", r["first_offset"])
        first = r["first_offset"]
        if first is not None and last_offset is not None and first <= last_offset:
            if same_segment:
                add(r["segment"], "log", r["start"], "offset_order",
                    f"offset {first} at the start of this byte range does not follow offset "
                    f"{last_offset}", first)
            else:
                add(r["segment"], "partition", -1, "segment_order",
                    f"segment {r['segment']} starts at offset {first}, not after offset "
                    f"{last_offset} where segment {last_segment_name} ends", first)
        if r["first_epoch"] is not None and epoch is not None and r["first_epoch"] < epoch:
            add(r["segment"], "log", r.get("first_epoch_position", r["start"]), "leader_epoch",
                f"partition leader epoch {r['first_epoch']} at the start of "
                f"{'this range' if same_segment else 'the segment'} is below {epoch} before it",
                first)
        for index_position, ts, offset, local in r["deferred_time_entries"]:
            want = max(segment_max_ts, local)
            if ts != want:
                add(r["segment"], "timeindex", index_position, "timeindex",
                    f"timestamp {ts} for offset {offset} differs from the log's max timestamp "
                    f"up to that batch, {want}", offset)
        segment_max_ts = max(segment_max_ts, r["max_timestamp"])
        if r["last_epoch"] is not None:
            epoch = r["last_epoch"] if epoch is None else max(epoch, r["last_epoch"])
        if r["last_offset"] is not None:
            last_offset = r["last_offset"] if last_offset is None else max(last_offset,
                                                                           r["last_offset"])
            last_segment_name = r["segment"]
        prev = r
    return found
