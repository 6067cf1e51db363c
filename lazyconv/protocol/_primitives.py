"""Kafka wire primitives: a byte writer and a bounds-checked reader (sans-IO).

Encodings follow docs/guide/fetch-response.md: big-endian fixed-width integers, 16-byte UUIDs, unsigned
varints (7 bits per byte, little-endian groups, no zig-zag), strings and byte arrays with
int16/int32 length prefixes (classic) or ``uvarint(length + 1)`` (compact, used by flexible
versions), arrays likewise, and tagged-field sections. Fetch and the other APIs here never carry
signed (zig-zag) varints outside record batches; those live in :mod:`lazyconv.records._codec`.

Every decoding error raises :class:`~lazyconv.errors.ProtocolError` carrying the byte position
(relative to the start of the buffer given to :class:`Reader`) where the bad value starts.
"""

from __future__ import annotations

import struct
import uuid

from lazyconv.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "MAX_STRING_BYTES",
    "Writer",
    "Reader",
    "encode_uvarint",
    "uvarint_size",
    "MAX_UVARINT32",
    "MAX_UVARINT64",
    "length_prefix_size",
]

#: The longest (non-compact) Kafka string, in bytes of UTF-8: its length is an int16.
MAX_STRING_BYTES = 0x7FFF

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# An unsigned 32-bit varint takes at most 5 bytes, a 64-bit one at most 10.
MAX_UVARINT32 = 0xFFFFFFFF
MAX_UVARINT64 = 0xFFFFFFFFFFFFFFFF
_MAX_VARINT_BYTES = {32: 5, 64: 10}


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative integer (< 2**64) as an unsigned varint."""
    if value < 0 or value > MAX_UVARINT64:
        raise LocalProtocolError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uvarint_size(value: int) -> int:
    """Number of bytes :func:`encode_uvarint` produces for ``value``."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


class Writer:
    """Appends Kafka primitives to a growing ``bytearray`` (``.buffer``)."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def __len__(self) -> int:
        return len(self.buffer)

    def getvalue(self) -> bytes:
        return bytes(self.buffer)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buffer += data

    def int8(self, value: int) -> None:
        self._pack(_I8, value, "int8")

    def int16(self, value: int) -> None:
        self._pack(_I16, value, "int16")

    def uint16(self, value: int) -> None:
        self._pack(_U16, value, "uint16")

    def int32(self, value: int) -> None:
        self._pack(_I32, value, "int32")

    def uint32(self, value: int) -> None:
        self._pack(_U32, value, "uint32")

    def int64(self, value: int) -> None:
        self._pack(_I64, value, "int64")

    def float64(self, value: float) -> None:
        self.buffer += _F64.pack(value)

    def boolean(self, value: bool) -> None:
        self.buffer.append(1 if value else 0)

    def _pack(self, packer: struct.Struct, value: int, name: str) -> None:
        try:
            self.buffer += packer.pack(value)
        except struct.error:
            raise LocalProtocolError(f"{name} out of range: {value!r}") from None

    def uvarint(self, value: int) -> None:
        self.buffer += encode_uvarint(value)

    def uuid(self, value: uuid.UUID | bytes) -> None:
        data = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        if len(data) != 16:
            raise LocalProtocolError(f"a uuid is 16 bytes, got {len(data)}")
        self.buffer += data

    def string(self, value: str | None, *, compact: bool, nullable: bool = False) -> None:
        """A (nullable) string: int16 length (−1 = null) or compact ``uvarint(length + 1)``."""
        if value is None:
            if not nullable:
                raise LocalProtocolError("null given for a non-nullable string")
            if compact:
                self.buffer.append(0)
            else:
                self.buffer += _I16.pack(-1)
            return
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from os.fsdecode / argv
            raise LocalProtocolError(f"string is not encodable as UTF-8: {exc.reason}") from None
        except AttributeError:  # not a str: bytes, an int (the schema's own check says the same)
            raise LocalProtocolError(f"string expected, got {value!r:.40}") from None
        if len(data) > MAX_STRING_BYTES:
            raise LocalProtocolError(f"string of {len(data)} bytes is longer than {MAX_STRING_BYTES}")
        if compact:
            self.uvarint(len(data) + 1)
        else:
            self.buffer += _I16.pack(len(data))
        self.buffer += data

    def bytes_(self, value: bytes | bytearray | memoryview | None, *, compact: bool,
               nullable: bool = False) -> None:
        """(Nullable) bytes: int32 length (−1 = null) or compact ``uvarint(length + 1)``."""
        if value is None:
            if not nullable:
                raise LocalProtocolError("null given for non-nullable bytes")
            self.length_prefix(None, compact=compact)
            return
        try:
            view = memoryview(value)
        except TypeError:
            raise LocalProtocolError(f"bytes expected, got {type(value).__name__}") from None
        # Counted in bytes: len() of a view of wider items (an array('i')) counts items.
        data = view.cast("B") if view.c_contiguous else view.tobytes()
        self.length_prefix(len(data), compact=compact)
        self.buffer += data

    def length_prefix(self, length: int | None, *, compact: bool) -> None:
        """The prefix of bytes/records/arrays: int32 (−1 = null) or compact uvarint(n + 1)."""
        if compact:
            self.uvarint(0 if length is None else length + 1)
        else:
            self.int32(-1 if length is None else length)


def length_prefix_size(length: int | None, *, compact: bool) -> int:
    """Size in bytes of :meth:`Writer.length_prefix` for ``length``."""
    if not compact:
        return 4
    return uvarint_size(0 if length is None else length + 1)


class Reader:
    """Reads Kafka primitives from a buffer; every overrun raises a positioned ProtocolError."""

    __slots__ = ("view", "pos", "base", "records_as_views")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, *, base: int = 0,
                 records_as_views: bool = False) -> None:
        try:
            self.view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        except (TypeError, ValueError) as exc:  # None, a str, a released buffer: not bytes to read
            raise LocalProtocolError(f"bytes to decode expected, got {type(data).__name__}: {exc}") from None
        self.pos = pos
        # Added to positions in error messages, for readers over a sub-buffer of a message.
        self.base = base
        # Records fields decode as memoryviews into ``data`` (no copy) instead of bytes: for a
        # relay that passes them on while ``data`` lives.
        self.records_as_views = records_as_views

    @property
    def remaining(self) -> int:
        return len(self.view) - self.pos

    def error(self, message: str, position: int | None = None) -> ProtocolError:
        return RemoteProtocolError(message, self.base + (self.pos if position is None else position))

    def _take(self, n: int, what: str) -> memoryview:
        if n < 0:
            raise self.error(f"negative length {n} for {what}")
        end = self.pos + n
        if end > len(self.view):
            raise self.error(
                f"{what} needs {n} bytes but only {len(self.view) - self.pos} remain"
            )
        chunk = self.view[self.pos : end]
        self.pos = end
        return chunk

    def raw(self, n: int, what: str = "raw bytes") -> bytes:
        return bytes(self._take(n, what))

    def _unpack(self, packer: struct.Struct, what: str) -> int:
        start = self.pos
        end = start + packer.size
        if end > len(self.view):
            raise self.error(f"{what} needs {packer.size} bytes but only {len(self.view) - start} remain")
        self.pos = end
        return packer.unpack_from(self.view, start)[0]

    def int8(self, what: str = "int8") -> int:
        return self._unpack(_I8, what)

    def int16(self, what: str = "int16") -> int:
        return self._unpack(_I16, what)

    def uint16(self, what: str = "uint16") -> int:
        return self._unpack(_U16, what)

    def int32(self, what: str = "int32") -> int:
        return self._unpack(_I32, what)

    def uint32(self, what: str = "uint32") -> int:
        return self._unpack(_U32, what)

    def int64(self, what: str = "int64") -> int:
        return self._unpack(_I64, what)

    def float64(self, what: str = "float64") -> float:
        start = self.pos
        if start + 8 > len(self.view):
            raise self.error(f"{what} needs 8 bytes but only {len(self.view) - start} remain")
        self.pos += 8
        return _F64.unpack_from(self.view, start)[0]

    def boolean(self, what: str = "boolean") -> bool:
        return self.int8(what) != 0

    def uuid(self, what: str = "uuid") -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16, what)))

    def uvarint(self, what: str = "unsigned varint", bits: int = 32) -> int:
        """An unsigned varint of at most ``bits`` bits (5 bytes for 32, 10 for 64)."""
        start = self.pos
        max_bytes = _MAX_VARINT_BYTES[bits]
        view = self.view
        value = 0
        shift = 0
        for i in range(max_bytes):
            at = start + i
            if at >= len(view):
                raise self.error(f"{what} is truncated after {i} bytes", start)
            byte = view[at]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value >> bits:
                    raise self.error(f"{what} does not fit in {bits} bits", start)
                self.pos = at + 1
                return value
            shift += 7
        raise self.error(f"{what} is longer than {max_bytes} bytes", start)

    def length_prefix(self, what: str, *, compact: bool) -> int | None:
        """Length of bytes/records/arrays; ``None`` for null."""
        start = self.pos
        if compact:
            n = self.uvarint(f"length of {what}")
            if n == 0:
                return None
            n -= 1
        else:
            n = self.int32(f"length of {what}")
            if n == -1:
                return None
            if n < 0:
                raise self.error(f"invalid length {n} for {what}", start)
        return n

    def string(self, what: str = "string", *, compact: bool, nullable: bool = False) -> str | None:
        start = self.pos
        if compact:
            n = self.uvarint(f"length of {what}")
            if n == 0:
                length = -1
            else:
                length = n - 1
                if length > 0x7FFF:
                    raise self.error(f"{what} length {length} exceeds 32767", start)
        else:
            length = self.int16(f"length of {what}")
        if length == -1:
            if not nullable:
                raise self.error(f"{what} is null but is not nullable", start)
            return None
        if length < 0:
            raise self.error(f"invalid length {length} for {what}", start)
        data = self._take(length, what)
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{what} is not valid UTF-8: {exc.reason}", start) from None

    def bytes_(self, what: str = "bytes", *, compact: bool, nullable: bool = False) -> bytes | None:
        view = self.bytes_view(what, compact=compact, nullable=nullable)
        return None if view is None else bytes(view)

    def bytes_view(self, what: str = "bytes", *, compact: bool,
                   nullable: bool = False) -> memoryview | None:
        """A length-prefixed byte string as a view into the buffer (no copy)."""
        start = self.pos
        n = self.length_prefix(what, compact=compact)
        if n is None:
            if not nullable:
                raise self.error(f"{what} is null but is not nullable", start)
            return None
        return self._take(n, what)

    def array_length(self, what: str, *, compact: bool, nullable: bool = False) -> int | None:
        start = self.pos
        n = self.length_prefix(what, compact=compact)
        if n is None and not nullable:
            raise self.error(f"{what} is null but is not nullable", start)
        # Every element takes at least one byte: a count beyond the remaining bytes is corrupt
        # and must not drive a huge allocation or a long loop.
        if n is not None and n > self.remaining:
            raise self.error(f"{what} claims {n} elements but only {self.remaining} bytes remain", start)
        return n
