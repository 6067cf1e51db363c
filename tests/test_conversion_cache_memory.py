"""The conversion cache over records in memory (lazyconv._conversion_cache): a MemoryRecords
with a ``cache_key`` (what the gateway gives each upstream response's records) has its lazy
conversions kept and reused for another buffer of the same key, only where the bytes are
identical; without a key nothing is kept."""

from __future__ import annotations

import pytest

from lazyconv import Compression, LazyDownConvertedRecords
from lazyconv._conversion_cache import ConversionCache, conversion_cache
from lazyconv.errors import ConfigurationError
from lazyconv.records import MemoryRecords
from tests.lazy_support import TrickleChannel, compressible_batches, drive

KEY = ("upstream", "cluster", "topic", 0, 0)


_batches = compressible_batches


@pytest.fixture
def cache(sized_conversion_cache: ConversionCache) -> ConversionCache:
    return sized_conversion_cache


def _send(data: bytes, key: object, to_magic: int = 1) -> bytes:
    # a fresh buffer each time, as each upstream response is
    records = MemoryRecords(bytearray(data), cache_key=key)
    lazy = LazyDownConvertedRecords(records, to_magic, 0, 16384)
    out = drive(lazy.to_send(), TrickleChannel([65536]))
    assert len(out) == lazy.size_in_bytes
    return out


def _uncached(data: bytes, to_magic: int = 1) -> bytes:
    saved = conversion_cache.max_bytes
    conversion_cache.resize(0)
    try:
        return _send(data, KEY, to_magic)
    finally:
        conversion_cache.resize(saved)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.GZIP, Compression.SNAPPY])
@pytest.mark.parametrize("to_magic", [0, 1])
def test_another_buffer_with_the_same_key_and_bytes_reuses_every_conversion(
        cache: ConversionCache, codec: Compression, to_magic: int) -> None:
    data = _batches(codec)
    expected = _uncached(data, to_magic)
    before = cache.counts
    first = _send(data, KEY, to_magic)
    after_first = cache.counts
    second = _send(data, KEY, to_magic)
    after_second = cache.counts
    assert first == second == expected
    assert after_first.hits == before.hits and after_first.misses > before.misses
    assert after_second.misses == after_first.misses
    assert after_second.hits - after_first.hits == after_first.misses - before.misses


def test_other_bytes_under_the_same_key_are_converted_again(cache: ConversionCache) -> None:
    """A key only finds a candidate: a topic recreated under the same name, or a log truncated
    and written again, gives other bytes at the same offset, and they are converted."""
    old, new = _batches(Compression.LZ4), _batches(Compression.LZ4, word=b"VALUE")
    assert old != new
    _send(old, KEY)
    hits = cache.counts.hits
    assert _send(new, KEY) == _uncached(new) != _uncached(old)
    assert cache.counts.hits == hits


def test_records_without_a_key_are_not_kept(cache: ConversionCache) -> None:
    data = _batches(Compression.LZ4)
    before = cache.counts
    assert _send(data, None) == _send(data, None) == _uncached(data)
    assert cache.counts.held_bytes == 0 and cache.counts.hits == before.hits


def test_an_unhashable_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="cache_key must be hashable"):
        MemoryRecords(b"", cache_key=["not", "hashable"])
