"""snappy at parity with Kafka: lazyconv's snappy streams are byte for byte those of Kafka's
writer (snappy-java, which bundles snappy 1.1.10), on fixed inputs without Java (expectations in
tests/snappy_parity.py; tests/kafka/test_snappy_kafka.py compares live), and the kernel's
compressor (``snappy.c``) and the pure-Python reference (``records/_snappy.py``) give the same
bytes on any input, bytes that decompress to the input."""

from __future__ import annotations

import hashlib
import random

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lz4_parity import text
from snappy_parity import KAFKA_SNAPPY, inputs

from lazyconv.records import _impl, _snappy
from lazyconv.records._compression import Compression, compress, decompress

SNAPPY = Compression.SNAPPY


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@pytest.fixture(scope="module")
def fixed_inputs() -> dict[str, bytes]:
    return inputs()


@pytest.mark.parametrize("twin", ["native", "python"])
@pytest.mark.parametrize("name", sorted(KAFKA_SNAPPY))
def test_snappy_streams_are_kafkas(fixed_inputs: dict[str, bytes], name: str, twin: str) -> None:
    if twin == "native" and _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    size, input_sha, kafka_size, kafka_sha = KAFKA_SNAPPY[name]
    data = fixed_inputs[name]
    assert (len(data), _sha(data)) == (size, input_sha), "the fixed input changed"
    with _impl.using(_impl.NATIVE if twin == "native" else _impl.REFERENCE):
        for magic in (0, 1, 2):  # the framing is the same for every magic
            stream = compress(SNAPPY, data, magic)
            assert (len(stream), _sha(stream)) == (kafka_size, kafka_sha), magic
            assert decompress(SNAPPY, stream, magic) == data


def test_the_fixed_inputs_tell_snappy_from_snap(fixed_inputs: dict[str, bytes]) -> None:
    """Rust's snap (cramjam), which lazyconv used before, writes other bytes for small inputs:
    the expectations above would catch a return to it."""
    differ = [name for name, data in fixed_inputs.items() if 0 < len(data) <= 8192
              and bytes(cramjam.snappy.compress_raw(data)) != _snappy.compress_raw_reference(data)]
    assert len(differ) >= 5, differ


def _corpus() -> list[bytes]:
    """Inputs around every table size (a fragment of 2**k + 1 bytes takes the next table) and
    fragment edge, the last fragment 1 to 16 bytes long among them, in four shapes."""
    rng = random.Random(1110)
    long_text = text(300_000, b"corpus")
    found = [b"", b"a", bytes(15), bytes(16), bytes(300_000), long_text]
    table_edges = [edge + d for edge in (256, 512, 1024, 2048, 4096, 8192) for d in (-1, 0, 1)]
    for size in (*range(1, 40), *table_edges, 8194, 16383, 16384, 16385, 65535, 65536, 65537,
                 65536 + 8192, 65536 + 8193, *(131072 + tail for tail in range(1, 17)), 200_000):
        found.append(long_text[:size])
        found.append(rng.randbytes(size))
        found.append(bytes(rng.choice(b"ab") for _ in range(size)))
        found.append((rng.randbytes(rng.randint(1, 70)) * (size // 2 + 1))[:size])  # long copies
    return found


def test_the_twins_write_the_same_streams_that_decompress_to_the_input() -> None:
    if _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    for data in _corpus():
        ours = _impl.NATIVE.snappy_compress_raw(data)
        assert ours == _snappy.compress_raw_reference(data), len(data)
        assert bytes(cramjam.snappy.decompress_raw(ours)) == data


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.binary(max_size=3000),
    st.lists(st.sampled_from([b"ab", b"abc", b"kafka ", b"\x00" * 7, b"xyzzy" * 9]), max_size=600)
    .map(b"".join),
))
def test_the_twins_agree_on_any_input(data: bytes) -> None:
    reference = _snappy.compress_raw_reference(data)
    assert bytes(cramjam.snappy.decompress_raw(reference)) == data
    if _impl.NATIVE is not None:
        assert _impl.NATIVE.snappy_compress_raw(memoryview(data)) == reference


def test_the_reference_takes_snap_only_where_the_two_hashes_agree() -> None:
    """The reference hands a fragment of more than 8 KiB to snap: its own step-for-step
    compressor gives snap's bytes there (a full table), and other bytes below."""
    rng = random.Random(7)
    for size in (8193, 12000, 32768, 65536):
        data = text(size, b"agree%d" % size)
        mine = bytearray()
        _snappy._fragment(mine, data)
        snap = bytes(cramjam.snappy.compress_raw(data))
        assert snap.endswith(bytes(mine)) and len(snap) - len(mine) <= 3, size  # after the length
    data = text(1800, bytes([rng.randrange(256)]))
    assert _snappy.compress_raw_reference(data) != bytes(cramjam.snappy.compress_raw(data))


@pytest.mark.parametrize("bad", [None, 5, "text"])
def test_the_kernel_refuses_what_is_not_bytes_like(bad: object) -> None:
    if _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    with pytest.raises(TypeError):
        _impl.NATIVE.snappy_compress_raw(bad)


def _past_snappys_length() -> object:
    """An anonymous mapping of 4 GiB + 1 bytes, one past the most a snappy stream's length
    preamble (a uint32) can say: untouched, it costs address space, not memory."""
    import mmap
    import sys

    if sys.maxsize < 1 << 32:
        pytest.skip("a 32-bit process cannot map 4 GiB")
    try:
        return mmap.mmap(-1, (1 << 32) + 1, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, OverflowError, ValueError, AttributeError) as exc:  # no room, no mmap flags
        pytest.skip(f"cannot map 4 GiB + 1 bytes of address space here: {exc}")


@pytest.mark.parametrize("twin", ["native", "python"])
def test_the_twins_refuse_more_than_snappys_length_says_before_reading_a_byte(twin: str) -> None:
    """snappy's stream begins with its length as a varint of a uint32: 4 GiB or more was written
    as a longer varint no snappy reads (the kernel allocated its output first, then read every
    byte). Both twins refuse it alike, before reading (the mapping's pages stay untouched)."""
    import resource

    from lazyconv.errors import CompressionError

    if twin == "native" and _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    data = _past_snappys_length()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with _impl.using(twin):
        with pytest.raises(CompressionError) as refused:
            _impl.snappy_compress_raw(data)
    assert str(refused.value) == ("snappy cannot compress 4294967297 bytes in one raw stream: its "
                                  "length preamble is a uint32 (at most 4294967295 bytes)")
    if twin == "native":  # the kernel's own entry refuses before allocating: the wrapper's cue
        with pytest.raises(OverflowError, match="past snappy's length preamble"):
            _impl._kernel.snappy_compress_raw(data)  # type: ignore[union-attr]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: nothing read
