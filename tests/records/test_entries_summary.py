"""summarize_entries: what the headers of a record set's complete entries say, without reading
a record (the gateway chooses where to down-convert a fetch from it)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from lazyconv.records._entries import EntriesSummary, summarize_entries


def _batch(magic: int, codec: Compression, records: int = 3, offset: int = 0) -> bytes:
    builder = RecordsBuilder(magic, codec, base_offset=offset)
    for i in range(records):
        builder.append(timestamp=1, key=b"k%d" % i, value=b"v" * 40)
    return builder.build()


def test_uncompressed_v2_batches_are_plain_and_counted() -> None:
    data = _batch(2, Compression.NONE) + _batch(2, Compression.NONE, offset=3)
    assert summarize_entries(data) == EntriesSummary(2, 0, 1, False)
    assert summarize_entries(b"") == EntriesSummary(0, 0, 0, False)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_one_compressed_batch_anywhere_makes_the_set_not_plain(codec: Compression) -> None:
    data = _batch(2, Compression.NONE) + _batch(2, codec, offset=3) + _batch(2, Compression.NONE, offset=6)
    assert summarize_entries(data) == EntriesSummary(3, 0, 1 | 1 << int(codec), False)
    assert summarize_entries(_batch(2, codec)) == EntriesSummary(1, int(codec), 1 << int(codec), False)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_entries_are_never_plain_v2(magic: int) -> None:
    assert summarize_entries(_batch(magic, Compression.NONE, records=2)) == EntriesSummary(2, 0, 1, True)
    wrapper = _batch(magic, Compression.GZIP, records=2)
    assert summarize_entries(wrapper) == EntriesSummary(1, int(Compression.GZIP), 1 << int(Compression.GZIP), True)


def test_a_partial_last_batch_is_not_counted_nor_looked_at() -> None:
    whole = _batch(2, Compression.NONE)
    cut = _batch(2, Compression.LZ4, offset=3)
    assert summarize_entries(whole + cut[:-1]) == EntriesSummary(1, 0, 1, False)
    assert summarize_entries(whole + cut[:16]) == EntriesSummary(1, 0, 1, False)


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([(2, Compression.NONE), (2, Compression.LZ4), (2, Compression.GZIP),
                                 (1, Compression.NONE), (0, Compression.SNAPPY)]), max_size=6),
       st.data())
def test_it_agrees_with_reading_the_batches(kinds: list[tuple[int, Compression]], data: st.DataObject) -> None:
    """The count, first codec and plainness are those MemoryRecords' own batches have, for any
    mix cut anywhere."""
    records = b"".join(_batch(magic, codec, records=2, offset=2 * i) for i, (magic, codec) in enumerate(kinds))
    cut = data.draw(st.integers(0, len(records)))
    records = records[:cut]
    batches = list(MemoryRecords(records).batches()) if records else []
    summary = summarize_entries(records)
    assert summary.entries == len(batches)
    assert summary.first_codec == (int(batches[0].compression) if batches else 0)
    assert summary.plain_v2 == all(b.magic == 2 and b.compression == Compression.NONE for b in batches)
    assert summary.codecs == sum({1 << int(b.compression) for b in batches})
    assert summary.legacy == any(b.magic < 2 for b in batches)


def _entry_like(size: int, magic: int, rest: bytes) -> bytes:
    """An offset, a size field, 4 bytes and a magic byte, then anything: junk the walk looks at."""
    return struct.pack(">qiib", 0, size, 0, magic) + rest


def _whole_entry_at(junk: bytes, start: int) -> tuple[int, bool] | None:
    """Where the whole entry at ``start`` ends and whether it is legacy, by Kafka's layout; None
    when the bytes there cannot be one."""
    if len(junk) - start < 17:
        return None
    size = int.from_bytes(junk[start + 8:start + 12], "big", signed=True)
    magic = junk[start + 16]
    if size < (14 if magic < 2 else 49) or start + 12 + size > len(junk):
        return None
    return start + 12 + size, magic < 2


_junk = st.one_of(
    st.binary(max_size=200),
    st.lists(st.builds(_entry_like, st.integers(-2, 80), st.integers(-1, 3), st.binary(max_size=80)),
             max_size=4).map(b"".join),
)


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=500, deadline=None)
@given(_junk)
def test_any_bytes_are_walked_without_error(junk: bytes) -> None:
    """No error, and exactly the whole entries at the start are summed up. Where each one ends
    is seen by summarising every prefix; each must be what Kafka's layout says of the bytes
    there: 12 bytes plus its size field, at least a v0 message (size 14) or, magic 2 and up,
    a v2 batch (61 bytes); its codec is the low 3 bits of byte 17 (legacy) or 22 (v2). After
    the last one, no further whole entry may start."""
    counts = [summarize_entries(junk[:n]).entries for n in range(len(junk) + 1)]
    assert all(0 <= counts[n] - counts[n - 1] <= 1 for n in range(1, len(counts)))
    ends = [n for n in range(1, len(junk) + 1) if counts[n] > counts[n - 1]]
    codecs: list[int] = []
    legacy, start = False, 0
    for end in ends:
        found = _whole_entry_at(junk, start)
        assert found is not None and found[0] == end, (start, end, found)
        codecs.append(junk[start + (17 if found[1] else 22)] & 7)
        legacy |= found[1]
        start = end
    assert _whole_entry_at(junk, start) is None
    expected = EntriesSummary(len(ends), codecs[0] if codecs else 0, sum({1 << c for c in codecs}), legacy)
    assert summarize_entries(junk) == expected
