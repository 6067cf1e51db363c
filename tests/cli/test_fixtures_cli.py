"""``lazyconv fixtures generate`` as a command: an interrupted run leaves nothing behind, a
size that cannot be written is refused in one line, an overshoot is said."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from lazyconv._cli import main
from tests.docs.blocks import default_sigint


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_leaves_no_half_fixture(tmp_path, stop) -> None:
    out = tmp_path / "fx"
    proc = subprocess.Popen([sys.executable, "-m", "lazyconv._cli", "fixtures", "generate",
                             str(out), "--size", "2G", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)  # Ctrl-C as a terminal delivers it
    # interrupted once it is writing (its partial folder is there), not while Python starts:
    # a busy machine can take seconds to get there
    deadline = time.monotonic() + 120
    while not any(tmp_path.iterdir()) and proc.poll() is None:
        assert time.monotonic() < deadline, "the generator wrote nothing in 120 s"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(stop)  # SIGTERM killed it before, leaving the partial folder behind
    # the suite on four workers beside brokers and Spark once took over 60 s here
    proc.communicate(timeout=180)
    assert proc.returncode == 128 + stop  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports
    assert list(tmp_path.iterdir()) == []  # neither OUTDIR nor its hidden partial folder
    # and the next run is not blocked
    assert main(["fixtures", "generate", str(out), "--size", "1M", "--quiet"]) == 0
    assert (out / "manifest.json").is_file()


def test_a_size_beyond_the_free_space_is_refused(capsys, tmp_path) -> None:
    assert main(["fixtures", "generate", str(tmp_path / "fx"), "--size", "100T", "--quiet"]) == 2
    assert "is free under" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_size_zero_is_refused(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fixtures", "generate", str(tmp_path / "fx"), "--size", "0"])
    assert exit_info.value.code == 2
    assert "--size: must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "fx").exists()


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_an_overshoot_is_said(caplog, tmp_path, capsys) -> None:
    assert main(["fixtures", "generate", str(tmp_path / "fx"), "--size", "1M", "--quiet"]) == 0
    total = int(capsys.readouterr().out.splitlines()[-1].split()[1])
    assert total > 1 << 20
    assert any("1.0 MiB asked for" in r.getMessage() for r in caplog.records)
