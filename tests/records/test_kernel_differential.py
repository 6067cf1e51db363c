"""Differential tests: the compiled kernel and the pure-Python reference give the same output
(bytes and stats) and the same errors (type, message, position) on random record sets.

Inputs: concatenations of random v2 batches (every codec but zstd, CreateTime/LogAppendTime,
control and transactional batches, headers, null keys/values, extreme offsets/timestamps),
legacy v0/v1 entries, and the same streams mutated (byte flips, truncation, lying length and
count fields), at random first offsets. Both sides come from the one switch,
``lazyconv.records._impl``: the same public code runs once on the kernel and once inside
``_impl.using(_impl.REFERENCE)``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyconv.records._batch as batch_module
from lazyconv.conversion._down import down_convert_bytes
from lazyconv.errors import LazyconvError
from lazyconv.records import MemoryRecords, RecordsBuilder, _impl, build_end_txn_marker
from tests.conversion.test_convert_fused import corrupted, well_formed

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")


def outcome(data: bytes, to_magic: int, first_offset: int) -> tuple[Any, ...]:
    try:
        out, stats = down_convert_bytes(MemoryRecords(data).batches(), to_magic, first_offset)
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)
    return ("ok", bytes(out), stats.records_converted, stats.temporary_memory_bytes)


def decoded(data: bytes) -> tuple[Any, ...]:
    records: list[Any] = []
    try:
        for record in MemoryRecords(data).records():
            records.append(record)
    except LazyconvError as exc:
        return ("error", records, type(exc), str(exc), exc.position)
    return ("ok", records)


def pure(fn: Callable[[], Any]) -> Any:
    with _impl.using(_impl.REFERENCE):
        return fn()


def both(data: bytes, to_magic: int, first_offset: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    return outcome(data, to_magic, first_offset), pure(lambda: outcome(data, to_magic, first_offset))


def legacy_entry(magic: int, offset: int, codec: int) -> bytes:
    builder = RecordsBuilder(magic, codec, base_offset=offset)
    builder.append(None, 1_700_000_000_000, b"key", b"value-%d" % offset)
    builder.append(None, 1_700_000_000_001, None, b"")
    return bytes(builder.build())


def control_batch(offset: int) -> bytes:
    return bytes(build_end_txn_marker(offset, 1_700_000_000_000, 7, 1, True))


entries = st.one_of(
    well_formed().map(lambda case: case[0]),
    well_formed().map(lambda case: case[0]),
    corrupted().map(lambda case: case[0]),
    st.builds(legacy_entry, st.sampled_from([0, 1]), st.integers(0, 100), st.sampled_from([0, 1])),
    st.builds(control_batch, st.integers(0, 100)),
)


@st.composite
def mutated(draw: st.DrawFn, stream: bytes) -> bytes:
    data = bytearray(stream)
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "length", "count", "truncate"]))
        position = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[position] = draw(st.integers(0, 255))
        elif kind == "length" and len(data) >= 12:  # a lying batch length, at a batch start or not
            at = draw(st.sampled_from([0, position])) if position + 12 <= len(data) else 0
            struct.pack_into(">i", data, at + 8, draw(st.integers(-5, 1 << 20) | st.sampled_from([49, 0x7FFFFFFF])))
        elif kind == "count" and len(data) >= 61:
            struct.pack_into(">i", data, 57, draw(st.integers(-2, 1 << 31 - 1)))
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


@settings(max_examples=60)
@given(st.lists(entries, min_size=1, max_size=5), st.sampled_from([0, 1]), st.integers(-1, 120))
@pytest.mark.slow  # over a second: kept out of the quick look
def test_kernel_equals_reference_on_random_record_sets(
    parts: list[bytes], to_magic: int, first_offset: int
) -> None:
    native, reference = both(b"".join(parts), to_magic, first_offset)
    assert native == reference


@pytest.mark.slow
@settings(max_examples=80)
@given(st.data(), st.lists(entries, min_size=1, max_size=4), st.sampled_from([0, 1]), st.integers(-1, 50))
def test_kernel_equals_reference_on_mutated_record_sets(
    data: st.DataObject, parts: list[bytes], to_magic: int, first_offset: int
) -> None:
    stream = data.draw(mutated(b"".join(parts)))
    native, reference = both(stream, to_magic, first_offset)
    assert native == reference
    assert decoded(stream) == pure(lambda: decoded(stream))


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
@settings(max_examples=60)
@given(st.lists(entries, min_size=1, max_size=4))
def test_decoding_equals_reference(parts: list[bytes]) -> None:
    """Iterating records (kernel decoder, hand-over to the reference at a malformed record)
    yields the same records, then the same error, as the reference alone."""
    stream = b"".join(parts)
    assert decoded(stream) == pure(lambda: decoded(stream))


def _runs() -> Iterator[bytes]:
    from bench.bench_common import make_v2_batches

    for value_size in (0, 10, 1024):
        yield make_v2_batches(20_000, max(value_size, 1))


@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("first_offset", [0, 7, 1 << 70, -(1 << 70)])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_kernel_equals_reference_on_producer_batches(to_magic: int, first_offset: int) -> None:
    for data in _runs():
        native, reference = both(data, to_magic, first_offset)
        assert native == reference and native[0] == "ok"


def test_kernel_converts_whole_runs_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain v2 batches are converted per run, not per batch: one kernel call for the chunk."""
    from bench.bench_common import make_v2_batches

    convert_v2_run = _impl.convert_v2_run
    calls: list[int] = []

    def counting(*args: Any) -> Any:
        calls.append(1)
        return convert_v2_run(*args)

    monkeypatch.setattr(_impl, "convert_v2_run", counting)
    data = make_v2_batches(200_000, 100)
    assert len(list(MemoryRecords(data).batches())) > 5
    down_convert_bytes(MemoryRecords(data).batches(), 1, 0)
    assert len(calls) == 1


def decoded_past_errors(data: bytes) -> list[Any]:
    """Every record and every error of iterating the records, going on after an error as
    chaining the batches' iterators does (a later batch is still read)."""
    seen: list[Any] = []
    records = MemoryRecords(data).records()
    for _ in range(64):
        try:
            for record in records:
                seen.append(record)
            return seen
        except LazyconvError as exc:
            seen.append((type(exc), str(exc), exc.position))
    return seen


def complete_v2_end(data: bytes) -> int:
    """The end of the complete entries when the entry splitter delimits every one as a magic-2
    batch (a scan that, unlike the kernel's, does not check the records: the decoder's own
    hand-overs then see malformed records); -1 otherwise."""
    end = 0
    try:
        for batch in MemoryRecords(data).batches():
            if not isinstance(batch, batch_module.DefaultBatch):
                return -1
            end = batch.position + batch.size_in_bytes
    except LazyconvError:
        return -1
    return end


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
@settings(max_examples=80)
@given(st.data(), st.lists(entries, min_size=1, max_size=4))
def test_plain_decoder_hands_over_like_the_reference(data: st.DataObject, parts: list[bytes]) -> None:
    """The kernel's record iterator over whole runs of batches (iter_plain_v2) yields and raises
    what iterating the batches does, also after an error, and also when it meets malformed
    records itself (the kernel's scan, which rules those out, is replaced by a laxer one)."""
    stream = data.draw(mutated(b"".join(parts)))
    reference = pure(lambda: decoded_past_errors(stream))
    assert decoded_past_errors(stream) == reference
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_impl, "scan_plain_v2", lambda view: complete_v2_end(bytes(view)))
        lax = decoded_past_errors(stream)
    assert lax == reference
