"""The generated codecs (lazyconv.protocol._message_codec) against the generic walker they stand
in for: on every version of every API, random messages encode to the same parts and decode to
the same values, and mutated bytes or odd values end the same way (same value, or the same error
with the same message and position). Plain messages must take the generated path."""

from __future__ import annotations

import enum
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyconv.protocol import KAFKA_APIS
from lazyconv.protocol import _message_codec as codegen
from lazyconv.protocol._message_codec import decode_message, encode_message
from lazyconv.protocol._primitives import Reader, encode_uvarint
from lazyconv.protocol._schema import (
    BYTES,
    INT32,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    Field,
    RecordsSlot,
    Struct,
    walk_decode,
    walk_encode,
)

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

# (api name, request or response, version, schema, flexible) for every message this library
# declares (KAFKA_APIS: serve's APIs at their widest ranges and every other one Kafka 4 serves)
MESSAGES = [
    (spec.name, kind, version, schema, spec.is_flexible(version))
    for spec in KAFKA_APIS
    for kind, schema in (("request", spec.request), ("response", spec.response))
    for version in range(spec.min_version, spec.max_version + 1)
]
IDS = [f"{name}-{kind}-v{version}" for name, kind, version, _, _ in MESSAGES]


class _Code(enum.IntEnum):
    NONE = 0
    SOME = 7


class _Records:
    """A records object of the kind responses stream (a size and nothing else here)."""

    def __init__(self, size: int) -> None:
        self.size_in_bytes = size


def _scalar(draw: st.DrawFn, name: str, odd: bool) -> Any:
    if odd and draw(st.integers(0, 9)) == 0:  # a value of the wrong kind, or a converted one
        return draw(st.sampled_from([None, True, 1.5, "7", b"x", (1,), _Code.SOME, -(1 << 70),
                                     str(uuid.UUID(int=3)), uuid.UUID(int=3).bytes]))
    if name in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[name]
        return draw(st.one_of(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                              st.sampled_from([_Code.NONE, _Code.SOME, -1, 0])))
    if name == "uint16":
        return draw(st.one_of(st.integers(0, 0xFFFF), st.sampled_from([_Code.SOME, -1, 0x10000])))
    if name == "float64":  # a float, an int (the walker's), no NaN (it equals nothing)
        return draw(st.one_of(st.floats(allow_nan=False), st.integers(-5, 5)))
    if name == "bool":
        return draw(st.booleans())
    if name == "uuid":
        return uuid.UUID(int=draw(st.integers(0, 3)))
    if name == "string":
        return draw(st.one_of(st.none(), st.text(max_size=6), st.just("é" * 3)))
    if name == "bytes":
        return draw(st.one_of(st.none(), st.binary(max_size=8)))
    return draw(st.one_of(st.none(), st.binary(max_size=12), st.builds(_Records, st.integers(0, 300))))


def _value(draw: st.DrawFn, t: Any, odd: bool, depth: int) -> Any:
    if isinstance(t, Struct):
        if draw(st.integers(0, 7)) == 0:
            return None
        return _struct(draw, t, odd, depth + 1)
    if isinstance(t, ArrayOf):
        if draw(st.integers(0, 7)) == 0:
            return None
        items = [_value(draw, t.element, odd, depth + 1) if isinstance(t.element, Struct)
                 else _scalar(draw, t.element.name, odd)
                 for _ in range(draw(st.integers(0, 2 if depth < 3 else 0)))]
        return tuple(items) if odd and draw(st.booleans()) else items
    return _scalar(draw, t.name, odd)


def _struct(draw: st.DrawFn, schema: Struct, odd: bool, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in schema.fields:
        # tagged fields are mostly left out (their default): set, the walker writes them
        if draw(st.integers(0, 9 if f.tag is not None else 2)) == 0:
            out[f.name] = _value(draw, f.type, odd, depth)
        elif f.tag is None and draw(st.booleans()):
            out[f.name] = _value(draw, f.type, odd, depth)
    if odd and draw(st.integers(0, 19)) == 0:
        out[draw(st.sampled_from(["_private", "no_such_field"]))] = 1
    return out


def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # the same error, whatever it is
        return ("error", type(exc), str(exc), getattr(exc, "position", None))


def _parts(message: Any) -> Any:
    if message[0] != "ok":
        return message
    return ("ok", message[1].size, [(id(p.records), p.size) if isinstance(p, RecordsSlot) else p
                                    for p in message[1].parts])


@pytest.mark.parametrize("message", MESSAGES, ids=IDS)
def test_plain_messages_take_the_generated_codecs(message: tuple[Any, ...]) -> None:
    """A message of defaults encodes and decodes without falling back to the walker."""
    _, _, version, schema, flexible = message
    encoded = codegen.encoder(schema, version, flexible, False)({})
    assert encoded is not codegen.FALLBACK
    reference = walk_encode(schema, {}, version, flexible, allow_records_slots=False)
    assert encoded.parts == reference.parts and encoded.size == reference.size
    data = encoded.parts[0] if encoded.parts else b""
    reader = Reader(data)
    decoded = codegen.decoder(schema, version, flexible)(reader)
    assert decoded is not codegen.FALLBACK
    assert decoded == walk_decode(schema, Reader(data), version, flexible)
    assert reader.pos == len(data)


@st.composite
def _odd_values(draw: st.DrawFn, schema: Struct) -> dict[str, Any]:
    return _struct(draw, schema, odd=True)


def _encodes_as_the_walker(data: st.DataObject) -> None:
    _, _, version, schema, flexible = data.draw(st.sampled_from(MESSAGES))
    value = data.draw(_odd_values(schema))
    for slots in (True, False):
        fast = _parts(_outcome(lambda s=slots: encode_message(schema, value, version, flexible,
                                                              allow_records_slots=s)))
        walker = _parts(_outcome(lambda s=slots: walk_encode(
            schema, value, version, flexible, allow_records_slots=s)))
        assert fast == walker


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_random_messages_encode_as_the_walker_encodes_them(data: st.DataObject) -> None:
    _encodes_as_the_walker(data)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_many_random_messages_encode_as_the_walker_encodes_them(data: st.DataObject) -> None:
    _encodes_as_the_walker(data)


@st.composite
def _encoded_and_mutated(draw: st.DrawFn) -> tuple[Struct, int, bool, bytes]:
    _, _, version, schema, flexible = draw(st.sampled_from(MESSAGES))
    value = _struct(draw, schema, odd=False)
    for part in value.values():
        if isinstance(part, _Records):
            return schema, version, flexible, b""
    try:
        data = bytearray(walk_encode(schema, value, version, flexible,
                                                  allow_records_slots=False).to_bytes())
    except Exception:
        data = bytearray()
    if data and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        if len(data) >= 4 and draw(st.booleans()):
            struct.pack_into(">i", data, draw(st.integers(0, len(data) - 4)),
                             draw(st.sampled_from([-1, -2, 0, 1 << 20])))
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        if draw(st.booleans()):  # a varint that runs long, a tagged section that is not empty
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.sampled_from([b"\xff" * 6, b"\x01\x00\x00", b"\x02\x05\x01x"]))
    return schema, version, flexible, bytes(data)


def _decodes_as_the_walker(case: tuple[Struct, int, bool, bytes], views: bool) -> None:
    schema, version, flexible, data = case

    def run(decode: Any) -> Any:
        reader = Reader(data, records_as_views=views)
        outcome = _outcome(lambda: decode(schema, reader, version, flexible))
        if outcome[0] == "ok":
            value = outcome[1]
            return ("ok", _plain(value), reader.pos)
        return outcome

    assert run(decode_message) == run(walk_decode)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_encoded_and_mutated(), st.booleans())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_encoded_and_mutated_bytes_decode_as_the_walker_decodes_them(
        case: tuple[Struct, int, bool, bytes], views: bool) -> None:
    _decodes_as_the_walker(case, views)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_encoded_and_mutated(), st.booleans())
def test_many_encoded_and_mutated_messages_decode_as_the_walker_decodes_them(
        case: tuple[Struct, int, bool, bytes], views: bool) -> None:
    _decodes_as_the_walker(case, views)


def _plain(value: Any) -> Any:
    """Values with memoryviews turned to bytes (views compare by content only as bytes)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return ("view", bytes(value))
    return value


def _walk(schema: Struct) -> list[Any]:
    fields = []
    for f in schema.fields:
        fields.append(f)
        inner = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if isinstance(inner, Struct):
            fields.extend(_walk(inner))
    return fields


TAGGED = [(name, kind, version, schema, flexible) for name, kind, version, schema, flexible in MESSAGES
          if flexible and any(f.tag is not None and f.tagged_in(version) for f in _walk(schema))]



def _non_default(t: Any) -> Any:
    if isinstance(t, Struct):
        return {f.name: _non_default(f.type) for f in t.fields if f.tag is None}
    if isinstance(t, ArrayOf):
        return [_non_default(t.element)]
    return {"int8": 3, "int16": 3, "int32": 3, "int64": 3, "uint16": 3, "float64": 3.5,
            "bool": True, "uuid": uuid.UUID(int=9),
            "string": "tag", "bytes": b"tag", "records": b"tag"}[t.name]


def _with_tags(schema: Struct, version: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for f in schema.fields:
        inner = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if f.tag is not None and f.tagged_in(version):
            value[f.name] = _non_default(f.type)
        elif isinstance(inner, Struct):
            sub = _with_tags(inner, version)
            value[f.name] = [sub] if isinstance(f.type, ArrayOf) else sub
    return value


@pytest.mark.parametrize("message", TAGGED, ids=[f"{m[0]}-{m[1]}-v{m[2]}" for m in TAGGED])
def test_tagged_fields_that_are_set_are_read_and_written_as_the_walker_does(
        message: tuple[Any, ...]) -> None:
    """A tagged field holding a value: the generated codecs leave the message to the walker."""
    _, _, version, schema, flexible = message
    value = _with_tags(schema, version)
    encoded = _parts(_outcome(lambda: encode_message(schema, value, version, flexible,
                                                     allow_records_slots=False)))
    walker = _parts(_outcome(lambda: walk_encode(schema, value, version, flexible,
                                                              allow_records_slots=False)))
    assert encoded == walker
    assert encoded[0] == "ok"
    data = b"".join(encoded[2])
    assert codegen.decoder(schema, version, flexible)(Reader(data)) is codegen.FALLBACK
    reader = Reader(data)
    assert decode_message(schema, reader, version, flexible) == \
        walk_decode(schema, Reader(data), version, flexible)
    assert reader.pos == len(data)


_STRING = Struct("S", (Field("s", STRING, nullable_versions="0+"),))
_EMPTY_ITEMS = Struct("E", (Field("items", ArrayOf(Struct("Item", ()))),))
_TAIL = Struct("T", (Field("b", BYTES), Field("r", RECORDS, nullable_versions="0+")))


@pytest.mark.parametrize(("schema", "flexible", "data"), [
    (_STRING, True, encode_uvarint(40001) + b"a" * 40000 + b"\x00"),  # longer than a string may be
    (_STRING, False, b"\xff\xfe"),  # length -2
    (_STRING, True, b"\xff\xff\xff\xff\x7f"),  # a varint beyond 32 bits
    (_EMPTY_ITEMS, False, struct.pack(">i", (1 << 31) - 1)),  # 2**31 items of nothing in 4 bytes
    (_EMPTY_ITEMS, True, encode_uvarint(1 << 30) + b"\x00"),
    (_TAIL, False, struct.pack(">ii", 0, 5) + b"abcd"),  # records one byte short
    (_TAIL, True, b"\x01" + encode_uvarint(6) + b"abcd"),
    (_TAIL, False, struct.pack(">i", 9) + b"abc"),
])
def test_what_the_walker_refuses_the_generated_codec_refuses(schema: Struct, flexible: bool,
                                                              data: bytes) -> None:
    assert codegen.decoder(schema, 0, flexible)(Reader(data)) is codegen.FALLBACK
    fast = _outcome(lambda: decode_message(schema, Reader(data), 0, flexible))
    assert fast[0] == "error"
    assert fast == _outcome(lambda: walk_decode(schema, Reader(data), 0, flexible))


_ITEMS = Struct("I", (Field("items", ArrayOf(Struct("Item", (Field("a", INT32),)))),
                      Field("id", UUID),
                      Field("tags", ArrayOf(INT32), tag=0, tagged_versions="0+")))


@pytest.mark.parametrize("items", [
    lambda: ({"a": 1 << 40} for _ in range(2)),  # out of range: the walker's error
    lambda: map(lambda a: {"a": a}, [1, 2]),
    lambda: iter([{"a": 1}, {"a": 2}]),
], ids=["generator, out of range", "map", "iterator"])
@pytest.mark.parametrize("uuid_value", [uuid.UUID(int=1), str(uuid.UUID(int=1))], ids=["uuid", "text"])
def test_arrays_given_as_iterators_reach_the_walker_whole(items: Any, uuid_value: Any) -> None:
    """An array that is an iterator is left to the walker untouched: were it drawn from first,
    the walker would find it empty and write an empty array, or miss its error."""
    fast = _parts(_outcome(lambda: encode_message(_ITEMS, {"items": items(), "id": uuid_value}, 0, False)))
    walker = _parts(_outcome(lambda: walk_encode(_ITEMS, {"items": items(), "id": uuid_value}, 0, False)))
    assert fast == walker


def test_a_tagged_array_given_as_an_iterator_reaches_the_walker_whole() -> None:
    value = {"items": [], "tags": iter([1, 2])}
    fast = encode_message(_ITEMS, value, 0, True, allow_records_slots=False).to_bytes()
    walker = walk_encode(_ITEMS, {"items": [], "tags": iter([1, 2])}, 0, True,
                         allow_records_slots=False).to_bytes()
    assert fast == walker


def test_a_message_left_to_the_walker_is_not_kept_alive_by_the_codec() -> None:
    """Each generated decoder that gives up leaves nothing behind: the bail used to be one
    exception raised again and again, which chained every raise's traceback onto it and so kept
    each message's frames, and the request's buffer, alive (a remote client grew the gateway's
    memory by a request's size per request)."""
    import gc
    import weakref

    class Buffer(bytearray):
        pass

    schema = _STRING  # a string longer than int16 allows: the generated decoder bails
    data = Buffer(struct.pack(">h", 0x7FFF) + b"x" * 10)
    alive = weakref.ref(data)
    decoder = codegen.decoder(schema, 0, False)
    for _ in range(3):
        assert decoder(Reader(memoryview(data))) is codegen.FALLBACK
    del data
    gc.collect()
    assert alive() is None
