"""``lazyconv simulate partitioner``: table, JSON keys, PNG."""

from __future__ import annotations

import json

import pytest

from lazyconv._cli import main

KEYS = {
    "partitioner", "rate_records_per_s", "throughput_mb_s", "avg_latency_ms",
    "p99_latency_ms", "p999_latency_ms", "bytes_per_broker",
}


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
def test_json_output_has_exactly_the_documented_keys(tmp_path, capsys):
    png = tmp_path / "sim.png"
    status = main(["simulate", "partitioner", "--rate", "2048", "--records", "2000", "--json",
                   "--plot", str(png), "--quiet"])
    assert status == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["partitioner"] for r in rows] == [
        "kip480-sticky", "uniform", "adaptive", "adaptive-timeout-5ms"
    ]
    for row in rows:
        assert set(row) == KEYS
        assert row["rate_records_per_s"] == 2048
        assert set(row["bytes_per_broker"]) == {"0", "1", "2"}
        assert sum(row["bytes_per_broker"].values()) > 2000 * 521
        assert row["avg_latency_ms"] <= row["p99_latency_ms"] <= row["p999_latency_ms"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_output_and_options(tmp_path, capsys):
    status = main(["simulate", "partitioner", "--rate", "1000", "--rate", "3000", "--records",
                   "1500", "--variant", "uniform", "--variant", "round-robin",
                   "--switch-rule", "deferred", "--no-plot", "--quiet"])
    assert status == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["partitioner", "rate", "MB/s"]
    assert sum(line.startswith(("uniform", "round-robin")) for line in lines) == 4
    assert "switch rule deferred" in out
    assert not (tmp_path / "partitioner-simulation.png").exists()


def test_help_explains_options(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "partitioner", "--help"])
    out = capsys.readouterr().out
    for option in ("--rate", "--json", "--plot", "--switch-rule", "--seed", "--quiet"):
        assert option in out


def test_default_switch_rule_is_deferred(capsys):
    status = main(["simulate", "partitioner", "--rate", "2048", "--records", "500",
                   "--variant", "uniform", "--no-plot", "--quiet"])
    assert status == 0
    assert "switch rule deferred" in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--rate", "nan"], ["--rate", "inf"],
                                    ["--sender-delay-ms", "nan"], ["--base-latency-ms", "inf"]])
def test_non_finite_values_are_usage_errors(option, capsys):
    """NaN and infinity are refused before anything runs (they printed nan/inf tables, or an
    internal error for a NaN sender delay)."""
    with pytest.raises(SystemExit) as stopped:  # refused as argparse refuses a bad value
        main(["simulate", "partitioner", "--records", "500", "--variant", "uniform",
              "--no-plot", "--quiet", *option])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "finite" in err
    assert f"argument {option[0]}: " in err


def test_a_plot_format_matplotlib_cannot_write_is_refused_before_the_runs(tmp_path, capsys):
    """It used to be found by savefig after every simulation ran and the table was printed."""
    pytest.importorskip("matplotlib")
    status = main(["simulate", "partitioner", "--records", "500", "--variant", "uniform",
                   "--quiet", "--plot", str(tmp_path / "plot.xyz")])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "cannot write .xyz files" in err
    assert not list(tmp_path.iterdir())
