"""The README's example runs as printed, its ``lazyconv --version`` sample matches the command,
and its note on the editable install is true."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from lazyconv._cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match is not None, f"README has no '## {title}' section"
    return match.group(1)


def test_the_example_runs_and_prints_the_records(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", _section("Example"), re.M | re.S)
    assert len(blocks) == 1
    code = blocks[0]
    assert len([line for line in code.splitlines() if line.strip()]) <= 12
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip() == (
        "[(0, b'key-0', b'value-0'), (1, b'key-1', b'value-1'), (2, b'key-2', b'value-2')]"
    )


def test_the_version_sample_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    sample = re.search(r"^\$ lazyconv --version\n(.*?)\n(.*?)\n", _section("Example"), re.M)
    assert sample is not None
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code in (0, None)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == sample.group(1)
    # the second line depends on the machine; its shape does not
    assert printed[1].split(" ")[0] == sample.group(2).split(" ")[0] == "implementation:"


@pytest.mark.slow  # seconds: it generates an 8 MiB fixture (test_code_blocks runs it as a shell too)
def test_the_shell_quick_start_works_on_what_it_generates(tmp_path, capsys) -> None:
    """Every `$ lazyconv ...` line of the Example runs as written (paths moved under tmp_path;
    `serve` and `--version` are left out: one runs forever, the other is checked above)."""
    commands = re.findall(r"^\$ lazyconv (.*)$", _section("Example"), re.M)
    ran = 0
    for command in commands:
        command = command.split("#")[0].split("|")[0].strip()
        if command.startswith(("serve", "--version")):
            continue
        args = [a.replace("/tmp/", f"{tmp_path}/") for a in command.split()]
        assert main(args) == 0, f"`lazyconv {command}` failed: {capsys.readouterr().err}"
        ran += 1
    assert ran >= 3
    assert (tmp_path / "v1.bin").stat().st_size > 0


@pytest.mark.slow  # two Python processes
def test_the_editable_install_note_is_true(tmp_path: Path) -> None:
    """The README's note on the editable install: from the clone's parent folder a program
    imports the clone's folder as an empty namespace package (ImportError); from the clone it
    imports lazyconv."""
    import sys

    if not any("__editable__" in getattr(finder, "__module__", "") for finder in sys.meta_path):
        pytest.skip("lazyconv is not installed editable here (the note is about pip install -e)")
    clone = README.parent
    (tmp_path / "lazyconv").symlink_to(clone, target_is_directory=True)  # the clone, by its name
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    program = "from lazyconv import Compression"
    parent = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert parent.returncode != 0 and "(unknown location)" in parent.stderr, parent.stderr
    inside = subprocess.run([sys.executable, "-c", program], cwd=clone, env=env,
                            capture_output=True, text=True, timeout=120)
    assert inside.returncode == 0, inside.stderr
    assert "(unknown location)" in README.read_text()
