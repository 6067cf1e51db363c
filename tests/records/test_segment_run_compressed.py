"""segment_run over compressed batches: the kernel (calling back for decompression) and the
pure-Python reference take the same runs and return the same facts and records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lazyconv.errors import LazyconvError
from lazyconv.logdir._layout import list_segments
from lazyconv.records import _impl
from lazyconv.records._compression import decompress
from lazyconv.records._segment_run import (
    RUN_COMPRESSED,
    segment_run,
    segment_run_reference,
)

COMMITTED = Path(__file__).resolve().parent.parent.parent / "fixtures"
_HEADER = struct.Struct(">qi")


def _records(codec: int, data: bytes) -> bytes | None:
    try:
        return decompress(codec, data, 2)
    except LazyconvError:
        return None


def _entry_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 17 <= len(data):
        starts.append(pos)
        pos += 12 + _HEADER.unpack_from(data, pos)[1]
    return starts


@pytest.mark.slow
@pytest.mark.skipif(_impl.NATIVE is None, reason="compares the compiled kernel with the reference")
def test_kernel_and_reference_take_the_same_runs_of_compressed_batches() -> None:
    compressed = 0
    for seg in list_segments(str(COMMITTED)):
        data = Path(seg.log_path).read_bytes()
        for start in _entry_starts(data)[:10]:
            for prev_offset, prev_epoch in ((None, None), (seg.base_offset + 5, 0)):
                args = (data[start:], start, prev_offset, seg.base_offset, prev_epoch, -1, _records)
                native = segment_run(*args)
                reference = segment_run_reference(*args)
                assert native == reference, (seg.log_path, start)
                compressed += len(native.compressed)
    assert compressed > 100


def test_without_a_decompress_function_a_run_stops_at_the_first_compressed_batch() -> None:
    seg = next(s for s in list_segments(str(COMMITTED)) if s.topic == "codecs")
    data = Path(seg.log_path).read_bytes()
    with_records = segment_run(data, 0, None, seg.base_offset, None, -1, _records)
    without = segment_run(data, 0, None, seg.base_offset, None, -1)
    first_compressed = with_records.compressed[0][0]
    assert len(without.positions) == first_compressed
    assert without.consumed == with_records.positions[first_compressed]


def test_a_batch_whose_records_do_not_decompress_ends_the_run_before_it() -> None:
    seg = next(s for s in list_segments(str(COMMITTED)) if s.topic == "codecs")
    data = Path(seg.log_path).read_bytes()
    whole = segment_run(data, 0, None, seg.base_offset, None, -1, _records)
    index, _ = whole.compressed[1]
    refused = 0

    def refuse_the_second(codec: int, region: bytes) -> bytes | None:
        nonlocal refused
        refused += 1
        return None if refused == 2 else _records(codec, region)

    cut = segment_run(data, 0, None, seg.base_offset, None, -1, refuse_the_second)
    assert cut.consumed == whole.positions[index]
    assert len(cut.compressed) == 1
    assert all(m.flags & RUN_COMPRESSED == 0 or m.position < cut.consumed for m in cut.markers)


@pytest.mark.skipif(_impl.NATIVE is None, reason="the kernel's callback")
def test_an_exception_in_the_decompress_function_propagates() -> None:
    seg = next(s for s in list_segments(str(COMMITTED)) if s.topic == "codecs")
    data = Path(seg.log_path).read_bytes()

    def broken(codec: int, region: bytes) -> bytes:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        segment_run(data, 0, None, seg.base_offset, None, -1, broken)
    with pytest.raises(TypeError):
        segment_run(data, 0, None, seg.base_offset, None, -1, lambda c, r: "not bytes")
