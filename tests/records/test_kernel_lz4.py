"""The kernel's lz4 frame walk (``lz4_frame_blocks``, its own xxHash32) against the reference
frame parser in ``records.compression``: on well-formed Kafka lz4 frames (every block size code,
content size and checksum flags, stored and compressed blocks, magic 0's header-checksum quirk)
and on mutated ones (byte flips, truncation, lying block sizes), decompression with and without
the kernel gives the same bytes or the same error (type, message, position)."""

from __future__ import annotations

import random
import struct
from typing import Any

import lz4.block
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyconv.records._compression as compression
from lazyconv.errors import LazyconvError
from lazyconv.records import _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

LZ4 = 3


def test_xxh32_matches_the_xxhash_package_on_random_lengths_and_seeds() -> None:
    kernel: Any = _impl.kernel_module()
    rng = random.Random(5)
    for n in [*range(40), *(rng.randint(40, 3000) for _ in range(60))]:
        data = rng.randbytes(n)
        offset = rng.randint(0, 7)  # unaligned starts
        buffer = memoryview(rng.randbytes(offset) + data)[offset:]
        seed = rng.choice([0, 1, 0xFFFFFFFF, rng.getrandbits(32)])
        assert kernel.xxh32(buffer, seed) == xxhash.xxh32_intdigest(data, seed)


@st.composite
def frames(draw: st.DrawFn) -> tuple[bytes, int]:
    """A Kafka lz4 frame: random flags, block size code, blocks (compressed or stored)."""
    magic = draw(st.sampled_from([0, 1, 2]))
    code = draw(st.sampled_from([4, 4, 5, 6, 7]))
    content_size = draw(st.booleans())
    content_checksum = draw(st.booleans())
    block_checksum = draw(st.integers(0, 5)) == 0
    flg = 0x60 | (0x08 if content_size else 0) | (0x04 if content_checksum else 0) | (0x10 if block_checksum else 0)
    descriptor = bytes((flg, code << 4)) + (struct.pack("<Q", draw(st.integers(0, 1 << 20))) if content_size else b"")
    hashed = b"\x04\x22\x4d\x18" + descriptor if magic == 0 else descriptor  # KAFKA-3160 for magic 0
    frame = bytearray(b"\x04\x22\x4d\x18" + descriptor + bytes(((xxhash.xxh32_intdigest(hashed) >> 8) & 0xFF,)))
    for _ in range(draw(st.integers(0, 4))):
        piece = draw(st.sampled_from([b"abc" * 50, b"", b"x"])) + draw(st.binary(max_size=60))
        if draw(st.booleans()) and piece:
            block, stored = lz4.block.compress(piece, store_size=False), 0
        else:
            block, stored = piece, 0x80000000
        frame += struct.pack("<I", len(block) | stored) + block
        if block_checksum:
            frame += struct.pack("<I", xxhash.xxh32_intdigest(block))
    frame += b"\x00\x00\x00\x00"
    if content_checksum:
        frame += b"\x11\x22\x33\x44"
    return bytes(frame) + draw(st.binary(max_size=3)), magic


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(draw(st.integers(0, 2))):
        if not data:
            break
        position = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "truncate", "size"]))
        if kind == "flip":
            data[position] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[position:]
        elif position + 4 <= len(data):
            struct.pack_into("<I", data, position, draw(st.integers(0, 0xFFFFFFFF) | st.sampled_from([0, 0x80000000, 65536, 65537])))
    return bytes(data)


def outcome(data: bytes | memoryview, magic: int, max_size: int) -> tuple[Any, ...]:
    try:
        return ("ok", compression.decompress(LZ4, data, magic, max_size, position=100))
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)


def reference(data: bytes | memoryview, magic: int, max_size: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with _impl.using(_impl.REFERENCE):
        return outcome(data, magic, max_size)


@settings(max_examples=150)
@given(frames(), st.data(), st.sampled_from([0, 1, 100, 1 << 20]))
@pytest.mark.slow  # over a second: kept out of the quick look
def test_lz4_frames_decode_as_the_reference(frame: tuple[bytes, int], data: st.DataObject, max_size: int) -> None:
    stream, magic = frame
    with pytest.MonkeyPatch.context() as monkeypatch:
        for candidate in (stream, data.draw(mutated(stream))):
            for as_view in (False, True):
                given_data = memoryview(bytearray(candidate)) if as_view else candidate
                assert outcome(given_data, magic, max_size) == reference(given_data, magic, max_size, monkeypatch)


def test_the_kernel_walks_well_formed_frames_itself() -> None:
    """The fast path is taken (not the reference) for what Kafka writes, magic 0's quirk included."""
    kernel: Any = _impl.kernel_module()
    for magic in (0, 1, 2):
        frame = compression.compress(LZ4, b"value " * 3000, magic)
        walked = kernel.lz4_frame_blocks(frame, magic)
        assert walked is not None and walked[0] == 64 * 1024 and len(walked) == 4
        assert compression.decompress(LZ4, frame, magic) == b"value " * 3000
    v0 = compression.compress(LZ4, b"x" * 100, 0)
    assert kernel.lz4_frame_blocks(v0, 1) is None  # a magic-0 checksum is wrong for magic 1: reference raises
