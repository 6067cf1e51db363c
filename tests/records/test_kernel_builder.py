"""Differential tests of the builder's compiled v2 record encoding (``encode_v2_records``): the
batches ``RecordsBuilder`` (magic 2) writes are byte-identical with the kernel and with the
reference encoder (``append_v2_record`` per record), and inputs the kernel declines raise the
reference's errors. The reference side runs inside ``_impl.using(_impl.REFERENCE)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.records import Compression, RecordsBuilder, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

payloads = st.none() | st.binary(max_size=70) | st.sampled_from([b"x" * 200, b"y" * 17_000])
header_lists = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=70)), max_size=3)


def reference(fn: Callable[[], Any]) -> Any:
    with _impl.using(_impl.REFERENCE):
        return fn()


def outcome(fn: Callable[[], bytes]) -> tuple[Any, ...]:
    try:
        return ("ok", fn())
    except Exception as exc:  # the reference's exception, whatever its type, must be the same
        return ("error", type(exc), str(exc))


@settings(max_examples=80, deadline=None)
@given(
    base_offset=st.integers(0, 2**62) | st.just(2**63 - 2),
    steps=st.lists(st.integers(1, 2**20), min_size=1, max_size=8),
    timestamps=st.lists(st.integers(-1, 2**63 - 1) | st.integers(-1, 10_000), min_size=8, max_size=8),
    keys=st.lists(payloads, min_size=8, max_size=8),
    values=st.lists(payloads, min_size=8, max_size=8),
    headers=st.lists(header_lists, min_size=8, max_size=8),
    compression=st.sampled_from([Compression.NONE, Compression.GZIP]),
)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_v2_batches_are_identical_with_and_without_the_kernel(
    base_offset, steps, timestamps, keys, values, headers, compression
) -> None:
    def build() -> bytes:
        b = RecordsBuilder(2, compression=compression, base_offset=base_offset)
        offset = base_offset
        for index, step in enumerate(steps):
            if offset > 2**63 - 1:
                break
            b.append(offset, timestamps[index], keys[index], values[index], headers[index])
            offset += step
        return b.build()

    assert outcome(build) == reference(lambda: outcome(build))


def test_records_the_kernel_declines_go_through_the_reference() -> None:
    """A header key that is not UTF-8 encodable and a timestamp beyond int64 (after the first)
    are encoded (or refused) exactly as the reference does."""
    for key, timestamp in (("\ud800", 5), ("ok", 2**64)):

        def build(key: str = key, timestamp: int = timestamp) -> bytes:
            b = RecordsBuilder(2)
            b.append(0, 1, b"k", b"v")
            b.append(1, timestamp, None, b"v", [(key, b"h")])
            return b.build()

        assert outcome(build) == reference(lambda build=build: outcome(build))


def test_the_kernel_actually_encodes_and_varints_span_bytes() -> None:
    records = [(7, 1000, b"k" * 300, None, (("h\u00e9", None), ("", b"v" * 129))), (8, -1, None, b"", ())]
    body = bytearray(b"prefix")
    encode_v2_records = _impl.NATIVE.encode_v2_records
    assert encode_v2_records(body, records, 7, 1000) is True
    from lazyconv.records._codec import append_v2_record

    expected = bytearray(b"prefix")
    for offset, timestamp, key, value, hdrs in records:
        append_v2_record(expected, offset - 7, timestamp - 1000, key, value, hdrs)
    assert body == expected
    unchanged = bytearray(b"x")
    assert encode_v2_records(unchanged, [(7, 1.5, None, None, ())], 7, 0) is False
    assert unchanged == b"x"
