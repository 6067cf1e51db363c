"""Produce with acks=0 has no answer: one that fails in any partition closes the connection (the
requests before it answered first), so that the client notices, as Kafka's handleProduceRequest
does (requestChannel.closeConnection); one that succeeds leaves it open."""

from __future__ import annotations

import pytest

from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from tests.serve.test_append_validation import v2_batch
from tests.serve.test_produce_validation_e2e import BAD_PRODUCES, offsets_in
from tests.serve.wire import WireClient


def _body(acks: int, topic: str, parts: dict[int, bytes]) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": r} for p, r in parts.items()]}]}



@pytest.fixture
def two_partitions(tmp_path):
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    return tmp_path


@pytest.mark.parametrize("version", [3, 9])
def test_a_good_acks0_produce_is_appended_and_the_connection_stays_open(serve_logdir, two_partitions,
                                                                        version):
    server = serve_logdir(two_partitions)
    with WireClient(server.port) as client:
        client.send(produce.SPEC, version, _body(0, "t", {0: v2_batch(2)}))
        # the next request on the same connection is answered
        got = client.call(metadata.SPEC, 1, {"topics": None})
        assert {t["name"] for t in got["topics"]} == {"t"}
    assert offsets_in(two_partitions / "t-0" / f"{0:020d}.log") == [0, 1]


@pytest.mark.parametrize("case", ["unknown-topic", "broken-crc", "garbage-records"])
def test_a_failed_acks0_produce_closes_the_connection_after_the_answers_before_it(
        serve_logdir, two_partitions, case):
    server = serve_logdir(two_partitions)
    if case == "unknown-topic":
        bad = _body(0, "nope", {0: v2_batch(1)})
    else:
        bad = _body(0, "t", {0: BAD_PRODUCES[case][0](), 1: v2_batch(3)})
    with WireClient(server.port) as client:
        asked = client.send(produce.SPEC, 3, _body(1, "t", {0: v2_batch(2)}))
        client.send(produce.SPEC, 3, bad)  # pipelined: the answer before it still comes
        correlation_id, answer = client.receive(produce.SPEC, 3)
        assert correlation_id == asked
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert client.closed_by_server()
    if case != "unknown-topic":
        # the good partition of the failed request was appended, as Kafka appends it
        assert offsets_in(two_partitions / "t-1" / f"{0:020d}.log") == [0, 1, 2]
