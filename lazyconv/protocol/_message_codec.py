"""Encoding and decoding messages: a codec generated per struct and version, the walker for
what it declines.

The generic walker of :mod:`lazyconv.protocol._schema` decides again, for every field of every
message, what the schema fixed once per version: whether the field is present, tagged, nullable,
compact, and which primitive it is. Here those decisions are made once: each (struct, version)
becomes a Python function that reads or writes its fields in order, consecutive fixed-width
integers with one :class:`struct.Struct` (measured: a Fetch v2 request decodes, and a Fetch
response encodes, in under a third of the walker's time; docs/guide/benchmarks.md).

A generated codec does only the common case and answers :data:`FALLBACK` for everything else,
and :func:`encode_message` / :func:`decode_message` then run the walker on the whole message
from the start: every error (so error messages and positions are always the walker's), a tagged
field set (a scalar one only when it differs from its default), a value that is not of its
field's plain type (a Mapping that is not a dict, an array that is not a list or tuple, a
``bool`` or a text UUID, which the walker refuses or converts), keys the struct does not
declare, ``strict`` encoding. The generated code consumes nothing the walker then reads (no
iterator is drawn from); a records object's ``size_in_bytes`` is read again by the walker after
a fallback. What a generated codec returns is what the walker returns for the same message: ``tests/protocol/test_message_codec.py`` compares both on every
version of every API, with random, odd and mutated messages.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lazyconv.protocol._primitives import Reader, encode_uvarint
from lazyconv.protocol._schema import (
    RECORDS,
    ArrayOf,
    EncodedMessage,
    Field,
    RecordsSlot,
    ScalarType,
    Struct,
    default_value,
    is_default,
    records_size,
    walk_decode,
    walk_encode,
)

__all__ = ["FALLBACK", "decode_message", "decoder", "encode_message", "encoder"]

FALLBACK: Any = object()  # "not handled here: use the generic walker"


def encode_message(
    struct_: Struct,
    value: Mapping[str, Any],
    version: int,
    flexible: bool,
    *,
    strict: bool = False,
    allow_records_slots: bool = True,
) -> EncodedMessage:
    """Encode ``value`` as ``struct_`` for ``version`` into bytes parts and records slots (the
    rules: :mod:`lazyconv.protocol._schema`)."""
    if not strict:
        key = (id(struct_), version, flexible, allow_records_slots)
        codec = _ENCODERS.get(key)
        if codec is None:
            codec = _ENCODERS[key] = encoder(struct_, version, flexible, allow_records_slots)
            _KEPT.append(struct_)
        encoded = codec(value)
        if encoded is not FALLBACK:
            return encoded
    return walk_encode(struct_, value, version, flexible, strict=strict,
                       allow_records_slots=allow_records_slots)


def decode_message(struct_: Struct, reader: Reader, version: int, flexible: bool) -> dict[str, Any]:
    """Decode one ``struct_`` for ``version`` from ``reader`` (advancing it)."""
    key = (id(struct_), version, flexible)
    codec = _DECODERS.get(key)
    if codec is None:
        codec = _DECODERS[key] = decoder(struct_, version, flexible)
        _KEPT.append(struct_)
    decoded = codec(reader)
    if decoded is not FALLBACK:
        return decoded
    return walk_decode(struct_, reader, version, flexible)


# Generated codecs by (id(struct), version, flexible[, allow_records_slots]); the structs are kept
# so that an id is never reused. Schemas are module constants: a few hundred codecs at most.
_ENCODERS: dict[tuple[int, int, bool, bool], Callable[[Any], Any]] = {}
_DECODERS: dict[tuple[int, int, bool], Callable[[Any], Any]] = {}
_KEPT: list[Struct] = []

# fixed-width scalars, packed in runs ("int" for short: float64 is one too)
_INT_FORMATS = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
                "float64": "d", "bool": "b"}
_IMMUTABLE = (int, str, bytes, bool, uuid.UUID, type(None))


class _Bail(Exception):
    """Raised inside a generated codec: the walker must do this message. A new one each time:
    one instance raised again and again would chain every raise's traceback onto it, keeping
    each failed message's frames (and the request's buffer) alive for ever."""


_MISSING: Any = object()  # what a generated encoder's value.get() gives for a field left out


def _is_int(value: Any) -> bool:
    """What the walker accepts for an integer field (an int that is not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


class _Source:
    """Python source of one generated function, with the constants it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "FALLBACK": FALLBACK, "_Bail": _Bail, "_MISSING": _MISSING,
            "_encode_uvarint": encode_uvarint, "_UUID": uuid.UUID, "_is_int": _is_int,
            "_records_size": records_size, "_RecordsSlot": RecordsSlot,
            "_EncodedMessage": EncodedMessage,
        }
        self._count = 0

    def var(self, stem: str = "v") -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def const(self, value: Any, stem: str = "K") -> str:
        name = self.var(stem)
        self.names[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def compile(self, name: str) -> Callable[..., Any]:
        code = "\n".join(self.lines)
        namespace = dict(self.names)
        exec(compile(code, f"<lazyconv codec {name}>", "exec"), namespace)  # noqa: S102 - our own source
        function: Callable[..., Any] = namespace[name]
        return function


def _default_expression(src: _Source, f: Field) -> str:
    """An expression for ``default_value(f)``: a constant when immutable, else a fresh one."""
    value = default_value(f)
    if isinstance(value, _IMMUTABLE):
        return src.const(value, "D")
    factory = src.const(lambda f=f: default_value(f), "F")
    return f"{factory}()"


def _int_format(f: Field) -> str | None:
    t = f.type
    return _INT_FORMATS.get(t.name) if isinstance(t, ScalarType) else None


# -- decoding ------------------------------------------------------------------------------


def decoder(struct_: Struct, version: int, flexible: bool) -> Callable[[Any], Any]:
    """``decode(reader)``: the message as the walker decodes it (advancing the reader), or
    :data:`FALLBACK` with the reader untouched."""
    src = _Source()
    src.emit(0, "def decode(reader):")
    src.emit(1, "view = reader.view")
    src.emit(1, "pos = start = reader.pos")
    src.emit(1, "end = len(view)")
    src.emit(1, "as_views = reader.records_as_views")
    src.emit(1, "try:")
    result = _decode_struct(src, struct_, version, flexible, 2)
    src.emit(1, "except Exception:")
    src.emit(2, "reader.pos = start")
    src.emit(2, "return FALLBACK")
    src.emit(1, "reader.pos = pos")
    src.emit(1, f"return {result}")
    return src.compile("decode")


def _decode_struct(src: _Source, struct_: Struct, version: int, flexible: bool, ind: int) -> str:
    values: list[tuple[str, str]] = []
    run: list[tuple[Field, str]] = []

    def flush_run() -> None:
        if not run:
            return
        packer = struct.Struct(">" + "".join(_int_format(f) or "" for f, _ in run))
        names = [name for _, name in run]
        src.emit(ind, f"{', '.join(names)}, = {src.const(packer, 'S')}.unpack_from(view, pos)")
        src.emit(ind, f"pos += {packer.size}")
        for f, name in run:
            if f.type.name == "bool":  # type: ignore[union-attr]
                src.emit(ind, f"{name} = {name} != 0")
        run.clear()

    for f in struct_.fields:
        if not f.present_in(version) or f.tag is not None:
            flush_run()
            values.append((f.name, _default_expression(src, f)))
            continue
        name = src.var()
        if _int_format(f) is not None:
            run.append((f, name))
        else:
            flush_run()
            _decode_value(src, f.type, f.nullable_in(version), version, flexible, ind, name)
        values.append((f.name, name))
    flush_run()
    if flexible:  # a tagged field present: the walker knows them all
        count = src.var("n")
        _decode_uvarint(src, ind, count)
        src.emit(ind, f"if {count}: raise _Bail")
    out = src.var("d")
    src.emit(ind, f"{out} = {{{', '.join(f'{key!r}: {value}' for key, value in values)}}}")
    return out


def _decode_uvarint(src: _Source, ind: int, target: str) -> None:
    src.emit(ind, f"{target} = view[pos]")
    src.emit(ind, f"if {target} < 128:")
    src.emit(ind + 1, "pos += 1")
    src.emit(ind, "else:")  # longer ones, rare, by the reader's own rules (32 bits, 5 bytes)
    src.emit(ind + 1, "reader.pos = pos")
    src.emit(ind + 1, f"{target} = reader.uvarint()")
    src.emit(ind + 1, "pos = reader.pos")


def _decode_length(src: _Source, ind: int, target: str, flexible: bool, nullable: bool,
                   int16: bool = False) -> None:
    """``target`` = a length prefix's value, ``None`` for null (bails where the walker raises)."""
    if flexible:
        _decode_uvarint(src, ind, target)
        src.emit(ind, f"if {target} == 0:")
        src.emit(ind + 1, f"{target} = None" if nullable else "raise _Bail")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"{target} -= 1")
        if int16:
            src.emit(ind + 1, f"if {target} > 0x7FFF: raise _Bail")
        return
    packer = src.const(struct.Struct(">h" if int16 else ">i"), "S")
    src.emit(ind, f"{target}, = {packer}.unpack_from(view, pos)")
    src.emit(ind, f"pos += {2 if int16 else 4}")
    src.emit(ind, f"if {target} < 0:")
    src.emit(ind + 1, f"if {target} != -1: raise _Bail")
    src.emit(ind + 1, f"{target} = None" if nullable else "raise _Bail")


def _decode_value(src: _Source, t: Any, nullable: bool, version: int, flexible: bool, ind: int,
                  target: str) -> None:
    if isinstance(t, Struct):
        if nullable:
            marker = src.var("m")
            src.emit(ind, f"{marker} = view[pos]")  # an int8 < 0 is a byte >= 128
            src.emit(ind, "pos += 1")
            src.emit(ind, f"if {marker} >= 128:")
            src.emit(ind + 1, f"{target} = None")
            src.emit(ind, "else:")
            ind += 1
        sub = _decode_struct(src, t, version, flexible, ind)
        src.emit(ind, f"{target} = {sub}")
        return
    if isinstance(t, ArrayOf):
        count = src.var("n")
        _decode_length(src, ind, count, flexible, nullable)
        src.emit(ind, f"if {count} is None:")
        src.emit(ind + 1, f"{target} = None")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"if {count} > end - pos: raise _Bail")
        src.emit(ind + 1, f"{target} = []")
        src.emit(ind + 1, f"for _ in range({count}):")
        item = src.var("e")
        if isinstance(t.element, Struct):
            sub = _decode_struct(src, t.element, version, flexible, ind + 2)
            src.emit(ind + 2, f"{target}.append({sub})")
        else:
            _decode_value(src, t.element, False, version, flexible, ind + 2, item)
            src.emit(ind + 2, f"{target}.append({item})")
        return
    name = t.name
    if name in _INT_FORMATS:
        packer = struct.Struct(">" + _INT_FORMATS[name])
        src.emit(ind, f"{target}, = {src.const(packer, 'S')}.unpack_from(view, pos)")
        src.emit(ind, f"pos += {packer.size}")
        if name == "bool":
            src.emit(ind, f"{target} = {target} != 0")
    elif name == "uuid":
        src.emit(ind, "if pos + 16 > end: raise _Bail")
        src.emit(ind, f"{target} = _UUID(bytes=bytes(view[pos:pos + 16]))")
        src.emit(ind, "pos += 16")
    elif name in ("string", "bytes", "records"):
        length = src.var("n")
        _decode_length(src, ind, length, flexible, nullable, int16=name == "string")
        src.emit(ind, f"if {length} is None:")
        src.emit(ind + 1, f"{target} = None")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"if {length} > end - pos: raise _Bail")
        piece = f"view[pos:pos + {length}]"
        if name == "string":
            src.emit(ind + 1, f"{target} = str({piece}, 'utf-8')")
        elif t is RECORDS:
            src.emit(ind + 1, f"{target} = {piece} if as_views else bytes({piece})")
        else:
            src.emit(ind + 1, f"{target} = bytes({piece})")
        src.emit(ind + 1, f"pos += {length}")
    else:  # pragma: no cover - schema definitions only use the types above
        src.emit(ind, "raise _Bail")


# -- encoding ------------------------------------------------------------------------------


def encoder(struct_: Struct, version: int, flexible: bool,
            allow_records_slots: bool) -> Callable[[Any], Any]:
    """``encode(value)``: the :class:`EncodedMessage` the walker makes of ``value`` (not strict),
    or :data:`FALLBACK`."""
    src = _Source()
    src.emit(0, "def encode(value):")
    src.emit(1, "parts = []")
    src.emit(1, "size = 0")
    src.emit(1, "buf = bytearray()")
    src.emit(1, "try:")
    _encode_struct(src, struct_, version, flexible, allow_records_slots, 2, "value")
    src.emit(1, "except Exception:")
    src.emit(2, "return FALLBACK")
    src.emit(1, "if buf:")
    src.emit(2, "parts.append(bytes(buf))")
    src.emit(2, "size += len(buf)")
    src.emit(1, "message = _EncodedMessage()")
    src.emit(1, "message.parts = parts")
    src.emit(1, "message.size = size")
    src.emit(1, "return message")
    return src.compile("encode")


def _encode_struct(src: _Source, struct_: Struct, version: int, flexible: bool, slots: bool,
                   ind: int, value: str) -> None:
    names = src.const(struct_.field_names, "N")
    src.emit(ind, f"if {value} is None:")
    src.emit(ind + 1, f"{value} = {{}}")
    src.emit(ind, f"elif type({value}) is not dict or not {names}.issuperset({value}): raise _Bail")
    run: list[tuple[Field, str]] = []

    def flush_run() -> None:
        if not run:
            return
        packer = struct.Struct(">" + "".join(_int_format(f) or "" for f, _ in run))
        src.emit(ind, f"buf += {src.const(packer, 'S')}.pack({', '.join(name for _, name in run)})")
        run.clear()

    for f in struct_.fields:
        if not f.present_in(version):
            continue
        key = repr(f.name)
        if f.tag is not None:
            if flexible and f.tagged_in(version):
                got = src.var()
                src.emit(ind, f"{got} = {value}.get({key}, _MISSING)")
                if isinstance(f.type, ScalarType):
                    check = src.const(lambda v, f=f: is_default(f, v, version), "T")
                    src.emit(ind, f"if {got} is not _MISSING and not {check}({got}): raise _Bail")
                else:  # comparing a struct or array with its default could use up an iterable
                    src.emit(ind, f"if {got} is not _MISSING: raise _Bail")
            continue
        got = src.var()
        src.emit(ind, f"{got} = {value}.get({key}, _MISSING)")
        src.emit(ind, f"if {got} is _MISSING: {got} = {_default_expression(src, f)}")
        fmt = _int_format(f)
        if fmt is not None and f.type.name != "bool":  # type: ignore[union-attr]
            if fmt == "d":  # an int (or a bool, which the walker refuses) is the walker's
                src.emit(ind, f"if type({got}) is not float: raise _Bail")
            else:
                src.emit(ind, f"if type({got}) is not int and not _is_int({got}): raise _Bail")
            run.append((f, got))
            continue
        flush_run()
        _encode_value(src, f.type, f.nullable_in(version), version, flexible, slots, ind, got)
    flush_run()
    if flexible:
        src.emit(ind, "buf.append(0)")  # no tagged field differs from its default


def _encode_length(src: _Source, ind: int, length: str, flexible: bool, int16: bool = False) -> None:
    if flexible:
        src.emit(ind, f"if {length} < 127:")
        src.emit(ind + 1, f"buf.append({length} + 1)")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"buf += _encode_uvarint({length} + 1)")
    else:
        packer = src.const(struct.Struct(">h" if int16 else ">i"), "S")
        src.emit(ind, f"buf += {packer}.pack({length})")


def _encode_null(src: _Source, ind: int, flexible: bool, nullable: bool, int16: bool = False) -> None:
    if not nullable:
        src.emit(ind, "raise _Bail")
    elif flexible:
        src.emit(ind, "buf.append(0)")
    else:
        null = b"\xff\xff" if int16 else b"\xff\xff\xff\xff"  # length -1
        src.emit(ind, f"buf += {null!r}")


def _encode_value(src: _Source, t: Any, nullable: bool, version: int, flexible: bool, slots: bool,
                  ind: int, value: str) -> None:
    if isinstance(t, Struct):
        src.emit(ind, f"if {value} is None:")
        src.emit(ind + 1, "buf.append(255)" if nullable else "raise _Bail")
        src.emit(ind, "else:")
        if nullable:
            src.emit(ind + 1, "buf.append(1)")
        _encode_struct(src, t, version, flexible, slots, ind + 1, value)
        return
    if isinstance(t, ArrayOf):
        src.emit(ind, f"if {value} is None:")
        _encode_null(src, ind + 1, flexible, nullable)
        src.emit(ind, "else:")
        # Another iterable (a generator) would be used up here and found empty by the walker.
        src.emit(ind + 1, f"if type({value}) is not list and type({value}) is not tuple: raise _Bail")
        count = src.var("n")
        src.emit(ind + 1, f"{count} = len({value})")
        _encode_length(src, ind + 1, count, flexible)
        item = src.var("e")
        src.emit(ind + 1, f"for {item} in {value}:")
        if isinstance(t.element, Struct):
            _encode_struct(src, t.element, version, flexible, slots, ind + 2, item)
        else:
            _encode_value(src, t.element, False, version, flexible, slots, ind + 2, item)
        return
    name = t.name
    if name in ("int8", "int16", "int32", "int64", "uint16", "float64"):
        if name == "float64":
            src.emit(ind, f"if type({value}) is not float: raise _Bail")
        else:
            src.emit(ind, f"if type({value}) is not int and not _is_int({value}): raise _Bail")
        packer = struct.Struct(">" + _INT_FORMATS[name])
        src.emit(ind, f"buf += {src.const(packer, 'S')}.pack({value})")
    elif name == "bool":
        src.emit(ind, f"buf.append(1 if {value} else 0)")
    elif name == "uuid":
        src.emit(ind, f"if type({value}) is not _UUID: raise _Bail")
        src.emit(ind, f"buf += {value}.bytes")
    elif name == "string":
        src.emit(ind, f"if {value} is None:")
        _encode_null(src, ind + 1, flexible, nullable, int16=True)
        src.emit(ind, "else:")
        src.emit(ind + 1, f"if type({value}) is not str: raise _Bail")
        data, length = src.var("s"), src.var("n")
        src.emit(ind + 1, f"{data} = {value}.encode('utf-8')")
        src.emit(ind + 1, f"{length} = len({data})")
        src.emit(ind + 1, f"if {length} > 0x7FFF: raise _Bail")
        _encode_length(src, ind + 1, length, flexible, int16=True)
        src.emit(ind + 1, f"buf += {data}")
    elif name == "bytes":
        src.emit(ind, f"if {value} is None:")
        _encode_null(src, ind + 1, flexible, nullable)
        src.emit(ind, "else:")
        # len() of a memoryview counts its items, not bytes: other bytes-likes are the walker's
        src.emit(ind + 1, f"if type({value}) is not bytes and type({value}) is not bytearray: raise _Bail")
        length = src.var("n")
        src.emit(ind + 1, f"{length} = len({value})")
        _encode_length(src, ind + 1, length, flexible)
        src.emit(ind + 1, f"buf += {value}")
    elif t is RECORDS:
        src.emit(ind, f"if {value} is None:")
        _encode_null(src, ind + 1, flexible, nullable)
        src.emit(ind, "else:")
        length = src.var("n")
        src.emit(ind + 1, f"{length} = _records_size({value})")
        _encode_length(src, ind + 1, length, flexible)
        if not slots:
            src.emit(ind + 1, f"if not isinstance({value}, (bytes, bytearray, memoryview)): raise _Bail")
            src.emit(ind + 1, f"buf += {value}")
        else:  # the records stay a slot: the send streams them in place
            src.emit(ind + 1, "if buf:")
            src.emit(ind + 2, "parts.append(bytes(buf))")
            src.emit(ind + 2, "size += len(buf)")
            src.emit(ind + 2, "buf = bytearray()")
            src.emit(ind + 1, f"parts.append(_RecordsSlot({value}, {length}))")
            src.emit(ind + 1, f"size += {length}")
    else:  # pragma: no cover - schema definitions only use the types above
        src.emit(ind, "raise _Bail")
