"""The public surface is what the docs promise: implementation modules are private.

The stable API is ``lazyconv``'s ``__all__`` (the API reference) and the error tree in
``lazyconv.errors``; each subpackage's ``__init__`` exports the names its guide uses. Every other
module's name starts with an underscore, so that ``from lazyconv.serve._broker import ...`` says
at the import that it reaches into the implementation (h11 and aiokafka keep theirs the same way).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lazyconv

PACKAGE = Path(lazyconv.__file__).resolve().parent
# public modules besides every package's __init__ (and __main__)
PUBLIC_MODULES = {
    "errors.py",  # the error tree (API reference page "Errors")
    "partitioner/kafka_python.py",  # kafka-python's partitioner plugin, configured by path
}
# each guide's imports, as the docs write them
DOCUMENTED_IMPORTS = {
    "lazyconv": lazyconv.__all__,
    "lazyconv.errors": ["LazyconvError", "RecordsError", "ProtocolError"],
    "lazyconv.conversion": ["up_convert", "kafka_error_code", "UpConverted", "ConversionCache",
                            "LazyDownConvertSend"],
    "lazyconv.serve": ["AppendConfig", "ProducerStateTable", "validate_produce", "Broker",
                       "LogDirectory", "LogServer"],
    "lazyconv.gateway": ["Gateway"],
    "lazyconv.protocol": ["FetchBudget", "broker_partition_response"],
    "lazyconv.records": ["RecordsBuilder", "MemoryRecords"],
    "lazyconv.partitioner.kafka_python": ["KIP794Partitioner"],
}


# public packages: each __init__ exports its guide's names (the rest of lazyconv's packages are
# private by their name, like _commands)
PUBLIC_PACKAGES = {
    "", "assignment", "conversion", "fixtures", "gateway", "logdir", "net", "partitioner", "protocol", "records",
    "serve", "spark",
}


def _modules() -> list[str]:
    """Every Python module and compiled extension of the package, relative to it."""
    return sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
                  if p.suffix == ".py" or p.suffix == ".so" or p.name.endswith(".pyd"))


def test_no_new_public_package() -> None:
    packages = {p.parent.relative_to(PACKAGE).as_posix().replace(".", "")
                for p in PACKAGE.rglob("__init__.py")}
    public = {p for p in packages if not any(part.startswith("_") for part in p.split("/"))}
    assert public == PUBLIC_PACKAGES, "a package must be private (_name) unless a guide documents it"


def test_every_implementation_module_is_private() -> None:
    public = [m for m in _modules()
              if not any(part.startswith("_") for part in m.split("/"))
              and m not in PUBLIC_MODULES]
    assert public == [], f"public modules the docs do not promise: {public}"


def test_the_allowed_public_modules_exist() -> None:
    assert PUBLIC_MODULES <= set(_modules())


@pytest.mark.parametrize("module", sorted(DOCUMENTED_IMPORTS))
def test_documented_names_import_from_their_package(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in DOCUMENTED_IMPORTS[module] if not hasattr(imported, name)]
    assert missing == []


@pytest.mark.parametrize("module", ["lazyconv", "lazyconv.conversion", "lazyconv.serve", "lazyconv.gateway",
                                    "lazyconv.net", "lazyconv.records", "lazyconv.protocol"])
def test_a_packages_all_names_what_it_has(module: str) -> None:
    imported = importlib.import_module(module)
    assert [n for n in getattr(imported, "__all__", []) if not hasattr(imported, n)] == []


# what the docstrings promise a buffer argument takes ("any C-contiguous bytes-like object"),
# written as a user would and checked by mypy --strict against the package's annotations
BUFFERS_SCRIPT = """
import array
import mmap

from lazyconv import MemoryRecords, RecordsBuilder
from lazyconv.conversion import up_convert
from lazyconv.records import scan_batches

builder = RecordsBuilder(2)
builder.append(key=bytearray(b"k"), value=memoryview(b"v"), headers=[("h", array.array("B", b"x"))])
data = bytearray(builder.build())
with mmap.mmap(-1, len(data)) as mapped:
    mapped.write(data)
    MemoryRecords(mapped)
    scan_batches(mapped)
    up_convert(mapped)
MemoryRecords(array.array("B", data))
"""


@pytest.mark.slow  # ~5 s: mypy
def test_buffer_arguments_are_annotated_as_any_buffer(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    script = tmp_path / "user.py"
    script.write_text(BUFFERS_SCRIPT)
    exec(compile(BUFFERS_SCRIPT, str(script), "exec"), {})  # what the annotations must allow runs
    repo = PACKAGE.parent
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         # a cache of its own: test_quality's mypy may use the repository's at the same time
         # on another xdist worker, and two mypys sharing one cache crash (INTERNAL ERROR)
         "--cache-dir", str(tmp_path / "mypy_cache"), str(script)],
        cwd=repo, env={**os.environ, "MYPYPATH": str(repo)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
