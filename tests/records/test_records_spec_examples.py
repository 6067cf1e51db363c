"""Worked hex examples of each record format (Kafka's own bytes): the builder reproduces the uncompressed ones byte for byte,
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


GZIP_INNER_V1 = """
0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76
0000000000000002 00000017 98989778 01 00 00000000000003ed ffffffff 00000001 77
0000000000000003 00000018 deb4c81a 01 00 00000000000003e7 00000002 6b33 ffffffff
"""


def build_gzip_wrapper(magic: int) -> bytes:
    b = RecordsBuilder(magic, Compression.GZIP, base_offset=20)
    b.append(20, 1000, b"k", b"v")
    b.append(22, 1005, None, b"w")
    b.append(23, 999, b"k3", None)
    return b.build()


def test_gzip_v1_wrapper_example() -> None:
    data = build_gzip_wrapper(1)
    # Java-identical gzip framing and deflate bytes: the whole wrapper matches, CRC included
    assert data[:34] == h("0000000000000017 00000062 6969619b 01 01 00000000000003ed ffffffff 0000004c")
    assert len(data) == 12 + 98 and data[34:44] == h("1f8b0800000000 0000ff")
    inner = zlib.decompress(data[34:], 31)
    assert inner == h(GZIP_INNER_V1) and len(inner) == 107
    batch = only_batch(data)
    assert (batch.magic, batch.compression, batch.timestamp_type) == (1, Compression.GZIP, TimestampType.CREATE_TIME)
    assert (batch.base_offset, batch.last_offset, batch.max_timestamp, batch.crc) == (20, 23, 1005, 0x6969619B)
    assert list(batch) == [
        Record(20, 1000, b"k", b"v", ()),
        Record(22, 1005, None, b"w", ()),
        Record(23, 999, b"k3", None, ()),
    ]


def test_gzip_v0_wrapper_example() -> None:
    data = build_gzip_wrapper(0)
    assert data[:26] == h("0000000000000017 00000055 cbf8f5c8 00 01 ffffffff 00000047")
    assert len(data) == 12 + 0x55
    inner = zlib.decompress(data[26:], 31)
    assert [inner[i : i + 8] for i in (0, 28, 55)] == [h(f"00000000000000{o:02x}") for o in (20, 22, 23)]
    batch = only_batch(data)
    assert (batch.base_offset, batch.last_offset, batch.max_timestamp) == (20, 23, -1)
    assert list(batch) == [
        Record(20, -1, b"k", b"v", ()),
        Record(22, -1, None, b"w", ()),
        Record(23, -1, b"k3", None, ()),
    ]


@pytest.mark.parametrize(
    ("magic", "codec", "crc"),
    [
        (0, Compression.NONE, 1978725405),
        (1, Compression.NONE, 109425508),
        (2, Compression.NONE, 3851219455),
        # v2 lz4 is reproducible with Python's lz4 block compressor; v0/v1 lz4 are not (9.4)
        (2, Compression.LZ4, 2745969314),
    ],
)
def test_checksum_vectors(magic: int, codec: Compression, crc: int) -> None:
    b = RecordsBuilder(magic, codec)
    b.append(0, 283843, b"key1", b"value1")
    b.append(1, 1234, b"key2", b"value2")
    first = next(MemoryRecords(b.build()).batches())
    first.validate()
    assert first.crc == crc


@pytest.mark.parametrize("magic", [0, 1])
def test_lz4_legacy_checksum_vector_records_decode(magic: int) -> None:
    b = RecordsBuilder(magic, Compression.LZ4)
    b.append(0, 283843, b"key1", b"value1")
    b.append(1, 1234, b"key2", b"value2")
    ts = (-1, -1) if magic == 0 else (283843, 1234)
    assert list(MemoryRecords(b.build()).records()) == [
        Record(0, ts[0], b"key1", b"value1", ()),
        Record(1, ts[1], b"key2", b"value2", ()),
    ]


def test_v0_lz4_inner_block_from_lz4_java_decodes() -> None:
    # 9.4: lz4-java's block for the v0 inner set, framed with the v0 (broken) header checksum
    block = h(
        "16000100511875f0f41d0f00e0046b6579310000000676616c75650a0000020011012400301bc3a60d0001"
        "2400b0320000000676616c756532"
    )
    stream = h("04224d18 6040 1a") + len(block).to_bytes(4, "little") + block + bytes(4)
    wrapper = bytearray()
    from lazyconv.records._codec import append_legacy_message

    append_legacy_message(wrapper, 1, -1, None, stream, 0, int(Compression.LZ4))
    batch = only_batch(bytes(wrapper))
    assert batch.crc == 66944826
    assert list(batch) == [Record(0, -1, b"key1", b"value1", ()), Record(1, -1, b"key2", b"value2", ())]
