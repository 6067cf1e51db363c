"""``lazyconv validate`` on logs a real Kafka broker wrote and its log cleaner cleaned
(tests/kafka_logs.py): no violation on any of them, including the compacted transactional
topics (aborted data removed, ABORT markers kept with or without a delete horizon, ``.txnindex``
entries kept or dropped: docs/guide/spark.md, "Cleaned transactional logs"); faults planted in
copies of them are still found at their place."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from lazyconv._cli import main
from lazyconv.logdir._layout import list_segments
from lazyconv.logdir._txnindex import parse_txnindex
from lazyconv.records import MemoryRecords
from lazyconv.spark._partition_checks import check_partition, range_boundary
from lazyconv.spark._planning import plan_ranges
from lazyconv.spark._scan_state import ScanOptions
from lazyconv.spark._segment_scan import scan_range

pytestmark = pytest.mark.kafka

HORIZON = 0x40  # v2 attribute: the batch carries a delete horizon
OPTIONS = ScanOptions(to_magics=(0, 1), chunk_sizes=(16 * 1024, 1024 * 1024))


def validate(root: Path, range_bytes: int = 1 << 30) -> list[dict[str, Any]]:
    """What the Spark job finds (plan, scan every range, reduce per partition), in-process."""
    results = [scan_range(t, OPTIONS) for t in plan_ranges(list_segments(str(root)), range_bytes)]
    found = [v for r in results for v in r["violations"]]
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in results:
        s = r["summary"]
        by_partition.setdefault((s["topic"], s["partition"]), []).append(range_boundary(r))
    for (topic, partition), boundaries in by_partition.items():
        found += check_partition(topic, partition, boundaries)
    return found


def where(found: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(v["topic"], v["segment"], v["file"], v["position"], v["kind"], v["offset"])
            for v in found]


@pytest.fixture
def logs(oracle_log_4, tmp_path: Path) -> Path:
    """A copy of the broker-written partition folders, to plant faults in."""
    target = tmp_path / "logs"
    for part in oracle_log_4.copy.iterdir():
        if part.is_dir():
            shutil.copytree(part, target / part.name)
    return target


def batches(log: Path) -> list[tuple[int, Any]]:
    data = log.read_bytes()
    out, pos = [], 0
    for batch in MemoryRecords(data).batches():
        out.append((pos, batch))
        pos += batch.size_in_bytes
    return out


def abort_markers(log: Path) -> list[tuple[int, Any]]:
    return [(pos, b) for pos, b in batches(log)
            if b.is_control and next(iter(b)).key[2:4] == b"\x00\x00"]


def test_the_cleaned_transactional_logs_hold_the_states_the_rules_are_for(oracle_log_4) -> None:
    """Guards the tests below: the broker's cleaner really left what the relaxed rules accept."""
    once = oracle_log_4.copy / "compacted-once-0" / f"{0:020d}"
    entries = parse_txnindex(once.with_suffix(".txnindex").read_bytes())
    offsets = {o for _, b in batches(once.with_suffix(".log")) for o in range(b.base_offset, b.last_offset + 1)}
    gone = [e for e in entries if e.first_offset not in offsets]
    assert len(entries) == 2 and len(gone) == 1  # P's aborted batches were removed whole
    # the offsets kafka_logs writes (each marker in before the next transaction begins)
    assert [(e.first_offset, e.last_offset) for e in entries] == [(31, 41), (42, 72)]
    empty = [b for _, b in batches(once.with_suffix(".log")) if not b.is_control and b.record_count == 0]
    assert len(empty) == 1 and empty[0].is_transactional  # Q's, kept for its producer state
    markers = abort_markers(once.with_suffix(".log"))
    assert len(markers) == 2 and not any(b.attributes & HORIZON for _, b in markers)
    # a second pass: the marker whose transaction has no batch left lost its entry and got a
    # delete horizon; the one with an empty batch kept both as they were
    twice = oracle_log_4.copy / "compacted-twice-0" / f"{0:020d}"
    entries = parse_txnindex(twice.with_suffix(".txnindex").read_bytes())
    markers = abort_markers(twice.with_suffix(".log"))
    assert len(entries) == 1 and len(markers) == 2
    assert [bool(b.attributes & HORIZON) for _, b in markers] == [
        b.base_offset != entries[0].last_offset for _, b in markers] == [False, True]


# small ranges: a cleaned segment's ABORT markers and their transactions' batches fall in
# different ranges (the reduce decides the markers a range cannot)
RANGE_CUTS = (64 * 1024, 4096, 128)


def test_no_violation_on_the_broker_written_logs(oracle_log_4) -> None:
    assert where(validate(oracle_log_4.copy)) == []
    for range_bytes in RANGE_CUTS:
        assert where(validate(oracle_log_4.copy, range_bytes=range_bytes)) == [], range_bytes


def test_no_violation_on_kafka_3_logs(oracle_log_3) -> None:
    """The same topics written and cleaned by Kafka 3.9 (its cleaner sets delete horizons too)."""
    assert where(validate(oracle_log_3.copy)) == []
    for range_bytes in RANGE_CUTS:
        assert where(validate(oracle_log_3.copy, range_bytes=range_bytes)) == [], range_bytes


@pytest.mark.spark
def test_the_validate_command_exits_0(oracle_log_4, logs: Path, tmp_path: Path, capsys) -> None:
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    status = main(["validate", str(logs), "--chunk-sizes", "16K,1M", "--master", "local[2]",
                   "--out", str(tmp_path / "out"), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "no violations" in printed and "compacted-once " in printed


def _rewrite_batch(log: Path, pos: int, edit: Any) -> None:
    """Apply ``edit`` to the v2 batch at ``pos`` (a bytearray) and recompute its CRC-32C."""
    data = bytearray(log.read_bytes())
    size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
    entry = data[pos:pos + size]
    edit(entry)
    struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    data[pos:pos + size] = entry
    log.write_bytes(bytes(data))


def test_a_flipped_byte_is_a_crc_violation_at_its_batch(logs: Path) -> None:
    log = logs / "compacted-once-0" / f"{0:020d}.log"
    pos, batch = next((p, b) for p, b in batches(log) if b.record_count and not b.is_control)
    data = bytearray(log.read_bytes())
    data[pos + batch.size_in_bytes - 1] ^= 0x5A
    log.write_bytes(bytes(data))
    assert [w[:5] for w in where(validate(logs))] == [
        ("compacted-once", f"{0:020d}.log", "log", pos, "crc")]


def test_a_truncated_segment_is_reported_where_the_torn_batch_starts(logs: Path) -> None:
    log = sorted((logs / "txn-0").glob("*.log"))[-1]  # where segments roll depends on the run
    pos, batch = batches(log)[-1]
    with open(log, "r+b") as f:
        f.truncate(pos + batch.size_in_bytes // 2)
    found = where(validate(logs))
    assert found and all(w[:2] == ("txn", log.name) for w in found)
    assert ("txn", log.name, "log", pos, "truncated") in [w[:5] for w in found]


def test_an_entry_dropped_from_a_never_cleaned_segment_is_reported(logs: Path) -> None:
    index = next(p for p in sorted((logs / "txn-0").glob("*.txnindex")) if p.stat().st_size)
    log = index.with_suffix(".log").name
    entries = parse_txnindex(index.read_bytes())
    index.write_bytes(index.read_bytes()[34:])
    assert where(validate(logs)) == [("txn", log, "txnindex", -1, "txnindex", entries[0].last_offset)]
    index.unlink()
    found = validate(logs)
    assert where(found) == [("txn", log, "txnindex", -1, "txnindex",
                             min(e.last_offset for e in entries))]
    assert "no .txnindex" in found[0]["message"]


def test_an_entry_dropped_while_its_marker_has_no_delete_horizon_is_reported(logs: Path) -> None:
    """Cleaned once: the ABORT markers have no delete horizon yet, so their entries must stay."""
    index = logs / "compacted-once-0" / f"{0:020d}.txnindex"
    entries = parse_txnindex(index.read_bytes())
    index.write_bytes(index.read_bytes()[:34])
    found = validate(logs)
    assert where(found) == [("compacted-once", f"{0:020d}.log", "txnindex", -1, "txnindex",
                             entries[1].last_offset)]
    assert "has no entry" in found[0]["message"]


def test_an_entry_whose_first_offset_is_a_batch_still_in_the_log_is_reported(logs: Path) -> None:
    """P's entry names offsets the cleaner removed; pointed at Q's kept batch it is a fault."""
    index = logs / "compacted-once-0" / f"{0:020d}.txnindex"
    data = bytearray(index.read_bytes())
    q_first = struct.unpack_from(">q", data, 10)[0]
    struct.pack_into(">q", data, 34 + 10, q_first)
    index.write_bytes(bytes(data))
    found = validate(logs)
    assert [w[:5] for w in where(found)] == [
        ("compacted-once", f"{0:020d}.log", "txnindex", 34, "txnindex")]
    assert f"has no batch from offset {q_first}" in found[0]["message"]


def test_a_marker_without_its_delete_horizon_needs_its_entry_again(logs: Path) -> None:
    """Clearing the delete horizon of the ABORT marker whose entry the second pass dropped
    makes it a marker never cleaned: its missing entry is a fault."""
    log = logs / "compacted-twice-0" / f"{0:020d}.log"
    listed = {e.last_offset for e in parse_txnindex(log.with_suffix(".txnindex").read_bytes())}
    (pos, marker), = [(pos, b) for pos, b in abort_markers(log) if b.base_offset not in listed]

    def clear(entry: bytearray) -> None:
        entry[22] &= ~HORIZON & 0xFF

    _rewrite_batch(log, pos, clear)
    found = validate(logs)
    assert where(found) == [("compacted-twice", f"{0:020d}.log", "txnindex", -1, "txnindex",
                             marker.base_offset)]
    assert "has no entry" in found[0]["message"]
