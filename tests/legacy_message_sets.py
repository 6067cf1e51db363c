"""Magic 0/1 message sets written by hand, for the up-conversion tests (tests/conversion/test_upconvert.py
and tests/kafka/test_upconvert_oracle.py): single messages, compressed wrappers, and the
damage done to them (a flipped byte, a CRC made right again).

Nothing here has a default timestamp: each test module passes its own (they differ: the oracle
writes old timestamps for a broker that never deletes), e.g. ``functools.partial(v1, ts=T)``.
"""

from __future__ import annotations

import struct
import zlib

from lazyconv.records._codec import append_legacy_message
from lazyconv.records._compression import compress
from lazyconv.records._format import LEGACY_ENTRY_CRC_OFFSET, LEGACY_ENTRY_MAGIC_OFFSET

__all__ = ["message", "v0", "v1", "wrapper", "fix_crc", "flip"]

_CRC = struct.Struct(">I")  # a message's CRC-32, of the bytes from its magic to its end


def message(offset: int, timestamp: int, key: bytes | None, value: bytes | None, magic: int,
            attributes: int = 0) -> bytes:
    """One message with log header (``timestamp`` is not written for magic 0)."""
    out = bytearray()
    append_legacy_message(out, offset, timestamp, key, value, magic, attributes)
    return bytes(out)


def v1(offset: int, key: bytes | None = b"k", value: bytes | None = b"v", *, ts: int,
       attrs: int = 0) -> bytes:
    """A magic 1 message."""
    return message(offset, ts, key, value, 1, attrs)


def v0(offset: int, key: bytes | None = b"k", value: bytes | None = b"v", attrs: int = 0) -> bytes:
    """A magic 0 message (no timestamp)."""
    return message(offset, -1, key, value, 0, attrs)


def wrapper(inner: bytes, codec: int, magic: int, offset: int, *, ts: int, extra_attrs: int = 0,
            value: bytes | None = None) -> bytes:
    """A compressed wrapper of the messages ``inner`` (its value ``value`` instead, if given)."""
    payload = compress(codec, inner, magic) if value is None else value
    return message(offset, ts, None, payload, magic, codec | extra_attrs)


def fix_crc(entry: bytes) -> bytes:
    """``entry`` (one message) with its CRC-32 right again for whatever its bytes now are."""
    data = bytearray(entry)
    _CRC.pack_into(data, LEGACY_ENTRY_CRC_OFFSET, zlib.crc32(bytes(data[LEGACY_ENTRY_MAGIC_OFFSET:])))
    return bytes(data)


def flip(entry: bytes, at: int) -> bytes:
    """``entry`` with every bit of byte ``at`` flipped."""
    data = bytearray(entry)
    data[at] ^= 0xFF
    return bytes(data)
