"""Runs of sound magic-2 batches (lazyconv.records._segment_run): the kernel and the pure-Python
reference agree, and both do what the validation job relies on.

- the kernel equals the reference (every field of ``SegmentRun``, the ends and the bytes of
  ``convert_run_ends``) on every segment of the committed fixtures, from every entry start and
  in several states, and on random logs built with the records layer's builders, damaged by
  byte flips and truncation or by semantic faults with a valid CRC;
- a run stops exactly before the first batch the segment scan must look at, for each fault
  kind, and what it reports (markers, first epoch, digest sums, running max timestamps, the
  state for the next call) is what the records layer says about the same batches;
- ``convert_run_ends`` writes the records layer's down-conversion of the run, and returns
  ``None`` with ``out`` unchanged for anything that is not such a run.

The kernel tests skip themselves when the compiled kernel is not in use
(``LAZYCONV_NO_EXTENSIONS=1``); the behaviour tests then run on the reference alone.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.conversion._down import down_convert_bytes
from lazyconv.conversion._to_legacy import convert_run_ends, convert_run_ends_reference
from lazyconv.records import (
    MemoryRecords,
    RecordsBuilder,
    TimestampType,
    _format,
    _impl,
    build_end_txn_marker,
)
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._builder import encode_v2_batch
from lazyconv.records._codec import append_v2_record, crc32c
from lazyconv.records._compression import Compression
from lazyconv.records._digest import MASK64, digest_v2_records
from lazyconv.records._scan import scan_batches
from lazyconv.records._segment_run import (
    MAX_BATCHES_PER_RUN,
    RUN_ABORT,
    RUN_CONTROL,
    RUN_TRANSACTIONAL,
    Marker,
    SegmentRun,
    segment_run,
    segment_run_reference,
)

needs_kernel = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
SEGMENTS = sorted(FIXTURES.glob("*/*.log"))

# header field offsets of a v2 batch (the records layer's layout names)
_BASE_OFFSET_AT, _LENGTH_AT, _EPOCH_AT = _format.BASE_OFFSET_OFFSET, _format.LENGTH_OFFSET, _format.PARTITION_LEADER_EPOCH_OFFSET
_CRC_AT, _ATTRIBUTES_AT = _format.CRC_OFFSET, _format.ATTRIBUTES_OFFSET
_MAX_TIMESTAMP_AT, _COUNT_AT = _format.MAX_TIMESTAMP_OFFSET, _format.RECORDS_COUNT_OFFSET
_T0 = 1_700_000_000_000

RunFn = Callable[..., SegmentRun]
ConvertFn = Callable[[Any, bytearray, int], "list[int] | None"]

IMPLEMENTATIONS = [
    pytest.param((segment_run, convert_run_ends), marks=needs_kernel, id="kernel"),
    pytest.param((segment_run_reference, convert_run_ends_reference), id="reference"),
]


class State(NamedTuple):
    """The arguments of segment_run after ``data`` and ``position_base``."""

    prev_offset: int | None
    min_base_offset: int
    prev_epoch: int | None
    max_timestamp: int


START = State(None, 0, None, -1)


# -- building logs ----------------------------------------------------------------------------

def data_batch(base: int, count: int = 2, *, epoch: int = -1, log_append: bool = False,
               transactional: bool = False, producer_id: int = -1, headers: bool = False,
               gap: int = 0, timestamp: int = _T0) -> bytes:
    """A data batch of ``count`` records from ``base`` (``gap`` offsets skipped between records,
    as compaction leaves them), built by the records layer."""
    builder = RecordsBuilder(
        2,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        base_offset=base,
        log_append_time=_T0 + 999 if log_append else None,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
        partition_leader_epoch=epoch,
    )
    offset = base
    for i in range(count):
        builder.append(offset, timestamp + i, b"key-%d" % i, b"value-%d" % offset,
                       [("h", b"x"), ("n", None)] if headers else ())
        offset += 1 + gap
    return builder.build()


def marker(offset: int, *, commit: bool, producer_id: int = 9, epoch: int = -1) -> bytes:
    return build_end_txn_marker(offset, _T0, producer_id, 0, commit, partition_leader_epoch=epoch)


def raw_batch(base: int, deltas: Sequence[int], *, last_delta: int | None = None, max_timestamp: int | None = None,
              attributes: int = 0, epoch: int = -1, count: int | None = None) -> bytes:
    """A batch with a valid CRC whose records have the given offset deltas (what no builder
    writes: offsets out of order or outside the header's range, a lying max timestamp)."""
    payload = bytearray()
    for i, delta in enumerate(deltas):
        append_v2_record(payload, delta, i, b"k", b"v")
    return encode_v2_batch(
        base_offset=base, partition_leader_epoch=epoch, attributes=attributes,
        last_offset_delta=max(deltas) if last_delta is None else last_delta, base_timestamp=_T0,
        max_timestamp=_T0 + len(deltas) - 1 if max_timestamp is None else max_timestamp, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, record_count=len(deltas) if count is None else count,
        payload=bytes(payload),
    )


def with_crc(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC-32C recomputed (after a header change)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, _CRC_AT, crc32c(bytes(out[_ATTRIBUTES_AT:])))
    return bytes(out)


def set_field(batch: bytes, fmt: str, at: int, value: int, fix_crc: bool = True) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    return with_crc(out) if fix_crc and at >= _ATTRIBUTES_AT else bytes(out)


def legacy_entry(offset: int, magic: int) -> bytes:
    builder = RecordsBuilder(magic, base_offset=offset)
    builder.append(offset, _T0, b"k", b"v")
    return builder.build()


def compressed_batch(base: int) -> bytes:
    builder = RecordsBuilder(2, Compression.GZIP, base_offset=base)
    builder.append(base, _T0, b"k", b"v")
    return builder.build()


def positions_of(parts: Sequence[bytes], base: int = 0) -> list[int]:
    out, pos = [], base
    for part in parts:
        out.append(pos)
        pos += len(part)
    return out


# -- comparing the two implementations ---------------------------------------------------------

def both_runs(data: bytes | memoryview, position_base: int, state: State) -> SegmentRun:
    """The kernel's run, asserted equal to the reference's (field by field, for a readable diff)."""
    native = segment_run(data, position_base, *state)
    reference = segment_run_reference(data, position_base, *state)
    for name, got, want in zip(SegmentRun._fields, native, reference, strict=True):
        assert got == want, f"{name}: kernel {got!r} != reference {want!r} (state {state})"
        assert type(got) is type(want), name
    assert all(type(m) is Marker for m in native.markers)
    return native


def both_conversions(data: bytes | memoryview, prefix: bytes = b"") -> None:
    for to_magic in (0, 1):
        native_out, reference_out = bytearray(prefix), bytearray(prefix)
        native = convert_run_ends(data, native_out, to_magic)
        reference = convert_run_ends_reference(data, reference_out, to_magic)
        assert native == reference, to_magic
        assert native_out == reference_out, to_magic


def next_state(run: SegmentRun, state: State) -> State:
    return State(run.prev_offset, state.min_base_offset, run.prev_epoch, run.max_timestamp)


# -- kernel == reference on the committed fixtures --------------------------------------------

def _segment_states(base_offset: int, entry: Any, index: int) -> list[State]:
    """States to start a run at ``entry`` with: at a range's start, after a previous batch that
    lets it in or not, with and without epochs and timestamps so far."""
    states = [
        State(None, base_offset, None, -1),
        State(entry.base_offset - 1, base_offset, 0, _T0),
        State(entry.base_offset, base_offset, None, -1),       # not above the previous: stops
        State(None, entry.base_offset + 1, 1 << 20, 5),        # below the range's base: stops
        State(entry.base_offset - 7 if entry.base_offset >= 7 else None, 0, 2, (1 << 62)),
    ]
    return states if index == 0 else [states[index % len(states)]]


@needs_kernel
@pytest.mark.parametrize("segment", SEGMENTS, ids=lambda p: f"{p.parent.name}/{p.stem.lstrip('0') or '0'}")
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_kernel_equals_reference_on_fixture_segments(segment: Path) -> None:
    data = segment.read_bytes()
    view = memoryview(data)
    base_offset = int(segment.stem)
    entries = scan_batches(data).entries
    assert entries, segment
    # the scan's way: a run, then one entry for the per-entry path, then the next run
    state, pos, index, taken = State(None, base_offset, None, -1), 0, 0, 0
    while index < len(entries):
        run = both_runs(view[pos:], pos, state)
        both_conversions(view[pos:pos + run.consumed], b"~")
        taken += len(run.positions)
        state = next_state(run, state)
        pos += run.consumed
        while index < len(entries) and entries[index].position < pos:
            index += 1
        if index < len(entries) and not run.consumed:  # the per-entry path takes this one
            state = state._replace(prev_offset=max(state.prev_offset or 0, entries[index].last_offset))
            pos += entries[index].size
            index += 1
    # from every entry start, over a window of a few entries (the reference is quadratic else)
    for index, entry in enumerate(entries):
        end = entries[index + 4].position if index + 4 < len(entries) else len(data)
        window = view[entry.position:end]
        for state in _segment_states(base_offset, entry, index):
            run = both_runs(window, entry.position, state)
            both_conversions(window[:run.consumed])
    assert taken > 0 or all(e.magic < 2 or e.attributes & 7 for e in entries)


@needs_kernel
def test_fixture_runs_take_the_uncompressed_v2_batches() -> None:
    """Every uncompressed v2 batch with records in the committed fixtures is in some run: they
    are sound logs, where only compressed and legacy entries and the empty batches compaction
    leaves (record count 0, for the per-entry path) stop a run."""
    total = plain = 0
    for segment in SEGMENTS:
        data = segment.read_bytes()
        entries = scan_batches(data).entries
        plain += sum(1 for e in entries if e.magic == 2 and not e.attributes & 7 and e.record_count > 0)
        state, pos = State(None, int(segment.stem), None, -1), 0
        for entry in entries:
            if entry.position < pos:
                continue
            run = segment_run(memoryview(data)[entry.position:], entry.position, *state)
            total += len(run.positions)
            if run.consumed:
                state = next_state(run, state)
                pos = entry.position + run.consumed
            else:
                state = state._replace(prev_offset=entry.last_offset)
    assert total == plain > 100


# -- kernel == reference on random logs -------------------------------------------------------

@st.composite
def sound_logs(draw: st.DrawFn) -> tuple[list[bytes], int]:
    """A log of data (plain, transactional, LogAppendTime, headers, compacted gaps) and
    control batches with offsets, epochs and timestamps in order; and its first offset."""
    first = draw(st.sampled_from([0, 5, 1 << 40]))
    base, epoch, parts = first, draw(st.sampled_from([-1, 0, 3])), []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["plain", "plain", "transactional", "log_append", "commit", "abort"]))
        if kind in ("commit", "abort"):
            parts.append(marker(base, commit=kind == "commit", epoch=epoch))
            base += 1
        else:
            count, gap = draw(st.integers(1, 4)), draw(st.sampled_from([0, 0, 2]))
            parts.append(data_batch(base, count, epoch=epoch, log_append=kind == "log_append",
                                    transactional=kind == "transactional",
                                    producer_id=9 if kind == "transactional" else -1,
                                    headers=draw(st.booleans()), gap=gap,
                                    timestamp=draw(st.sampled_from([_T0, 0, 1 << 41]))))
            base += count + (count - 1) * gap
        base += draw(st.sampled_from([0, 0, 3]))
        if draw(st.integers(0, 3)) == 0:
            epoch = epoch + 1 if epoch >= 0 else draw(st.sampled_from([-1, 2]))
    return parts, first


def _semantic_fault(draw: st.DrawFn, batch: bytes, prev_last: int) -> bytes:
    """``batch`` with one header or record fault the segment scan reports, CRC recomputed."""
    base = struct.unpack_from(">q", batch, _BASE_OFFSET_AT)[0]
    kind = draw(st.sampled_from(["base", "epoch", "max_timestamp", "order", "compressed", "count", "length",
                                 "records"]))
    if kind == "base":  # not above the previous batch's last offset (or negative)
        return set_field(batch, ">q", _BASE_OFFSET_AT, draw(st.sampled_from([prev_last, prev_last - 1, -1, 0])))
    if kind == "epoch":
        return set_field(batch, ">i", _EPOCH_AT, draw(st.sampled_from([-1, 0, 1, 1 << 30])))
    if kind == "max_timestamp":
        current = struct.unpack_from(">q", batch, _MAX_TIMESTAMP_AT)[0]
        return set_field(batch, ">q", _MAX_TIMESTAMP_AT, current + draw(st.sampled_from([-1, 1, -(1 << 40)])))
    if kind == "order":  # record offsets repeated, backwards, or beyond the header's last offset
        deltas = draw(st.sampled_from([[0, 0], [1, 0], [0, 2], [-1, 0], [0, 1, 5]]))
        return raw_batch(base, deltas, last_delta=draw(st.sampled_from([None, 1])))
    if kind == "compressed":
        attributes = struct.unpack_from(">h", batch, _ATTRIBUTES_AT)[0]
        return set_field(batch, ">h", _ATTRIBUTES_AT, attributes | draw(st.integers(1, 4)))
    if kind == "count":
        return set_field(batch, ">i", _COUNT_AT, draw(st.sampled_from([-1, 0, 1, 3, 100])))
    if kind == "length":  # a lying length: no CRC can cover it
        return set_field(batch, ">i", _LENGTH_AT, draw(st.sampled_from([0, 48, 49, len(batch) - 13, 1 << 30])))
    out = bytearray(batch)  # a record byte changed under a valid CRC
    if len(out) > 61:
        at = draw(st.integers(61, len(out) - 1))
        out[at] = draw(st.integers(0, 255))
    return with_crc(out)


@st.composite
def damaged_logs(draw: st.DrawFn) -> bytes:
    parts, _ = draw(sound_logs())
    parts = list(parts)
    for _ in range(draw(st.integers(1, 2))):
        index = draw(st.integers(0, len(parts) - 1))
        prev_last = -1
        if index:
            prev = parts[index - 1]
            prev_last = struct.unpack_from(">q", prev, 0)[0] + struct.unpack_from(">i", prev, 23)[0]
        parts[index] = _semantic_fault(draw, parts[index], prev_last)
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 2))):  # byte flips anywhere, then maybe a cut
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        del data[draw(st.integers(0, len(data))):]
    return bytes(data)


states = st.builds(
    State,
    st.none() | st.sampled_from([-1, 0, 4, 1 << 40]),
    st.sampled_from([0, 0, 5, 1 << 41]),
    st.none() | st.sampled_from([0, 2, 5]),
    st.sampled_from([-1, 0, _T0 + 2, 1 << 50]),
)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(sound_logs(), states, st.integers(0, 1 << 40))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_kernel_equals_reference_on_built_logs(log: tuple[list[bytes], int], state: State, position_base: int) -> None:
    data = b"".join(log[0])
    run = both_runs(data, position_base, state)
    both_conversions(data[:run.consumed], b"prefix")
    both_conversions(data)


@pytest.mark.slow  # the fast set keeps the clean-log and single-fault differentials
@needs_kernel
@settings(max_examples=150, deadline=None)
@given(damaged_logs(), states)
def test_kernel_equals_reference_on_damaged_logs(data: bytes, state: State) -> None:
    run = both_runs(data, 0, state)
    both_conversions(data[:run.consumed])
    both_conversions(data, b"~")


# -- what a run is ------------------------------------------------------------------------------

@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> tuple[RunFn, ConvertFn]:
    fns: tuple[RunFn, ConvertFn] = request.param
    return fns


def _sound_prefix() -> list[bytes]:
    return [data_batch(10, 3, epoch=1), data_batch(13, 2, epoch=1, headers=True), marker(15, commit=True, epoch=2)]


def _stops_before(impl: tuple[RunFn, ConvertFn], faulty: bytes, state: State = START, after: bytes = b"") -> None:
    """A sound prefix, then ``faulty``: the run is exactly the prefix."""
    run_fn, _ = impl
    prefix = _sound_prefix()
    data = b"".join(prefix) + faulty + after
    run = run_fn(data, 100, *state)
    assert run.consumed == sum(map(len, prefix))
    assert run.positions == positions_of(prefix, 100)
    assert run.last_offsets == [12, 14, 15]
    assert (run.prev_offset, run.prev_epoch) == (15, 2)
    # and a run that starts at the fault takes nothing and changes no state
    empty = run_fn(faulty + after, 7, 15, 0, 2, 42)
    assert (empty.consumed, empty.positions, empty.markers, empty.first_epoch) == (0, [], [], None)
    assert (empty.prev_offset, empty.prev_epoch, empty.max_timestamp) == (15, 2, 42)
    assert (empty.data_records, empty.full, empty.no_headers, empty.no_timestamp) == (0, 0, 0, 0)


def test_a_run_stops_at_a_bad_crc(impl: tuple[RunFn, ConvertFn]) -> None:
    batch = bytearray(data_batch(16))
    batch[-1] ^= 1
    _stops_before(impl, bytes(batch), after=data_batch(30))


def test_a_run_stops_at_a_base_offset_not_above_the_previous_last_offset(impl: tuple[RunFn, ConvertFn]) -> None:
    _stops_before(impl, data_batch(15), after=data_batch(30))  # the marker's offset again
    _stops_before(impl, data_batch(3))


def test_a_run_stops_at_a_first_base_offset_below_the_segment_base(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    data = data_batch(10) + data_batch(12)
    assert run_fn(data, 0, None, 11, None, -1).consumed == 0
    assert run_fn(data, 0, None, 10, None, -1).consumed == len(data)
    assert run_fn(data, 0, 9, 11, None, -1).consumed == len(data)  # a range's later batch: prev_offset rules


def test_a_run_stops_at_a_leader_epoch_going_backwards(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    _stops_before(impl, data_batch(16, epoch=1))
    # an epoch of -1 (none stored) is not backwards, and the largest epoch stays
    data = data_batch(0, epoch=3) + data_batch(2, epoch=-1) + data_batch(4, epoch=3) + data_batch(6, epoch=2)
    run = run_fn(data, 0, *START)
    assert len(run.positions) == 3 and run.prev_epoch == 3
    assert run_fn(data, 0, None, 0, 4, -1).consumed == 0


def test_a_run_stops_at_a_create_time_max_timestamp_that_is_not_the_records_max(
        impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    batch = data_batch(16, 3)
    true_max = struct.unpack_from(">q", batch, _MAX_TIMESTAMP_AT)[0]
    _stops_before(impl, set_field(batch, ">q", _MAX_TIMESTAMP_AT, true_max + 1))
    _stops_before(impl, set_field(batch, ">q", _MAX_TIMESTAMP_AT, true_max - 1))
    # LogAppendTime: the header's time is the records' time, whatever they store
    log_append = data_batch(16, 3, log_append=True)
    run = run_fn(log_append, 0, *START)
    assert run.consumed == len(log_append) and run.max_timestamps == [_T0 + 999]


@pytest.mark.parametrize("deltas, last_delta", [
    ([0, 0], None),        # an offset repeated
    ([1, 0], None),        # backwards
    ([0, 1, 5], 4),        # beyond the header's last offset
    ([-1, 0], None),       # below the base offset
])
def test_a_run_stops_at_record_offsets_out_of_order(impl: tuple[RunFn, ConvertFn], deltas: list[int],
                                                    last_delta: int | None) -> None:
    _stops_before(impl, raw_batch(16, deltas, last_delta=last_delta))


def test_a_run_takes_record_offsets_with_gaps(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    batch = raw_batch(16, [1, 4], last_delta=6)  # compaction leaves the ends of the range empty
    run = run_fn(batch, 0, 15, 0, None, -1)
    assert run.consumed == len(batch)
    assert (run.last_offsets, run.last_records, run.records) == ([22], [20], [2])


@pytest.mark.parametrize("codec", [1, 2, 3, 4, 7])
def test_a_run_stops_at_a_compressed_batch(impl: tuple[RunFn, ConvertFn], codec: int) -> None:
    if codec == 1:
        _stops_before(impl, compressed_batch(16))
    else:  # the attribute alone, CRC right: the run leaves it to the reference codecs
        _stops_before(impl, set_field(data_batch(16), ">h", _ATTRIBUTES_AT, codec))
    # a compressed control batch too
    _stops_before(impl, set_field(marker(16, commit=True), ">h", _ATTRIBUTES_AT, 0x30 | codec))


@pytest.mark.parametrize("magic", [0, 1])
def test_a_run_stops_at_a_legacy_entry(impl: tuple[RunFn, ConvertFn], magic: int) -> None:
    _stops_before(impl, legacy_entry(16, magic), after=data_batch(17))


@pytest.mark.parametrize("kind", ["truncated", "short_length", "long_length", "count", "no_records",
                                  "negative_base", "records"])
def test_a_run_stops_at_a_malformed_batch(impl: tuple[RunFn, ConvertFn], kind: str) -> None:
    batch = data_batch(16, 3)
    faulty = {
        "truncated": batch[:-1],
        "short_length": set_field(batch, ">i", _LENGTH_AT, 48),
        "long_length": set_field(batch, ">i", _LENGTH_AT, len(batch) - 11),
        "count": set_field(batch, ">i", _COUNT_AT, 4),
        "no_records": encode_v2_batch(base_offset=16, partition_leader_epoch=-1, attributes=0, last_offset_delta=0,
                                      base_timestamp=-1, max_timestamp=-1, producer_id=-1, producer_epoch=-1,
                                      base_sequence=-1, record_count=0, payload=b""),
        "negative_base": set_field(batch, ">q", _BASE_OFFSET_AT, -1),
        "records": raw_batch(16, [0, 1], count=3),
    }[kind]
    _stops_before(impl, faulty, after=b"" if kind == "truncated" else data_batch(30))


def test_a_run_takes_at_most_max_batches_per_call(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    parts = [data_batch(i, 1) for i in range(MAX_BATCHES_PER_RUN + 5)]
    data = b"".join(parts)
    first = run_fn(data, 0, *START)
    assert len(first.positions) == MAX_BATCHES_PER_RUN
    assert first.consumed == sum(map(len, parts[:MAX_BATCHES_PER_RUN]))
    second = run_fn(data[first.consumed:], first.consumed, first.prev_offset, 0, first.prev_epoch,
                    first.max_timestamp)
    assert second.positions == positions_of(parts)[MAX_BATCHES_PER_RUN:]
    assert first.data_records + second.data_records == len(parts)


def test_an_empty_or_short_buffer_is_an_empty_run(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    batch = data_batch(0)
    for data in (b"", batch[:60], batch[:61]):
        run = run_fn(data, 0, 3, 0, 1, 9)
        assert (run.consumed, run.positions, run.last_offsets, run.max_timestamps, run.records,
                run.last_records, run.markers, run.first_epoch) == (0, [], [], [], [], [], [], None)
        assert (run.prev_offset, run.prev_epoch, run.max_timestamp) == (3, 1, 9)
        assert (run.data_records, run.full, run.no_headers, run.no_timestamp) == (0, 0, 0, 0)


@pytest.mark.parametrize("prev_epoch", [-1, 1 << 31])
def test_a_previous_epoch_outside_int32_is_refused(impl: tuple[RunFn, ConvertFn], prev_epoch: int) -> None:
    run_fn, _ = impl
    with pytest.raises(ValueError, match="prev_epoch"):
        run_fn(data_batch(0), 0, None, 0, prev_epoch, -1)


# -- what a run reports -----------------------------------------------------------------------

def _transactional_log() -> list[bytes]:
    return [
        data_batch(0, 2, epoch=-1),
        data_batch(2, 3, epoch=4, transactional=True, producer_id=9),
        marker(5, commit=False, epoch=4),
        data_batch(6, 1, epoch=5, transactional=True, producer_id=11, log_append=True),
        marker(7, commit=True, producer_id=11, epoch=5),
        data_batch(8, 2, epoch=5, headers=True, gap=3),
    ]


def test_markers_list_control_and_transactional_batches(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    parts = _transactional_log()
    p = positions_of(parts, 1000)
    run = run_fn(b"".join(parts), 1000, *START)
    assert run.consumed == sum(map(len, parts))
    assert run.markers == [
        Marker(p[1], 2, 2, 9, RUN_TRANSACTIONAL),
        Marker(p[2], 5, 5, 9, RUN_CONTROL | RUN_TRANSACTIONAL | RUN_ABORT),
        Marker(p[3], 6, 6, 11, RUN_TRANSACTIONAL),
        Marker(p[4], 7, 7, 11, RUN_CONTROL | RUN_TRANSACTIONAL),
    ]
    assert run.first_epoch == (4, p[1])
    assert (run.prev_offset, run.prev_epoch) == (12, 5)
    assert run.positions == p
    assert run.last_offsets == [1, 4, 5, 6, 7, 12]
    assert run.records == [2, 3, 0, 1, 0, 2]
    assert run.last_records == [1, 4, None, 6, None, 12]
    assert run.data_records == 8


def test_an_abort_marker_needs_the_abort_key_type(impl: tuple[RunFn, ConvertFn]) -> None:
    """Only the key type says ABORT; a commit's key differs from an abort's in that one byte."""
    run_fn, _ = impl
    abort, commit = marker(0, commit=False), marker(0, commit=True)
    assert run_fn(abort, 0, *START).markers[0].flags & RUN_ABORT
    assert not run_fn(commit, 0, *START).markers[0].flags & RUN_ABORT


def test_first_epoch_is_none_without_epochs(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    run = run_fn(data_batch(0) + data_batch(2), 0, None, 0, 7, -1)
    assert run.first_epoch is None and run.prev_epoch == 7


def test_max_timestamps_are_the_running_max(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    data = data_batch(0, 2, timestamp=500) + data_batch(2, 1, timestamp=100) + data_batch(3, 1, timestamp=900)
    assert run_fn(data, 0, *START).max_timestamps == [501, 501, 900]
    run = run_fn(data, 0, None, 0, None, 700)
    assert run.max_timestamps == [700, 700, 900] and run.max_timestamp == 900


def test_the_sums_are_the_digests_of_the_data_batches(impl: tuple[RunFn, ConvertFn]) -> None:
    run_fn, _ = impl
    data = b"".join(_transactional_log())
    full = no_headers = no_timestamp = records = 0
    for batch in MemoryRecords(data).batches():
        assert isinstance(batch, DefaultBatch)
        if batch.is_control:
            continue
        override = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        digest = digest_v2_records(batch.records_buffer(), batch.record_count, batch.base_offset,
                                   batch.base_timestamp, override)
        assert digest is not None
        full, no_headers, no_timestamp = full + digest.full, no_headers + digest.no_headers, \
            no_timestamp + digest.no_timestamp
        records += batch.record_count
    run = run_fn(data, 0, *START)
    assert (run.data_records, run.full, run.no_headers, run.no_timestamp) == \
        (records, full & MASK64, no_headers & MASK64, no_timestamp & MASK64)
    assert run.full != run.no_headers != run.no_timestamp  # headers and timestamps are in them


# -- convert_run_ends --------------------------------------------------------------------------

@pytest.mark.parametrize("to_magic", [0, 1])
def test_convert_run_ends_writes_the_records_layers_down_conversion(impl: tuple[RunFn, ConvertFn],
                                                                   to_magic: int) -> None:
    _, convert_fn = impl
    parts = _transactional_log()
    out = bytearray(b"already here")
    ends = convert_fn(b"".join(parts), out, to_magic)
    expected, want_ends = bytearray(b"already here"), []
    for part in parts:
        converted, _ = down_convert_bytes(MemoryRecords(part).batches(), to_magic, 0)
        expected += converted
        want_ends.append(len(expected))
    assert bytes(out) == bytes(expected)
    assert ends == want_ends
    assert ends[1] > ends[0] and ends[2] == ends[1]  # a control batch writes nothing
    whole, _ = down_convert_bytes(MemoryRecords(b"".join(parts)).batches(), to_magic, 0)
    assert bytes(out[len(b"already here"):]) == bytes(whole)


@pytest.mark.parametrize("name", ["legacy", "compressed", "compressed_control", "negative_base", "partial",
                                  "trailing_bytes", "short_length", "bad_records"])
def test_convert_run_ends_declines_what_is_not_a_run(impl: tuple[RunFn, ConvertFn], name: str) -> None:
    _, convert_fn = impl
    good = data_batch(0, 2) + data_batch(2, 1)
    data = {
        "legacy": good + legacy_entry(3, 1),
        "compressed": good + compressed_batch(3),
        "compressed_control": good + set_field(marker(3, commit=True), ">h", _ATTRIBUTES_AT, 0x31),
        "negative_base": set_field(data_batch(0, 2), ">q", _BASE_OFFSET_AT, -1) + good,
        "partial": good + data_batch(3)[:-1],
        "trailing_bytes": good + b"\x00" * 20,
        "short_length": good + set_field(data_batch(3), ">i", _LENGTH_AT, 30),
        "bad_records": good + raw_batch(3, [0, 1], count=3),
    }[name]
    for to_magic in (0, 1):
        out = bytearray(b"kept")
        assert convert_fn(data, out, to_magic) is None
        assert out == b"kept"


def test_convert_run_ends_of_nothing_is_no_ends(impl: tuple[RunFn, ConvertFn]) -> None:
    _, convert_fn = impl
    out = bytearray(b"x")
    assert convert_fn(b"", out, 1) == [] and out == b"x"


def test_convert_run_ends_refuses_magic_2(impl: tuple[RunFn, ConvertFn]) -> None:
    _, convert_fn = impl
    with pytest.raises(ValueError, match="to_magic"):
        convert_fn(data_batch(0), bytearray(), 2)
