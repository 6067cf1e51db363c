"""The layers as docs/layout.md states them: every import of every module of the package (at
module level or inside a function, ``importlib`` calls excepted) goes to its own package or to
one that the page's "may import" column allows. Imports under ``if TYPE_CHECKING:`` are names
for annotations only and are not checked.

The rule is read from the page itself, so the page and the code cannot drift apart: change a
layer by changing its row.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import lazyconv
from tests.fresh_ast import parse

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(lazyconv.__file__).resolve().parent
LAYOUT = REPO / "docs" / "layout.md"

_ROW = re.compile(r"^\| `lazyconv/(?P<unit>[^`]+)` \|.*\|\s*(?P<allowed>[^|]*?)\s*\|$")


def layer_rules() -> dict[str, set[str]]:
    """unit -> what it may import, from the layers table: a unit is a package (``serve``), a
    root module (``_send``) or ``__init__``; an allowed name is a unit or ``package.module``."""
    rules: dict[str, set[str]] = {}
    for line in LAYOUT.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line.strip())
        if m is None:
            continue
        unit = m.group("unit").rstrip("/").removesuffix(".py")
        rules[unit] = set(re.findall(r"`([^`]+)`", m.group("allowed")))
    return rules


def unit_of(module: str) -> str:
    """``lazyconv.serve._broker`` -> ``serve``; ``lazyconv._send`` -> ``_send``;
    ``lazyconv`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, imported lazyconv module)`` for every runtime import of ``path``."""
    tree = parse(path.read_text(encoding="utf-8"), str(path))
    skip = _type_checking_nodes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "lazyconv":
                found += [(node.lineno, f"lazyconv.{alias.name}") for alias in node.names]
            elif node.module.startswith("lazyconv."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names
                      if alias.name == "lazyconv" or alias.name.startswith("lazyconv.")]
    return found


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_the_page_has_a_row_for_every_package_and_root_module() -> None:
    rules = layer_rules()
    units = {unit_of(_module_name(p)) for p in MODULES}
    assert units - set(rules) == set(), "docs/layout.md lacks a row for these"
    assert set(rules) - units == set(), "docs/layout.md has rows for what does not exist"


@pytest.mark.slow  # a parse of every module: a code-quality scan, kept out of the quick look
@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_go_only_to_the_layers_the_page_allows(path: Path) -> None:
    rules = layer_rules()
    module = _module_name(path)
    unit = unit_of(module)
    allowed = rules[unit]
    wrong = []
    for line, imported in imports_of(path):
        target = unit_of(imported)
        if target == unit:
            continue
        # "records._format" allows that module (and names taken from it) only
        dotted = ".".join(imported.split(".")[1:3])
        if target in allowed or dotted in allowed:
            continue
        wrong.append(f"line {line}: {imported} (layer {target!r})")
    assert wrong == [], f"{module} ({unit}) imports above or beside its layer: {wrong}"


def test_the_rule_catches_an_import_against_it(tmp_path: Path) -> None:
    """The checker itself: an upward import in a module is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom lazyconv.gateway import Gateway\n"
                   "if TYPE_CHECKING:\n    from lazyconv.serve import Broker\n"
                   "def f():\n    from lazyconv.net import KafkaServer\n")
    assert imports_of(bad) == [(2, "lazyconv.gateway"), (6, "lazyconv.net")]
    assert "gateway" not in layer_rules()["records"]
