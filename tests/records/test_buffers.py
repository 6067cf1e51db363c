"""Every bytes-like buffer is read alike by both twins and every entry point (issue 24: a ctypes
byte array was accepted by the kernel's ``down_convert`` but refused by its lazy send and by
pure Python, with a ``NotImplementedError``): any C-contiguous buffer is its bytes; anything
else is a :class:`~lazyconv.errors.ConfigurationError` everywhere."""

from __future__ import annotations

import array
import ctypes
from collections.abc import Callable
from typing import Any

import pytest

from lazyconv.conversion._down import down_convert
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import ConfigurationError
from lazyconv.records import MemoryRecords, RecordsBuilder, _impl, scan_batches

TWINS = ["python"] + (["native"] if _impl.NATIVE is not None else [])


def _data() -> bytes:
    out = b""
    for base in (0, 3):
        builder = RecordsBuilder(2, base_offset=base)
        for i in range(3):
            builder.append(base + i, 5, b"k", b"v" * 10)
        out += builder.build()
    return out


DATA = _data()
BUFFERS: dict[str, Callable[[], Any]] = {
    "bytes": lambda: DATA,
    "bytearray": lambda: bytearray(DATA),
    "ctypes c_ubyte": lambda: (ctypes.c_ubyte * len(DATA)).from_buffer_copy(DATA),
    "ctypes c_char": lambda: (ctypes.c_char * len(DATA)).from_buffer_copy(DATA),
    "array b": lambda: array.array("b", DATA),
    "memoryview cast to a 2-d shape": lambda: memoryview(bytearray(DATA)).cast("B", (len(DATA) // 2, 2)),
}


def _outcomes(buffer: Any) -> tuple[Any, ...]:
    return (
        list(MemoryRecords(buffer).records()),
        bytes(down_convert(MemoryRecords(buffer).batches(), 1, 0).records.buffer),
        LazyDownConvertedRecords(MemoryRecords(buffer), 0, 0).to_send().to_bytes(),
        [entry.valid for entry in scan_batches(buffer).entries],
    )


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("kind", list(BUFFERS))
def test_any_contiguous_buffer_reads_as_its_bytes(kind: str, twin: str) -> None:
    assert len(DATA) % 2 == 0
    expected = _outcomes(DATA)
    with _impl.using(twin):
        assert _outcomes(BUFFERS[kind]()) == expected


@pytest.mark.parametrize("twin", TWINS)
def test_a_non_contiguous_buffer_is_a_configuration_error(twin: str) -> None:
    strided = memoryview(DATA * 2)[::2]
    with _impl.using(twin):
        for call in (lambda: MemoryRecords(strided), lambda: scan_batches(strided), lambda: MemoryRecords(42)):
            with pytest.raises(ConfigurationError):
                call()


def test_a_released_buffer_and_bad_bounds_are_configuration_errors() -> None:
    view = memoryview(bytearray(DATA))
    view.release()
    with pytest.raises(ConfigurationError, match="bytes-like"):  # was memoryview's ValueError
        MemoryRecords(view)
    for bound in (None, "1M", 0):  # a TypeError on comparing, for the first two
        with pytest.raises(ConfigurationError, match="max_decompressed_size"):
            MemoryRecords(DATA, bound)  # type: ignore[arg-type]
    for position, size in (("0", 1), (0, None), (-1, 1)):
        with pytest.raises(ConfigurationError, match="slice"):
            MemoryRecords(DATA).slice(position, size)  # type: ignore[arg-type]


def _released() -> memoryview:
    view = memoryview(bytearray(DATA))
    view.release()
    return view


@pytest.mark.parametrize("bad", [lambda: 42, lambda: "text", _released, lambda: memoryview(DATA * 2)[::2]],
                         ids=["int", "str", "released view", "strided view"])
def test_records_and_a_builders_key_value_and_header_refuse_a_buffer_alike(bad: Callable[[], Any]) -> None:
    """One definition of a bytes-like argument (byte_view): the builder's key, value and header
    value are refused as records are, with the same words (a released view was memoryview's bare
    ValueError there, a strided one was copied)."""
    with pytest.raises(ConfigurationError) as refused:
        MemoryRecords(bad())
    reason = str(refused.value).removeprefix("records ")
    calls = {"a record's key": lambda: RecordsBuilder(2).append(0, 1, bad(), b"v"),
             "a record's value": lambda: RecordsBuilder(2).append(0, 1, b"k", bad()),
             "a record's header value": lambda: RecordsBuilder(2).append(0, 1, b"k", b"v", [("h", bad())])}
    for what, call in calls.items():
        with pytest.raises(ConfigurationError) as caught:
            call()
        assert str(caught.value) == f"{what} {reason}"
