"""Smoke runs of the benchmarks with tiny inputs: they run end to end and print their tables.

No timing is asserted (performance lives in bench/); what is asserted is that each benchmark
checks its implementations' outputs and reports every configuration.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import chunk_sizes, memory, peers
from bench.bench_common import make_v2_batches

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _table_rows(out: str) -> list[list[str]]:
    lines = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def test_peers_converts_identically_and_reports_ratios(capsys):
    assert peers.main(["--quick", "--codecs", "none,lz4", "--value-sizes", "100"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [(r[1], r[2]) for r in rows] == [("none", "v1"), ("none", "v0"), ("lz4", "v1"), ("lz4", "v0")]
    # aiokafka cannot write lz4 for magic 0: reported as n/a, not as a number
    assert rows[3][-1] == "n/a" and rows[2][-1] != "n/a"


def test_peer_converters_agree_with_lazyconv():
    data = make_v2_batches(20_000, 100, "gzip")
    expected = peers.decoded(data)
    for convert in (peers.lazyconv_converter(), peers.kafka_python_converter()):
        for to_magic in (0, 1):
            assert peers.decoded(convert(data, to_magic)) == expected


def test_chunk_sizes_streams_every_configuration(tmp_path, capsys):
    results = chunk_sizes.run(value_size=100, partition_mib=0.05, targets=[1], repeat=1,
                              chunk_sizes=(16, 1024))
    assert [r["mode"] for r in results] == ["16K", "1024K", "eager"]
    for r in results:
        assert r["records"] > 0 and r["mb_s"] > 0
    chunk_sizes.plot(results, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_memory_lazy_stays_flat_while_eager_grows(capsys):
    results = memory.run(partitions=8, partition_mibs=[0.25, 0.5], chunk_size=16 * 1024)
    peak = {(r["mode"], r["partition_mib"]): r["traced_peak"] for r in results}
    assert peak[("eager", 0.5)] > 1.6 * peak[("eager", 0.25)]
    assert peak[("lazy", 0.5)] < 1.2 * peak[("lazy", 0.25)]
    assert peak[("lazy", 0.5)] < peak[("eager", 0.5)] / 2


def test_a_benchmark_runs_as_a_script_from_the_checkout():
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "peers.py"), "--quick", "--codecs", "none",
         "--value-sizes", "100", "--to-magic", "1"],
        capture_output=True, text=True, cwd=REPO / "bench", timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "lazyconv MB/s" in done.stdout
