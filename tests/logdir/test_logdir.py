"""The log-directory model: segments, offsets → positions, growth while served."""

from __future__ import annotations

import pytest

from lazyconv.errors import CorruptRecordError, ValidationError
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._partition import OffsetOutOfRange
from lazyconv.records import Compression, RecordsBuilder


def batch(magic: int, first: int, count: int, codec=Compression.NONE) -> bytes:
    builder = RecordsBuilder(magic, compression=codec, base_offset=first)
    for offset in range(first, first + count):
        builder.append(offset=offset, timestamp=1000 + offset if magic else -1, value=b"v%d" % offset)
    return builder.build()


@pytest.fixture
def two_segments(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    first = [batch(2, 0, 5), batch(1, 5, 3, Compression.GZIP), batch(0, 8, 2)]  # offsets 0..9
    (part / f"{0:020d}.log").write_bytes(b"".join(first))
    (part / f"{10:020d}.log").write_bytes(batch(2, 10, 4))  # offsets 10..13
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "manifest.json").write_text("{}")
    return tmp_path, first


def test_topics_offsets_and_regions(two_segments):
    root, first = two_segments
    log = LogDirectory(root)
    assert log.topics() == {"t": [0]}
    plog = log.partition("t", 0)
    assert (plog.log_start_offset, plog.high_watermark) == (0, 14)
    # An offset inside the compressed v1 wrapper starts at the wrapper.
    region = plog.locate(6)
    assert region.position == len(first[0]) and region.first_entry_size == len(first[1])
    assert region.end == sum(map(len, first))  # a region never crosses into the next segment
    assert plog.locate(9).position == len(first[0]) + len(first[1]) + len(batch(0, 8, 1))
    region = plog.locate(11)
    assert region.path.name == f"{10:020d}.log" and region.position == 0
    assert plog.locate(14).path is None  # at the high watermark: nothing yet
    with pytest.raises(OffsetOutOfRange):
        plog.locate(15)
    with pytest.raises(OffsetOutOfRange):
        plog.locate(-1)


def test_offset_for_timestamp_finds_the_first_record(two_segments):
    root, _ = two_segments
    plog = LogDirectory(root).partition("t", 0)
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1003) == (3, 1003)  # inside the first v2 batch
    assert plog.offset_for_timestamp(1006) == (6, 1006)  # inside the compressed v1 wrapper
    assert plog.offset_for_timestamp(1011) == (11, 1011)  # second segment (v0 has no timestamps)
    assert plog.offset_for_timestamp(5000) is None


def test_growing_log_shows_only_complete_entries(two_segments):
    root, _ = two_segments
    plog = LogDirectory(root).partition("t", 0)
    tail = batch(2, 14, 3)
    with open(root / "t-0" / f"{10:020d}.log", "ab") as f:
        f.write(tail[:30])  # a writer is half-way through a batch
        f.flush()
        plog.refresh()
        assert plog.high_watermark == 14
        f.write(tail[30:])
    plog.refresh()
    assert plog.high_watermark == 17
    (root / "t-0" / f"{17:020d}.log").write_bytes(batch(2, 17, 1))  # a rolled segment
    (root / "t-1").mkdir()
    log = LogDirectory(root)
    plog.refresh()
    assert plog.high_watermark == 18 and log.topics() == {"t": [0, 1]}


def test_corrupt_data_stops_the_partition_there_with_its_position(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    good = batch(2, 0, 2)
    # a size no broker writes, then bytes that are not zeros (zeros would be a torn header,
    # cut off by recovery: tests/logdir/test_log_recovery.py)
    (part / f"{0:020d}.log").write_bytes(good + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x01" * 20)
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 2 and plog.locate(1).position == 0  # what precedes is served
    with pytest.raises(CorruptRecordError) as info:
        plog.locate(2)
    assert info.value.position == len(good)


def test_missing_directory(tmp_path):
    with pytest.raises(ValidationError):
        LogDirectory(tmp_path / "absent")


def test_a_settled_directory_is_listed_again_only_when_it_changes(two_segments, monkeypatch):
    """Fetches look at the partition's directory each time; listing it again is skipped while
    its mtime says nothing changed, and a new segment is still found at once."""
    import os
    import time

    from lazyconv.logdir import _partition

    root, _ = two_segments
    part = root / "t-0"
    plog = LogDirectory(root).partition("t", 0)  # (recovery may write index files there)
    settled = time.time_ns() - 10_000_000_000
    os.utime(part, ns=(settled, settled))  # last changed 10 s ago
    plog.refresh()
    listings = []
    real_listdir = os.listdir
    monkeypatch.setattr(_partition.os, "listdir", lambda path: listings.append(path) or real_listdir(path))
    for _ in range(5):
        plog.refresh()
    assert listings == []  # unchanged: not listed again
    (part / f"{14:020d}.log").write_bytes(batch(2, 14, 2))  # a new segment: a new mtime
    plog.refresh()
    assert plog.high_watermark == 16 and len(listings) == 1
    # a change that kept the old mtime (coarse clocks) is found by the listing a second later
    (part / f"{16:020d}.log").write_bytes(batch(2, 16, 1))
    stat = os.stat(part)
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.setattr(_partition, "_RELIST_NS", 0)
    plog.refresh()
    assert plog.high_watermark == 17


def test_the_manifest_is_read_from_urls_too(tmp_path) -> None:
    """One loader of manifest.json, logdir's, for local folders and fsspec URLs alike (validate
    used a private copy in the Spark job; logdir's own said None for a URL)."""
    pytest.importorskip("fsspec")
    import json

    from lazyconv.errors import ConfigurationError
    from lazyconv.logdir._manifest import MANIFEST_FORMAT, load_manifest

    (tmp_path / "t-0").mkdir()
    manifest = {"format": MANIFEST_FORMAT, "partitions": {"t-0": {"topic": "t", "partition": 0}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert load_manifest(tmp_path.as_uri()) == load_manifest(str(tmp_path)) == manifest
    assert load_manifest((tmp_path / "t-0").as_uri()) is None
    (tmp_path / "manifest.json").write_text("[")
    with pytest.raises(ConfigurationError, match=r"^file://.*/manifest\.json: not a JSON document"):
        load_manifest(tmp_path.as_uri() + "/")


@pytest.mark.parametrize(("root", "config", "says"), [
    (None, None, "a log directory is a path, got NoneType"),  # was Path()'s bare TypeError
    (5, None, "a log directory is a path, got int"),
    (b"logs", None, "a log directory is a path, got bytes"),
    ("TMP", {"segment_bytes": 1}, "config must be a LogConfig or None, got dict"),  # was an AttributeError later
])
def test_log_directory_refuses_wrong_argument_types(tmp_path, root, config, says) -> None:
    from lazyconv.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=says):
        LogDirectory(tmp_path if root == "TMP" else root, config)
