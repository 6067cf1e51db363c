"""The old clients the gateway is tested with: tests/oldclients' registry (kafka-python 1.3.5 and
1.4.7, kafka-node, librdkafka fallbacks, Kafka's Java clients) and kafka-python 3.0 pinned to old
``api_version`` s (tests/interop's driver), behind one interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.interop.clients import Client
from tests.interop.harness import Events
from tests.oldclients.clients import CLIENTS, OldClient, OldClientTools
from tests.oldclients.clients import start as start_old_client

CLIENT_TIMEOUT_S = 45


@dataclass
class Driver:
    """An old client configuration: the registry's (tests/oldclients) or kafka-python 3.0
    pinned to an old api_version (tests/interop's driver)."""

    id: str
    magic: int
    produce_magic: int
    unreadable: dict[str, str] = field(default_factory=dict)
    old: OldClient | None = None
    interop: Client | None = None

    @property
    def groups(self) -> bool:
        """Whether its driver can consume in a group (subscribe, commit)."""
        if self.old is not None:
            return self.old.groups and self.old.family != "kcat"
        assert self.interop is not None  # kafka-python 3.0: groups need a 0.9 broker's APIs
        return tuple(self.interop.settings["api_version"]) >= (0, 9)

    def start(self, tools: OldClientTools, bootstrap: str, job: dict[str, Any], *,
              timeout: float = CLIENT_TIMEOUT_S) -> Events:
        """The driver started on ``job``; the caller waits for its events and kills it."""
        if self.old is not None:
            return start_old_client(self.old, tools, bootstrap, job, timeout=timeout)
        assert self.interop is not None
        if job["action"] == "produce":
            job = {**job, "records": [{"headers": [], **r} for r in job["records"]]}
        return self.interop.start({}, bootstrap, {"isolation": "read_uncommitted", **job},
                                  timeout=timeout)

    def run(self, tools: OldClientTools, bootstrap: str, job: dict[str, Any]) -> Events:
        """Start the driver and wait for its ``done`` event."""
        events = self.start(tools, bootstrap, job)
        try:
            events.wait_for("done", CLIENT_TIMEOUT_S + 10)
        finally:
            events.child.kill()
        return events


def _kafka_python_3(api: tuple[int, ...]) -> Driver:
    magic = 0 if api < (0, 10) else 1
    name = ".".join(map(str, api))
    return Driver(f"kafka-python-3.0-{name}", magic, magic,
                  {"zstd": "below Fetch v10 a broker refuses zstd (UNSUPPORTED_COMPRESSION_TYPE)"},
                  interop=Client(f"kafka-python-3.0-{name}", "kafka-python",
                                 {"api_version": list(api)}, magic, magic))


DRIVERS: list[Driver] = [
    *(Driver(c.id, c.magic, c.produce_magic, dict(c.unreadable_codecs), old=c) for c in CLIENTS),
    *(_kafka_python_3(api) for api in ((0, 8, 2), (0, 9), (0, 10), (0, 10, 1))),
]
BY_ID = {d.id: d for d in DRIVERS}
