"""Real clients consume the fixture log directories through the server and get exactly the
records the fixture manifest promises (count, offsets and checksum per partition)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lazyconv.fixtures import _checksum as fixture_checksum
from lazyconv.records import FileRecords
from tests.conftest import REPO_ROOT

kafka = pytest.importorskip("kafka", reason="needs the dev extra: pip install -e '.[dev]'")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs the dev extra: pip install -e '.[dev]'")
from kafka.consumer.fetcher import RecordTooLargeError  # noqa: E402

# api_version -> magic the consumer reads (Fetch v1, v2, v3, v5)
API_VERSIONS = {(0, 9): 0, (0, 10): 1, (0, 10, 1): 1, (0, 11): 2}
# Topics with zstd batches in a compression.type=producer topic cannot be read below Fetch v10
# through conversion (the converter meets zstd: error 76 or padding, as in Kafka).
NEEDS_ZSTD = {"codecs", "upgraded"}


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory) -> Path:
    """The committed fixture set when present, else a freshly generated small mixed one."""
    for manifest in sorted((REPO_ROOT / "fixtures").glob("**/manifest.json")):
        return manifest.parent
    from lazyconv.fixtures import generate

    out = tmp_path_factory.mktemp("fixture") / "mixed"
    generate(out, size=3 << 20, seed=0, profile="mixed")
    return out


def load_manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())["partitions"]


def expected_checksum(root: Path, name: str, magic: int) -> str:
    """The manifest's checksum rule applied to records as a ``magic`` reader receives them:
    no timestamps below v1 (a v0 message stays v0 even for a v1 reader), no headers below v2."""
    total = 0
    for segment in sorted((root / name).glob("*.log")):
        with FileRecords.open(segment) as records:
            for batch in records.batches():
                if batch.is_control:
                    continue
                no_ts = min(magic, batch.magic) == 0
                for r in batch:
                    total += fixture_checksum.record_hash(
                        r.offset, -1 if no_ts else r.timestamp, r.key, r.value,
                        r.headers if magic == 2 else ())
    return fixture_checksum.format_checksum(total)


def consumed_checksum(records) -> str:
    return fixture_checksum.format_checksum(
        sum(fixture_checksum.record_hash(*r) for r in records))


def readable(manifest: dict, magic: int) -> dict:
    return {name: p for name, p in manifest.items() if magic == 2 or p["topic"] not in NEEDS_ZSTD}


def consume_kafka_python(bootstrap: str, api_version, parts: dict, *, max_partition_fetch_bytes: int,
                         timeout: float = 60) -> dict[str, list]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=api_version, enable_auto_commit=False,
        max_partition_fetch_bytes=max_partition_fetch_bytes, fetch_max_wait_ms=50,
        request_timeout_ms=30000,
    )
    try:
        tps = {kafka.TopicPartition(p["topic"], p["partition"]): name for name, p in parts.items()}
        consumer.assign(list(tps))
        for tp in tps:
            consumer.seek(tp, 0)
        want = sum(p["records"] for p in parts.values())
        got: dict[str, list] = {name: [] for name in parts}
        count = 0
        deadline = time.monotonic() + timeout
        last_record = {tp: parts[name]["last_record_offset"] for tp, name in tps.items()}
        while count < want and time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=200)
            except RecordTooLargeError as exc:
                # Kafka's own behaviour (docs/guide/down-conversion.md): a fetch whose only batch is a
                # control batch converts to 12 bytes with no complete entry, which a Fetch v0-2
                # client reports as "record too large". Legitimate only past the partition's
                # last record, where nothing is left to consume: stop fetching it.
                stuck = exc.args[1]
                assert all(offset > last_record[tp] for tp, offset in stuck.items()), stuck
                consumer.pause(*stuck)
                continue
            for tp, messages in polled.items():
                for m in messages:
                    got[tps[tp]].append((m.offset, -1 if m.timestamp is None else m.timestamp, m.key,
                                         m.value, tuple(m.headers or ())))
                count += len(messages)
                if messages and messages[-1].offset >= last_record[tp]:
                    # Everything the partition holds has arrived; what may follow is a control
                    # batch, which converts to nothing (see above): stop fetching it.
                    consumer.pause(tp)
        return got
    finally:
        consumer.close()


def check(root: Path, parts: dict, got: dict, magic: int) -> None:
    for name, p in parts.items():
        records = got[name]
        offsets = [r[0] for r in records]
        assert len(records) == p["records"], name
        if records:
            assert offsets == sorted(set(offsets)), f"{name}: offsets repeat or go back"
            assert offsets[-1] <= p["last_offset"]
        want = p["checksum"] if magic == 2 else expected_checksum(root, name, magic)
        assert consumed_checksum(records) == want, name


def run_kafka_python(serve_logdir, root, api_version, chunk_size, max_partition_fetch_bytes=8 << 20):
    magic = API_VERSIONS[api_version]
    parts = readable(load_manifest(root), magic)
    server = serve_logdir(root, chunk_size=chunk_size)
    got = consume_kafka_python(server.bootstrap, api_version, parts,
                               max_partition_fetch_bytes=max_partition_fetch_bytes)
    check(root, parts, got, magic)
    return server


@pytest.mark.slow  # about half a second: kept out of the quick look
def test_fixture_through_kafka_python_quick(serve_logdir, fixture_dir):
    """The quick run's end-to-end check: an 0.9 consumer (Fetch v1, everything converted to v0)."""
    run_kafka_python(serve_logdir, fixture_dir, (0, 9), 16384)


@pytest.mark.slow
@pytest.mark.parametrize("api_version", list(API_VERSIONS), ids=lambda v: ".".join(map(str, v)))
@pytest.mark.parametrize("chunk_size", [16384, 131072], ids=["16K", "128K"])
def test_fixture_through_kafka_python(serve_logdir, fixture_dir, api_version, chunk_size):
    server = run_kafka_python(serve_logdir, fixture_dir, api_version, chunk_size)
    stats = server.server.handler.stats
    if API_VERSIONS[api_version] < 2:
        assert stats.converted_partitions > 0 and stats.zero_copy_partitions == 0
    else:  # Fetch v5 reads magic v2: nothing is converted, the log bytes go out with sendfile
        assert stats.converted_partitions == 0
        assert stats.zero_copy_bytes >= sum(p["bytes"] for p in load_manifest(fixture_dir).values()) // 2


@pytest.mark.slow
@pytest.mark.parametrize("api_version", list(API_VERSIONS), ids=lambda v: ".".join(map(str, v)))
def test_fixture_with_small_partition_fetch_bytes(serve_logdir, fixture_dir, api_version):
    """A partition budget smaller than many batches: responses end in partial batches and
    converted partitions are padded, and the consumers still get every record. (Fetch v0-2
    cannot return a batch larger than the budget at all, so the 'large' topic is left out.)"""
    magic = API_VERSIONS[api_version]
    parts = {n: p for n, p in readable(load_manifest(fixture_dir), magic).items() if p["topic"] != "large"}
    server = serve_logdir(fixture_dir, chunk_size=16384)
    got = consume_kafka_python(server.bootstrap, api_version, parts, max_partition_fetch_bytes=20000)
    check(fixture_dir, parts, got, magic)
    stats = server.server.handler.stats
    assert stats.partial_tail_responses > 0
    if magic < 2:
        assert stats.padded_bytes > 0


# librdkafka parses Metadata v0 into a scratch buffer of 4x the response size, which is too
# small for one-partition topics with short names (against any broker: "tmpabuf memory
# shortage"). Serving the fixture under longer topic names (symlinked partition folders)
# keeps the records identical and the Metadata response parseable.
LONG_PREFIX = "served-through-lazyconv-"


def long_named_view(root: Path, view: Path) -> Path:
    view.mkdir(exist_ok=True)
    for part in root.iterdir():
        if part.is_dir() and not (view / (LONG_PREFIX + part.name)).exists():
            (view / (LONG_PREFIX + part.name)).symlink_to(part.resolve(), target_is_directory=True)
    return view


@pytest.mark.slow
@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_fixture_through_librdkafka(serve_logdir, fixture_dir, tmp_path, fallback):
    """fallback 0.9.0: no ApiVersions, Fetch v1 (magic 0). librdkafka 2.x sends ApiVersions for
    any fallback >= 0.10, so the 0.10.0 run talks to a server capped at Fetch v2 (an 0.10.0
    broker) and reads magic 1."""
    view = long_named_view(fixture_dir, tmp_path / "view")
    server = serve_logdir(view, chunk_size=16384, max_fetch_version=12 if fallback == "0.9.0" else 2)
    magic = 0 if fallback == "0.9.0" else 1
    parts = {name: dict(p, topic=LONG_PREFIX + p["topic"])
             for name, p in readable(load_manifest(fixture_dir), magic).items()}
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": "fixture-test",
        "api.version.request": False, "broker.version.fallback": fallback,
        "enable.auto.commit": False, "fetch.wait.max.ms": 50, "log_level": 3,
        "fetch.message.max.bytes": 8 << 20, "receive.message.max.bytes": 64 << 20,
    })
    names = {(p["topic"], p["partition"]): name for name, p in parts.items()}
    got: dict[str, list] = {name: [] for name in parts}
    want = sum(p["records"] for p in parts.values())
    try:
        consumer.assign([confluent_kafka.TopicPartition(t, p, 0) for t, p in names])
        count = 0
        deadline = time.monotonic() + 60
        while count < want and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            ts_type, ts = m.timestamp()
            got[names[(m.topic(), m.partition())]].append(
                (m.offset(), -1 if ts_type == confluent_kafka.TIMESTAMP_NOT_AVAILABLE else ts,
                 m.key(), m.value(), ()))
            count += 1
    finally:
        consumer.close()
    fetch_versions = {v for (key, v) in server.server.request_counts if key == 1}
    assert max(fetch_versions) == (1 if fallback == "0.9.0" else 2)
    check(fixture_dir, parts, got, magic)
