"""digest_delivered: what a legacy consumer receives (plain messages and compressed wrappers)
digested in one call, kernel against reference and against decoding every record."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.conversion._down import down_convert_bytes, is_zstd_below_v2
from lazyconv.errors import LazyconvError
from lazyconv.logdir._layout import list_segments
from lazyconv.records import FileRecords, MemoryRecords, _impl
from lazyconv.records._compression import decompress
from lazyconv.records._digest import (
    DIGEST_END,
    MASK64,
    digest_delivered,
    digest_delivered_reference,
    record_digest,
)

COMMITTED = Path(__file__).resolve().parent.parent.parent / "fixtures"


def _inner(codec: int, magic: int, value: bytes) -> bytes | None:
    try:
        return decompress(codec, value, magic)
    except LazyconvError:
        return None


def _converted_streams() -> list[tuple[int, bytes]]:
    """(to_magic, bytes) of the committed fixtures' segments down-converted as a broker would."""
    streams = []
    for seg in list_segments(str(COMMITTED)):
        if seg.partition:
            continue
        records = FileRecords.open(seg.log_path)
        try:
            batches = list(records.batches())
            for to_magic in (0, 1):
                kept = [b for b in batches if not is_zstd_below_v2(b, to_magic)]
                data, _ = down_convert_bytes(kept, to_magic, 0)
                streams.append((to_magic, bytes(data)))
        finally:
            records.close()
    return streams


STREAMS = _converted_streams()


def _by_records(data: bytes, min_offset: int) -> tuple[int, int, int]:
    """(last offset, count, digest sum) decoding every record with the records layer."""
    last = -1
    count = total = 0
    for batch in MemoryRecords(data).batches():
        last = batch.last_offset
        for r in batch:
            if r.offset >= min_offset:
                count += 1
                total += record_digest(r.offset, r.timestamp, r.key, r.value)
    return last, count, total & MASK64


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_a_whole_converted_stream_digests_as_its_decoded_records() -> None:
    wrappers = 0
    for _to_magic, data in STREAMS:
        for min_offset in (0, 7):
            run = digest_delivered(data, min_offset, _inner)
            assert run.stop == DIGEST_END and run.consumed == len(data)
            assert (run.last_offset, run.records, run.sum) == _by_records(data, min_offset)
        wrappers += sum(1 for b in MemoryRecords(data).batches() if b.attributes & 7)
    assert wrappers > 50


@pytest.mark.skipif(_impl.NATIVE is None, reason="compares the compiled kernel with the reference")
@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(STREAMS) - 1), st.integers(0, 1 << 20), st.integers(0, 2),
       st.integers(-1, 400), st.randoms(use_true_random=False))
@pytest.mark.slow  # over a second: kept out of the quick look
def test_kernel_and_reference_agree_on_cut_and_damaged_streams(
        which: int, cut: int, flips: int, min_offset: int, rng: random.Random) -> None:
    data = bytearray(STREAMS[which][1][: cut % (len(STREAMS[which][1]) + 1)])
    for _ in range(flips if data else 0):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    assert digest_delivered(bytes(data), min_offset, _inner) == digest_delivered_reference(
        bytes(data), min_offset, _inner)


def test_a_wrapper_the_function_refuses_is_left_to_the_reader() -> None:
    _, data = next(s for s in STREAMS if any(b.attributes & 7 for b in MemoryRecords(s[1]).batches()))
    first_wrapper = next(b for b in MemoryRecords(data).batches() if b.attributes & 7)
    run = digest_delivered(data, 0, lambda codec, magic, value: None)
    assert run.consumed == first_wrapper.position
    assert run.stop != DIGEST_END


@pytest.mark.skipif(_impl.NATIVE is None, reason="the kernel's callback")
def test_an_exception_in_the_decompress_function_propagates() -> None:
    _, data = next(s for s in STREAMS if any(b.attributes & 7 for b in MemoryRecords(s[1]).batches()))

    def broken(codec: int, magic: int, value: bytes) -> bytes:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        digest_delivered(data, 0, broken)
