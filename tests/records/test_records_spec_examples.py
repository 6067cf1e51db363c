"""Every hex example of formats.md: the builder reproduces the uncompressed ones byte for byte,
and the reader decodes all of them to the stated contents."""

from __future__ import annotations

import zlib

import crc32c
import pytest

from lazyconv.errors import MalformedVarintError
from lazyconv.records import (
    Compression,
    ControlRecordType,
    MemoryRecords,
    Record,
    RecordsBuilder,
    TimestampType,
    build_end_txn_marker,
    parse_control_key,
    parse_end_txn_marker,
)
from lazyconv.records._codec import encode_varint, encode_varlong, read_varint, read_varlong


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


VARINTS = [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2, "04"), (300, "d8 04"), (2147483647, "fe ff ff ff 0f"),
    (63, "7e"), (-64, "7f"), (64, "80 01"), (-65, "81 01"), (150, "ac 02"), (-300, "d7 04"),
    (-2147483648, "ff ff ff ff 0f"),
]
VARLONGS = [(1000, "d0 0f"), (-282609, "e1 bf 22"), (-1, "01")]


def test_crc_check_values() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert crc32c.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(("value", "encoded"), VARINTS)
def test_varint_table(value: int, encoded: str) -> None:
    data = h(encoded)
    assert encode_varint(value) == data
    assert read_varint(data, 0, len(data)) == (value, len(data))


@pytest.mark.parametrize(("value", "encoded"), VARLONGS)
def test_varlong_examples(value: int, encoded: str) -> None:
    data = h(encoded)
    assert encode_varlong(value) == data
    assert read_varlong(data, 0, len(data)) == (value, len(data))


def test_overlong_and_truncated_varints() -> None:
    with pytest.raises(MalformedVarintError):
        read_varint(h("ff ff ff ff ff 01"), 0, 6)  # 5th byte keeps the continuation bit
    with pytest.raises(MalformedVarintError):
        read_varlong(h("ff" * 10 + "01"), 0, 11)  # 11 bytes
    with pytest.raises(MalformedVarintError):
        read_varint(h("ff ff"), 0, 2)  # runs out mid-varint


V0_KV = "0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76"
V0_NULLS = "0000000000000000 0000000e a7ec6803 00 00 ffffffff ffffffff"
V1_HI = "0000000000000005 00000018 06614b6d 01 00 00000000000003e8 ffffffff 00000002 6869"
V1_HI_LAT = "0000000000000005 00000018 0fc056e8 01 08 00000000000003e8 ffffffff 00000002 6869"
V2_EXAMPLE = """
0000000000000000 00000046 ffffffff 02 9711b97b 0000 00000001 00000000000003e8 00000000000003ed
ffffffffffffffff ffff ffffffff 00000002
18 00 00 00 02 6b 02 76 02 02 68 02 78
0e 00 0a 02 01 02 77 00
"""
COMMIT_MARKER = """
0000000000000002 00000042 ffffffff 02 75eb436a 0030 00000000
00000000000007d0 00000000000007d0 0000000000000007 0001 ffffffff 00000001
20 00 00 00 08 00000001 0c 000000000000 00
"""


def only_batch(data: bytes):
    batches = list(MemoryRecords(data).batches())
    assert len(batches) == 1
    batches[0].validate()
    return batches[0]


def test_v0_message_example() -> None:
    b = RecordsBuilder(0)
    b.append(0, -1, b"k", b"v")
    assert b.build() == h(V0_KV)
    batch = only_batch(h(V0_KV))
    assert (batch.magic, batch.timestamp_type, batch.max_timestamp) == (0, TimestampType.NO_TIMESTAMP, -1)
    assert batch.crc == 0x1FECD70A
    assert list(batch) == [Record(0, -1, b"k", b"v", ())]


def test_v0_null_key_value_example() -> None:
    b = RecordsBuilder(0)
    b.append(0, -1, None, None)
    assert b.build() == h(V0_NULLS)
    assert list(only_batch(h(V0_NULLS))) == [Record(0, -1, None, None, ())]


def test_v1_message_examples() -> None:
    b = RecordsBuilder(1)
    b.append(5, 1000, None, b"hi")
    assert b.build() == h(V1_HI)
    lat = RecordsBuilder(1, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1000)
    lat.append(5, 1000, None, b"hi")
    assert lat.build() == h(V1_HI_LAT)
    batch = only_batch(h(V1_HI))
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert list(batch) == [Record(5, 1000, None, b"hi", ())]
    batch = only_batch(h(V1_HI_LAT))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.crc == 0x0FC056E8
    assert list(batch) == [Record(5, 1000, None, b"hi", ())]


def test_v2_batch_example() -> None:
    b = RecordsBuilder(2)
    b.append(0, 1000, b"k", b"v", [("h", b"x")])
    b.append(1, 1005, None, b"w")
    data = b.build()
    assert data == h(V2_EXAMPLE)
    assert len(data) == 82
    batch = only_batch(data)
    assert (batch.base_offset, batch.last_offset, batch.record_count, batch.crc) == (0, 1, 2, 0x9711B97B)
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1005)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.compression == Compression.NONE and not batch.is_control and not batch.is_transactional
    assert list(batch) == [
        Record(0, 1000, b"k", b"v", (("h", b"x"),)),
        Record(1, 1005, None, b"w", ()),
    ]


def test_commit_marker_example() -> None:
    data = build_end_txn_marker(2, 2000, 7, 1, commit=True, coordinator_epoch=0)
    assert data == h(COMMIT_MARKER)
    batch = only_batch(data)
    assert batch.is_control and batch.is_transactional and batch.attributes == 0x30
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, -1)
    [record] = list(batch)
    assert (record.offset, record.timestamp) == (2, 2000)
    assert parse_control_key(record.key) == ControlRecordType.COMMIT
    marker = parse_end_txn_marker(record.key, record.value)
    assert marker.commit and marker.coordinator_epoch == 0
