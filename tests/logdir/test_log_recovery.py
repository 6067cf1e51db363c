"""Log recovery when a partition is opened (Kafka's rules): a torn end of the active segment is
cut off and everything before it kept, index files are rebuilt, corruption elsewhere is reported
(logged, and an error for reads reaching it) instead of hiding the rest of the partition."""

from __future__ import annotations

import logging
import struct

import pytest

from lazyconv.errors import CorruptRecordError, StorageError
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._index import IndexBuilder
from lazyconv.logdir._partition import LogConfig
from lazyconv.logdir._snapshot import encode_snapshot, snapshot_path
from lazyconv.records import FileRecords, RecordsBuilder
from lazyconv.serve._offsets import split_entries

SEGMENT = f"{0:020d}.log"


def batch(first: int, count: int = 3, value: bytes = b"v") -> bytes:
    builder = RecordsBuilder(2, base_offset=first)
    for offset in range(first, first + count):
        builder.append(offset=offset, timestamp=1_000 + offset, value=value + b"%d" % offset)
    return builder.build()


def write_partition(root, data: bytes, name: str = SEGMENT):
    part = root / "t-0"
    part.mkdir(exist_ok=True)
    (part / name).write_bytes(data)
    return part


def offsets_on_disk(path) -> list[int]:
    with FileRecords.open(path) as records:
        return [r.offset for b in records.batches() for r in b]


GOOD = batch(0) + batch(3)


@pytest.mark.parametrize("tail", [
    pytest.param(b"\x00\x00\x00\x00\x00", id="partial-size-field"),
    pytest.param(batch(6)[: len(batch(6)) // 2], id="half-a-batch"),
    pytest.param(b"\x00" * 300, id="never-written-zeros"),
    pytest.param(batch(6)[:-1] + bytes([batch(6)[-1] ^ 0xFF]), id="last-batch-bad-crc"),
    # a header torn by a power loss across a page: its base offset written, zeros from its size
    # field on (a size of 0 is corruption, but no entry was ever acknowledged there)
    pytest.param(batch(6)[:8] + bytes(len(batch(6)) - 8), id="torn-header-then-zeros"),
])
def test_a_torn_end_is_cut_off_and_everything_before_it_kept(tmp_path, tail, caplog):
    part = write_partition(tmp_path, GOOD + tail)
    with caplog.at_level(logging.WARNING):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert (part / SEGMENT).stat().st_size == len(GOOD)
    assert plog.high_watermark == 6 and offsets_on_disk(part / SEGMENT) == list(range(6))
    assert "torn entry" in caplog.text
    base, _ = plog.append(split_entries(batch(0)))  # and the partition takes appends again
    assert base == 6 and offsets_on_disk(part / SEGMENT) == list(range(9))


@pytest.mark.parametrize(("tail", "cut_offsets", "what"), [
    pytest.param(batch(6)[:-1] + bytes([batch(6)[-1] ^ 0xFF]), (6, 8), "offsets 6-8, its CRC fails",
                 id="last-batch-bad-crc"),
    pytest.param(batch(6)[:40], None, "incomplete, never readable", id="half-a-batch"),
])
def test_a_cut_is_one_warning_and_the_partitions_recovery_report(tmp_path, tail, cut_offsets, what,
                                                                 caplog):
    """The operator learns what a cut took: one warning for the partition with its bytes, the
    offsets of a complete entry cut (a fetch could read it before the crash), the file and byte,
    and the new log end; the report recovery made is kept on the partition (it was discarded,
    the warning named bytes only, and the segment added a second one, "shrank", for the cut)."""
    part = write_partition(tmp_path, GOOD + tail)
    with caplog.at_level(logging.WARNING):
        plog = LogDirectory(tmp_path).partition("t", 0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"recovered t-0: cut {len(tail)} bytes of a torn entry ({what}) off {SEGMENT} "
                        f"at byte {len(GOOD)}; the log now ends at offset 6"]
    report = plog.recovery_report
    assert report is not None and (part / SEGMENT).stat().st_size == len(GOOD)
    assert (report.truncated_bytes, report.truncated_at, report.truncated_offsets) == (
        len(tail), len(GOOD), cut_offsets)
    assert LogDirectory(tmp_path).partition("t", 0).recovery_report.truncated_bytes == 0  # cut once


def test_a_clean_point_at_the_log_end_skips_validation(tmp_path):
    """After a clean shutdown (recovery point = log end) nothing is read again; what was
    appended after the clean point is validated."""
    bad_crc = bytearray(batch(3))
    bad_crc[-1] ^= 0xFF
    part = write_partition(tmp_path, batch(0) + bytes(bad_crc) + batch(6))
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 9\n")
    LogDirectory(tmp_path)
    assert (part / SEGMENT).stat().st_size == 3 * len(batch(0))  # nothing checked, nothing cut
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 3\n")
    logdir = LogDirectory(tmp_path)
    plog = logdir.partition("t", 0)
    assert plog.high_watermark == 3  # a bad CRC with a batch after it is fenced ...
    assert (part / SEGMENT).stat().st_size == 3 * len(batch(0))  # ... and kept


def test_a_bad_crc_in_the_middle_is_reported_not_cut_and_fenced(tmp_path, caplog):
    """The entries before it are served; a fetch reaching it fails, an append is refused
    (appending after it would bury it), nothing is cut: it was served and appended to before
    (found by a review), contrary to what robustness.md promised."""
    bad = bytearray(batch(3))
    bad[-1] ^= 0xFF
    part = write_partition(tmp_path, batch(0) + bytes(bad) + batch(6))
    with caplog.at_level(logging.ERROR):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert (part / SEGMENT).stat().st_size == 3 * len(batch(0))
    assert caplog.text.count("fails its CRC check") == 1 and "offsets 3-5" in caplog.text
    assert plog.high_watermark == 3 and plog.locate(0).position == 0
    with pytest.raises(CorruptRecordError, match="fails its CRC check"):
        plog.locate(3)
    with pytest.raises(StorageError, match="corrupt"):
        plog.append(split_entries(batch(0)))


def test_a_huge_size_field_mid_segment_is_reported_and_fetches_reaching_it_fail(tmp_path, caplog):
    """0x7fffffff in the size field of the second batch: the first stays readable, the rest of
    the partition is not silently hidden: it is logged, a read reaching it fails, an append is
    refused (appending after it would bury it), and nothing is cut off."""
    broken = bytearray(batch(3))
    struct.pack_into(">i", broken, 8, 0x7FFFFFFF)
    data = batch(0) + bytes(broken) + batch(6)
    part = write_partition(tmp_path, data)
    with caplog.at_level(logging.ERROR):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert "2147483647" in caplog.text and "cannot be read" in caplog.text
    assert f"the {len(data) - len(batch(0))} bytes after it are kept" in caplog.text
    assert (part / SEGMENT).stat().st_size == len(data)
    assert plog.locate(0).position == 0
    with pytest.raises(CorruptRecordError) as info:
        plog.locate(3)
    assert info.value.position == len(batch(0))
    with pytest.raises(StorageError, match="corrupt"):
        plog.append(split_entries(batch(0)))


def test_an_entry_running_past_the_end_of_a_rolled_segment_is_corruption(tmp_path, caplog):
    part = write_partition(tmp_path, batch(0) + batch(3)[:40])
    (part / f"{6:020d}.log").write_bytes(batch(6))
    with caplog.at_level(logging.ERROR):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert "runs past the end" in caplog.text or "rolled segment" in caplog.text
    with pytest.raises(CorruptRecordError):
        plog.locate(3)
    assert plog.locate(6).position == 0  # the next segment is served


def test_missing_and_torn_index_files_are_rebuilt(tmp_path):
    """Every segment's .index/.timeindex equals what Kafka's rule (and lazyconv's fixture
    writer) gives for its batches."""
    batches = [batch(3 * i, value=b"x" * 2000) for i in range(12)]
    part = write_partition(tmp_path, b"".join(batches[:6]))
    (part / f"{18:020d}.log").write_bytes(b"".join(batches[6:]))
    (part / f"{0:020d}.timeindex").write_bytes(b"\x01" * 7)  # torn
    LogDirectory(tmp_path)
    for base, group, rolled in ((0, batches[:6], True), (18, batches[6:], False)):
        builder = IndexBuilder(base)
        position = 0
        for i, data in enumerate(group):
            builder.append(position, len(data), base + 3 * i + 2, 1_000 + base + 3 * i + 2)
            position += len(data)
        offsets, times = builder.close(rolled=rolled)
        assert offsets  # the segments are large enough to be indexed
        assert (part / f"{base:020d}.index").read_bytes() == offsets
        assert (part / f"{base:020d}.timeindex").read_bytes() == times


def test_snapshots_past_the_recovered_end_are_deleted(tmp_path):
    part = write_partition(tmp_path, GOOD + batch(6)[:30])
    for offset in (3, 6, 9):
        snapshot_path(part, offset).write_bytes(encode_snapshot([]))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.snapshot_offsets == [3, 6]
    assert sorted(p.name for p in part.glob("*.snapshot")) == [f"{3:020d}.snapshot", f"{6:020d}.snapshot"]


def test_a_read_only_directory_is_served_as_it_is(tmp_path, monkeypatch, caplog):
    part = write_partition(tmp_path, GOOD + b"\x00\x00\x00")

    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("lazyconv.logdir._recovery.os.truncate", refuse)
    with caplog.at_level(logging.ERROR):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 6 and (part / SEGMENT).stat().st_size == len(GOOD) + 3
    assert "cannot cut the torn end" in caplog.text


def test_appends_roll_segments_and_write_kafkas_indexes(tmp_path):
    (tmp_path / "t-0").mkdir()
    plog = LogDirectory(tmp_path, LogConfig(segment_bytes=20_000)).partition("t", 0)
    for i in range(30):
        assert plog.append(split_entries(batch(0, value=b"y" * 1500)))[0] == 3 * i
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 3 and bases[0] == 0
    for j, segment in enumerate(plog.segments):
        assert segment.scanned_bytes <= 20_000
        builder = IndexBuilder(segment.base_offset)
        for entry in segment.entries:
            builder.append(entry.position, entry.size, entry.last_offset, entry.max_timestamp)
        offsets, times = builder.close(rolled=j < len(plog.segments) - 1)
        assert segment.index_path.read_bytes() == offsets
        assert segment.timeindex_path.read_bytes() == times


def expected_index_files(part, rolled_bases: set[int]) -> dict[str, bytes]:
    """What Kafka's rule gives for each segment's .index and .timeindex (a rolled segment ends
    with the time entry of its largest timestamp, as Kafka's roll appends it)."""
    files = {}
    for path in sorted(part.glob("*.log")):
        base = int(path.stem)
        builder = IndexBuilder(base)
        position = 0
        with FileRecords.open(path) as records:
            for b in records.batches():
                builder.append(position, b.size_in_bytes, b.last_offset, b.max_timestamp)
                position += b.size_in_bytes
        offsets, times = builder.close(rolled=base in rolled_bases)
        files[f"{base:020d}.index"], files[f"{base:020d}.timeindex"] = offsets, times
    return files


@pytest.mark.parametrize("clean_point", ["checkpoint", "snapshot"])
def test_nothing_below_a_clean_point_at_the_log_end_is_read_again(tmp_path, clean_point):
    """A recovery point or a producer snapshot at the log end (both written once the log
    before them was on disk) is a clean point: a bad CRC below it is not looked for, so it is
    neither cut nor fenced (Kafka validates only from its recovery point)."""
    bad_crc = bytearray(batch(3))
    bad_crc[-1] ^= 0xFF
    part = write_partition(tmp_path, batch(0) + bytes(bad_crc) + batch(6))
    if clean_point == "checkpoint":
        (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 9\n")
    else:
        snapshot_path(part, 9).write_bytes(encode_snapshot([]))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 9 and plog.locate(3).position == len(batch(0))
    assert (part / SEGMENT).stat().st_size == 3 * len(batch(0))


@pytest.mark.parametrize("chunk", [None, 100])
def test_entries_after_a_clean_point_inside_the_segment_are_validated_and_kept(
        tmp_path, monkeypatch, caplog, chunk):
    """A recovery point in the middle of the active segment: the entries from it on are read
    (from their own positions, whatever the read buffer holds) and, being intact, all kept."""
    if chunk is not None:
        monkeypatch.setattr("lazyconv.logdir._recovery._READ_CHUNK", chunk)
    data = GOOD + batch(6) + batch(9)
    part = write_partition(tmp_path, data)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 3\n")
    with caplog.at_level(logging.WARNING):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 12 and offsets_on_disk(part / SEGMENT) == list(range(12))
    assert (part / SEGMENT).stat().st_size == len(data) and not caplog.records


def test_a_second_bad_crc_after_the_first_changes_nothing(tmp_path, caplog):
    """The partition is fenced at the first entry that fails its CRC; one after it (and a bad
    last entry) is neither served nor cut off."""
    bad = [bytearray(batch(o)) for o in (3, 9)]
    for b in bad:
        b[-1] ^= 0xFF
    data = batch(0) + bytes(bad[0]) + batch(6) + bytes(bad[1]) + batch(12)
    part = write_partition(tmp_path, data)
    with caplog.at_level(logging.ERROR):
        plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 3 and "offsets 3-5" in caplog.text and "offsets 9-11" not in caplog.text
    assert (part / SEGMENT).stat().st_size == len(data)
    with pytest.raises(CorruptRecordError):
        plog.locate(3)


def test_a_rolled_segment_gets_its_final_time_entry(tmp_path):
    """Index files rebuilt for a rolled segment whose batches are too small for an index entry
    end with its largest timestamp's time entry (Kafka's roll: onBecomeInactiveSegment; its
    LogSegment.recover appends the same)."""
    part = write_partition(tmp_path, GOOD)
    (part / f"{6:020d}.log").write_bytes(batch(6) + batch(9))
    LogDirectory(tmp_path)
    expected = expected_index_files(part, rolled_bases={0})
    assert (part / f"{0:020d}.index").read_bytes() == expected[f"{0:020d}.index"] == b""
    assert (part / f"{0:020d}.timeindex").read_bytes() == expected[f"{0:020d}.timeindex"]
    assert expected[f"{0:020d}.timeindex"] == struct.pack(">qi", 1_005, 5)  # offset 5, relative


@pytest.mark.parametrize("damage", ["missing", "torn"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_one_broken_index_file_of_a_rolled_segment_is_rebuilt(tmp_path, suffix, damage):
    """A rolled segment below the clean point is not read again, but an index file of it that
    is missing or ends in a partial entry (its other file intact) is rebuilt."""
    batches = [batch(3 * i, value=b"x" * 2000) for i in range(6)]
    part = write_partition(tmp_path, b"".join(batches[:4]))
    (part / f"{12:020d}.log").write_bytes(b"".join(batches[4:]))
    LogDirectory(tmp_path)  # writes them
    expected = expected_index_files(part, rolled_bases={0})
    assert expected[f"{0:020d}.index"] and expected[f"{0:020d}.timeindex"]
    damaged = part / f"{0:020d}{suffix}"
    if damage == "missing":
        damaged.unlink()
    else:
        damaged.write_bytes(damaged.read_bytes() + b"\x00\x00\x00")
    LogDirectory(tmp_path)
    assert {name: (part / name).read_bytes() for name in expected} == expected


@pytest.mark.parametrize("checkpoint", [
    pytest.param(100, id="checkpoint-above-the-log-end"),
    pytest.param(7, id="checkpoint-inside-the-torn-last-entry"),
])
def test_the_recovery_point_is_never_left_above_the_recovered_log_end(tmp_path, checkpoint):
    """Kafka's LogLoader: the recovery point after loading is min(checkpoint, log end). One
    left above it would be checkpointed (by any partition's timed flush) over records appended
    later and never fsynced, and after the next crash those would not be validated."""
    tail = b""
    if checkpoint == 7:
        torn = bytearray(batch(6))
        torn[-1] ^= 0xFF
        tail = bytes(torn)
    part = write_partition(tmp_path, GOOD + tail)
    (tmp_path / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {checkpoint}\n")
    logdir = LogDirectory(tmp_path)
    plog = logdir.partition("t", 0)
    assert plog.high_watermark == 6
    plog.append(split_entries(batch(0, count=1)))  # offset 6
    plog.append(split_entries(batch(0, count=3)))  # offsets 7-9
    logdir.write_checkpoint()  # not flushed: the point must not cover them
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 6\n"
    data = bytearray((part / SEGMENT).read_bytes())  # a power loss garbles the unflushed batch
    data[len(GOOD) + len(batch(6, count=1)) - 1] ^= 0xFF
    (part / SEGMENT).write_bytes(bytes(data))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 6
    with pytest.raises(CorruptRecordError, match="fails its CRC check"):
        plog.locate(6)


def test_validated_segments_are_fsynced_before_the_recovery_point_moves_up(tmp_path, monkeypatch):
    """What recovery validated may still be only in the page cache (after a process crash):
    the next flush fsyncs it before the recovery point passes it."""
    import os

    part = write_partition(tmp_path, GOOD)
    logdir = LogDirectory(tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    logdir.flush()
    assert str(part / SEGMENT) in synced and logdir.partition("t", 0).recovery_point == 6


def test_a_clean_log_that_is_only_read_gets_nothing_written_and_no_warning(tmp_path, caplog):
    """Recovery that finds nothing to repair writes nothing: no cut, no recovery-point
    checkpoint in a directory that was only read."""
    (tmp_path / "t-0").mkdir()
    logdir = LogDirectory(tmp_path)
    logdir.partition("t", 0).append(split_entries(GOOD))
    logdir.close()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()  # as after a crash: validated again
    before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    with caplog.at_level(logging.WARNING):
        logdir = LogDirectory(tmp_path)
        assert logdir.partition("t", 0).high_watermark == 6
        logdir.close()
    assert not caplog.records
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()} == before


def test_txnindex_entries_of_markers_in_the_torn_end_are_removed(tmp_path):
    """Kafka's LogSegment.truncateTo: the aborted transactions whose marker was cut off leave
    the .txnindex (a read_committed fetch would otherwise be told of them)."""
    from lazyconv.logdir._txnindex import AbortedTxn, encode_txnindex_entry, parse_txnindex

    part = write_partition(tmp_path, GOOD + batch(6)[:30])
    kept, gone = AbortedTxn(7, 0, 5, 6), AbortedTxn(8, 3, 6, 7)
    (part / f"{0:020d}.txnindex").write_bytes(encode_txnindex_entry(kept) + encode_txnindex_entry(gone))
    LogDirectory(tmp_path)
    assert parse_txnindex((part / f"{0:020d}.txnindex").read_bytes()) == [kept]


def test_an_index_entry_of_a_cut_entry_goes_with_it(tmp_path):
    """A torn end cut after a clean point at the log end (a power loss kept the index pages
    but not the log's): the index files are made to match the log again, so no index entry
    points past its end (where the next append would put another batch)."""
    part = write_partition(tmp_path, GOOD + batch(6))
    LogDirectory(tmp_path, LogConfig(index_interval_bytes=1))  # an index entry per batch after the first
    assert len((part / f"{0:020d}.index").read_bytes()) == 16  # offsets 5 and 8
    with open(part / SEGMENT, "r+b") as f:
        f.truncate(len(GOOD) + 30)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    plog = LogDirectory(tmp_path, LogConfig(index_interval_bytes=1)).partition("t", 0)
    assert plog.high_watermark == 6 and (part / SEGMENT).stat().st_size == len(GOOD)
    builder = IndexBuilder(0, 1)
    builder.append(0, len(batch(0)), 2, 1_002)
    builder.append(len(batch(0)), len(batch(3)), 5, 1_005)
    offsets, times = builder.close(rolled=False)
    assert (part / f"{0:020d}.index").read_bytes() == offsets and len(offsets) == 8
    assert (part / f"{0:020d}.timeindex").read_bytes() == times


def test_recovery_leaves_no_file_descriptor_open(tmp_path):
    import os

    bad = bytearray(batch(3))
    bad[-1] ^= 0xFF
    write_partition(tmp_path, batch(0) + bytes(bad) + batch(6) + batch(9)[:20])
    before = set(os.listdir("/proc/self/fd"))
    LogDirectory(tmp_path).partition("t", 0)
    assert set(os.listdir("/proc/self/fd")) <= before
