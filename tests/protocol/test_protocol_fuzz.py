"""Hypothesis fuzzing of the Fetch codecs: random and mutated bytes for every version.

Decoding either succeeds or raises ProtocolError with a position inside the input; bodies of
every version round-trip through encode and decode.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import ProtocolError
from lazyconv.protocol import FetchRequest, FetchResponse
from lazyconv.protocol._fetch import FETCH_REQUEST_SCHEMA, FETCH_RESPONSE_SCHEMA
from lazyconv.protocol._schema import ArrayOf, Struct, default_value

VERSIONS = range(18)
REQUEST = {
    "cluster_id": "c", "replica_id": 3, "replica_state": {"replica_id": 3, "replica_epoch": 9},
    "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 1,
    "session_id": 0, "session_epoch": -1, "rack_id": "r",
    "topics": [{"topic": "t", "topic_id": uuid.UUID(int=7), "partitions": [
        {"partition": 0, "fetch_offset": 10, "partition_max_bytes": 500,
         "replica_directory_id": uuid.UUID(int=5)},
        {"partition": 1, "fetch_offset": 20, "partition_max_bytes": 500}]}],
    "forgotten_topics_data": [{"topic": "old", "topic_id": uuid.UUID(int=8), "partitions": [3, 4]}],
}
RESPONSE = {
    "throttle_time_ms": 5, "error_code": 0, "session_id": 3,
    "node_endpoints": [{"node_id": 1, "host": "h", "port": 9092, "rack": "r"}],
    "responses": [{"topic": "t", "topic_id": uuid.UUID(int=7), "partitions": [
        {"partition_index": 0, "high_watermark": 10, "last_stable_offset": 9, "log_start_offset": 0,
         "aborted_transactions": [{"producer_id": 1, "first_offset": 2}],
         "preferred_read_replica": 2, "records": bytes(range(40)),
         "diverging_epoch": {"epoch": 1, "end_offset": 5},
         "current_leader": {"leader_id": 1, "leader_epoch": 2},
         "snapshot_id": {"end_offset": 3, "epoch": 4}},
        {"partition_index": 1, "error_code": 3, "high_watermark": -1, "records": None}]}],
}
ENCODED = [("request", v, FetchRequest.encode(v, REQUEST)) for v in VERSIONS] + [
    ("response", v, FetchResponse(v, RESPONSE).to_bytes(7)[9 if v >= 12 else 8 :]) for v in VERSIONS
]


def decode(kind: str, version: int, data: bytes) -> None:
    try:
        if kind == "request":
            FetchRequest.decode(version, data)
        else:
            FetchResponse.decode(version, data)
    except ProtocolError as exc:
        assert exc.position is not None and 0 <= exc.position <= len(data), str(exc)


@settings(max_examples=150)
@given(st.sampled_from(["request", "response"]), st.sampled_from(VERSIONS), st.binary(max_size=120))
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_random_bytes_raise_only_positioned_protocol_errors(kind: str, version: int, data: bytes) -> None:
    decode(kind, version, data)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, int, bytes]:
    kind, version, data = draw(st.sampled_from(ENCODED))
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        position = draw(st.integers(0, len(data) - 4))
        struct.pack_into(">i", data, position, draw(st.sampled_from([-1, -2, 0, 2**31 - 1, 1 << 20])))
    if draw(st.booleans()):  # overlong / huge varints where compact lengths live
        position = draw(st.integers(0, len(data)))
        data[position:position] = draw(st.sampled_from([b"\xff" * 5, b"\x80" * 6, b"\xff\xff\xff\xff\x0f"]))
    cut = draw(st.integers(0, len(data)))
    if draw(st.booleans()):
        data = data[:cut]
    if draw(st.booleans()):
        version = draw(st.sampled_from(VERSIONS))  # bytes of one version read as another
    return kind, version, bytes(data)


@settings(max_examples=300)
@given(mutated())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_mutated_messages_raise_only_positioned_protocol_errors(case: tuple[str, int, bytes]) -> None:
    decode(*case)


def expected(struct_: Struct, value: dict, version: int) -> dict:
    """What decoding must give back: the version's fields, defaults for the others."""
    out = {}
    for f in struct_.fields:
        if not f.present_in(version) or (f.tag is not None and not f.tagged_in(version)):
            out[f.name] = default_value(f)
            continue
        v = value.get(f.name, default_value(f))
        if isinstance(f.type, ArrayOf) and isinstance(f.type.element, Struct) and v is not None:
            v = [expected(f.type.element, item, version) for item in v]
        elif isinstance(f.type, Struct):
            v = expected(f.type, v, version)
        out[f.name] = v
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_round_trips(version: int) -> None:
    assert FetchRequest.decode(version, FetchRequest.encode(version, REQUEST)) == expected(
        FETCH_REQUEST_SCHEMA, REQUEST, version
    )
    response = FetchResponse(version, RESPONSE)
    header, body = FetchResponse.decode_framed(version, response.to_bytes(11))
    assert header["correlation_id"] == 11
    assert body == expected(FETCH_RESPONSE_SCHEMA, RESPONSE, version)
