"""A produce -> consume round trip per client: what a client produces to the server it reads
back exactly (offsets from 0, keys, values, headers), with the timestamps it set."""

from __future__ import annotations

import base64
import time

import pytest

from tests.interop.checks import received
from tests.interop.clients import Client, client_ids, scratch_topic
from tests.interop.conftest import ServerPool, Tools, not_applicable, require

pytestmark = [pytest.mark.interop, pytest.mark.timeout(75)]

CLIENT_TIMEOUT_S = 25
PER_PARTITION = 40


def records_for(client: Client) -> list[dict]:
    """Records for both partitions: null and empty keys and values where the client can send
    them, headers (one with a null value) from magic v2 on."""
    out = []
    for partition in (0, 1):
        for i in range(PER_PARTITION):
            key: bytes | None = f"key-{partition}-{i}".encode()
            value: bytes | None = (f"value {i} of {client.id} " * (1 + i % 7)).encode()
            headers: list[tuple[str, bytes | None]] = []
            if client.family == "kcat":  # kcat -P: one header set per run, no null values
                headers = [("produced-by", b"kcat")] if client.produce_magic == 2 else []
            else:
                if i == 3:
                    key = None
                if i == 5:
                    value = None
                if i == 6:
                    key, value = b"", b""
                if client.produce_magic == 2 and i % 2:
                    headers = [("h-index", str(i).encode()), ("h-empty", b"")]
                    if client.family not in ("kafka-python", "kafkajs"):  # no null header values
                        headers.append(("h-null", None))
            out.append({"partition": partition, "key": _b64(key), "value": _b64(value),
                        "headers": [[k, _b64(v)] for k, v in headers]})
    return out


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@pytest.mark.parametrize("client_id", client_ids())
def test_produce_then_consume_round_trip(servers: ServerPool, tools: Tools, client_id: str) -> None:
    client = require(client_id, tools)
    not_applicable(client, "produce")
    served = servers.for_client(client)
    topic = scratch_topic(client, "produce")
    records = records_for(client)
    started_ms = int(time.time() * 1000)
    producer = client.start(tools, served.bootstrap,
                            {"action": "produce", "topic": topic, "records": records},
                            timeout=CLIENT_TIMEOUT_S)
    try:
        producer.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        producer.child.kill()
    acked = producer.of("produced")
    if acked:  # kcat reports no offsets
        assert sorted(e["o"] for e in acked if e["p"] == 0)[:1] == [0]

    consumer = client.start(tools, served.bootstrap, {
        "action": "consume", "mode": "assign", "isolation": "read_uncommitted",
        "partitions": [[topic, 0], [topic, 1]],
        "last": {f"{topic}/0": PER_PARTITION - 1, f"{topic}/1": PER_PARTITION - 1}},
        timeout=CLIENT_TIMEOUT_S)
    try:
        consumer.wait_for("done", CLIENT_TIMEOUT_S + 10)
    finally:
        consumer.child.kill()
    finished_ms = int(time.time() * 1000)
    got = received(consumer.events)
    for partition in (0, 1):
        sent = [r for r in records if r["partition"] == partition]
        back = got.get((topic, partition), [])
        assert [r[0] for r in back] == list(range(PER_PARTITION)), f"{client.id} [{partition}] offsets"
        assert [(r[2], r[3], r[4]) for r in back] == [
            (_bytes(s["key"]), _bytes(s["value"]), tuple((k, _bytes(v)) for k, v in s["headers"]))
            for s in sent], f"{client.id} [{partition}] keys, values, headers"
        for r in back:
            if client.produce_magic == 0 or client.magic == 0:
                assert r[1] == -1, "magic v0 has no timestamps"
            else:
                assert started_ms - 1000 <= r[1] <= finished_ms, f"CreateTime {r[1]} not set now"
