"""The README's example runs as printed, and its ``lazyconv --version`` sample matches the command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lazyconv._cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


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
