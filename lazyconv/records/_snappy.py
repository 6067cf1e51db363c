"""Raw snappy compression with Kafka's bytes: the pure-Python twin of the kernel's ``snappy.c``.

Kafka compresses snappy with snappy-java, which bundles Google's snappy 1.1.10. The bytes of a
snappy stream are the encoder's choices, and snappy 1.1.10 chooses differently from the Rust
``snap`` crate (cramjam) for small inputs: it finds a hash table entry from bits 18-31 of
``bytes * 0x1e35a7bd`` masked to the table's size, where ``snap`` (and snappy before 1.1.9)
take the top ``log2(size)`` bits. So a down-converted snappy wrapper compressed with ``snap``
differs from Kafka's, and its size too, by up to a few per cent for one small message; a lazy
send cut at its committed size then holds another number of records than Kafka's.

The two hashes agree when the table is full (16384 entries: a fragment of more than 8 KiB),
so this reference hands such fragments to cramjam's ``snap`` (fast) and compresses smaller ones
itself, step for step as ``snappy.c`` does (its comment names the steps). The kernel compresses
everything in C; both are checked against each other and against snappy-java itself
(tests/records/test_snappy.py).
"""

from __future__ import annotations

import cramjam

from lazyconv.errors import CompressionError
from lazyconv.records._codec import _encode_unsigned  # snappy's length: an unsigned varint

__all__ = ["compress_raw_reference"]

_FRAGMENT = 65536
_MAX_TABLE_BITS = 14
_MIN_TABLE = 256
_MARGIN = 15  # the search stops this far from a fragment's end
_MULTIPLIER = 0x1E35A7BD
_FULL_TABLE_ABOVE = (1 << _MAX_TABLE_BITS) // 2  # a fragment larger than this fills the table
_MAX_LENGTH = 0xFFFFFFFF  # the stream's length preamble is a varint of a uint32


def _literal(out: bytearray, data: bytes, start: int, end: int) -> None:
    length = end - start
    if length <= 0:
        return
    tagged = length - 1
    if tagged < 60:
        out.append(tagged << 2)
    else:
        count = (tagged.bit_length() + 7) // 8
        out.append((59 + count) << 2)
        out += tagged.to_bytes(count, "little")
    out += data[start:end]


def _copy_piece(out: bytearray, offset: int, length: int, short_allowed: bool) -> None:
    if short_allowed and offset < 2048:
        out.append(1 | ((length - 4) << 2) | ((offset >> 8) << 5))
        out.append(offset & 0xFF)
    else:
        out.append(2 | ((length - 1) << 2))
        out += offset.to_bytes(2, "little")


def _copy(out: bytearray, offset: int, length: int) -> None:
    if length < 12:
        _copy_piece(out, offset, length, True)
        return
    while length >= 68:
        _copy_piece(out, offset, 64, False)
        length -= 64
    if length > 64:
        _copy_piece(out, offset, 60, False)
        length -= 60
    _copy_piece(out, offset, length, length < 12)


def _fragment(out: bytearray, data: bytes) -> None:
    """One fragment (at most 64 KiB) with a table of its own, as snappy 1.1.10."""
    size = len(data)
    if size < _MARGIN:
        _literal(out, data, 0, size)
        return
    table_size = _MIN_TABLE
    while table_size < size and table_size < (1 << _MAX_TABLE_BITS):
        table_size <<= 1
    mask = table_size - 1
    shift = 32 - _MAX_TABLE_BITS
    table = [0] * table_size
    words = [int.from_bytes(data[i : i + 4], "little") for i in range(size - 3)]  # bytes at i
    limit = size - _MARGIN
    next_emit = 0
    ip = 1
    while True:
        skip = 32
        following = ip
        while True:  # find a 4-byte match
            ip = following
            step = skip >> 5
            skip += step
            following = ip + step
            if following > limit:
                _literal(out, data, next_emit, size)
                return
            word = words[ip]
            slot = ((word * _MULTIPLIER) & 0xFFFFFFFF) >> shift & mask
            candidate = table[slot]
            table[slot] = ip
            if words[candidate] == word:
                break
        _literal(out, data, next_emit, ip)
        while True:  # copies while the bytes right after one match again
            start = ip
            matched = 4
            while ip + matched < size and data[candidate + matched] == data[ip + matched]:
                matched += 1
            ip += matched
            _copy(out, start - candidate, matched)
            next_emit = ip
            if ip >= limit:
                _literal(out, data, next_emit, size)
                return
            table[((words[ip - 1] * _MULTIPLIER) & 0xFFFFFFFF) >> shift & mask] = ip - 1
            word = words[ip]
            slot = ((word * _MULTIPLIER) & 0xFFFFFFFF) >> shift & mask
            candidate = table[slot]
            table[slot] = ip
            if words[candidate] != word:
                break
        ip += 1


def compress_raw_reference(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as one raw snappy stream, byte for byte as snappy 1.1.10 writes it; more than
    4 GiB - 1 bytes, more than the stream's length preamble can say, is refused with a
    :class:`~lazyconv.errors.CompressionError` before a byte is read (the kernel's twin too)."""
    view = memoryview(data).cast("B")
    if len(view) > _MAX_LENGTH:
        size = len(view)
        view.release()  # the error's traceback does not hold the caller's buffer
        raise CompressionError(f"snappy cannot compress {size} bytes in one raw stream: its length "
                               f"preamble is a uint32 (at most {_MAX_LENGTH} bytes)")
    out = bytearray(_encode_unsigned(len(view)))
    for start in range(0, len(view), _FRAGMENT):
        fragment = bytes(view[start : start + _FRAGMENT])
        if len(fragment) > _FULL_TABLE_ABOVE:  # the hashes agree: snap's bytes are snappy's
            compressed = cramjam.snappy.compress_raw(fragment)  # its own length first
            out += memoryview(compressed)[len(_encode_unsigned(len(fragment))) :]
        else:
            _fragment(out, fragment)
    return bytes(out)
