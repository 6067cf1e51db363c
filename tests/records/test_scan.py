"""scan_batches: the kernel's one-pass scan equals the reference (the batch classes' own checks)
on random and corrupted record sets, and its verdicts match what reading the batches does."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fuzz_kernel import _batch, _legacy, _mutate
from lazyconv.records import MemoryRecords, _impl
from lazyconv.records._scan import scan_batches, scan_batches_reference
from tests.records.test_kernel_differential import control_batch, entries, legacy_entry, mutated


def _comparable(result):  # type: ignore[no-untyped-def]
    return result.entries, result.end, result.stop


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
@settings(max_examples=80)
@given(st.data(), st.lists(entries, min_size=0, max_size=4), st.integers(0, 1 << 40))
def test_scan_equals_reference(data: st.DataObject, parts: list[bytes], base: int) -> None:
    stream = data.draw(mutated(b"".join(parts)))
    assert _comparable(scan_batches(stream, base)) == _comparable(scan_batches_reference(stream, base))


@pytest.mark.slow  # over a second: kept out of the quick look
def test_scan_equals_reference_on_fuzz_inputs() -> None:
    rng = random.Random(77)
    for _ in range(1500):
        parts = [_batch(rng) if rng.random() < 0.8 else _legacy(rng) for _ in range(rng.randint(1, 4))]
        stream = _mutate(rng, b"".join(parts))
        assert _comparable(scan_batches(stream)) == _comparable(scan_batches_reference(stream))


def test_verdicts_match_reading() -> None:
    rng = random.Random(5)
    for _ in range(300):
        stream = _mutate(rng, b"".join(_batch(rng) for _ in range(3)))
        result = scan_batches(stream, 100)
        for entry in result.entries:
            error = result.error(entry)
            assert (error is None) == entry.valid
            if error is not None:
                assert error.position is not None and error.position >= 100


def test_fields_of_good_entries() -> None:
    stream = legacy_entry(1, 5, 0) + control_batch(9) + legacy_entry(0, 20, 1)
    result = scan_batches(stream)
    assert result.stop == "end" and result.end == len(stream)
    assert [(e.magic, e.base_offset, e.last_offset, e.record_count, e.valid) for e in result.entries] == [
        (1, 5, 5, 1, True), (1, 6, 6, 1, True), (2, 9, 9, 1, True), (0, 21, 21, -1, True),
    ]
    assert [b.position for b in MemoryRecords(stream).batches()] == [e.position for e in result.entries]


@pytest.mark.parametrize(("tail", "stop"), [(b"\x00" * 5, "partial"), (b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 5, "bad_size")])
def test_stops(tail: bytes, stop: str) -> None:
    stream = control_batch(1) + tail
    result = scan_batches(stream)
    assert result.stop == stop and result.end == len(control_batch(1))
    assert (result.stop_error() is not None) == (stop == "bad_size")


@pytest.mark.slow  # over half a second: kept out of the quick look
@pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")
def test_scan_is_one_call_over_many_entries() -> None:
    from bench.bench_common import make_v2_batches

    data = make_v2_batches(3 << 20, 100)
    result = scan_batches(data)
    assert len(result.entries) > 4096 // 20 and all(e.valid for e in result.entries)
    assert result.end == len(data) and result.stop == "end"
