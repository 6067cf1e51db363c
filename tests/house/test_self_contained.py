"""The repository stands alone: nothing in it points at files outside the checkout.

A fresh clone has no spec folder, no golden folder beside it and no machine-specific paths; the
docs pages (``docs/``) and ``tests/golden/`` are where such references go instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

OUTSIDE = re.compile(
    r"\.\./" r"shared|/work/|LAZYCONV_" r"SHARED|ARCHITECTURE\.md|\bspec/[\w-]+\.md"
    r"|\b(?:formats|downconversion|fetch-protocol|rack-aware-assignment)\.md|\b[Tt]raps? \d+"
)
SCANNED = ("lazyconv", "tests", "bench", "docs", ".ci", "README.md", "pyproject.toml", "mkdocs.yml",
           "CHANGELOG.md")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *SCANNED],
        cwd=REPO, capture_output=True, text=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: run the tests from a clone of the repository")
    paths = [REPO / line for line in listed.stdout.splitlines()]
    return [
        p for p in paths
        if p.is_file() and p.suffix in {".py", ".md", ".toml", ".yml", ".sh", ""}
        and "tests/golden/" not in p.as_posix() and p != Path(__file__).resolve()
    ]


@pytest.mark.slow  # over a second: kept out of the quick look
def test_no_reference_outside_the_repository() -> None:
    found = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


def test_readme_links_point_at_files_of_the_repository() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(((?!https?:|#)[^)\s]+)\)", readme)
    missing = [t for t in targets if not (REPO / t.split("#")[0]).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_version_is_declared_once_per_place_and_agrees() -> None:
    import lazyconv

    # written once, in lazyconv/_version.py; the package metadata reads it from there
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^version = "', pyproject, re.M) is None
    assert 'version = { attr = "lazyconv._version.__version__" }' in pyproject
    declared = re.search(r'^__version__ = "([^"]+)"$', (REPO / "lazyconv" / "_version.py").read_text(), re.M)
    assert declared is not None and declared.group(1) == lazyconv.__version__
    assert f"## {lazyconv.__version__}" in (REPO / "CHANGELOG.md").read_text()
