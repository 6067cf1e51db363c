"""The process's conversion cache (lazyconv._conversion_cache): lazy sends over the same file
bytes reuse earlier conversions of compressed batches, byte for byte what converting again
gives, and never after the bytes changed."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv import Compression, FileRecords, LazyDownConvertedRecords
from lazyconv._conversion_cache import ConversionCache, conversion_cache
from lazyconv._convert import ConversionStats
from lazyconv.errors import ConfigurationError
from lazyconv.records import _impl
from tests.lazy_support import TrickleChannel, build_batch, drive

pytestmark = pytest.mark.skipif(not _impl.current.converts_runs,
                                reason="the cache serves the compiled kernel's chunk path")


def _batches(compression: int, count: int = 12, per_batch: int = 40, word: bytes = b"value") -> bytes:
    out = bytearray()
    for b in range(count):
        records = [(1_700_000_000_000 + i, b"k%d" % i, (b"%s-%d-%d " % (word, b, i)) * 40)
                   for i in range(per_batch)]
        out += build_batch(2, records, base_offset=b * per_batch, compression=compression)
    return bytes(out)


@pytest.fixture
def cache() -> Iterator[ConversionCache]:
    saved = conversion_cache.max_bytes
    conversion_cache.resize(8 << 20)
    try:
        yield conversion_cache
    finally:
        conversion_cache.resize(saved)


def _send(path: Path, to_magic: int = 1, first_offset: int = 0, chunk_size: int = 16384) -> bytes:
    with FileRecords.open(path) as records:
        lazy = LazyDownConvertedRecords(records, to_magic, first_offset, chunk_size)
        return drive(lazy.to_send(), TrickleChannel([65536]))


def _uncached(path: Path, **kwargs: int) -> bytes:
    saved = conversion_cache.max_bytes
    conversion_cache.resize(0)
    try:
        return _send(path, **kwargs)
    finally:
        conversion_cache.resize(saved)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.GZIP, Compression.SNAPPY])
@pytest.mark.parametrize("to_magic", [0, 1])
def test_a_second_send_reuses_every_conversion_with_the_same_bytes(tmp_path: Path, cache: ConversionCache,
                                                                   codec: Compression, to_magic: int) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(codec))
    expected = _uncached(path, to_magic=to_magic)
    before = cache.counts
    first = _send(path, to_magic=to_magic)
    after_first = cache.counts
    second = _send(path, to_magic=to_magic)
    after_second = cache.counts
    assert first == second == expected
    assert after_first.hits == before.hits and after_first.misses > before.misses
    # every lookup of the second send (the first batch, then each chunk) is answered
    assert after_second.misses == after_first.misses
    assert after_second.hits - after_first.hits == after_first.misses - before.misses


def test_uncompressed_batches_are_converted_each_time_not_kept(tmp_path: Path, cache: ConversionCache) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(Compression.NONE))
    before = cache.counts
    assert _send(path) == _send(path) == _uncached(path)
    assert cache.counts.held_bytes == 0 and cache.counts.hits == before.hits


def test_bytes_rewritten_in_place_are_converted_again(tmp_path: Path, cache: ConversionCache) -> None:
    """The same file, position and size with other records: the key matches, the bytes do not."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(Compression.LZ4))
    old = _send(path)
    changed = _batches(Compression.LZ4, word=b"VALUE")
    with open(path, "r+b") as f:  # in place: same inode
        f.truncate(0)
        f.write(changed)
        f.flush()
        os.fsync(f.fileno())
    new = _send(path)
    assert new != old
    assert new == _uncached(path)


def test_sends_from_other_fetch_offsets_keep_their_own_conversions(
        tmp_path: Path, cache: ConversionCache) -> None:
    """Records below the fetch offset are dropped from uncompressed batches: a log mixing them
    with compressed ones converts differently per fetch offset."""
    path = tmp_path / "00000000000000000000.log"
    records = [(1_700_000_000_000 + i, b"k%d" % i, b"v" * 300) for i in range(40)]
    path.write_bytes(build_batch(2, records, base_offset=0)
                     + build_batch(2, records, base_offset=40, compression=Compression.LZ4)
                     + build_batch(2, records, base_offset=80))
    for offset in (0, 5, 0, 5):
        assert _send(path, first_offset=offset) == _uncached(path, first_offset=offset)


def test_the_cache_stays_within_its_size(tmp_path: Path, cache: ConversionCache) -> None:
    cache.resize(256 << 10)
    rng = random.Random(7)
    paths = []
    for n in range(4):
        path = tmp_path / f"{n:020d}.log"
        path.write_bytes(b"".join(
            build_batch(2, [(1, None, rng.randbytes(300)) for _ in range(40)], base_offset=40 * b,
                        compression=Compression.GZIP)
            for b in range(40)))
        paths.append(path)
    expected = [_uncached(path) for path in paths]
    before = cache.counts
    for path, converted in zip(paths, expected, strict=True):
        assert _send(path) == converted
        assert cache.counts.held_bytes <= 256 << 10
    assert cache.counts.evictions > before.evictions


def test_a_corrupt_batch_is_not_kept_and_fails_again(tmp_path: Path, cache: ConversionCache) -> None:
    data = bytearray(_batches(Compression.LZ4))
    second = data.index(b"\x04\x22\x4d\x18", data.index(b"\x04\x22\x4d\x18") + 1)
    data[second] ^= 0xFF  # the second batch's lz4 frame: met by the send, in its first chunk
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    errors = []
    for _ in range(2):
        with FileRecords.open(path) as records:
            lazy = LazyDownConvertedRecords(records, 1, 0, 16384)
            out = drive(lazy.to_send(), TrickleChannel([65536]))
            errors.append(str(lazy.send_error))
            assert len(out) == lazy.size_in_bytes
    assert errors[0] == errors[1] != "None"


def test_a_bad_size_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="conversion cache size"):
        ConversionCache(-1)


def test_an_idle_sender_lets_its_cache_go(tmp_path: Path) -> None:
    from lazyconv.net._remote_send import SenderContext

    context = SenderContext()
    kept = context.shared("conversion_cache", lambda: ConversionCache(1 << 20))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(Compression.LZ4))
    with FileRecords.open(path) as records:
        batch = next(iter(records.batches()))
        key = kept.key(batch._source, batch.position, 1, 0, 1 << 20, 0)
        kept.store(key, records.read(0, batch.size_in_bytes), b"converted", ConversionStats())
        assert kept.lookup(key, batch._source, batch.size_in_bytes) is not None
    assert kept.counts.held_bytes > 0
    context.release_idle()  # what a sender does after a second without jobs
    assert kept.counts.held_bytes == 0
