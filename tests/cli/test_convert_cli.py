"""``lazyconv convert`` and ``lazyconv lazy-send``: output files and the JSON stats line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lazy_support import build_batch, consumer_records, v2_end_txn_marker

from lazyconv._cli import main
from lazyconv.conversion._chunks import overflow_padding

A = build_batch(2, [(1000, b"k", b"v"), (1005, None, b"w")], base_offset=0)
B = build_batch(2, [(3000, b"b", b"bb")], base_offset=3)
COMMIT = v2_end_txn_marker(2, 2000, producer_id=7, producer_epoch=1)
A_V1 = bytes.fromhex(
    "0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76"
    "0000000000000001 00000017 98989778 01 00 00000000000003ed ffffffff 00000001 77"
)
B_V1 = bytes.fromhex(
    "0000000000000003 00000019 6c8556c1 01 00 0000000000000bb8 00000001 62 00000002 6262"
)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict | None, str]:
    status = main(argv)
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return status, (json.loads(lines[0]) if lines else None), captured.err


def test_convert_writes_the_eager_conversion(tmp_path: Path, capsys) -> None:
    source, target = tmp_path / "in.log", tmp_path / "out.log"
    source.write_bytes(COMMIT + A + B)
    status, stats, _ = _run(["convert", str(source), str(target), "--to-magic", "1"], capsys)
    assert status == 0
    assert target.read_bytes() == A_V1 + B_V1
    assert stats["records_converted"] == 3
    assert stats["temporary_memory_bytes"] == 78 + 71 + 71 + 37
    assert stats["output_bytes"] == len(A_V1 + B_V1)
    assert stats["input_bytes"] == len(COMMIT + A + B)
    assert stats["conversion_time_ns"] > 0


def test_convert_first_offset(tmp_path: Path, capsys) -> None:
    source, target = tmp_path / "in.log", tmp_path / "out.log"
    source.write_bytes(A + B)
    status, stats, _ = _run(
        ["convert", str(source), str(target), "--to-magic", "0", "--first-offset", "1"], capsys
    )
    assert status == 0
    assert [r[0] for r in consumer_records(target.read_bytes())] == [1, 3]
    assert stats["records_converted"] == 2


def test_lazy_send_pads_and_reports(tmp_path: Path, capsys) -> None:
    source, target = tmp_path / "in.log", tmp_path / "out.log"
    source.write_bytes(COMMIT + A + B)
    status, stats, _ = _run(
        ["lazy-send", str(source), str(target), "--to-magic", "1", "--chunk-size", "16384",
         "--quiet"],
        capsys,
    )
    assert status == 0
    size = len(COMMIT + A + B)
    assert target.read_bytes() == A_V1 + B_V1 + overflow_padding(size - len(A_V1 + B_V1))
    assert stats["committed_size"] == stats["bytes_written"] == size
    assert stats["chunks"] == 2
    assert stats["padding_bytes"] == size - len(A_V1 + B_V1)
    assert stats["records_converted"] == 3
    assert stats["truncated"] is False


def test_lazy_send_reports_a_cut(tmp_path: Path, capsys) -> None:
    small = build_batch(2, [(1, None, b"x")] * 200, base_offset=0)  # v2 → v0 grows
    source, target = tmp_path / "in.log", tmp_path / "out.log"
    source.write_bytes(A + small)
    status, stats, _ = _run(
        ["lazy-send", str(source), str(target), "--to-magic", "0", "--quiet"], capsys
    )
    assert status == 0
    assert stats["truncated"] is True and stats["padding_bytes"] == 0
    assert len(target.read_bytes()) == stats["committed_size"] == stats["bytes_written"]


def test_lazy_send_reports_corrupt_data_as_bad_data_not_as_zstd(tmp_path: Path, capsys) -> None:
    gzip = bytearray(build_batch(2, [(1000, b"k", b"v" * 100)], base_offset=3, compression=1))
    gzip[-5] ^= 0xFF  # the gzip trailer's CRC no longer matches
    zstd = build_batch(2, [(1000, b"k", b"v" * 100)], base_offset=3, compression=4)
    for later, expected_status, zstd_flag in ((bytes(gzip), 1, False), (zstd, 0, True)):
        source, target = tmp_path / "in.log", tmp_path / "out.log"
        source.write_bytes(A + B + later)
        status, stats, err = _run(
            ["lazy-send", str(source), str(target), "--to-magic", "1", "--quiet"], capsys
        )
        assert (status, stats["stopped_at_zstd"]) == (expected_status, zstd_flag), err
        size = len(A + B + later)
        assert target.read_bytes() == A_V1 + B_V1 + overflow_padding(size - len(A_V1 + B_V1))


def test_lazy_send_rejects_a_bad_chunk_size(tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.log"
    source.write_bytes(A)
    with pytest.raises(SystemExit) as exit_info:  # a usage mistake: argparse's exit status 2
        main(["lazy-send", str(source), str(tmp_path / "o"), "--to-magic", "1",
              "--chunk-size", "100"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.strip() == (
        "lazyconv lazy-send: error: argument --chunk-size: 100 is outside 16K..1M "
        "(see 'lazyconv lazy-send --help')"
    )


def test_zstd_is_reported_as_an_error(tmp_path: Path, capsys) -> None:
    zstd = build_batch(2, [(1, b"z", b"z" * 100)], compression=4)
    source = tmp_path / "in.log"
    source.write_bytes(zstd)
    for command in ("convert", "lazy-send"):
        status, _, err = _run([command, str(source), str(tmp_path / "o"), "--to-magic", "1"], capsys)
        assert status == 1
        assert "zstandard" in err


@pytest.mark.parametrize("command", ["convert", "lazy-send"])
def test_help_explains_every_option(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    for option in ("--to-magic", "--first-offset", "IN", "OUT"):
        assert option in out
    if command == "lazy-send":
        assert "--chunk-size" in out and "16K..1M" in out


@pytest.mark.parametrize("command", ["convert", "lazy-send"])
def test_the_input_as_output_is_refused_before_anything_is_written(tmp_path: Path, capsys,
                                                                  command: str) -> None:
    """lazy-send opened OUT for writing before reading IN, so the same path emptied the input
    (found by a review)."""
    source = tmp_path / "in.log"
    source.write_bytes(A + B)
    status, _, err = _run([command, str(source), str(tmp_path / "." / "in.log"), "--to-magic", "1"],
                          capsys)
    assert status == 2 and "is the input file too" in err
    assert source.read_bytes() == A + B


@pytest.mark.parametrize("command", ["convert", "lazy-send"])
def test_a_failed_or_interrupted_run_leaves_no_output_file(tmp_path: Path, capsys, monkeypatch,
                                                           command: str) -> None:
    """OUT appears whole or not at all: bad input, or Ctrl-C in the middle, leaves no OUT (nor
    the temporary file it was written in), and an OUT already there as it was."""
    source, target = tmp_path / "in.log", tmp_path / "out.log"
    source.write_bytes(b"\x00" * 8 + b"\x80\x00\x00\x00" + b"\x01" * 50)  # a size below 14
    status, _, err = _run([command, str(source), str(target), "--to-magic", "1"], capsys)
    assert status == 1 and "error" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.log"]

    source.write_bytes(A + B)
    target.write_bytes(b"the old output")
    import lazyconv._commands._common as common

    real = common.atomic_output

    def interrupted(path):  # Ctrl-C once the output file is being written
        from contextlib import contextmanager

        @contextmanager
        def writing():
            with real(path) as out:
                out.write(b"partial")
                raise KeyboardInterrupt
                yield out
        return writing()

    module = __import__(f"lazyconv._commands.{command.replace('-', '_')}", fromlist=["run"])
    monkeypatch.setattr(module, "atomic_output", interrupted)
    assert main([command, str(source), str(target), "--to-magic", "1", *(
        ["--quiet"] if command == "lazy-send" else [])]) == 130
    assert target.read_bytes() == b"the old output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.log", "out.log"]
