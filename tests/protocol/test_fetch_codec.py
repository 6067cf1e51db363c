"""FetchRequest/FetchResponse codec behaviour beyond the worked examples: errors, tags, defaults."""

from __future__ import annotations

import pytest

from lazyconv.errors import ProtocolError
from lazyconv.protocol import FetchRequest, FetchResponse
from lazyconv.protocol import _fetch as fetch

REQUEST = {
    "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 1,
    "session_id": 0, "session_epoch": -1, "cluster_id": "c1",
    "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "fetch_offset": 10, "partition_max_bytes": 500},
        {"partition": 1, "fetch_offset": 20, "partition_max_bytes": 500}]}],
    "forgotten_topics_data": [{"topic": "old", "partitions": [3]}],
    "rack_id": "r",
}


@pytest.mark.parametrize("version", [0, 3, 7, 11, 12, 13, 15, 17])
def test_every_truncation_of_a_request_raises_protocol_error(version: int) -> None:
    data = FetchRequest.encode(version, REQUEST)
    assert FetchRequest.decode(version, data)["topics"][0]["partitions"][1]["fetch_offset"] == 20
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            FetchRequest.decode(version, data[:cut])
        assert info.value.position is not None and 0 <= info.value.position <= cut


def test_trailing_bytes_after_a_request_are_rejected() -> None:
    data = FetchRequest.encode(4, REQUEST)
    with pytest.raises(ProtocolError, match="unexpected bytes") as info:
        FetchRequest.decode(4, data + b"\x00")
    assert info.value.position == len(data)


def test_framed_request_checks_size_api_key_and_version() -> None:
    good = FetchRequest.encode_framed(12, REQUEST, 1, "c")
    with pytest.raises(ProtocolError, match="size field"):
        FetchRequest.decode_framed(good[:-1])
    bad_key = good[:4] + b"\x00\x03" + good[6:]
    with pytest.raises(ProtocolError, match="not Fetch"):
        FetchRequest.decode_framed(bad_key)
    bad_version = good[:6] + b"\x00\x63" + good[8:]
    with pytest.raises(ProtocolError, match="not supported") as info:
        FetchRequest.decode_framed(bad_version)
    assert info.value.position == 6  # the request_api_version field


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(ProtocolError):
        FetchResponse(18, {})
    with pytest.raises(ProtocolError):
        FetchRequest.decode(-1, b"")


def test_unknown_tags_are_kept_and_tags_must_increase() -> None:
    data = bytearray(FetchRequest.encode(12, {**REQUEST, "cluster_id": None}))
    assert data[-1] == 0  # empty top-level tagged section
    data[-1:] = bytes.fromhex("01 05 02 abcd")  # one unknown tag 5 with 2 bytes
    body = FetchRequest.decode(12, bytes(data))
    assert body["_unknown_tagged_fields"] == {5: bytes.fromhex("abcd")}
    data[-5:] = bytes.fromhex("02 05 00 03 00")  # tag 3 after tag 5
    with pytest.raises(ProtocolError, match="increasing order"):
        FetchRequest.decode(12, bytes(data))


def test_unknown_tags_are_written_again_into_the_struct_they_came_in() -> None:
    """A decoded body encoded again at its version is the bytes it came as, unknown tags
    included (a relay that re-encodes an answer dropped them; found by a review). They go
    nowhere else: not into another struct, not where the version knows their tag, not into a
    version without tagged fields."""
    data = bytearray(FetchRequest.encode(12, {**REQUEST, "cluster_id": None}))
    assert data[-1] == 0  # the top-level tagged section: empty
    data[-1:] = bytes.fromhex("02 01 02 abcd 07 00")  # tags 1 and 7, which v12 does not know
    body = FetchRequest.decode(12, bytes(data))
    assert body["_unknown_tagged_fields"] == {1: bytes.fromhex("abcd"), 7: b""}
    assert FetchRequest.encode(12, body) == bytes(data)
    plain = {k: v for k, v in body.items() if k != "_unknown_tagged_fields"}
    part = body["topics"][0]["partitions"][0]
    part["_unknown_tagged_fields"] = body["_unknown_tagged_fields"]  # another struct's
    assert FetchRequest.encode(12, body) == bytes(data)
    del part["_unknown_tagged_fields"]
    # v15 knows tag 1 (ReplicaState): only tag 7 is written again; v11 has no tagged fields
    assert FetchRequest.encode(15, body) == \
        FetchRequest.encode(15, plain)[:-1] + bytes.fromhex("01 07 00")
    assert FetchRequest.encode(11, body) == FetchRequest.encode(11, plain)
    # an answer's, in a nested struct
    response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [{"partition_index": 0, "error_code": 0,
                                       "high_watermark": 5, "records": b""}]}]}
    answer = bytearray(fetch.SPEC.encode_response(12, response))
    assert answer[-3:] == b"\x00\x00\x00"  # the partition's, the topic's, the answer's sections
    answer[-3:-2] = bytes.fromhex("01 0b 01 01")  # an unknown tag in the partition
    decoded = fetch.SPEC.decode_response(12, bytes(answer))
    assert decoded["responses"][0]["partitions"][0]["_unknown_tagged_fields"] == {11: b"\x01"}
    assert fetch.SPEC.encode_response(12, decoded) == bytes(answer)


def test_known_tag_with_trailing_bytes_is_rejected() -> None:
    data = FetchRequest.encode(12, REQUEST)
    # cluster_id "c1" is tag 0: 01 00 04 03 63 31 00 ... make its size one larger than its value
    tail = bytes.fromhex("01 00 03 03 63 31")
    assert data.endswith(tail)
    broken = data[: -len(tail)] + bytes.fromhex("01 00 04 03 63 31 00")
    with pytest.raises(ProtocolError, match="unread bytes"):
        FetchRequest.decode(12, broken)


def test_missing_fields_take_schema_defaults() -> None:
    # Only the required shape: defaults fill in HW-independent fields (LSO -1, log start -1,
    # preferred replica -1, aborted = empty array, records = null).
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 3}]}]}
    data = FetchResponse(11, body).to_bytes(1)
    _, decoded = FetchResponse.decode_framed(11, data)
    assert decoded["throttle_time_ms"] == 0 and decoded["session_id"] == 0
    p = decoded["responses"][0]["partitions"][0]
    assert p == {"partition_index": 3, "error_code": 0, "high_watermark": 0,
                 "last_stable_offset": -1, "log_start_offset": -1,
                 "diverging_epoch": {"epoch": -1, "end_offset": -1},
                 "current_leader": {"leader_id": -1, "leader_epoch": -1},
                 "snapshot_id": {"end_offset": -1, "epoch": -1},
                 "aborted_transactions": [], "preferred_read_replica": -1, "records": None}


def test_fields_a_version_lacks_are_ignored_unless_strict() -> None:
    body = {"session_id": 9, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "preferred_read_replica": 2, "records": b""}]}]}
    lenient = FetchResponse(4, body)
    plain = FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": b""}]}]})
    assert lenient.to_bytes(1) == plain.to_bytes(1)
    with pytest.raises(ProtocolError, match="not in version 4"):
        FetchResponse(4, body, strict=True)
    # ignorable fields never raise
    FetchResponse(0, {"throttle_time_ms": 5, "responses": []}, strict=True)


def test_bad_values_name_the_field() -> None:
    with pytest.raises(ProtocolError, match=r"responses\[0\]\.partitions\[0\]\.error_code"):
        FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 70000}]}]})
    with pytest.raises(ProtocolError, match="size_in_bytes"):
        FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "records": object()}]}]})


@pytest.mark.parametrize("version", [0, 4, 11, 12, 16])
def test_every_truncation_of_a_response_raises_protocol_error(version: int) -> None:
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "aborted_transactions": [{"producer_id": 1, "first_offset": 2}],
         "current_leader": {"leader_id": 1, "leader_epoch": 1}, "records": b"abc"}]}],
        "node_endpoints": [{"node_id": 1, "host": "h", "port": 1}]}
    data = FetchResponse(version, body).to_bytes(1)[8 if version < 12 else 9:]
    FetchResponse.decode(version, data)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            FetchResponse.decode(version, data[:cut])



def test_strict_request_drops_the_ignorable_cluster_id() -> None:
    # FetchRequest.json marks ClusterId (tag 0, v12+) ignorable: Kafka drops it for v0-11
    # instead of failing (Kafka's serializer throws only for the non-ignorable ones).
    body = {"max_wait_ms": 1, "min_bytes": 1, "topics": [], "cluster_id": "c1"}
    assert FetchRequest.encode(11, body, strict=True) == FetchRequest.encode(11, {**body, "cluster_id": None})


def test_strict_refuses_non_default_structs_a_version_lacks() -> None:
    # Kafka compares a struct with a default-constructed one over all its fields, whatever the
    # version being written: a non-default ReplicaState in v14 or CurrentLeader in v11 is an
    # UnsupportedVersionException (both are non-ignorable).
    request = {"max_wait_ms": 1, "min_bytes": 1, "topics": [],
               "replica_state": {"replica_id": 1, "replica_epoch": 2}}
    with pytest.raises(ProtocolError, match="replica_state"):
        FetchRequest.encode(14, request, strict=True)
    FetchRequest.encode(14, {**request, "replica_state": {"replica_id": -1, "replica_epoch": -1}}, strict=True)
    response = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "current_leader": {"leader_id": 1, "leader_epoch": 3}}]}]}
    with pytest.raises(ProtocolError, match="current_leader"):
        FetchResponse(11, response, strict=True)
    FetchResponse(11, response)  # lenient: dropped


def test_an_array_field_given_a_non_list_names_the_field() -> None:
    for body, path in (
        ({"responses": 5}, r"FetchResponse\.responses"),
        ({"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "aborted_transactions": 3}]}]},
         r"responses\[0\]\.partitions\[0\]\.aborted_transactions"),
    ):
        with pytest.raises(ProtocolError, match=path):
            FetchResponse(4, body)


@pytest.mark.parametrize("version", [4, 12])
def test_a_response_larger_than_its_int32_size_field_is_refused(version: int) -> None:
    class Huge:  # records that claim 1 GiB each, never sent
        size_in_bytes = 1 << 30

        def to_send(self) -> None:
            raise AssertionError("not sent")

    partitions = [{"partition_index": i, "records": Huge()} for i in range(2)]
    with pytest.raises(ProtocolError, match="does not fit its int32 size field"):
        FetchResponse(version, {"responses": [{"topic": "t", "partitions": partitions}]})
