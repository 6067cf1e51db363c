"""The per-partition reduce: what no single byte range can see.

Given the boundary of every range of a partition (first/last offset and epoch, the max
timestamp of the range, where its scan stopped, the time-index entries that depend on the log
before it), :func:`check_partition` checks, in segment and byte order: ranges of a segment
meet exactly; offsets keep increasing from one range and one segment to the next; a segment's
base offset (its file name) is above the previous segment's last offset; partition leader
epochs never go backwards; the deferred ``.timeindex`` entries equal the max timestamp of the
log up to their batch; a segment with ABORT markers has a ``.txnindex`` (one finding per
segment, whatever its ranges); and an ABORT marker a range could not decide alone (a delete
horizon, no entry, no batch of its transaction before it in the range) has no batch of its
transaction in the segment's earlier ranges. Each comparison is with the batch just before, as within a
range, so a fault is reported once and the same way wherever the ranges are cut.
"""

from __future__ import annotations

from typing import Any

from lazyconv.spark._violations import file_path, marker_without_entry, violation

__all__ = ["range_boundary", "check_partition"]


def range_boundary(result: dict[str, Any]) -> dict[str, Any]:
    """The small part of a :func:`~lazyconv.spark._segment_scan.scan_range` result the reduce
    needs (shipped per range through the shuffle)."""
    s = result["summary"]
    return {"segment": s["segment"], "path": s["path"], "base_offset": s["base_offset"],
            "start": s["start"], "end": s["end"], **result["boundary"]}


def check_partition(topic: str, partition: int, ranges: list[dict[str, Any]], *,
                    contiguous: bool = False) -> list[dict[str, Any]]:
    """Violations between the ranges and segments of one partition; with ``contiguous`` (the
    topic's ``cleanup.policy`` is ``delete``), offsets skipped between them too."""
    found: list[dict[str, Any]] = []

    def add(r: dict[str, Any], file: str, position: int, kind: str, message: str,
            offset: int | None) -> None:
        found.append(violation(topic, partition, r["segment"], file, position, kind, message,
                               offset=offset, path=file_path(r["path"], file)))

    prev: dict[str, Any] | None = None
    last_offset: int | None = None  # of the partition so far
    last_segment_name = ""
    epoch: int | None = None
    segment_max_ts = -1
    # segment -> (ABORT markers, first offset, its first range)
    txn_missing: dict[str, tuple[int, int, dict[str, Any]]] = {}
    txn_open: set[int] = set()  # producers with a batch of an open transaction in the segment
    for r in sorted(ranges, key=lambda r: (r["base_offset"], r["start"])):
        same_segment = prev is not None and prev["base_offset"] == r["base_offset"]
        if not same_segment:
            segment_max_ts = -1
            txn_open = set()
            if last_offset is not None and r["base_offset"] <= last_offset:
                add(r, "log", 0, "segment_overlap",
                    f"segment base offset {r['base_offset']} is not above offset {last_offset} "
                    f"where segment {last_segment_name} ends", r["base_offset"])
        elif prev is not None and prev["scan_end"] == prev["end"] and prev["scan_end"] != r["start"]:
            add(r, "log", r["start"], "range_gap",
                f"the previous byte range's last entry ends at byte {prev['scan_end']}, not at "
                f"this range's start {r['start']}", r["first_offset"])
        first = r["first_offset"]
        if first is not None and last_offset is not None and first <= last_offset:
            if same_segment:
                add(r, "log", r["start"], "offset_order",
                    f"offset {first} at the start of this byte range does not follow offset "
                    f"{last_offset}", first)
            else:
                add(r, "partition", -1, "segment_order",
                    f"segment {r['segment']} starts at offset {first}, not after offset "
                    f"{last_offset} where segment {last_segment_name} ends", first)
        elif (contiguous and first is not None and last_offset is not None
              and first > last_offset + 1):
            add(r, "log", r["start"], "offset_gap",
                f"offsets {last_offset + 1}..{first - 1} are missing before offset {first} "
                f"(only compaction removes offsets; the topic's cleanup.policy is delete)", first)
        if r["first_epoch"] is not None and epoch is not None and r["first_epoch"] < epoch:
            add(r, "log", r.get("first_epoch_position", r["start"]), "leader_epoch",
                f"partition leader epoch {r['first_epoch']} at the start of "
                f"{'this range' if same_segment else 'the segment'} is below {epoch} before it",
                first)
        missing_txn = r.get("aborts_without_txnindex")
        for pid, offset, has_txnindex in r.get("txn_deferred", ()):
            # an ABORT marker with a delete horizon and no entry, the producer's first marker in
            # its range and no batch before it there: a batch of its transaction in an earlier
            # range of the segment means the cleaner never dropped the entry
            if pid not in txn_open:
                continue
            if has_txnindex:
                add(r, "txnindex", -1, "txnindex",
                    marker_without_entry(pid, offset), offset)
            elif missing_txn is None:
                missing_txn = [1, offset]
            else:
                missing_txn = [missing_txn[0] + 1, min(missing_txn[1], offset)]
        txn_open.difference_update(r.get("txn_marked", ()))
        txn_open.update(r.get("txn_open", ()))
        if missing_txn is not None:  # [markers, first offset] of a range; one finding per segment
            count, first_marker, _ = txn_missing.get(r["segment"], (0, missing_txn[1], r))
            txn_missing[r["segment"]] = (count + missing_txn[0], min(first_marker, missing_txn[1]),
                                         r)
        for index_position, ts, offset, local in r["deferred_time_entries"]:
            want = max(segment_max_ts, local)
            if ts != want:
                add(r, "timeindex", index_position, "timeindex",
                    f"timestamp {ts} for offset {offset} differs from the log's max timestamp "
                    f"up to that batch, {want}", offset)
        segment_max_ts = max(segment_max_ts, r["max_timestamp"])
        # the previous batch's values, as within a range: a drop is reported once, where it
        # happens, naming the value just before it
        if r["last_epoch"] is not None:
            epoch = r["last_epoch"]
        if r["last_offset"] is not None:
            last_offset = r["last_offset"]
            last_segment_name = r["segment"]
        prev = r
    for _, (count, first_marker, first_range) in sorted(txn_missing.items()):
        add(first_range, "txnindex", -1, "txnindex",
            f"the segment has {count} ABORT marker(s) (the first at offset {first_marker}) but "
            f"no .txnindex: read_committed consumers would receive the aborted records",
            first_marker)
    return found
