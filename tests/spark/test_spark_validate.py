"""The Spark validation job on the committed fixtures and on a corrupted copy (needs Java)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fault_planting import (
    corrupted_copy,
    leader_epoch_backwards_across_segments,
    segment_base_overlap,
    short_v2_length,
    trailing_zeros,
    txn_index_wrong_last_offset,
    wrong_max_timestamp,
)

pytestmark = pytest.mark.spark

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"
CHUNKS = (16 * 1024, 1024 * 1024)


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    from lazyconv.spark._session import build_session

    session = build_session("local[2]", app_name="lazyconv-tests", driver_memory="768m")
    yield session
    session.stop()


def test_committed_fixtures_validate_clean(spark, tmp_path: Path) -> None:
    from lazyconv.spark._job import run_validation

    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    # 32 KiB ranges: segments above 48 KiB are cut at index entries, checked in pieces
    result = run_validation(str(COMMITTED), spark=spark, chunk_sizes=CHUNKS, to_magics=(0, 1),
                            out=str(tmp_path / "out"), range_bytes=32 * 1024)
    assert result.ok, result.violations
    assert result.warning_count == 0
    assert result.ranges > result.segments
    assert result.partitions == len(manifest["partitions"])
    assert result.records == sum(p["records"] for p in manifest["partitions"].values())
    for row in result.partition_rows:
        expected = manifest["partitions"][f"{row['topic']}-{row['partition']}"]
        assert row["checksum"] == expected["checksum"]
        assert row["segments"] == expected["segments"]
    # every range x target magic x chunk size ran and delivered exactly the expected records
    assert result.conversions_run == result.conversions_ok == result.ranges * 2 * len(CHUNKS)
    topics = {r["topic"] for r in result.conversion_summary}
    assert len(topics) == 10 and len(result.conversion_summary) == 10 * 2 * len(CHUNKS)
    for row in result.conversion_summary:
        assert row["records_delivered"] == row["records_expected"]
    codecs = next(r for r in result.conversion_summary if r["topic"] == "codecs")
    assert codecs["zstd_batches"] > 0  # zstd cannot go below v2: skipped and counted
    # the Parquet output is there and readable
    conversions = spark.read.parquet(str(tmp_path / "out" / "conversions"))
    assert conversions.count() == result.conversions_run
    assert spark.read.parquet(str(tmp_path / "out" / "violations")).count() == 0
    # every table says which run, with which options, when
    for table in ("segments", "partitions", "conversions", "violations"):
        columns = spark.read.parquet(str(tmp_path / "out" / table)).columns
        assert {"run_id", "run_options", "run_timestamp"} <= set(columns), table
    row = conversions.select("run_id", "run_options").first()
    assert row["run_id"] == result.run_id and '"chunk_sizes": [16384, 1048576]' in row["run_options"]


def test_corrupted_copy_reports_every_planted_fault(spark, tmp_path: Path, capsys) -> None:
    from lazyconv._cli import main
    from lazyconv.spark._job import run_validation

    bad = tmp_path / "bad"
    faults = corrupted_copy(COMMITTED, bad)
    faults += [
        leader_epoch_backwards_across_segments(bad, "upgraded", 1),
        wrong_max_timestamp(bad, "nulls", 0),
        short_v2_length(bad, "nulls", 1),
        txn_index_wrong_last_offset(bad, "transactions", 1),
        segment_base_overlap(bad, "codecs", 0),
    ]
    warning = trailing_zeros(bad, "compacted", 0, last=True)
    # a time index that is a directory: a violation, the job goes on
    tiny = bad / "tiny-1" / "00000000000000000000.timeindex"
    tiny.unlink()
    tiny.mkdir()
    faults.append(("tiny", 1, "00000000000000000000.log", "timeindex", -1, "unreadable"))
    result = run_validation(str(bad), spark=spark, chunk_sizes=(), to_magics=(),
                            out=str(tmp_path / "out"))
    assert not result.ok
    found = {(v["topic"], v["partition"], v["segment"], v["file"], v["position"], v["kind"])
             for v in result.violations}
    for fault in faults:
        assert fault in found, (fault, sorted(found))
    assert result.warning_count == 1
    (warned,) = [v for v in result.violations if v["severity"] == "warning"]
    assert (warned["topic"], warned["partition"], warned["segment"], warned["file"],
            warned["position"], warned["kind"]) == warning
    # the manifest check sees the changed partitions too
    manifest_hits = {(v["topic"], v["partition"]) for v in result.violations
                     if v["kind"] == "manifest"}
    assert ("codecs", 0) in manifest_hits and ("idempotent", 0) in manifest_hits
    written = spark.read.parquet(str(tmp_path / "out" / "violations"))
    assert written.count() == result.violation_count + result.warning_count
    assert written.filter("kind = 'crc' and kafka_offset is not null").count() >= 2

    # the CLI says where and exits non-zero (it reuses this session and stops it last); two of
    # the damaged partitions are enough here
    few = tmp_path / "few"
    for name in ("codecs-0", "idempotent-0"):
        shutil.copytree(bad / name, few / name)
    status = main(["validate", str(few), "--chunk-sizes", "1M", "--to-magic", "1",
                   "--out", str(tmp_path / "cli-out"), "--quiet"])
    assert status == 1
    printed = capsys.readouterr().out
    assert "[crc] codecs-0 00000000000000000000.log @ byte" in printed
    assert "[truncated] idempotent-0" in printed


@pytest.mark.slow
def test_main_job_command_generates_and_validates(tmp_path: Path, capsys) -> None:
    """`lazyconv validate` without LOGDIR: the README's main-job set-up command (one chunk size here)."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    from lazyconv._cli import main

    status = main(["validate", "--chunk-sizes", "128K", "--out", str(tmp_path / "out"),
                   "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "no violations" in printed
    for topic in ("upgraded", "transactions", "large", "tiny"):
        assert f"\n{topic} " in printed
