"""Kafka's compression framing (docs/guide/records.md): vectors, round trips, interop, bombs."""

from __future__ import annotations

import gzip
import random
import struct
import time
import tracemalloc
import zlib

import cramjam
import kafka.codec
import lz4.block
import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import (
    CompressionError,
    ConfigurationError,
    DecompressionBombError,
    DecompressionError,
    LazyconvError,
    UnknownCompressionError,
    UnknownMagicError,
    UnsupportedCompressionError,
)
from lazyconv.records._compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    check_codec_allowed,
    codec_allowed,
    compress,
    compression_from_id,
    compression_name,
    decompress,
    lz4_frame_header,
)

HELLO = b"hello hello hello kafka"
CODEC_MAGICS = [
    (codec, magic)
    for codec in Compression
    for magic in (0, 1, 2)
    if not (codec == Compression.ZSTD and magic < 2)
]
COMPRESSED_CODEC_MAGICS = [(c, m) for c, m in CODEC_MAGICS if c != Compression.NONE]


def _lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    """Split one of our (FLG 0x60) lz4 frames into (stored_raw, block bytes); check the end mark."""
    pos, blocks = 7, []
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        if size == 0:
            assert pos + 4 == len(frame)
            return blocks
        raw = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        blocks.append((raw, frame[pos + 4 : pos + 4 + size]))
        pos += 4 + size


# ---------------------------------------------------------------------------------------------
# Codec ids and the magic rule


def test_codec_ids_and_names() -> None:
    assert [int(c) for c in Compression] == [0, 1, 2, 3, 4]
    assert [compression_name(c) for c in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]
    for bad in (5, 6, 7, -1, 8):
        with pytest.raises(UnknownCompressionError):
            compression_from_id(bad)
        with pytest.raises(UnknownCompressionError):
            decompress(bad, b"x", 2)
        with pytest.raises(UnknownCompressionError):
            compress(bad, b"x", 2)
    with pytest.raises(UnknownCompressionError) as info:
        compression_from_id(6, position=21)
    assert info.value.position == 21


def test_zstd_needs_magic_2() -> None:
    assert codec_allowed(Compression.ZSTD, 2)
    for magic in (0, 1):
        assert not codec_allowed(Compression.ZSTD, magic)
        assert all(codec_allowed(c, magic) for c in range(4))
        with pytest.raises(UnsupportedCompressionError, match="magic 2"):
            compress(Compression.ZSTD, b"abc", magic)
        with pytest.raises(UnsupportedCompressionError):
            decompress(Compression.ZSTD, compress(Compression.ZSTD, b"abc", 2), magic)
    assert not codec_allowed(Compression.GZIP, 3)
    with pytest.raises(UnknownMagicError):
        check_codec_allowed(Compression.GZIP, 3)
    assert check_codec_allowed(4, 2) is Compression.ZSTD


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_levels_follow_kafka_ranges() -> None:
    for codec, level in [(1, 0), (1, 10), (3, 0), (3, 18), (4, 23)]:
        with pytest.raises(ConfigurationError):
            compress(codec, HELLO, 2, level=level)
    for codec in (Compression.NONE, Compression.SNAPPY):
        with pytest.raises(ConfigurationError):
            compress(codec, HELLO, 2, level=1)
    data = bytes(range(256)) * 600
    for codec, level in [(1, -1), (1, 1), (1, 9), (3, 1), (3, 12), (3, 17), (4, -5), (4, 19)]:
        assert decompress(codec, compress(codec, data, 2, level=level), 2) == data
    # gzip -1 is zlib's default (6); lz4 9 is the default (fast) compressor, others use HC
    assert compress(1, data, 2, level=-1) == compress(1, data, 2) == compress(1, data, 2, level=6)
    assert compress(3, data, 2, level=9) == compress(3, data, 2)
    rng = random.Random(3)
    text = b" ".join(
        rng.choice([b"kafka", b"record", b"batch", b"lazy", b"convert"]) for _ in range(20000)
    )
    assert compress(3, text, 2, level=12) != compress(3, text, 2)
    assert decompress(3, compress(3, text, 2, level=12), 2) == text


# ---------------------------------------------------------------------------------------------
# Spec vectors


def test_gzip_spec_example_byte_exact() -> None:
    expected = "1f8b08000000000000ff cb48cdc9c957c84022b313d3b21301 728291e0 17000000"
    assert compress(Compression.GZIP, HELLO, 2) == bytes.fromhex(expected.replace(" ", ""))
    assert decompress(Compression.GZIP, bytes.fromhex(expected.replace(" ", "")), 0) == HELLO


def test_snappy_spec_example_byte_exact() -> None:
    expected = bytes.fromhex(
        "82534e4150505900 00000001 00000001 00000011 171468656c6c6f202e0600106b61666b61".replace(
            " ", ""
        )
    )
    assert compress(Compression.SNAPPY, HELLO, 1) == expected
    assert decompress(Compression.SNAPPY, expected, 1) == HELLO
    assert compress(Compression.SNAPPY, b"", 2) == expected[:16]
    assert decompress(Compression.SNAPPY, expected[:16], 2) == b""


def test_lz4_empty_and_header_vectors() -> None:
    assert compress(Compression.LZ4, b"", 0) == bytes.fromhex("04224d1860401a00000000")
    for magic in (1, 2):
        assert compress(Compression.LZ4, b"", magic) == bytes.fromhex("04224d1860408200000000")
    assert lz4_frame_header(0) == bytes.fromhex("04224d1860401a")
    assert lz4_frame_header(2) == bytes.fromhex("04224d18604082")
    for magic in (0, 1, 2):
        stream = compress(Compression.LZ4, HELLO, magic)
        assert stream.startswith(lz4_frame_header(magic))
        assert decompress(Compression.LZ4, stream, magic) == HELLO
        assert decompress(Compression.LZ4, compress(Compression.LZ4, b"", magic), magic) == b""


def test_lz4_v0_checksum_vector_from_kafka() -> None:
    """MemoryRecordsTest.testChecksum: our v0 frame around lz4-java's block gives Kafka's CRC."""
    block = bytes.fromhex(
        "16000100511875f0f41d0f00e0046b6579310000000676616c75650a0000020011012400301bc3a60d"
        "00012400b0320000000676616c756532"
    )
    frame = lz4_frame_header(0) + struct.pack("<I", len(block)) + block + bytes(4)
    # wrapper message from the magic byte on: magic 0, attributes 3 (lz4), null key, value
    wrapper_body = bytes([0, 3]) + b"\xff\xff\xff\xff" + struct.pack(">i", len(frame)) + frame
    assert zlib.crc32(wrapper_body) == 66944826
    inner = decompress(Compression.LZ4, frame, 0)
    # two v0 messages, absolute offsets 0 and 1, keys/values as in the Java test
    assert inner[:8] == bytes(8) and inner[36 : 36 + 8] == struct.pack(">q", 1)
    assert b"key1" in inner and b"value1" in inner and inner.endswith(b"value2")
    assert len(inner) == 2 * (12 + 4 + 1 + 1 + 4 + 4 + 4 + 6)


def test_zstd_frame_has_no_content_size() -> None:
    stream = compress(Compression.ZSTD, HELLO, 2)
    assert stream.startswith(bytes.fromhex("28b52ffd0058"))
    params = zstandard.get_frame_parameters(stream)
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert not params.has_checksum
    # the same bytes as a plain streaming compressor at level 3 (what zstd-jni writes)
    stream_compressor = zstandard.ZstdCompressor(level=3).compressobj()
    assert stream == stream_compressor.compress(HELLO) + stream_compressor.flush()


# ---------------------------------------------------------------------------------------------
# Framing of multi-block inputs


def test_lz4_independent_64k_blocks_and_stored_raw() -> None:
    rng = random.Random(7)
    incompressible = rng.randbytes(70_000)
    compressible = b"abcdefgh" * 20_000  # 160 000 bytes: three blocks
    for data, raw_expected in ((incompressible, True), (compressible, False)):
        stream = compress(Compression.LZ4, data, 2)
        blocks = _lz4_blocks(stream)
        assert len(blocks) == -(-len(data) // 65536)
        rebuilt = b""
        for index, (raw, block) in enumerate(blocks):
            piece = data[index * 65536 : (index + 1) * 65536]
            assert raw == raw_expected
            # every block decodes on its own: independent blocks, as Kafka requires
            rebuilt += block if raw else lz4.block.decompress(block, uncompressed_size=65536)
            assert len(rebuilt) == min(len(data), (index + 1) * 65536)
            assert piece == rebuilt[index * 65536 :]
        assert rebuilt == data
        assert decompress(Compression.LZ4, stream, 2) == data


def test_snappy_32k_chunks() -> None:
    data = bytes(range(256)) * 300  # 76 800 bytes: chunks of 32768, 32768, 11264
    stream = compress(Compression.SNAPPY, data, 2)
    pos, sizes = 16, []
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        sizes.append(len(bytes(cramjam.snappy.decompress_raw(stream[pos + 4 : pos + 4 + length]))))
        pos += 4 + length
    assert sizes == [32768, 32768, 11264]


# ---------------------------------------------------------------------------------------------
# Round trips (hypothesis)

_payloads = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=40), st.integers(1, 5000)),
)


@settings(max_examples=60)
@given(
    codec_magic=st.sampled_from(CODEC_MAGICS),
    data=_payloads,
    as_view=st.booleans(),
)
def test_round_trip(codec_magic: tuple[int, int], data: bytes, as_view: bool) -> None:
    codec, magic = codec_magic
    source = memoryview(bytearray(data)) if as_view else data
    stream = compress(codec, source, magic)
    assert isinstance(stream, bytes)
    out = decompress(codec, memoryview(stream) if as_view else stream, magic)
    assert out == data
    assert decompress(codec, bytearray(stream), magic, max_size=len(data)) == data
    if len(data) > 0 and codec != Compression.NONE:
        with pytest.raises(DecompressionBombError):
            decompress(codec, stream, magic, max_size=len(data) - 1)


@pytest.mark.parametrize("codec,magic", COMPRESSED_CODEC_MAGICS)
def test_round_trip_larger_than_block_sizes(codec: int, magic: int) -> None:
    data = random.Random(codec * 3 + magic).randbytes(50_000) + bytes(300_000) + b"tail"
    assert decompress(codec, compress(codec, data, magic), magic) == data


# ---------------------------------------------------------------------------------------------
# Interop with kafka-python's codecs, python-lz4 and the system gzip module


class _CramjamSnappy:
    """python-snappy's compress/decompress (raw blocks) over cramjam, for kafka.codec."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


DATASETS = [b"", HELLO, bytes(range(256)) * 500, random.Random(1).randbytes(100_000)]


@pytest.mark.parametrize("data", DATASETS, ids=["empty", "hello", "pattern", "random"])
def test_interop_gzip(data: bytes) -> None:
    assert kafka.codec.gzip_decode(compress(Compression.GZIP, data, 1)) == data
    assert gzip.decompress(compress(Compression.GZIP, data, 2)) == data
    assert decompress(Compression.GZIP, kafka.codec.gzip_encode(data), 1) == data
    assert decompress(Compression.GZIP, gzip.compress(data, mtime=123), 2) == data


@pytest.mark.parametrize("data", DATASETS, ids=["empty", "hello", "pattern", "random"])
def test_interop_snappy(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(kafka.codec, "snappy", _CramjamSnappy)
    monkeypatch.setattr(kafka.codec, "has_snappy", lambda: True)
    ours = compress(Compression.SNAPPY, data, 1)
    if data:  # kafka-python cannot read a header-only (empty) xerial stream; we can
        assert kafka.codec.snappy_decode(ours) == data
    theirs = kafka.codec.snappy_encode(data, xerial_compatible=True)
    assert decompress(Compression.SNAPPY, theirs, 2) == data
    assert theirs == ours  # same framing, same block compressor
    if data:  # a raw, unframed block (python-snappy / cramjam) is accepted too
        raw = bytes(cramjam.snappy.compress_raw(data))
        assert decompress(Compression.SNAPPY, raw, 0) == data
        assert decompress(Compression.SNAPPY, kafka.codec.snappy_encode(data, False), 0) == data


@pytest.mark.parametrize("data", DATASETS, ids=["empty", "hello", "pattern", "random"])
def test_interop_lz4(data: bytes) -> None:
    for magic in (1, 2):
        ours = compress(Compression.LZ4, data, magic)
        assert kafka.codec.lz4_decode(ours) == data
        assert lz4.frame.decompress(ours) == data
        # kafka-python's frames carry a content size (FLG 0x68): accepted
        theirs = kafka.codec.lz4_encode(data)
        assert decompress(Compression.LZ4, theirs, magic) == data
    # magic 0: Kafka's broken header checksum, both directions
    ours_v0 = compress(Compression.LZ4, data, 0)
    assert kafka.codec.lz4_decode_old_kafka(ours_v0) == data
    assert decompress(Compression.LZ4, kafka.codec.lz4_encode_old_kafka(data), 0) == data


def test_lz4_v0_quirk_both_directions() -> None:
    v0 = compress(Compression.LZ4, HELLO, 0)
    v1 = compress(Compression.LZ4, HELLO, 1)
    assert v0[7:] == v1[7:] and v0[6] != v1[6]
    assert v0[6] == (xxhash.xxh32_intdigest(v0[:6]) >> 8) & 0xFF
    assert v1[6] == (xxhash.xxh32_intdigest(v1[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):  # the standard frame reader rejects the quirk
        lz4.frame.decompress(v0)
    # a magic-0 reader skips the check (so both headers are read); a v1/v2 reader enforces it
    assert decompress(Compression.LZ4, v0, 0) == HELLO
    assert decompress(Compression.LZ4, v1, 0) == HELLO
    for magic in (1, 2):
        with pytest.raises(DecompressionError, match="descriptor corrupted") as info:
            decompress(Compression.LZ4, v0, magic)
        assert info.value.position == 6


@pytest.mark.parametrize("data", DATASETS, ids=["empty", "hello", "pattern", "random"])
def test_interop_zstd(data: bytes) -> None:
    ours = compress(Compression.ZSTD, data, 2)
    assert kafka.codec.zstd_decode(ours) == data
    # one-shot frames with a content size and checksums are fine too
    assert decompress(Compression.ZSTD, kafka.codec.zstd_encode(data), 2) == data
    checked = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    assert decompress(Compression.ZSTD, checked, 2) == data


def test_lz4_frame_options_from_python_lz4() -> None:
    data = bytes(range(200)) * 2000
    for block_size, checksum in [
        (lz4.frame.BLOCKSIZE_MAX64KB, False),
        (lz4.frame.BLOCKSIZE_MAX256KB, True),
        (lz4.frame.BLOCKSIZE_MAX1MB, True),
        (lz4.frame.BLOCKSIZE_MAX4MB, False),
    ]:
        stream = lz4.frame.compress(
            data,
            block_size=block_size,
            block_linked=False,
            block_checksum=checksum,
            content_checksum=checksum,
        )
        assert decompress(Compression.LZ4, stream, 2) == data
    with_checksum = bytearray(
        lz4.frame.compress(data, block_linked=False, block_checksum=True, store_size=False)
    )
    (first_block,) = struct.unpack_from("<I", with_checksum, 7)
    with_checksum[7 + 4 + (first_block & 0x7FFFFFFF)] ^= 0xFF  # the block's checksum
    with pytest.raises(DecompressionError, match="block checksum"):
        decompress(Compression.LZ4, bytes(with_checksum), 2)


# ---------------------------------------------------------------------------------------------
# Reader rules (gzip)


def _gzip_member(data: bytes, flags: int = 0, extra: bytes = b"") -> bytes:
    header = bytes([0x1F, 0x8B, 8, flags, 1, 2, 3, 4, 0, 3]) + extra
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (
        header
        + deflater.compress(data)
        + deflater.flush()
        + struct.pack("<II", zlib.crc32(data), len(data))
    )


def test_gzip_optional_header_fields() -> None:
    fextra = struct.pack("<H", 5) + b"abcde"
    assert decompress(1, _gzip_member(HELLO, 0x04, fextra), 2) == HELLO
    assert decompress(1, _gzip_member(HELLO, 0x08, b"name.txt\x00"), 2) == HELLO
    assert decompress(1, _gzip_member(HELLO, 0x10, b"a comment\x00"), 2) == HELLO
    header = bytes([0x1F, 0x8B, 8, 0x1E, 1, 2, 3, 4, 0, 3]) + fextra + b"n\x00c\x00"
    hcrc = struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    all_fields = _gzip_member(HELLO, 0x1E, fextra + b"n\x00c\x00" + hcrc)
    assert decompress(1, all_fields, 2) == HELLO
    bad_hcrc = bytearray(all_fields)
    bad_hcrc[len(header)] ^= 1
    with pytest.raises(DecompressionError, match="header CRC"):
        decompress(1, bytes(bad_hcrc), 2)
    with pytest.raises(DecompressionError, match="FNAME"):
        decompress(1, bytes([0x1F, 0x8B, 8, 0x08, 0, 0, 0, 0, 0, 3]) + b"no terminator", 2)


def test_gzip_concatenated_members_and_trailing_bytes() -> None:
    two = compress(1, b"first ", 2) + _gzip_member(b"second")
    assert decompress(1, two, 2) == b"first second"
    assert decompress(1, two + b"\x00\x01garbage", 2) == b"first second"
    assert decompress(1, two + b"\x1f", 2) == b"first second"
    assert decompress(1, two + b"\x1f\x8b\x07" + bytes(20), 2) == b"first second"


def test_gzip_corruption_is_typed() -> None:
    good = compress(1, HELLO * 10, 2)
    bad_crc = bytearray(good)
    bad_crc[-8] ^= 0xFF
    with pytest.raises(DecompressionError, match="CRC mismatch") as info:
        decompress(1, bytes(bad_crc), 2, position=1000)
    assert info.value.position == 1000 + len(good) - 8
    bad_size = bytearray(good)
    bad_size[-1] ^= 0x01
    with pytest.raises(DecompressionError, match="ISIZE"):
        decompress(1, bytes(bad_size), 2)
    with pytest.raises(DecompressionError, match="bad magic"):
        decompress(1, b"\x1f\x8c" + good[2:], 2)
    with pytest.raises(DecompressionError, match="method"):
        decompress(1, good[:2] + b"\x07" + good[3:], 2)
    with pytest.raises(DecompressionError, match="empty"):
        decompress(1, b"", 2)
    with pytest.raises(DecompressionError, match="corrupt gzip deflate"):
        decompress(1, good[:10] + b"\xff" * 20, 2)
    for cut in range(len(good)):
        with pytest.raises(DecompressionError):
            decompress(1, good[:cut], 2)


# ---------------------------------------------------------------------------------------------
# Reader rules (snappy)

_XERIAL = bytes.fromhex("82534e41505059000000000100000001")


def _xerial_block(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return struct.pack(">i", len(block)) + block


def test_snappy_stream_rules() -> None:
    stream = _XERIAL + _xerial_block(b"abc")
    # concatenated streams
    assert decompress(2, stream + _XERIAL + _xerial_block(b"def"), 2) == b"abcdef"
    # fewer than 4 bytes left: end of stream, leftovers ignored
    assert decompress(2, stream + b"\x00\x01\x02", 2) == b"abc"
    # the 4 magic bytes of a concatenated stream followed by fewer than 12 bytes: error
    with pytest.raises(DecompressionError, match="concatenated"):
        decompress(2, stream + _XERIAL[:10], 2)
    # the 4 magic bytes, 16 bytes, but not the whole magic: end of stream
    assert decompress(2, stream + b"\x82SNAXXXX" + bytes(8) + b"junk", 2) == b"abc"
    # the version ints are not checked
    assert decompress(2, _XERIAL[:8] + b"\x00\x00\x00\x09" * 2 + _xerial_block(b"x"), 2) == b"x"
    with pytest.raises(DecompressionError, match="negative") as info:
        decompress(2, stream + b"\xff\xff\xff\xfe" + b"x" * 8, 2)
    assert info.value.position == len(stream)
    with pytest.raises(DecompressionError, match="512 MiB"):
        decompress(2, stream + struct.pack(">i", 512 * 1024 * 1024 + 1) + b"x", 2)
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(2, stream + struct.pack(">i", 100) + b"x" * 99, 2)
    with pytest.raises(DecompressionError, match="empty"):
        decompress(2, b"", 2)
    with pytest.raises(DecompressionError, match="empty snappy block"):
        decompress(2, stream + bytes(4), 2)
    with pytest.raises(DecompressionError, match="corrupt snappy"):
        decompress(2, _XERIAL + struct.pack(">i", 3) + b"\x05ab", 2)


def test_snappy_official_framing_is_not_understood() -> None:
    framed = bytes(cramjam.snappy.compress(HELLO))  # the official framing format
    assert framed.startswith(bytes.fromhex("ff060000734e61507059"))
    with pytest.raises(DecompressionError):
        decompress(2, framed, 2)


def test_snappy_raw_short_inputs() -> None:
    assert decompress(2, b"\x00", 2) == b""
    assert decompress(2, bytes(cramjam.snappy.compress_raw(b"hi")), 0) == b"hi"
    # 16+ bytes without the magic: one raw block
    raw = bytes(cramjam.snappy.compress_raw(HELLO * 3))
    assert len(raw) >= 16 and decompress(2, raw, 1) == HELLO * 3


# ---------------------------------------------------------------------------------------------
# Reader rules (lz4)


def _lz4_header(flg: int, bd: int, magic: int = 2, content_size: bytes = b"") -> bytes:
    descriptor = bytes([flg, bd]) + content_size
    hashed = b"\x04\x22\x4d\x18" + descriptor if magic == 0 else descriptor
    return b"\x04\x22\x4d\x18" + descriptor + bytes([(xxhash.xxh32_intdigest(hashed) >> 8) & 0xFF])


@pytest.mark.parametrize(
    "flg,bd,message",
    [
        (0x61, 0x40, "reserved"),
        (0x62, 0x40, "reserved"),
        (0x40, 0x40, "dependent"),
        (0xA0, 0x40, "version"),
        (0x20, 0x40, "version"),
        (0x60, 0xC0, "BD reserved"),
        (0x60, 0x41, "BD reserved"),
        (0x60, 0x30, "block size code 3"),
        (0x60, 0x00, "block size code 0"),
    ],
)
def test_lz4_descriptor_rules(flg: int, bd: int, message: str) -> None:
    stream = _lz4_header(flg, bd) + bytes(4)
    for magic in (0, 1, 2):
        with pytest.raises(DecompressionError, match=message):
            decompress(3, stream, magic)


def test_lz4_block_rules() -> None:
    header = _lz4_header(0x60, 0x40)
    assert decompress(3, header + bytes(4) + b"ignored after the end mark", 2) == b""
    stored = header + struct.pack("<I", 3 | 0x80000000) + b"abc" + bytes(4)
    assert decompress(3, stored, 2) == b"abc"
    too_big = header + struct.pack("<I", 65537 | 0x80000000) + bytes(65537) + bytes(4)
    with pytest.raises(DecompressionError, match="exceeds the maximum 65536") as info:
        decompress(3, too_big, 2)
    assert info.value.position == 7
    # 256 KiB blocks are allowed with BD code 5
    big = _lz4_header(0x60, 0x50) + struct.pack("<I", 65537 | 0x80000000) + bytes(65537) + bytes(4)
    assert decompress(3, big, 2) == bytes(65537)
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(3, header + struct.pack("<I", 10) + b"abc", 2)
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(3, stored[:-4], 2)  # no end mark
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(3, b"\x04\x22\x4d\x18\x60", 2)
    with pytest.raises(DecompressionError, match="invalid magic"):
        decompress(3, b"\x04\x22\x4d\x19\x60\x40\x82" + bytes(4), 2)
    with pytest.raises(DecompressionError, match="corrupt lz4 block"):
        decompress(3, header + struct.pack("<I", 4) + b"\xff\xff\xff\xff" + bytes(4), 2)
    # content-size flag: 8 more descriptor bytes, covered by the header checksum for v1/v2
    sized = _lz4_header(0x68, 0x40, content_size=struct.pack("<Q", 3))
    body = struct.pack("<I", 3 | 0x80000000) + b"abc" + bytes(4)
    assert decompress(3, sized + body, 1) == b"abc"
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(3, sized[:10], 1)
    # content-checksum flag: its 4 bytes must follow the end mark (not verified, as Kafka)
    checked = _lz4_header(0x64, 0x40)
    assert decompress(3, checked + body + b"\x01\x02\x03\x04", 2) == b"abc"
    with pytest.raises(DecompressionError, match="content checksum"):
        decompress(3, checked + body, 2)


def test_lz4_v0_header_checksum_is_not_checked_for_magic_0() -> None:
    header = bytearray(_lz4_header(0x60, 0x40, magic=0))
    header[6] ^= 0x55  # neither the correct nor the quirky value
    assert decompress(3, bytes(header) + bytes(4), 0) == b""
    with pytest.raises(DecompressionError, match="descriptor corrupted"):
        decompress(3, bytes(header) + bytes(4), 2)


# ---------------------------------------------------------------------------------------------
# Reader rules (zstd)


def test_zstd_concatenated_and_skippable_frames() -> None:
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"12345"
    first = compress(4, b"first ", 2)
    second = zstandard.ZstdCompressor(write_checksum=True).compress(b"second")
    assert decompress(4, skippable + first + skippable + second + skippable, 2) == b"first second"
    assert decompress(4, compress(4, b"", 2) + first, 2) == b"first "


def test_zstd_corruption_is_typed() -> None:
    good = compress(4, HELLO * 100, 2)
    for cut in range(len(good)):
        with pytest.raises(DecompressionError):
            decompress(4, good[:cut], 2)
    with pytest.raises(DecompressionError, match="not a zstd frame") as info:
        decompress(4, good + b"trailing", 2, position=61)
    assert info.value.position == 61 + len(good)
    with pytest.raises(DecompressionError, match="skippable"):
        decompress(4, struct.pack("<II", 0x184D2A50, 100) + b"x", 2)
    bad_block_type = bytearray(good)
    bad_block_type[6] |= 0x06  # first block header: reserved block type 3
    with pytest.raises(DecompressionError, match="reserved type"):
        decompress(4, bytes(bad_block_type), 2)
    checked = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(HELLO))
    checked[-1] ^= 0x01
    with pytest.raises(DecompressionError, match="corrupt zstd"):
        decompress(4, bytes(checked), 2)


# ---------------------------------------------------------------------------------------------
# Corrupt streams: only lazyconv errors, never a crash or a hang


@settings(max_examples=150)
@given(
    codec_magic=st.sampled_from(COMPRESSED_CODEC_MAGICS),
    data=st.binary(min_size=1, max_size=2000),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
@pytest.mark.slow  # over a second: kept out of the quick look
def test_mutated_streams_raise_only_lazyconv_errors(
    codec_magic: tuple[int, int], data: bytes, flips: list[tuple[int, int]], cut: int | None
) -> None:
    codec, magic = codec_magic
    stream = bytearray(compress(codec, data * 3, magic))
    for where, mask in flips:
        stream[where % len(stream)] ^= mask
    if cut is not None:
        del stream[cut % (len(stream) + 1) :]
    try:
        out = decompress(codec, bytes(stream), magic, max_size=64 * 1024)
    except LazyconvError as exc:
        assert isinstance(exc, CompressionError)
        assert exc.position is None or 0 <= exc.position <= len(stream)
    else:
        assert len(out) <= 64 * 1024


@pytest.mark.parametrize("codec,magic", COMPRESSED_CODEC_MAGICS)
def test_every_truncation_is_an_error_or_a_prefix(codec: int, magic: int) -> None:
    data = bytes(range(256)) * 150
    stream = compress(codec, data, magic)
    for cut in range(0, len(stream), max(1, len(stream) // 200)):
        try:
            out = decompress(codec, stream[:cut], magic)
        except DecompressionError:
            continue
        # only xerial snappy ends quietly (fewer than 4 bytes left = end of stream, as Java)
        assert codec == Compression.SNAPPY and data.startswith(out)


# ---------------------------------------------------------------------------------------------
# Decompression bombs: a small stream that claims or decompresses to 1 GiB stops early, cheaply

GIB = 1 << 30
MIB = 1 << 20


def _gzip_bomb() -> bytes:
    # 1024 concatenated members of 1 MiB of zeros each: 1 GiB for about 1 MiB of input
    member = compress(Compression.GZIP, bytes(MIB), 2)
    return member * 1024


def _snappy_bomb() -> bytes:
    # snappy cannot beat ~21:1, so this one is 128 MiB of zeros (6 MiB of input); the 1 GiB
    # claim of a single block is tested below
    block = _xerial_block(bytes(32 * 1024))
    return _XERIAL + block * (128 * MIB // (32 * 1024))


def _lz4_bomb(magic: int) -> bytes:
    stream = compress(Compression.LZ4, bytes(4 * 65536), magic)
    blocks = stream[7:-4]
    return stream[:7] + blocks * (GIB // (4 * 65536)) + bytes(4)


def _zstd_bomb() -> bytes:
    return compress(Compression.ZSTD, bytes(MIB), 2) * 1024


def _measure(codec: int, stream: bytes, magic: int, max_size: int) -> tuple[float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecompressionBombError) as info:
            decompress(codec, stream, magic, max_size=max_size)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.position is not None and 0 <= info.value.position <= len(stream)
    assert "more than the allowed" in str(info.value)
    return elapsed, peak


@pytest.mark.parametrize(
    "codec,magic,factory",
    [
        (Compression.GZIP, 1, _gzip_bomb),
        (Compression.SNAPPY, 2, _snappy_bomb),
        (Compression.LZ4, 0, lambda: _lz4_bomb(0)),
        (Compression.LZ4, 2, lambda: _lz4_bomb(2)),
        (Compression.ZSTD, 2, _zstd_bomb),
    ],
    ids=["gzip", "snappy", "lz4-v0", "lz4-v2", "zstd"],
)
def test_bombs_stop_at_max_size(codec: int, magic: int, factory) -> None:
    stream = factory()
    assert len(stream) < 64 * MIB  # it really is a small stream for 1 GiB of output
    elapsed, peak = _measure(codec, stream, magic, 8 * MIB)
    # output kept is at most max_size, plus one decoder step (<= 4 MiB) and small overhead
    assert peak < 8 * MIB + 6 * MIB, peak
    assert elapsed < 10  # generous: it stops after ~8 MiB of output, not 1 GiB


def test_snappy_block_claiming_1gib_is_refused_before_allocation() -> None:
    claim = bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b"\x00" * 40  # varint 2**30
    elapsed, peak = _measure(Compression.SNAPPY, claim, 0, DEFAULT_MAX_DECOMPRESSED_SIZE)
    assert peak < MIB
    framed = _XERIAL + struct.pack(">i", len(claim)) + claim
    elapsed, peak = _measure(Compression.SNAPPY, framed, 2, 16 * MIB)
    assert peak < MIB


def test_zstd_frame_claiming_1gib_content_size_is_bounded() -> None:
    # a lying single frame: content size field says 1 GiB, data is an RLE block of 128 KiB
    rle_block = struct.pack("<I", (1 << 0) | (1 << 1) | (128 * 1024 << 3))[:3] + b"\x00"
    frame = (
        struct.pack("<I", 0xFD2FB528)
        + bytes([0x80 | 0x20])  # 4-byte content size, single segment
        + struct.pack("<I", GIB)
        + rle_block
    )
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError):
            decompress(Compression.ZSTD, frame, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB


def test_lz4_bomb_with_default_bound() -> None:
    # 16 MiB of zeros as a 64 KiB-block stream, read with a 1 MiB bound: stops at the first
    # block past the bound
    stream = _lz4_bomb(1)[: 7 + 64 * 300] + bytes(4)
    with pytest.raises(DecompressionBombError):
        decompress(Compression.LZ4, stream, 1, max_size=MIB)
    assert DEFAULT_MAX_DECOMPRESSED_SIZE >= 64 * MIB


# ---------------------------------------------------------------------------------------------
# Streams written by Kafka's Java code (golden cases: lz4-java, snappy-java, zstd-jni, JDK gzip)

_FRAMING_BYTES = {
    Compression.GZIP: 10,
    Compression.SNAPPY: 16,
    Compression.LZ4: 7,
    Compression.ZSTD: 5,
}


def _golden_streams(golden_dir) -> list[tuple[str, int, int, bytes]]:
    """Every compressed stream in the golden .bin files: (where, magic, codec, stream)."""
    streams = []
    for path in sorted(golden_dir.glob("*/*.bin")):
        data = path.read_bytes()
        pos = 0
        while len(data) - pos >= 17:
            size = struct.unpack_from(">i", data, pos + 8)[0]
            magic = data[pos + 16]
            if len(data) - pos < 12 + size:
                break
            entry = data[pos : pos + 12 + size]
            where = f"{path.parent.name}/{path.name}@{pos}"
            if magic == 2:
                codec = struct.unpack_from(">h", entry, 21)[0] & 7
                if codec and struct.unpack_from(">i", entry, 57)[0]:
                    streams.append((where, 2, codec, entry[61:]))
            elif entry[17] & 7:
                field = 18 + (8 if magic == 1 else 0)
                key_length = struct.unpack_from(">i", entry, field)[0]
                field += 4 + max(key_length, 0)
                value_length = struct.unpack_from(">i", entry, field)[0]
                streams.append(
                    (where, magic, entry[17] & 7, entry[field + 4 : field + 4 + value_length])
                )
            pos += 12 + size
    return streams


def test_java_written_streams_decode_and_match_our_framing(golden_dir) -> None:
    streams = _golden_streams(golden_dir)
    seen = {(magic, codec) for _, magic, codec, _ in streams}
    # every codec in every magic that can carry it, including lz4-java's magic-0 quirk
    assert seen == {(m, c) for m in (0, 1, 2) for c in range(1, 5) if c != 4 or m == 2}
    for where, magic, codec, stream in streams:
        payload = decompress(codec, stream, magic)
        ours = compress(codec, payload, magic)
        framing = _FRAMING_BYTES[codec]
        assert ours[:framing] == stream[:framing], where
        assert decompress(codec, ours, magic) == payload, where
        if codec == Compression.GZIP:  # JDK deflate and zlib agree byte for byte
            assert ours == stream, where
        if codec == Compression.LZ4 and magic > 0:
            with pytest.raises(DecompressionError):
                decompress(codec, stream[:6] + bytes([stream[6] ^ 1]) + stream[7:], magic)


def test_gzip_with_the_largest_size_bound_decompresses() -> None:
    """A size bound at or past sys.maxsize is no bound: the one-call path must not overflow."""
    import gzip
    import sys

    from lazyconv.records._compression import decompress as decompress_stream

    data = gzip.compress(b"hello" * 10)
    for bound in (sys.maxsize - 1, sys.maxsize, 1 << 64):
        assert decompress_stream(1, data, 2, bound) == b"hello" * 10
