"""Smoke test of the codecs benchmark (bench/codecs.py) with tiny sizes (no timing assertions)."""

from __future__ import annotations

import pytest

from bench import codecs as bench_codecs


@pytest.fixture(scope="module")
def bench():
    return bench_codecs


@pytest.mark.slow  # ~3 s on the shared 2-core machine (imports of both peers included)
def test_bench_runs_and_prints_the_table(bench, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--records", "40", "--repeats", "1", "--batch-bytes", "2048"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header, rows = rows[0], rows[1:]
    assert "MB/s" in header and "records/s" in header and "vs lazyconv" in header
    names = [impl.name for impl in bench.implementations()]
    assert names[:2] == ["lazyconv", "kafka-python"] and "aiokafka-py" in names
    # 2 operations x 2 codecs x 2 value sizes, one row per implementation
    assert len(rows) == 8 * len(names)
    for operation in ("decode", "encode"):
        for codec in ("none", "lz4"):
            for value in ("1 KiB", "100 B"):
                prefix = f"| {operation} | {codec} | {value} | "
                assert {r.split(" | ")[3] for r in rows if r.startswith(prefix)} == set(names)
    assert all(r.endswith("| 1.00x |") for r in rows if "| lazyconv |" in r)
    assert "# aiokafka" in out  # says which aiokafka implementation was measured


def test_equivalence_check_catches_a_wrong_decoder(bench) -> None:
    records = bench.make_records(30, 100)
    impls = bench.implementations()
    bench.check_equivalence(impls, records, 3, 7)  # all agree (lz4, several batches)
    broken = bench.Implementation(
        "broken", "drops the last record", impls[0].encode, lambda data: impls[0].decode(data)[:-1]
    )
    with pytest.raises(AssertionError, match="broken decodes"):
        bench.check_equivalence([impls[0], broken], records, 0, 7)
