"""summarize_entries: what the headers of a record set's complete entries say, without reading
a record (the gateway chooses where to down-convert a fetch from it)."""

from __future__ import annotations

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


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_walked_without_error(junk: bytes) -> None:
    summary = summarize_entries(junk)
    assert summary.entries >= 0
