"""Differential tests of the lazy send's compiled chunking (``kernel.convert_v2_chunk``): the
chunks the kernel decides and converts are the reference policy's (``chunk_groups`` over batch
objects): the same bytes, the same pieces (chunk boundaries), the same stats and the same error
(type, message, position), for memory and file records, on well-formed and mutated inputs.

The reference runs inside ``_impl.using(_impl.REFERENCE)`` (the send then groups batches and
converts them in pure Python).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lazy_support import build_batch, v2_end_txn_marker

from lazyconv._lazy import MIN_CHUNK_SIZE, LazyDownConvertedRecords
from lazyconv.errors import LazyconvError
from lazyconv.records import Compression, FileRecords, MemoryRecords, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

KINDS = ["plain"] * 10 + ["gzip", "v1", "control", "zstd", "big"]


def _entry(kind: str, offset: int, rng: random.Random) -> tuple[bytes, int]:
    if kind == "control":
        return v2_end_txn_marker(offset, 1000, producer_id=5, commit=True), offset + 1
    count = rng.randint(1, 4)
    size = 40_000 if kind == "big" else rng.choice([10, 300, 1500, 3000])
    records = [(1_000 + i, b"k%d" % i if i % 2 else None, bytes([i % 251]) * size) for i in range(count)]
    offsets = list(range(offset, offset + count))
    if kind == "v1":
        return b"".join(build_batch(1, [rec], offsets=[off]) for rec, off in zip(records, offsets, strict=True)), offset + count
    codec = {"gzip": Compression.GZIP, "zstd": Compression.ZSTD}.get(kind, Compression.NONE)
    return build_batch(2, records, offsets=offsets, compression=codec), offset + count


def make_input(seed: int, kinds: list[str], mutate: bool) -> bytes:
    rng = random.Random(seed)
    offset = rng.randint(0, 1000)
    data = bytearray()
    for kind in kinds:
        entry, offset = _entry(kind, offset, rng)
        data += entry
    if mutate and data:
        for _ in range(rng.randint(1, 3)):
            choice = rng.random()
            position = rng.randrange(len(data))
            if choice < 0.5:
                data[position] ^= 1 << rng.randrange(8)
            elif choice < 0.8:
                del data[position:]
                if not data:
                    break
            else:  # a lying size field somewhere near the start of an entry
                data[position : position + 4] = rng.randrange(-20, 1 << 20).to_bytes(4, "big", signed=True)
    return bytes(data)


def send_outcome(make_records: Callable[[], Any], to_magic: int, first_offset: int, chunk_size: int) -> tuple[Any, ...]:
    try:
        lazy_records = LazyDownConvertedRecords(make_records(), to_magic, first_offset, chunk_size=chunk_size)
    except LazyconvError as exc:
        return ("init error", type(exc), str(exc), exc.position)
    send = lazy_records.to_send()
    data = send.to_bytes()
    error = send.error
    return (
        data,
        send.piece_sizes,
        send.chunks,
        send.stats.records_converted,
        send.stats.temporary_memory_bytes,
        None if error is None else (type(error), str(error), error.position),
    )


def reference(fn: Callable[[], Any]) -> Any:
    with _impl.using(_impl.REFERENCE):
        return fn()


def assert_same(make_records: Callable[[], Any], to_magic: int, first_offset: int, chunk_size: int) -> None:
    compiled = send_outcome(make_records, to_magic, first_offset, chunk_size)
    expected = reference(lambda: send_outcome(make_records, to_magic, first_offset, chunk_size))
    assert compiled == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=40),
    mutate=st.booleans(),
    to_magic=st.sampled_from([0, 1]),
    first_offset=st.sampled_from([0, 1005, 2**62]),
    chunk_size=st.sampled_from([MIN_CHUNK_SIZE, MIN_CHUNK_SIZE + 1, 40_000]),
)
def test_kernel_chunks_equal_the_reference_policy(seed, kinds, mutate, to_magic, first_offset, chunk_size) -> None:
    data = make_input(seed, kinds, mutate)
    assert_same(lambda: MemoryRecords(data), to_magic, first_offset, chunk_size)


@pytest.mark.parametrize("mutate", [False, True])
def test_kernel_chunks_from_a_file_equal_the_reference_policy(tmp_path: Path, mutate: bool) -> None:
    rng = random.Random(12)
    for case in range(6):
        kinds = [rng.choice(KINDS[:4] + ["gzip", "control", "big"]) for _ in range(40)]
        path = tmp_path / f"segment{case}.log"
        path.write_bytes(make_input(case, kinds, mutate))
        for to_magic in (0, 1):

            def open_file(p: Path = path) -> FileRecords:
                return FileRecords.open(p)

            assert_same(open_file, to_magic, 0, MIN_CHUNK_SIZE)


def test_kernel_chunk_boundaries_follow_the_policy() -> None:
    """Whole batches up to chunk_size, at least one; a compressed batch the policy would take
    into the chunk hands the chunk to Python; what does not fit is left for the next call."""
    kernel: Any = _impl.kernel_module()
    batch = build_batch(2, [(1, b"k", b"v" * 1000)], offsets=[0])
    plain = batch * 5
    out = bytearray()
    end, stop, converted, _ = kernel.convert_v2_chunk(plain, out, 3 * len(batch), 1, 0)
    assert (end, stop, converted) == (3 * len(batch), kernel.CHUNK_DONE, 3)
    end, stop, _, _ = kernel.convert_v2_chunk(plain, bytearray(), len(batch) - 1, 1, 0)
    assert (end, stop) == (len(batch), kernel.CHUNK_DONE)  # the first batch always goes
    mixed = batch + build_batch(2, [(1, b"k", b"v" * 10)], offsets=[1], compression=Compression.GZIP)
    assert kernel.convert_v2_chunk(mixed, bytearray(), 1 << 20, 1, 0)[1] == kernel.CHUNK_MIXED
    assert kernel.convert_v2_chunk(mixed, bytearray(), len(batch), 1, 0)[:2] == (len(batch), kernel.CHUNK_DONE)
    assert kernel.convert_v2_chunk(plain[:-1], bytearray(), 1 << 20, 1, 0)[:2] == (4 * len(batch), kernel.CHUNK_DONE)
    assert kernel.convert_v2_chunk(b"", bytearray(), 1 << 20, 1, 0)[:2] == (0, kernel.CHUNK_DONE)
