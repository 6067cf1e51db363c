"""``lazyconv serve`` against the broker, request for request (issue 25).

A log written by a real broker (tests/kafka_logs.py: every codec, two transactional producers
with commits and aborts, an idempotent producer, LogAppendTime, several segments, DeleteRecords,
a transactional topic compacted by the log cleaner, records under two leader epochs)
is copied after a clean shutdown; the broker is started again on its own data and ``serve``
(in-process) on the copy. The same raw requests (lazyconv.protocol's encoders) go to both, and
the decoded responses are compared field by field:

- Fetch at many versions, offsets and sizes, both isolation levels, one partition and all of
  them in one request (Kafka 4.x for v4-v17; Kafka 3.9 for v0-v3, which it still
  down-converts); the records byte for byte, down-converted compressed wrappers included
  (gzip, snappy and lz4 compress as Kafka's Java does), but where Kafka sends a batch twice
  (docs/differences.md, "No duplicate batch"): there the same records, and where its duplicate
  starts in the part cut off at the committed size, lazyconv's padding in its place;
- ListOffsets at every version each broker serves, every special timestamp and real ones,
  both isolation levels;
- Metadata at every version each broker serves.

The leader epoch of an offset found by timestamp (the batch's) and of the log start (the
leader-epoch checkpoint's) must match too: the ``epochs`` topic has records under two epochs.

What may differ is listed in ``IDENTITY`` below (the node's id, port, the cluster id and the
partition leader epoch are the broker's own, not in the log) and in docs/differences.md.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
from kafka_logs import CODECS, DELETED_BEFORE, EPOCH_2_TIME, T0

from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.records import MemoryRecords
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread

pytestmark = pytest.mark.kafka

TOPICS = [f"codec-{c}" for c in CODECS] + ["txn", "idempotent", "log-append", "segments", "deleted",
                                           "compacted", "epochs"]
MIB = 1 << 20


class Pair(NamedTuple):
    kafka: WireClient
    serve: WireClient
    high: dict[str, int]
    topic_ids: dict[str, Any]

    def both(self, spec: Any, version: int, body: dict[str, Any]) -> tuple[dict, dict]:
        return self.kafka.call(spec, version, body), self.serve.call(spec, version, body)


def _pair(oracle: Any) -> Iterator[Pair]:
    oracle.broker.start()
    server = ServerThread(oracle.copy)
    kafka = WireClient(oracle.broker.port, "differential")
    serve = WireClient(server.port, "differential")
    try:
        answer = kafka.call(metadata.SPEC, 12, {"topics": None, "allow_auto_topic_creation": False})
        ids = {t["name"]: t["topic_id"] for t in answer["topics"]}
        high: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while len(high) < len(TOPICS):  # right after a start the broker may not lead them yet
            for topic in TOPICS:
                body = _list_offsets_body(topic, -1, 0)
                part = kafka.call(list_offsets.SPEC, 1, body)["topics"][0]["partitions"][0]
                if part["error_code"] == 0:
                    high[topic] = part["offset"]
            assert time.monotonic() < deadline, f"the broker does not lead {set(TOPICS) - set(high)}"
            time.sleep(0.2 if len(high) < len(TOPICS) else 0)
        yield Pair(kafka, serve, high, ids)
    finally:
        kafka.close()
        serve.close()
        server.stop()
        oracle.broker.stop()


@pytest.fixture(scope="module")
def pair_4(oracle_log_4) -> Iterator[Pair]:
    yield from _pair(oracle_log_4)


@pytest.fixture(scope="module")
def pair_3(oracle_log_3) -> Iterator[Pair]:
    yield from _pair(oracle_log_3)


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two decoded responses differ, field by field (``path: ours != theirs``)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = []
        for key in sorted(set(ours) | set(theirs), key=str):
            found += differences(ours.get(key, "<absent>"), theirs.get(key, "<absent>"), f"{path}.{key}")
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        found = []
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            found += differences(a, b, f"{path}[{i}]")
        return found
    return [] if ours == theirs else [f"{path}: lazyconv {ours!r} != Kafka {theirs!r}"]


# -- Fetch ---------------------------------------------------------------------------------------


def _fetch_body(pair: Pair, version: int, parts: list[tuple[str, int, int]], *,
                isolation: int = 0, max_bytes: int = 50 * MIB) -> dict[str, Any]:
    topics = []
    for topic, offset, size in parts:
        entry: dict[str, Any] = {"partitions": [{"partition": 0, "fetch_offset": offset,
                                                 "partition_max_bytes": size}]}
        if version >= 13:
            entry["topic_id"] = pair.topic_ids[topic]
        else:
            entry["topic"] = topic
        topics.append(entry)
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": topics, "forgotten_topics_data": [], "rack_id": ""}


def _records(data: bytes) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in MemoryRecords(data).records()]


def without_repeats(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    seen: set[int] = set()
    kept = []
    for record in records:
        if record[0] not in seen:
            seen.add(record[0])
            kept.append(record)
    return kept


def compare_fetch(pair: Pair, version: int, body: dict[str, Any], where: str) -> bool:
    """Compares one Fetch; returns True when Kafka sent a batch twice (docs/differences.md,
    "No duplicate batch": a down-converted answer whose first input batch converts to nothing,
    a transaction marker, makes Kafka 3's lazy send convert the next batch twice)."""
    repeated = False
    theirs, ours = pair.both(fetch.SPEC, version, body)
    assert ours.get("error_code", 0) == theirs.get("error_code", 0), where
    assert len(ours["responses"]) == len(theirs["responses"]), where
    for their_topic, our_topic in zip(theirs["responses"], ours["responses"], strict=True):
        assert our_topic.get("topic") == their_topic.get("topic"), where
        assert our_topic.get("topic_id") == their_topic.get("topic_id"), where
        for their_part, our_part in zip(their_topic["partitions"], our_topic["partitions"], strict=True):
            their_records = bytes(their_part.pop("records") or b"")
            our_records = bytes(our_part.pop("records") or b"")
            assert not differences(our_part, their_part), (where, differences(our_part, their_part))
            if our_records == their_records:
                continue
            # only a down-converted compressed answer may differ in bytes: the same records,
            # the compressed wrappers within 2 % of Kafka's size
            assert version <= 3, f"{where}: records differ ({len(our_records)} vs {len(their_records)} bytes)"
            our_list, their_list = _records(our_records), _records(their_records)
            if our_list != their_list and our_list == without_repeats(their_list):
                repeated = True  # Kafka's duplicate batch; lazyconv sends it once
                continue
            assert our_list == their_list, where
            # the same records in other bytes: only where Kafka's duplicate batch begins in the
            # part a client drops (cut at the committed size) and lazyconv pads there instead;
            # every compressed wrapper is Kafka's byte for byte (gzip, snappy 1.1.10, lz4)
            assert _hidden_repeat(our_records, their_records), f"{where}: same records, other bytes"
    return repeated


def _whole_entries_end(data: bytes) -> int:
    """Where the entries a client reads end: after the last entry that is all in ``data``."""
    position = 0
    while position + 12 <= len(data):
        size = int.from_bytes(data[position + 8:position + 12], "big", signed=True)
        if size < 0 or position + 12 + size > len(data):
            break
        position += 12 + size
    return position


def _hidden_repeat(ours: bytes, theirs: bytes) -> bool:
    """Whether the two answers differ only after the entries a client reads, where lazyconv
    pads (an overflow header, offset -1, or a prefix of one) and Kafka begins an entry it cut
    off at the committed size (its duplicate batch: an offset it already sent, when the header
    is all there)."""
    end = _whole_entries_end(ours)
    if len(ours) != len(theirs) or ours[:end] != theirs[:end] or _whole_entries_end(theirs) != end:
        return False
    our_tail, their_tail = ours[end:], theirs[end:]
    if not (b"\xff" * 8).startswith(our_tail[:8]):  # not lazyconv's padding
        return False
    if len(their_tail) >= 12:
        their_offset = int.from_bytes(their_tail[:8], "big", signed=True)
        sent = [r.offset for r in MemoryRecords(theirs[:end]).records()]
        return bool(sent) and their_offset <= max(sent)
    return True


def _offsets(pair: Pair, topic: str) -> list[int]:
    high = pair.high[topic]
    offsets = {0, 1, 37, high // 2, high - 1, high, high + 5}
    if topic == "deleted":
        offsets |= {DELETED_BEFORE - 1, DELETED_BEFORE, DELETED_BEFORE + 1}
    if topic == "segments":
        offsets |= {981, 982, 983, 1964}
    if topic == "compacted":  # offsets the cleaner removed, markers, the aborted transaction
        offsets |= {59, 60, 61, 130, 182, 250, 303, 304}
    return sorted(offsets)


SIZES = [1, 300, 5000, MIB]


@pytest.mark.parametrize("version", [4, 12, 17])
@pytest.mark.parametrize("isolation", [0, 1])
def test_fetch_every_topic_offset_and_size(pair_4: Pair, version: int, isolation: int) -> None:
    for topic in TOPICS:
        for offset in _offsets(pair_4, topic):
            for size in SIZES:
                body = _fetch_body(pair_4, version, [(topic, offset, size)], isolation=isolation)
                compare_fetch(pair_4, version, body, f"Fetch v{version} {topic}@{offset} {size} B iso {isolation}")


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16])
def test_fetch_other_versions(pair_4: Pair, version: int) -> None:
    for isolation in (0, 1):
        for topic in ("codec-lz4", "txn", "deleted", "log-append"):
            for offset in (0, DELETED_BEFORE, pair_4.high[topic] - 1):
                body = _fetch_body(pair_4, version, [(topic, offset, 5000)], isolation=isolation)
                compare_fetch(pair_4, version, body, f"Fetch v{version} {topic}@{offset} iso {isolation}")


@pytest.mark.parametrize("version", [4, 12, 17])
def test_fetch_all_partitions_in_one_request(pair_4: Pair, version: int) -> None:
    """The response-wide max_bytes shared out over partitions in request order."""
    for max_bytes in (1, 20_000, 200_000, 50 * MIB):
        for isolation in (0, 1):
            parts = [(topic, 0, 64 * 1024) for topic in TOPICS]
            body = _fetch_body(pair_4, version, parts, isolation=isolation, max_bytes=max_bytes)
            compare_fetch(pair_4, version, body, f"Fetch v{version} all, max {max_bytes} iso {isolation}")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_down_converted_by_kafka_3(pair_3: Pair, version: int) -> None:
    """Kafka 3.9 down-converts to magic 0 (v0, v1) and 1 (v2, v3); zstd is refused."""
    repeated = []
    for topic in TOPICS:
        for offset in _offsets(pair_3, topic):
            for size in SIZES:
                body = _fetch_body(pair_3, version, [(topic, offset, size)])
                where = f"Fetch v{version} {topic}@{offset} {size} B"
                if compare_fetch(pair_3, version, body, where):
                    repeated.append(where)
    # Kafka's duplicate batch shows where a fetch starts at a transaction marker followed by
    # a batch in the same chunk (the compacted topic at offset 304), whatever the size beyond
    # the marker's; nowhere else
    assert repeated == [f"Fetch v{version} compacted@304 {size} B" for size in SIZES[1:]]
    if version == 3:
        parts = [(topic, 0, 64 * 1024) for topic in TOPICS]
        for max_bytes in (1, 20_000, 50 * MIB):
            compare_fetch(pair_3, 3, _fetch_body(pair_3, 3, parts, max_bytes=max_bytes),
                          f"Fetch v3 all, max {max_bytes}")


# -- ListOffsets ---------------------------------------------------------------------------------


def _list_offsets_body(topic: str, timestamp: int, isolation: int,
                       max_num_offsets: int = 1) -> dict[str, Any]:
    return {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp,
         "max_num_offsets": max_num_offsets}]}]}


def _timestamps(version: int) -> list[int]:
    found = [-1, -2, 0, T0, T0 + 5, T0 + 555, T0 + EPOCH_2_TIME + 7, T0 + 10**7, 4_000_000_000_000]
    if version >= 7:
        found.append(-3)  # the offset of the largest timestamp
    if version >= 8:
        found.append(-4)  # the earliest local offset (tiered storage)
    return found


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_every_version_and_timestamp(pair_4: Pair, version: int) -> None:
    for topic in TOPICS:
        for timestamp in _timestamps(version):
            for isolation in ((0, 1) if version >= 2 else (0,)):
                body = _list_offsets_body(topic, timestamp, isolation)
                theirs, ours = pair_4.both(list_offsets.SPEC, version, body)
                where = f"ListOffsets v{version} {topic} {timestamp} iso {isolation}"
                if timestamp == -1:  # the current leader epoch: the controller's (IDENTITY)
                    for answer in (ours, theirs):
                        answer["topics"][0]["partitions"][0].pop("leader_epoch", None)
                assert not differences(ours, theirs), (where, differences(ours, theirs))


def test_list_offsets_v0(pair_3: Pair) -> None:
    for topic in TOPICS:
        for timestamp in (-1, -2, T0 + 5, 4_000_000_000_000):
            for count in (1, 10):
                body = _list_offsets_body(topic, timestamp, 0, count)
                theirs, ours = pair_3.both(list_offsets.SPEC, 0, body)
                where = f"ListOffsets v0 {topic} {timestamp} max {count}"
                assert not differences(ours, theirs), (where, differences(ours, theirs))


# -- Metadata ------------------------------------------------------------------------------------

# The broker's identity and the controller's state, not in the log: the node id and port (and
# so leader, replicas, isr, controller), the cluster id, and the partition leader epoch (the
# controller bumps it at each election, e.g. at every restart; serve reports the last epoch in
# the partition's leader-epoch-checkpoint): docs/differences.md, "serve".
IDENTITY = ("node_id", "port", "cluster_id", "controller_id", "leader_id", "replica_nodes",
            "isr_nodes", "leader_epoch")


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    node = answer["brokers"][0]["node_id"]
    assert [b["node_id"] for b in answer["brokers"]] == [node]
    assert answer["controller_id"] in (node, -1)
    topics = {}
    for topic in answer["topics"]:
        if topic["name"].startswith("__"):
            continue  # the broker's own state (__transaction_state): not in the copied log
        parts = []
        for part in topic["partitions"]:
            assert part["leader_id"] == node and part["replica_nodes"] == part["isr_nodes"] == [node]
            parts.append({k: v for k, v in part.items() if k not in IDENTITY})
        topics[topic["name"]] = {**{k: v for k, v in topic.items() if k != "partitions"}, "partitions": parts}
    rest = {k: v for k, v in answer.items() if k not in ("brokers", "topics", *IDENTITY)}
    brokers = [{k: v for k, v in b.items() if k not in IDENTITY} for b in answer["brokers"]]
    return {"brokers": brokers, "topics": topics, **rest}


@pytest.mark.parametrize("version", range(4, 13))
def test_metadata_every_version(pair_4: Pair, version: int) -> None:
    no_id = uuid.UUID(int=0)
    for topics in (None, [{"name": t, "topic_id": no_id} for t in ("txn", "deleted")],
                   [{"name": "no-such-topic", "topic_id": no_id}]):
        body = {"topics": topics, "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        theirs, ours = pair_4.both(metadata.SPEC, version, body)
        found = differences(_comparable(ours), _comparable(theirs))
        assert not found, (f"Metadata v{version} {topics}", found)
