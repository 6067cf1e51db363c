"""The conversion cache over records in memory (lazyconv.conversion._cache): a MemoryRecords
with a ``cache_key`` (what the gateway gives each upstream response's records) has its lazy
conversions kept and reused for another buffer of the same key, only where the bytes are
identical; without a key nothing is kept."""

from __future__ import annotations

import struct

import pytest

import lazyconv.conversion._lazy_records as lazy_module
from lazyconv import Compression, LazyDownConvertedRecords
from lazyconv.conversion._cache import ConversionCache, conversion_cache
from lazyconv.conversion._down import ConversionStats
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


def _rebased(data: bytes, shift: int) -> bytes:
    """The same batches with every base offset moved by ``shift``: as many bytes, other records
    once converted (the base offset is outside a v2 batch's CRC)."""
    out = bytearray(data)
    for batch in MemoryRecords(data).batches():
        (base,) = struct.unpack_from(">q", out, batch.position)
        struct.pack_into(">q", out, batch.position, base + shift)
    return bytes(out)


def test_records_changed_in_their_buffer_during_a_conversion_are_not_paired_with_it(
        cache: ConversionCache, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion is kept with a copy of the bytes it converted, taken before converting: a
    writable buffer changed meanwhile (a caller's bug, or a reused buffer) never pairs the
    new bytes with the old conversion for the next reader."""
    data = _batches(Compression.LZ4)
    changed = _rebased(data, 10_000)
    assert len(changed) == len(data) and _uncached(changed) != _uncached(data)
    buffer = bytearray(data)
    convert_group = lazy_module._convert_group

    def convert_then_change(*args):
        yield from convert_group(*args)
        buffer[:] = changed  # after the conversion, before it is kept

    monkeypatch.setattr(lazy_module, "_convert_group", convert_then_change)
    lazy = LazyDownConvertedRecords(MemoryRecords(buffer, cache_key=KEY), 1, 0, 16384)
    drive(lazy.to_send(), TrickleChannel([65536]))
    monkeypatch.undo()
    assert _send(changed, KEY) == _uncached(changed)


def test_a_kept_conversion_of_other_length_is_a_miss(cache: ConversionCache) -> None:
    """The log grew between two fetches: the kept chunk's bytes are a prefix of the new one's.
    That is not an answer, and it is counted as a miss, not as a hit the caller then refuses."""
    data = _batches(Compression.LZ4)
    records = MemoryRecords(data, cache_key=KEY)
    first = next(iter(records.batches()))
    key = cache.key(first._source, 0, 1, 0, records.max_decompressed_size, 16384)
    cache.store(key, data[:first.size_in_bytes], b"converted", ConversionStats())
    before = cache.counts
    assert cache.lookup(key, first._source, len(data)) is None
    assert cache.lookup(key, first._source, first.size_in_bytes) is not None
    after = cache.counts
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 1)
