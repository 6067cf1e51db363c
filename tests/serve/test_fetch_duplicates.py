"""A partition named twice in one Fetch is answered once, as Kafka answers it: its
FetchRequest.fetchData is a map keyed by topic (name, or id from v13) and partition, so the
partition keeps the place where it was first named and the values it was named with last."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.protocol import _fetch as fetch_api
from lazyconv.protocol import _metadata as metadata
from tests.serve.test_fetch_limits import _serve
from tests.serve.wire import WireClient


def _answer(port: int, version: int, parts: list[tuple[Any, int]], by_id: bool = False) -> list[Any]:
    key = "topic_id" if by_id else "topic"
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {key: topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                             "partition_max_bytes": 1 << 20}]}
                for topic, offset in parts]}
    with WireClient(port) as client:
        answer = client.call(fetch_api.SPEC, version, body)
    return [(t[key], [(p["partition_index"], p["error_code"], len(p["records"] or b""))
                      for p in t["partitions"]]) for t in answer["responses"]]


@pytest.mark.parametrize("version", [1, 4, 12])
def test_a_partition_named_twice_is_answered_once_where_first_named_with_the_last_values(
        serve_logdir, tmp_path, version) -> None:
    server = _serve(serve_logdir, tmp_path, ("a-0", "b-0"))  # 3 records each, one batch
    full = _answer(server.port, version, [("a", 0)])[0][1][0][2]
    assert full > 0
    # read once, at offset 3 (the log end): no records, and no second entry for a-0
    assert _answer(server.port, version, [("a", 0), ("a", 3)]) == [("a", [(0, 0, 0)])]
    assert _answer(server.port, version, [("a", 3), ("b", 0), ("a", 0)]) == [
        ("a", [(0, 0, full)]), ("b", [(0, 0, full)])]
    # unknown partitions too (a map of the request, before anything is read)
    assert _answer(server.port, version, [("x", 0), ("x", 0)]) == [("x", [(0, 3, 0)])]


def test_fetch_v13_names_topics_by_id_and_answers_each_id_partition_once(serve_logdir, tmp_path) -> None:
    server = _serve(serve_logdir, tmp_path, ("a-0", "b-0"))
    with WireClient(server.port) as client:
        described = client.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    ids = {t["name"]: t["topic_id"] for t in described["topics"]}
    got = _answer(server.port, 13, [(ids["a"], 3), (ids["b"], 0), (ids["a"], 0)], by_id=True)
    assert [(topic_id, parts[0][1]) for topic_id, parts in got] == [(ids["a"], 0), (ids["b"], 0)]
    assert got[0][1][0][2] == got[1][1][0][2] > 0
