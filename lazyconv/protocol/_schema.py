"""A small message-schema engine: Kafka's JSON message definitions as Python data.

A :class:`Struct` is an ordered list of :class:`Field` s, each with the versions it exists in,
its type, its default and, for tagged fields, its tag. One generic encoder and one generic
decoder walk a schema for a given version, so every version of a message comes from the same
definition (as Kafka's generated message classes do); :mod:`lazyconv.protocol._message_codec`
runs a codec generated from the same definition per version first, and this walker for what
that declines. Field names are Kafka's schema names in
snake_case; message values are plain dicts keyed by those names.

Encoding rules (docs/guide/fetch-response.md):

- fields missing from a value dict take the schema default;
- fields the version lacks are dropped (with ``strict=True`` a non-ignorable one holding a
  non-default value raises, as Kafka's UnsupportedVersionException does);
- in flexible versions strings, bytes and arrays are compact and every struct ends with a
  tagged-field section in which a tagged field is written only when it differs from its default;
- the tagged fields a decoder did not know (``_unknown_tagged_fields``, an :class:`UnknownTags`)
  are written again as they came when the dict is encoded as the struct it was decoded as, in a
  flexible version that does not know their tags either: a relay that decodes and re-encodes
  an answer passes on what a newer peer added.

The ``records`` type is special: the encoder does not copy record bytes but leaves a slot
holding the records object, so a response can stream records from files or lazy conversion.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lazyconv.errors import LocalProtocolError, ProtocolError
from lazyconv.protocol._primitives import Reader, Writer, length_prefix_size

__all__ = [
    "Versions",
    "Field",
    "Struct",
    "ArrayOf",
    "ScalarType",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "FLOAT64",
    "UUID",
    "BOOL",
    "STRING",
    "BYTES",
    "RECORDS",
    "ZERO_UUID",
    "EncodedMessage",
    "RecordsSlot",
    "UnknownTags",
    "walk_encode",
    "walk_decode",
    "is_default",
    "default_value",
    "records_size",
]

ZERO_UUID = uuid.UUID(int=0)
_NO_MAX = 0x7FFF


class UnknownTags(dict[int, bytes]):
    """The tagged fields of a decoded struct that its schema does not know, tag -> payload, and
    the struct they were read in (:attr:`struct`): they are written again only into that struct
    (an answer's struct never gets a request's tags)."""

    def __init__(self, struct: Struct, tags: dict[int, bytes]) -> None:
        super().__init__(tags)
        self.struct = struct


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``high=None`` means "and every later version"."""

    low: int
    high: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> Versions | None:
        """Parse Kafka's notation: ``"3+"``, ``"0-12"``, ``"7"``; ``None``/``"none"`` → None."""
        if text is None or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]))
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)


@dataclass(frozen=True)
class ScalarType:
    """A primitive type: int8/16/32/64, uint16, float64, uuid, bool, string, bytes or records."""

    name: str

    def __repr__(self) -> str:
        return self.name


INT8 = ScalarType("int8")
INT16 = ScalarType("int16")
INT32 = ScalarType("int32")
INT64 = ScalarType("int64")
UINT16 = ScalarType("uint16")  # a port in the KRaft voter APIs' listeners
FLOAT64 = ScalarType("float64")  # a client quota's value
UUID = ScalarType("uuid")
BOOL = ScalarType("bool")
STRING = ScalarType("string")
BYTES = ScalarType("bytes")
RECORDS = ScalarType("records")

_ZERO_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "uuid": ZERO_UUID,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
}

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
}


@dataclass(frozen=True)
class ArrayOf:
    """An array of a scalar type or of a :class:`Struct`."""

    element: ScalarType | Struct


@dataclass(frozen=True)
class Field:
    """One field of a struct, as in Kafka's message JSON."""

    name: str
    type: ScalarType | ArrayOf | Struct
    versions: str = "0+"
    default: Any = None  # None: the type's zero default (null only for nullable fields asked so)
    nullable_versions: str | None = None
    tag: int | None = None
    tagged_versions: str | None = None
    ignorable: bool = False
    null_default: bool = False  # the JSON's "default": "null"

    def __post_init__(self) -> None:
        object.__setattr__(self, "_versions", Versions.parse(self.versions))
        object.__setattr__(self, "_nullable", Versions.parse(self.nullable_versions))
        object.__setattr__(self, "_tagged", Versions.parse(self.tagged_versions))

    def present_in(self, version: int) -> bool:
        return version in self._versions  # type: ignore[attr-defined]

    def nullable_in(self, version: int) -> bool:
        nullable = self._nullable  # type: ignore[attr-defined]
        return nullable is not None and version in nullable

    def tagged_in(self, version: int) -> bool:
        tagged = self._tagged  # type: ignore[attr-defined]
        return self.tag is not None and tagged is not None and version in tagged


@dataclass(frozen=True)
class Struct:
    """An ordered list of fields (a message body, an array element, or a struct field)."""

    name: str
    fields: tuple[Field, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name} declares a field twice: {names}")
        object.__setattr__(self, "_names", frozenset(names))

    @property
    def field_names(self) -> frozenset[str]:
        """The names a value dict of this struct may use."""
        return self._names  # type: ignore[attr-defined]


def default_value(f: Field) -> Any:
    """The default of field ``f`` (a fresh object for arrays and structs)."""
    if f.null_default:
        return None
    if f.default is not None:
        return f.default
    if isinstance(f.type, ArrayOf):
        return []
    if isinstance(f.type, Struct):
        return {sub.name: default_value(sub) for sub in f.type.fields}
    return _ZERO_DEFAULTS[f.type.name]


def records_size(records: Any) -> int:
    """Committed byte size of a records value (bytes-like or anything with ``size_in_bytes``)."""
    if isinstance(records, (bytes, bytearray)):
        return len(records)
    if isinstance(records, memoryview):
        return records.nbytes
    size = getattr(records, "size_in_bytes", None)
    if size is None:
        raise LocalProtocolError(
            f"records must be bytes or have size_in_bytes and to_send(), got {type(records).__name__}"
        )
    if callable(size):
        size = size()
    if not isinstance(size, int) or size < 0:
        raise LocalProtocolError(f"records size_in_bytes must be a non-negative int, got {size!r}")
    return size


class RecordsSlot:
    """A records value left in an encoded message, with the size it committed to."""

    __slots__ = ("records", "size")

    def __init__(self, records: Any, size: int) -> None:
        self.records = records
        self.size = size


class EncodedMessage:
    """Encoded bytes with slots for records: ``parts`` holds bytes and :class:`RecordsSlot` s.

    ``size`` is the total size including every records value's committed size.
    """

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.size = 0

    def to_bytes(self) -> bytes:
        """Join everything (records must then be bytes-like; used for requests and tests)."""
        out = bytearray()
        for part in self.parts:
            if isinstance(part, RecordsSlot):
                if not isinstance(part.records, (bytes, bytearray, memoryview)):
                    raise LocalProtocolError(
                        f"cannot flatten records of type {type(part.records).__name__} to "
                        "bytes; use a send"
                    )
                out += part.records
            else:
                out += part
        return bytes(out)


class _Encoder:
    def __init__(self, flexible: bool, strict: bool, allow_records_slots: bool) -> None:
        self.flexible = flexible
        self.strict = strict
        self.allow_records_slots = allow_records_slots
        self.writer = Writer()
        self.message = EncodedMessage()

    def finish(self) -> EncodedMessage:
        self._flush()
        return self.message

    def _flush(self) -> None:
        if self.writer.buffer:
            data = bytes(self.writer.buffer)
            self.message.parts.append(data)
            self.message.size += len(data)
            self.writer = Writer()

    def records_slot(self, records: Any, path: str) -> None:
        size = records_size(records)
        self.writer.length_prefix(size, compact=self.flexible)
        if not self.allow_records_slots:
            if not isinstance(records, (bytes, bytearray, memoryview)):
                raise LocalProtocolError(f"{path}: records here must be bytes, got {type(records).__name__}")
            self.writer.raw(records)
            return
        # Record bytes are never copied into the metadata: the send streams them in place.
        self._flush()
        self.message.parts.append(RecordsSlot(records, size))
        self.message.size += size

    # -- structs ---------------------------------------------------------------------------

    def struct(self, struct: Struct, value: Mapping[str, Any] | None, version: int, path: str) -> None:
        if value is None:
            value = {}
        elif not isinstance(value, Mapping):
            raise LocalProtocolError(f"{path}: expected a dict for {struct.name}, got {type(value).__name__}")
        _check_keys(struct, value, path)
        tagged: list[tuple[int, Field | None, Any]] = []
        for f in struct.fields:
            v = value.get(f.name, _MISSING)
            if v is _MISSING:
                v = default_value(f)
            if not f.present_in(version):
                if self.strict and not f.ignorable and not is_default(f, v, version):
                    raise LocalProtocolError(
                        f"{path}.{f.name} is not in version {version} and holds non-default value {v!r}"
                    )
                continue
            if f.tag is not None:
                if self.flexible and f.tagged_in(version):
                    if not is_default(f, v, version):
                        tagged.append((f.tag, f, v))
                continue
            self.value(f, v, version, f"{path}.{f.name}")
        if self.flexible:
            unknown = value.get("_unknown_tagged_fields")
            if isinstance(unknown, UnknownTags) and unknown and unknown.struct is struct:
                known = {f.tag for f in struct.fields
                         if f.tag is not None and f.present_in(version) and f.tagged_in(version)}
                tagged += [(tag, None, payload) for tag, payload in unknown.items()
                           if tag not in known]
            self.tagged_section(sorted(tagged, key=lambda t: t[0]), version, path)

    def tagged_section(self, tagged: list[tuple[int, Field | None, Any]], version: int,
                       path: str) -> None:
        """The tagged fields (an unknown one: its field ``None``, its value the payload as
        it was read) in increasing tag order."""
        self.writer.uvarint(len(tagged))
        for tag, f, v in tagged:
            if f is None:
                payload = v
            else:
                sub = _Encoder(self.flexible, self.strict, allow_records_slots=False)
                sub.value(f, v, version, f"{path}.{f.name}")
                payload = sub.writer.buffer
            self.writer.uvarint(tag)
            self.writer.uvarint(len(payload))
            self.writer.raw(payload)

    def value(self, f: Field, v: Any, version: int, path: str) -> None:
        t = f.type
        nullable = f.nullable_in(version)
        if isinstance(t, Struct):
            if v is None:
                if not nullable:
                    raise LocalProtocolError(f"{path} is null but not nullable in version {version}")
                self.writer.int8(-1)
                return
            if nullable:
                self.writer.int8(1)
            self.struct(t, v, version, path)
        elif isinstance(t, ArrayOf):
            if v is None:
                if not nullable:
                    raise LocalProtocolError(f"{path} is null but not nullable in version {version}")
                self.writer.length_prefix(None, compact=self.flexible)
                return
            try:
                items = list(v)
            except TypeError:
                raise LocalProtocolError(f"{path}: expected a list, got {type(v).__name__}") from None
            self.writer.length_prefix(len(items), compact=self.flexible)
            for i, item in enumerate(items):
                if isinstance(t.element, Struct):
                    self.struct(t.element, item, version, f"{path}[{i}]")
                else:
                    self.scalar(t.element, item, nullable=False, path=f"{path}[{i}]")
        else:
            if t is RECORDS:
                if v is None:
                    if not nullable:
                        raise LocalProtocolError(f"{path} is null but not nullable in version {version}")
                    self.writer.length_prefix(None, compact=self.flexible)
                else:
                    self.records_slot(v, path)
                return
            self.scalar(t, v, nullable=nullable, path=path)

    def scalar(self, t: ScalarType, v: Any, *, nullable: bool, path: str) -> None:
        w = self.writer
        name = t.name
        try:
            if name in _INT_RANGES:
                if isinstance(v, bool) or not isinstance(v, int):
                    raise LocalProtocolError(f"{path}: {name} expected, got {v!r}")
                low, high = _INT_RANGES[name]
                if not low <= v <= high:
                    raise LocalProtocolError(f"{path}: {v} out of range for {name}")
                getattr(w, name)(v)
            elif name == "float64":
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise LocalProtocolError(f"{path}: float64 expected, got {v!r}")
                try:
                    number = float(v)
                except OverflowError:
                    raise LocalProtocolError(f"{path}: {v} out of range for float64") from None
                w.float64(number)
            elif name == "uuid":
                w.uuid(_as_uuid(v, path))
            elif name == "bool":
                w.boolean(bool(v))
            elif name == "string":
                if v is not None and not isinstance(v, str):
                    raise LocalProtocolError(f"{path}: string expected, got {v!r}")
                w.string(v, compact=self.flexible, nullable=nullable)
            elif name == "bytes":
                w.bytes_(v, compact=self.flexible, nullable=nullable)
            else:  # pragma: no cover - schema definitions only use the types above
                raise LocalProtocolError(f"{path}: unknown type {name}")
        except ProtocolError as exc:
            if exc.message.startswith(path):
                raise
            raise LocalProtocolError(f"{path}: {exc.message}") from None


_MISSING = object()


def _check_keys(struct: Struct, value: Mapping[str, Any], path: str) -> None:
    """A key the struct does not declare is a caller's typo: refuse it rather than send a default.

    Keys starting with ``_`` are bookkeeping (e.g. ``_unknown_tagged_fields`` from decoding).
    """
    names = struct.field_names
    for key in value:
        if key not in names and not (isinstance(key, str) and key.startswith("_")):
            raise LocalProtocolError(
                f"{path}: {struct.name} has no field {key!r} (its fields: {', '.join(sorted(names))})"
            )


def _as_uuid(v: Any, path: str) -> uuid.UUID:
    if isinstance(v, uuid.UUID):
        return v
    if isinstance(v, (bytes, bytearray)) and len(v) == 16:
        return uuid.UUID(bytes=bytes(v))
    if isinstance(v, str):
        try:
            return uuid.UUID(v)
        except ValueError:
            pass
    raise LocalProtocolError(f"{path}: a uuid (uuid.UUID, 16 bytes or its text) expected, got {v!r}")


def _normalize(f: Field, v: Any, version: int) -> Any:
    """``v`` with defaults filled in, for comparing with a default (tagged structs).

    Every sub-field counts, whatever ``version``: Kafka compares with a default-constructed
    struct (``equals``), so a struct the version lacks is non-default if any field differs.
    """
    if isinstance(f.type, Struct) and isinstance(v, Mapping):
        return {
            sub.name: _normalize(sub, v.get(sub.name, default_value(sub)), version)
            for sub in f.type.fields
        }
    if isinstance(f.type, ArrayOf):
        return None if v is None else list(v)
    if f.type is UUID and v is not None:
        return _as_uuid(v, f.name)
    return v


def is_default(f: Field, v: Any, version: int) -> bool:
    """Whether ``v`` equals field ``f``'s default, as Kafka compares them (a tagged field at
    its default is not written)."""
    return _normalize(f, v, version) == _normalize(f, default_value(f), version)


# -- decoding ------------------------------------------------------------------------------


def _decode_struct(struct: Struct, r: Reader, version: int, flexible: bool, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged_fields: dict[int, Field] = {}
    for f in struct.fields:
        if not f.present_in(version):
            # As Kafka's message classes do: a field the version lacks reads as its default.
            out[f.name] = default_value(f)
            continue
        if f.tag is not None:
            if flexible and f.tagged_in(version):
                tagged_fields[f.tag] = f
                out[f.name] = default_value(f)
            out[f.name] = default_value(f)
            continue
        out[f.name] = _decode_value(f, r, version, flexible, f"{path}.{f.name}")
    if flexible:
        unknown = _decode_tagged_section(r, tagged_fields, out, version, path)
        if unknown:
            out["_unknown_tagged_fields"] = UnknownTags(struct, unknown)
    return out


def _decode_tagged_section(
    r: Reader, known: dict[int, Field], out: dict[str, Any], version: int, path: str
) -> dict[int, bytes]:
    count_at = r.pos
    count = r.uvarint(f"tagged field count of {path}")
    if count > r.remaining:
        raise r.error(f"{path} claims {count} tagged fields but only {r.remaining} bytes remain", count_at)
    unknown: dict[int, bytes] = {}
    previous = -1
    for _ in range(count):
        tag_at = r.pos
        tag = r.uvarint(f"tag in {path}")
        if tag <= previous:
            raise r.error(f"tags in {path} are not in increasing order ({tag} after {previous})", tag_at)
        previous = tag
        size = r.uvarint(f"size of tag {tag} in {path}")
        payload_at = r.pos
        payload = r.raw(size, f"tag {tag} of {path}")
        f = known.get(tag)
        if f is None:
            unknown[tag] = payload
            continue
        sub = Reader(payload, base=r.base + payload_at)
        out[f.name] = _decode_value(f, sub, version, True, f"{path}.{f.name}")
        if sub.remaining:
            raise sub.error(f"tag {tag} ({f.name}) of {path} has {sub.remaining} unread bytes")
    return unknown


def _decode_value(f: Field, r: Reader, version: int, flexible: bool, path: str) -> Any:
    t = f.type
    nullable = f.nullable_in(version)
    if isinstance(t, Struct):
        if nullable:
            marker = r.int8(f"null marker of {path}")
            if marker < 0:
                return None
        return _decode_struct(t, r, version, flexible, path)
    if isinstance(t, ArrayOf):
        n = r.array_length(path, compact=flexible, nullable=nullable)
        if n is None:
            return None
        if isinstance(t.element, Struct):
            return [_decode_struct(t.element, r, version, flexible, f"{path}[{i}]") for i in range(n)]
        return [_decode_scalar(t.element, r, flexible, False, f"{path}[{i}]") for i in range(n)]
    return _decode_scalar(t, r, flexible, nullable, path)


def _decode_scalar(t: ScalarType, r: Reader, flexible: bool, nullable: bool, path: str) -> Any:
    name = t.name
    if name in _INT_RANGES:
        return getattr(r, name)(path)
    if name == "float64":
        return r.float64(path)
    if name == "uuid":
        return r.uuid(path)
    if name == "bool":
        return r.boolean(path)
    if name == "string":
        return r.string(path, compact=flexible, nullable=nullable)
    if name in ("bytes", "records"):
        at = r.pos
        value: bytes | memoryview | None
        if name == "records" and r.records_as_views:
            value = r.bytes_view(path, compact=flexible, nullable=True)
        else:
            value = r.bytes_(path, compact=flexible, nullable=True)
        if value is None and not nullable:
            raise r.error(f"{path} is null but not nullable", at)
        return value
    raise LocalProtocolError(f"{path}: unknown type {name}")  # pragma: no cover


def walk_encode(
    struct: Struct,
    value: Mapping[str, Any],
    version: int,
    flexible: bool,
    *,
    strict: bool = False,
    allow_records_slots: bool = True,
) -> EncodedMessage:
    """Encode ``value`` as ``struct`` for ``version`` into bytes parts and records slots, by
    the generic walker (callers use :func:`lazyconv.protocol._message_codec.encode_message`)."""
    enc = _Encoder(flexible, strict, allow_records_slots)
    enc.struct(struct, value, version, struct.name)
    return enc.finish()


def walk_decode(struct: Struct, reader: Reader, version: int, flexible: bool) -> dict[str, Any]:
    """Decode one ``struct`` for ``version`` from ``reader`` (advancing it), by the generic
    walker (callers use :func:`lazyconv.protocol._message_codec.decode_message`)."""
    return _decode_struct(struct, reader, version, flexible, struct.name)


def prefix_size(length: int | None, flexible: bool) -> int:
    """Size of a records/bytes length prefix (re-exported for size arithmetic in tests)."""
    return length_prefix_size(length, compact=flexible)
