"""Wire primitives: round trips (hypothesis) and typed, positioned errors on bad input."""

from __future__ import annotations

import array
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import ProtocolError
from lazyconv.protocol._message_codec import decode_message, encode_message
from lazyconv.protocol._primitives import (
    Reader,
    Writer,
    encode_uvarint,
    uvarint_size,
)
from lazyconv.protocol._schema import (
    BYTES,
    FLOAT64,
    INT32,
    STRING,
    UINT16,
    ArrayOf,
    Field,
    Struct,
)

EXAMPLES = settings(max_examples=60)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"),
     (0xFFFFFFFF, "ffffffff0f")],
)
def test_uvarint_known_encodings(value: int, encoded: str) -> None:
    assert encode_uvarint(value).hex() == encoded
    assert uvarint_size(value) == len(encoded) // 2
    assert Reader(bytes.fromhex(encoded)).uvarint() == value


@EXAMPLES
@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    data = encode_uvarint(value)
    assert len(data) == uvarint_size(value)
    r = Reader(data)
    assert r.uvarint() == value and r.remaining == 0


@EXAMPLES
@given(
    st.integers(-128, 127), st.integers(-(2**15), 2**15 - 1), st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1), st.uuids(),
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_fixed_width_round_trip(i8: int, i16: int, i32: int, i64: int, u: uuid.UUID) -> None:
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.uuid(u)
    data = w.getvalue()
    assert len(data) == 1 + 2 + 4 + 8 + 16
    assert data[1:3] == i16.to_bytes(2, "big", signed=True)  # big-endian
    r = Reader(data)
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uuid()) == (i8, i16, i32, i64, u)


@EXAMPLES
@given(st.integers(0, 2**16 - 1), st.floats(allow_nan=False))
def test_uint16_and_float64_round_trip(u16: int, f64: float) -> None:
    w = Writer()
    w.uint16(u16)
    w.float64(f64)
    data = w.getvalue()
    assert data[:2] == u16.to_bytes(2, "big")  # unsigned: 65535 is ff ff, not -1
    r = Reader(data)
    assert (r.uint16(), r.float64()) == (u16, f64) and r.remaining == 0


_QUOTA = Struct("Quota", (Field("port", UINT16), Field("value", FLOAT64)))


@pytest.mark.parametrize("flexible", [False, True])
def test_uint16_and_float64_fields_encode_as_kafka_writes_them(flexible: bool) -> None:
    """Kafka's Writable: writeUnsignedShort (2 bytes) and writeDouble (IEEE 754, 8 bytes)."""
    data = encode_message(_QUOTA, {"port": 9093, "value": 1024.5}, 0, flexible).to_bytes()
    assert data == bytes.fromhex("2385" "4090020000000000") + (b"\x00" if flexible else b"")
    assert decode_message(_QUOTA, Reader(data), 0, flexible) == {"port": 9093, "value": 1024.5}
    # an int is a float64 too (Kafka's quota values are often whole numbers)
    assert encode_message(_QUOTA, {"value": 3}, 0, flexible).to_bytes()[2:10] == \
        bytes.fromhex("4008000000000000")


@pytest.mark.parametrize(("value", "message"), [
    ({"port": -1}, "Quota.port: -1 out of range for uint16"),
    ({"port": 65536}, "Quota.port: 65536 out of range for uint16"),
    ({"value": True}, "Quota.value: float64 expected, got True"),
    ({"value": "1.5"}, "Quota.value: float64 expected, got '1.5'"),
    ({"value": 1 << 1100}, "out of range for float64"),
])
def test_bad_uint16_and_float64_values_are_refused(value: dict[str, object], message: str) -> None:
    with pytest.raises(ProtocolError, match=message.replace(".", r"\.")):
        encode_message(_QUOTA, value, 0, False)


def test_short_uint16_and_float64_raise_positioned_errors() -> None:
    with pytest.raises(ProtocolError, match="needs 2 bytes") as short_port:
        decode_message(_QUOTA, Reader(b"\x01"), 0, False)
    assert short_port.value.position == 0
    with pytest.raises(ProtocolError, match="needs 8 bytes") as short_value:
        decode_message(_QUOTA, Reader(b"\x01\x02\x03"), 0, False)
    assert short_value.value.position == 2


@EXAMPLES
@given(st.one_of(st.none(), st.text(max_size=40)), st.one_of(st.none(), st.binary(max_size=300)),
       st.booleans())
def test_strings_and_bytes_round_trip(text: str | None, blob: bytes | None, compact: bool) -> None:
    w = Writer()
    w.string(text, compact=compact, nullable=True)
    w.bytes_(blob, compact=compact, nullable=True)
    r = Reader(w.getvalue())
    assert r.string(compact=compact, nullable=True) == text
    assert r.bytes_(compact=compact, nullable=True) == blob
    assert r.remaining == 0


def test_null_encodings() -> None:
    w = Writer()
    w.string(None, compact=False, nullable=True)
    w.bytes_(None, compact=False, nullable=True)
    w.string(None, compact=True, nullable=True)
    w.bytes_(None, compact=True, nullable=True)
    assert w.getvalue().hex() == "ffff" + "ffffffff" + "00" + "00"


_ITEM = Struct("Item", (Field("id", INT32), Field("name", STRING, nullable_versions="0+")))
_LIST = Struct("List", (Field("items", ArrayOf(_ITEM), nullable_versions="0+"),
                        Field("ints", ArrayOf(INT32))))


@EXAMPLES
@given(
    st.one_of(st.none(), st.lists(st.fixed_dictionaries(
        {"id": st.integers(-(2**31), 2**31 - 1), "name": st.one_of(st.none(), st.text(max_size=10))}
    ), max_size=6)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6),
    st.booleans(),
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_arrays_round_trip(items, ints, flexible: bool) -> None:
    encoded = encode_message(_LIST, {"items": items, "ints": ints}, 0, flexible).to_bytes()
    r = Reader(encoded)
    decoded = decode_message(_LIST, r, 0, flexible)
    assert decoded == {"items": items, "ints": ints}
    assert r.remaining == 0


# -- errors --------------------------------------------------------------------------------


def test_overlong_uvarint_is_rejected_with_position() -> None:
    data = b"\x00\x00" + b"\x80" * 5 + b"\x01"
    r = Reader(data, 2)
    with pytest.raises(ProtocolError) as info:
        r.uvarint("count")
    assert info.value.position == 2
    assert "longer than 5 bytes" in str(info.value)


def test_uvarint_beyond_32_bits_is_rejected() -> None:
    with pytest.raises(ProtocolError) as info:
        Reader(bytes.fromhex("ffffffff1f")).uvarint()
    assert info.value.position == 0


def test_overlong_64_bit_uvarint_is_rejected() -> None:
    with pytest.raises(ProtocolError) as info:
        Reader(b"\xff" * 10 + b"\x01").uvarint(bits=64)
    assert "longer than 10 bytes" in str(info.value)


@EXAMPLES
@given(st.integers(128, 2**32 - 1), st.data())
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_truncated_uvarint_reports_where_it_started(value: int, data) -> None:
    encoded = encode_uvarint(value)
    cut = data.draw(st.integers(1, len(encoded) - 1))
    r = Reader(b"\x07" + encoded[:cut], 1)
    with pytest.raises(ProtocolError) as info:
        r.uvarint()
    assert info.value.position == 1
    assert "truncated" in str(info.value)


@EXAMPLES
@given(st.binary(min_size=1, max_size=50), st.booleans(), st.data())
def test_truncated_bytes_raise_protocol_error(blob: bytes, compact: bool, data) -> None:
    w = Writer()
    w.bytes_(blob, compact=compact)
    encoded = w.getvalue()
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(ProtocolError) as info:
        Reader(encoded[:cut]).bytes_(compact=compact)
    assert info.value.position is not None
    assert 0 <= info.value.position <= cut


def test_negative_lengths_are_rejected() -> None:
    with pytest.raises(ProtocolError) as info:
        Reader(bytes.fromhex("fffffffe") + b"xx").bytes_(compact=False, nullable=True)
    assert info.value.position == 0
    with pytest.raises(ProtocolError):
        Reader(bytes.fromhex("fffe")).string(compact=False, nullable=True)


def test_null_where_not_nullable_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="not nullable"):
        Reader(bytes.fromhex("ffff")).string("topic", compact=False)
    with pytest.raises(ProtocolError, match="not nullable"):
        Reader(b"\x00").string("topic", compact=True)


def test_array_count_larger_than_data_is_rejected_without_allocating() -> None:
    data = bytes.fromhex("00000000") + bytes.fromhex("7fffffff") + b"\x00" * 8
    r = Reader(data, 4)
    with pytest.raises(ProtocolError) as info:
        decode_message(_LIST, r, 0, False)
    assert info.value.position == 4
    assert "claims 2147483647 elements" in str(info.value)


def test_invalid_utf8_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="UTF-8") as info:
        Reader(b"\x00\x02\xff\xfe").string("topic", compact=False)
    assert info.value.position == 0


def test_out_of_range_values_are_rejected_on_encode() -> None:
    with pytest.raises(ProtocolError, match="int16"):
        Writer().int16(1 << 15)
    with pytest.raises(ProtocolError, match="out of range"):
        encode_message(_LIST, {"ints": [1 << 31]}, 0, False)
    with pytest.raises(ProtocolError, match="longer than 32767"):
        Writer().string("x" * 40000, compact=False)
    with pytest.raises(ProtocolError):
        encode_uvarint(-1)


def test_text_that_utf8_cannot_encode_is_refused_with_a_protocol_error() -> None:
    # A lone surrogate is what os.fsdecode gives for a non-UTF-8 directory name (a topic).
    with pytest.raises(ProtocolError, match="not encodable as UTF-8"):
        Writer().string("t\udcff", compact=True)
    with pytest.raises(ProtocolError, match=r"LIST\.name.*not encodable as UTF-8"):
        encode_message(Struct("LIST", (Field("name", STRING),)), {"name": "t\udcff"}, 0, False)


@pytest.mark.parametrize("flexible", [False, True])
def test_bytes_fields_count_bytes_and_refuse_what_is_not_bytes(flexible: bool) -> None:
    blob = Struct("Blob", (Field("data", BYTES),))
    wide = memoryview(array.array("i", [1, 2]))  # 2 items, 8 bytes
    encoded = encode_message(blob, {"data": wide}, 0, flexible).to_bytes()
    assert decode_message(blob, Reader(encoded), 0, flexible)["data"] == wide.tobytes()
    strided = memoryview(b"abcdef")[::2]
    encoded = encode_message(blob, {"data": strided}, 0, flexible).to_bytes()
    assert decode_message(blob, Reader(encoded), 0, flexible)["data"] == b"ace"
    for wrong in ("text", 5):
        with pytest.raises(ProtocolError, match=r"Blob\.data: bytes expected"):
            encode_message(blob, {"data": wrong}, 0, flexible)


@pytest.mark.parametrize("data", [None, "text", 7])
def test_decoding_what_is_not_bytes_is_a_protocol_error(data) -> None:
    """FetchResponse.decode(None) and the like escaped as memoryview's bare TypeError (found by
    a review)."""
    from lazyconv.errors import LocalProtocolError
    from lazyconv.protocol import FetchRequest, FetchResponse

    for decode in (lambda: FetchResponse.decode(12, data), lambda: FetchRequest.decode(12, data),
                   lambda: FetchResponse.decode_framed(12, data)):
        with pytest.raises(LocalProtocolError, match="bytes to decode expected"):
            decode()
