"""Valid message values drawn from a declaration's schema, and what decoding them must give.

``message_values(struct, version)`` is a hypothesis strategy for values a declaration must encode:
every field of its type, null only where the version lets the field be null, tagged fields
sometimes set, fields the version lacks sometimes given (the encoder drops them).
``after_round_trip(struct, value, version)`` is what the decoder must return for the encoded
value: the value itself where the version has the field, the field's default where it has not
(as Kafka's generated message classes read them).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from lazyconv.protocol._schema import ArrayOf, Field, ScalarType, Struct, default_value

_INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
}


def _scalar(draw: st.DrawFn, t: ScalarType, nullable: bool) -> Any:
    name = t.name
    if nullable and name in ("string", "bytes", "records") and draw(st.integers(0, 4)) == 0:
        return None
    if name in _INT_BOUNDS:
        low, high = _INT_BOUNDS[name]
        return draw(st.one_of(st.integers(low, high), st.sampled_from([low, high, -1 if low else 0])))
    if name == "float64":
        return draw(st.floats(allow_nan=False))
    if name == "bool":
        return draw(st.booleans())
    if name == "uuid":
        return draw(st.one_of(st.uuids(), st.just(uuid.UUID(int=0))))
    if name == "string":
        return draw(st.text(max_size=6))
    return draw(st.binary(max_size=10))  # bytes, records


def _value(draw: st.DrawFn, f: Field, t: Any, version: int, nullable: bool, depth: int) -> Any:
    if isinstance(t, Struct):
        if nullable and draw(st.integers(0, 3)) == 0:
            return None
        return _struct(draw, t, version, depth + 1)
    if isinstance(t, ArrayOf):
        if nullable and draw(st.integers(0, 3)) == 0:
            return None
        count = draw(st.integers(0, 2 if depth < 3 else 0))
        return [_value(draw, f, t.element, version, False, depth + 1) for _ in range(count)]
    return _scalar(draw, t, nullable)


def _struct(draw: st.DrawFn, struct: Struct, version: int, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in struct.fields:
        present = f.present_in(version)
        if f.tag is not None and present and draw(st.integers(0, 2)) != 0:
            continue  # a tagged field mostly keeps its default (and is not written)
        if not present and draw(st.integers(0, 3)) != 0:
            continue  # a field the version lacks, given now and then: the encoder drops it
        if f.tag is None and present and draw(st.integers(0, 5)) == 0:
            continue  # left out: the encoder writes its default
        out[f.name] = _value(draw, f, f.type, version, f.nullable_in(version), depth)
    return out


@st.composite
def message_values(draw: st.DrawFn, struct: Struct, version: int) -> dict[str, Any]:
    """A value of ``struct`` that ``version`` can encode."""
    return _struct(draw, struct, version)


def after_round_trip(struct: Struct, value: dict[str, Any], version: int) -> dict[str, Any]:
    """What decoding ``value`` encoded as ``struct`` at ``version`` gives back."""
    out: dict[str, Any] = {}
    for f in struct.fields:
        if not f.present_in(version) or f.name not in value:
            out[f.name] = default_value(f)
            continue
        out[f.name] = _expected(f.type, value[f.name], version)
    return out


def _expected(t: Any, v: Any, version: int) -> Any:
    if v is None:
        return None
    if isinstance(t, Struct):
        return after_round_trip(t, v, version)
    if isinstance(t, ArrayOf):
        return [_expected(t.element, item, version) for item in v]
    if t.name == "float64":
        return float(v)
    return v


def every_field_set(struct: Struct, version: int, seed: int = 1) -> dict[str, Any]:
    """A value with every field the version has set to a value that is not its default (and
    one element in every array): a plain, deterministic companion to :func:`message_values`."""
    out: dict[str, Any] = {}
    for i, f in enumerate(struct.fields):
        if f.present_in(version):
            value = _non_default(f.type, version, seed * 31 + i + 1)
            if value == default_value(f):  # True for a bool defaulting to true, or an int
                value = (not value) if isinstance(value, bool) else value + 1
            out[f.name] = value
    return out


def _non_default(t: Any, version: int, seed: int) -> Any:
    if isinstance(t, Struct):
        return every_field_set(t, version, seed)
    if isinstance(t, ArrayOf):
        return [_non_default(t.element, version, seed)]
    name = t.name
    if name in _INT_BOUNDS:
        low, high = _INT_BOUNDS[name]
        return low + 1 + seed % (min(high - low, 1 << 30) - 2)
    return {"float64": seed + 0.25, "bool": True, "uuid": uuid.UUID(int=seed),
            "string": f"s{seed}é", "bytes": bytes([seed % 256]) * 3,
            "records": bytes([seed % 256]) * 5}[name]


def with_nulls(struct: Struct, value: dict[str, Any], version: int, *,
               arrays: bool = True) -> dict[str, Any]:
    """``value`` with every field ``version`` lets be null set to null, inside the arrays and
    structs that stay set too; ``arrays=False``: nullable arrays stay set (their elements'
    fields are nulled)."""
    out = dict(value)
    for f in struct.fields:
        item = out.get(f.name)
        if not f.present_in(version) or item is None:
            continue
        is_array = isinstance(f.type, ArrayOf)
        if f.nullable_in(version) and (arrays or not is_array):
            out[f.name] = None
        elif isinstance(f.type, Struct):
            out[f.name] = with_nulls(f.type, item, version, arrays=arrays)
        elif is_array and isinstance(f.type.element, Struct):
            out[f.name] = [with_nulls(f.type.element, element, version, arrays=arrays)
                           for element in item]
    return out


def refused_requests(struct: Struct, version: int) -> dict[str, dict[str, Any]]:
    """Requests of ``struct`` at ``version`` an error answer must mirror, by name: every field
    set (one element per array), every nullable field inside the arrays null (a topic named by
    id, an entity without a name, ...), every nullable field null (all topics asked, ...)."""
    value = every_field_set(struct, version)
    return {"set": value, "null-fields": with_nulls(struct, value, version, arrays=False),
            "null": with_nulls(struct, value, version)}
