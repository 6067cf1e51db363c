"""The gateway's Prometheus metrics, in a registry of its own (never the process's default one:
two gateways in one process keep theirs apart).

:class:`GatewayMetrics` is fed by the gateway's hooks, each once per connection, request,
upstream request or converted partition, never per record or per byte: the server's observer
(:class:`~lazyconv.gateway._clients.ClientRegistry` forwards connections and answered requests),
the upstream connections (requests, latency, bytes), the relays (records and batches down- and
up-converted, via the connection's :data:`~lazyconv.net._session.current_session`) and the
error map (upstream error codes, and the ones rewritten for old clients). What the hooks add to
once per request is kept as plain numbers (:mod:`lazyconv.gateway._tallies`: the hooks and the
scrape all run on the event loop) and becomes Prometheus families when scraped; the rest are
prometheus_client's own counters. What already exists as plain numbers (the front door's
request counts, the open sessions, the conversion cache's and the worker pool's counters, the
cluster's state) is read when Prometheus scrapes, by a collector, at no cost in between. Every label has a bounded set of values: API names and
versions, listeners, error codes, codecs, magic values, close reasons, and client software
names and versions as Kafka accepts them (at most ``MAX_SOFTWARE_SERIES`` series, the rest
``other``); no client id or topic.

The names, types and labels are listed in docs/guide/gateway.md (Metrics).
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lazyconv._version import __version__
from lazyconv.conversion._cache import conversion_cache
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import ErrorCode
from lazyconv.gateway._clients import software_label
from lazyconv.gateway._releases import implied_release
from lazyconv.gateway._tallies import LatencyTally, Tally, families
from lazyconv.net._session import Session, current_session
from lazyconv.protocol._kafka_apis import KAFKA_API_BY_KEY
from lazyconv.records import Compression
from lazyconv.records._entries import EntriesSummary, summarize_entries
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
)

if TYPE_CHECKING:
    from lazyconv.gateway._upstream import UpstreamCluster
    from lazyconv.net._server import KafkaServer
    from lazyconv.net._workers import ConversionWorkers

log = logging.getLogger(__name__)

__all__ = ["GatewayMetrics", "PREFIX", "MAX_SOFTWARE_SERIES", "session_metrics", "count_v2_records",
           "fetch_written"]

PREFIX = "lazyconv_gateway"
MAX_SOFTWARE_SERIES = 50
# Latency buckets in seconds: Prometheus's defaults, with the long polls of fetches (a client's
# max wait, 0.5 s for most) and slow upstream answers (30 s, the request timeout) beyond them.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   10.0, 30.0, float("inf"))
_CODECS = {int(c): c.name.lower() for c in Compression}
_ERROR_NAMES = {int(c): c.name for c in ErrorCode}
_I32 = struct.Struct(">i")
_CODEC_BYTE = ATTRIBUTES_OFFSET + 1  # the low byte of a v2 batch's attributes (an int16)


def _api(key: int) -> str:
    """The name of API ``key``: every API Kafka 4 serves (relayed ones too), else the key."""
    spec = KAFKA_API_BY_KEY.get(key)
    return spec.name if spec is not None else str(key)


def _api_labels(key: Hashable) -> tuple[str]:
    return (_api(cast(int, key)),)


def _magic_labels(magic: Hashable) -> tuple[str]:
    return (str(magic),)


def _magic_codec_labels(key: Hashable) -> tuple[str, str]:
    magic, codec = cast(tuple[int, str], key)
    return str(magic), codec


def _error(code: int) -> str:
    return _ERROR_NAMES.get(code, str(code))


def session_metrics() -> tuple[Session | None, GatewayMetrics | None]:
    """The running connection's session and its gateway's metrics (``None`` when metrics are
    off or no connection runs)."""
    session = current_session.get()
    if session is None:
        return None, None
    observer = session.observer
    return session, getattr(observer, "metrics", None)


def count_v2_records(records: bytes | bytearray | memoryview) -> tuple[int, int, str]:
    """(batches, records, codec of the first batch) of v2 record bytes, read from the batch
    headers only (one step per batch, never per record); a partial last batch is not counted.
    Records of another magic count as one batch each with no records."""
    view = memoryview(records)
    end = len(view)
    batches = count = 0
    codec = "none"
    position = 0
    while position + RECORD_BATCH_OVERHEAD <= end:
        length = _I32.unpack_from(view, position + SIZE_OFFSET)[0]
        nxt = position + LOG_OVERHEAD + length
        if length <= 0 or nxt > end:
            break
        if view[position + MAGIC_OFFSET] == 2:
            count += _I32.unpack_from(view, position + RECORDS_COUNT_OFFSET)[0]
            if not batches:
                codec = _CODECS.get(view[position + _CODEC_BYTE] & COMPRESSION_CODEC_MASK, "none")
        batches += 1
        position = nxt
    return batches, count, codec


class GatewayMetrics:
    """The gateway's metrics (see the module docstring); :attr:`registry` is what ``/metrics``
    serves. :meth:`bind` gives it the server, cluster and worker pool it reads at scrape time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, CPU, fds
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        r = self.registry
        self.connections_opened = PromCounter(
            f"{PREFIX}_connections_opened", "Client connections accepted", ["listener"], registry=r)
        self.connections_closed = PromCounter(
            f"{PREFIX}_connections_closed", "Client connections ended, by why", ["listener", "reason"],
            registry=r)
        # What the per-request hooks add to: plain numbers (lazyconv.gateway._tallies), keyed by
        # the raw values the hooks have (API keys, magic values), named at scrape time.
        self.request_seconds = LatencyTally(
            f"{PREFIX}_request_duration_seconds",
            "Downstream requests: from the whole request read to its response written, a "
            "quota's throttle hold left out", ["api"], _api_labels, LATENCY_BUCKETS)
        self.throttle_seconds = LatencyTally(
            f"{PREFIX}_request_throttle_seconds",
            "Downstream answers held for a quota's throttle time (clients older than KIP-219, "
            "which do not back off themselves): how long", ["api"], _api_labels, LATENCY_BUCKETS)
        self.request_bytes = Tally(
            f"{PREFIX}_request_bytes", "Bytes of downstream requests (size fields included)",
            ["api"], _api_labels)
        self.response_bytes = Tally(
            f"{PREFIX}_response_bytes", "Bytes of downstream responses (size fields included)",
            ["api"], _api_labels)
        self.upstream_seconds = LatencyTally(
            f"{PREFIX}_upstream_request_duration_seconds",
            "Upstream requests: from sent to answered", ["api"], _api_labels, LATENCY_BUCKETS)
        self.down_records = Tally(
            f"{PREFIX}_down_converted_records", "Records down-converted for old consumers",
            ["to_magic", "codec"], _magic_codec_labels)
        self.down_batches = Tally(
            f"{PREFIX}_down_converted_batches",
            "Upstream v2 batches handed to down-conversion (a batch cut at a response's end and "
            "fetched again counts again)", ["to_magic", "codec"], _magic_codec_labels)
        self.down_bytes = Tally(
            f"{PREFIX}_down_converted_bytes", "Converted bytes written to old consumers",
            ["to_magic"], _magic_labels)
        self.up_records = Tally(
            f"{PREFIX}_up_converted_records", "Records of old producers up-converted to v2",
            ["from_magic", "codec"], _magic_codec_labels)
        self.up_batches = Tally(
            f"{PREFIX}_up_converted_batches", "v2 batches made from old producers' message sets",
            ["from_magic", "codec"], _magic_codec_labels)
        self.up_bytes = Tally(
            f"{PREFIX}_up_converted_bytes", "Bytes of old producers' message sets up-converted",
            ["from_magic"], _magic_labels)
        # Errors are rare and may be counted on a conversion worker's thread: prometheus_client's
        # own (locked) counters.
        self.upstream_errors = PromCounter(
            f"{PREFIX}_upstream_errors", "Error codes in upstream answers (per partition)",
            ["api", "error"], registry=r)
        self.rewritten_errors = PromCounter(
            f"{PREFIX}_rewritten_errors",
            "Upstream error codes the gateway rewrote for old clients' versions",
            ["api", "upstream_error", "downstream_error"], registry=r)
        self.authentications = PromCounter(
            f"{PREFIX}_authentications",
            "Client authentications (re-authentications included), by listener, mechanism and result",
            ["listener", "mechanism", "result"], registry=r)
        # plain numbers, read at scrape time
        self.upstream_requests: Counter[tuple[int, int]] = Counter()
        self.upstream_sent_bytes = 0
        self.upstream_received_bytes = 0
        self._error_children: dict[tuple[int, int, int], tuple[Any, Any]] = {}
        self._server: KafkaServer | None = None
        self._cluster: UpstreamCluster | None = None
        self._workers: ConversionWorkers | None = None
        self._clients: Any = None
        r.register(_ScrapeCollector(self))

    def bind(self, server: KafkaServer, cluster: UpstreamCluster, workers: ConversionWorkers,
             clients: Any) -> None:
        """What the scrape reads: the server (its sessions, its front door's request counts),
        the cluster (its state), the worker pool and the clients registry."""
        self._server = server
        self._cluster = cluster
        self._workers = workers
        self._clients = clients

    # -- the server's hooks (through the ClientRegistry) ------------------------------------

    def connection_opened(self, session: Session) -> None:
        self.connections_opened.labels(session.listener.label).inc()

    def request_done(self, session: Session, seconds: float, request_bytes: int,
                     response_bytes: int, throttled: float = 0.0) -> None:
        key = session.request[0] if session.request is not None else -1
        self.request_seconds.observe(key, seconds)
        if throttled > 0:
            self.throttle_seconds.observe(key, throttled)
        self.request_bytes.add(key, request_bytes)
        self.response_bytes.add(key, response_bytes)  # a series at 0 for acks=0, as it was

    def connection_closed(self, session: Session, reason: str) -> None:
        self.connections_closed.labels(session.listener.label, reason).inc()

    def authenticated(self, session: Session, mechanism: str, ok: bool) -> None:
        """An authentication of ``session`` with ``mechanism`` (one of
        :data:`~lazyconv.net._observer.AUTHENTICATION_MECHANISMS`) succeeded or failed."""
        self.authentications.labels(session.listener.label, mechanism,
                                    "success" if ok else "failure").inc()

    # -- upstream connections ---------------------------------------------------------------

    def upstream_sent(self, api_key: int, version: int, nbytes: int) -> None:
        self.upstream_requests[(api_key, version)] += 1
        self.upstream_sent_bytes += nbytes

    def upstream_answered(self, api_key: int, seconds: float) -> None:
        self.upstream_seconds.observe(api_key, seconds)

    # -- the relays (on the event loop) -----------------------------------------------------

    def down_converted(self, to_magic: int, codec: str, records: int, batches: int,
                       nbytes: int) -> None:
        key = (to_magic, codec)
        self.down_records.add(key, records)
        self.down_batches.add(key, batches)
        self.down_bytes.add(to_magic, nbytes)

    def up_converted(self, from_magic: int, codec: str, records: int, nbytes: int) -> None:
        key = (from_magic, codec)
        self.up_records.add(key, records)
        self.up_batches.add(key)
        self.up_bytes.add(from_magic, nbytes)

    def upstream_error(self, api_key: int, upstream: int, downstream: int) -> None:
        key = (api_key, upstream, downstream)
        children = self._error_children.get(key)
        if children is None:
            api = _api(api_key)
            children = self._error_children[key] = (
                self.upstream_errors.labels(api, _error(upstream)),
                self.rewritten_errors.labels(api, _error(upstream), _error(downstream))
                if downstream != upstream else None)
        children[0].inc()
        if children[1] is not None:
            children[1].inc()

    # -- what the scrape reads --------------------------------------------------------------

    def software_series(self) -> dict[tuple[str, str, str, str], int]:
        """Open connections by (listener, client software name, its version, implied Kafka
        release), at most ``MAX_SOFTWARE_SERIES`` of them (the rest as ``other``)."""
        counts: Counter[tuple[str, str, str, str]] = Counter()
        sessions = list(self._server.sessions.values()) if self._server is not None else []
        for session in sessions:
            name = software_label(session.client_software_name) or "unknown"
            version = software_label(session.client_software_version) or "unknown"
            release = implied_release(session.api_versions) or "unknown"
            counts[(session.listener.label, name, version, release)] += 1
        if len(counts) <= MAX_SOFTWARE_SERIES:
            return dict(counts)
        kept = dict(counts.most_common(MAX_SOFTWARE_SERIES - 1))
        other: Counter[tuple[str, str, str, str]] = Counter()
        for (listener, *_rest), n in counts.items():
            if (listener, *_rest) not in kept:
                other[(listener, "other", "other", "other")] += n
        kept.update(other)
        return kept


class _ScrapeCollector(Collector):
    """The metrics read at scrape time (see :class:`GatewayMetrics`)."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.m = metrics

    def describe(self) -> Iterable[Metric]:
        return []  # unchecked: these families are built at each scrape

    def collect(self) -> Iterator[Metric]:
        m = self.m
        info = GaugeMetricFamily(f"{PREFIX}_info", "The gateway's version and upstream cluster",
                                 labels=["version", "cluster_id"])
        cluster = m._cluster
        info.add_metric([__version__, (cluster.cluster_id if cluster is not None else None) or ""], 1)
        yield info
        server = m._server
        if server is not None:
            open_ = GaugeMetricFamily(f"{PREFIX}_connections", "Open client connections",
                                      labels=["listener"])
            per_listener = Counter(s.listener.label for s in list(server.sessions.values()))
            for listener in server.listeners:
                open_.add_metric([listener.label], per_listener.get(listener.label, 0))
            yield open_
            software = GaugeMetricFamily(
                f"{PREFIX}_client_connections",
                "Open client connections by client software (ApiVersions v3+) and the Kafka "
                "release its API versions imply",
                labels=["listener", "client_software_name", "client_software_version",
                        "kafka_release"])
            for labels, n in sorted(m.software_series().items()):
                software.add_metric(list(labels), n)
            yield software
            requests = CounterMetricFamily(f"{PREFIX}_requests", "Downstream requests answered",
                                           labels=["api", "version"])
            for (key, version), n in sorted(server.request_counts.items()):
                requests.add_metric([_api(key), str(version)], n)
            yield requests
            draining = GaugeMetricFamily(f"{PREFIX}_draining", "1 while the gateway drains")
            draining.add_metric([], 1 if server.draining else 0)
            yield draining
        upstream = CounterMetricFamily(f"{PREFIX}_upstream_requests", "Requests sent upstream",
                                       labels=["api", "version"])
        for (key, version), n in sorted(m.upstream_requests.items()):
            upstream.add_metric([_api(key), str(version)], n)
        yield upstream
        sent = CounterMetricFamily(f"{PREFIX}_upstream_sent_bytes", "Bytes sent upstream")
        sent.add_metric([], m.upstream_sent_bytes)
        yield sent
        received = CounterMetricFamily(f"{PREFIX}_upstream_received_bytes",
                                       "Bytes received from upstream")
        received.add_metric([], m.upstream_received_bytes)
        yield received
        if cluster is not None:
            state = cluster.state
            up = GaugeMetricFamily(f"{PREFIX}_upstream_up",
                                   "1 when the upstream cluster answered its last request")
            up.add_metric([], 1 if state.reachable else 0)
            yield up
            age = GaugeMetricFamily(f"{PREFIX}_metadata_age_seconds",
                                    "Seconds since the upstream cluster last answered")
            age.add_metric([], state.metadata_age if state.metadata_age is not None else float("nan"))
            yield age
            outages = CounterMetricFamily(f"{PREFIX}_upstream_outages",
                                          "Times the upstream cluster stopped answering")
            outages.add_metric([], state.outages)
            yield outages
        workers = m._workers
        if workers is not None:
            cpu = CounterMetricFamily(f"{PREFIX}_conversion_cpu_seconds",
                                      "CPU seconds of the conversion worker pool's steps")
            cpu.add_metric([], workers.cpu_seconds)
            yield cpu
            queued = GaugeMetricFamily(f"{PREFIX}_worker_queue_depth",
                                       "Conversion steps waiting for a worker thread")
            queued.add_metric([], workers.queued)
            yield queued
            threads = GaugeMetricFamily(f"{PREFIX}_worker_threads", "Conversion worker threads")
            threads.add_metric([], workers.threads)
            yield threads
        counts = conversion_cache.counts
        for name, value, text in (("hits", counts.hits, "Conversions answered by the cache"),
                                  ("misses", counts.misses, "Cache lookups not answered"),
                                  ("evictions", counts.evictions, "Entries evicted")):
            family = CounterMetricFamily(f"{PREFIX}_conversion_cache_{name}", text)
            family.add_metric([], value)
            yield family
        held = GaugeMetricFamily(f"{PREFIX}_conversion_cache_bytes",
                                 "Bytes the conversion cache holds")
        held.add_metric([], counts.held_bytes)
        yield held
        clients = m._clients
        if clients is not None:
            known = GaugeMetricFamily(f"{PREFIX}_clients", "Clients in the clients report")
            known.add_metric([], len(clients))
            yield known
        yield from families(m.request_seconds, m.request_bytes, m.response_bytes,
                            m.upstream_seconds, m.down_records, m.down_batches, m.down_bytes,
                            m.up_records, m.up_batches, m.up_bytes)


def fetch_written(session: Session, metrics: GatewayMetrics,
                  partitions: list[tuple[dict[str, Any], EntriesSummary | None]]) -> Callable[[], None]:
    """What a Fetch response counts once it is written: for each down-converted partition its
    records (the conversion's own count), upstream batches and bytes, by target magic and the
    codec of its first batch; for the others the records handed over as they are (their batch
    headers). The client's record gets the records either way. Each partition comes with the
    summary of its upstream records when the relay already read one (else it is read here)."""

    def written() -> None:
        records_out = 0
        for entry, summary in partitions:
            records = entry.get("records")
            if records is None:
                continue
            if isinstance(records, LazyDownConvertedRecords):
                converted = records.stats.records_converted
                if summary is None:
                    summary = summarize_entries(getattr(records.records, "buffer", b""))
                metrics.down_converted(records.to_magic, _CODECS.get(summary.first_codec, "none"),
                                       converted, summary.entries, records.size_in_bytes)
                records_out += converted
            elif isinstance(records, (bytes, bytearray, memoryview)):
                records_out += count_v2_records(records)[1]
        session.records_out += records_out

    return written
