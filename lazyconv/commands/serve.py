"""``lazyconv serve LOGDIR``: a Kafka-protocol endpoint over a log directory, for real clients."""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys

from lazyconv.commands._common import input_dir, parse_size, port_number
from lazyconv.errors import ConfigurationError

log = logging.getLogger(__name__)

_LISTENER = re.compile(r"^(?:(?P<host>[^:]+):)?(?P<port>\d+)(?:,delay=(?P<delay>\d+))?$")
_TOPIC_CONFIG = re.compile(r"^(?P<topic>[^:]+):(?P<key>[a-z.]+)=(?P<value>.+)$")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a log directory over the Kafka protocol (Fetch with lazy down-conversion)",
        description=(
            "Answer ApiVersions, Metadata, ListOffsets, FindCoordinator, Fetch (v0-12, with "
            "down-conversion for v0-3 streamed in chunks) and Produce (v2-8, appending to the "
            "log) over LOGDIR, laid out as a broker does (TOPIC-PARTITION/00000000000000000000.log). Runs until "
            "interrupted."
        ),
    )
    parser.add_argument("logdir", metavar="LOGDIR", help="directory holding TOPIC-PARTITION folders")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=9092,
                        help="port of the first listener (default 9092; 0 picks a free port)")
    parser.add_argument("--advertised-host", default=None,
                        help="host name Metadata advertises (default: --host)")
    parser.add_argument("--chunk-size", type=_size, default=131072,
                        help="input bytes down-converted per step of a lazy send, e.g. 16K, 128K, "
                             "1M, between 16K and 1M (default 128K); bounds memory per connection")
    parser.add_argument("--no-downconversion", action="store_true",
                        help="behave like message.downconversion.enable=false: consumers that "
                             "need an older format (Fetch v0-3) get UNSUPPORTED_VERSION")
    parser.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                        help="a topic setting; keys: compression.type (e.g. zstd: Fetch < v10 "
                             "gets UNSUPPORTED_COMPRESSION_TYPE), message.downconversion.enable "
                             "(true/false). Repeatable")
    parser.add_argument("--max-fetch-version", type=int, default=12,
                        help="highest Fetch version advertised in ApiVersions (0-12, default 12); "
                             "e.g. 2 makes version-negotiating clients fetch like against a 0.10.0 "
                             "broker (magic v1)")
    parser.add_argument("--produce-delay-ms", type=int, default=0,
                        help="delay before answering each Produce on the first listener (ms)")
    parser.add_argument("--listener", action="append", default=[], metavar="[HOST:]PORT[,delay=MS]",
                        help="an extra listener, advertised as one more broker (node ids 0, 1, ...; "
                             "partition p is led by node p %% N), with its own Produce delay. "
                             "Repeatable")
    parser.add_argument("--max-request-size", type=_size, default=104857600,
                        help="larger requests close the connection (default 100M, Kafka's "
                             "socket.request.max.bytes)")
    parser.add_argument("--socket-send-buffer", type=_size, default=102400,
                        help="SO_SNDBUF of client connections (default 100K, Kafka's "
                             "socket.send.buffer.bytes; 0 keeps the OS default)")
    parser.set_defaults(handler=run)


_size = parse_size  # the size syntax every command shares (16K, 128KiB, 1M, bytes)


def _parse_topic_configs(items: list[str], downconversion: bool):
    from lazyconv.serve.broker import TopicConfig

    settings: dict[str, dict[str, object]] = {}
    for item in items:
        m = _TOPIC_CONFIG.match(item)
        if not m:
            raise ConfigurationError(f"--topic-config {item!r} is not TOPIC:KEY=VALUE")
        key, value = m.group("key"), m.group("value")
        topic = settings.setdefault(m.group("topic"), {"downconversion_enable": downconversion})
        if key == "compression.type":
            topic["compression_type"] = value.lower()
        elif key == "message.downconversion.enable":
            if value.lower() not in ("true", "false"):
                raise ConfigurationError(f"--topic-config {item!r}: expected true or false")
            topic["downconversion_enable"] = value.lower() == "true"
        else:
            raise ConfigurationError(f"--topic-config {item!r}: unknown key {key!r}")
    return {name: TopicConfig(**kw) for name, kw in settings.items()}


def build_listener_specs(args: argparse.Namespace):
    from lazyconv.serve.server import ListenerSpec

    specs = [ListenerSpec(args.host, args.port, args.produce_delay_ms, args.advertised_host)]
    for item in args.listener:
        m = _LISTENER.match(item)
        if not m:
            raise ConfigurationError(f"--listener {item!r} is not [HOST:]PORT[,delay=MS]")
        specs.append(ListenerSpec(m.group("host") or args.host, int(m.group("port")),
                                  int(m.group("delay") or 0), args.advertised_host))
    return specs


def run(args: argparse.Namespace) -> int:
    from lazyconv.serve.broker import Broker, Listener
    from lazyconv.serve.logdir import LogDirectory
    from lazyconv.serve.server import KafkaServer

    logdir = LogDirectory(input_dir(args.logdir))
    topic_configs = _parse_topic_configs(args.topic_config, not args.no_downconversion)
    specs = build_listener_specs(args)
    # Fail on bad settings now, not when the first client connects.
    Broker(logdir, [Listener(0, args.host, args.port)], chunk_size=args.chunk_size,
           max_fetch_version=args.max_fetch_version)

    def make_broker(listeners):
        return Broker(logdir, listeners, chunk_size=args.chunk_size,
                      downconversion_enable=not args.no_downconversion, topic_configs=topic_configs,
                      max_fetch_version=args.max_fetch_version)

    async def main() -> None:
        server = KafkaServer(make_broker, specs, max_request_size=args.max_request_size,
                             send_buffer_bytes=args.socket_send_buffer)
        await server.start()
        topics = logdir.topics()
        for listener in server.listeners:
            # One line per listener on stdout, so scripts can wait for it and read the port.
            print(f"serving {args.logdir} ({len(topics)} topics) on {listener.host}:{listener.port} "
                  f"as node {listener.node_id}", flush=True)
        try:
            await server.serve_forever()
        finally:
            await server.close()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0
