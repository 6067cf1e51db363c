"""The one switch between the twins (``lazyconv.records._impl``).

- With ``LAZYCONV_NO_EXTENSIONS=1`` no kernel function is reachable: after importing every module
  of the package and running every hot path, the extension is not even loaded.
- Inside ``_impl.using(_impl.REFERENCE)`` no kernel function is called (a profiler sees every
  call into C), even though the extension is loaded: the "pure" side of a differential test is
  pure. Outside it, the same work does call the kernel (the probe works).
- Nothing but ``_impl`` imports the extension, and the hot functions are looked up on ``_impl``
  at call time (``from lazyconv.records._impl import crc32c`` would escape ``using``).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import lazyconv
from lazyconv.records import _impl
from tests.fresh_ast import parse

PACKAGE = Path(lazyconv.__file__).resolve().parent
EXTENSION = "lazyconv.records._ckernel"
# what may be imported from _impl by name: facts fixed at import, not functions it switches
IMPORTABLE_NAMES = {"IMPLEMENTATION", "CPU_FEATURES", "implementation_info", "describe", "NO_EXTENSIONS_ENV"}


def workload() -> None:
    """Every hot path once: build, decode, scan, digest, segment runs, down-conversion eager and
    lazy (memory and file, plain and compressed, every target), lz4 frames, up-conversion."""
    import tempfile

    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.conversion._to_legacy import convert_run_ends
    from lazyconv.conversion._up import up_convert
    from lazyconv.records import (
        Compression,
        FileRecords,
        MemoryRecords,
        RecordsBuilder,
        scan_batches,
    )
    from lazyconv.records._digest import digest_delivered, digest_legacy_run, digest_v2_records
    from lazyconv.records._segment_run import segment_run

    data = b""
    for codec in (Compression.NONE, Compression.LZ4, Compression.NONE, Compression.GZIP):
        builder = RecordsBuilder(2, codec, base_offset=len(data) and 100 * codec + 10)
        for i in range(5):
            builder.append(None, 1000 + i, b"k%d" % i, b"v" * 50, [("h", b"x")] if i == 2 else [])
        data += builder.build()
    legacy = RecordsBuilder(1, base_offset=0)
    legacy.append(0, 5, b"k", b"v")
    legacy_data = legacy.build()
    for record in MemoryRecords(data).records():
        assert record.value
    for batch in MemoryRecords(data).batches():
        batch.validate()
    scan_batches(data)
    plain = MemoryRecords(data).batches()
    first = next(iter(plain))
    digest_v2_records(first.records_buffer(), first.record_count, first.base_offset, first.base_timestamp, None)
    digest_legacy_run(legacy_data, 0)
    digest_delivered(legacy_data, 0, lambda codec, magic, value: None)
    segment_run(data, 0, None, 0, None, -1)
    convert_run_ends(first.buffer().tobytes(), bytearray(), 1)
    assert len(list(MemoryRecords(first.buffer().tobytes() * 3).records())) == 15  # plain batches only
    for to_magic in (0, 1):
        down_convert_bytes(MemoryRecords(data).batches(), to_magic, 0)
        send = LazyDownConvertedRecords(MemoryRecords(data * 40), to_magic, 0, chunk_size=16 * 1024).to_send()
        send.to_bytes()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "00000000000000000000.log"
        path.write_bytes(data * 40)
        with FileRecords.open(path) as records:
            down_convert_bytes(records.batches(), 1, 0)
            LazyDownConvertedRecords(records, 0, 0, chunk_size=16 * 1024).to_send().to_bytes()
    up_convert(legacy_data)


@contextmanager
def kernel_calls() -> Iterator[list[str]]:
    """The names of the kernel functions called in the body (every C call is seen by a
    profiler; iterator ``__next__`` slots are not calls, but making an iterator is)."""
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__module__", None) == EXTENSION:
            seen.append(arg.__name__)

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


@pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_reference_twin_calls_no_kernel_function() -> None:
    with _impl.using(_impl.REFERENCE), kernel_calls() as reference_calls:
        workload()
    assert reference_calls == []
    with kernel_calls() as native_calls:
        workload()
    assert {"crc32c", "iter_plain_v2", "convert_v2_run", "convert_v2_chunk", "scan_entries", "segment_run",
            "digest_v2_records", "lz4_frame_blocks", "encode_v2_records", "legacy_set_to_v2"} <= set(native_calls)


def test_using_switches_every_hot_function_and_restores_them() -> None:
    before = {name: getattr(_impl, name) for name in _impl._NAMES}
    with _impl.using("python") as twin:
        assert twin is _impl.REFERENCE is _impl.current
        assert all(getattr(_impl, name) is getattr(_impl.REFERENCE, name) for name in _impl._NAMES)
    assert {name: getattr(_impl, name) for name in _impl._NAMES} == before
    assert set(_impl._NAMES) | {"name", "converts_runs"} == set(vars(_impl.REFERENCE))
    if _impl.NATIVE is not None:
        assert set(vars(_impl.NATIVE)) == set(vars(_impl.REFERENCE))


@pytest.mark.slow  # a fresh interpreter: kept out of the quick look
def test_with_no_extensions_no_kernel_function_is_reachable() -> None:
    code = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        import lazyconv
        for module in pkgutil.walk_packages(lazyconv.__path__, "lazyconv."):
            if module.name.startswith(("lazyconv.spark", "lazyconv.records._ckernel")):
                continue  # Spark needs a JVM; the extension itself
            importlib.import_module(module.name)
        from lazyconv.records import _impl
        assert _impl.NATIVE is None and _impl.current is _impl.REFERENCE
        assert all(getattr(_impl, name) is getattr(_impl.REFERENCE, name) for name in _impl._NAMES)
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_impl_switch import workload
        workload()
        assert {EXTENSION!r} not in sys.modules, "the extension was imported"
        for module in list(sys.modules.values()):
            for value in list(vars(module).values()) if module is not None else ():
                assert getattr(value, "__module__", None) != {EXTENSION!r}, (module, value)
        print("pure")
        """
    )
    env = {**os.environ, "LAZYCONV_NO_EXTENSIONS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["pure"]


def _python_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.slow  # a scan of every module: kept out of the quick look
def test_only_impl_names_the_extension_and_hot_functions_are_looked_up_at_call_time() -> None:
    offenders = []
    for path in _python_modules():
        if path.name == "_impl.py":
            continue
        tree = parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "lazyconv.records._impl":
                names = {alias.name for alias in node.names} - IMPORTABLE_NAMES
                if names:
                    offenders.append(f"{path.relative_to(PACKAGE)}: from _impl import {sorted(names)}")
            imported = []
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                imported = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"
            ):
                imported = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            if any("_ckernel" in str(name) for name in imported):
                offenders.append(f"{path.relative_to(PACKAGE)}: imports the extension")
    assert offenders == []


def test_an_out_of_date_kernel_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel built from older sources (an editable install not rebuilt) lacks entry points:
    lazyconv warns, says how to rebuild, and runs in pure Python instead of failing to import."""
    import sys
    import types

    from lazyconv.records import _impl

    stale = types.ModuleType("lazyconv.records._ckernel")
    stale.crc32 = lambda data: 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazyconv.records._ckernel", stale)
    monkeypatch.delenv(_impl.NO_EXTENSIONS_ENV, raising=False)
    with pytest.warns(RuntimeWarning, match="out of date .*legacy_set_to_v2.*rebuild"):
        assert _impl._load() is None
