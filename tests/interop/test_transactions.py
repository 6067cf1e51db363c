"""read_committed readers never see an aborted record (nor one of a transaction still open at
the log end); read_uncommitted readers see every record. The fixture's ``transactions`` topic
holds committed and aborted transactions, and partition 1 ends inside an open one."""

from __future__ import annotations

import pytest

from tests.interop.checks import assert_same_records, received
from tests.interop.clients import client_ids
from tests.interop.conftest import ServerPool, Tools, fixture_topic, not_applicable, require
from tests.interop.expected import expected, stored_records

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

CLIENT_TIMEOUT_S = 30


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("client_id", client_ids())
def test_isolation_level(servers: ServerPool, tools: Tools, client_id: str,
                         isolation: str) -> None:
    client = require(client_id, tools)
    served = servers.for_client(client)
    if isolation == "read_committed":
        not_applicable(client, "read_committed")
    committed = isolation == "read_committed"
    parts = [p for p in served.manifest.values() if fixture_topic(p) == "transactions"]
    wants = {p.name: expected(served.folder(p), client.magic, read_committed=committed)
             for p in parts}
    assert any(s.aborted for p in parts for s in stored_records(served.folder(p)))
    job = {"action": "consume", "mode": "assign", "isolation": isolation,
           "partitions": [[p.topic, p.partition] for p in parts],
           "last": {f"{p.topic}/{p.partition}": wants[p.name][-1][0] for p in parts}}
    events = client.start(tools, served.bootstrap, job, timeout=CLIENT_TIMEOUT_S)
    try:
        events.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        events.child.kill()
    got = received(events.events)
    for p in parts:
        records = got.get((p.topic, p.partition), [])
        if committed:
            aborted = {s.record[0] for s in stored_records(served.folder(p)) if s.aborted}
            seen = sorted(aborted & {r[0] for r in records})
            assert not seen, f"{client.id} {p.name}: aborted records delivered at {seen[:10]}"
        assert_same_records(records, wants[p.name], f"{client.id} {p.name} {isolation}")
