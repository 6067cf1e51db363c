"""``lazyconv bench``: every benchmark is registered, documents its options, and refuses what it
cannot run with one error line."""

from __future__ import annotations

import re

import pytest

from lazyconv.cli import main
from lazyconv.commands import bench


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse exits after --help
        status = int(exc.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_every_benchmark_module_is_registered() -> None:
    from pathlib import Path

    import lazyconv.benchmarks as package

    modules = {p.stem for p in Path(package.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    assert set(bench.BENCHMARKS.values()) == modules
    assert set(bench.NEEDS) == set(bench.BENCHMARKS)
    assert set(bench.ALL) <= set(bench.BENCHMARKS) and "fuzz" not in bench.ALL


def test_bench_help_lists_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["bench", "--help"], capsys)
    assert status == 0
    for name in bench.BENCHMARKS:
        assert f"\n  {name} " in out


@pytest.mark.parametrize("name", ["lazy-sink", "decode", "lz4-overhead", "fuzz", "fuzz-kernel"])
def test_new_benchmark_help_names_itself_and_explains_its_options(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(["bench", name, "--help"], capsys)
    assert status == 0
    assert out.startswith(f"usage: lazyconv bench {name}")
    blocks: list[list[str]] = []
    for line in out.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            blocks.append([line.strip()])
        elif line.startswith("   ") and blocks:
            blocks[-1].append(line.strip())
    assert len(blocks) >= 3
    for block in blocks:
        # the help text follows the option on its line, or on the next lines
        assert len(re.split(r"\s{2,}", block[0])) > 1 or len(block) > 1, block

def test_fuzz_kernel_without_the_kernel_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lazyconv.records

    monkeypatch.setattr(lazyconv.records, "IMPLEMENTATION", "python")
    status, _, err = run(["bench", "fuzz-kernel", "--seconds", "0.1"], capsys)
    assert status == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lazyconv bench: error:") and "compiled kernel" in lines[0]
