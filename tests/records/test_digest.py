"""Record digests: the kernel, the pure-Python reference and the fixture generator's own
implementation agree on every record, and both paths decline the same damaged inputs.

The digest is the validation job's checksum (``manifest.json``), so a disagreement between the
kernel and the fixtures would report every partition as corrupt: these tests pin all three to
each other and to the records as the records layer decodes them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.fixtures._checksum import record_hash
from lazyconv.records import MemoryRecords, RecordsBuilder, TimestampType, _impl
from lazyconv.records._digest import (
    DIGEST_DECLINED,
    DIGEST_END,
    DIGEST_PARTIAL,
    MASK64,
    digest_legacy_run,
    digest_legacy_run_reference,
    digest_v2_records,
    digest_v2_records_reference,
    record_digest,
)

needs_kernel = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
header_lists = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
records_v2 = st.lists(
    st.tuples(st.integers(0, 3), st.integers(-1, 1 << 41), keys, values, header_lists), min_size=1, max_size=12
)


def _v2_batch(fields: list[Any], base_offset: int, log_append: bool) -> bytes:
    builder = RecordsBuilder(
        2,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        base_offset=base_offset,
        log_append_time=1_700_000_000_000 if log_append else None,
    )
    offset = base_offset
    for gap, timestamp, key, value, headers in fields:
        offset += gap
        builder.append(offset, timestamp, key, value, headers)
        offset += 1
    return builder.build()


def _payload(batch_bytes: bytes) -> tuple[bytes, Any]:
    batch = next(MemoryRecords(batch_bytes).batches())
    return bytes(batch.records_buffer()), batch


@given(records_v2, st.integers(0, 1 << 50), st.booleans())
@settings(max_examples=60, deadline=None)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_v2_digests_are_the_sums_of_the_records_digests(fields: list[Any], base: int, log_append: bool) -> None:
    data = _v2_batch(fields, base, log_append)
    payload, batch = _payload(data)
    override = batch.max_timestamp if log_append else None
    records = list(batch)
    got = digest_v2_records(payload, batch.record_count, batch.base_offset, batch.base_timestamp, override)
    assert got is not None
    assert got == digest_v2_records_reference(payload, batch.record_count, batch.base_offset, batch.base_timestamp, override)
    # what the fixture generator writes into manifest.json, record by record
    assert got.full == sum(record_hash(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records) & MASK64
    assert got.no_headers == sum(record_hash(r.offset, r.timestamp, r.key, r.value) for r in records) & MASK64
    assert got.no_timestamp == sum(record_hash(r.offset, -1, r.key, r.value) for r in records) & MASK64
    assert (got.first_offset, got.last_offset) == (records[0].offset, records[-1].offset)
    assert got.offsets_increasing
    assert got.has_headers == any(r.headers for r in records)
    if not log_append:
        assert got.max_raw_timestamp == max(r.timestamp for r in records)


def test_each_part_of_a_record_changes_its_digest() -> None:
    base = record_digest(5, 100, b"k", b"v", [("h", b"x")])
    for other in (
        record_digest(6, 100, b"k", b"v", [("h", b"x")]),
        record_digest(5, 101, b"k", b"v", [("h", b"x")]),
        record_digest(5, 100, None, b"v", [("h", b"x")]),
        record_digest(5, 100, b"", b"v", [("h", b"x")]),
        record_digest(5, 100, b"k", b"w", [("h", b"x")]),
        record_digest(5, 100, b"k", b"v", [("h", None)]),
        record_digest(5, 100, b"k", b"v", [("g", b"x")]),
        record_digest(5, 100, b"k", b"v"),
        record_digest(5, 100, b"kv", None, [("h", b"x")]),
    ):
        assert other != base
    assert base == record_hash(5, 100, b"k", b"v", [("h", b"x")])
    assert 0 <= base <= MASK64


@pytest.mark.slow
@needs_kernel
@given(records_v2, st.data())
@settings(max_examples=120, deadline=None)
def test_damaged_v2_records_are_declined_by_both_paths(fields: list[Any], data: st.DataObject) -> None:
    payload, batch = _payload(_v2_batch(fields, 10, False))
    mutated = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 4))):
        if not mutated:
            break
        index = data.draw(st.integers(0, len(mutated) - 1))
        mutated[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    damaged = bytes(mutated[:cut]) if data.draw(st.booleans()) else bytes(mutated)
    count = batch.record_count + data.draw(st.integers(-1, 1))
    args = (damaged, count, 10, batch.base_timestamp, None)
    assert digest_v2_records(*args) == digest_v2_records_reference(*args)


def test_v2_offsets_beyond_int64_are_declined() -> None:
    payload, batch = _payload(_v2_batch([(0, 5, b"k", b"v", [])] * 3, 0, False))
    near_max = (1 << 63) - 2
    assert digest_v2_records(payload, 3, near_max, batch.base_timestamp, None) is None
    assert digest_v2_records_reference(payload, 3, near_max, batch.base_timestamp, None) is None


legacy_records = st.lists(st.tuples(st.integers(-1, 1 << 41), keys, values), min_size=1, max_size=10)


def _legacy(magic: int, fields: list[Any], base: int) -> bytes:
    out = bytearray()
    for index, (timestamp, key, value) in enumerate(fields):
        builder = RecordsBuilder(magic, base_offset=base + index)
        builder.append(base + index, timestamp, key, value)
        out += builder.build()
    return bytes(out)


@given(st.sampled_from([0, 1]), legacy_records, st.integers(0, 1 << 40), st.integers(0, 12),
       st.integers(0, 1 << 20), st.none() | st.integers(0, 1 << 41))
@settings(max_examples=60, deadline=None)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_legacy_runs_digest_the_records_a_consumer_reads(
    magic: int, fields: list[Any], base: int, skip: int, shift: int, override: int | None
) -> None:
    data = _legacy(magic, fields, base)
    min_offset = base + skip
    got = digest_legacy_run(data, min_offset, shift, override)
    assert got == digest_legacy_run_reference(data, min_offset, shift, override)
    records = list(MemoryRecords(data).records())
    # what a consumer reads: offsets shifted (inner messages of a v1 wrapper), and a
    # LogAppendTime wrapper's timestamp for magic 1 messages
    seen = [(r.offset + shift, r.timestamp if override is None or magic == 0 else override, r.key, r.value)
            for r in records]
    kept = [r for r in seen if r[0] >= min_offset]
    assert got.stop == DIGEST_END and got.consumed == len(data) and got.entries == len(records)
    assert got.last_offset == seen[-1][0]
    assert got.records == len(kept)
    assert got.sum == sum(record_hash(*r) for r in kept) & MASK64


def test_legacy_runs_stop_before_what_the_reader_must_judge() -> None:
    plain = _legacy(1, [(5, b"k", b"v")], 0)
    wrapper = RecordsBuilder(1, compression=1, base_offset=1)
    wrapper.append(1, 6, b"k", b"v")
    stopped = digest_legacy_run(plain + wrapper.build(), 0)
    assert (stopped.stop, stopped.consumed, stopped.entries) == (DIGEST_DECLINED, len(plain), 1)
    bad_crc = bytearray(plain)
    bad_crc[-1] ^= 1
    assert digest_legacy_run(bytes(bad_crc), 0).stop == DIGEST_DECLINED
    assert digest_legacy_run(plain + plain[:20], 0)[::5] == (len(plain), DIGEST_PARTIAL)


@needs_kernel
@given(st.sampled_from([0, 1]), legacy_records, st.data())
@settings(max_examples=120, deadline=None)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_damaged_legacy_runs_give_the_same_result_on_both_paths(magic: int, fields: list[Any], data: st.DataObject) -> None:
    mutated = bytearray(_legacy(magic, fields, 3))
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(mutated) - 1))
        mutated[index] = data.draw(st.integers(0, 255))
    damaged = bytes(mutated[: data.draw(st.integers(0, len(mutated)))])
    shift = data.draw(st.sampled_from([0, 5, (1 << 63) - 4]))
    assert digest_legacy_run(damaged, 4, shift) == digest_legacy_run_reference(damaged, 4, shift)

