"""serve's ListOffsets answers for the negative timestamps, version by version, as Kafka's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _produce as produce
from tests.serve.test_append_validation import v2_batch
from tests.serve.wire import WireClient

# The first version at which Kafka 3.9.0 and 4.0.1 answer each negative timestamp (asked of
# both brokers at every version they serve, -1 to -7 and -100); any other: none.
KAFKA_SINCE = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9}
TIMESTAMPS = (-1, -2, -3, -4, -5, -6, -7, -100)


@pytest.mark.parametrize("version", range(list_offsets.MIN_VERSION, list_offsets.MAX_VERSION + 1))
def test_a_timestamp_the_version_does_not_define_is_unsupported_version(
        serve_logdir: Any, tmp_path: Path, version: int) -> None:
    """-3 (the largest timestamp) came with ListOffsets v7, -4 (the earliest local offset)
    with v8, -5 (the latest tiered offset) with v9; Kafka answers one the request's version
    does not define, and any other negative timestamp, UNSUPPORTED_VERSION (timestamp, offset
    and leader epoch -1), before looking the partition up: serve answered them all at any
    version, -5 and -7 as if they were timestamps (found by a review)."""
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path)

    def ask(client: WireClient, topic: str, timestamp: int) -> dict[str, Any]:
        answer = client.call(list_offsets.SPEC, version, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 1}]}]})
        part: dict[str, Any] = answer["topics"][0]["partitions"][0]
        return part

    with WireClient(server.port) as client:
        client.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                      "topic_data": [{"name": "t", "partition_data": [
                                          {"index": 0, "records": v2_batch(3)}]}]})
        for timestamp in TIMESTAMPS:
            defined = version >= KAFKA_SINCE.get(timestamp, 99)
            for topic in ("t", "unknown"):
                got = ask(client, topic, timestamp)
                if defined:
                    expected = 0 if topic == "t" else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    assert got["error_code"] == expected, (timestamp, topic)
                    continue
                assert got["error_code"] == ErrorCode.UNSUPPORTED_VERSION, (timestamp, topic)
                if version == 0:
                    assert got["old_style_offsets"] == []
                else:
                    assert (got["timestamp"], got["offset"]) == (-1, -1), (timestamp, topic)
                if version >= 4:
                    assert got["leader_epoch"] == -1, (timestamp, topic)
        if version >= 7:  # the largest timestamp: the last of 1000, 1001, 1002
            assert (ask(client, "t", -3)["offset"], ask(client, "t", -3)["timestamp"]) == (2, 1002)


@pytest.mark.parametrize(("timestamp", "version", "supported"), [
    (0, 0, True), (5, 1, True), (-1, 0, True), (-2, 1, True), (-3, 6, False), (-3, 7, True),
    (-4, 7, False), (-4, 8, True), (-5, 8, False), (-5, 9, True), (-5, 10, True), (-6, 10, False),
    (-7, 10, False), (-(1 << 63), 10, False)])
def test_timestamp_supported(timestamp: int, version: int, supported: bool) -> None:
    assert list_offsets.timestamp_supported(timestamp, version) is supported


@pytest.mark.parametrize("version", range(list_offsets.MIN_VERSION, list_offsets.MAX_VERSION + 1))
def test_a_partition_named_twice_is_invalid_request_from_v1(
        serve_logdir: Any, tmp_path: Path, version: int) -> None:
    """Kafka 3.9 answers every entry of a partition named twice in a ListOffsets v1+
    INVALID_REQUEST (before the timestamp check), the other partitions as usual, and v0 each
    entry; serve answered them all (found by a review)."""
    for partition in (0, 1):
        (tmp_path / f"t-{partition}").mkdir()
    server = serve_logdir(tmp_path)
    asked = [(0, -1), (1, -1), (0, -3)]
    with WireClient(server.port) as client:
        answer = client.call(list_offsets.SPEC, version, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "timestamp": ts, "max_num_offsets": 1} for p, ts in asked]}]})
    got = [(p["partition_index"], p["error_code"]) for p in answer["topics"][0]["partitions"]]
    if version == 0:  # v0 knows no -3
        assert got == [(0, 0), (1, 0), (0, ErrorCode.UNSUPPORTED_VERSION)]
    else:
        assert got == [(0, ErrorCode.INVALID_REQUEST), (1, 0), (0, ErrorCode.INVALID_REQUEST)]
        assert all(p["offset"] == -1 for p in answer["topics"][0]["partitions"][::2])
