"""The clients that still need the gateway: who connected, with what software, at which versions.

A Kafka 4 broker never sees an old client (it closes the connection at the first old request),
so it cannot say which clients still need converting; the gateway can. :class:`ClientRegistry`
is the gateway's :class:`~lazyconv.net._observer.ServerObserver`: it keeps one
:class:`ClientRecord` per client — client id, software name and version (ApiVersions v3+) or the
Kafka release its versions imply (:mod:`lazyconv.gateway._releases`), principal and source host
— with every API key and version it used, bytes and records each way, its connections, first
and last seen. It logs one line when a client is seen for the first time. Records are bounded
(``max_clients``, least recently seen forgotten first; a client with an open connection is
never forgotten). :meth:`ClientRegistry.report` is the migration report (``/clients``): every
version a Kafka 4 broker refuses is marked, and so is each client that needs the gateway.

Counting costs nothing per request beyond what the connection loop does anyway: a live
connection's counters are its :class:`~lazyconv.net._session.Session`'s, added to its record
when it ends; a report adds the live ones. When metrics are on (:mod:`lazyconv.gateway._metrics`)
the registry forwards each hook to them.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from lazyconv.errors import ConfigurationError
from lazyconv.gateway._releases import implied_release, kafka_4_refuses
from lazyconv.net._observer import ServerObserver
from lazyconv.net._session import Session
from lazyconv.protocol._kafka_apis import KAFKA_API_BY_KEY

if TYPE_CHECKING:
    from lazyconv.gateway._metrics import GatewayMetrics

log = logging.getLogger(__name__)

__all__ = ["ClientRegistry", "ClientRecord", "DEFAULT_MAX_CLIENTS", "software_label"]

DEFAULT_MAX_CLIENTS = 10000
# What Kafka accepts as client_software_name/version (ApiVersionsRequest.isValid): anything else
# is reported as sent but never used as a metric label.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_MAX_SOFTWARE_LENGTH = 64

_Key = tuple[str | None, str | None, str | None, str, str]


def software_label(value: str | None) -> str | None:
    """``value`` when Kafka would accept it as a client software name or version (and it is at
    most 64 characters), else ``None``."""
    if value is None or len(value) > _MAX_SOFTWARE_LENGTH or not _SOFTWARE.fullmatch(value):
        return None
    return value


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


@dataclass(eq=False)
class ClientRecord:
    """One client as the gateway saw it (see the module docstring); the counters are those of
    its ended connections (:meth:`totals` adds the open ones)."""

    client_id: str | None
    software_name: str | None
    software_version: str | None
    principal: str
    host: str
    listener: str
    first_seen: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.time)
    connections: int = 0
    api_versions: Counter[tuple[int, int]] = field(default_factory=Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    live: set[Session] = field(default_factory=set)

    @property
    def key(self) -> _Key:
        return (self.client_id, self.software_name, self.software_version, self.principal, self.host)

    def fold(self, session: Session) -> None:
        """Add an ended connection's counters."""
        self.api_versions.update(session.api_versions)
        self.bytes_in += session.bytes_in
        self.bytes_out += session.bytes_out
        self.records_in += session.records_in
        self.records_out += session.records_out
        self.last_seen = max(self.last_seen, session.last_seen)

    def totals(self) -> ClientRecord:
        """A copy with the open connections' counters added."""
        total = ClientRecord(*self.key[:5], listener=self.listener, first_seen=self.first_seen,
                             last_seen=self.last_seen, connections=self.connections,
                             api_versions=Counter(self.api_versions), bytes_in=self.bytes_in,
                             bytes_out=self.bytes_out, records_in=self.records_in,
                             records_out=self.records_out)
        for session in list(self.live):
            total.fold(session)
        total.live = set(self.live)
        return total

    def to_json(self) -> dict[str, Any]:
        """The record as the clients report shows it (call on :meth:`totals`)."""
        requests = []
        for (key, version), count in sorted(self.api_versions.items()):
            spec = KAFKA_API_BY_KEY.get(key)  # relayed APIs named too
            requests.append({"api": spec.name if spec is not None else str(key), "api_key": key,
                             "version": version, "count": count,
                             "kafka_4_refuses": kafka_4_refuses(key, version)})
        return {
            "client_id": self.client_id,
            "software_name": self.software_name,
            "software_version": self.software_version,
            "implied_release": implied_release(self.api_versions),
            "principal": self.principal,
            "host": self.host,
            "listener": self.listener,
            "connections_open": len(self.live),
            "connections": self.connections,
            "first_seen": _iso(self.first_seen),
            "last_seen": _iso(self.last_seen),
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "requests": requests,
            "needs_gateway": any(r["kafka_4_refuses"] for r in requests),
        }


# What the report keeps of a client's own strings (client id, software name and version: up to
# 32 KiB each on the wire): the report is bounded by its size, not only by its record count.
MAX_REPORTED_CHARS = 256


def _capped(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_REPORTED_CHARS:
        return text
    return text[:MAX_REPORTED_CHARS - 1] + "…"


class ClientRegistry(ServerObserver):
    """The gateway's observer: the clients report, and the metrics when they are on."""

    def __init__(self, max_clients: int = DEFAULT_MAX_CLIENTS,
                 metrics: GatewayMetrics | None = None) -> None:
        if max_clients < 1:
            raise ConfigurationError(f"max_clients must be at least 1, got {max_clients}")
        self.max_clients = max_clients
        self.metrics = metrics
        self._records: OrderedDict[_Key, ClientRecord] = OrderedDict()  # least recently seen first
        self.forgotten = 0

    def __len__(self) -> int:
        return len(self._records)

    # -- the server's hooks ---------------------------------------------------------------

    def connection_opened(self, session: Session) -> None:
        if self.metrics is not None:
            self.metrics.connection_opened(session)

    def request_done(self, session: Session, seconds: float, request_bytes: int,
                     response_bytes: int, throttled: float = 0.0) -> None:
        session.last_seen = time.time()
        record = session.record
        if (record is None or record.client_id != _capped(session.client_id)
                or record.software_name != _capped(session.client_software_name)
                or record.principal != session.principal):
            self._attach(session)
        if self.metrics is not None:
            self.metrics.request_done(session, seconds, request_bytes, response_bytes, throttled)

    def authenticated(self, session: Session, mechanism: str, ok: bool) -> None:
        if self.metrics is not None:
            self.metrics.authenticated(session, mechanism, ok)

    def connection_closed(self, session: Session, reason: str) -> None:
        record = session.record
        if record is not None:
            record.live.discard(session)
            record.fold(session)
            self._records.move_to_end(record.key)
        if self.metrics is not None:
            self.metrics.connection_closed(session, reason)

    # -- records ----------------------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        """``session`` to the record of who it now says it is (made, and logged, when new)."""
        previous = session.record
        if previous is not None:
            previous.live.discard(session)
        key: _Key = (_capped(session.client_id), _capped(session.client_software_name),
                     _capped(session.client_software_version), session.principal,
                     session.peer.lstrip("/") or "?")
        record = self._records.get(key)
        if record is None:
            record = ClientRecord(*key, listener=session.listener.label)
            self._records[key] = record
            software = (f"{record.software_name} {record.software_version}"
                        if record.software_name else "no software name (ApiVersions < v3)")
            log.info("new client %r: %s, from %s as %s", record.client_id, software,
                     record.host, record.principal)
        else:
            self._records.move_to_end(key)
        record.connections += previous is None or previous is not record
        record.live.add(session)
        session.record = record
        self._forget_oldest()

    def _forget_oldest(self) -> None:
        if len(self._records) <= self.max_clients:
            return
        for key, record in list(self._records.items()):
            if len(self._records) <= self.max_clients:
                break
            if not record.live:
                del self._records[key]
                self.forgotten += 1

    def records(self) -> list[ClientRecord]:
        """Every client's record with its open connections added, most recently seen first."""
        totals = [record.totals() for record in self._records.values()]
        return sorted(totals, key=lambda r: r.last_seen, reverse=True)

    def report(self) -> dict[str, Any]:
        """The clients report (``/clients``): see docs/guide/gateway.md."""
        clients = [record.to_json() for record in self.records()]
        return {
            "generated": _iso(time.time()),
            "clients": clients,
            "clients_needing_gateway": sum(1 for c in clients if c["needs_gateway"]),
            "max_clients": self.max_clients,
            "forgotten": self.forgotten,
        }
