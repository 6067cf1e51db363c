"""The Fetch response scanner (:mod:`lazyconv.protocol._fetch_scan`): fed any response the
encoder writes, in pieces of any size, it finds every partition's records where the decoder finds
them, the framing around them byte for byte, and the positions of the fields a relay rewrites."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyconv.errors import RemoteProtocolError
from lazyconv.protocol._fetch import FETCH_RESPONSE_SCHEMA, FetchResponse
from lazyconv.protocol._fetch_scan import FetchResponseScanner
from tests.protocol.schema_values import after_round_trip, message_values

VERSIONS = range(10, 18)


def frame(version: int, body: dict[str, Any], correlation_id: int = 7) -> bytes:
    """The response without its size prefix."""
    return FetchResponse(version, body).to_send(correlation_id).to_bytes()[4:]


def scan_all(version: int, data: bytes, pieces: list[int]) -> tuple[list[tuple[str, Any]], list]:
    """Drive the scanner over ``data`` (after the correlation id) offering the bytes in windows
    that grow by ``pieces``; the parts it cut the stream into and the steps."""
    scanner = FetchResponseScanner(version, len(data))
    position = 4
    parts: list[tuple[str, Any]] = []
    steps = []
    sizes = iter(pieces * 1000)
    window = next(sizes)
    while not scanner.done:
        step = scanner.scan(data[position:position + window])
        if step is None:
            assert position + window < len(data), "it asked for more than the response holds"
            window += next(sizes)
            continue
        steps.append(step)
        framing = data[position:position + step.framing]
        parts.append(("framing", framing))
        position += step.framing
        if step.records:
            parts.append(("records", data[position:position + step.records]))
            scanner.records_read(step.records)
            position += step.records
        window = next(sizes)
    assert position == len(data)
    return parts, steps


@pytest.mark.slow  # hundreds of hypothesis examples: the full suite runs them
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_response_is_cut_where_its_records_are(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(VERSIONS))
    body = data.draw(message_values(FETCH_RESPONSE_SCHEMA, version))
    encoded = frame(version, body)
    pieces = data.draw(st.lists(st.integers(1, 64), min_size=1, max_size=5))
    parts, steps = scan_all(version, encoded, pieces)
    assert b"".join(p for _, p in parts) == encoded[4:]
    body = after_round_trip(FETCH_RESPONSE_SCHEMA, body, version)
    wanted = [p["records"] for t in body["responses"] for p in t["partitions"]]
    assert [bytes(p) for kind, p in parts if kind == "records"] == [bytes(r) for r in wanted if r]
    scanned = [p for s in steps for p in s.partitions]
    flat = [(t, p) for t in body["responses"] for p in t["partitions"]]
    # only the records of the response's very last partition are marked last
    with_records = [s for s in steps if s.records]
    last_has_records = bool(flat) and bool(flat[-1][1]["records"])
    assert [s.last for s in with_records] == [False] * len(with_records) if not last_has_records \
        else [False] * (len(with_records) - 1) + [True]
    assert [(p.partition, p.error_code, p.records_size) for p in scanned] == [
        (p["partition_index"], p["error_code"], -1 if p["records"] is None else len(p["records"]))
        for _, p in flat]
    for (topic, _), p in zip(flat, scanned, strict=True):
        assert p.topic == (topic["topic"] if version < 13 else topic["topic_id"].bytes)


def _field_at(step_framing: bytes, at: int, fmt: str) -> int:
    return struct.unpack_from(fmt, step_framing, at)[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_rewritable_fields_are_where_the_step_says(version: int) -> None:
    import uuid
    body = {"throttle_time_ms": 0, "error_code": 0x0102, "session_id": 0, "responses": [
        {"topic": "t", "topic_id": uuid.UUID(int=5), "partitions": [
            {"partition_index": 3, "error_code": 6, "high_watermark": 10,
             "current_leader": {"leader_id": 0x0A0B0C0D, "leader_epoch": 4},
             "preferred_read_replica": 0x01020304, "aborted_transactions": [
                 {"producer_id": 1, "first_offset": 2}], "records": b"x" * 70},
            {"partition_index": 4, "error_code": 0, "high_watermark": 10,
             "current_leader": {"leader_id": 0x11121314, "leader_epoch": 4},
             "preferred_read_replica": -1, "records": None},
        ]}]}
    encoded = frame(version, body)
    parts, steps = scan_all(version, encoded, [1000])
    first, second = steps
    framing0, framing1 = parts[0][1], parts[2][1]
    assert _field_at(framing0, first.error_at, ">h") == 0x0102
    p0, = first.partitions
    assert _field_at(framing0, p0.error_at, ">h") == 6
    if version >= 11:  # the field came with v11
        assert _field_at(framing0, p0.preferred_read_replica_at, ">i") == 0x01020304
    else:
        assert p0.preferred_read_replica_at == -1
    assert first.leader_ids_at == []  # its tags come after its records
    leaders = [_field_at(framing1, at, ">i") for at in second.leader_ids_at]
    assert leaders == ([0x0A0B0C0D, 0x11121314] if version >= 12 else [])  # tags: v12+
    p1, = second.partitions
    assert _field_at(framing1, p1.error_at, ">h") == 0 and p1.records_size == -1


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_records_running_past_the_response_are_refused() -> None:
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": b"y" * 40}]}]}
    encoded = bytearray(frame(12, body))
    scanner = FetchResponseScanner(12, len(encoded) - 10)  # a size that cuts the records
    with pytest.raises(RemoteProtocolError):
        scanner.scan(encoded[4:])


def test_an_array_longer_than_the_response_is_refused_at_once() -> None:
    # the response's own topic count says 1000: no waiting for bytes that cannot come
    data = b"\x00" + b"\x00" * 4 + b"\x00\x00" + b"\x00" * 4 + bytes([0xE9, 0x07])
    scanner = FetchResponseScanner(12, 4 + 100)
    with pytest.raises(RemoteProtocolError, match="claims"):
        scanner.scan(data)


def test_a_response_cut_short_asks_for_more_then_fails_when_nothing_more_is_in_it() -> None:
    body = {"responses": [{"topic": "topic", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": None}]}]}
    encoded = frame(12, body)
    scanner = FetchResponseScanner(12, len(encoded))
    assert scanner.scan(encoded[4:9]) is None  # inside the first unit: wait
    short = FetchResponseScanner(12, len(encoded) - 3)  # the size leaves out its last bytes
    with pytest.raises(RemoteProtocolError):
        while not short.done:
            step = short.scan(encoded[4:len(encoded) - 3])
            assert step is not None
