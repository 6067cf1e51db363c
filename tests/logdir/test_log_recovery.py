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
