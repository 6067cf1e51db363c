"""The ``.txnindex`` checks of ``lazyconv validate`` on transactional logs the log cleaner
cleaned (docs/guide/spark.md, "Cleaned transactional logs"), on small synthetic segments: the
states the cleaner leaves pass, the same files without the cleaner's traces are still faults.
The real broker's cleaned logs: tests/kafka/test_validate_kafka.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from lazyconv.logdir._layout import list_segments
from lazyconv.logdir._txnindex import AbortedTxn, encode_txnindex_entry
from lazyconv.records._builder import RecordsBuilder, build_end_txn_marker, encode_v2_batch
from lazyconv.spark._partition_checks import check_partition, range_boundary
from lazyconv.spark._planning import plan_ranges
from lazyconv.spark._scan_state import ScanOptions
from lazyconv.spark._segment_scan import scan_range

PID = 7
T = 1_700_000_000_000
HORIZON = 0x40  # the v2 attribute bit: the batch's base timestamp is its delete horizon


def data_batch(first: int, count: int, pid: int = PID, transactional: bool = True) -> bytes:
    b = RecordsBuilder(2, base_offset=first, producer_id=pid if transactional else -1,
                       producer_epoch=0 if transactional else -1, base_sequence=first if transactional else -1,
                       is_transactional=transactional)
    for offset in range(first, first + count):
        b.append(offset, T + offset, b"k%d" % offset, b"v")
    return b.build()


def empty_batch(first: int, last: int, pid: int = PID) -> bytes:
    """A transactional data batch whose records the cleaner removed, kept for the producer's
    state (Kafka's RETAIN_EMPTY): record count 0, the original offset range."""
    return encode_v2_batch(base_offset=first, partition_leader_epoch=-1, attributes=0x10,
                           last_offset_delta=last - first, base_timestamp=T, max_timestamp=T,
                           producer_id=pid, producer_epoch=0, base_sequence=first, record_count=0,
                           payload=b"")


def marker(offset: int, commit: bool, horizon: bool = False, pid: int = PID) -> bytes:
    batch = bytearray(build_end_txn_marker(offset, T + offset, pid, 0, commit))
    if horizon:  # as the cleaner rewrites a marker it will remove after delete.retention.ms
        batch[22] |= HORIZON
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def write(root: Path, batches: list[bytes], entries: list[tuple[int, int]] | None,
          pid: int = PID, base: int = 0) -> Path:
    """One segment of partition t-0 (base offset ``base``) holding ``batches``; a ``.txnindex``
    with the aborted transactions ``(first, last)`` of ``pid`` (``None``: no file)."""
    part = root / "t-0"
    part.mkdir(parents=True, exist_ok=True)
    stem = part / f"{base:020d}"
    stem.with_suffix(".log").write_bytes(b"".join(batches))
    # an offset index entry (last offset, position) per batch: ranges may start at any of them
    index, position = bytearray(), 0
    for batch in batches:
        if position:
            first, = struct.unpack_from(">q", batch)
            delta, = struct.unpack_from(">i", batch, 23)
            index += struct.pack(">ii", first + delta - base, position)
        position += len(batch)
    stem.with_suffix(".index").write_bytes(bytes(index))
    stem.with_suffix(".timeindex").write_bytes(b"")
    if entries is not None:
        stem.with_suffix(".txnindex").write_bytes(b"".join(
            encode_txnindex_entry(AbortedTxn(pid, first, last, first)) for first, last in entries))
    return root


def validate(root: Path, range_bytes: int = 1 << 30) -> list[tuple[str, int | None, str]]:
    """Plan, scan and reduce as the job does; ``(file, offset, message)`` of each violation."""
    results = [scan_range(t, ScanOptions()) for t in plan_ranges(list_segments(str(root)), range_bytes)]
    found = [v for r in results for v in r["violations"]]
    found += check_partition("t", 0, [range_boundary(r) for r in results])
    return [(v["file"], v["kind"] == "txnindex" and v["offset"], v["message"]) for v in found]


# committed 0..1, COMMIT 2, the aborted transaction's batches 3..5 (or what the cleaner left of
# them), ABORT 6, a plain batch 7..8
def log(aborted: list[bytes], abort_horizon: bool = False) -> list[bytes]:
    return [data_batch(0, 2), marker(2, True), *aborted, marker(6, False, abort_horizon),
            data_batch(7, 2, transactional=False)]


def test_an_uncleaned_aborted_transaction_is_clean(tmp_path: Path) -> None:
    assert validate(write(tmp_path, log([data_batch(3, 3)]), [(3, 6)])) == []


def test_after_one_cleaner_pass_the_entry_names_removed_offsets(tmp_path: Path) -> None:
    """Pass 1: the aborted batches are gone (an offset gap 3..5), the ABORT marker has no
    delete horizon yet and its entry keeps its first offset 3."""
    assert validate(write(tmp_path, log([]), [(3, 6)])) == []


def test_a_batch_kept_empty_for_the_producer_state_keeps_the_entry(tmp_path: Path) -> None:
    """The cleaner kept the transaction's last batch 4..5 empty; 3 was removed."""
    assert validate(write(tmp_path, log([empty_batch(4, 5)]), [(3, 6)])) == []


@pytest.mark.parametrize("txnindex", [None, []], ids=["no-file", "empty-file"])
def test_after_two_passes_the_marker_has_a_delete_horizon_and_no_entry(
        tmp_path: Path, txnindex: list | None) -> None:
    assert validate(write(tmp_path, log([], abort_horizon=True), txnindex)) == []


@pytest.mark.parametrize("txnindex", [None, []], ids=["no-file", "empty-file"])
def test_an_abort_marker_without_horizon_still_needs_its_entry(
        tmp_path: Path, txnindex: list | None) -> None:
    found = validate(write(tmp_path, log([]), txnindex))
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 6)]
    assert ("no .txnindex" if txnindex is None else "ABORT marker of producer 7 at offset 6 has no entry") \
        in found[0][2]


def test_a_horizon_does_not_excuse_a_missing_entry_while_data_of_the_transaction_stays(
        tmp_path: Path) -> None:
    found = validate(write(tmp_path, log([data_batch(3, 3)], abort_horizon=True), None))
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 6)]
    found = validate(write(tmp_path / "empty", log([empty_batch(4, 5)], abort_horizon=True), []))
    assert found == [("txnindex", 6, "ABORT marker of producer 7 at offset 6 has no entry")]


@pytest.mark.parametrize(("first", "aborted"), [
    (0, []),  # the start of another transaction's batch
    (1, []),  # inside a batch
    (3, [data_batch(4, 2)]),  # data of the transaction left from 4, offset 3 not in the log
    (4, [data_batch(3, 3)]),  # inside the transaction's first batch
    (-5, [data_batch(3, 3)]),  # negative
    (3 - 2**63, [data_batch(3, 3)]),  # the sign bit of 3 flipped
    (-5, []),
])
def test_an_entry_whose_first_offset_the_log_contradicts_is_still_a_fault(
        tmp_path: Path, first: int, aborted: list[bytes]) -> None:
    """The cleaner removes an aborted transaction's batches whole (keeping at most its last
    one, empty): records of it after an offset gap at the entry's first offset are no trace of
    the cleaner; a negative first offset is in no log."""
    faulty = write(tmp_path, log(aborted), [(first, 6)])
    found = validate(faulty)
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 6)], found
    if first == 3:
        assert "starts at offset 4 in the log, the entry says 3" in found[0][2]
    if first < 0:  # whatever range holds the marker
        size = (faulty / "t-0" / f"{0:020d}.log").stat().st_size
        for range_bytes in range(40, size + 40, 20):
            assert validate(faulty, range_bytes) == found, range_bytes
        assert found[0][2] == f"first offset {first} is negative"


@pytest.mark.parametrize("first", [50, 99, -5, 3 - 2**63])
def test_an_entry_starting_before_the_producers_previous_marker_is_a_fault(
        tmp_path: Path, first: int) -> None:
    """The producer's previous marker (102) is in the range: its transaction began after it,
    whatever offset gap the range starts after."""
    batches = [data_batch(100, 2), marker(102, False), data_batch(103, 3), marker(106, False)]
    root = write(tmp_path, batches, [(100, 102), (first, 106)])
    found = validate(root)
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 106)], found
    if first > 0:
        assert f"starts at offset 103 in the log, the entry says {first}" in found[0][2]
    assert validate(write(tmp_path / "ok", batches, [(100, 102), (103, 106)])) == []


@pytest.mark.parametrize("kept", [[], [empty_batch(104, 105)]], ids=["removed", "kept-empty"])
def test_a_gap_before_the_producers_previous_marker_is_no_cleaned_start(
        tmp_path: Path, kept: list[bytes]) -> None:
    """Offset 101 is in a gap but before the producer's marker 102: not where its next
    transaction (ABORT 106) began, whatever the cleaner removed after 102."""
    batches = [data_batch(100, 1), marker(102, True), *kept, marker(106, False)]
    found = validate(write(tmp_path, batches, [(101, 106)]))
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 106)], found
    assert validate(write(tmp_path / "ok", batches, [(103, 106)])) == []


def test_an_entry_without_its_marker_is_still_a_fault(tmp_path: Path) -> None:
    found = validate(write(tmp_path, log([]), [(3, 6), (3, 5)]))
    assert [(file, offset) for file, offset, _ in found] == [("txnindex", 5)]
    assert "has no ABORT marker at that offset" in found[0][2]


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_range_cuts_do_not_change_the_findings(tmp_path: Path) -> None:
    """Every cut between batches: the cleaned states pass, each fault is found once, the same
    way (a horizon marker's transaction may begin in an earlier range: the reduce decides)."""
    cleans = [write(tmp_path / "clean", log([empty_batch(4, 5)]), [(3, 6)]),
              write(tmp_path / "pass1", log([]), [(3, 6)]),
              write(tmp_path / "pass2", log([], abort_horizon=True), None),
              write(tmp_path / "pass2-empty-file", log([], abort_horizon=True), []),
              write(tmp_path / "pass2-after-abort",
                    [data_batch(0, 2), marker(2, False), data_batch(3, 2, transactional=False),
                     marker(6, False, True), data_batch(7, 2, transactional=False)], [(0, 2)])]
    faults = [write(tmp_path / "faulty", log([]), None),
              write(tmp_path / "horizon-data", log([data_batch(3, 3)], abort_horizon=True), None),
              write(tmp_path / "horizon-data-empty-file", log([data_batch(3, 3)], abort_horizon=True),
                    []),
              write(tmp_path / "horizon-empty-batch", log([empty_batch(4, 5)], abort_horizon=True),
                    []),
              write(tmp_path / "horizon-two-batches",
                    log([data_batch(3, 1), data_batch(4, 1, transactional=False), data_batch(5, 1)],
                        abort_horizon=True), None),
              write(tmp_path / "negative", log([data_batch(3, 3)]), [(-5, 6)])]
    size = (faults[-2] / "t-0" / f"{0:020d}.log").stat().st_size
    for root in cleans + faults:
        whole = validate(root)
        assert (whole == []) == (root in cleans), (root.name, whole)
        for range_bytes in range(40, size + 40, 20):
            assert validate(root, range_bytes) == whole, (root.name, range_bytes)
        if root in faults:
            assert [(f, o) for f, o, _ in whole] == [("txnindex", 6)], (root.name, whole)
    ranges = plan_ranges(list_segments(str(cleans[0])), 40)
    assert len(ranges) >= 5  # nearly a range per batch: the cuts test what they say


def test_a_horizon_marker_is_judged_by_its_own_segment(tmp_path: Path) -> None:
    """The cleaner writes each group of segments it cleans as one segment and sees only that
    group's batches: a batch of the transaction kept empty in the segment before (the
    producer's last) does not keep the entry of a marker in the next segment; in the marker's
    own segment, in any earlier range, it does."""
    kept = [data_batch(0, 2), marker(2, True), empty_batch(3, 5)]
    after = [data_batch(6, 1, pid=8), marker(7, False, True), data_batch(8, 2, transactional=False),
             data_batch(10, 1, pid=8), marker(11, True, pid=8)]
    clean = write(write(tmp_path / "clean", kept, None), after, None, base=6)
    faulty = write(tmp_path / "faulty", kept + after, None)
    size = sum(len(b) for b in kept + after)
    for range_bytes in [*range(40, size + 40, 20), 1 << 30]:
        assert validate(clean, range_bytes) == [], range_bytes
        found = validate(faulty, range_bytes)
        assert [(f, o) for f, o, _ in found] == [("txnindex", 7)], (range_bytes, found)
