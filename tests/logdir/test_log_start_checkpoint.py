"""A log start offset moved by DeleteRecords: Kafka keeps the segment that holds it and records
the offset in ``log-start-offset-checkpoint``; serve reads it, so the records below it are out
of range and ListOffsets' earliest offset is it (tests/kafka/test_serve_differential.py checks
the same against a broker that ran DeleteRecords)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._partition import OffsetOutOfRange
from lazyconv.records import RecordsBuilder


def _log(root: Path, checkpoint: str | None) -> LogDirectory:
    folder = root / "t-0"
    folder.mkdir(parents=True, exist_ok=True)
    builder = RecordsBuilder(2)
    for offset in range(10):
        builder.append(offset, 1_000 + offset, b"k", b"v%d" % offset)
    (folder / "00000000000000000000.log").write_bytes(builder.build())
    if checkpoint is not None:
        (root / "log-start-offset-checkpoint").write_text(checkpoint)
    return LogDirectory(root)


def test_the_checkpoint_moves_the_log_start(tmp_path: Path) -> None:
    plog = _log(tmp_path, "0\n2\nt 0 6\nother 3 40\n").partitions[("t", 0)]
    assert plog.log_start_offset == 6 and plog.high_watermark == 10
    with pytest.raises(OffsetOutOfRange):
        plog.locate(5)
    assert plog.locate(6).high_watermark == 10


def test_a_checkpoint_below_the_first_segment_or_absent_changes_nothing(tmp_path: Path) -> None:
    assert _log(tmp_path / "a", None).partitions[("t", 0)].log_start_offset == 0
    assert _log(tmp_path / "b", "0\n0\n").partitions[("t", 0)].log_start_offset == 0


def test_a_malformed_checkpoint_is_ignored_with_a_warning(tmp_path: Path, caplog) -> None:
    plog = _log(tmp_path, "7\nnonsense\n").partitions[("t", 0)]
    assert plog.log_start_offset == 0
    assert "log-start-offset-checkpoint" in caplog.text


@pytest.mark.parametrize("name", ["log-start-offset-checkpoint", "recovery-point-offset-checkpoint"])
def test_a_checkpoint_that_is_not_text_is_ignored_too(tmp_path: Path, name: str, caplog) -> None:
    # bytes that are not UTF-8 once escaped as a UnicodeDecodeError and stopped the log directory
    # from opening (serve refused to start); Kafka ignores such a file, and so does this
    (tmp_path / name).write_bytes(b"0\n1\nt 0 \xff\xfe\n")
    plog = _log(tmp_path, None).partitions[("t", 0)]
    assert plog.log_start_offset == 0 and plog.high_watermark == 10
    assert name in caplog.text


def _one_record(value: bytes) -> bytes:
    builder = RecordsBuilder(2)
    builder.append(0, 5_000, b"k", value)
    return builder.build()


def test_a_checkpoint_above_the_log_end_starts_the_log_there(tmp_path: Path, caplog) -> None:
    # Kafka's LogLoader deletes every segment (with a warning) and starts an empty log at the
    # checkpoint; serve took the log start as it was, above the high watermark, so every fetch
    # was out of range and an append got offset 10, below the log start, never readable
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000004.snapshot").write_bytes(b"stale")
    logdir = _log(tmp_path, "0\n1\nt 0 20\n")
    plog = logdir.partitions[("t", 0)]
    assert "deleting all segments" in caplog.text
    assert (plog.log_start_offset, plog.high_watermark) == (20, 20)
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix != ".metadata") == [
        "00000000000000000020.index", "00000000000000000020.log", "00000000000000000020.timeindex"]
    assert plog.locate(20).path is None  # at the log end: nothing to read, no error
    with pytest.raises(OffsetOutOfRange):
        plog.locate(10)
    assert plog.append([(_one_record(b"new"), 1)]) == (20, 20)
    logdir.close()
    again = LogDirectory(tmp_path).partitions[("t", 0)]
    assert (again.log_start_offset, again.high_watermark) == (20, 21)


def test_a_partition_without_segments_starts_at_its_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    plog = LogDirectory(tmp_path).partitions[("t", 0)]
    assert (plog.log_start_offset, plog.high_watermark) == (7, 7)
    assert plog.append([(_one_record(b"first"), 1)]) == (7, 7)


def test_resetting_the_log_start_clears_the_leader_epochs(tmp_path: Path, caplog) -> None:
    # Kafka's LogLoader clears the leader epoch cache (clearAndFlush) with the segments: the
    # epochs were those of offsets that no longer exist; serve kept them, in memory and in the
    # file, so ListOffsets reported epoch 3 for a log start (20) no epoch ever started at
    (tmp_path / "t-0").mkdir()
    epochs = tmp_path / "t-0" / "leader-epoch-checkpoint"
    epochs.write_text("0\n2\n0 0\n3 5\n")
    plog = _log(tmp_path, "0\n1\nt 0 20\n").partitions[("t", 0)]
    assert "deleting all segments" in caplog.text
    assert plog.leader_epochs == [] and plog.epoch_for_offset(20) == 0 and plog.latest_epoch() == 0
    assert epochs.read_text() == "0\n0\n"
    assert LogDirectory(tmp_path).partitions[("t", 0)].leader_epochs == []  # and once reopened


def test_a_log_start_inside_the_log_keeps_the_leader_epochs(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 5\n")
    plog = _log(tmp_path, "0\n1\nt 0 6\n").partitions[("t", 0)]
    assert plog.leader_epochs == [(0, 0), (3, 5)] and plog.epoch_for_offset(6) == 3
