"""The gateway's client side: connections to the real Kafka brokers and the cluster's metadata.

- :class:`UpstreamConnection`: one TCP connection to one broker. It negotiates ApiVersions when
  it opens, then carries pipelined requests (a broker answers one connection's requests in
  order); every version it sends is chosen by :func:`~lazyconv.gateway._floor.choose_upstream_version`,
  never below Kafka 4.0's floor. A request that times out closes the connection, as Kafka's
  clients do: its answer could still arrive and be taken for the next request's.
- :class:`UpstreamCluster`: the bootstrap list, the brokers and the topic → partition → leader
  map (refreshed on demand and when stale), shared by every downstream client.
- :class:`UpstreamSession`: the connections one downstream client uses, one per broker, opened
  when first needed and closed with the client's connection. A client's long-polling fetch
  therefore never delays another client's request, and a client's bytes never share a stream
  with another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lazyconv import __version__
from lazyconv.errors import ConfigurationError, LazyconvError, UpstreamError
from lazyconv.gateway._floor import choose_upstream_version
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._error_codes import ErrorCode
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import ZERO_UUID

log = logging.getLogger(__name__)

__all__ = ["UpstreamConnection", "UpstreamCluster", "UpstreamSession", "BrokerAddress",
           "TopicInfo", "PartitionInfo", "parse_bootstrap"]

_SIZE = struct.Struct(">i")
# A response larger than this is taken for a broken stream (Kafka's fetch.max.bytes is 55 MiB).
MAX_RESPONSE_SIZE = 256 << 20
CLIENT_SOFTWARE_NAME = "lazyconv-gateway"
_API_VERSIONS_VERSION = 3


@dataclass(frozen=True)
class BrokerAddress:
    """Where an upstream broker listens."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_bootstrap(text: str) -> list[BrokerAddress]:
    """``"host:port[,host:port…]"`` as a list; :class:`ConfigurationError` for anything else."""
    addresses = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"upstream address {item!r} is not HOST:PORT")
        addresses.append(BrokerAddress(host.strip("[]"), int(port)))
    return addresses


class UpstreamConnection:
    """One connection to one broker (see the module docstring)."""

    def __init__(self, address: BrokerAddress, *, client_id: str = CLIENT_SOFTWARE_NAME,
                 request_timeout: float = 30.0, node_id: int | None = None) -> None:
        self.address = address
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions: dict[int, tuple[int, int]] = {}
        self._sock: socket.socket | None = None
        self._send_lock = asyncio.Lock()
        self._pending: dict[int, tuple[asyncio.Future[Any], ApiSpec, int]] = {}
        self._next_correlation = 1
        self._read_task: asyncio.Task[None] | None = None
        self._closed = False
        self._chosen: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"UpstreamConnection({self.address}, node {self.node_id})"

    @property
    def closed(self) -> bool:
        return self._closed

    async def open(self, timeout: float = 10.0) -> None:
        """Connect and negotiate ApiVersions; raises :class:`UpstreamError` on failure."""
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(
                self.address.host, self.address.port, type=socket.SOCK_STREAM), timeout)
            family, kind, proto, _name, where = infos[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, where), timeout)
            except BaseException:
                sock.close()
                raise
        except (OSError, asyncio.TimeoutError) as exc:
            self._closed = True
            raise UpstreamError(f"cannot connect to upstream broker {self.address}: "
                                f"{exc or 'timed out'}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._read_task = loop.create_task(self._read_loop())
        body: dict[str, Any] = {"client_software_name": CLIENT_SOFTWARE_NAME,
                                "client_software_version": __version__}
        answer = await self.request(api_versions.SPEC, _API_VERSIONS_VERSION, body)
        if answer["error_code"] == ErrorCode.UNSUPPORTED_VERSION:
            answer = await self.request(api_versions.SPEC, 0, {})
        if answer["error_code"] != 0:
            self.close()
            raise UpstreamError(f"upstream broker {self.address} refused ApiVersions with error "
                                f"{answer['error_code']}")
        self.versions = {entry["api_key"]: (entry["min_version"], entry["max_version"])
                         for entry in answer["api_keys"]}

    def version(self, spec: ApiSpec) -> int:
        """The version of ``spec`` to send to this broker (see :mod:`lazyconv.gateway._floor`)."""
        chosen = self._chosen.get(spec.key)
        if chosen is None:
            chosen = self._chosen[spec.key] = choose_upstream_version(
                spec.key, self.versions.get(spec.key))
        return chosen

    async def request(self, spec: ApiSpec, version: int, body: Mapping[str, Any], *,
                      timeout: float | None = None) -> dict[str, Any]:
        """Send one request and wait for its decoded response body."""
        future = await self._send(spec, version, body, expect_response=True)
        assert future is not None
        try:
            return await asyncio.wait_for(future, timeout if timeout is not None else self.request_timeout)
        except asyncio.TimeoutError:
            self.close()
            raise UpstreamError(f"{spec.name} v{version} to {self.address} got no answer within "
                                f"{timeout or self.request_timeout:.0f} s") from None

    async def send_only(self, spec: ApiSpec, version: int, body: Mapping[str, Any]) -> None:
        """Send a request that has no response (Produce with acks=0)."""
        await self._send(spec, version, body, expect_response=False)

    async def _send(self, spec: ApiSpec, version: int, body: Mapping[str, Any], *,
                    expect_response: bool) -> asyncio.Future[Any] | None:
        if self._closed or self._sock is None:
            raise UpstreamError(f"the connection to upstream broker {self.address} is closed")
        correlation_id = self._next_correlation
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                       correlation_id, self.client_id)
        payload = spec.encode_request(version, body)
        future: asyncio.Future[Any] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = (future, spec, version)
        # One request's bytes at a time: a request waiting for socket space must not be
        # interleaved with the next one's.
        async with self._send_lock:
            try:
                await asyncio.get_running_loop().sock_sendall(
                    self._sock, _SIZE.pack(len(header) + len(payload)) + header + payload)
            except (OSError, RuntimeError) as exc:
                self.close()
                raise UpstreamError(f"writing to upstream broker {self.address} failed: {exc}") from None
        return future

    async def _recv_into(self, view: memoryview) -> None:
        loop = asyncio.get_running_loop()
        sock = self._sock
        if sock is None:
            raise UpstreamError(f"the connection to upstream broker {self.address} is closed")
        got = 0
        while got < len(view):
            n = await loop.sock_recv_into(sock, view[got:])
            if n == 0:
                raise UpstreamError(f"upstream broker {self.address} closed the connection")
            got += n

    async def _read_loop(self) -> None:
        error: Exception = UpstreamError(f"upstream broker {self.address} closed the connection")
        head = bytearray(4)
        try:
            while True:
                await self._recv_into(memoryview(head))
                size = _SIZE.unpack(head)[0]
                if not 4 <= size <= MAX_RESPONSE_SIZE:
                    raise UpstreamError(f"upstream broker {self.address} sent a response size of {size}")
                # Read straight into the buffer the response lives in (no second copy): the
                # records relayed or converted are views into it.
                frame = bytearray(size)
                await self._recv_into(memoryview(frame))
                correlation_id = _SIZE.unpack_from(frame)[0]
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    raise UpstreamError(f"upstream broker {self.address} answered correlation id "
                                        f"{correlation_id}, which is not pending")
                future, spec, version = pending
                if future.done():  # its requester gave up
                    continue
                try:
                    # Fetch records stay views into the frame: relayed without a copy.
                    reader = Reader(frame, records_as_views=True)
                    decode_response_header(reader, spec.response_header_version(version))
                    future.set_result(spec.decode_response(version, reader, exact=False))
                except LazyconvError as exc:
                    future.set_exception(UpstreamError(
                        f"malformed {spec.name} v{version} response from {self.address}: {exc}"))
                del frame
        except asyncio.CancelledError:
            error = UpstreamError(f"the connection to {self.address} was closed")
        except OSError as exc:
            error = UpstreamError(f"upstream broker {self.address} closed the connection: {exc}")
        except UpstreamError as exc:
            error = exc
        finally:
            self._fail_pending(error)
            self._close_transport()

    def _fail_pending(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        for future, _spec, _version in pending.values():
            if not future.done():
                future.set_exception(error)

    def _close_transport(self) -> None:
        self._closed = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    def close(self) -> None:
        """Close the connection; pending requests fail with :class:`UpstreamError`."""
        if self._read_task is not None and not self._read_task.done():
            self._read_task.cancel()
        self._fail_pending(UpstreamError(f"the connection to {self.address} was closed"))
        self._close_transport()


@dataclass
class PartitionInfo:
    """One partition as the cluster's metadata describes it."""

    partition: int
    leader: int
    leader_epoch: int = -1
    error_code: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    """One topic as the cluster's metadata describes it."""

    name: str
    error_code: int = 0
    topic_id: uuid.UUID = ZERO_UUID
    is_internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    fetched_at: float = 0.0


class UpstreamCluster:
    """The upstream cluster's brokers and topic metadata, shared by every downstream client."""

    def __init__(self, bootstrap: list[BrokerAddress], *, client_id: str = CLIENT_SOFTWARE_NAME,
                 request_timeout: float = 30.0, metadata_max_age: float = 30.0) -> None:
        if not bootstrap:
            raise ConfigurationError("no upstream address given")
        self.bootstrap = list(bootstrap)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.metadata_max_age = metadata_max_age
        self.brokers: dict[int, BrokerAddress] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}  # Fetch v13+ names topics by id
        self._control: UpstreamConnection | None = None
        self._lock = asyncio.Lock()
        self._all_topics_at = 0.0

    # -- the control connection (metadata) ------------------------------------------------

    async def _control_connection(self) -> UpstreamConnection:
        if self._control is not None and not self._control.closed:
            return self._control
        errors = []
        candidates = list(self.brokers.items()) + [(None, a) for a in self.bootstrap]
        for node_id, address in candidates:
            conn = UpstreamConnection(address, client_id=self.client_id,
                                      request_timeout=self.request_timeout, node_id=node_id)
            try:
                await conn.open()
            except UpstreamError as exc:
                errors.append(str(exc))
                continue
            self._control = conn
            return conn
        raise UpstreamError("no upstream broker reachable: " + "; ".join(dict.fromkeys(errors)))

    async def start(self) -> None:
        """Reach the cluster once (raises :class:`UpstreamError` when no broker answers)."""
        await self.refresh(None)

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    # -- metadata -------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None, *, allow_auto_create: bool = False) -> None:
        """Ask the cluster for ``topics`` (``None``: every topic) and update the cache."""
        async with self._lock:
            conn = await self._control_connection()
            version = conn.version(metadata.SPEC)
            body: dict[str, Any] = {
                "topics": None if topics is None else [{"topic_id": ZERO_UUID, "name": t} for t in topics],
                "allow_auto_topic_creation": allow_auto_create,
            }
            try:
                answer = await conn.request(metadata.SPEC, version, body)
            except UpstreamError:
                conn.close()
                raise
        self._apply_metadata(answer, every_topic=topics is None)

    def _apply_metadata(self, answer: Mapping[str, Any], every_topic: bool) -> None:
        now = time.monotonic()
        self.brokers = {b["node_id"]: BrokerAddress(b["host"], b["port"]) for b in answer["brokers"]}
        self.cluster_id = answer.get("cluster_id")
        self.controller_id = answer.get("controller_id", -1)
        seen = set()
        for topic in answer["topics"]:
            name = topic["name"]
            if name is None:
                continue
            seen.add(name)
            info = TopicInfo(name, topic["error_code"], topic.get("topic_id") or ZERO_UUID,
                             bool(topic.get("is_internal")), fetched_at=now)
            for p in topic["partitions"]:
                info.partitions[p["partition_index"]] = PartitionInfo(
                    p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                    p["error_code"], list(p["replica_nodes"]), list(p["isr_nodes"]))
            self.topics[name] = info
            if info.topic_id != ZERO_UUID:
                self._names_by_id[info.topic_id] = name
        if every_topic:
            for name in list(self.topics):
                if name not in seen:
                    self._names_by_id.pop(self.topics.pop(name).topic_id, None)
            self._all_topics_at = now

    def _fresh(self, name: str) -> bool:
        info = self.topics.get(name)
        return (info is not None and info.error_code == 0 and
                time.monotonic() - info.fetched_at < self.metadata_max_age)

    async def topics_for(self, names: list[str] | None, *,
                         allow_auto_create: bool = False) -> dict[str, TopicInfo]:
        """Metadata of ``names`` (``None``: every topic), from the cache when fresh."""
        if names is None:
            if time.monotonic() - self._all_topics_at >= self.metadata_max_age:
                await self.refresh(None)
            return dict(self.topics)
        missing = [n for n in dict.fromkeys(names) if not self._fresh(n)]
        if missing:
            await self.refresh(missing, allow_auto_create=allow_auto_create)
        return {n: self.topics[n] for n in names if n in self.topics}

    def leader(self, topic: str, partition: int) -> int | None:
        """The cached leader's node id (``None`` when unknown or leaderless)."""
        info = self.topics.get(topic)
        part = info.partitions.get(partition) if info else None
        if part is None or part.leader < 0:
            return None
        return part.leader

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id`` in the cache (``None`` if unknown)."""
        name = self._names_by_id.get(topic_id)
        info = self.topics.get(name) if name is not None else None
        return name if info is not None and info.topic_id == topic_id else None  # not a stale id

    def invalidate(self, topic: str | None = None) -> None:
        """Forget a topic's metadata (or all of it): the next use asks the cluster again."""
        if topic is None:
            for info in self.topics.values():
                info.fetched_at = 0.0
            self._all_topics_at = 0.0
        elif topic in self.topics:
            self.topics[topic].fetched_at = 0.0

    def address_of(self, node_id: int) -> BrokerAddress:
        address = self.brokers.get(node_id)
        if address is None:
            raise UpstreamError(f"upstream broker {node_id} is not in the cluster's metadata")
        return address


class UpstreamSession:
    """The upstream connections of one downstream client (see the module docstring)."""

    def __init__(self, cluster: UpstreamCluster, client_id: str | None = None) -> None:
        self.cluster = cluster
        self.client_id = client_id or cluster.client_id
        self._connections: dict[int, UpstreamConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def connection(self, node_id: int) -> UpstreamConnection:
        """This client's connection to broker ``node_id`` (opened when missing or closed)."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._opening.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            conn = UpstreamConnection(self.cluster.address_of(node_id), client_id=self.client_id,
                                      request_timeout=self.cluster.request_timeout, node_id=node_id)
            await conn.open()
            self._connections[node_id] = conn
            return conn

    async def any_connection(self) -> UpstreamConnection:
        """A connection to any live broker (one this client has open, else the first that
        answers), for requests that any broker answers (FindCoordinator)."""
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        if not self.cluster.brokers:
            await self.cluster.refresh([])
        errors = []
        for node in sorted(self.cluster.brokers):
            try:
                return await self.connection(node)
            except UpstreamError as exc:
                errors.append(str(exc))
        raise UpstreamError("no upstream broker reachable: " + "; ".join(errors))

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
