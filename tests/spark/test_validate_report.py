"""The Parquet report of ``lazyconv validate`` as docs/guide/validate-report.md documents it:
table by table, column by column, with the facts a user queries (issue 26)."""

from __future__ import annotations

import datetime
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.fault_planting import flip_crc_covered_byte

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"
DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "validate-report.md"
TABLES = ("segments", "partitions", "conversions", "violations")


def _documented_columns() -> dict[str, list[str]]:
    """``{table: [column, ...]}`` from the page's tables (a ``## `OUT/<table>` `` heading, then
    rows whose first cell is a column name in backquotes)."""
    columns: dict[str, list[str]] = {}
    table = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^## `OUT/(\w+)`", line)
        if heading:
            table = heading.group(1)
            columns[table] = []
        elif table and (cell := re.match(r"^\| `(\w+)` \|", line)):
            columns[table].append(cell.group(1))
    return columns


def test_every_table_and_column_is_documented_in_order() -> None:
    from lazyconv.spark._tables import COLUMNS, RUN_COLUMNS

    documented = _documented_columns()
    assert sorted(documented) == sorted(TABLES) == sorted(COLUMNS)
    for table, columns in COLUMNS.items():
        assert documented[table] == [name for name, _ in (*RUN_COLUMNS, *columns)], table


def test_no_column_needs_quoting_in_sql() -> None:
    from lazyconv.spark._tables import COLUMNS, RUN_COLUMNS

    reserved = {"offset", "partition", "end", "start", "order", "range", "key", "value"}
    for table, columns in COLUMNS.items():
        for name, _ in (*RUN_COLUMNS, *columns):
            assert name not in reserved and re.fullmatch(r"[a-z_0-9]+", name), (table, name)


def test_a_conversion_failure_is_located_by_offset(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """When a consumer would receive other records than expected, the violation names the
    offset and log byte where the lazy send first differs (found by the reference consumer)."""
    import lazyconv.spark._conversion_check as reference
    from lazyconv.records import FileRecords
    from lazyconv.spark._derived_conversion import DerivedConsumer
    from lazyconv.spark._listing import list_log_directory
    from lazyconv.spark._scan_state import ScanOptions
    from lazyconv.spark._segment_check import check_segment

    shutil.copytree(COMMITTED / "nulls-0", tmp_path / "nulls-0")
    seg = list_log_directory(str(tmp_path)).segments[0]
    expect = DerivedConsumer.expect_records
    calls = []

    def one_more_expected(self, count: int, hash_sum: int) -> None:
        calls.append(count)
        expect(self, count + (len(calls) == 1), hash_sum)

    full = reference.expected_records

    def one_record_changed(batches, to_magic):
        records, zstd = full(batches, to_magic)
        records[5] = (records[5][0], records[5][1], b"not-the-key", records[5][3])
        return records, zstd

    monkeypatch.setattr(DerivedConsumer, "expect_records", one_more_expected)
    monkeypatch.setattr(reference, "expected_records", one_record_changed)
    found = check_segment(seg, ScanOptions((1,), (16 * 1024,)))["violations"]
    (v,) = [v for v in found if v["kind"] == "conversion"]
    with FileRecords.open(seg.log_path) as records:
        sixth = full(records.batches(), 1)[0][5][0]
        holder = next(b for b in records.batches() if b.last_offset >= sixth)
        assert (v["offset"], v["position"]) == (sixth, holder.position)
    assert "first difference at record 5" in v["message"]
    assert v["last_offset"] is None and v["path"] == seg.log_path


@pytest.mark.spark
def test_the_tables_hold_what_the_page_says(tmp_path: Path) -> None:
    """Absolute paths, batch last offset and size of a damaged batch, per-partition counts and
    offset ranges, a real timestamp, the version and implementation in run_options."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    import pyarrow.parquet as pq

    import lazyconv
    from lazyconv.spark._job import run_validation
    from lazyconv.spark._session import build_session

    logdir = tmp_path / "logs"
    for name in ("codecs-0", "tiny-0"):
        shutil.copytree(COMMITTED / name, logdir / name)
    fault = flip_crc_covered_byte(logdir, "codecs", 0)
    spark = build_session("local[2]", app_name="lazyconv-tests", driver_memory="768m")
    try:
        result = run_validation(str(logdir), spark=spark, chunk_sizes=(16 * 1024,),
                                to_magics=(1,), out=str(tmp_path / "out"))
    finally:
        spark.stop()
    tables = {t: pq.read_table(tmp_path / "out" / t).to_pylist() for t in TABLES}
    for table, rows in tables.items():
        assert rows, table
        for row in rows:
            assert isinstance(row["run_timestamp"], datetime.datetime), table
            assert row["run_timestamp"].tzinfo is not None
            assert row["run_id"] == result.run_id
    options = json.loads(tables["segments"][0]["run_options"])
    assert options["lazyconv_version"] == lazyconv.__version__
    assert options["implementation"] in ("native", "python")
    assert options["logdir"] == str(logdir)
    for row in tables["segments"]:
        assert Path(row["path"]).is_absolute() and Path(row["path"]).is_file()
    (crc,) = [v for v in tables["violations"] if v["kind"] == "crc"]
    assert (crc["segment"], crc["position"]) == (fault[2], fault[4])
    assert crc["path"] == str(logdir / "codecs-0" / fault[2])
    assert crc["kafka_offset"] is not None and crc["last_offset"] >= crc["kafka_offset"]
    assert crc["batch_bytes"] > 61
    with open(crc["path"], "rb") as f:
        f.seek(crc["position"] + 8)
        assert int.from_bytes(f.read(4), "big") + 12 == crc["batch_bytes"]
    manifest = json.loads((COMMITTED / "manifest.json").read_text())["partitions"]
    for row in tables["partitions"]:
        expected = manifest[f"{row['topic']}-{row['partition_id']}"]
        assert row["first_offset"] == expected["first_offset"]
        assert row["last_offset"] == expected["last_offset"]
        assert row["path"] == str(logdir / f"{row['topic']}-{row['partition_id']}")
    codecs = next(r for r in tables["partitions"] if r["topic"] == "codecs")
    assert codecs["errors"] >= 1 and codecs["ranges"] >= codecs["segments"]
