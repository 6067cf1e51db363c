"""read_committed readers never see an aborted record (nor one of a transaction still open at
the log end); read_uncommitted readers see every record. The fixture's ``transactions`` topic
holds committed and aborted transactions, and partition 1 ends inside an open one."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.interop.checks import assert_same_records, received
from tests.interop.clients import client_ids, scratch_topic
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


TXN_RECORDS = 8  # per transaction, over both partitions


def _txn_records(name: str) -> list[dict]:
    return [{"partition": i % 2, "key": _b64(f"{name}-key-{i}".encode()),
             "value": _b64(f"{name} value {i}".encode()), "headers": []}
            for i in range(TXN_RECORDS)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("client_id", client_ids())
def test_transactional_producer_round_trip(servers: ServerPool, tools: Tools,
                                           client_id: str) -> None:
    """The client commits a transaction, aborts one, commits another; the log holds all three
    with their markers, and the same client reads back, read_committed, the two committed
    ones only and, read_uncommitted, all three."""
    client = require(client_id, tools)
    not_applicable(client, "transactions")
    served = servers.for_client(client)
    topic = scratch_topic(client, "txn")
    txns: list[dict[str, Any]] = [
        {"outcome": outcome, "records": _txn_records(name)}
        for name, outcome in (("first", "commit"), ("second", "abort"), ("third", "commit"))]
    producer = client.start(tools, served.bootstrap, {
        "action": "produce_txn", "topic": topic, "transactional_id": f"interop-{client.id}",
        "transactions": txns}, timeout=CLIENT_TIMEOUT_S)
    try:
        producer.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        producer.child.kill()
    for isolation in ("read_committed", "read_uncommitted"):
        committed = isolation == "read_committed"
        wants = {p: expected(served.logdir / f"{topic}-{p}", 2, read_committed=committed)
                 for p in (0, 1)}
        for p, want in wants.items():  # what the server wrote, read from its log files
            sent = [(base64.b64decode(r["key"]), base64.b64decode(r["value"]))
                    for t in txns if t["outcome"] == "commit" or not committed
                    for r in t["records"] if r["partition"] == p]
            assert [(r[2], r[3]) for r in want] == sent, f"{topic}-{p} in the log, {isolation}"
        job = {"action": "consume", "mode": "assign", "isolation": isolation,
               "partitions": [[topic, 0], [topic, 1]],
               "last": {f"{topic}/{p}": want[-1][0] for p, want in wants.items()}}
        events = client.start(tools, served.bootstrap, job, timeout=CLIENT_TIMEOUT_S)
        try:
            events.wait_for("done", CLIENT_TIMEOUT_S + 10)
        finally:
            events.child.kill()
        got = received(events.events)
        for p, want in wants.items():
            # produced without headers; CreateTime as the client set it, checked in the log
            assert_same_records(got.get((topic, p), []), want, f"{client.id} {topic}-{p} {isolation}")
