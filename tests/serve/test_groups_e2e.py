"""Consumer groups through the server: wire-level offsets and restarts, then real clients."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.protocol import (
    _describe_groups as describe_groups,
)
from lazyconv.protocol import (
    _join_group as join_group,
)
from lazyconv.protocol import (
    _list_groups as list_groups,
)
from lazyconv.protocol import (
    _offset_commit as offset_commit,
)
from lazyconv.protocol import (
    _offset_fetch as offset_fetch,
)
from lazyconv.protocol import (
    _sync_group as sync_group,
)
from tests.serve.test_topic_ids import make_topic
from tests.serve.wire import WireClient


def commit_body(version: int, group: str, offsets: dict[int, int], generation: int = -1,
                member: str = "") -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": f"m{p}"}
                for p, o in offsets.items()]}]}


def fetched(version: int, answer: dict) -> dict[int, tuple[int, str]]:
    topics = answer["groups"][0]["topics"] if version >= 8 else answer["topics"]
    return {p["partition_index"]: (p["committed_offset"], p["metadata"])
            for t in topics for p in t["partitions"]}


def test_committed_offsets_survive_a_restart_at_every_version(serve_logdir, tmp_path) -> None:
    make_topic(tmp_path, "t", partitions=3)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        for version in range(0, 9):
            answer = client.call(offset_commit.SPEC, version, commit_body(version, f"g{version}", {0: 2, 1: 3}))
            assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == [0, 0]
        bad = client.call(offset_commit.SPEC, 2, {"group_id": "g2", "generation_id_or_member_epoch": -1,
                                                  "topics": [{"name": "nope", "partitions": [
                                                      {"partition_index": 0, "committed_offset": 1}]}]})
        assert bad["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    server.stop()
    assert (tmp_path / "__lazyconv_offsets" / "offsets.json").is_file()
    restarted = serve_logdir(tmp_path)
    with WireClient(restarted.port) as client:
        for version in range(0, 9):
            group = f"g{version}"
            body: dict[str, Any]
            if version >= 8:
                body = {"groups": [{"group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]}]}
            else:
                body = {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]}
            answer = client.call(offset_fetch.SPEC, version, body)
            assert fetched(version, answer) == {0: (2, "m0"), 1: (3, "m1"), 2: (-1, "")}
        # v2+: null topics = everything the group committed
        every = client.call(offset_fetch.SPEC, 5, {"group_id": "g5", "topics": None})
        assert fetched(5, every) == {0: (2, "m0"), 1: (3, "m1")}
        listed = client.call(list_groups.SPEC, 4, {})
        assert {g["group_id"] for g in listed["groups"]} >= {f"g{v}" for v in range(9)}


def test_null_commit_metadata_is_fetched_as_empty_as_kafka_stores_it(serve_logdir, tmp_path) -> None:
    """Kafka stores a commit's null metadata as "" (OffsetAndMetadata.NO_METADATA), so an
    OffsetFetch answers ""; serve answered null (found by a review)."""
    make_topic(tmp_path, "t", partitions=1)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        body = commit_body(2, "gnull", {0: 5})
        body["topics"][0]["partitions"][0]["committed_metadata"] = None
        answer = client.call(offset_commit.SPEC, 2, body)
        assert answer["topics"][0]["partitions"][0]["error_code"] == 0
        got = client.call(offset_fetch.SPEC, 5, {"group_id": "gnull", "topics": None})
        assert fetched(5, got) == {0: (5, "")}


def test_the_empty_group_id_commits_as_kafka_allows_it(serve_logdir, tmp_path) -> None:
    """Kafka accepts OffsetCommit for the group id "" (the default group.id of the clients before
    2.2, which commit with assign()); serve answered INVALID_GROUP_ID (found by a review)."""
    make_topic(tmp_path, "t", partitions=1)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        for version in (0, 2, 8):
            answer = client.call(offset_commit.SPEC, version, commit_body(version, "", {0: 7}))
            assert answer["topics"][0]["partitions"][0]["error_code"] == 0
        got = client.call(offset_fetch.SPEC, 1, {"group_id": "", "topics": [{"name": "t", "partition_indexes": [0]}]})
        assert fetched(1, got) == {0: (7, "m0")}


def test_group_over_the_wire_and_generation_checks_on_commit(serve_logdir, tmp_path) -> None:
    make_topic(tmp_path, "t", partitions=2)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        join = {"group_id": "w", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"meta"}]}
        first = client.call(join_group.SPEC, 9, join)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"]
        member = first["member_id"]
        joined = client.call(join_group.SPEC, 9, dict(join, member_id=member))
        assert (joined["error_code"], joined["generation_id"], joined["leader"]) == (0, 1, member)
        assert joined["protocol_type"] == "consumer" and joined["protocol_name"] == "range"
        synced = client.call(sync_group.SPEC, 5, {"group_id": "w", "generation_id": 1, "member_id": member,
                                                  "protocol_type": "consumer", "protocol_name": "range",
                                                  "assignments": [{"member_id": member, "assignment": b"A"}]})
        assert synced["error_code"] == 0 and synced["assignment"] == b"A"
        wrong = client.call(offset_commit.SPEC, 8, commit_body(8, "w", {0: 1}, generation=5, member=member))
        assert wrong["topics"][0]["partitions"][0]["error_code"] == ErrorCode.ILLEGAL_GENERATION
        stranger = client.call(offset_commit.SPEC, 8, commit_body(8, "w", {0: 1}, generation=1, member="x"))
        assert stranger["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        ok = client.call(offset_commit.SPEC, 8, commit_body(8, "w", {0: 1}, generation=1, member=member))
        assert ok["topics"][0]["partitions"][0]["error_code"] == 0
        described = client.call(describe_groups.SPEC, 5, {"groups": ["w", "missing"]})
        w, missing = described["groups"]
        assert (w["group_state"], w["protocol_data"]) == ("Stable", "range")
        assert [(m["member_id"], m["member_assignment"]) for m in w["members"]] == [(member, b"A")]
        assert w["members"][0]["client_host"] == "/127.0.0.1"
        assert missing["group_state"] == "Dead"


kafka = pytest.importorskip("kafka")
from tests.interop.drivers.kafka_python_client import wait_for_subscribed_metadata  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 1), (2, 5), None], ids=str)
def test_kafka_python_group_of_two_splits_commits_and_resumes(serve_logdir, tmp_path, api_version) -> None:
    make_topic(tmp_path, "t", partitions=4, records=5)
    server = serve_logdir(tmp_path)
    extra = {"api_version": api_version} if api_version else {}
    seen: dict[str, set[int]] = {"c1": set(), "c2": set()}
    both_assigned = threading.Event()
    done = threading.Event()
    committed = threading.Barrier(2, timeout=20)  # nobody leaves (a rebalance) before both committed
    consumers = {}
    errors: dict[str, BaseException] = {}

    def run(name: str) -> None:
        try:
            member(name)
        except BaseException as exc:  # surfaced by the asserts below, not only as a warning
            errors[name] = exc
            raise

    def member(name: str) -> None:
        consumer = kafka.KafkaConsumer("t", bootstrap_servers=server.bootstrap, group_id="pair",
                                       client_id=name, auto_offset_reset="earliest", enable_auto_commit=False,
                                       fetch_max_wait_ms=100, heartbeat_interval_ms=300,
                                       session_timeout_ms=6000, **extra)
        consumers[name] = consumer
        # Wait for the topic's metadata before the first poll (the first JoinGroup): a leader that
        # assigns before it knows t's partitions hands out nothing and then rejoins only because
        # its metadata snapshot changed. kafka-python 3.0.x loses such a rejoin when poll()'s
        # timer expires while the JoinGroup waits for the other member: the assignment step inside
        # the still-running join task refreshes the snapshot, need_rejoin() turns False, and the
        # finished join is never collected, so the member stays "rebalancing" with its heartbeats
        # off until its session expires. Rejoins the coordinator asks for (REBALANCE_IN_PROGRESS,
        # MEMBER_ID_REQUIRED) set rejoin_needed, which outlives the timer, and are not affected.
        assert wait_for_subscribed_metadata(consumer, ["t"], {0, 1, 2, 3}), "no metadata for t"
        while not done.is_set():
            consumer.poll(100)
            parts = {tp.partition for tp in consumer.assignment()}
            seen[name] = parts
            if len(seen["c1"]) == 2 and len(seen["c2"]) == 2 and not seen["c1"] & seen["c2"]:
                both_assigned.set()
        consumer.commit({tp: kafka.OffsetAndMetadata(3, "", -1) if len(kafka.OffsetAndMetadata._fields) == 3
                         else kafka.OffsetAndMetadata(3, "") for tp in consumer.assignment()})
        committed.wait()
        consumer.close(autocommit=False)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("c1", "c2")]
    for t in threads:
        t.start()
    split = both_assigned.wait(30)
    done.set()
    assert split, (f"the two members never split the partitions: {seen}; errors {errors}; "
                   f"{server.server.handler.groups.coordinator.groups}")
    for t in threads:
        t.join(20)
    assert not errors
    assert seen["c1"] | seen["c2"] == {0, 1, 2, 3}
    # a restarted consumer resumes from the committed offsets (3 of 5 records per partition)
    consumer = kafka.KafkaConsumer("t", bootstrap_servers=server.bootstrap, group_id="pair",
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   fetch_max_wait_ms=100, **extra)
    assert wait_for_subscribed_metadata(consumer, ["t"], {0, 1, 2, 3}), "no metadata for t"
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(got) < 8 and time.monotonic() < deadline:
        for messages in consumer.poll(200).values():
            got.extend((m.partition, m.offset) for m in messages)
    consumer.close(autocommit=False)
    assert sorted(got) == [(p, o) for p in range(4) for o in (3, 4)]


def test_offsets_that_cannot_be_written_are_refused_not_half_kept(tmp_path, monkeypatch) -> None:
    from lazyconv.serve._offset_store import OffsetStore

    store = OffsetStore(tmp_path)
    from lazyconv.serve._offset_store import CommittedOffset
    store.commit("g", {("t", 0): CommittedOffset(5)})

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("lazyconv.serve._offset_store.write_atomically", broken)
    with pytest.raises(OSError):
        store.commit("g", {("t", 0): CommittedOffset(9), ("t", 1): CommittedOffset(1)})
    assert store.fetch("g", "t", 0) == CommittedOffset(5) and store.fetch("g", "t", 1) is None
    assert OffsetStore(tmp_path).fetch("g", "t", 0) == CommittedOffset(5)


def test_a_commit_fsyncs_the_folder_after_the_rename(tmp_path, monkeypatch) -> None:
    """The durability table promises committed offsets survive a power loss: the rename of the
    new file is durable only once its folder is fsynced (and the folder's own name once the log
    directory is). Found by a review: only the temporary file was fsynced."""
    from lazyconv.serve._offset_store import OFFSETS_DIRECTORY, CommittedOffset, OffsetStore

    synced: list[str] = []
    for where in ("lazyconv.serve._offset_store.fsync_directory", "lazyconv.logdir._durability.fsync_directory"):
        monkeypatch.setattr(where, lambda path: synced.append(str(path)))
    store = OffsetStore(tmp_path)
    store.commit("g", {("t", 0): CommittedOffset(5)})
    assert synced == [str(tmp_path), str(tmp_path / OFFSETS_DIRECTORY)]
    store.commit("g", {("t", 0): CommittedOffset(6)})
    assert synced[2:] == [str(tmp_path / OFFSETS_DIRECTORY)]


@pytest.mark.parametrize("content", [b"{nonsense", b"\xff\xfe{}"])
def test_an_offsets_file_that_is_not_ours_is_a_validation_error_naming_it(tmp_path, content) -> None:
    # bytes that are not UTF-8 once escaped as a bare UnicodeDecodeError ("bad value: 'utf-8'
    # codec ..." from serve, without the file's name)
    from lazyconv.errors import ValidationError
    from lazyconv.serve._offset_store import OFFSETS_DIRECTORY, OffsetStore

    (tmp_path / OFFSETS_DIRECTORY).mkdir()
    (tmp_path / OFFSETS_DIRECTORY / "offsets.json").write_bytes(content)
    with pytest.raises(ValidationError, match="offsets.json: not a lazyconv offsets file"):
        OffsetStore(tmp_path)
