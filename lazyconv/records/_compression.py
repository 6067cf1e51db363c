"""Kafka's compression codecs: none, gzip, snappy (xerial framing), lz4 (Kafka's frame), zstd.

The compressed stream of a v2 batch (from byte 61) or of a legacy wrapper's value is exactly one
codec stream as written by Kafka's Java classes (docs/guide/records.md). :func:`compress` writes the
framing byte for byte as Java does (the compressed payload inside depends on the library);
:func:`decompress` reads everything the Java readers accept.

Every decoder is bounded: output is produced in steps and the call stops with
:class:`~lazyconv.errors.DecompressionBombError` as soon as it would pass ``max_size``; no buffer is
ever sized from a length field in the input beyond a small per-block maximum. Errors carry the
byte position in the compressed stream (plus ``position``, the caller's offset of that stream).
"""

from __future__ import annotations

import logging
import struct
import sys
import zlib

import cramjam
import lz4.block
import xxhash
import zstandard

from lazyconv.errors import (
    ConfigurationError,
    DecompressionBombError,
    DecompressionError,
    UnknownCompressionError,
    UnknownMagicError,
    UnsupportedCompressionError,
)
from lazyconv.records import _impl
from lazyconv.records._format import Compression

__all__ = [
    "Compression",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "compress",
    "decompress",
    "compression_name",
    "compression_from_id",
    "codec_allowed",
    "check_codec_allowed",
    "lz4_frame_header",
]

log = logging.getLogger(__name__)

#: Default bound on the decompressed size of one compressed batch / wrapper (128 MiB). Kafka's
#: default max.message.bytes is ~1 MiB compressed; 128 MiB leaves room for very compressible data
#: while keeping a lying stream from exhausting memory.
DEFAULT_MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024


_NAMES = {
    Compression.NONE: "none",
    Compression.GZIP: "gzip",
    Compression.SNAPPY: "snappy",
    Compression.LZ4: "lz4",
    Compression.ZSTD: "zstd",
}


_BY_ID: dict[object, Compression] = {member.value: member for member in Compression}
# The members as module constants: ``Compression.X`` is an enum class attribute lookup (about
# 0.2 µs each on CPython 3.11), and the codec dispatch below runs once per batch.
_NONE, _GZIP, _SNAPPY, _LZ4, _ZSTD = (Compression(i) for i in range(5))


def compression_name(codec: int) -> str:
    """Kafka's name of a codec id: ``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``."""
    return _NAMES[compression_from_id(codec)]


def compression_from_id(codec_id: int, position: int | None = None) -> Compression:
    """The :class:`Compression` for a codec id; ids 5..7 (or anything else) are unknown."""
    try:
        return _BY_ID[codec_id]  # what Compression(codec_id) finds, without the enum call
    except (KeyError, TypeError):
        raise UnknownCompressionError(
            f"unknown compression codec id {codec_id} (Kafka defines 0..4)", position
        ) from None


def codec_allowed(codec: int, magic: int) -> bool:
    """Whether ``codec`` may appear in records of ``magic`` (zstd needs magic 2)."""
    if magic not in (0, 1, 2) or codec not in _NAMES:
        return False
    return magic >= 2 or codec != Compression.ZSTD


def check_codec_allowed(codec: int, magic: int, position: int | None = None) -> Compression:
    """Return ``codec`` as a :class:`Compression` if ``magic`` may carry it, else raise.

    Raises :class:`UnknownCompressionError` for ids outside 0..4, :class:`UnknownMagicError` for a
    magic outside 0..2 and :class:`UnsupportedCompressionError` for zstd below magic 2.
    """
    compression = compression_from_id(codec, position)
    if magic not in (0, 1, 2):
        raise UnknownMagicError(f"unknown magic {magic} (expected 0, 1 or 2)", position)
    if compression == _ZSTD and magic < 2:
        raise UnsupportedCompressionError(
            f"zstd compression needs magic 2 (records with magic {magic} cannot carry it)", position
        )
    return compression


# (codec, magic) pairs that may appear, to their Compression: the per-call check in one lookup;
# anything else goes through check_codec_allowed, which raises the error.
_ALLOWED: dict[tuple[object, object], Compression] = {
    (codec.value, magic): codec for codec in Compression for magic in (0, 1, 2)
    if codec_allowed(codec.value, magic)
}


# ---------------------------------------------------------------------------------------------
# Levels (Kafka's GzipCompression / Lz4Compression / ZstdCompression ranges and defaults)

_GZIP_DEFAULT_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION (-1) means zlib's 6
_LZ4_DEFAULT_LEVEL = 9  # 9 selects lz4-java's fast compressor, anything else LZ4-HC
_LZ4_HC_MAX_LEVEL = 12  # liblz4 clamps higher HC levels to 12 (lz4-java accepts up to 17)
_ZSTD_DEFAULT_LEVEL = 3
_LEVEL_RANGES = {
    Compression.GZIP: (1, 9),
    Compression.LZ4: (1, 17),
    Compression.ZSTD: (-131072, 22),
}


def _resolve_level(codec: Compression, level: int | None) -> int | None:
    if level is None:
        return None
    if not isinstance(level, int):
        raise ConfigurationError(f"a compression level must be an int or None, got {level!r:.40}")
    if codec == Compression.GZIP and level == -1:
        return _GZIP_DEFAULT_LEVEL
    bounds = _LEVEL_RANGES.get(codec)
    if bounds is None:
        raise ConfigurationError(f"compression {_NAMES[codec]} takes no level (got {level})")
    low, high = bounds
    if not low <= level <= high:
        raise ConfigurationError(
            f"{_NAMES[codec]} compression level {level} outside Kafka's range {low}..{high}"
        )
    return level


# ---------------------------------------------------------------------------------------------
# Public entry points


def compress(
    codec: int, data: bytes | bytearray | memoryview, magic: int, level: int | None = None
) -> bytes:
    """Compress ``data`` into one codec stream framed exactly as Kafka's Java writer frames it.

    ``level`` is Kafka's ``compression.<codec>.level`` (``None`` = Kafka's default: gzip 6, lz4 9,
    zstd 3). ``magic`` matters for lz4 (the v0 header checksum quirk) and zstd (magic 2 only).
    """
    compression = _ALLOWED.get((codec, magic))
    if compression is None:
        compression = check_codec_allowed(codec, magic)
    resolved = _resolve_level(compression, level)
    if compression == _NONE:
        return bytes(data)
    if compression == _GZIP:
        return _gzip_compress(data, _GZIP_DEFAULT_LEVEL if resolved is None else resolved)
    if compression == _SNAPPY:
        return _snappy_compress(data)
    if compression == _LZ4:
        return _lz4_compress(data, magic, _LZ4_DEFAULT_LEVEL if resolved is None else resolved)
    return _zstd_compress(data, _ZSTD_DEFAULT_LEVEL if resolved is None else resolved)


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    magic: int,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    position: int = 0,
) -> bytes:
    """Decompress one Kafka codec stream; at most ``max_size`` bytes of output.

    ``position`` is where ``data`` starts in the caller's bytes; error positions are reported
    relative to that (``position + offset within the stream``).

    Raises :class:`DecompressionBombError` once the output would pass ``max_size``,
    :class:`DecompressionError` for a stream that does not decode,
    :class:`UnsupportedCompressionError` for zstd with magic < 2 and
    :class:`UnknownCompressionError` for codec ids 5..7.
    """
    compression = _ALLOWED.get((codec, magic))
    if compression is None:
        compression = check_codec_allowed(codec, magic, position)
    if max_size < 0:
        raise ConfigurationError(f"max_size must be >= 0, got {max_size}")
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    if compression == _NONE:
        return bytes(view)
    if compression == _GZIP:
        return _gzip_decompress(view, max_size, position)
    if compression == _SNAPPY:
        return _snappy_decompress(view, max_size, position)
    if compression == _LZ4:
        return _lz4_decompress(view, magic, max_size, position)
    return _zstd_decompress(view, max_size, position)


class _Output:
    """Collects decompressed pieces, enforcing the size bound before each piece is kept."""

    __slots__ = ("pieces", "size", "max_size", "codec")

    def __init__(self, max_size: int, codec: str) -> None:
        self.pieces: list[bytes] = []
        self.size = 0
        self.max_size = max_size
        self.codec = codec

    @property
    def room(self) -> int:
        return self.max_size - self.size

    def check(self, more: int, position: int) -> None:
        if self.size + more > self.max_size:
            raise DecompressionBombError(
                f"{self.codec} data decompresses to more than the allowed {self.max_size} bytes",
                position,
            )

    def add(self, piece: bytes, position: int) -> None:
        self.check(len(piece), position)
        if piece:
            self.pieces.append(piece)
            self.size += len(piece)

    def result(self) -> bytes:
        if len(self.pieces) == 1:
            return self.pieces[0]
        return b"".join(self.pieces)


# ---------------------------------------------------------------------------------------------
# gzip

_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")  # no flags, MTIME 0, XFL 0, OS 255 (JDK >= 16)
_GZIP_FHCRC, _GZIP_FEXTRA, _GZIP_FNAME, _GZIP_FCOMMENT = 0x02, 0x04, 0x08, 0x10
_INPUT_STEP = 64 * 1024  # compressed bytes handed to a decoder per call
_OUTPUT_STEP = 256 * 1024  # decompressed bytes asked of a decoder per call


def _gzip_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    # zlib writes the whole member (deflate data, CRC-32, ISIZE); only its 10-byte header
    # differs from Java's (zlib writes XFL by level and OS 3), so Java's replaces it.
    # (zlib.compress takes wbits only from Python 3.11 on.)
    deflater = zlib.compressobj(level, zlib.DEFLATED, 31)
    member = deflater.compress(data) + deflater.flush()
    return _GZIP_HEADER + memoryview(member)[10:]


def _gzip_header_end(data: bytes | memoryview, start: int, base: int) -> int:
    """Parse a gzip member header at ``start``; return where the deflate data begins."""
    end = len(data)

    def need(pos: int, count: int, what: str) -> None:
        if pos + count > end:
            raise DecompressionError(f"gzip header truncated in {what}", base + pos)

    need(start, 10, "the fixed header")
    if data[start] != 0x1F or data[start + 1] != 0x8B:
        raise DecompressionError("not a gzip stream (bad magic)", base + start)
    if data[start + 2] != 8:
        raise DecompressionError(
            f"unsupported gzip compression method {data[start + 2]} (expected 8)", base + start + 2
        )
    flags = data[start + 3]
    pos = start + 10
    if flags & _GZIP_FEXTRA:
        need(pos, 2, "the FEXTRA length")
        extra_len = data[pos] | (data[pos + 1] << 8)
        need(pos + 2, extra_len, "the FEXTRA field")
        pos += 2 + extra_len
    for flag, what in ((_GZIP_FNAME, "FNAME"), (_GZIP_FCOMMENT, "FCOMMENT")):
        if flags & flag:
            zero = _find_zero(data, pos)
            if zero < 0:
                raise DecompressionError(f"gzip header truncated in the {what} field", base + end)
            pos = zero + 1
    if flags & _GZIP_FHCRC:
        need(pos, 2, "the header CRC")
        expected = data[pos] | (data[pos + 1] << 8)
        actual = zlib.crc32(data[start:pos]) & 0xFFFF
        if expected != actual:
            raise DecompressionError(
                f"gzip header CRC mismatch (stored {expected:#06x}, computed {actual:#06x})",
                base + pos,
            )
        pos += 2
    return pos


def _find_zero(data: bytes | memoryview, pos: int) -> int:
    if isinstance(data, bytes):
        return data.find(b"\x00", pos)
    index = bytes(data[pos:]).find(b"\x00")
    return -1 if index < 0 else pos + index


def _gzip_decompress(data: bytes | memoryview, max_size: int, base: int) -> bytes:
    # The common case in one zlib call: a single member, nothing after it, within max_size
    # (zlib checks the header, the CRC-32 and ISIZE). Anything else, errors included, goes
    # through the member-by-member reader below, which decides and reports.
    inflater = zlib.decompressobj(31)
    try:
        whole = inflater.decompress(data, min(max_size, sys.maxsize - 1) + 1)
    except zlib.error:
        pass
    else:
        if inflater.eof and not inflater.unused_data and len(whole) <= max_size:
            return whole
    out = _Output(max_size, "gzip")
    end = len(data)
    view = memoryview(data)
    pos = 0
    first = True
    while True:
        if first:
            if end == 0:
                raise DecompressionError("empty gzip stream", base)
            pos = _gzip_header_end(data, pos, base)
        else:
            # GZIPInputStream: bytes after a member that do not form a gzip header end the stream.
            try:
                pos = _gzip_header_end(data, pos, base)
            except DecompressionError:
                log.debug("ignoring %d trailing bytes after gzip data", end - pos)
                break
        first = False
        pos = _gzip_member(view, pos, out, base)
        if pos >= end:
            break
    return out.result()


def _gzip_member(view: memoryview, pos: int, out: _Output, base: int) -> int:
    """Inflate one member's deflate data from ``pos``, check its trailer; return the end."""
    end = len(view)
    inflater = zlib.decompressobj(-15)
    crc = 0
    member_size = 0
    fed = pos  # input handed to the inflater so far
    pending: bytes | memoryview = b""
    while not inflater.eof:
        if not pending and fed < end:
            pending = view[fed : fed + _INPUT_STEP]
            fed += len(pending)
        try:
            piece = inflater.decompress(pending, min(_OUTPUT_STEP, out.room + 1))
        except zlib.error as exc:
            raise DecompressionError(
                f"corrupt gzip deflate data: {exc}", base + fed - len(pending)
            ) from None
        pending = inflater.unconsumed_tail
        if not piece and not pending and fed >= end and not inflater.eof:
            raise DecompressionError(
                "gzip stream ended prematurely (deflate data truncated)", base + end
            )
        out.add(piece, base + fed - len(pending))
        crc = zlib.crc32(piece, crc)
        member_size += len(piece)
    trailer = fed - len(inflater.unused_data)
    if trailer + 8 > end:
        raise DecompressionError(
            "gzip stream ended prematurely (trailer truncated)", base + trailer
        )
    stored_crc, stored_size = struct.unpack_from("<II", view, trailer)
    if stored_crc != crc & 0xFFFFFFFF:
        raise DecompressionError(
            f"gzip CRC mismatch (stored {stored_crc:#010x}, computed {crc & 0xFFFFFFFF:#010x})",
            base + trailer,
        )
    if stored_size != member_size & 0xFFFFFFFF:
        raise DecompressionError(
            f"gzip ISIZE mismatch (stored {stored_size}, decompressed {member_size})",
            base + trailer + 4,
        )
    return trailer + 8


# ---------------------------------------------------------------------------------------------
# snappy, xerial framing

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK = 32 * 1024
_XERIAL_MAX_BLOCK = 512 * 1024 * 1024


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_CHUNK):
        # snappy 1.1.10's bytes (snappy-java's, so Kafka's), not snap's: lazyconv.records._snappy
        block = _impl.snappy_compress_raw(view[start : start + _XERIAL_CHUNK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(block: memoryview | bytes, out: _Output, at: int) -> None:
    """Decompress one raw snappy block, refusing it before allocation if it claims too much."""
    if len(block) == 0:
        raise DecompressionError("empty snappy block", at)
    # The block starts with its uncompressed length as an unsigned varint (at most 5 bytes).
    declared = 0
    for index in range(min(5, len(block))):
        byte = block[index]
        declared |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            break
    else:
        raise DecompressionError("snappy block has a malformed length preamble", at)
    if declared > 0xFFFFFFFF:
        raise DecompressionError("snappy block length preamble exceeds 32 bits", at)
    out.check(declared, at)
    try:
        piece = bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"corrupt snappy block: {exc}", at) from None
    out.add(piece, at)


def _snappy_decompress(data: bytes | memoryview, max_size: int, base: int) -> bytes:
    out = _Output(max_size, "snappy")
    end = len(data)
    if end == 0:
        raise DecompressionError("cannot decompress an empty snappy stream", base)
    view = memoryview(data)
    if end < 16 or bytes(view[:8]) != _XERIAL_MAGIC:
        _snappy_block(view, out, base)  # xerial accepts a whole unframed raw block
        return out.result()
    pos = 16  # the version ints are not checked (as SnappyInputStream)
    while end - pos >= 4:  # fewer than 4 bytes left: end of stream, leftovers ignored
        if bytes(view[pos : pos + 4]) == _XERIAL_MAGIC[:4]:
            if end - pos < 16:
                raise DecompressionError(
                    "snappy stream: truncated header of a concatenated stream", base + pos
                )
            if bytes(view[pos : pos + 8]) != _XERIAL_MAGIC:
                break
            pos += 16
            continue
        (length,) = struct.unpack_from(">i", view, pos)
        if length < 0:
            raise DecompressionError(f"snappy stream: negative block length {length}", base + pos)
        if length > _XERIAL_MAX_BLOCK:
            raise DecompressionError(
                f"snappy stream: block length {length} above the 512 MiB maximum", base + pos
            )
        if end - pos - 4 < length:
            raise DecompressionError(
                f"snappy stream ended prematurely: block of {length} bytes, {end - pos - 4} left",
                base + pos,
            )
        _snappy_block(view[pos + 4 : pos + 4 + length], out, base + pos + 4)
        pos += 4 + length
    return out.result()


# ---------------------------------------------------------------------------------------------
# lz4, Kafka's frame subset

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # block max size code 4: 64 KiB
_LZ4_BLOCK = 64 * 1024
_LZ4_STORED = 0x80000000
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_INDEPENDENT = 0x20


def _lz4_header_checksum(descriptor: bytes | memoryview) -> int:
    key = bytes(descriptor)
    checksum = _LZ4_HEADER_CHECKSUMS.get(key)
    if checksum is None:
        checksum = (xxhash.xxh32_intdigest(key, 0) >> 8) & 0xFF
        if len(_LZ4_HEADER_CHECKSUMS) < 256:  # a few descriptors occur in practice
            _LZ4_HEADER_CHECKSUMS[key] = checksum
    return checksum


_LZ4_HEADER_CHECKSUMS: dict[bytes, int] = {}


def lz4_frame_header(magic: int) -> bytes:
    """The 7 bytes every Kafka lz4 stream starts with (magic 0 keeps Kafka's checksum quirk)."""
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    # KAFKA-3160: the magic-0 writer hashed the 4 magic bytes too; old readers expect that.
    hashed = _LZ4_MAGIC + descriptor if magic == 0 else descriptor
    return _LZ4_MAGIC + descriptor + bytes((_lz4_header_checksum(hashed),))


_LZ4_HEADERS = {magic: lz4_frame_header(magic) for magic in (0, 1, 2)}


_LZ4_END_MARK = b"\x00\x00\x00\x00"
_LZ4_BLOCK_SIZE = struct.Struct("<I")


# The fast compressor (Kafka's default level 9) goes through cramjam, not python-lz4: python-lz4's
# block API compresses through LZ4_compress_fast_continue on a fresh stream, which always uses
# liblz4's 32-bit hash table of 4096 entries, while lz4-java's fastCompressor (JNI) calls
# LZ4_compress_default, which uses the 16-bit table of 8192 entries for inputs under 64 KiB + 11
# bytes (every Kafka block). Half the table finds fewer matches: 4-10 % larger output (up to 17 %
# on some data). cramjam's compress_block is LZ4_compress_default and its blocks are byte for byte
# lz4-java's (tests/records/test_lz4_parity.py). The HC levels (python-lz4, LZ4_compress_HC_continue
# on a fresh stream) already equal lz4-java's highCompressor(level).


def _lz4_compress(data: bytes | bytearray | memoryview, magic: int, level: int) -> bytes:
    view = memoryview(data).cast("B")
    if level == _LZ4_DEFAULT_LEVEL:
        return _lz4_fast_frame(data if isinstance(data, bytes) else view, _LZ4_HEADERS[magic])
    parts = [_LZ4_HEADERS[magic]]
    for start in range(0, len(view), _LZ4_BLOCK):
        piece = view[start : start + _LZ4_BLOCK]
        block = lz4.block.compress(
            piece,
            mode="high_compression",
            compression=min(level, _LZ4_HC_MAX_LEVEL),
            store_size=False,
        )
        if len(block) >= len(piece):
            parts.append(_LZ4_BLOCK_SIZE.pack(len(piece) | _LZ4_STORED))
            parts.append(bytes(piece))
        else:
            parts.append(_LZ4_BLOCK_SIZE.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_fast_frame(data: bytes | memoryview, header: bytes) -> bytes:
    """Kafka's frame of ``data`` (bytes or a byte view) with lz4-java's fast compressor; a block
    that does not shrink is stored raw, as Kafka stores it."""
    size = len(data)
    if 0 < size <= _LZ4_BLOCK:  # one block (a batch of at most 64 KiB), the common case
        block = cramjam.lz4.compress_block(data, store_size=False)
        if len(block) < size:
            return b"".join((header, _LZ4_BLOCK_SIZE.pack(len(block)), block, _LZ4_END_MARK))
    # every block compressed in place into one buffer with room for the worst case
    blocks = -(-size // _LZ4_BLOCK)
    out = bytearray(len(header) + blocks * 4 + size + size // 255 + blocks * 16 + 4)
    out[: len(header)] = header
    target = memoryview(out)
    view = memoryview(data)
    pos = len(header)
    compress_block_into = cramjam.lz4.compress_block_into
    for start in range(0, size, _LZ4_BLOCK):
        piece = view[start : start + _LZ4_BLOCK]
        written = compress_block_into(piece, target[pos + 4 :], store_size=False)
        if written >= len(piece):
            _LZ4_BLOCK_SIZE.pack_into(out, pos, len(piece) | _LZ4_STORED)
            target[pos + 4 : pos + 4 + len(piece)] = piece
            written = len(piece)
        else:
            _LZ4_BLOCK_SIZE.pack_into(out, pos, written)
        pos += 4 + written
    target[pos : pos + 4] = _LZ4_END_MARK
    return bytes(target[: pos + 4])


def _lz4_decompress(data: bytes | memoryview, magic: int, max_size: int, base: int) -> bytes:
    # the kernel walks the frame (header, checksum, block sizes, end mark) with the checks
    # below; None: something the walk leaves to this reference code (which raises it), and
    # always in pure Python
    frame = _impl.lz4_frame_blocks(data, magic)
    if frame is not None:
        return _lz4_blocks(data, frame, max_size, base)
    out = _Output(max_size, "lz4")
    view = memoryview(data)
    end = len(view)
    if end < 6:
        raise DecompressionError("lz4 stream ended prematurely (frame header)", base + end)
    if bytes(view[:4]) != _LZ4_MAGIC:
        raise DecompressionError("lz4 stream has an invalid magic", base)
    flg, bd = view[4], view[5]
    if flg & 0x03:
        raise DecompressionError(f"lz4 FLG reserved bits must be 0 (FLG {flg:#04x})", base + 4)
    if not flg & _LZ4_FLG_INDEPENDENT:
        raise DecompressionError("lz4 dependent-block streams are not supported", base + 4)
    if flg >> 6 != 1:
        raise DecompressionError(
            f"lz4 frame version {flg >> 6} is not supported (expected 1)", base + 4
        )
    if bd & 0x8F:
        raise DecompressionError(f"lz4 BD reserved bits must be 0 (BD {bd:#04x})", base + 5)
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
    if block_max is None:
        raise DecompressionError(
            f"lz4 block size code {(bd >> 4) & 0x07} is not supported (4..7)", base + 5
        )
    pos = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        if end < pos + 8:
            raise DecompressionError("lz4 stream ended prematurely (content size)", base + end)
        pos += 8
    if end < pos + 1:
        raise DecompressionError("lz4 stream ended prematurely (header checksum)", base + end)
    if magic >= 1:  # magic 0 frames carry Kafka's broken checksum: not checked (docs/guide/records.md: lz4 with magic 0)
        expected = _lz4_header_checksum(view[4:pos])
        if view[pos] != expected:
            raise DecompressionError(
                "lz4 frame descriptor corrupted (header checksum mismatch)", base + pos
            )
    pos += 1
    block_checksum = bool(flg & _LZ4_FLG_BLOCK_CHECKSUM)
    while True:
        if end - pos < 4:
            raise DecompressionError("lz4 stream ended prematurely (block size)", base + end)
        (size,) = struct.unpack_from("<I", view, pos)
        stored = bool(size & _LZ4_STORED)
        size &= ~_LZ4_STORED
        if size == 0:
            if flg & _LZ4_FLG_CONTENT_CHECKSUM and end - pos - 4 < 4:
                raise DecompressionError(
                    "lz4 stream ended prematurely (content checksum)", base + end
                )
            return out.result()  # anything after the end mark (and content checksum) is ignored
        if size > block_max:
            raise DecompressionError(
                f"lz4 block size {size} exceeds the maximum {block_max}", base + pos
            )
        start = pos + 4
        if end - start < size:
            raise DecompressionError(
                f"lz4 stream ended prematurely (block of {size} bytes, {end - start} left)",
                base + pos,
            )
        block = view[start : start + size]
        if stored:
            out.add(bytes(block), base + start)
        else:
            try:
                # The output buffer is bounded by the frame's block maximum (at most 4 MiB).
                piece = lz4.block.decompress(block, uncompressed_size=block_max)
            except lz4.block.LZ4BlockError as exc:
                raise DecompressionError(f"corrupt lz4 block: {exc}", base + start) from None
            out.add(piece, base + start)
        pos = start + size
        if block_checksum:
            if end - pos < 4:
                raise DecompressionError(
                    "lz4 stream ended prematurely (block checksum)", base + end
                )
            (stored_hash,) = struct.unpack_from("<I", view, pos)
            if stored_hash != xxhash.xxh32_intdigest(block, 0):
                raise DecompressionError("lz4 block checksum mismatch", base + pos)
            pos += 4


def _lz4_blocks(data: bytes | memoryview, frame: tuple[int, ...], max_size: int, base: int) -> bytes:
    """The data of a frame the kernel walked: ``frame`` is ``(block_max, start, size, stored,
    ...)``. Decompresses and bounds the blocks in order as the reference loop does (same
    errors, same positions)."""
    block_max = frame[0]
    view = memoryview(data)
    if len(frame) == 4 and not frame[3]:  # one compressed block: a batch of at most 64 KiB
        start = frame[1]
        try:
            piece = lz4.block.decompress(view[start : start + frame[2]], uncompressed_size=block_max)
        except lz4.block.LZ4BlockError as exc:
            raise DecompressionError(f"corrupt lz4 block: {exc}", base + start) from None
        if len(piece) > max_size:
            _Output(max_size, "lz4").check(len(piece), base + start)
        return piece
    out = _Output(max_size, "lz4")
    for index in range(1, len(frame), 3):
        start, size, stored = frame[index], frame[index + 1], frame[index + 2]
        block = view[start : start + size]
        if stored:
            out.add(bytes(block), base + start)
            continue
        try:
            piece = lz4.block.decompress(block, uncompressed_size=block_max)
        except lz4.block.LZ4BlockError as exc:
            raise DecompressionError(f"corrupt lz4 block: {exc}", base + start) from None
        out.add(piece, base + start)
    return out.result()


# ---------------------------------------------------------------------------------------------
# zstd

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE = 0x184D2A50
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()


def _zstd_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    # The streaming compressor leaves out the content size, as zstd-jni's stream does.
    compressor = zstandard.ZstdCompressor(level=level).compressobj()
    return compressor.compress(data) + compressor.flush()


def _zstd_frame_end(view: memoryview, start: int, base: int) -> tuple[int, bool]:
    """Walk a frame's block headers from ``start``; return (end, is_skippable).

    libzstd's streaming decoder reports a truncated frame as a clean end of input, so the frame
    structure is checked here first (a header per block of at most 128 KiB: cheap).
    """
    end = len(view)

    def need(pos: int, count: int, what: str) -> None:
        if pos + count > end:
            raise DecompressionError(f"zstd stream ended prematurely ({what})", base + end)

    need(start, 4, "frame magic")
    (magic,) = struct.unpack_from("<I", view, start)
    if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE:
        need(start + 4, 4, "skippable frame size")
        (size,) = struct.unpack_from("<I", view, start + 4)
        need(start + 8, size, "skippable frame")
        return start + 8 + size, True
    if magic != _ZSTD_MAGIC:
        raise DecompressionError(f"not a zstd frame (magic {magic:#010x})", base + start)
    pos = start + 4
    need(pos, 1, "frame header")
    descriptor = view[pos]
    if descriptor & 0x08:
        raise DecompressionError("zstd frame header reserved bit set", base + pos)
    single_segment = bool(descriptor & 0x20)
    content_size_bytes = (0, 2, 4, 8)[descriptor >> 6] or (1 if single_segment else 0)
    dict_id_bytes = (0, 1, 2, 4)[descriptor & 0x03]
    header = 1 + (0 if single_segment else 1) + dict_id_bytes + content_size_bytes
    need(pos, header, "frame header")
    pos += header
    while True:
        need(pos, 3, "block header")
        block_header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        last = block_header & 1
        block_type = (block_header >> 1) & 3
        size = block_header >> 3
        if block_type == 3:
            raise DecompressionError("zstd block of reserved type", base + pos)
        pos += 3
        payload = 1 if block_type == 1 else size
        need(pos, payload, "block")
        pos += payload
        if last:
            break
    if descriptor & 0x04:
        need(pos, 4, "content checksum")
        pos += 4
    return pos, False


def _zstd_decompress(data: bytes | memoryview, max_size: int, base: int) -> bytes:
    out = _Output(max_size, "zstd")
    view = memoryview(data)
    end = len(view)
    if end == 0:
        raise DecompressionError("cannot decompress an empty zstd stream", base)
    pos = 0
    while pos < end:
        frame_end, skippable = _zstd_frame_end(view, pos, base)
        if not skippable:
            reader = _ZSTD_DECOMPRESSOR.stream_reader(
                view[pos:frame_end], read_size=_INPUT_STEP, read_across_frames=False
            )
            try:
                while True:
                    piece = reader.read(min(_OUTPUT_STEP, out.room + 1))
                    if not piece:
                        break
                    out.add(piece, base + pos)
            except zstandard.ZstdError as exc:
                raise DecompressionError(f"corrupt zstd frame: {exc}", base + pos) from None
        pos = frame_end
    return out.result()
