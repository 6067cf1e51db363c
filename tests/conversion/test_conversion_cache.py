"""The process's conversion cache (lazyconv.conversion._cache): lazy sends over the same file
bytes reuse earlier conversions of compressed batches, byte for byte what converting again
gives, and never after the bytes changed."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lazyconv import Compression, FileRecords, LazyDownConvertedRecords
from lazyconv.conversion._cache import ConversionCache, conversion_cache
from lazyconv.conversion._down import ConversionStats
from lazyconv.errors import ConfigurationError, RecordsError
from lazyconv.serve._segment_files import CachedFileRecords, SegmentFileCache
from tests.lazy_support import TrickleChannel, build_batch, compressible_batches, drive

_batches = compressible_batches


@contextlib.contextmanager
def _cached_segment(path: Path, max_decompressed_size: int = 128 << 20) -> Iterator[FileRecords]:
    """The segment as serve reads it: batch by batch through its descriptor cache."""
    files = SegmentFileCache(4)
    records = CachedFileRecords(files, path, 0, path.stat().st_size, max_decompressed_size=max_decompressed_size)
    try:
        yield records
    finally:
        records.close()
        files.close()


_OPENERS = {"file": FileRecords.open, "serve": _cached_segment}


@pytest.fixture(autouse=True, params=sorted(_OPENERS))
def open_records(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs over FileRecords (the kernel's chunk path, a window at a time) and over
    serve's segment records (batch by batch)."""
    monkeypatch.setitem(globals(), "_open", _OPENERS[request.param])
    return str(request.param)


_open: Any = FileRecords.open


@pytest.fixture
def cache(sized_conversion_cache: ConversionCache) -> ConversionCache:
    return sized_conversion_cache


def _send(path: Path, to_magic: int = 1, first_offset: int = 0, chunk_size: int = 16384) -> bytes:
    with _open(path) as records:
        lazy = LazyDownConvertedRecords(records, to_magic, first_offset, chunk_size)
        return drive(lazy.to_send(), TrickleChannel([65536]))


def _outcome(path: Path, first_offset: int = 0, max_decompressed_size: int | None = None,
             cached: bool = True) -> tuple[bytes | str, str]:
    """(the send's bytes, its error) or ("construction", the error) of a magic 1 send."""
    saved = conversion_cache.max_bytes
    if not cached:
        conversion_cache.resize(0)
    kwargs = {} if max_decompressed_size is None else {"max_decompressed_size": max_decompressed_size}
    try:
        with _open(path, **kwargs) as records:
            lazy = LazyDownConvertedRecords(records, 1, first_offset, 16384)
            out = drive(lazy.to_send(), TrickleChannel([65536]))
            assert len(out) == lazy.size_in_bytes
            return out, repr(lazy.send_error)
    except RecordsError as exc:
        return "construction", repr(exc)
    finally:
        if not cached:
            conversion_cache.resize(saved)


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


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
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
    expected = _outcome(path, cached=False)
    assert expected[1] != "None"
    assert _outcome(path) == _outcome(path) == expected


def test_a_bad_size_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="conversion cache size"):
        ConversionCache(-1)


def test_an_idle_sender_lets_its_cache_go(tmp_path: Path) -> None:
    from lazyconv.net._remote_send import SenderContext

    context = SenderContext()
    kept = context.shared("conversion_cache", lambda: ConversionCache(1 << 20))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(Compression.LZ4))
    with _open(path) as records:
        batch = next(iter(records.batches()))
        key = kept.key(batch._source, batch.position, 1, 0, 1 << 20, 0)
        kept.store(key, records.read(0, batch.size_in_bytes), b"converted", ConversionStats())
        assert kept.lookup(key, batch._source, batch.size_in_bytes) is not None
    assert kept.counts.held_bytes > 0
    context.release_idle()  # what a sender does after a second without jobs
    assert kept.counts.held_bytes == 0


def test_a_fetch_offset_inside_a_cached_groups_uncompressed_batch_gets_its_own_conversion(
        tmp_path: Path, cache: ConversionCache) -> None:
    """A group mixing codecs is kept; the records below the fetch offset are dropped from its
    uncompressed batches only, so another fetch offset must not be answered from it."""
    rng = random.Random(3)

    def plain(base: int) -> bytes:
        return build_batch(2, [(1, b"k", b"p" * 180) for _ in range(40)], base_offset=base)

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(plain(0)
                     + build_batch(2, [(1, b"k", rng.randbytes(240)) for _ in range(40)], base_offset=40,
                                   compression=Compression.LZ4)
                     + plain(80)
                     + build_batch(2, [(1, b"k", b"z" * 50) for _ in range(40)], base_offset=120,
                                   compression=Compression.LZ4))
    # the uncached outcomes first: turning the cache off (and on again) empties it
    expected = {offset: _outcome(path, offset, cached=False) for offset in (0, 100)}
    hits_before = cache.counts.hits
    for offset in (0, 100, 0, 100):
        assert _outcome(path, offset) == expected[offset]
    assert cache.counts.hits > hits_before


def test_a_smaller_decompression_limit_still_refuses_the_batch(tmp_path: Path, cache: ConversionCache) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build_batch(2, [(1, b"k", b"a" * 4000) for _ in range(40)], compression=Compression.LZ4))
    assert _outcome(path, max_decompressed_size=1 << 20)[0] != "construction"
    refused = _outcome(path, max_decompressed_size=10_000)
    assert refused == _outcome(path, max_decompressed_size=10_000, cached=False)
    assert refused[0] == "construction"


@pytest.mark.parametrize("value_size", [300, 3000])  # batches inside the 16 KiB window, and larger
def test_bytes_rewritten_while_they_are_converted_are_not_paired_with_that_conversion(
        tmp_path: Path, cache: ConversionCache, monkeypatch: pytest.MonkeyPatch, value_size: int) -> None:
    """The file changes right after a conversion read it: what is kept is the input that
    conversion used, so a send over the new bytes converts them afresh."""
    import lazyconv.conversion._lazy_records as lazy_module

    path = tmp_path / "00000000000000000000.log"

    def log(seed: int) -> bytes:  # incompressible values: both logs have the same size
        rng = random.Random(seed)
        return b"".join(build_batch(2, [(1, b"k", rng.randbytes(value_size)) for _ in range(20)],
                                    base_offset=20 * b, compression=Compression.LZ4) for b in range(6))

    old, new = log(1), log(2)
    assert len(old) == len(new)
    path.write_bytes(old)
    convert = lazy_module.down_convert_bytes
    rewritten = []

    def convert_then_rewrite(*args: object, **kwargs: object) -> object:
        result = convert(*args, **kwargs)
        if not rewritten:
            with open(path, "r+b") as f:  # in place, the same size
                f.write(new)
            rewritten.append(True)
        return result

    monkeypatch.setattr(lazy_module, "down_convert_bytes", convert_then_rewrite)
    _outcome(path)
    monkeypatch.setattr(lazy_module, "down_convert_bytes", convert)
    assert rewritten
    assert _outcome(path) == _outcome(path, cached=False)


def test_batches_only_copied_are_not_kept(tmp_path: Path, cache: ConversionCache) -> None:
    """A compressed magic 1 wrapper fetched at magic 1 is copied, not converted: nothing to keep."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(build_batch(1, [(1, b"k", b"v" * 200) for _ in range(20)], base_offset=20 * b,
                                          compression=Compression.GZIP) for b in range(5)))
    before = cache.counts
    assert _outcome(path) == _outcome(path, cached=False)
    assert cache.counts.held_bytes == before.held_bytes == 0


def test_a_send_says_how_many_conversions_the_cache_answered(tmp_path: Path, cache: ConversionCache) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(Compression.LZ4))
    reused = []
    for _ in range(2):
        with _open(path) as records:
            lazy = LazyDownConvertedRecords(records, 1, 0, 16384)
            drive(lazy.to_send(), TrickleChannel([65536]))
            reused.append(lazy.reused_conversions)
    assert reused[0] == 0 and reused[1] > 1  # the first batch and the chunks after it


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_a_segment_cut_short_during_a_send_is_converted_as_far_as_it_goes(
        tmp_path: Path, cache: ConversionCache, codec: Compression) -> None:
    """The send reads a window at a time; when the file is now shorter than a window, the
    batches still whole are converted and sent (as when each batch was read on its own)."""
    from tests.lazy_support import consumer_records

    rng = random.Random(5)
    batches = [build_batch(2, [(1, b"k", rng.randbytes(150)) for _ in range(40)], base_offset=40 * b,
                           compression=codec) for b in range(10)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    cut = sum(len(b) for b in batches[:6]) + 30  # inside the 7th batch
    with _open(path) as records:
        lazy = LazyDownConvertedRecords(records, 1, 0, 16384)
        os.truncate(path, cut)
        out = drive(lazy.to_send(), TrickleChannel([65536]))
    assert len(out) == lazy.size_in_bytes
    assert [r[0] for r in consumer_records(out)] == list(range(6 * 40))
    assert "ends after" in str(lazy.send_error)
