"""One model of a Kafka log directory, ``lazyconv/logdir/`` (issue 24), held by AST scans of the
package (docstrings and comments are free to name files):

- no production module imports the test-data generator ``lazyconv.fixtures``: the log layout
  comes from ``lazyconv.logdir``. The generator's own front doors are the exception: the
  ``fixtures generate`` command, and ``validate`` without a LOGDIR (it generates the fixture it
  checks); they may import the generator's entry points and nothing else of it;
- ``lazyconv.logdir`` imports only downward: ``lazyconv.records`` and ``lazyconv.errors``;
- the names of a log directory's files, their 20-digit offsets and the ``.txnindex`` /
  producer snapshot entry formats are spelled in one module of ``lazyconv.logdir`` each.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import lazyconv
from tests.fresh_ast import parse

PACKAGE = Path(lazyconv.__file__).resolve().parent


FIXTURES = PACKAGE / "fixtures"
LOGDIR = PACKAGE / "logdir"

# module (relative to the package) -> what of the generator it may import, and why
GENERATOR_FRONT_DOORS = {
    "_commands/fixtures.py": {"lazyconv.fixtures"},
    "_commands/validate.py": {"lazyconv.fixtures"},  # no LOGDIR: generate one to check
}
LOGDIR_MAY_IMPORT = ("lazyconv.logdir", "lazyconv.records", "lazyconv.errors")

# each file-name fact -> the one module that spells it
NAMES = {
    ".log": "logdir/_naming.py",
    ".index": "logdir/_naming.py",
    ".timeindex": "logdir/_naming.py",
    ".txnindex": "logdir/_naming.py",
    ".snapshot": "logdir/_naming.py",
    "partition.metadata": "logdir/_naming.py",
    "recovery-point-offset-checkpoint": "logdir/_naming.py",
    "log-start-offset-checkpoint": "logdir/_naming.py",
    "manifest.json": "logdir/_manifest.py",
}
STRUCT_FORMATS = {
    ">hqqqq": "logdir/_txnindex.py",  # AbortedTxn: version, producer id, first, last, LSO
    ">qhiqiqiq": "logdir/_snapshot.py",  # a producer snapshot entry
}
OFFSET_NAME_FORMAT = "020d"  # a file name's offset: 20 zero-padded digits
# Known places still to switch, in code another piece of work owns: (module, constant). (Index
# entry sizes written as numbers, which no string scan sees, are test_layout_literals.py's.)
PENDING: set[tuple[str, str]] = set()


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), parse(path.read_text(), str(path))


def _imported(tree: ast.Module, module: str) -> Iterator[tuple[int, str]]:
    """``(line, module name)`` of every import, anywhere in the module (functions and
    ``TYPE_CHECKING`` blocks included); relative imports resolved."""
    package = ("lazyconv." + module.removesuffix(".py").replace("/", ".")).rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:  # ``from lazyconv import fixtures``
                yield node.lineno, f"{base}.{alias.name}"


def _prose(tree: ast.Module) -> set[int]:
    """Docstrings, and the text parts of f-strings (a temporary ``f"{name}.log"``)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        elif isinstance(node, ast.JoinedStr):
            ids.update(id(part) for part in node.values if isinstance(part, ast.Constant))
    return ids


def _is_generator(name: str) -> bool:
    return name == "lazyconv.fixtures" or name.startswith("lazyconv.fixtures.")


@pytest.mark.slow  # a scan of every module: kept out of the quick look
def test_no_production_module_imports_the_fixture_generator() -> None:
    found = []
    for module, tree in _modules():
        if module.startswith("fixtures/"):
            continue
        allowed = GENERATOR_FRONT_DOORS.get(module, set())
        found += [f"{module}:{line}: imports {name}" for line, name in _imported(tree, module)
                  if _is_generator(name) and name not in allowed
                  and not any(name.startswith(a + ".") for a in allowed)]
    assert not found, "production code imports the test-data generator:\n" + "\n".join(found)


@pytest.mark.slow  # a scan of every module: kept out of the quick look
def test_the_generators_front_doors_still_need_their_exception() -> None:
    """An exception nobody uses any more is removed from the list."""
    trees = dict(_modules())
    for module, allowed in GENERATOR_FRONT_DOORS.items():
        used = {name for _line, name in _imported(trees[module], module) if _is_generator(name)}
        assert used & allowed, f"{module} no longer imports {sorted(allowed)}: drop its exception"


@pytest.mark.slow
def test_logdir_imports_only_records_and_errors() -> None:
    found = []
    for module, tree in _modules():
        if not module.startswith("logdir/"):
            continue
        for line, name in _imported(tree, module):
            if name.startswith("lazyconv") and not any(
                    name == allowed or name.startswith(allowed + ".") for allowed in LOGDIR_MAY_IMPORT):
                found.append(f"{module}:{line}: imports {name}")
    assert not found, "lazyconv.logdir imports above itself:\n" + "\n".join(found)


@pytest.mark.slow  # a scan of every module: kept out of the quick look
def test_log_directory_facts_are_spelled_in_one_module_each() -> None:
    found = []
    for module, tree in _modules():
        prose = _prose(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                home = NAMES.get(node.value) or STRUCT_FORMATS.get(node.value)
                if home is not None and home != module and (module, node.value) not in PENDING:
                    found.append(f"{module}:{node.lineno}: {node.value!r} (declared in {home})")
            if (isinstance(node, ast.FormattedValue) and node.format_spec is not None
                    and OFFSET_NAME_FORMAT in ast.unparse(node.format_spec)
                    and module != "logdir/_naming.py"):
                found.append(f"{module}:{node.lineno}: a 20-digit file name (logdir/_naming.py)")
    assert not found, "log-directory facts spelled outside their module:\n" + "\n".join(found)


def test_pending_exceptions_are_still_needed() -> None:
    """A place switched to the names leaves :data:`PENDING` (empty now: a loop, not a
    parametrization, so that an empty list is not reported as a skipped test)."""
    unused = [(module, constant) for module, constant in sorted(PENDING)
              if not any(isinstance(node, ast.Constant) and node.value == constant
                         for node in ast.walk(parse((PACKAGE / module).read_text())))]
    assert unused == [], f"drop these from PENDING: {unused}"


def test_the_entry_formats_agree_with_kafka() -> None:
    from lazyconv.logdir._index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
    from lazyconv.logdir._naming import offset_file_name, offset_from_name, split_partition_dir
    from lazyconv.logdir._txnindex import TXNINDEX_ENTRY_SIZE

    assert (OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, TXNINDEX_ENTRY_SIZE) == (8, 12, 34)
    assert offset_file_name(42, ".snapshot") == "00000000000000000042.snapshot"
    assert offset_from_name("00000000000000000042.log") == 42
    assert offset_from_name("00000000000000000042.log.deleted") is None
    assert offset_from_name("42.log") is None
    assert offset_from_name("00000000000000000042.index") is None
    assert offset_from_name("00000000000000000042.index", ".index") == 42
    assert split_partition_dir("my-topic-12") == ("my-topic", 12)
