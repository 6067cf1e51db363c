"""The compiled kernel's contract: CRCs equal zlib's and the crc32c package's on every code
path, the C wire constants equal ``_format.py``, the implementation is reported, and the
kernel is what runs when it is built (unless ``LAZYCONV_NO_EXTENSIONS=1``)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c as package_crc32c

from lazyconv.records import _format, _impl

KERNEL_DIR = Path(_format.__file__).parent / "_kernel"
kernel: Any = _impl.kernel_module()  # the extension module itself (None in pure Python)
native_only = pytest.mark.skipif(kernel is None, reason="compiled kernel not in use")


def test_format_header_is_generated_from_format_py() -> None:
    assert (KERNEL_DIR / "format.h").read_text() == _format.c_header()


def test_kafka_layout_constants() -> None:
    f = _format
    assert (f.LOG_OVERHEAD, f.RECORDS_COUNT_OFFSET, f.RECORD_BATCH_OVERHEAD, f.BATCH_LENGTH_MIN) == (12, 57, 61, 49)
    assert (f.CRC_OFFSET, f.ATTRIBUTES_OFFSET, f.MAX_TIMESTAMP_OFFSET, f.PRODUCER_ID_OFFSET) == (17, 21, 35, 43)
    assert (f.RECORD_OVERHEAD_V0, f.RECORD_OVERHEAD_V1, f.LEGACY_KEY_SIZE_OFFSET_V1) == (14, 22, 14)


@native_only
def test_extension_constants_equal_format_py() -> None:
    assert kernel is not None
    assert kernel.FORMAT == _format.CONSTANTS
    stops = ("STOP_END", "STOP_COMPRESSED", "STOP_NOT_V2", "STOP_PARTIAL", "STOP_INVALID", "CHUNK_DONE", "CHUNK_MIXED",
             "SEND_CONVERTED", "SEND_DECLINED", "SEND_SHORT")
    assert {name: getattr(kernel, name) for name in stops} == {name: getattr(_impl, name) for name in stops}


def test_implementation_is_reported() -> None:
    import lazyconv.records

    info = lazyconv.records.implementation_info()
    assert info["implementation"] == lazyconv.records.IMPLEMENTATION == _impl.IMPLEMENTATION
    assert lazyconv.records.CPU_FEATURES == _impl.CPU_FEATURES
    if os.environ.get("LAZYCONV_NO_EXTENSIONS") == "1":
        assert _impl.IMPLEMENTATION == "python" and _impl.CPU_FEATURES == ()
    elif os.environ.get("LAZYCONV_EXPECT_NATIVE") == "1" or os.environ.get("CI") == "true":
        # CI (and whoever sets LAZYCONV_EXPECT_NATIVE=1) has gcc: the build must have worked
        assert _impl.IMPLEMENTATION == "native"
    assert _impl.IMPLEMENTATION in _impl.describe()


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_version_shows_the_implementation() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lazyconv._cli", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("lazyconv ") and f"implementation: {_impl.IMPLEMENTATION}" in done.stdout


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_no_extensions_env_forces_pure_python() -> None:
    code = "from lazyconv.records import _impl; import zlib; print(_impl.IMPLEMENTATION, _impl.crc32 is zlib.crc32)"
    env = {**os.environ, "LAZYCONV_NO_EXTENSIONS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split() == ["python", "True"]


# -- CRCs ---------------------------------------------------------------------------------------


def _paths() -> list[str]:
    if kernel is None:
        return []
    paths = ["portable"]
    if "pclmul" in _impl.CPU_FEATURES and "sse4.2" in _impl.CPU_FEATURES:
        paths.append("hardware")
    return paths


_NO_PATHS: list[Any] = [pytest.param("none", marks=pytest.mark.skip("no kernel"))]


@pytest.fixture(params=_paths() or _NO_PATHS)
def crc_path(request: pytest.FixtureRequest) -> Iterator[str]:
    assert kernel is not None
    kernel.select_crc(request.param, request.param)
    try:
        assert kernel.crc_implementations() == (
            ("pclmul", "sse4.2") if request.param == "hardware" else ("slice-by-8", "slice-by-8")
        )
        yield request.param
    finally:
        kernel.select_crc("auto", "auto")


def test_crcs_equal_zlib_and_crc32c_on_random_lengths_and_alignments(crc_path: str) -> None:
    assert kernel is not None
    rng = random.Random(1234)
    block = rng.randbytes(70_000)
    lengths = list(range(0, 300)) + [rng.randrange(300, 40_000) for _ in range(200)] + [3 * 2048 * 2 + 5, 65_000]
    for length in lengths:
        offset = rng.randrange(0, 16)
        view = memoryview(block)[offset : offset + length]
        start = rng.choice([0, 0xFFFFFFFF, rng.getrandbits(32)])
        assert kernel.crc32(view, start) == zlib.crc32(view, start), (length, offset)
        assert kernel.crc32c(view, start) == package_crc32c(view, start), (length, offset)


def test_crcs_continue_across_pieces(crc_path: str) -> None:
    assert kernel is not None
    data = random.Random(5).randbytes(20_000)
    for cut in (0, 1, 63, 64, 4097, 19_999):
        k = kernel
        assert k.crc32(data[cut:], k.crc32(data[:cut])) == zlib.crc32(data)
        assert k.crc32c(data[cut:], k.crc32c(data[:cut])) == package_crc32c(data)


@native_only
def test_known_check_values() -> None:
    assert kernel is not None
    assert kernel.crc32(b"123456789") == 0xCBF43926
    assert kernel.crc32c(b"123456789") == 0xE3069283


@native_only
def test_select_crc_refuses_unknown_names() -> None:
    assert kernel is not None
    with pytest.raises(ValueError, match="auto, portable or hardware"):
        kernel.select_crc("fast")


@native_only
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_kernel_calls_run_in_threads() -> None:
    """The GIL is released while the kernel works: threads converting at once get the same bytes."""
    from bench.bench_common import make_v2_batches
    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.records import MemoryRecords

    data = make_v2_batches(1 << 20, 1024)
    expected = bytes(down_convert_bytes(MemoryRecords(data).batches(), 1, 0)[0])
    results: list[bytes] = []

    def work() -> None:
        results.append(bytes(down_convert_bytes(MemoryRecords(data).batches(), 1, 0)[0]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


@pytest.mark.slow
@native_only
def test_cpu_features_allocates_nothing_it_keeps() -> None:
    """Issue 24: each call leaked one string per feature (+200,000 blocks after 100,000 calls)."""
    import gc
    import tracemalloc

    expected = kernel.cpu_features()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(100_000):
            assert kernel.cpu_features() == expected
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    blocks = sum(stat.count_diff for stat in after.compare_to(before, "filename"))
    assert blocks < 100, blocks


def test_the_extension_is_split_one_file_per_concern_with_init_apart() -> None:
    """module.c only initialises the module: each *_py.c defines and registers its own
    functions (and types) through an lc_py_*_init declared in module.h, and module.c calls
    every one of them."""
    module_c = (KERNEL_DIR / "module.c").read_text()
    declared = re.findall(r"int (lc_py_\w+_init)\(PyObject \*module\);", (KERNEL_DIR / "module.h").read_text())
    assert len(declared) >= 10
    assert all(f"{name}(m)" in module_c for name in declared)
    assert "PyDoc_STRVAR" not in module_c and "PyMethodDef" not in module_c
    defined = {
        name for path in KERNEL_DIR.glob("*_py.c") for name in re.findall(r"^int (lc_py_\w+_init)\(", path.read_text(), re.M)
    } | {name for path in KERNEL_DIR.glob("*_iterator.c") for name in re.findall(r"^int (lc_py_\w+_init)\(", path.read_text(), re.M)}
    assert defined == set(declared)


@native_only
def test_a_record_count_the_payload_cannot_hold_reserves_nothing_for_it() -> None:
    """A v2 record takes 7 bytes at least: the conversions declined a count above the payload's
    size only, and reserved 27 bytes of output per claimed record first (an 8 MiB fetch of
    batches of zeros claiming a record per byte made a 224 MiB reservation, and a MemoryError
    where memory is capped, instead of the reference's InvalidRecordError)."""
    import tracemalloc

    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.errors import InvalidRecordError
    from lazyconv.records import MemoryRecords, encode_v2_batch

    payload = bytes(1 << 20)

    def batch(count: int) -> bytes:
        return encode_v2_batch(
            base_offset=0, partition_leader_epoch=-1, attributes=0, last_offset_delta=0, base_timestamp=0,
            max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count,
            payload=payload)

    data = batch(len(payload)) * 8
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError):
            down_convert_bytes(MemoryRecords(data).batches(), 1, 0)
        out = bytearray()
        assert kernel.convert_v2_run(data, out, 1, 0) == (0, 0, 0, _impl.STOP_INVALID)
        assert kernel.convert_v2_chunk(data, out, len(data), 0, 0)[1] == _impl.CHUNK_MIXED
        assert kernel.convert_v2_records(out, payload, len(payload) // 7 + 1, 0, 0, None, 1, 0, False) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    # the most records the payload can hold still converts as far as the records go
    assert kernel.convert_v2_run(batch(len(payload) // 7), bytearray(), 1, 0)[3] == _impl.STOP_INVALID
