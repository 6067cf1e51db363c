"""docs/guide/gateway.md's client matrix is the one the tests' registry produces."""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from tests.gateway.matrix import render

START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"


def test_the_docs_matrix_is_what_the_tests_run() -> None:
    text = (REPO_ROOT / "docs/guide/gateway.md").read_text()
    documented = text[text.index(START) + len(START):text.index(END)].strip()
    assert documented == render(), ("docs/guide/gateway.md's matrix is stale: replace it with "
                                    "the output of `python -m tests.gateway.matrix`")
