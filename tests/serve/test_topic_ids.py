"""Topic ids: kept in partition.metadata as Kafka keeps them, served by Metadata v10+ and used
by Fetch v13+."""

from __future__ import annotations

import uuid

import pytest

from lazyconv.errors import ErrorCode, ValidationError
from lazyconv.logdir._directory import LogDirectory
from lazyconv.logdir._topic_ids import read_topic_id, text_to_uuid, uuid_to_text
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _metadata as metadata
from lazyconv.records import RecordsBuilder
from tests.serve.wire import WireClient


def make_topic(root, topic: str, partitions: int = 2, records: int = 3) -> None:
    for p in range(partitions):
        builder = RecordsBuilder(2)
        for i in range(records):
            builder.append(offset=i, timestamp=1000 + i, key=None, value=f"{topic}-{p}-{i}".encode())
        d = root / f"{topic}-{p}"
        d.mkdir()
        (d / f"{0:020d}.log").write_bytes(builder.build())


def test_uuid_text_is_kafkas_url_safe_base64() -> None:
    value = uuid.UUID("fb0b2bff-3a9b-4a2f-9f54-1a8d9e3ff0c2")
    text = uuid_to_text(value)
    assert len(text) == 22 and "=" not in text and text_to_uuid(text) == value
    with pytest.raises(ValidationError):
        text_to_uuid("not-an-id")


def test_topic_id_is_created_once_and_kept_in_every_partition_folder(tmp_path) -> None:
    make_topic(tmp_path, "t")
    first = LogDirectory(tmp_path).topic_id("t")
    for p in (0, 1):
        text = (tmp_path / f"t-{p}" / "partition.metadata").read_text()
        assert text == f"version: 0\ntopic_id: {uuid_to_text(first)}"
        assert read_topic_id(tmp_path / f"t-{p}") == first
    assert not uuid_to_text(first).startswith("-") and first.int not in (0, 1)
    # a restart reads it back; a new partition folder gets the same id
    (tmp_path / "t-2").mkdir()
    again = LogDirectory(tmp_path)
    assert again.topic_id("t") == first and again.topic_name(first) == "t"
    assert read_topic_id(tmp_path / "t-2") == first


def test_an_existing_kafka_id_is_used(tmp_path) -> None:
    make_topic(tmp_path, "t", partitions=1)
    (tmp_path / "t-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAg")
    assert LogDirectory(tmp_path).topic_id("t") == uuid.UUID(int=2)


def test_a_partition_metadata_that_is_not_text_gets_a_new_id(tmp_path) -> None:
    # it raised an untyped UnicodeDecodeError, which failed every Metadata v10+ request (for all
    # topics) and every Fetch v13+ naming an unknown id: it is malformed like any other content
    make_topic(tmp_path, "t", partitions=1)
    bad = tmp_path / "t-0"
    (bad / "partition.metadata").write_bytes(b"version: 0\ntopic_id: \xff\xfe")
    with pytest.raises(ValidationError, match="partition.metadata"):
        read_topic_id(bad)
    topic_id = LogDirectory(tmp_path).topic_id("t")
    assert read_topic_id(bad) == topic_id


def test_metadata_v10_plus_and_fetch_v13_plus_use_topic_ids(serve_logdir, tmp_path) -> None:
    make_topic(tmp_path, "a")
    make_topic(tmp_path, "b", partitions=1)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        ids = {}
        for version in range(9, 13):
            answer = client.call(metadata.SPEC, version, {"topics": None})
            topics = {t["name"]: t for t in answer["topics"]}
            assert set(topics) == {"a", "b"}
            if version >= 10:
                ids = {name: t["topic_id"] for name, t in topics.items()}
                assert all(i.int != 0 for i in ids.values())
        # v12: asked by id alone
        by_id = client.call(metadata.SPEC, 12, {"topics": [{"topic_id": ids["b"], "name": None}]})
        assert [(t["name"], t["error_code"]) for t in by_id["topics"]] == [("b", 0)]
        unknown = client.call(metadata.SPEC, 12, {"topics": [{"topic_id": uuid.UUID(int=7), "name": None}]})
        assert unknown["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        for version in (13, 15, 17):
            answer = client.call(fetch.SPEC, version, {
                "max_wait_ms": 0, "min_bytes": 0, "topics": [
                    {"topic_id": ids["a"], "partitions": [
                        {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
                    {"topic_id": uuid.UUID(int=7), "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            good, bad = answer["responses"]
            assert good["topic_id"] == ids["a"] and good["partitions"][0]["error_code"] == 0
            assert b"a-1-2" in good["partitions"][0]["records"]
            assert bad["topic_id"] == uuid.UUID(int=7)
            assert bad["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
            assert bad["partitions"][0]["records"] == b""
            # a known id, a partition it does not have: Kafka's UNKNOWN_TOPIC_OR_PARTITION
            answer = client.call(fetch.SPEC, version, {
                "max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic_id": ids["b"], "partitions": [
                    {"partition": 5, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            missing = answer["responses"][0]
            assert missing["topic_id"] == ids["b"]
            assert missing["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_v0_with_an_empty_topic_list_asks_for_every_topic(serve_logdir, tmp_path) -> None:
    """v0 has no null array: Kafka reads an empty list as "all topics" (isAllTopics); from v1
    an empty list asks for none."""
    make_topic(tmp_path, "a")
    make_topic(tmp_path, "b", partitions=1)
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        everything = client.call(metadata.SPEC, 0, {"topics": []})
        assert sorted(t["name"] for t in everything["topics"]) == ["a", "b"]
        assert client.call(metadata.SPEC, 1, {"topics": []})["topics"] == []


def test_a_new_topic_id_is_kept_with_its_folder_fsynced(tmp_path, monkeypatch) -> None:
    """partition.metadata was renamed into place without fsyncing its folder, so a power loss
    could bring back no file and the topic a new id (found by a review)."""
    import lazyconv.logdir._durability as durability
    from lazyconv.logdir._topic_ids import ensure_topic_id

    synced: list[str] = []
    real = durability.fsync_directory
    monkeypatch.setattr(durability, "fsync_directory", lambda path: (synced.append(str(path)), real(path)))
    folder = tmp_path / "t-0"
    folder.mkdir()
    topic_id = ensure_topic_id("t", [folder])
    assert read_topic_id(folder) == topic_id
    assert str(folder) in synced
