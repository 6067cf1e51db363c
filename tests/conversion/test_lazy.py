"""Lazy down-conversion: committed size (S_pre), chunking, cut, overflow padding, the send's
state machine and its partial writes (docs/guide/down-conversion.md)."""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

import pytest
from crc32c import crc32c
from lazy_support import (
    TrickleChannel,
    build_batch,
    consumer_records,
    drive,
    v2_end_txn_marker,
)

from lazyconv._send import drain
from lazyconv.conversion._chunks import chunk_groups, overflow_padding, overflow_padding_step
from lazyconv.conversion._down import down_convert_bytes
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import (
    ConfigurationError,
    InvalidRecordError,
    UnknownCompressionError,
    UnsupportedCompressionError,
)
from lazyconv.records import Compression, MemoryRecords

# --------------------------------------------------------------------------------------------
# overflow padding steps: the exact bytes Kafka writes

PADDING_TABLE = [
    (5, "ffffffffff"),
    (11, "ffffffffffffffff000000"),
    (12, "ffffffffffffffff0000003d"),
    (20, "ffffffffffffffff0000003d" + "00" * 8),
    (41, "ffffffffffffffff0000003d" + "00" * 29),
    (73, "ffffffffffffffff0000004a" + "00" * 61),
    (131072, "ffffffffffffffff00020001" + "00" * 131060),
]


@pytest.mark.parametrize(("remaining", "hex_bytes"), PADDING_TABLE, ids=[str(r) for r, _ in PADDING_TABLE])
def test_padding_step_bytes(remaining: int, hex_bytes: str) -> None:
    assert overflow_padding_step(remaining) == bytes.fromhex(hex_bytes)
    assert overflow_padding(remaining) == bytes.fromhex(hex_bytes)


def test_padding_past_one_step_starts_a_new_header_every_131072_bytes() -> None:
    padding = overflow_padding(200162)
    assert len(padding) == 200162
    assert padding[:12] == bytes.fromhex("ffffffffffffffff00030de3")
    assert padding[12:131072] == bytes(131060)
    assert padding[131072 : 131072 + 12] == bytes.fromhex("ffffffffffffffff00010de3")
    assert padding[131072 + 12 :] == bytes(69078)


def test_padding_of_one_byte_and_refusal_of_zero() -> None:
    assert overflow_padding_step(1) == b"\xff"
    assert overflow_padding(0) == b""
    with pytest.raises(ConfigurationError):
        overflow_padding_step(0)


@pytest.mark.parametrize("remaining", [(1 << 31) - 2, (1 << 31) - 1, 1 << 31, 3 << 31])
def test_padding_beyond_2_gib_caps_the_size_field_at_int32_max(remaining: int) -> None:
    """A send of more than 2 GiB (records of a file that large) that pads: R + 1 does not fit
    the header's int32 size field, which says the largest int32 instead of failing to pack."""
    step = overflow_padding_step(remaining)
    assert len(step) == 131072
    assert step[:12] == struct.pack(">qi", -1, min(remaining + 1, (1 << 31) - 1))
    assert step[12:] == bytes(131060)


@pytest.mark.parametrize("remaining", [12, 13, 61, 1000, 131071, 131072, 131073, 300000])
def test_padding_is_never_a_complete_entry(remaining: int) -> None:
    """Why a consumer ignores it: declared size always exceeds what is left."""
    assert consumer_records(overflow_padding(remaining)) == []
    data = build_batch(1, [(1000, b"k", b"v")])
    assert consumer_records(data + overflow_padding(remaining)) == [(0, 1000, b"k", b"v")]


# --------------------------------------------------------------------------------------------
# chunk planning on stand-in batches: only sizes, control flag and codec matter


@dataclass
class StubBatch:
    size_in_bytes: int
    compression: int = Compression.NONE
    is_control: bool = False
    last_offset: int = 0
    position: int = 0
    magic: int = 2
    tags: list[str] = field(default_factory=list)


def _sizes(groups) -> list[list[int]]:
    return [[b.size_in_bytes for b in g] for g in groups]


def test_chunks_take_whole_batches_up_to_the_chunk_size_inclusive() -> None:
    batches = [StubBatch(s) for s in (6000, 6000, 4384, 1, 20000, 16384, 1)]
    groups = chunk_groups(iter(batches), 16384, 1)
    # 6000 + 6000 + 4384 = 16384 exactly (<= is inclusive); a 20000-byte batch forms its own
    # chunk; a chunk always holds at least one batch.
    assert _sizes(groups) == [[6000, 6000, 4384], [1], [20000], [16384], [1]]


def test_chunks_end_before_a_zstd_batch_and_refuse_to_start_with_one() -> None:
    zstd = StubBatch(100, compression=Compression.ZSTD, last_offset=9, position=300)
    batches = iter([StubBatch(100), StubBatch(100), zstd, StubBatch(100)])
    groups = chunk_groups(batches, 1 << 20, 0)
    assert _sizes([next(groups)]) == [[100, 100]]
    with pytest.raises(UnsupportedCompressionError, match="zstandard") as info:
        next(groups)
    assert info.value.position == 300


def test_zstd_is_fine_for_target_2_and_in_control_batches() -> None:
    """Control batches are dropped before the zstd check; v2 targets copy zstd."""
    zstd_control = StubBatch(100, compression=Compression.ZSTD, is_control=True)
    groups = chunk_groups(iter([StubBatch(100), zstd_control, StubBatch(100)]), 1 << 20, 1)
    assert _sizes(groups) == [[100, 100, 100]]
    zstd = StubBatch(100, compression=Compression.ZSTD)
    assert _sizes(chunk_groups(iter([StubBatch(1), zstd]), 1 << 20, 2)) == [[1, 100]]


@pytest.mark.parametrize("chunk_size", [0, 1, 16383, 1048577, 1 << 30, -1])
def test_chunk_size_out_of_range_is_a_configuration_error(chunk_size: int) -> None:
    with pytest.raises(ConfigurationError, match="chunk_size"):
        LazyDownConvertedRecords(MemoryRecords(b""), 1, 0, chunk_size=chunk_size)


@pytest.mark.parametrize("chunk_size", [16384, 1048576])
def test_chunk_size_bounds_are_accepted(chunk_size: int) -> None:
    assert LazyDownConvertedRecords(MemoryRecords(b""), 1, 0, chunk_size=chunk_size).size_in_bytes == 0


def test_target_magic_out_of_range_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="magic"):
        LazyDownConvertedRecords(MemoryRecords(b""), 3, 0)


@pytest.mark.parametrize(("records", "first_offset", "match"), [
    (b"\x00" * 70, 0, "needs records"),  # AttributeError: 'bytes' object has no attribute 'batches'
    (None, 0, "needs records"),
    (MemoryRecords(b""), "0", "first_offset"),  # TypeError deep in the first batch's conversion
], ids=["bytes", "None", "str first_offset"])
def test_records_and_first_offset_are_checked(records: object, first_offset: object, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        LazyDownConvertedRecords(records, 1, first_offset)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# worked examples (Java output, target v1, first offset 0)

A = build_batch(2, [(1000, b"k", b"v"), (1005, None, b"w")], base_offset=0)
B = build_batch(2, [(3000, b"b", b"bb")], base_offset=3)
A_V1 = bytes.fromhex(
    "0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76"
    "0000000000000001 00000017 98989778 01 00 00000000000003ed ffffffff 00000001 77"
)
B_V1 = bytes.fromhex(
    "0000000000000003 00000019 6c8556c1 01 00 0000000000000bb8 00000001 62 00000002 6262"
)
COMMIT = v2_end_txn_marker(2, 2000, producer_id=7, producer_epoch=1)


def _send_all(lazy: LazyDownConvertedRecords, pattern=(1 << 20,)) -> bytes:
    return drive(lazy.to_send(), TrickleChannel(pattern))


def test_inputs_are_the_spec_batches() -> None:
    assert len(A) == 78 and len(B) == 71
    assert COMMIT == bytes.fromhex(
        "0000000000000002 00000042 ffffffff 02 75eb436a 0030 00000000"
        "00000000000007d0 00000000000007d0 0000000000000007 0001 ffffffff 00000001"
        "20 00 00 00 08 00000001 0c 000000000000 00"
    )


def test_a_b_pads_the_shrunk_output() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(A + B), 1, 0)
    assert lazy.size_in_bytes == 149
    sent = _send_all(lazy)
    assert sent == A_V1 + B_V1 + bytes.fromhex("ffffffffffffffff0000003d") + bytes(29)
    assert lazy.stats.temporary_memory_bytes == 257
    assert lazy.stats.records_converted == 3


def test_partial_trailing_batch_counts_in_the_committed_size() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(A + B[:-5]), 1, 0)
    assert lazy.size_in_bytes == 144
    sent = _send_all(lazy)
    assert sent == A_V1 + bytes.fromhex("ffffffffffffffff0000004a") + bytes(61)
    assert (lazy.stats.temporary_memory_bytes, lazy.stats.records_converted) == (149, 2)


def test_zstd_after_the_first_batch_pads_the_rest() -> None:
    zstd = build_batch(2, [(1000, b"z", b"zz")], base_offset=2, compression=Compression.ZSTD)
    assert next(MemoryRecords(zstd).batches()).compression == Compression.ZSTD
    lazy = LazyDownConvertedRecords(MemoryRecords(A + zstd), 1, 0)
    assert lazy.size_in_bytes == 78 + len(zstd)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([1000]))
    remaining = lazy.size_in_bytes - 71
    assert sent == A_V1 + overflow_padding(remaining)
    assert sent[71:83] == b"\xff" * 8 + (remaining + 1).to_bytes(4, "big")
    assert isinstance(send.error, UnsupportedCompressionError)


def test_zstd_first_fails_construction() -> None:
    zstd = build_batch(2, [(1000, b"z", b"zz")], compression=Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionError, match="zstandard"):
        LazyDownConvertedRecords(MemoryRecords(zstd + A), 1, 0)
    assert LazyDownConvertedRecords(MemoryRecords(zstd + A), 2, 0).size_in_bytes == len(zstd) + 78


def _m_batch() -> bytes:
    return build_batch(2, [(1000 + i, None, bytes([i])) for i in range(50)], base_offset=2)


def test_cut_at_the_committed_size_inside_a_message() -> None:
    """The cut at S_pre: S_post > S_pre cuts the bytes mid-message; consumers skip the cut message."""
    m = _m_batch()
    lazy = LazyDownConvertedRecords(MemoryRecords(A + m), 1, 0)
    assert lazy.size_in_bytes == len(A) + len(m)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([3]))
    conv_m, _ = down_convert_bytes(MemoryRecords(m).batches(), 1, 0)
    assert len(sent) == lazy.size_in_bytes
    assert sent == A_V1 + conv_m[: lazy.size_in_bytes - 71]
    assert send.truncated and send.padding_bytes == 0
    assert len(m) == 461 and len(conv_m) == 1750
    # 13 complete v1 messages of M (offsets 2-14) and 13 bytes of the 14th.
    assert lazy.size_in_bytes == 539
    assert sent[-13:-1] == bytes.fromhex("000000000000000f 00000017")
    assert [r[0] for r in consumer_records(sent)] == list(range(15))


def test_first_batch_larger_than_input_sets_the_committed_size() -> None:
    """S_pre = len(F) when converting the first batch grows it past the whole input."""
    m = _m_batch()
    tail = build_batch(2, [(5, b"x", b"y")], base_offset=52)
    lazy = LazyDownConvertedRecords(MemoryRecords(m + tail), 1, 0)
    conv_m, _ = down_convert_bytes(MemoryRecords(m).batches(), 1, 0)
    assert lazy.size_in_bytes == len(conv_m) > len(m) + len(tail)
    send = lazy.to_send()
    assert drive(send, TrickleChannel([100])) == conv_m
    assert send.chunks == 1  # the second batch is never converted
    assert send.stats.records_converted == 50


# --------------------------------------------------------------------------------------------
# edge cases of the committed size S_pre


def test_committed_size_empty_input_is_zero_and_sends_nothing() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(b""), 1, 0)
    assert lazy.size_in_bytes == 0
    send = lazy.to_send()
    assert send.completed and send.size == 0
    assert send.write_to(TrickleChannel()) == 0


def test_committed_size_only_a_partial_batch_is_zero() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(A[:40]), 1, 0)
    assert lazy.size_in_bytes == 0
    assert _send_all(lazy) == b""


@pytest.mark.parametrize("to_magic", [0, 1])
def test_committed_size_only_control_batches_is_twelve(to_magic: int) -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(COMMIT + COMMIT[:30]), to_magic, 0)
    assert lazy.size_in_bytes == 12
    send = lazy.to_send()
    assert drive(send, TrickleChannel()) == bytes.fromhex("ffffffffffffffff0000003d")
    assert send.stats.records_converted == 0 and send.stats.temporary_memory_bytes == 0


def test_committed_size_everything_filtered_by_first_offset_is_twelve() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(A + B), 1, 4)
    assert lazy.size_in_bytes == 12
    assert _send_all(lazy) == bytes.fromhex("ffffffffffffffff0000003d")


def test_control_batches_are_kept_for_target_2() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(COMMIT + A), 2, 0)
    assert lazy.size_in_bytes == len(COMMIT) + len(A)
    assert _send_all(lazy) == COMMIT + A


# --------------------------------------------------------------------------------------------
# the duplicate quirk (Kafka's duplicate batch) is fixed: the send resumes after the batch F came from


def test_no_duplicate_when_the_first_batch_converts_to_nothing() -> None:
    """Java sends conv(A) ‖ conv(A) ‖ conv(B) ‖ pad; we send conv(A) ‖ conv(B) ‖ pad."""
    lazy = LazyDownConvertedRecords(MemoryRecords(COMMIT + A + B), 1, 0)
    assert lazy.size_in_bytes == 227
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([1]))
    assert sent == A_V1 + B_V1 + overflow_padding(227 - 108)
    assert [r[0] for r in consumer_records(sent)] == [0, 1, 3]
    # Java: 406 and 5 (A counted twice); ours counts every batch once.
    assert (send.stats.temporary_memory_bytes, send.stats.records_converted) == (149 + 108, 3)


def test_each_send_is_independent_and_repeatable() -> None:
    lazy = LazyDownConvertedRecords(MemoryRecords(COMMIT + A + B), 0, 0)
    first = _send_all(lazy)
    second = _send_all(lazy)
    assert first == second
    assert len(first) == lazy.size_in_bytes


# --------------------------------------------------------------------------------------------
# partial writes: the exact same bytes whatever the channel accepts per call


@pytest.mark.parametrize("pattern", [(1,), (0, 1), (3,), (7, 0, 0, 13), (1 << 20,)])
def test_partial_writes_produce_identical_bytes(pattern: tuple[int, ...]) -> None:
    m = _m_batch()
    data = COMMIT + A + m + B
    reference = _send_all(LazyDownConvertedRecords(MemoryRecords(data), 0, 0))
    assert _send_all(LazyDownConvertedRecords(MemoryRecords(data), 0, 0), pattern) == reference


def test_non_blocking_socket_with_drain() -> None:
    """A real non-blocking socket pair: the send resumes after EAGAIN until complete."""
    m = _m_batch()
    data = (A + m) * 40
    records = MemoryRecords(data)
    expected = _send_all(LazyDownConvertedRecords(records, 1, 0))
    lazy = LazyDownConvertedRecords(records, 1, 0)
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    left.setblocking(False)
    received = bytearray()

    def reader() -> None:
        while len(received) < len(expected):
            piece = right.recv(1000)
            if not piece:
                break
            received.extend(piece)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert drain(lazy.to_send(), left, timeout=10) == len(expected)
    finally:
        thread.join(10)
        left.close()
        right.close()
    assert bytes(received) == expected


# --------------------------------------------------------------------------------------------
# padding after a zstd error (Kafka's defect, fixed): padding of any length


def test_padding_past_131072_bytes_after_a_zstd_error() -> None:
    """Java example [A, zstd, 200 072-byte batch] → v1: Java fails after one 131 072-byte
    padding step and closes the connection; we pad the whole committed size."""
    zstd = build_batch(2, [(1, b"z", b"z" * 40)], base_offset=2, compression=Compression.ZSTD)
    big = build_batch(2, [(1, b"big", bytes(200_000))], base_offset=3)
    lazy = LazyDownConvertedRecords(MemoryRecords(A + zstd + big), 1, 0)
    assert lazy.size_in_bytes == len(A) + len(zstd) + len(big)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([50_000]))
    remaining = lazy.size_in_bytes - len(A_V1)
    assert remaining > 131072
    assert sent == A_V1 + overflow_padding(remaining)
    assert send.piece_sizes == [71, 131072, remaining - 131072]
    assert sent[71 + 131072 : 71 + 131072 + 8] == b"\xff" * 8  # a second padding header
    assert [r[0] for r in consumer_records(sent)] == [0, 1]
    assert isinstance(send.error, UnsupportedCompressionError)


# --------------------------------------------------------------------------------------------
# stats only of chunks sent: they sum over the chunks handed to the send; empty chunks are dropped


def test_stats_sum_over_chunks_and_skip_empty_chunks() -> None:
    controls = COMMIT * 300  # 23 400 bytes: two chunks at 16 KiB that convert to nothing
    data = A + controls + B
    lazy = LazyDownConvertedRecords(MemoryRecords(data), 1, 0, chunk_size=16384)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([1 << 20]))
    eager, eager_stats = down_convert_bytes(MemoryRecords(data).batches(), 1, 0)
    assert sent == eager + overflow_padding(len(data) - len(eager))
    assert send.chunks == 2  # F = conv(A) and the chunk holding B; control-only chunks vanish
    assert send.stats.records_converted == eager_stats.records_converted == 3
    assert send.stats.temporary_memory_bytes == eager_stats.temporary_memory_bytes == 257
    assert lazy.stats == send.stats


def test_chunks_follow_the_chunk_size() -> None:
    batches = [build_batch(2, [(i, b"k", bytes(3000))], base_offset=i) for i in range(20)]
    data = b"".join(batches)
    lazy = LazyDownConvertedRecords(MemoryRecords(data), 1, 0, chunk_size=16384)
    send = lazy.to_send()
    drive(send, TrickleChannel([1 << 20]))
    per_batch = len(down_convert_bytes(MemoryRecords(batches[0]).batches(), 1, 0)[0])
    whole = 16384 // len(batches[0])  # batches per 16 KiB chunk
    assert whole == 5
    # The first chunk is exactly one batch; then 19 batches in chunks of 5, 5, 5, 4; then the
    # output (smaller than the input) is padded.
    padding = lazy.size_in_bytes - 20 * per_batch
    assert send.piece_sizes == [per_batch] + [5 * per_batch] * 3 + [4 * per_batch] + [padding]


# --------------------------------------------------------------------------------------------
# errors other than zstd end the conversion like zstd (Kafka lets them abort the whole
# response): what came before goes out, the rest is padding, the error is kept for the server


def test_corrupt_later_batch_is_padded_and_reported() -> None:
    bad = bytearray(B)
    struct.pack_into(">i", bad, 57, 5)  # claims 5 records, holds 1
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    lazy = LazyDownConvertedRecords(MemoryRecords(A + bytes(bad)), 1, 0)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([1 << 20]))
    assert sent == A_V1 + overflow_padding(lazy.size_in_bytes - 71)  # conv(A), then padding
    assert send.completed and isinstance(send.error, InvalidRecordError)
    assert lazy.send_error is send.error


def test_unknown_codec_in_a_later_batch_is_padded_and_reported() -> None:
    bad = bytearray(B)
    struct.pack_into(">h", bad, 21, 5)  # codec id 5
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    send = LazyDownConvertedRecords(MemoryRecords(A + bytes(bad)), 1, 0).to_send()
    assert drive(send, TrickleChannel([1 << 20]))[:71] == A_V1
    assert isinstance(send.error, UnknownCompressionError)


def test_corrupt_first_batch_fails_construction() -> None:
    bad = bytearray(A)
    struct.pack_into(">i", bad, 57, 9)
    with pytest.raises(InvalidRecordError):
        LazyDownConvertedRecords(MemoryRecords(bytes(bad)), 0, 0)
