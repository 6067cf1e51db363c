"""Fetch byte limits a client may send that Kafka does not refuse: negative MaxBytes and
partition MaxBytes are answered as Kafka's broker answers them, never by closing the connection."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.protocol import _fetch as fetch_api
from lazyconv.protocol import _produce as produce
from tests.serve.test_append_validation import v2_batch
from tests.serve.wire import WireClient


def _serve(serve_logdir: Any, tmp_path: Any, topics: tuple[str, ...] = ("t-0",)) -> Any:
    for name in topics:
        (tmp_path / name).mkdir()
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        for name in topics:
            topic, partition = name.rsplit("-", 1)
            client.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                          "topic_data": [{"name": topic, "partition_data": [
                                              {"index": int(partition), "records": v2_batch(3)}]}]})
    return server


def _fetch(port: int, version: int, parts: list[tuple[str, int, int]], max_bytes: int = 1 << 20,
           min_bytes: int = 0, max_wait_ms: int = 0) -> list[dict[str, Any]]:
    body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": limit}]}
                for topic, offset, limit in parts]}
    with WireClient(port) as client:
        answer = client.call(fetch_api.SPEC, version, body)
    return [p for t in answer["responses"] for p in t["partitions"]]


@pytest.mark.parametrize("version", [1, 4, 11])
def test_a_negative_partition_max_bytes_is_an_unknown_server_error_where_there_is_data(
        serve_logdir, tmp_path, version) -> None:
    # Kafka's LogSegment.read refuses a negative size (IllegalArgumentException), which its
    # ReplicaManager answers as UNKNOWN_SERVER_ERROR for that partition only; at the high
    # watermark nothing is read and the answer is the usual empty one
    server = _serve(serve_logdir, tmp_path)
    bad, at_end = (_fetch(server.port, version, [("t", offset, -1)])[0] for offset in (0, 3))
    assert (bad["error_code"], bad["high_watermark"], bad["records"] or b"") == (
        ErrorCode.UNKNOWN_SERVER_ERROR, -1, b"")
    assert (at_end["error_code"], at_end["high_watermark"], at_end["records"] or b"") == (0, 3, b"")


def test_a_negative_request_max_bytes_fails_the_first_partition_read_only(serve_logdir, tmp_path) -> None:
    # Kafka reads the first partition under min(partition MaxBytes, MaxBytes) < 0 and every later
    # one under max(0, MaxBytes - bytes read) = 0, with its first batch still given (KIP-74);
    # MinBytes is capped by the negative MaxBytes, so nothing waits
    server = _serve(serve_logdir, tmp_path, ("a-0", "b-0"))
    first, second = _fetch(server.port, 4, [("a", 0, 1 << 20), ("b", 0, 1 << 20)], max_bytes=-5,
                           min_bytes=1, max_wait_ms=5000)
    assert first["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR and not first["records"]
    assert second["error_code"] == 0 and second["high_watermark"] == 3 and second["records"]
