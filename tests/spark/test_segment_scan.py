"""The one-pass range scan, the derived lazy send, byte ranges and the per-partition reduce,
without Spark (fast)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lazyconv.fixtures import generate
from lazyconv.logdir._layout import list_segments
from lazyconv.spark._conversion_check import check_conversions
from lazyconv.spark._partition_checks import check_partition, range_boundary
from lazyconv.spark._planning import pack_tasks, plan_ranges
from lazyconv.spark._scan_state import ScanOptions
from lazyconv.spark._segment_check import check_segment
from lazyconv.spark._segment_scan import scan_range
from tests.fault_planting import (
    corrupted_copy,
    leader_epoch_backwards,
    leader_epoch_backwards_across_segments,
    segment_base_overlap,
    short_v2_length,
    trailing_zeros,
    txn_index_wrong_last_offset,
    write_txn_index,
    wrong_max_timestamp,
)

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"
KIB = 1024


def _place(v):
    return (v["topic"], v["partition"], v["segment"], v["file"], v["position"], v["kind"])


def _validate_dir(root: Path, range_bytes: int = 1 << 30,
                  options: ScanOptions | None = None) -> tuple[list, list]:
    """Everything the Spark job does, in one process: plan, scan every range, reduce."""
    ranges = plan_ranges(list_segments(str(root)), range_bytes)
    results = [scan_range(t, options or ScanOptions()) for t in ranges]
    found = [v for r in results for v in r["violations"]]
    by_partition: dict = {}
    for r in results:
        s = r["summary"]
        by_partition.setdefault((s["topic"], s["partition"]), []).append(range_boundary(r))
    for (topic, partition), boundaries in by_partition.items():
        found += check_partition(topic, partition, boundaries)
    return found, results


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "logs"
    shutil.copytree(COMMITTED, target)
    return target


def test_committed_fixtures_are_clean_through_plan_scan_and_reduce(copy: Path) -> None:
    entries = 0
    for seg in list_segments(str(copy)):
        if seg.topic == "transactions":
            written = write_txn_index(seg)  # Kafka's .txnindex for the aborted transactions
            assert written
            entries += len(written)
    found, results = _validate_dir(copy)
    assert found == []
    assert sum(r["summary"]["txnindex_entries"] for r in results) == entries


@pytest.mark.parametrize(("planter", "topic"), [
    (segment_base_overlap, "codecs"),
    (leader_epoch_backwards, "headers"),
    (leader_epoch_backwards_across_segments, "upgraded"),
    (wrong_max_timestamp, "idempotent"),
    (short_v2_length, "nulls"),
    (txn_index_wrong_last_offset, "transactions"),
])
def test_each_new_fault_is_found_at_its_place(copy: Path, planter, topic: str) -> None:
    fault = planter(copy, topic, 0)
    found, _ = _validate_dir(copy)
    assert fault in {_place(v) for v in found}, found
    hit = next(v for v in found if _place(v) == fault)
    assert hit["severity"] == "error"
    if fault[3] == "log" and fault[4] > 0:
        assert hit["offset"] is not None  # the Kafka offset besides the byte position


def test_short_v2_length_is_structure_not_crc(copy: Path) -> None:
    fault = short_v2_length(copy, "nulls", 0)
    found, _ = _validate_dir(copy)
    at_fault = [v["kind"] for v in found if v["position"] == fault[4] and v["file"] == "log"
                and v["segment"] == fault[2] and v["topic"] == "nulls"]
    assert at_fault == ["structure"]


def test_missing_txn_index_entry_is_reported_with_the_marker_offset(copy: Path) -> None:
    seg = next(s for s in list_segments(str(copy)) if s.topic == "transactions")
    written = write_txn_index(seg)
    path = Path(seg.log_path[: -len(".log")] + ".txnindex")
    path.write_bytes(path.read_bytes()[34:])  # drop the first entry
    found = check_segment(seg)["violations"]
    assert [(v["file"], v["kind"], v["offset"]) for v in found] == [
        ("txnindex", "txnindex", written[0][2])]


def test_trailing_zeros_warn_at_the_end_of_a_partition_and_fail_before_another_segment(
        copy: Path) -> None:
    warn = trailing_zeros(copy, "codecs", 0, last=True)
    fail = trailing_zeros(copy, "codecs", 1, last=False)
    found, _ = _validate_dir(copy)
    by_place = {_place(v): v["severity"] for v in found}
    assert by_place[warn] == "warning"
    assert by_place[fail] == "error"
    assert len(found) == 2


def test_a_time_index_that_is_a_directory_is_a_violation_not_a_crash(copy: Path) -> None:
    seg = next(s for s in list_segments(str(copy)) if s.topic == "tiny")
    os.remove(seg.timeindex_path)
    os.mkdir(seg.timeindex_path)
    found = check_segment(seg)["violations"]
    assert [(v["file"], v["position"], v["kind"]) for v in found] == [
        ("timeindex", -1, "unreadable")]


def test_an_unexpected_exception_becomes_internal_error_at_its_place(
        copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lazyconv.spark._segment_scan as scan_module

    def broken(scan):
        raise RuntimeError("boom")

    monkeypatch.setattr(scan_module, "check_time_index", broken)
    seg = next(s for s in list_segments(str(copy)) if s.topic == "tiny")
    result = check_segment(seg)
    assert [(v["file"], v["position"], v["kind"]) for v in result["violations"]] == [
        ("timeindex", -1, "internal_error")]
    assert "boom" in result["violations"][0]["message"]
    assert result["summary"]["records"] > 0  # the log pass before it still counted


# --- the derived lazy send equals the real one -------------------------------------------------

_COMPARED = ("records_expected", "records_delivered", "fetches", "bytes_committed",
             "bytes_written", "bytes_valid", "padding_bytes", "discarded_bytes", "chunks",
             "records_converted", "temporary_memory_bytes", "zstd_batches", "stalls", "ok")


@pytest.mark.parametrize("fetch_max_bytes", [
    8 * KIB, pytest.param(1024 * KIB, marks=pytest.mark.slow)])
def test_derived_per_chunk_size_figures_equal_the_real_lazy_send(fetch_max_bytes: int) -> None:
    """One conversion per batch and arithmetic per chunk size give exactly what running
    LazyDownConvertedRecords per chunk size gives (cuts, padding, chunks, stats, stalls)."""
    chunks = (16 * KIB, 1024 * KIB)
    stalls = padding = 0
    for seg in list_segments(str(COMMITTED)):
        if seg.partition:
            continue  # partition 0 of each topic has every kind of batch
        result = check_segment(seg, ScanOptions((0, 1), chunks, fetch_max_bytes))
        assert result["violations"] == []
        derived = {(c["to_magic"], c["chunk_size"]): c for c in result["conversions"]}
        for to_magic in (0, 1):
            real = check_conversions(seg, to_magic, list(chunks), fetch_max_bytes)
            for chunk, ref in zip(chunks, real, strict=True):
                got = derived[(to_magic, chunk)]
                assert {k: got[k] for k in _COMPARED} == {k: ref["stats"][k] for k in _COMPARED}
                stalls += got["stalls"]
                padding += got["padding_bytes"]
    assert padding > 0
    if fetch_max_bytes < 64 * KIB:
        assert stalls > 0  # the consumer's stall path was exercised too


def test_derived_send_sees_a_lost_record() -> None:
    """A consumer that receives other records than expected is a conversion violation."""
    import lazyconv.spark._scan_conversions as conversions_module

    seg = next(s for s in list_segments(str(COMMITTED)) if s.topic == "tiny")
    real = conversions_module._digest_delivered
    lost = []

    def lossy(data, min_offset):
        valid, last, count, total = real(data, min_offset)
        if count and not lost:  # the first record received goes missing
            lost.append(count)
            return valid, last, count - 1, total
        return valid, last, count, total

    conversions_module._digest_delivered = lossy
    try:
        result = check_segment(seg, ScanOptions((0,), (16 * KIB,)))
    finally:
        conversions_module._digest_delivered = real
    assert [v["kind"] for v in result["violations"]] == ["conversion"]
    assert not result["conversions"][0]["ok"]


# --- byte ranges -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big") / "logs"
    generate(root, 2 * 1024 * KIB, seed=5, profile="headers", segment_bytes=1024 * KIB)
    return root


def test_large_segments_are_cut_at_index_entries_and_agree_with_whole_scans(
        big_segments: Path) -> None:
    segments = list_segments(str(big_segments))
    ranges = plan_ranges(segments, 128 * KIB)
    assert len(ranges) > 2 * len(segments)
    found, results = _validate_dir(big_segments, 128 * KIB,
                                   ScanOptions((1,), (16 * KIB,), 64 * KIB))
    assert found == []
    whole = [check_segment(s) for s in segments]
    for key in ("records", "batches", "index_entries", "timeindex_entries"):
        assert sum(r["summary"][key] for r in results) == sum(w["summary"][key] for w in whole)
    assert (sum(r["summary"]["checksum"] for r in results) % (1 << 64)
            == sum(w["summary"]["checksum"] for w in whole) % (1 << 64))
    assert all(c["ok"] for r in results for c in r["conversions"])


def test_conversion_memory_is_a_fetch_window_not_the_segment(big_segments: Path) -> None:
    seg = list_segments(str(big_segments))[0]
    result = check_segment(seg, ScanOptions((0,), (16 * KIB,), 16 * KIB))
    assert result["conversions"][0]["ok"]
    peak = result["conversions"][0]["window_peak_bytes"]
    assert 0 < peak < 8 * 16 * KIB < seg.size // 4


def test_offsets_going_back_across_a_range_boundary_are_found(
        big_segments: Path, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    shutil.copytree(big_segments, root)
    seg = list_segments(str(root))[0]
    second_range = plan_ranges([seg], 128 * KIB)[1]
    # the batch at the range start gets the base offset of the segment's first batch
    with open(seg.log_path, "r+b") as f:
        first = f.read(8)
        f.seek(second_range.start)
        f.write(first)
    found, _ = _validate_dir(root, 128 * KIB)
    assert (seg.topic, 0, seg.name, "log", second_range.start, "offset_order") in {
        _place(v) for v in found}


def test_packing_balances_bytes() -> None:
    segments = list_segments(str(COMMITTED))
    packed = pack_tasks(plan_ranges(segments, 1 << 30), 4)
    loads = [0] * 4
    for b, task in packed:
        loads[b] += task.stop - task.start
    assert sum(loads) == sum(s.size for s in segments)
    largest = max(s.size for s in segments)
    assert max(loads) - min(loads) <= largest


@pytest.mark.timeout(60)
def test_a_fifo_under_a_file_url_logdir_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    """LOGDIR as a file:// URL is read as its local path: through fsspec, the scan opened a
    FIFO named like a segment and blocked for ever (a local path's FIFO is ``unreadable``)."""
    pytest.importorskip("fsspec")
    from lazyconv.spark._listing import list_log_directory

    shutil.copytree(COMMITTED / "tiny-0", tmp_path / "tiny-0")
    fifo = tmp_path / "tiny-0" / "00000000000099999999.log"
    os.mkfifo(fifo)
    listing = list_log_directory(tmp_path.as_uri())
    assert listing.logdir == str(tmp_path)
    assert listing.segments[-1].log_path == str(fifo)
    found = [v for t in plan_ranges(listing.segments, 1 << 30)
             for v in scan_range(t, ScanOptions())["violations"]]
    assert [(v["kind"], v["path"]) for v in found if v["kind"] == "unreadable"] == [
        ("unreadable", str(fifo))]


def test_txnindex_checks_hold_when_ranges_cut_inside_transactions(copy: Path) -> None:
    """A range that starts inside an aborted transaction does not see its first batch: the
    entry's first offset (before the range) is not a violation there, for any cut."""
    entries = 0
    for seg in list_segments(str(copy)):
        if seg.topic == "transactions":
            entries += len(write_txn_index(seg))
    for range_bytes in (8 * KIB, 32 * KIB):
        found, results = _validate_dir(copy, range_bytes)
        assert found == []
        assert sum(r["summary"]["txnindex_entries"] for r in results) == entries
        assert sum(r["summary"]["range_index"] > 0 for r in results
                   if r["summary"]["topic"] == "transactions") > 2


@pytest.mark.slow  # over a second: kept out of the quick look
def test_converted_entries_digested_from_bytes_equal_the_record_reader() -> None:
    """The kernel's digest of converted bytes (runs of plain legacy messages in one call, other
    entries by the reader) gives the same last offset, count and digest sum as decoding every
    record, for every target magic, fetch offset and mix of entries."""
    import lazyconv.spark._scan_conversions as conversions_module
    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.records import MemoryRecords

    compared = 0
    for seg in list_segments(str(COMMITTED)):
        with open(seg.log_path, "rb") as f:
            batches = list(MemoryRecords(f.read()).batches())
        for to_magic in (0, 1, 2):
            mixed = bytearray()
            for batch in batches[:16]:
                if batch.magic == 2 and batch.compression.name == "ZSTD" and to_magic < 2:
                    continue
                conv, _ = down_convert_bytes([batch], to_magic, -(1 << 63))
                if not conv:
                    continue
                mixed += conv
                for min_offset in (-1, batch.base_offset + 1, batch.last_offset):
                    fast = conversions_module._digest_delivered(memoryview(conv), min_offset)
                    reference = conversions_module._digest_delivered_by_records(memoryview(conv), min_offset)
                    assert fast == reference
                    assert fast[0] == len(conv)
                    compared += 1
            middle = batches[min(8, len(batches) - 1)].base_offset
            for cut in (len(mixed), len(mixed) * 2 // 3, len(mixed) // 3, 40):
                view = memoryview(mixed)[:cut]  # a committed size cuts the last entry
                fast = conversions_module._digest_delivered(view, middle)
                assert fast == conversions_module._digest_delivered_by_records(view, middle)
                assert fast[0] <= cut
    assert compared > 300


# --- the runs fast path equals the per-entry path ---------------------------------------------

def _comparable(result: dict) -> tuple:
    summary = {k: v for k, v in result["summary"].items() if k != "check_seconds"}
    conversions = [{k: v for k, v in c.items() if k != "window_peak_bytes"}
                   for c in result["conversions"]]
    return summary, result["violations"], conversions, result["boundary"]


def _faulty_copy(tmp_path: Path) -> Path:
    """The committed fixtures with every planted fault: damaged and out-of-order batches stop
    the runs of sound batches where the per-entry path must report them."""
    root = tmp_path / "faulty"
    corrupted_copy(COMMITTED, root)
    for planter, topic in ((segment_base_overlap, "codecs"), (leader_epoch_backwards, "headers"),
                           (wrong_max_timestamp, "idempotent"), (short_v2_length, "nulls"),
                           (leader_epoch_backwards_across_segments, "upgraded")):
        planter(root, topic, 1)
    return root


@pytest.mark.parametrize("faulty", [pytest.param(False, marks=pytest.mark.slow), True],
                         ids=["clean", "faulty"])
@pytest.mark.slow  # over a second: kept out of the quick look
def test_runs_of_sound_batches_give_what_the_per_entry_path_gives(
        faulty: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Taking runs of sound v2 batches in one kernel call (plain and compressed, their
    conversions and the derived send) changes no figure, violation or boundary, on clean logs
    and on logs where faults cut the runs, in whole segments and in byte ranges."""
    import lazyconv.spark._segment_scan as scan_module

    root = _faulty_copy(tmp_path) if faulty else COMMITTED
    options = ScanOptions((0, 1), (16 * KIB, 1024 * KIB), 8 * KIB)
    tasks = plan_ranges(list_segments(str(root)), 64 * KIB)
    assert any(t.range_count > 1 for t in tasks)
    fast = [_comparable(scan_range(t, options)) for t in tasks]
    monkeypatch.setattr(scan_module, "take_runs", lambda scan, reader, pos, end: pos)
    per_entry = [_comparable(scan_range(t, options)) for t in tasks]
    assert fast == per_entry
    if faulty:
        assert sum(len(r[1]) for r in fast) >= 10


def test_a_last_offset_beyond_int64_is_reported_and_the_scan_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose base offset + last offset delta leaves int64 is an offset fault the
    per-entry path reports; the runs must not turn it into an internal error."""
    import struct

    import lazyconv.spark._segment_scan as scan_module
    from lazyconv.records import RecordsBuilder
    from lazyconv.records._codec import crc32c

    def batch(base: int, delta: int | None = None) -> bytes:
        builder = RecordsBuilder(2, base_offset=base)
        builder.append(base, 1_700_000_000_000, b"k", b"v")
        raw = bytearray(builder.build())
        if delta is not None:  # last offset delta, CRC recomputed
            struct.pack_into(">i", raw, 23, delta)
            struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
        return bytes(raw)

    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(batch((1 << 63) - 2, 5) + batch(7))
    task = plan_ranges(list_segments(str(tmp_path)), 1 << 30)[0]
    results = []
    for runs in (True, False):
        if not runs:
            monkeypatch.setattr(scan_module, "take_runs", lambda scan, reader, pos, end: pos)
        result = scan_range(task, ScanOptions((0,), (16 * KIB,)))
        results.append(_comparable(result))
        kinds = [v["kind"] for v in result["violations"]]
        assert "offset_order" in kinds and "internal_error" not in kinds
        assert result["summary"]["batches"] == 2
    assert results[0] == results[1]


def test_a_zstd_batch_whose_offsets_go_back_does_not_keep_the_consumer_fetching() -> None:
    """Offsets going back (a fault the checks report) must not make the emulated consumer
    step back to the same fetch for ever: a control batch, a zstd batch whose last offset is
    below it, then a data batch."""
    from lazyconv.records import RecordsBuilder
    from lazyconv.spark._derived_conversion import ConvertedBatch, DerivedConsumer
    from lazyconv.spark._scan_conversions import _digest_delivered

    builder = RecordsBuilder(0, base_offset=11)
    for offset in range(11, 21):
        builder.append(offset, -1, b"k", b"v")
    converted = bytes(builder.build())
    consumer = DerivedConsumer(0, (1024,), 100, 0, _digest_delivered)
    for batch in (ConvertedBatch(0, 100, 10, False, b"", 0, 0, True, None),
                  ConvertedBatch(100, 100, 5, True, b"", 0, 0, False, None),
                  ConvertedBatch(200, 100, 20, False, converted, 10, 100 + len(converted), True, 20)):
        consumer.add(batch)
    consumer.finish(300)
    totals = consumer.totals
    assert totals.fetches <= 5 and totals.zstd_batches == 1
    assert totals.delivered == 10  # the data batch after the zstd one is still received


@pytest.mark.parametrize("codec", [0, 1])
def test_a_header_key_that_is_not_utf8_is_no_violation(tmp_path: Path, codec: int) -> None:
    """Kafka stores such keys (docs/differences.md): no ``structure`` finding, alone or after a
    legacy entry, and the down-conversion check's consumers receive every record."""
    from lazyconv.records._builder import RecordsBuilder
    from tests.records.test_header_keys import ODD_KEYS, VALID_KEYS, batch

    legacy = RecordsBuilder(1, base_offset=0)
    legacy.append(0, 5, b"k", b"v")
    for name, entries in (("alone", [batch(codec)[0]]), ("after", [legacy.build(), batch(codec)[0]])):
        part = tmp_path / name / "t-0"
        part.mkdir(parents=True)
        (part / f"{10 if name == 'alone' else 0:020d}.log").write_bytes(b"".join(entries))
        found, results = _validate_dir(tmp_path / name, options=ScanOptions(to_magics=(0, 1), chunk_sizes=(16384,)))
        assert [(v["file"], v["kind"]) for v in found if v["file"] == "log"] == []
        assert sum(r["summary"]["records"] for r in results) == len(ODD_KEYS + VALID_KEYS) + (name != "alone")
        rows = [c for r in results for c in r["conversions"]]
        assert len(rows) == 2 and all(c["records_delivered"] == c["records_expected"] > 0 for c in rows)
