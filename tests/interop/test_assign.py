"""assign(): every client configuration reads every partition of the fixture exactly."""

from __future__ import annotations

import pytest

from tests.interop.checks import assert_same_records, received
from tests.interop.clients import client_ids
from tests.interop.conftest import ServerPool, Tools, fixture_topic, require
from tests.interop.expected import ZSTD_TOPICS, checksum, expected

pytestmark = [pytest.mark.interop, pytest.mark.timeout(75)]

CLIENT_TIMEOUT_S = 45


def test_expected_views_match_the_manifest(servers: ServerPool) -> None:
    """The harness's own expectation (read from the log files) agrees with manifest.json."""
    served = servers.default()
    for part in served.manifest.values():
        everything = expected(served.folder(part), 2, read_committed=False)
        assert len(everything) == part.records, part.name
        assert checksum(everything) == part.checksum, part.name
        committed = expected(served.folder(part), 2, read_committed=True)
        assert len(everything) - len(committed) >= part.aborted_records, part.name


@pytest.mark.parametrize("client_id", client_ids())
def test_assign_reads_every_partition(servers: ServerPool, tools: Tools, client_id: str) -> None:
    client = require(client_id, tools)
    served = servers.for_client(client)
    # Below Fetch v10 (magic 0/1 here) a zstd batch cannot be down-converted: Kafka and this
    # server answer UNSUPPORTED_COMPRESSION_TYPE for those topics, so they are left out.
    parts = [p for p in served.manifest.values()
             if (client.magic == 2 or fixture_topic(p) not in ZSTD_TOPICS)
             and fixture_topic(p) not in client.unreadable_topics]
    job = {"action": "consume", "mode": "assign", "isolation": "read_uncommitted",
           "partitions": [[p.topic, p.partition] for p in parts],
           "last": {f"{p.topic}/{p.partition}": p.last_record_offset for p in parts}}
    events = client.start(tools, served.bootstrap, job, timeout=CLIENT_TIMEOUT_S)
    try:
        events.wait_for("done", CLIENT_TIMEOUT_S + 15)
    finally:
        events.child.kill()
    got = received(events.events)
    for p in parts:
        want = expected(served.folder(p), client.magic, read_committed=False)
        assert_same_records(got.get((p.topic, p.partition), []), want, f"{client.id} {p.name}")
