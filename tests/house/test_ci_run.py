""".ci/run: the README's test command first, then the records, protocol, conversion and lazy-send
tests a second time on the pure-Python reference (``LAZYCONV_NO_EXTENSIONS=1``); it fails when
either pass fails.

The script runs here in a copy of the checkout's layout whose ``.ci/setup.sh`` and
``.venv/bin/python`` are stubs that record how they were called and exit as told.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / ".ci" / "run"


def _checkout(tmp_path: Path, first: int, second: int) -> Path:
    root = tmp_path / "checkout"
    (root / ".ci").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / ".ci" / "run").write_text(RUN.read_text())
    (root / ".ci" / "setup.sh").write_text("echo setup >> calls.log\n")
    python = root / ".venv" / "bin" / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        'echo "pass NO_EXTENSIONS=${LAZYCONV_NO_EXTENSIONS:-} PURE_PASS=${LAZYCONV_PURE_PASS_TESTS:+set} $*" >> calls.log\n'
        f'if [ -n "${{LAZYCONV_NO_EXTENSIONS:-}}" ]; then exit {second}; fi\n'
        f"exit {first}\n"
    )
    python.chmod(0o755)
    return root


def _run(root: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYCONV_")}
    done = subprocess.run(["bash", str(root / ".ci" / "run")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, (root / "calls.log").read_text().splitlines()


def test_the_readme_command_comes_first_then_the_pure_python_pass(tmp_path: Path) -> None:
    readme_command = "bash .ci/setup.sh && .venv/bin/python -m pytest -n 4 --dist loadgroup"
    assert readme_command in (REPO / "README.md").read_text()
    first_test_line = next(line for line in RUN.read_text().splitlines() if "pytest" in line and not line.startswith("#"))
    assert first_test_line.endswith(readme_command)
    status, calls = _run(_checkout(tmp_path, 0, 0))
    assert status == 0
    assert calls[0] == "setup"
    assert calls[1] == "pass NO_EXTENSIONS= PURE_PASS=set -m pytest -n 4 --dist loadgroup"
    second = calls[2].split()
    assert second[:4] == ["pass", "NO_EXTENSIONS=1", "PURE_PASS=set", "-m"] and second[4] == "pytest"
    assert {"tests/records", "tests/protocol", "tests/conversion"} <= set(second)


@pytest.mark.parametrize(("first", "second", "expected"), [(0, 0, 0), (1, 0, 1), (0, 5, 5), (2, 5, 2)])
def test_it_fails_when_either_pass_fails(tmp_path: Path, first: int, second: int, expected: int) -> None:
    status, calls = _run(_checkout(tmp_path, first, second))
    assert status == expected
    assert len(calls) == 3  # both passes run whatever the first one's outcome
