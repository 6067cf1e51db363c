"""Keyed partitioning: murmur2 vectors computed with Kafka's Utils.murmur2 and kafka-python's murmur2 on random keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner import murmur2, partition_for_key, to_positive

# input, signed murmur2, hex(u32), toPositive, %3, %6, %10, %12, %100
VECTORS = [
    (b"21", -973932308, 0xC5F2F8EC, 1173551340, 0, 0, 0, 0, 40),
    (b"foobar", -790332482, 0xD0E47BBE, 1357151166, 0, 0, 6, 6, 66),
    (b"a-little-bit-long-string", -985981536, 0xC53B1DA0, 1161502112, 2, 2, 2, 8, 12),
    (b"a-little-bit-longer-string", -1486304829, 0xA768C9C3, 661178819, 2, 5, 9, 11, 19),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 0xFC7D49CD, 2088585677,
     2, 5, 7, 5, 77),
    (b"abc", 479470107, 0x1C94221B, 479470107, 0, 3, 7, 3, 7),
    (b"", 275646681, 0x106E08D9, 275646681, 0, 3, 1, 9, 81),
    (b"key", -1079937367, 0xBFA176A9, 1067546281, 1, 1, 1, 1, 81),
    (b"key1", 28543940, 0x01B38BC4, 28543940, 2, 2, 0, 8, 40),
    (b"kafka", -798503068, 0xD067CF64, 1348980580, 1, 4, 0, 4, 80),
    (bytes([0xFF, 0x00, 0x80]), -970489390, 0xC62781D2, 1176994258, 1, 4, 8, 10, 58),
    ("é".encode(), 186971271, 0x0B24F487, 186971271, 0, 3, 1, 3, 71),
]


@pytest.mark.parametrize("vector", VECTORS, ids=[repr(v[0])[:20] for v in VECTORS])
def test_spec_vectors(vector):
    data, signed, unsigned, positive, *mods = vector
    assert murmur2(data) == signed
    assert murmur2(data) & 0xFFFFFFFF == unsigned
    assert to_positive(murmur2(data)) == positive
    for n, expected in zip((3, 6, 10, 12, 100), mods, strict=True):
        assert partition_for_key(data, n) == expected


def test_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_is_a_mask_not_abs():
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-973932308) == 1173551340 != abs(-973932308)


def test_empty_key_is_hashed_but_null_key_is_refused():
    assert partition_for_key(b"", 100) == 81
    with pytest.raises(ConfigurationError):
        partition_for_key(None, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [0, -3])
def test_partition_count_must_be_positive(n):
    with pytest.raises(ConfigurationError, match="num_partitions"):
        partition_for_key(b"k", n)


@settings(max_examples=200)
@given(key=st.binary(max_size=64), n=st.integers(min_value=1, max_value=1000))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_matches_kafka_python_on_random_keys(key, n):
    theirs = kafka_python_murmur2(key)  # same bits, unsigned
    assert murmur2(key) & 0xFFFFFFFF == theirs
    assert -(2**31) <= murmur2(key) < 2**31
    assert partition_for_key(key, n) == (theirs & 0x7FFFFFFF) % n


@pytest.mark.parametrize("data", [5, "abc", None, 1.5])
def test_murmur2_refuses_what_is_not_bytes(data) -> None:
    """bytes(5) is five zero bytes: murmur2(5) hashed them and returned a wrong partition
    silently; a str or None escaped as a bare TypeError (found by a review)."""
    with pytest.raises(ConfigurationError, match="bytes-like"):
        murmur2(data)
    assert murmur2(bytearray(b"abc")) == murmur2(memoryview(b"abc")) == murmur2(b"abc")


def test_murmur2_refuses_a_released_memoryview() -> None:
    """memoryview() of a released view raises ValueError, which escaped bare."""
    view = memoryview(b"key")
    view.release()
    with pytest.raises(ConfigurationError, match="bytes-like"):
        murmur2(view)
