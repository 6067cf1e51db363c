"""Differential tests of the kernel's up-conversion pass (``legacy_set_to_v2``, through
``lazyconv.conversion._up._kernel_set``) against its reference, ``_plain_set`` plus the v2 batch
builder ``_v2_batch``, on magic 0/1 message sets written by hypothesis, sound and damaged:
truncations, bad CRCs, lying size and length fields under a good CRC, mixed magics, codec bits,
compacted topics with null keys, LogAppendTime with and without a timestamp, timestamps below
-1 and deltas beyond int64, appended garbage.

- The function: whatever ``_plain_set`` declines, the kernel declines; whatever rows would make
  ``_v2_batch`` raise, the kernel declines (the Python path then raises); everything else gives
  the same magic, last offset, count and batch bytes, uncompressed and compressed.
- The public function: ``up_convert`` on the kernel and inside ``_impl.using(_impl.REFERENCE)``
  gives the same batch or the same error (type, message, position), for plain sets and for the
  same sets as a compressed wrapper's inner messages.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from legacy_message_sets import fix_crc, message, wrapper

import lazyconv.conversion._up as up
from lazyconv.conversion._up import up_convert
from lazyconv.records import Compression, MemoryRecords, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

T = 1_700_000_000_000
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]

payloads = st.none() | st.binary(max_size=40) | st.sampled_from([b"", b"x" * 300, b"y" * 5000])
tame_timestamps = st.one_of(st.just(-1), st.integers(0, 2**42), st.just(T))
timestamps = st.one_of(  # below -1 (refused), or deltas beyond int64
    tame_timestamps, st.sampled_from([-2, INT64_MIN, INT64_MAX, INT64_MAX - 1, 0]))
# attributes: LogAppendTime (8, accepted with a timestamp), codec bits (1..7: a compressed
# message in a plain set), bits nobody reads (0x10, 0x80)
attributes = st.sampled_from([0, 8, 1, 2, 3, 4, 7, 0x10, 0x80, 0x88])
offsets = st.one_of(st.integers(0, 100), st.sampled_from([-1, INT64_MAX, INT64_MIN, 2**40]))


@st.composite
def message_sets(draw: Any) -> tuple[bytes, list[bytes]]:
    """A set of magic 0/1 messages (the entries, and their bytes joined), damaged or not."""
    first_magic = draw(st.sampled_from([0, 1]))
    count = draw(st.integers(1, 8))
    exotic = draw(st.integers(0, 2)) == 0  # else: one magic, attributes 0, timestamps from -1
    entries = []
    offset = draw(offsets)
    for _ in range(count):
        magic = first_magic if not exotic or draw(st.integers(0, 5)) else 1 - first_magic
        attrs = draw(attributes) if exotic else 0
        timestamp = draw(timestamps if exotic else tame_timestamps)
        entries.append(message(offset, timestamp, draw(payloads), draw(payloads), magic,
                               attrs - 256 if attrs > 127 else attrs))
        offset = draw(st.one_of(st.just(min(offset + 1, INT64_MAX)), offsets))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):  # damage, under a good CRC or not
        index = draw(st.integers(0, len(entries) - 1))
        entry = bytearray(entries[index])
        kind = draw(st.sampled_from(["flip", "size", "key", "value", "magic", "cut", "garbage"]))
        if len(entry) < 30:  # cut by an earlier damage: only more bytes now
            kind = "garbage"
        if kind == "flip":
            entry[draw(st.integers(0, len(entry) - 1))] ^= draw(st.integers(1, 255))
        elif kind == "size":
            size = struct.unpack_from(">i", entry, 8)[0]
            struct.pack_into(">i", entry, 8, draw(st.sampled_from(
                [-1, 0, 13, 14, 21, 22, size - 1, size + 1, 2**31 - 1])))
        elif kind in ("key", "value"):  # a length field: key first (after the timestamp for v1)
            at = 18 + (8 if entry[16] == 1 else 0)
            if kind == "value":
                key_length = struct.unpack_from(">i", entry, at)[0]
                at += 4 + max(key_length, 0)
            if at + 4 <= len(entry):
                length = struct.unpack_from(">i", entry, at)[0]
                lies = [length - 1, length + 1, -2, -1, 0, 1, 5, 2**31 - 1, len(entry)]
                # an int32 field: a length already at either end has no neighbour past it
                struct.pack_into(">i", entry, at, draw(st.sampled_from(
                    [lie for lie in lies if -2**31 <= lie < 2**31])))
        elif kind == "magic":
            entry[16] = draw(st.sampled_from([2, 3, 0xFF, 1 - entry[16] if entry[16] < 2 else 0]))
        elif kind == "cut":
            del entry[draw(st.integers(0, len(entry) - 1)):]
        else:
            entry += draw(st.binary(min_size=1, max_size=30))
        if kind != "cut" and len(entry) >= 30 and draw(st.integers(0, 2)):
            entry = bytearray(fix_crc(bytes(entry)))
        entries[index] = bytes(entry)
    return b"".join(entries), entries


def reference(fn: Any) -> Any:
    with _impl.using(_impl.REFERENCE):
        return fn()


def outcome(fn: Any) -> tuple[Any, ...]:
    try:
        result = fn()
    except Exception as exc:  # any error: the same type, message and position on both sides
        return ("error", type(exc), str(exc), getattr(exc, "position", None))
    return ("ok", result.batch, result.record_count, result.source_compression, result.source_magic)


def _lengths_changed(entry: bytes, key_delta: int, value_delta: int) -> bytes:
    """``entry`` with its key and value length fields moved by the deltas, its CRC right."""
    data = bytearray(entry)
    at = 18 + (8 if data[16] == 1 else 0)
    key_length = struct.unpack_from(">i", data, at)[0]
    struct.pack_into(">i", data, at, key_length + key_delta)
    at += 4 + max(key_length, 0)
    struct.pack_into(">i", data, at, struct.unpack_from(">i", data, at)[0] + value_delta)
    return fix_crc(bytes(data))


# lengths that do not fill the message exactly, under a good CRC: bytes left unread, past the end
_SHORT_VALUE = _lengths_changed(message(0, T, b"key", b"value", 1), 0, -1)
_LONG_VALUE = _lengths_changed(message(0, T, b"key", b"value", 0), 0, 1)
_SHORT_KEY = _lengths_changed(message(0, T, b"key", b"value", 1), -1, 0)
_LONG_KEY = _lengths_changed(message(0, T, b"key", b"value", 0), 9, 0)


@settings(max_examples=300, deadline=None)
@given(message_sets(), st.booleans(), st.sampled_from(LEGACY_CODECS))
@example((_SHORT_VALUE, []), False, Compression.NONE)
@example((_LONG_VALUE, []), False, Compression.NONE)
@example((_SHORT_KEY, []), False, Compression.NONE)
@example((_LONG_KEY, []), False, Compression.NONE)
@example((message(0, T, None, None, 1), []), True, Compression.GZIP)
@example((message(0, -1, b"", b"", 1, 8), []), False, Compression.NONE)
@example((message(0, -1, b"", b"", 1) + message(0, INT64_MAX, b"", b"", 1), []), False, Compression.NONE)
@example((message(0, T, b"k", b"v", 1) + message(1, T, b"k", b"v", 0), []), False, Compression.NONE)
@example((message(0, T, b"k", b"v", 1, 2), []), False, Compression.NONE)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_the_kernel_pass_is_plain_set_then_v2_batch(case: tuple[bytes, list[bytes]], compacted: bool,
                                                    compression: Compression) -> None:
    data, _entries = case
    view = memoryview(data)
    native = up._kernel_set(view, compacted, compression)
    plain = up._plain_set(view, compacted)
    if plain is None:
        assert native is None
        return
    magic, last_offset, rows = plain
    try:
        expected = up._v2_batch(compression, rows)
    except Exception:  # timestamps below -1, deltas beyond int64: the kernel leaves them to Python
        assert native is None
        return
    assert native == (magic, last_offset, len(rows), expected)


@settings(max_examples=300, deadline=None)
@given(message_sets(), st.booleans(), st.sampled_from([None, 0, 1, 2, 3]))
@example((message(0, T, b"k", b"v", 1, 8) + message(1, -1, b"k", b"v", 1, 8), []), False, None)  # LogAppendTime, no ts
@example((message(0, -1, b"k", b"v", 1) + message(1, INT64_MAX, b"k", b"v", 1), []), False, 2)  # delta past int64
@example((message(0, T, None, b"v", 1) + message(1, T, b"k", b"v", 1), []), True, None)  # compacted, null key
@example((message(0, -5, b"k", b"v", 1), []), False, 0)  # a timestamp below -1
@pytest.mark.slow  # over a second: kept out of the quick look
def test_up_convert_of_a_plain_set_is_the_references(case: tuple[bytes, list[bytes]], compacted: bool,
                                                     produce_version: int | None) -> None:
    data, _entries = case

    def convert() -> Any:
        return up_convert(data, produce_version=produce_version, compacted_topic=compacted)

    assert outcome(convert) == reference(lambda: outcome(convert))


@settings(max_examples=200, deadline=None)
@given(message_sets(), st.booleans(), st.sampled_from(LEGACY_CODECS[1:]), st.data())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_up_convert_of_a_wrapper_is_the_references(case: tuple[bytes, list[bytes]], compacted: bool,
                                                   codec: Compression, data: Any) -> None:
    inner, entries = case
    inner_magic = entries[0][16] if len(entries[0]) > 16 else 1
    magic = inner_magic if inner_magic in (0, 1) and data.draw(st.integers(0, 9)) else data.draw(st.sampled_from([0, 1]))
    offset = data.draw(st.sampled_from([0, len(entries) - 1, 100, 1]))  # 0: librdkafka's; 1: below the last
    log_append_time = 8 if magic == 1 and data.draw(st.integers(0, 4)) == 0 else 0
    timestamp = data.draw(st.sampled_from([T, -1]))
    message_set = wrapper(inner, codec, magic, offset, ts=timestamp, extra_attrs=log_append_time)

    def convert() -> Any:
        return up_convert(message_set, produce_version=2, compacted_topic=compacted)

    assert outcome(convert) == reference(lambda: outcome(convert))


def test_the_kernel_takes_sound_sets_and_leaves_out_untouched_when_it_declines() -> None:
    for magic in (0, 1):
        data = b"".join(message(i, T + i, b"k%d" % i, b"v" * 1024, magic) for i in range(64))
        out = bytearray(b"prefix")
        facts = _impl.legacy_set_to_v2(data, out, False)
        assert facts == (magic, 63, 64, T if magic else -1, T + 63 if magic else -1)
        assert out.startswith(b"prefix") and len(out) < len(data) + 6
        result = up_convert(data)
        assert [r.value for r in MemoryRecords(result.batch).records()] == [b"v" * 1024] * 64
        for damaged in (data[:-1], data[:12] + b"\x7f" + data[13:], data + b"\x00", b""):
            out = bytearray(b"prefix")
            assert _impl.legacy_set_to_v2(damaged, out, False) is None
            assert out == b"prefix"
        out = bytearray()
        null_key = message(0, T, None, b"v", magic)
        assert _impl.legacy_set_to_v2(null_key, out, True) is None and out == b""
        assert _impl.legacy_set_to_v2(null_key, out, False) is not None


def test_threads_convert_at_once_with_the_gil_released() -> None:
    """Sets above 4 KiB are converted with the GIL released: threads at once, each its own
    answer (the records' bytes are read while another thread holds the GIL)."""
    sets = [b"".join(message(i, T + i, b"t%d" % n, bytes([n]) * 2000, 1) for i in range(40)) for n in range(4)]
    expected = [reference(lambda s=s: up_convert(s).batch) for s in sets]
    failures: list[int] = []

    def work(n: int) -> None:
        for _ in range(50):
            if up_convert(sets[n]).batch != expected[n]:
                failures.append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
