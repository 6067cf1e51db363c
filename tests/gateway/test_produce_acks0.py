"""A Produce with acks=0 through the gateway: one the gateway refuses itself (an unknown topic,
an old producer's message set that does not up-convert) closes the client's connection once the
answers before it are written, as Kafka closes it (the client reads no answer, so it would never
know); one that goes through leaves it open."""

from __future__ import annotations

import pytest

from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, RecordsBuilder
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread


def _legacy_set(count: int) -> bytes:
    builder = RecordsBuilder(1, Compression.NONE, base_offset=0)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i)
    return builder.build()


def _body(acks: int, parts: list[tuple[str, bytes]]) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}
        for topic, records in parts]}



def _log_bytes(folder) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.log")))


@pytest.fixture
def upstream(tmp_path):
    for name in ("sink-0", "other-0"):
        (tmp_path / name).mkdir()
    server = ServerThread(tmp_path)
    yield server
    server.stop()


def test_a_good_acks0_produce_goes_through_and_the_connection_stays_open(upstream, gateway_factory,
                                                                         tmp_path):
    gateway = gateway_factory(upstream.bootstrap)
    with WireClient(gateway.port) as client:
        client.send(produce.SPEC, 2, _body(0, [("sink", _legacy_set(2))]))
        answer = client.call(produce.SPEC, 2, _body(1, [("sink", _legacy_set(1))]))
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert answer["responses"][0]["partition_responses"][0]["base_offset"] == 2


@pytest.mark.parametrize("case", ["unknown-topic", "corrupt-message-set"])
def test_an_acks0_produce_the_gateway_refuses_closes_the_connection(upstream, gateway_factory,
                                                                    tmp_path, case):
    gateway = gateway_factory(upstream.bootstrap)
    if case == "unknown-topic":
        bad = _body(0, [("nope", _legacy_set(1)), ("other", _legacy_set(2))])
    else:
        corrupt = bytearray(_legacy_set(2))
        corrupt[20] ^= 0xFF  # inside the first message, after its CRC
        bad = _body(0, [("sink", bytes(corrupt)), ("other", _legacy_set(2))])
    with WireClient(gateway.port) as client:
        asked = client.send(produce.SPEC, 2, _body(1, [("sink", _legacy_set(1))]))
        client.send(produce.SPEC, 2, bad)  # pipelined: the answer before it still comes
        correlation_id, answer = client.receive(produce.SPEC, 2)
        assert correlation_id == asked
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert client.closed_by_server()
    # the request's other partition went upstream all the same, as Kafka appends it
    with WireClient(gateway.port) as client:
        again = client.call(produce.SPEC, 2, _body(1, [("other", _legacy_set(1))]))
    assert again["responses"][0]["partition_responses"][0]["base_offset"] == 2
