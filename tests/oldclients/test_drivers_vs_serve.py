"""Every old-client driver against ``lazyconv serve``, which speaks all the old versions: each
configuration reads every topic it can (one codec per topic, plus a log upgraded from magic v0)
exactly as the log holds it, produces 20 records that read back equal, and sends the protocol
versions its registry entry claims (from serve's request log); those that can consume in a
group commit, and a later member of the group resumes from the committed offsets. The Java
clients need ``LAZYCONV_KAFKA_OLD_CLIENTS`` (fixture ``kafka_old_clients``; skipped without)."""

from __future__ import annotations

import base64
import dataclasses
import re
import time

import pytest

from tests.interop.checks import assert_same_records, received
from tests.interop.expected import expected
from tests.interop.harness import stop_members
from tests.oldclients.clients import BY_ID, OldClient, OldClientTools, client_ids, run
from tests.oldclients.clients import start as oldclient_start
from tests.oldclients.conftest import (
    LEGACY,
    SPLIT,
    TOPIC_PREFIX,
    V2_TOPICS,
    Served,
    scratch_topic,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT_TIMEOUT_S = 30
PER_PARTITION = 10
# Compressed Produce that lazyconv serve refuses while Kafka takes it (rewriting the batch):
SERVE_REFUSES_COMPRESSED_V0 = (
    "lazyconv serve refuses compressed magic v0 message sets (INVALID_RECORD: 'need "
    "recompression to take new offsets'); Kafka recompresses them")
SERVE_REFUSES_ZERO_INNER_OFFSETS = (
    "kafka-node writes 0 as every inner offset of a compressed magic v1 set; lazyconv serve "
    "refuses it (INVALID_RECORD 'Inner relative offset 0 is not 1') where Kafka, for such "
    "old clients, recompresses the batch")


def require(request: pytest.FixtureRequest, tools: OldClientTools, client: OldClient) -> None:
    """Skip unless the client runs here; the Java clients come from ``kafka_old_clients``."""
    if client.family == "java":
        tools.java_clients = request.getfixturevalue("kafka_old_clients")
    tools.require(client)


def check_sends(served: Served, client: OldClient, used: set[str]) -> None:
    """The versions the client sent are those its registry entry claims, and it used ``used``."""
    deadline = time.monotonic() + 5
    while True:  # serve's stderr is read by a thread: give the last lines a moment
        seen = served.server.requests(client.id)
        if used <= set(seen) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert used <= set(seen), f"{client.id} sent {seen}, expected at least {sorted(used)}"
    wrong = {api: versions for api, versions in seen.items()
             if client.sends.get(api) is not None and versions != {client.sends[api]}}
    assert not wrong, f"{client.id}: sent {wrong}, registry says {client.sends}"


@pytest.mark.parametrize("client_id", client_ids())
def test_consume_reads_what_the_log_holds(request: pytest.FixtureRequest, served: Served,
                                          oldclient_tools: OldClientTools,
                                          client_id: str) -> None:
    client = BY_ID[client_id]
    require(request, oldclient_tools, client)
    unreadable = oldclient_tools.unreadable_codecs(client)
    topics = [TOPIC_PREFIX + t for t, codec in V2_TOPICS.items() if codec not in unreadable]
    topics.append(TOPIC_PREFIX + LEGACY)
    last = {f"{t}/0": expected(served.folder(t), 2, read_committed=False)[-1][0] for t in topics}
    events = run(client, oldclient_tools, served.bootstrap,
                 {"action": "consume", "mode": "assign", "partitions": [[t, 0] for t in topics],
                  "last": last}, timeout=CLIENT_TIMEOUT_S)
    got = received(events.events)
    for t in topics:
        want = expected(served.folder(t), client.magic, read_committed=False)
        assert_same_records(got.get((t, 0), []), want, f"{client.id} {t}")
    check_sends(served, client, {"Fetch", "Metadata"})


def records_for(client: OldClient) -> list[dict]:
    """10 records per partition: a null key, a null value and an empty key and value where the
    client can send them (kcat cannot send nulls)."""
    out = []
    for partition in (0, 1):
        for i in range(PER_PARTITION):
            key: bytes | None = f"key-{partition}-{i}".encode()
            value: bytes | None = f"value {i} of {client.id} ".encode() * (1 + i % 5)
            if client.family != "kcat":
                if i == 3:
                    key = None
                if i == 5:
                    value = None
                if i == 6:
                    key, value = b"", b""
            out.append({"partition": partition, "key": _b64(key), "value": _b64(value)})
    return out


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def round_trip(served: Served, tools: OldClientTools, client: OldClient, topic: str) -> None:
    """Produce records_for(client) to the empty 2-partition ``topic``, then read them back
    from the log start (found with ListOffsets where the driver can)."""
    records = records_for(client)
    started_ms = int(time.time() * 1000)
    producer = run(client, tools, served.bootstrap,
                   {"action": "produce", "topic": topic, "records": records},
                   timeout=CLIENT_TIMEOUT_S)
    acked = producer.of("produced")
    if client.family != "kcat":  # kcat reports no offsets
        assert sorted((e["p"], e["o"]) for e in acked) == [
            (p, o) for p in (0, 1) for o in range(PER_PARTITION)], f"{client.id} acks"
    consumer = run(client, tools, served.bootstrap, {
        "action": "consume", "mode": "assign", "start": "earliest",
        "partitions": [[topic, 0], [topic, 1]],
        "last": {f"{topic}/0": PER_PARTITION - 1, f"{topic}/1": PER_PARTITION - 1}},
        timeout=CLIENT_TIMEOUT_S)
    finished_ms = int(time.time() * 1000)
    got = received(consumer.events)
    for partition in (0, 1):
        sent = [r for r in records if r["partition"] == partition]
        back = got.get((topic, partition), [])
        assert [r[0] for r in back] == list(range(PER_PARTITION)), f"{client.id} [{partition}]"
        assert [(r[2], r[3]) for r in back] == [(_bytes(s["key"]), _bytes(s["value"]))
                                                for s in sent], f"{client.id} [{partition}]"
        for r in back:
            if client.produce_magic == 0 or client.magic == 0:
                assert r[1] == -1, f"{client.id}: magic v0 has no timestamps"
            else:
                assert started_ms - 1000 <= r[1] <= finished_ms, f"CreateTime {r[1]} not now"
        # and the log holds them as the client's own format reads them
        assert expected(served.folder(topic, partition), client.magic, read_committed=False) \
            == back


@pytest.mark.parametrize("client_id", client_ids())
def test_produce_then_read_back(request: pytest.FixtureRequest, served: Served,
                                oldclient_tools: OldClientTools, client_id: str) -> None:
    client = BY_ID[client_id]
    require(request, oldclient_tools, client)
    round_trip(served, oldclient_tools, client, scratch_topic(client, "produce"))
    check_sends(served, client, {"Produce", "Fetch", "Metadata"})


def _gzip(client: OldClient) -> OldClient:
    settings = dict(client.settings)
    if client.family in ("confluent-kafka", "kcat"):
        settings["config"] = {**settings["config"], "compression.codec": "gzip"}
    else:
        settings["compression"] = "gzip"
    return dataclasses.replace(client, settings=settings)


def refused_gzip(client: OldClient) -> str:
    """Why lazyconv serve refuses this client's gzip produce ("" if it takes it)."""
    if client.produce_magic == 0:
        return SERVE_REFUSES_COMPRESSED_V0
    return SERVE_REFUSES_ZERO_INNER_OFFSETS if client.family == "kafka-node" else ""


@pytest.mark.parametrize("client_id", client_ids())
def test_gzip_produce_then_read_back(request: pytest.FixtureRequest, served: Served,
                                     oldclient_tools: OldClientTools, client_id: str) -> None:
    """Compressed produce; where serve refuses it (unlike Kafka), the test checks that it is
    that refusal and reports it as an expected failure."""
    client = _gzip(BY_ID[client_id])
    require(request, oldclient_tools, client)
    topic = scratch_topic(client, "produce-gzip")
    why = refused_gzip(client)
    if not why:
        round_trip(served, oldclient_tools, client, topic)
        return
    with pytest.raises(AssertionError, match="client error|exited"):
        run(client, oldclient_tools, served.bootstrap,
            {"action": "produce", "topic": topic, "records": records_for(client)},
            timeout=CLIENT_TIMEOUT_S)
    # Either partition's set may be the first sent and refused (the client gives up after it).
    # The server logs the refusal before it answers, but its stderr reaches this process
    # through a reader thread, which may not have read the line yet when the client is done.
    refused = re.compile(rf"rejected produce to {re.escape(topic)}-[01]: INVALID_RECORD")
    deadline = time.monotonic() + 10
    while not refused.search(bytes(served.server.child.stderr).decode(errors="replace")):
        assert time.monotonic() < deadline, (
            f"{client.id}: the produce failed, but not by serve's INVALID_RECORD")
        time.sleep(0.05)
    pytest.xfail(why)


@pytest.mark.parametrize("client_id", [c.id for c in BY_ID.values() if c.groups])
def test_group_consume_commits(request: pytest.FixtureRequest, served: Served,
                               oldclient_tools: OldClientTools, client_id: str) -> None:
    """subscribe() in a group of its own (GroupCoordinator, JoinGroup, SyncGroup, OffsetFetch
    at the client's level), reading one topic and committing past its last record."""
    client = BY_ID[client_id]
    require(request, oldclient_tools, client)
    topic = TOPIC_PREFIX + "v2-gzip"
    want = expected(served.folder(topic), client.subscribe_magic, read_committed=False)
    events = run(client, oldclient_tools, served.bootstrap,
                 {"action": "consume", "mode": "subscribe", "topics": [topic],
                  "group": f"oldclients-{client.id}", "commit": True,
                  "last": {f"{topic}/0": want[-1][0]}}, timeout=CLIENT_TIMEOUT_S)
    assert_same_records(received(events.events).get((topic, 0), []), want, client.id)
    if client.family != "kcat":  # kcat commits as it exits and reports nothing
        assert events.of("committed")[-1]["offsets"] == [[topic, 0, want[-1][0] + 1]]
    check_sends(served, client, {"FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit"})


RESUME_TOPICS = ("v2-none", "v2-gzip")  # codecs every client reads


@pytest.mark.parametrize("client_id", [c.id for c in BY_ID.values() if c.groups
                                       and c.family != "kcat"])
def test_group_commit_then_resume(request: pytest.FixtureRequest, served: Served,
                                  oldclient_tools: OldClientTools, client_id: str) -> None:
    """A member of a fresh group reads two topics up to their midpoints, commits (last + 1)
    and leaves; a second member of the group starts at the committed offsets: it reads the
    rest and nothing of the first half. (kcat cannot commit chosen offsets.)"""
    client = BY_ID[client_id]
    require(request, oldclient_tools, client)
    topics = sorted(TOPIC_PREFIX + t for t in RESUME_TOPICS)
    wants = {t: expected(served.folder(t), client.subscribe_magic, read_committed=False)
             for t in topics}
    mid = {t: want[len(want) // 2][0] for t, want in wants.items()}
    job = {"action": "consume", "mode": "subscribe", "topics": topics,
           "group": f"oldclients-resume-{client.id}", "expect_partitions": len(topics),
           "commit": True, "last": {f"{t}/0": mid[t] for t in topics}}
    first = oldclient_start(client, oldclient_tools, served.bootstrap, job,
                            timeout=CLIENT_TIMEOUT_S)
    try:
        first.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        stop_members(first)  # lets it leave the group, so that the next member joins at once
    got = received(first.events)
    for t, want in wants.items():
        assert_same_records(got.get((t, 0), []), [r for r in want if r[0] <= mid[t]],
                            f"{client.id} first member, {t}")
    assert first.of("committed")[-1]["offsets"] == [[t, 0, mid[t] + 1] for t in topics]

    second = oldclient_start(client, oldclient_tools, served.bootstrap,
                             {**job, "commit": False,
                              "last": {f"{t}/0": want[-1][0] for t, want in wants.items()}},
                             timeout=CLIENT_TIMEOUT_S)
    try:
        second.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        stop_members(second)
    got = received(second.events)
    for t, want in wants.items():
        assert_same_records(got.get((t, 0), []), [r for r in want if r[0] > mid[t]],
                            f"{client.id} second member, {t}")
    check_sends(served, client, {"FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch",
                                 "OffsetCommit"})


# Two members of one group, of different clients where it matters: Java's range assignor
# against kafka-node's roundrobin/range, librdkafka, old and new Java clients.
PAIRS = [("java-0.10.2.2", "kafka-node-5.0.0"), ("java-2.0.1", "kafka-node-5.0.0-no-apiversions"),
         ("java-0.11.0.3", "java-1.1.1"), ("kafka-node-5.0.0", "confluent-kafka-fallback-0.9.0")]


@pytest.mark.parametrize("first_id,second_id", PAIRS)
def test_two_members_split_commit_and_resume(request: pytest.FixtureRequest, served: Served,
                                             oldclient_tools: OldClientTools, first_id: str,
                                             second_id: str) -> None:
    """Two members (``expect_partitions`` 1, ``hold``) split SPLIT's 2 partitions, read to the
    midpoint and commit; after both left, the second client alone resumes each partition at its
    committed offset: together, every record exactly once."""
    members = [BY_ID[first_id], BY_ID[second_id]]
    for client in members:
        require(request, oldclient_tools, client)
    topic = TOPIC_PREFIX + SPLIT
    parts = [(topic, 0), (topic, 1)]
    mid = {tp: len(expected(served.folder(*tp), 2, read_committed=False)) // 2 - 1
           for tp in parts}
    job = {"action": "consume", "mode": "subscribe", "topics": [topic],
           "group": f"oldclients-pair-{first_id}-{second_id}", "expect_partitions": 1,
           "commit": True, "hold": True, "last": {f"{t}/{p}": mid[(t, p)] for t, p in parts}}
    started = [oldclient_start(c, oldclient_tools, served.bootstrap, job, timeout=CLIENT_TIMEOUT_S)
               for c in members]
    try:
        for events in started:
            events.wait_for("committed", CLIENT_TIMEOUT_S)
    finally:
        stop_members(*started)
    owned = []
    for client, events in zip(members, started, strict=True):
        mine = {(t, p) for t, p in events.of("assigned")[-1]["partitions"]}
        owned.append(mine)
        got = received(events.events)
        assert set(got) <= mine, f"{client.id} read partitions it does not own: {set(got)}"
        for tp in mine:
            want = expected(served.folder(*tp), client.subscribe_magic, read_committed=False)
            assert_same_records(got.get(tp, []), [r for r in want if r[0] <= mid[tp]],
                                f"{client.id} {tp}")
        assert events.of("committed")[-1]["offsets"] == [[t, p, mid[(t, p)] + 1]
                                                         for t, p in sorted(mine)]
    assert sorted(len(o) for o in owned) == [1, 1] and owned[0] | owned[1] == set(parts), owned

    last = members[1]
    resumed = oldclient_start(last, oldclient_tools, served.bootstrap,
                              {**job, "expect_partitions": 2, "hold": False, "commit": False,
                               "last": {f"{t}/{p}": expected(served.folder(t, p), 2,
                                                             read_committed=False)[-1][0]
                                        for t, p in parts}},
                              timeout=CLIENT_TIMEOUT_S)
    try:
        resumed.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        stop_members(resumed)
    got = received(resumed.events)
    for tp in parts:
        want = expected(served.folder(*tp), last.subscribe_magic, read_committed=False)
        assert_same_records(got.get(tp, []), [r for r in want if r[0] > mid[tp]],
                            f"{last.id} resumed, {tp}")


UNREADABLE_TIMEOUT_S = 3  # kafka-python 1.x and librdkafka retry the refused fetch until then


@pytest.mark.parametrize("client_id,codec", [(c.id, codec) for c in BY_ID.values()
                                             for codec in c.unreadable_codecs])
def test_unreadable_codec_is_not_delivered(request: pytest.FixtureRequest, served: Served,
                                           oldclient_tools: OldClientTools, client_id: str,
                                           codec: str) -> None:
    """What the registry calls unreadable is: the client errs, times out or (kafka-node with
    LZ4) delivers something else than the log's records."""
    client = BY_ID[client_id]
    require(request, oldclient_tools, client)
    topic = f"{TOPIC_PREFIX}v2-{codec}"
    want = expected(served.folder(topic), client.magic, read_committed=False)
    events = oldclient_start(client, oldclient_tools, served.bootstrap,
                             {"action": "consume", "mode": "assign", "partitions": [[topic, 0]],
                              "last": {f"{topic}/0": want[-1][0]}},
                             timeout=UNREADABLE_TIMEOUT_S)
    deadline = time.monotonic() + UNREADABLE_TIMEOUT_S + 10
    try:
        while (event := events.next(deadline)) is not None and event["ev"] not in ("done",
                                                                                   "error"):
            pass
    finally:
        events.child.kill()
    got = received(events.events).get((topic, 0), [])
    assert got != want, f"{client.id} read {codec} although the registry says: " \
                        f"{client.unreadable_codecs[codec]}"
    if client.family == "kafka-node" and codec == "lz4":  # each wrapper as one message
        assert got and all(r[3] is not None and r[3][:4] == b"\x04\x22\x4d\x18" for r in got)
