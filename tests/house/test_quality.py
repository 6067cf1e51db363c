"""The repository's own quality gates, run by the test suite so that CI enforces them:
mypy and ruff are clean on the package, and the documentation site builds with no warning
(``mkdocs build --strict``: a broken link or API reference fails)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEV_HINT = "install the dev tools: pip install -e '.[dev]' (bash .ci/setup.sh does)"


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: {DEV_HINT}")


@pytest.mark.slow  # ~10 s (mypy's cache makes later runs faster)
def test_mypy_is_clean_on_the_package() -> None:
    _require("mypy")
    result = _run("mypy")  # configured in pyproject.toml; cache in .mypy_cache
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # ~1 s
def test_ruff_is_clean() -> None:
    _require("ruff")
    result = _run("ruff", "check", "lazyconv", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # ~5 s
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    _require("mkdocs")
    _require("mkdocstrings")
    result = _run("mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert result.returncode == 0, result.stdout + result.stderr
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    # the API reference is complete: constructor signatures, batch attributes, enum members,
    # Record's fields, and no raw Sphinx role left in the text
    for name in ("compression_level", "base_offset", "last_offset", "GZIP", "LOG_APPEND_TIME",
                 "headers"):
        assert name in reference, f"the API reference does not show {name}"
    raw = re.findall(r":(?:class|func|meth|attr|data|mod|exc):<code>", reference)
    assert not raw, f"{len(raw)} raw Sphinx roles on the API page"
