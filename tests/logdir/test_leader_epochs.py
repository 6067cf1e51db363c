"""Leader epochs from a broker's log: ``leader-epoch-checkpoint`` (the first offset of each
epoch) and the epoch in each v2 batch header, which ListOffsets and Metadata report as Kafka does
(tests/kafka/test_serve_differential.py checks them against a broker restarted between writes)."""

from __future__ import annotations

from pathlib import Path

from lazyconv.logdir._directory import LogDirectory
from lazyconv.records import RecordsBuilder


def _partition(root: Path, checkpoint: str | None):
    folder = root / "t-0"
    folder.mkdir(parents=True)
    data = b""
    for base, epoch in ((0, 0), (5, 3)):
        builder = RecordsBuilder(2, base_offset=base, partition_leader_epoch=epoch)
        for offset in range(base, base + 5):
            builder.append(offset, 1_000 + offset, b"k", b"v")
        data += builder.build()
    (folder / "00000000000000000000.log").write_bytes(data)
    if checkpoint is not None:
        (folder / "leader-epoch-checkpoint").write_text(checkpoint)
    return LogDirectory(root).partitions[("t", 0)]


def test_epochs_from_the_checkpoint_and_the_batches(tmp_path: Path) -> None:
    plog = _partition(tmp_path, "0\n2\n0 0\n3 5\n")
    assert plog.latest_epoch() == 3
    assert [plog.epoch_for_offset(o) for o in (0, 4, 5, 9)] == [0, 0, 3, 3]
    assert [plog.batch_leader_epoch(o) for o in (0, 4, 5, 9, 10)] == [0, 0, 3, 3, -1]
    assert plog.offset_for_timestamp(1_006) == (6, 1_006)


def test_without_a_checkpoint_serve_keeps_epoch_0(tmp_path: Path) -> None:
    plog = _partition(tmp_path, None)
    assert plog.leader_epochs == [] and plog.latest_epoch() == 0 and plog.epoch_for_offset(7) == 0
    assert _partition(tmp_path / "bad", "0\n5\n0 0\n").leader_epochs == []  # count mismatch
