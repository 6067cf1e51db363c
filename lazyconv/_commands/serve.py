"""``lazyconv serve LOGDIR``: a Kafka-protocol endpoint over a log directory, for real clients."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import TYPE_CHECKING

from lazyconv._commands._common import (
    OptionError,
    add_connection_limit_options,
    add_conversion_cache_option,
    connection_limits,
    format_size,
    input_dir,
    int_range,
    parse_size,
    port_number,
    positive_int,
    run_until_stopped,
    send_buffer_type,
    size_type,
)
from lazyconv.conversion._cache import DEFAULT_CONVERSION_CACHE_BYTES, conversion_cache
from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from lazyconv.logdir._entry import MIN_ENTRY_SIZE
from lazyconv.protocol import _fetch as fetch_api

if TYPE_CHECKING:
    from lazyconv.net._server import ListenerSpec
    from lazyconv.serve._group_coordinator import CoordinatorConfig
    from lazyconv.serve._model import TopicConfig

log = logging.getLogger(__name__)

_LISTENER = re.compile(r"^(?:(?P<host>[^:]+):)?(?P<port>\d+)(?:,delay=(?P<delay>\d+))?$")
_TOPIC_CONFIG = re.compile(r"^(?P<topic>[^:]+):(?P<key>[a-z.]+)=(?P<value>.+)$")
# Kafka's topic compression.type values (BrokerCompressionType); a broker refuses any other
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a log directory over the Kafka protocol (Fetch with lazy down-conversion)",
        description=(
            "Answer ApiVersions v0-4, Metadata v0-12, ListOffsets v0-8, Fetch v0-17 (with "
            "down-conversion for v0-3 streamed in chunks, read_committed from the log's "
            "transaction markers), Produce v0-11 (appending to the log), InitProducerId v0-5, "
            "a transaction coordinator (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, "
            "TxnOffsetCommit v0-3) and a single-node group coordinator (FindCoordinator v0-4, "
            "JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup v0-5, OffsetCommit and "
            "OffsetFetch v0-8, ListGroups and DescribeGroups v0-5; committed offsets are kept "
            "in LOGDIR/__lazyconv_offsets) over LOGDIR, laid out as a broker does "
            "(TOPIC-PARTITION/00000000000000000000.log). Runs until SIGTERM or SIGINT, then "
            "stops accepting, cuts the responses in flight, flushes the log and its state and "
            "exits 0 with one line on stderr."
        ),
        epilog=(
            "Durability (as Kafka's defaults): a record is acknowledged once written to the "
            "log file (write(), no fsync), so a crash or kill -9 of this process loses nothing "
            "acknowledged; a power loss or OS crash may lose what the OS had not yet written, "
            "unless --flush-messages / --flush-ms ask for fsyncs. Rolled segments, producer "
            "snapshots, producer-id blocks, committed offsets and everything at a clean "
            "shutdown are fsynced. Group membership is kept in memory only (members rejoin "
            "after a restart). On start each partition is recovered as by Kafka: what was "
            "written after its last clean point is validated, a torn last entry cut off, "
            "missing or torn index files rebuilt; corruption elsewhere is logged and answered "
            "as a storage error, never hidden. See docs/guide/robustness.md."
        ),
    )
    parser.add_argument("logdir", metavar="LOGDIR", help="directory holding TOPIC-PARTITION folders")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=9092,
                        help="port of the first listener (default 9092; 0 picks a free port)")
    parser.add_argument("--advertised-host", type=_host, default=None,
                        help="host name Metadata advertises (default: --host)")
    parser.add_argument("--chunk-size", type=size_type(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE), default=131072,
                        help="input bytes down-converted per step of a lazy send, e.g. 16K, 128K, "
                             "1M, between 16K and 1M (default 128K); bounds memory per connection")
    add_conversion_cache_option(parser, DEFAULT_CONVERSION_CACHE_BYTES, compared="the log's bytes",
                                default_text=f"{format_size(DEFAULT_CONVERSION_CACHE_BYTES)} per process")
    parser.add_argument("--no-downconversion", action="store_true",
                        help="behave like message.downconversion.enable=false: consumers that "
                             "need an older format (Fetch v0-3) get UNSUPPORTED_VERSION")
    parser.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                        type=_topic_config,
                        help="a topic setting; keys: compression.type (e.g. zstd: Fetch < v10 "
                             "gets UNSUPPORTED_COMPRESSION_TYPE), message.downconversion.enable "
                             "(true/false). Repeatable")
    parser.add_argument("--max-fetch-version", default=fetch_api.SPEC.max_version,
                        type=int_range(fetch_api.SPEC.min_version, fetch_api.SPEC.max_version),
                        help="highest Fetch version advertised in ApiVersions (0-17, default 17); "
                             "e.g. 2 makes version-negotiating clients fetch like against a 0.10.0 "
                             "broker (magic v1)")
    parser.add_argument("--produce-delay-ms", type=_non_negative_int, default=0,
                        help="delay before answering each Produce on the first listener (ms)")
    parser.add_argument("--listener", action="append", default=[], metavar="[HOST:]PORT[,delay=MS]",
                        type=_listener,
                        help="an extra listener, advertised as one more broker (node ids 0, 1, ...; "
                             "partition p is led by node p %% N), with its own Produce delay. "
                             "Repeatable")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="listeners with TLS and SASL, as Kafka broker properties: listeners="
                             "SASL_SSL://:9094,..., ssl.keystore.*, ssl.truststore.*, "
                             "ssl.client.auth, sasl.enabled.mechanisms, listener.name.<listener>."
                             "plain.sasl.jaas.config with user_<name>=\"<password>\", "
                             "serve.scram.credentials.file (written by 'lazyconv gateway "
                             "scram-credentials'); secrets as ${env:NAME} or ${file:PATH}. Its "
                             "listeners replace --host, --port and --listener "
                             "(docs/guide/serve.md#tls-and-sasl)")
    add_connection_limit_options(parser)
    parser.add_argument("--max-partitions-per-request", type=positive_int, default=200000,
                        help="a Fetch naming more partitions closes the connection (default 200000)")
    parser.add_argument("--max-decompressed-batch-bytes", type=_positive_size, default=32 << 20,
                        help="largest decompressed batch that down-conversion inflates (default "
                             "32M); a larger one (a compression bomb) is answered as that "
                             "partition's storage error, and Produce refuses one with "
                             "MESSAGE_TOO_LARGE")
    parser.add_argument("--max-open-segment-files", type=positive_int, default=1024,
                        help="segment files kept open for reuse by every fetch (a shared LRU "
                             "cache; default 1024): bounds the server's descriptors")
    parser.add_argument("--sender-processes", type=_non_negative_int, default=None, metavar="N",
                        help="processes that down-convert and write the responses of Fetch v0-3, "
                             "started when the first one is due (default: one per core); 0: "
                             "threads of this process instead, which share one interpreter lock")
    parser.add_argument("--socket-send-buffer", type=send_buffer_type(zero_is_default=True),
                        default=102400, metavar="SIZE",
                        help="SO_SNDBUF of client connections (default 100K, Kafka's "
                             "socket.send.buffer.bytes; -1 or 0 keep the OS default)")
    parser.add_argument("--segment-bytes", type=size_type(MIN_ENTRY_SIZE, _INT32_MAX), default=1 << 30,
                        help="roll the partition to a new segment when an append would take the "
                             "active one past this size (Kafka's log.segment.bytes, default 1G)")
    parser.add_argument("--index-interval-bytes", type=_size, default=4096,
                        help="log bytes between two .index/.timeindex entries of appended data "
                             "(Kafka's index.interval.bytes, default 4096)")
    parser.add_argument("--flush-messages", type=positive_int, default=None, metavar="N",
                        help="fsync a partition before acknowledging once N messages were "
                             "appended to it since its last fsync (Kafka's "
                             "log.flush.interval.messages; default: never, the OS writes the data "
                             "back; 1 makes every acknowledged record survive a power loss)")
    parser.add_argument("--flush-ms", type=positive_int, default=None, metavar="MS",
                        help="fsync a partition whose oldest unflushed append is MS old (Kafka's "
                             "log.flush.interval.ms; default: never, the OS writes the data back)")
    parser.add_argument("--group-initial-rebalance-delay-ms", type=_non_negative_int, default=0,
                        help="how long a group's first rebalance waits for more members (Kafka's "
                             "group.initial.rebalance.delay.ms; default 0 here, 3000 in Kafka)")
    parser.add_argument("--group-min-session-timeout-ms", type=positive_int, default=6000,
                        help="smallest session timeout a member may ask for (Kafka's "
                             "group.min.session.timeout.ms, default 6000)")
    parser.add_argument("--group-max-session-timeout-ms", type=positive_int, default=1800000,
                        help="largest session timeout a member may ask for (Kafka's "
                             "group.max.session.timeout.ms, default 1800000)")
    parser.set_defaults(handler=run)


_size = parse_size  # the size syntax every command shares (16K, 128KiB, 1M, bytes)


def _positive_size(text: str) -> int:
    value = _size(text)
    if value < 1:  # 0 would refuse every compressed batch as a bomb
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


def _host(text: str) -> str:
    if not text.strip():  # Metadata would advertise a broker no client can reach
        raise argparse.ArgumentTypeError("must name a host, got an empty string")
    return text


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


_INT32_MAX = (1 << 31) - 1  # the largest segment Kafka's log.segment.bytes allows


def _topic_config(text: str) -> tuple[str, str, str]:
    """``--topic-config TOPIC:KEY=VALUE``: (topic, key, value), the value lowercased."""
    m = _TOPIC_CONFIG.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:KEY=VALUE")
    key, value = m.group("key"), m.group("value").lower()
    if key == "compression.type":
        if value not in _COMPRESSION_TYPES:
            raise argparse.ArgumentTypeError(f"{text!r}: compression.type must be one of "
                                             f"{', '.join(_COMPRESSION_TYPES)}")
    elif key == "message.downconversion.enable":
        if value not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"{text!r}: expected true or false")
    else:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown key {key!r}")
    return m.group("topic"), key, value


_topic_config.__name__ = "TOPIC:KEY=VALUE"  # argparse names the type in its messages


def _listener(text: str) -> tuple[str | None, int, int]:
    """``--listener [HOST:]PORT[,delay=MS]``: (host or None for --host's, port, delay)."""
    m = _LISTENER.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not [HOST:]PORT[,delay=MS]")
    port = int(m.group("port"))
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: port {port} is outside 0..65535")
    return m.group("host"), port, int(m.group("delay") or 0)


_listener.__name__ = "listener"


def _parse_topic_configs(items: list[tuple[str, str, str]],
                         downconversion: bool) -> dict[str, TopicConfig]:
    from lazyconv.serve._model import TopicConfig

    settings: dict[str, dict[str, object]] = {}
    for name, key, value in items:
        topic = settings.setdefault(name, {"downconversion_enable": downconversion})
        if key == "compression.type":
            topic["compression_type"] = value
        else:  # message.downconversion.enable, checked by _topic_config
            topic["downconversion_enable"] = value == "true"
    return {name: TopicConfig(compression_type=str(kw.get("compression_type", "producer")),
                              downconversion_enable=bool(kw["downconversion_enable"]))
            for name, kw in settings.items()}


def _group_config(args: argparse.Namespace) -> CoordinatorConfig:
    from lazyconv.serve._group_coordinator import CoordinatorConfig

    delay = args.group_initial_rebalance_delay_ms
    low, high = args.group_min_session_timeout_ms, args.group_max_session_timeout_ms
    if low > high:
        raise OptionError("--group-max-session-timeout-ms",
                          f"{high} is below --group-min-session-timeout-ms {low}")
    return CoordinatorConfig(min_session_timeout_ms=low, max_session_timeout_ms=high,
                             initial_rebalance_delay_ms=delay)


def build_listener_specs(args: argparse.Namespace) -> list[ListenerSpec]:
    from lazyconv.net._server import ListenerSpec

    if getattr(args, "config", None):
        from lazyconv.serve._listeners import load_listener_specs

        if args.listener:
            raise OptionError("--listener", "not allowed with --config, whose listeners= gives "
                                            "them all")
        return load_listener_specs(args.config, advertised_host=args.advertised_host)

    specs = [ListenerSpec(args.host, args.port, args.produce_delay_ms, args.advertised_host)]
    for host, port, delay in args.listener:
        specs.append(ListenerSpec(host or args.host, port, delay, args.advertised_host))
    return specs


def run(args: argparse.Namespace) -> int:
    from lazyconv.logdir._directory import LogDirectory
    from lazyconv.logdir._partition import LogConfig
    from lazyconv.net._limits import tune_allocator
    from lazyconv.net._sender_pool import default_sender_processes
    from lazyconv.serve import LogServer

    config = LogConfig(segment_bytes=args.segment_bytes, index_interval_bytes=args.index_interval_bytes,
                       flush_messages=args.flush_messages, flush_ms=args.flush_ms)
    logdir = LogDirectory(input_dir(args.logdir), config)
    limits = connection_limits(args)
    # Sender processes convert without handing one interpreter lock between threads: 1.4x the
    # throughput of 8 old consumers (docs/guide/benchmarks.md).
    sender_count = default_sender_processes() if args.sender_processes is None else args.sender_processes
    server = LogServer(
        logdir, listeners=build_listener_specs(args), limits=limits,
        send_buffer_bytes=args.socket_send_buffer, sender_processes=sender_count,
        chunk_size=args.chunk_size, downconversion_enable=not args.no_downconversion,
        topic_configs=_parse_topic_configs(args.topic_config, not args.no_downconversion),
        max_fetch_version=args.max_fetch_version, group_config=_group_config(args),
        max_open_segments=args.max_open_segment_files,
        max_partitions_per_request=args.max_partitions_per_request,
        max_decompressed_batch=args.max_decompressed_batch_bytes)

    # The event loop shares the GIL with the fetch thread that plans large fetches: hand it over
    # every millisecond rather than every 5, so other clients wait less behind a huge fetch.
    sys.setswitchinterval(0.001)
    # Converted chunks stay in the heap instead of being mapped and faulted in again each time.
    tune_allocator()
    # The sender processes are given the same size with their jobs.
    conversion_cache.resize(args.conversion_cache)

    async def main() -> None:
        await server.start()
        topics = logdir.topics()
        for listener in server.listeners:
            # One line per listener on stdout, so scripts can wait for it and read the port.
            over = "" if listener.security_protocol == "PLAINTEXT" else \
                f" over {listener.security_protocol}"
            print(f"serving {args.logdir} ({len(topics)} topics){over} on {listener.host}:"
                  f"{listener.port} as node {listener.node_id}", flush=True)
        try:
            await server.serve_forever()
        finally:
            # stops accepting, ends every connection (a response in flight is cut, never
            # half-appended), then the broker flushes the log, snapshots and recovery points
            await server.close()

    # systemd and Docker stop with SIGTERM: it ends as cleanly as after Ctrl-C
    print(f"stopped ({run_until_stopped(main)})", file=sys.stderr)
    return 0
