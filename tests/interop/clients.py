"""The client × protocol-level matrix: every client configuration the interop suite drives.

``magic`` is the message format the configuration's fetches read from this server (Fetch v0-1:
v0, v2-3: v1, v4+: v2); ``produce_magic`` the format it produces. A feature that the client
cannot use at that protocol level carries the reason instead of being tested (see the interop
matrix in docs/guide/serve.md).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from tests.conftest import REPO_ROOT
from tests.interop.harness import ChildProcess, Events

NEEDS_FETCH_V4 = "read_committed needs Fetch v4+ (Kafka 0.11); this level fetches below v4"
FETCH_ONLY_CAP = ("the server caps only Fetch (at v2), which no real broker does: librdkafka "
                  "then writes magic v1 into Produce v10, which Kafka and this server refuse "
                  "(INVALID_RECORD)")
NEEDS_PRODUCE_V3 = ("transactions need Produce v3+ and InitProducerId (Kafka 0.11); this level "
                    "produces below v3")


@dataclass(frozen=True)
class Client:
    """One client library at one protocol level."""

    id: str
    family: str  # kafka-python, confluent-kafka, aiokafka, kcat, kafkajs
    settings: dict[str, Any] = field(default_factory=dict)
    magic: int = 2
    produce_magic: int = 2
    not_applicable: dict[str, str] = field(default_factory=dict)  # feature -> why
    # topic (fixture name) -> why this client cannot read it from any broker
    unreadable_topics: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    server_args: tuple[str, ...] = ()  # extra ``lazyconv serve`` arguments it is tested against

    def driver_argv(self, tools: dict[str, str]) -> list[str]:
        if self.family == "kafkajs":
            return [tools["node"], str(REPO_ROOT / "tests/interop/drivers/kafkajs_client.js")]
        module = {"kafka-python": "kafka_python_client", "confluent-kafka": "confluent_client",
                  "aiokafka": "aiokafka_client", "kcat": "kcat_client"}[self.family]
        return [sys.executable, "-m", f"tests.interop.drivers.{module}"]

    def start(self, tools: dict[str, str], bootstrap: str, job: dict[str, Any], *,
              timeout: float) -> Events:
        settings = dict(self.settings)
        if self.family == "kcat":
            settings["kcat"] = tools["kcat"]
        full = {"bootstrap": bootstrap, "client": settings, "timeout": timeout, **job}
        env = dict(self.env)
        if self.family == "kafkajs":
            env["NODE_PATH"] = tools["node_path"]
        child = ChildProcess([*self.driver_argv(tools), json.dumps(full)], cwd=REPO_ROOT,
                             stdin=True, env=env)
        return Events(child)


def _kafka_python(api: tuple[int, ...] | None, magic: int, produce_magic: int) -> Client:
    name = "negotiated" if api is None else ".".join(map(str, api))
    na = {"read_committed": NEEDS_FETCH_V4, "transactions": NEEDS_PRODUCE_V3} if magic < 2 else {}
    return Client(f"kafka-python-{name}", "kafka-python",
                  {"api_version": list(api) if api else None}, magic, produce_magic, na)


CLIENTS: list[Client] = [
    _kafka_python((0, 9), 0, 0),
    _kafka_python((0, 10), 1, 1),
    _kafka_python((0, 10, 1), 1, 1),
    _kafka_python((0, 11), 2, 2),
    _kafka_python((1, 0), 2, 2),
    _kafka_python((2, 0), 2, 2),
    _kafka_python((2, 5), 2, 2),
    _kafka_python(None, 2, 2),
    Client("confluent-kafka-negotiated", "confluent-kafka", {"config": {}}),
    # No ApiVersions at all: Fetch v1 and Produce v1 (an 0.9 broker's versions).
    Client("confluent-kafka-fallback-0.9.0", "confluent-kafka",
           {"config": {"api.version.request": False, "broker.version.fallback": "0.9.0"}},
           0, 0, {"read_committed": NEEDS_FETCH_V4, "transactions": NEEDS_PRODUCE_V3}),
    # librdkafka sends ApiVersions anyway when the fallback is 0.10.0 or later, so this
    # configuration negotiates like the default one (Fetch v16, magic v2 here) ...
    Client("confluent-kafka-fallback-0.10.0", "confluent-kafka",
           {"config": {"api.version.request": False, "broker.version.fallback": "0.10.0"}}),
    # ... and reads magic v1 only from a broker whose Fetch stops at v2, as an 0.10.0 broker's.
    Client("confluent-kafka-fallback-0.10.0-fetch-v2-server", "confluent-kafka",
           {"config": {"api.version.request": False, "broker.version.fallback": "0.10.0"}},
           1, 1, {"read_committed": NEEDS_FETCH_V4, "transactions": FETCH_ONLY_CAP,
                  "produce": FETCH_ONLY_CAP},
           server_args=("--max-fetch-version", "2")),
    # aiokafka 0.14's compiled record parser fails on magic v0/v1 entries in a Fetch v4+
    # response (CorruptRecordException "Can't read N bytes from pos 22", or "Negative size
    # passed to PyBytes_FromStringAndSize"); its pure-Python parser reads them: use that one.
    Client("aiokafka-negotiated", "aiokafka", env={"AIOKAFKA_NO_EXTENSIONS": "1"},
           unreadable_topics={"upgraded": "aiokafka refuses LZ4 in magic v0 messages "
                                          "(UnsupportedCodecError, by design)"}),
    Client("kcat", "kcat", not_applicable={
        "transactions": "kcat -P with transactional.id commits everything it sends in one "
                        "transaction; it cannot abort one"}),
    Client("kafkajs", "kafkajs"),
]

BY_ID = {c.id: c for c in CLIENTS}


def client_ids() -> list[str]:
    return [c.id for c in CLIENTS]


def scratch_topic(client: Client, purpose: str) -> str:
    """A topic of this client's own for ``purpose`` (created empty by the served-log fixture)."""
    return f"interop-{purpose}-{client.id.replace('.', '_')}"
