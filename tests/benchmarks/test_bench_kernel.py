"""Smoke tests of the kernel benchmarks (tiny inputs): each runs and prints its table."""

from __future__ import annotations

import pytest

from bench import decode, fuzz_kernel, lazy_sink, lz4_overhead, snappy_compress
from lazyconv.records import _impl


def test_decode_benchmark_counts_the_same_records(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.bench_common import make_v2_batches

    data = make_v2_batches(30_000, 100)
    assert decode.lazyconv_decode(data) == decode.aiokafka_decode(data) > 0
    assert decode.main(["--input-mib", "0.03", "--repeat", "1"]) == 0
    assert "| 1024 B |" in capsys.readouterr().out


def test_lazy_sink_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert lazy_sink.main(["--input-mib", "0.1", "--repeat", "1", "--value-sizes", "100", "--to-magic", "1"]) == 0
    assert "| 100 B | v1 |" in capsys.readouterr().out


@pytest.mark.slow  # two child processes
def test_lz4_overhead_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert lz4_overhead.main(["--input-mib", "0.05", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "| python |" in out and "outside-lz4 time cut" in out


@pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")
@pytest.mark.slow  # a fuzzing run of about a second: kept out of the quick look
def test_fuzz_kernel_runs_without_differences() -> None:
    executions, inputs, differences = fuzz_kernel.run(1.0, seed=1)
    assert executions > inputs > 0 and differences == 0


@pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")
def test_snappy_compress_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert snappy_compress.main(["--mib", "0.05", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "| text 200 B |" in out and "| random 32768 B |" in out
