"""A Fetch waiting for MinBytes is woken by an append instead of re-planning every few ms."""

from __future__ import annotations

import threading
import time

import pytest

from lazyconv.protocol import _fetch as fetch_api
from lazyconv.protocol import _produce as produce
from tests.serve.test_append_validation import v2_batch
from tests.serve.wire import WireClient


@pytest.mark.slow
def test_min_bytes_wait_is_woken_by_a_produce_and_does_not_poll(serve_logdir, tmp_path):
    (tmp_path / "t-0").mkdir()
    server = serve_logdir(tmp_path)
    handler = server.server.handler._fetch
    plans = 0
    plan_fetch = handler._plan_fetch

    def counting(*args, **kwargs):
        nonlocal plans
        plans += 1
        return plan_fetch(*args, **kwargs)

    handler._plan_fetch = counting
    body = {"replica_id": -1, "max_wait_ms": 10000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    answer: dict = {}

    def consume() -> None:
        with WireClient(server.port) as client:
            answer.update(client.call(fetch_api.SPEC, 4, body))
            answer["at"] = time.monotonic()

    consumer = threading.Thread(target=consume)
    consumer.start()
    time.sleep(0.6)  # the fetch waits at the high watermark
    waited_plans = plans
    with WireClient(server.port) as producer:
        producer.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                        "topic_data": [{"name": "t", "partition_data": [
                                            {"index": 0, "records": v2_batch(2)}]}]})
    produced_at = time.monotonic()
    consumer.join(10)
    assert answer["responses"][0]["partitions"][0]["high_watermark"] == 2
    assert answer["at"] - produced_at < 0.2  # woken by the append, long before max_wait_ms
    assert waited_plans <= 4  # a look every 250 ms at most while waiting (was every 20 ms: 30)


def test_list_offsets_over_many_partitions_is_answered_off_the_loop(serve_logdir, tmp_path):
    from lazyconv.protocol import _list_offsets as list_offsets

    for partition in range(120):  # each named once: v1+ refuses a partition named twice
        (tmp_path / f"t-{partition}").mkdir()
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        client.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                      "topic_data": [{"name": "t", "partition_data": [
                                          {"index": p, "records": v2_batch(3)} for p in range(120)]}]})
        asked = [{"partition_index": p, "timestamp": (1_001, 1_002, -1)[p % 3]} for p in range(120)]
        answer = client.call(list_offsets.SPEC, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": asked}]})
    offsets = [p["offset"] for p in answer["topics"][0]["partitions"]]
    assert offsets == [1, 2, 3] * 40  # timestamps 1000, 1001, 1002: by timestamp, then latest
    assert server.server.handler._fetch._pool is not None  # answered on the fetch thread pool


def test_min_bytes_wait_ends_at_once_on_a_read_error_or_nothing_to_read(serve_logdir, tmp_path):
    """Kafka's fetchMessages answers at once when a partition's read fails (offset out of range)
    or no partition named can be read (all unknown), not after MaxWaitMs; a known partition at
    its high watermark next to an unknown one still waits."""
    (tmp_path / "t-0").mkdir()
    (tmp_path / "u-0").mkdir()
    server = serve_logdir(tmp_path)

    def fetch(client: WireClient, parts: list[tuple[str, int]], max_wait_ms: int) -> tuple[float, list[int]]:
        body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
                    for topic, offset in parts]}
        started = time.monotonic()
        answer = client.call(fetch_api.SPEC, 4, body)
        return time.monotonic() - started, [p["error_code"] for t in answer["responses"]
                                             for p in t["partitions"]]

    with WireClient(server.port) as client:
        client.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                      "topic_data": [{"name": "t", "partition_data": [
                                          {"index": 0, "records": v2_batch(2)}]}]})
        took, codes = fetch(client, [("t", 100)], 10000)
        assert codes == [1] and took < 5  # OFFSET_OUT_OF_RANGE at once (was after 10 s)
        took, codes = fetch(client, [("u", 0), ("t", 100)], 10000)  # u-0 alone would wait
        assert codes == [0, 1] and took < 5
        took, codes = fetch(client, [("nope", 0)], 10000)
        assert codes == [3] and took < 5  # UNKNOWN_TOPIC_OR_PARTITION: nothing to wait for
        took, codes = fetch(client, [("t", 2), ("nope", 0)], 300)
        assert codes == [0, 3] and took >= 0.25  # the known partition waits for data


def test_an_append_while_a_fetch_is_planned_off_the_loop_wakes_it(serve_logdir, tmp_path, monkeypatch):
    """A Produce answered while a many-partition fetch is being planned on the fetch thread
    (before it starts waiting) is not missed: the fetch looks again at once, not at the next
    poll of the log (raised to 10 s here to tell them apart)."""
    from lazyconv.serve import _fetch_handler

    monkeypatch.setattr(_fetch_handler, "FETCH_POLL_INTERVAL_S", 10.0)
    for p in range(_fetch_handler.OFF_LOOP_PARTITIONS):
        (tmp_path / f"t-{p}").mkdir()
    server = serve_logdir(tmp_path)
    handler = server.server.handler._fetch
    planning, produced = threading.Event(), threading.Event()
    plan_fetch = handler._plan_fetch

    def first_plan_outlives_the_produce(*args, **kwargs):
        plan = plan_fetch(*args, **kwargs)
        if not planning.is_set():
            planning.set()
            produced.wait(10)
        return plan

    handler._plan_fetch = first_plan_outlives_the_produce
    body = {"replica_id": -1, "max_wait_ms": 20000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": "t", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                for p in range(_fetch_handler.OFF_LOOP_PARTITIONS)]}]}
    answer: dict = {}

    def consume() -> None:
        with WireClient(server.port, timeout=30) as client:
            answer.update(client.call(fetch_api.SPEC, 4, body))
            answer["at"] = time.monotonic()

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert planning.wait(10)
    with WireClient(server.port) as producer:
        producer.call(produce.SPEC, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                        "topic_data": [{"name": "t", "partition_data": [
                                            {"index": 0, "records": v2_batch(2)}]}]})
    produced_at = time.monotonic()
    produced.set()
    consumer.join(30)
    assert answer["responses"][0]["partitions"][0]["high_watermark"] == 2
    assert answer["at"] - produced_at < 5  # was 10 s: the append's wake-up came before the wait
