"""Error partitions reach librdkafka: a consumer fetching below v10 gets error 76
(UNSUPPORTED_COMPRESSION_TYPE) for a partition whose next batch is zstd, as from Kafka, instead
of failing to parse the response and fetching again in a loop. The records before that batch
arrive exactly."""

from __future__ import annotations

import subprocess

import pytest

from lazyconv.records import FileRecords
from tests.interop.checks import assert_same_records, received
from tests.interop.conftest import ServerPool, Tools, fixture_topic, require
from tests.interop.expected import expected
from tests.interop.harness import Events

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

UNSUPPORTED_COMPRESSION_TYPE = 76
ZSTD = 4


def first_zstd_offset(folder) -> int:
    for segment in sorted(folder.glob("*.log")):
        with FileRecords.open(segment) as records:
            for batch in records.batches():
                if batch.compression == ZSTD:
                    return batch.base_offset
    raise AssertionError(f"{folder} has no zstd batch")


def test_kcat_fallback_0_9_stops_at_zstd_with_error_76(servers: ServerPool,
                                                        tools: Tools) -> None:
    require("kcat", tools)
    served = servers.default()
    part = next(p for p in served.manifest.values()
                if fixture_topic(p) == "codecs" and p.partition == 0)
    stop = first_zstd_offset(served.folder(part))
    assert stop > 0
    done = subprocess.run(
        [tools["kcat"], "-b", served.bootstrap, "-X", "api.version.request=false",
         "-X", "broker.version.fallback=0.9.0", "-C", "-J", "-e", "-o", "beginning",
         "-t", part.topic, "-p", str(part.partition)],
        capture_output=True, timeout=30)
    # kcat exits on the first non-fatal error: here the partition error, in well under a second
    assert done.returncode != 0
    assert b"Unsupported compression type" in done.stderr, done.stderr[-500:]
    offsets = [int(line.split(b'"offset":')[1].split(b",")[0]) for line in done.stdout.splitlines()]
    want = [r[0] for r in expected(served.folder(part), 0, read_committed=False) if r[0] < stop]
    assert offsets == want


def test_confluent_fallback_0_9_gets_error_76(servers: ServerPool, tools: Tools) -> None:
    client = require("confluent-kafka-fallback-0.9.0", tools)
    served = servers.for_client(client)
    part = next(p for p in served.manifest.values()
                if fixture_topic(p) == "codecs" and p.partition == 0)
    stop = first_zstd_offset(served.folder(part))
    job = {"action": "consume", "mode": "assign", "isolation": "read_uncommitted",
           "partitions": [[part.topic, part.partition]], "stop_on_error": True,
           "last": {f"{part.topic}/{part.partition}": part.last_record_offset}}
    events: Events = client.start(tools, served.bootstrap, job, timeout=20)
    try:
        events.wait_for("done", 30)
    finally:
        events.child.kill()
    warnings = events.of("warning")
    assert [w["code"] for w in warnings] == [UNSUPPORTED_COMPRESSION_TYPE], warnings
    want = [r for r in expected(served.folder(part), 0, read_committed=False) if r[0] < stop]
    assert_same_records(received(events.events).get((part.topic, part.partition), []), want,
                        "records before the first zstd batch")
