"""Worked hex examples of Fetch requests and responses (Kafka's own bytes), reproduced byte for
byte and decoded back."""

from __future__ import annotations

import uuid

import pytest

from lazyconv.protocol import FetchRequest, FetchResponse, error_partition


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


TOPIC_ID = uuid.UUID("0102030405060708090a0b0c0d0e0f10")

# -- requests ------------------------------------------------------------------------

REQUEST_BODY = {
    "replica_id": -1,
    "max_wait_ms": 500,
    "min_bytes": 1,
    "max_bytes": 52428800,
    "session_id": 0,
    "session_epoch": -1,
    "topics": [
        {
            "topic": "t",
            "topic_id": TOPIC_ID,
            "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 5,
                 "partition_max_bytes": 1048576}
            ],
        }
    ],
}

V0_REQUEST = h("""
00000032
0001 0000 00000007 0001 63
ffffffff 000001f4 00000001
00000001 0001 74
00000001 00000000 0000000000000005 00100000
""")
V3_REQUEST = h("""00000036 0001000300000007000163 ffffffff000001f400000001 03200000 00000001000174
0000000100000000 0000000000000005 00100000""")
V7_REQUEST = h("""0000004b 0001000700000007000163 ffffffff 000001f4 00000001 03200000 00 00000000 ffffffff
00000001 0001 74 00000001 00000000 0000000000000005 ffffffffffffffff 00100000 00000000""")
V12_REQUEST = h("""
0000004e
0001 000c 00000007 0001 63 00
ffffffff 000001f4 00000001 03200000 00 00000000 ffffffff
02
02 74
02
00000000 00000003 0000000000000005 ffffffff ffffffffffffffff 00100000
00
00
01
01
00
""")


def _v4_request() -> bytes:
    # "v4 : … 03200000 00 …": the v3 request with the isolation level after MaxBytes.
    body = V3_REQUEST[4:]
    at = body.index(h("03200000")) + 4
    body = body[:2] + h("0004") + body[4:at] + h("00") + body[at:]
    return len(body).to_bytes(4, "big") + body


def _v9_request() -> bytes:
    # "v9 : … 00000001 00000000 00000003 0000000000000005 ffffffffffffffff 00100000 00000000"
    body = V7_REQUEST[4:]
    body = body[:2] + h("0009") + body[4:]
    old = h("00000000 0000000000000005 ffffffffffffffff")
    body = body.replace(old, h("00000000 00000003 0000000000000005 ffffffffffffffff"))
    return len(body).to_bytes(4, "big") + body


def _v11_request() -> bytes:
    body = _v9_request()[4:]
    body = body[:2] + h("000b") + body[4:] + h("0000")  # RackId ""
    return len(body).to_bytes(4, "big") + body


def _v13_request(version: int) -> bytes:
    body = V12_REQUEST[4:]
    body = body[:2] + version.to_bytes(2, "big") + body[4:]
    body = body.replace(h("02 02 74 02"), h("02") + TOPIC_ID.bytes + h("02"), 1)
    if version >= 15:
        body = body.replace(h("00 ffffffff 000001f4"), h("00 000001f4"), 1)
    return len(body).to_bytes(4, "big") + body


REQUEST_EXAMPLES = {
    0: V0_REQUEST,
    3: V3_REQUEST,
    4: _v4_request(),
    7: V7_REQUEST,
    9: _v9_request(),
    11: _v11_request(),
    12: V12_REQUEST,
    13: _v13_request(13),
    15: _v13_request(15),
    17: _v13_request(17),
}


def test_derived_request_sizes_match_the_spec() -> None:
    # The spec gives these sizes explicitly: v15/v17 drop the replica id: size 0x58.
    assert REQUEST_EXAMPLES[15][:4] == h("00000058")
    assert REQUEST_EXAMPLES[17][:4] == h("00000058")
    assert len(REQUEST_EXAMPLES[12]) == 4 + 78


@pytest.mark.parametrize("version", sorted(REQUEST_EXAMPLES))
def test_request_example_encodes_byte_for_byte(version: int) -> None:
    body = dict(REQUEST_BODY)
    if version < 3:
        body.pop("max_bytes")
    assert FetchRequest.encode_framed(version, body, correlation_id=7, client_id="c") == (
        REQUEST_EXAMPLES[version]
    )


@pytest.mark.parametrize("version", sorted(REQUEST_EXAMPLES))
def test_request_example_decodes(version: int) -> None:
    header, body = FetchRequest.decode_framed(REQUEST_EXAMPLES[version])
    assert header["request_api_key"] == 1
    assert header["request_api_version"] == version
    assert header["correlation_id"] == 7
    assert header["client_id"] == "c"
    assert body["max_wait_ms"] == 500 and body["min_bytes"] == 1
    # Fields a version lacks read as the schema default (MaxBytes: 2^31-1 for v0-2).
    assert body["max_bytes"] == (52428800 if version >= 3 else 0x7FFFFFFF)
    assert body["replica_id"] == -1
    assert body["session_epoch"] == -1
    topic = body["topics"][0]
    assert (topic["topic"], topic["topic_id"]) == (
        ("t", uuid.UUID(int=0)) if version <= 12 else ("", TOPIC_ID)
    )
    partition = topic["partitions"][0]
    assert partition["fetch_offset"] == 5 and partition["partition_max_bytes"] == 1048576
    if version >= 9:
        assert partition["current_leader_epoch"] == 3
    if version >= 12:
        assert body["cluster_id"] is None
        assert partition["last_fetched_epoch"] == -1
    if version >= 15:
        assert body["replica_state"] == {"replica_id": -1, "replica_epoch": -1}


# -- responses -------------------------------------------------------------------

RECORD_V0 = h("0000000000000005 00000010 1fecd70a 00 00 00000001 6b 00000001 76")
V0_RESPONSE = h("""
0000003d
00000007
00000001 0001 74
00000001 00000000 0000 0000000000000006
0000001c
""") + RECORD_V0
V12_RESPONSE = h("""
00000061
00000007 00
00000000 0000 00000000
02 02 74 02
00000000 0000 0000000000000006 0000000000000006 0000000000000000
01
ffffffff
1d
""") + RECORD_V0 + h("01 01 09 00000001 00000003 00 00 00")


def _partition(**extra: object) -> dict:
    p = {"partition_index": 0, "error_code": 0, "high_watermark": 6, "last_stable_offset": 6,
         "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1,
         "records": RECORD_V0}
    p.update(extra)
    return p


def _body(partition: dict) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "topic_id": TOPIC_ID, "partitions": [partition]}]}


def _response_examples() -> dict[int, bytes]:
    ex: dict[int, bytes] = {0: V0_RESPONSE}
    tail = V0_RESPONSE[8:]  # from the topics array on
    topics_head, partition_tail = tail[:7], tail[7:]
    hw = h("0000000000000006")
    fixed = partition_tail[: partition_tail.index(hw) + 8]  # count, index, error, HW
    rec = partition_tail[len(fixed):]  # records length + records

    def frame(header_and_body: bytes) -> bytes:
        return len(header_and_body).to_bytes(4, "big") + header_and_body

    ex[1] = frame(h("00000007 00000000") + tail)
    assert ex[1][:4] == h("00000041")
    lso, log_start, aborted, preferred = hw, h("0000000000000000"), h("00000000"), h("ffffffff")
    ex[4] = frame(h("00000007 00000000") + topics_head + fixed + lso + aborted + rec)
    ex[5] = frame(h("00000007 00000000") + topics_head + fixed + lso + log_start + aborted + rec)
    ex[7] = frame(h("00000007 00000000 0000 00000000") + topics_head + fixed + lso + log_start
                  + aborted + rec)
    assert ex[7][:4] == h("0000005b")
    ex[11] = frame(h("00000007 00000000 0000 00000000") + topics_head + fixed + lso + log_start
                   + aborted + preferred + rec)
    return ex


RESPONSE_EXAMPLES = _response_examples()


@pytest.mark.parametrize("version", sorted(RESPONSE_EXAMPLES))
def test_response_example_encodes_byte_for_byte(version: int) -> None:
    response = FetchResponse(version, _body(_partition()))
    data = response.to_bytes(7)
    assert data == RESPONSE_EXAMPLES[version]
    assert response.size_in_bytes == len(data) - 4


@pytest.mark.parametrize("version", sorted(RESPONSE_EXAMPLES))
def test_response_example_decodes(version: int) -> None:
    header, body = FetchResponse.decode_framed(version, RESPONSE_EXAMPLES[version])
    assert header["correlation_id"] == 7
    partition = body["responses"][0]["partitions"][0]
    assert partition["high_watermark"] == 6
    assert partition["records"] == RECORD_V0
    if version >= 4:
        assert partition["last_stable_offset"] == 6
        assert partition["aborted_transactions"] == []


def test_v12_response_with_current_leader_tag() -> None:
    body = _body(_partition(current_leader={"leader_id": 1, "leader_epoch": 3}))
    assert FetchResponse(12, body).to_bytes(7) == V12_RESPONSE
    _, decoded = FetchResponse.decode_framed(12, V12_RESPONSE)
    partition = decoded["responses"][0]["partitions"][0]
    assert partition["current_leader"] == {"leader_id": 1, "leader_epoch": 3}
    assert partition["diverging_epoch"] == {"epoch": -1, "end_offset": -1}


def test_v12_default_tagged_structs_are_not_written() -> None:
    body = _body(_partition(current_leader={"leader_id": -1, "leader_epoch": -1},
                            diverging_epoch={}, snapshot_id={"end_offset": -1}))
    data = FetchResponse(12, body).to_bytes(7)
    without_tag = V12_RESPONSE[: -len(h("01 01 09 00000001 00000003 00 00 00"))] + h("00 00 00")
    assert data == len(without_tag[4:]).to_bytes(4, "big") + without_tag[4:]


def test_v13_response_uses_topic_id() -> None:
    body = _body(_partition(current_leader={"leader_id": 1, "leader_epoch": 3}))
    expected = V12_RESPONSE.replace(h("02 02 74 02"), h("02") + TOPIC_ID.bytes + h("02"), 1)
    expected = (len(expected) - 4).to_bytes(4, "big") + expected[4:]
    assert FetchResponse(13, body).to_bytes(7) == expected


def test_v16_response_with_node_endpoint() -> None:
    body = _body(_partition())
    body["node_endpoints"] = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    data = FetchResponse(16, body).to_bytes(7)
    assert data.endswith(RECORD_V0 + h("00 00 01 00 0d 02 00000001 02 68 00002384 00 00"))
    _, decoded = FetchResponse.decode_framed(16, data)
    assert decoded["node_endpoints"] == [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    assert decoded["responses"][0]["topic_id"] == TOPIC_ID


def test_error_partition_examples() -> None:
    """Kafka's exact bytes (records null) on request; lazyconv's default is empty records."""
    p = error_partition(0, 76, null_records=True)
    v3 = FetchResponse(3, {"responses": [{"topic": "t", "partitions": [p]}]}).to_bytes(7)
    assert v3.endswith(h("00000000 004c ffffffffffffffff ffffffff"))
    v12 = FetchResponse(12, {"responses": [{"topic": "t", "partitions": [p]}]}).to_bytes(7)
    assert v12.endswith(
        # aborted transactions null (00), as a Kafka 4 broker sends them for an error partition
        h("00000000 004c ffffffffffffffff ffffffffffffffff ffffffffffffffff 00 ffffffff 00 00")
        + h("00 00")  # topic tags, top-level tags
    )
    empty = error_partition(0, 76)
    v3 = FetchResponse(3, {"responses": [{"topic": "t", "partitions": [empty]}]}).to_bytes(7)
    assert v3.endswith(h("00000000 004c ffffffffffffffff 00000000"))
    v12 = FetchResponse(12, {"responses": [{"topic": "t", "partitions": [empty]}]}).to_bytes(7)
    assert v12.endswith(h("00 ffffffff 01 00 00 00"))


SECTION7_RECORDS = h("""
0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76
ffffffffffffffff 0000003d""") + bytes(22)
SECTION7_RESPONSE = h("""0000006b 00000007 00000000 00000001 0001 74 00000001 00000000 0000
0000000000000001 00000046""") + SECTION7_RECORDS


class _CommittedRecords:
    """Records that commit to ``size`` bytes and send ``data`` (the converted output)."""

    def __init__(self, data: bytes) -> None:
        self.size_in_bytes = len(data)
        self.data = data

    def to_send(self):
        from lazyconv._send import BytesSend

        return BytesSend(self.data)


def test_section7_size_field_uses_the_committed_size() -> None:
    assert len(SECTION7_RECORDS) == 70
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1,
         "records": _CommittedRecords(SECTION7_RECORDS)}]}]}
    response = FetchResponse(3, body)
    assert response.size_in_bytes == 107
    assert response.to_bytes(7) == SECTION7_RESPONSE


def test_section7_with_real_lazy_conversion() -> None:
    import lazyconv.conversion._lazy_records as lazy
    import lazyconv.records as records_mod
    builder = records_mod.RecordsBuilder(2)
    builder.append(offset=0, timestamp=1000, key=b"k", value=b"v")
    batch = builder.build()
    assert len(batch) == 70
    converted = lazy.LazyDownConvertedRecords(records_mod.MemoryRecords(batch), 1, 0)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": converted}]}]}
    response = FetchResponse(3, body)
    assert response.size_in_bytes == 107
    assert response.to_bytes(7) == SECTION7_RESPONSE
