"""The gateway in front of a real Kafka broker (marker ``kafka``): old clients that Kafka 4
refuses consume and produce through it with every record equal; against Kafka 3.9, which logs
every request's version, no gateway request is below Kafka 4.0's floor; a broker restart in the
middle of a consume and of a produce loses no acknowledged record."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka_broker import KafkaBroker, consume_all, create_topic, produce_records, unique_topic

from lazyconv.gateway._floor import upstream_floor
from lazyconv.protocol import KAFKA_API_BY_KEY
from lazyconv.protocol import (
    _fetch as fetch,
)
from lazyconv.protocol import (
    _find_coordinator as find_coordinator,
)
from lazyconv.protocol import (
    _join_group as join_group,
)
from lazyconv.protocol import (
    _list_offsets as list_offsets,
)
from lazyconv.protocol import (
    _metadata as metadata,
)
from lazyconv.protocol import (
    _offset_commit as offset_commit,
)
from lazyconv.protocol import (
    _offset_fetch as offset_fetch,
)
from lazyconv.protocol import (
    _produce as produce,
)
from lazyconv.protocol import (
    _sync_group as sync_group,
)
from lazyconv.protocol._registry import API_BY_KEY
from lazyconv.records import Compression, RecordsBuilder
from tests.gateway.clients import BY_ID, Driver
from tests.gateway.conftest import GatewayThread
from tests.interop.checks import received
from tests.oldclients.clients import OldClientTools, Unavailable
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 2
PER_PARTITION = 40
# the gateway's own requests (its metadata cache) and its clients', under their own ids
GATEWAY_CLIENT_IDS = {"lazyconv-gateway", "old-client", "old-group"}


@pytest.fixture(scope="module")
def tools() -> OldClientTools:
    return OldClientTools()


def _require(tools: OldClientTools, driver: Driver) -> dict[str, str]:
    """The codecs the driver cannot read (skips when the client cannot be installed here)."""
    if driver.old is None:
        return driver.unreadable
    try:
        tools.require(driver.old)
    except Unavailable as exc:
        pytest.skip(str(exc))
    return {**driver.unreadable, **tools.unreadable_codecs(driver.old)}


def _value(codec: str, p: int, i: int) -> bytes:
    return (f'{{"codec": "{codec}", "partition": {p}, "n": {i}, "text": "' + "lorem ipsum " * (i % 7)
            + '"}').encode()


@dataclass
class Written:
    """What a modern producer wrote straight to Kafka, per (topic, partition)."""

    records: dict[tuple[str, int], list[tuple[int, int, bytes | None, bytes | None, tuple]]]


@pytest.fixture(scope="module")
def written(kafka_broker: KafkaBroker) -> Written:
    """One topic per codec, 2 partitions, records with keys (some null), headers on some,
    fixed timestamps, written by confluent-kafka straight to the broker."""
    out: dict[tuple[str, int], list] = {}
    for codec in CODECS:
        topic = f"gw-{codec}"
        create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
        rows = []
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                key = None if i % 9 == 4 else f"key-{p}-{i}".encode()
                headers = [("h", f"{i}".encode())] if i % 5 == 0 else None
                rows.append((p, key, _value(codec, p, i), 1_700_000_000_000 + 1000 * p + i, headers))
        offsets = produce_records(kafka_broker.bootstrap, topic, rows, codec)
        for (p, key, value, ts, headers), offset in zip(rows, offsets, strict=True):
            out.setdefault((topic, p), []).append(
                (offset, ts, key, value, tuple(headers or ())))
    return Written(out)


@pytest.fixture(scope="module")
def gateway(kafka_broker: KafkaBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(kafka_broker.bootstrap)
    yield gateway
    gateway.stop()


def _expected(want: list[tuple], magic: int) -> list[tuple]:
    """What a client of ``magic`` reads of records written as v2: no headers below magic 2,
    no timestamps in magic 0."""
    return [(o, ts if magic > 0 else -1, k, v, h if magic == 2 else ()) for o, ts, k, v, h in want]


@pytest.mark.parametrize("driver_id", list(BY_ID))
def test_old_client_consumes_through_the_gateway(tools: OldClientTools, written: Written,
                                                 gateway: GatewayThread, driver_id: str) -> None:
    driver = BY_ID[driver_id]
    unreadable = _require(tools, driver)
    keys = [(t, p) for (t, p) in written.records if t.removeprefix("gw-") not in unreadable]
    last = {f"{t}/{p}": written.records[(t, p)][-1][0] for t, p in keys}
    events = driver.run(tools, gateway.bootstrap, {
        "action": "consume", "mode": "assign", "partitions": [list(k) for k in keys], "last": last})
    got = received(events.events)
    for key in keys:
        want = _expected(written.records[key], driver.magic)
        have = got.get(key, [])
        if driver.magic == 2:
            assert have == want, f"{driver.id} {key}"
        else:
            assert [r[:4] for r in have] == [w[:4] for w in want], f"{driver.id} {key}"
            assert all(not r[4] for r in have), f"{driver.id} {key}: headers below magic 2"


@pytest.mark.parametrize("driver_id", list(BY_ID))
def test_old_client_produces_through_the_gateway(tools: OldClientTools, kafka_broker: KafkaBroker,
                                                 gateway: GatewayThread, driver_id: str) -> None:
    driver = BY_ID[driver_id]
    _require(tools, driver)
    topic = unique_topic(f"gw-produced-{driver.id.replace('.', '_')}")
    create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
    records = []
    for p in range(PARTITIONS):
        for i in range(10):
            key: bytes | None = f"k-{p}-{i}".encode()
            value: bytes | None = f"value {i} from {driver.id}".encode()
            if driver.old is None or driver.old.family != "kcat":
                key = None if i == 3 else key
                value = None if i == 5 else value
            records.append({"partition": p, "key": _b64(key), "value": _b64(value)})
    started_ms = int(time.time() * 1000) - 1000
    events = driver.run(tools, gateway.bootstrap, {"action": "produce", "topic": topic,
                                                   "records": records})
    acked = events.of("produced")
    assert len(acked) == len(records) or (driver.old is not None and driver.old.family == "kcat")
    stored = consume_all(kafka_broker.bootstrap, topic, range(PARTITIONS))
    for p in range(PARTITIONS):
        sent = [(_unb64(r["key"]), _unb64(r["value"])) for r in records if r["partition"] == p]
        back = [r for r in stored if r[0] == p]
        assert [(r[2], r[3]) for r in back] == sent, f"{driver.id} partition {p}"
        assert [r[1] for r in back] == list(range(len(sent)))
        for r in back:
            timestamp = r[4][1] if isinstance(r[4], tuple) else r[4]
            if driver.produce_magic == 0:
                assert timestamp == -1, f"{driver.id}: magic 0 has no timestamp"
            else:
                assert timestamp >= started_ms, f"{driver.id}: a CreateTime timestamp"
    for e in acked:
        if "o" in e and e["o"] is not None and e["o"] >= 0:
            assert any(r[0] == e["p"] and r[1] == e["o"] for r in stored)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


# -- the floor, read from Kafka 3.9's request log -----------------------------------------------


def test_no_upstream_request_below_the_kafka_4_floor(kafka_broker_3: KafkaBroker) -> None:
    """Every old request version through the gateway in front of Kafka 3.9 (which would
    accept them), then the broker's request log: the gateway's requests are all ≥ the floor."""
    bootstrap = kafka_broker_3.bootstrap
    topic = unique_topic("gw-floor")
    create_topic(bootstrap, topic, 1)
    produce_records(bootstrap, topic, [(0, b"k", b"v" * 100, 1_700_000_000_000, None)] * 20)
    gateway = GatewayThread(bootstrap)
    try:
        with WireClient(gateway.port, "old-client") as client:
            for version in (0, 1, 2):
                builder = RecordsBuilder(0 if version < 2 else 1, Compression.GZIP)
                builder.append(timestamp=-1 if version < 2 else 1_700_000_000_000, key=b"o",
                               value=b"old")
                answer = client.call(produce.SPEC, version, {"acks": -1, "timeout_ms": 10000,
                                                             "topic_data": [{"name": topic, "partition_data": [
                                                                 {"index": 0, "records": builder.build()}]}]})
                assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
            for version in range(0, 4):
                answer = client.call(fetch.SPEC, version, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
                part = answer["responses"][0]["partitions"][0]
                assert part["error_code"] == 0 and part["records"]
            answer = client.call(list_offsets.SPEC, 0, {"replica_id": -1, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                                     "max_num_offsets": 1}]}]})
            assert answer["topics"][0]["partitions"][0]["old_style_offsets"] == [23]
            client.call(metadata.SPEC, 0, {"topics": [{"name": topic}]})
        # a group at 0.9's versions: JoinGroup v0, OffsetCommit v2, OffsetFetch v1, ...
        kafka = pytest.importorskip("kafka")
        consumer = kafka.KafkaConsumer(topic, bootstrap_servers=gateway.bootstrap,
                                       api_version=(0, 9), group_id=topic,
                                       client_id="old-group",
                                       enable_auto_commit=False, auto_offset_reset="earliest",
                                       consumer_timeout_ms=5000)
        assert len(list(consumer)) == 23
        consumer.commit()
        consumer.close()
        assert gateway.gateway.server.request_counts[(join_group.SPEC.key, 0)] >= 1
    finally:
        gateway.stop()
    wanted = {fetch.SPEC.key, produce.SPEC.key, list_offsets.SPEC.key, metadata.SPEC.key,
              join_group.SPEC.key, sync_group.SPEC.key, offset_commit.SPEC.key,
              offset_fetch.SPEC.key, find_coordinator.SPEC.key}
    deadline = time.monotonic() + 10
    while True:
        entries = [e for e in kafka_broker_3.request_log_entries()
                   if e.client_id in GATEWAY_CLIENT_IDS]
        keys = {e.api_key for e in entries}
        if wanted <= keys or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert wanted <= keys, f"the gateway's requests are not all in the request log: {keys}"
    below = [(API_BY_KEY[e.api_key].name if e.api_key in API_BY_KEY else e.api_key, e.api_version)
             for e in entries if e.api_version < upstream_floor(e.api_key)]
    assert not below, f"requests below the Kafka 4.0 floor: {below}"
    assert min(e.api_version for e in entries if e.api_key == fetch.SPEC.key) >= 4
    # while the old client's own requests (logged by the gateway, not the broker) were old ones
    assert gateway.gateway.server.request_counts[(fetch.SPEC.key, 0)] == 1


# -- a broker restart in the middle ------------------------------------------------------------


def test_broker_restart_mid_consume_and_mid_produce_loses_nothing(
        kafka_dist, kafka_broker_factory) -> None:
    kafka = pytest.importorskip("kafka")
    broker: KafkaBroker = kafka_broker_factory(kafka_dist)
    create_topic(broker.bootstrap, "gw-restart", 1)
    total = 3000
    produce_records(broker.bootstrap, "gw-restart",
                    [(0, b"%d" % i, b"x" * 200, 1_700_000_000_000 + i, None) for i in range(total)],
                    "lz4")
    gateway = GatewayThread(broker.bootstrap, metadata_max_age_ms=1000)
    consumed: list[int] = []
    acked: list[bytes] = []
    failed: list[str] = []
    restarted = threading.Event()
    try:
        consumer = kafka.KafkaConsumer(bootstrap_servers=gateway.bootstrap, api_version=(0, 10),
                                       enable_auto_commit=False, auto_offset_reset="earliest",
                                       max_partition_fetch_bytes=32 << 10, fetch_max_wait_ms=50,
                                       request_timeout_ms=15000, reconnect_backoff_ms=200)
        consumer.assign([kafka.TopicPartition("gw-restart", 0)])
        producer = kafka.KafkaProducer(bootstrap_servers=gateway.bootstrap, api_version=(0, 10),
                                       acks=-1, retries=50, retry_backoff_ms=300,
                                       request_timeout_ms=15000, max_in_flight_requests_per_connection=1)

        def produce_loop() -> None:
            for i in range(400):
                key = b"p%d" % i
                try:
                    producer.send("gw-restart", key=key, value=b"y" * 100, partition=0).get(60)
                    acked.append(key)
                except Exception as exc:  # not acknowledged: allowed to be missing
                    failed.append(f"{key!r}: {exc}")
                time.sleep(0.02 if not restarted.is_set() else 0.005)

        producing = threading.Thread(target=produce_loop, daemon=True)
        producing.start()
        deadline = time.monotonic() + 240
        while len(consumed) < total and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                consumed.extend(int(m.key) for m in batch if not m.key.startswith(b"p"))
            if len(consumed) >= total // 3 and not restarted.is_set():
                broker.restart()  # in the middle of both the consume and the produce
                restarted.set()
        producing.join(240)
        assert restarted.is_set()
        assert sorted(set(consumed)) == list(range(total)), "the consumer lost records"
        assert not producing.is_alive()
        assert len(acked) >= 100, f"only {len(acked)} produced: {failed[:3]}"
        stored = {r[2] for r in consume_all(broker.bootstrap, "gw-restart", [0])}
        lost = [k for k in acked if k not in stored]
        assert not lost, f"acknowledged but not in Kafka: {lost[:10]}"
        consumer.close()
        producer.close()
    finally:
        gateway.stop()


def test_a_batch_the_cluster_refuses_is_refused_with_the_same_meaning(
        kafka_broker: KafkaBroker, gateway: GatewayThread) -> None:
    bootstrap = kafka_broker.bootstrap
    small, compacted, fine = (unique_topic(f"gw-{what}") for what in ("small", "compacted", "fine"))
    create_topic(bootstrap, small, 1, {"max.message.bytes": "2000"})
    create_topic(bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    create_topic(bootstrap, fine, 1)

    def message_set(magic: int, key: bytes | None, value: bytes) -> bytes:
        builder = RecordsBuilder(magic, Compression.NONE)
        builder.append(timestamp=1_700_000_000_000 if magic else -1, key=key, value=value)
        return builder.build()

    # the produce's own timeout is 10 s: the socket's is longer, so a slow broker on a loaded
    # machine answers with a code rather than the test timing out first
    with WireClient(gateway.port, "old-client", timeout=60.0) as client:
        for version, magic in ((0, 0), (2, 1)):
            answer = client.call(produce.SPEC, version, {"acks": 1, "timeout_ms": 10000, "topic_data": [
                {"name": small, "partition_data": [{"index": 0, "records": message_set(magic, b"k", b"x" * 10000)}]},
                {"name": compacted, "partition_data": [{"index": 0, "records": message_set(magic, None, b"v")}]},
                {"name": fine, "partition_data": [{"index": 0, "records": message_set(magic, b"k", b"v")}]},
            ]})
            codes = {t["name"]: t["partition_responses"][0]["error_code"] for t in answer["responses"]}
            # too large: the same code; a null key on a compacted topic: Kafka 4's INVALID_RECORD
            # is CORRUPT_MESSAGE for these versions (what a 0.10 broker answered)
            assert codes == {small: 10, compacted: 2, fine: 0}, (version, codes)
    stored = consume_all(bootstrap, fine, [0])
    assert [(r[2], r[3]) for r in stored] == [(b"k", b"v")] * 2
    assert consume_all(bootstrap, small, [0]) == []


def _partition_entries(spec, version: int, answer: dict) -> dict[tuple[str, int], dict]:
    """A partition-leader API's answer by (topic, partition)."""
    topics, name, partitions, index = {
        "ListOffsets": ("topics", "name", "partitions", "partition_index"),
        "DeleteRecords": ("topics", "name", "partitions", "partition_index"),
        "OffsetForLeaderEpoch": ("topics", "topic", "partitions", "partition"),
        "DescribeProducers": ("topics", "name", "partitions", "partition_index")}[spec.name]
    return {(t[name], p[index]): p for t in answer[topics] for p in t[partitions]}


def test_partitions_the_gateway_cannot_route_are_answered_as_the_broker_answers_them(
        kafka_broker: KafkaBroker, gateway: GatewayThread) -> None:
    """A partition the topic lacks, a topic that does not exist and one whose name is invalid,
    in ListOffsets, OffsetForLeaderEpoch, DeleteRecords and DescribeProducers: the gateway
    answers them without asking (its metadata knows), and its entries are the broker's, field
    for field (it copied the request's timestamp and leader epoch, gave low watermark 0 and no
    DescribeProducers message where Kafka gives one, and the invalid name Metadata's
    INVALID_TOPIC_EXCEPTION where only DescribeProducers answers it); Fetch and Produce answer
    the invalid name UNKNOWN_TOPIC_OR_PARTITION, as the broker does."""
    topic, missing = unique_topic("gw-routes"), unique_topic("gw-no-such")
    create_topic(kafka_broker.bootstrap, topic, 1)
    named = [(topic, 0), (topic, 7), (missing, 0), ("a b", 0)]

    def grouped(partition) -> dict[str, list]:
        out: dict[str, list] = {}
        for name, index in named:
            out.setdefault(name, []).append(partition(index))
        return out

    requests = {
        (list_offsets.SPEC, 7): {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": n, "partitions": parts} for n, parts in grouped(lambda p: {
                "partition_index": p, "current_leader_epoch": 0, "timestamp": 1000}).items()]},
        (KAFKA_API_BY_KEY[23], 4): {"replica_id": -1, "topics": [
            {"topic": n, "partitions": parts} for n, parts in grouped(lambda p: {
                "partition": p, "current_leader_epoch": -1, "leader_epoch": 5}).items()]},
        (KAFKA_API_BY_KEY[21], 2): {"timeout_ms": 10000, "topics": [
            {"name": n, "partitions": parts} for n, parts in grouped(lambda p: {
                "partition_index": p, "offset": 0}).items()]},
        (KAFKA_API_BY_KEY[61], 0): {"topics": [
            {"name": n, "partition_indexes": parts} for n, parts in grouped(lambda p: p).items()]},
    }
    with WireClient(gateway.port, timeout=30.0) as through, \
            WireClient(kafka_broker.port, timeout=30.0) as direct:
        for (spec, version), body in requests.items():
            got = _partition_entries(spec, version, through.call(spec, version, body))
            want = _partition_entries(spec, version, direct.call(spec, version, body))
            assert got == want, spec.name
            assert want[(missing, 0)]["error_code"] == 3, spec.name
        records = RecordsBuilder(2, Compression.NONE)
        records.append(timestamp=1_700_000_000_000, key=b"k", value=b"v")
        written = records.build()
        for spec, version, body, listed, entries in (
                (fetch.SPEC, 12, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                    "forgotten_topics_data": [], "topics": [{"topic": "a b", "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                         "last_fetched_epoch": -1, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 20}]}]}, "responses", "partitions"),
                (produce.SPEC, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                   "topic_data": [{"name": "a b", "partition_data": [
                                       {"index": 0, "records": written}]}]},
                 "responses", "partition_responses")):
            codes = [[p["error_code"] for t in client.call(spec, version, body)[listed]
                      for p in t[entries]] for client in (through, direct)]
            assert codes == [[3], [3]], spec.name
