"""Fixture generator: wire bytes, index files, layout, determinism, manifest (fast tests)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KafkaMemoryRecords

from lazyconv._cli import main
from lazyconv.errors import ConfigurationError
from lazyconv.fixtures import (
    PROFILES,
    combine,
    format_checksum,
    generate,
    parse_size,
    record_hash,
)
from lazyconv.fixtures import (
    _wire as wire,
)
from lazyconv.fixtures._wire import FixtureRecord
from lazyconv.logdir._index import IndexBuilder, parse_offset_index, parse_time_index
from lazyconv.logdir._layout import list_segments
from lazyconv.logdir._naming import segment_file_name, split_partition_dir

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "fixtures"


# --- wire bytes against the worked hex examples ---------------------------------------------------------

def test_v2_batch_matches_spec_example() -> None:
    batch = wire.v2_batch([FixtureRecord(0, 1000, b"k", b"v", (("h", b"x"),)),
                           FixtureRecord(1, 1005, None, b"w")], partition_leader_epoch=-1)
    assert batch.hex() == (
        "0000000000000000" "00000046" "ffffffff" "02" "9711b97b" "0000" "00000001"
        "00000000000003e8" "00000000000003ed" "ffffffffffffffff" "ffff" "ffffffff" "00000002"
        "18000000026b027602026802780e000a0201027700")


def test_commit_marker_matches_spec_example() -> None:
    marker = wire.end_txn_marker(2, 2000, 7, 1, commit=True, partition_leader_epoch=-1)
    assert marker.hex() == (
        "000000000000000200000042ffffffff0275eb436a003000000000"
        "00000000000007d000000000000007d000000000000000070001ffffffff00000001"
        "2000000008000000010c00000000000000")


def test_legacy_messages_match_spec_examples() -> None:
    assert wire.legacy_entries(0, [FixtureRecord(0, -1, b"k", b"v")]).hex() == (
        "0000000000000000000000101fecd70a0000000000016b0000000176")
    assert wire.legacy_entries(1, [FixtureRecord(5, 1000, None, b"hi")]).hex() == (
        "00000000000000050000001806614b6d010000000000000003e8ffffffff000000026869")
    lat = wire.legacy_entries(1, [FixtureRecord(5, 1000, None, b"hi")], log_append_time=1000)
    assert lat[12:16].hex() == "0fc056e8" and lat[17] == 0x08


def test_compression_framing_matches_spec() -> None:
    text = b"hello hello hello kafka"
    assert wire.compress(wire.GZIP, text, 2, level=6).hex() == (
        "1f8b08000000000000ffcb48cdc9c957c84022b313d3b21301728291e017000000")
    assert wire.compress(wire.SNAPPY, text, 2).hex() == (
        "82534e4150505900000000010000000100000011171468656c6c6f202e0600106b61666b61")
    assert wire.compress(wire.LZ4, b"", 1).hex() == "04224d186040820000000000"[:22]
    assert wire.compress(wire.LZ4, b"", 0).hex() == "04224d1860401a00000000"
    assert wire.compress(wire.ZSTD, text, 2)[:4] == bytes.fromhex("28b52ffd")
    with pytest.raises(ValueError):
        wire.compress(wire.ZSTD, text, 1)


def test_v1_gzip_wrapper_layout() -> None:
    records = [FixtureRecord(20, 1000, b"k", b"v"), FixtureRecord(22, 1005, None, b"w"),
               FixtureRecord(23, 999, b"k3", None)]
    data = wire.legacy_wrapper(1, wire.GZIP, records)
    offset, size = struct.unpack_from(">qi", data)
    assert offset == 23 and size == len(data) - 12
    assert data[16:18] == b"\x01\x01" and struct.unpack_from(">q", data, 18)[0] == 1005
    batch = KafkaMemoryRecords(data).next_batch()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch] == [
        (20, 1000, b"k", b"v"), (22, 1005, None, b"w"), (23, 999, b"k3", None)]


# --- index files ---------------------------------------------------------------------------------

def test_index_builder_follows_kafka_per_batch_rule() -> None:
    builder = IndexBuilder(100, index_interval_bytes=4096)
    # batches of 3000 bytes: an entry before the 3rd, 5th, ... batch (bytes since > 4096)
    position = 0
    for i in range(6):
        builder.append(position, 3000, 100 + 10 * i + 9, 1000 + i)
        position += 3000
    offset_index, time_index = builder.close(rolled=True)
    assert parse_offset_index(offset_index, 100) == [(129, 6000, 0), (149, 12000, 8)]
    entries = [(e.timestamp, e.offset) for e in parse_time_index(time_index, 100)]
    assert entries == [(1002, 129), (1004, 149), (1005, 159)]  # last one: the roll entry


def test_time_index_skips_non_increasing_timestamps() -> None:
    builder = IndexBuilder(0, index_interval_bytes=10)
    builder.append(0, 20, 0, 500)
    builder.append(20, 20, 1, 400)  # entry: max so far is 500 at offset 0
    builder.append(40, 20, 2, 300)  # offset entry, but no time entry (500 is not > 500)
    offset_index, time_index = builder.close(rolled=False)
    assert [(e.offset, e.position) for e in parse_offset_index(offset_index, 0)] == [(1, 20),
                                                                                    (2, 40)]
    assert [(e.timestamp, e.offset) for e in parse_time_index(time_index, 0)] == [(500, 0)]


def test_layout_names() -> None:
    assert segment_file_name(1234) == "00000000000000001234.log"
    assert segment_file_name(0, ".timeindex") == "00000000000000000000.timeindex"
    assert split_partition_dir("my-topic-12") == ("my-topic", 12)
    assert split_partition_dir("manifest.json") is None


def test_parse_size() -> None:
    assert parse_size("512K") == 512 * 1024
    assert parse_size("1G") == 1024**3
    assert parse_size("1GiB") == 1024**3
    assert parse_size("1.5m") == 1536 * 1024
    assert parse_size("100") == 100
    with pytest.raises(ConfigurationError):
        parse_size("ten")


# --- generated directories -----------------------------------------------------------------------

def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    kwargs = dict(partitions=1, profile="mixed", segment_bytes=64 * 1024)
    generate(tmp_path / "a", 256 * 1024, seed=5, **kwargs)
    generate(tmp_path / "b", 256 * 1024, seed=5, **kwargs)
    generate(tmp_path / "c", 256 * 1024, seed=6, **kwargs)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def _kafka_python_view(root: Path) -> dict[str, tuple[int, int, int]]:
    """Per partition: (records, control batches, checksum) read with kafka-python."""
    out: dict[str, list[int]] = {}
    for seg in list_segments(str(root)):
        acc = out.setdefault(f"{seg.topic}-{seg.partition}", [0, 0, 0])
        records = KafkaMemoryRecords(Path(seg.log_path).read_bytes())
        while (batch := records.next_batch()) is not None:
            if getattr(batch, "is_control_batch", False):
                acc[1] += 1
                continue
            for r in batch:
                headers = tuple(r.headers) if batch.magic == 2 else ()
                ts = r.timestamp if batch.magic > 0 else -1
                acc[0] += 1
                acc[2] += record_hash(r.offset, ts, r.key, r.value, headers)
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_profile_reads_back_with_kafka_python(tmp_path: Path, profile: str) -> None:
    manifest = generate(tmp_path, 64 * 1024, partitions=1, seed=3, profile=profile,
                        segment_bytes=32 * 1024)
    view = _kafka_python_view(tmp_path)
    for name, part in manifest["partitions"].items():
        records, control, checksum = view[name]
        assert records == part["records"]
        assert control == part["control_batches"]
        assert format_checksum(combine([checksum])) == part["checksum"]


def test_profiles_hold_what_they_promise(tmp_path: Path) -> None:
    manifest = generate(tmp_path, 512 * 1024, partitions=1, seed=11, segment_bytes=64 * 1024)
    parts = manifest["partitions"]
    assert set(parts["upgraded-0"]["batches_by_magic"]) == {"0", "1", "2"}
    assert set(parts["codecs-0"]["batches_by_codec"]) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert parts["transactions-0"]["control_batches"] > 0
    assert parts["transactions-0"]["aborted_records"] > 0
    assert parts["headers-0"]["records_with_headers"] > 0
    assert parts["nulls-0"]["null_keys"] > 0 and parts["nulls-0"]["null_values"] > 0
    assert parts["large-0"]["records_1mib_or_more"] >= 2
    assert parts["tiny-0"]["batches"] >= 200
    assert parts["compacted-0"]["first_offset"] > 0  # compacted away from the start
    # compaction gaps: fewer records than offsets
    compacted = parts["compacted-0"]
    assert compacted["records"] < compacted["last_offset"] - compacted["first_offset"] + 1
    # segments rolled at the configured size, named by base offset, with both index files
    segs = [s for s in list_segments(str(tmp_path)) if s.topic == "codecs"]
    assert len(segs) == parts["codecs-0"]["segments"] > 1
    for seg in segs:
        assert seg.size <= 64 * 1024
        assert Path(seg.index_path).is_file() and Path(seg.timeindex_path).is_file()
        first = KafkaMemoryRecords(Path(seg.log_path).read_bytes()).next_batch()
        assert first.base_offset == seg.base_offset


def test_offset_index_entries_point_at_batches(tmp_path: Path) -> None:
    generate(tmp_path, 256 * 1024, partitions=1, seed=2, profile="codecs",
             segment_bytes=1024 * 1024)
    (seg,) = list_segments(str(tmp_path))
    data = Path(seg.log_path).read_bytes()
    starts = {}
    pos = 0
    while pos < len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        last = offset + struct.unpack_from(">i", data, pos + 23)[0]  # v2 last offset delta
        starts[pos] = last
        pos += 12 + size
    entries = parse_offset_index(Path(seg.index_path).read_bytes(), seg.base_offset)
    assert len(entries) > 10
    for entry in entries:
        assert starts[entry.position] == entry.offset
    # more than index.interval.bytes of log between entries, never a whole gap without one
    positions = [0] + [e.position for e in entries]
    batch_positions = sorted(starts)
    for a, b in zip(positions, positions[1:], strict=False):
        assert b - a > 4096
        previous_batch = batch_positions[batch_positions.index(b) - 1]
        assert previous_batch - a <= 4096


def test_generate_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        generate(tmp_path / "x", 1024, profile="nope")
    with pytest.raises(ConfigurationError):
        generate(tmp_path / "y", 1024, partitions=0)
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "file").write_text("x")
    with pytest.raises(ConfigurationError):
        generate(tmp_path / "z", 1024)


def test_cli_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "logs"
    assert main(["fixtures", "generate", str(out), "--size", "128K", "--profile", "tiny",
                 "--partitions", "2", "--seed", "4", "--segment-bytes", "16K", "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["partitions"]) == {"tiny-0", "tiny-1"}
    assert "tiny-0" in capsys.readouterr().out
    assert len(list((out / "tiny-0").glob("*.log"))) == manifest["partitions"]["tiny-0"]["segments"]


def test_committed_fixtures_match_their_manifest() -> None:
    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    # the committed transactions-0 ends with a marker: the last record is before the last offset
    txn = manifest["partitions"]["transactions-0"]
    assert txn["last_record_offset"] < txn["last_offset"]
    view = _kafka_python_view(COMMITTED)
    assert set(view) == set(manifest["partitions"])
    for name, part in manifest["partitions"].items():
        assert view[name][0] == part["records"]
        assert format_checksum(combine([view[name][2]])) == part["checksum"]


def test_committed_fixtures_are_reproducible(tmp_path: Path) -> None:
    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    regenerated = generate(tmp_path, manifest["size"], seed=manifest["seed"],
                           partitions=manifest["partitions_per_topic"],
                           profile=manifest["profile"], segment_bytes=manifest["segment_bytes"])
    assert regenerated == manifest
