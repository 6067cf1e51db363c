"""``lazyconv gateway --upstream HOST:PORT``: old Kafka clients in front of a Kafka 4 cluster."""

from __future__ import annotations

import argparse
import logging
import sys

from lazyconv._commands._common import (
    add_conversion_cache_option,
    format_size,
    parse_size,
    port_number,
    run_until_stopped,
)
from lazyconv._conversion_cache import GATEWAY_CONVERSION_CACHE_BYTES

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gateway",
        help="let old Kafka clients use a Kafka 4 cluster (old versions downstream, "
             "down- and up-conversion in the middle)",
        description=(
            "Listen for Kafka clients of any protocol version (Produce v0-11, Fetch v0-17, "
            "ListOffsets v0-8, Metadata v0-12, ApiVersions v0-4) and answer them from the Kafka "
            "cluster at --upstream, using only versions Kafka 4 accepts (Produce >= 3, Fetch >= 4, "
            "ListOffsets >= 1). Consumers of Fetch v0-3 get the records down-converted to magic 0 "
            "or 1 lazily, chunk by chunk; producers of magic 0/1 message sets have them "
            "up-converted to v2 batches. The gateway presents itself as the whole cluster (one "
            "broker that leads every partition) and routes each partition to its real leader. "
            "Runs until interrupted (SIGINT or SIGTERM)."
        ),
    )
    parser.add_argument("--upstream", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="bootstrap brokers of the Kafka cluster")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=9092,
                        help="port to listen on (default 9092; 0 picks a free port)")
    parser.add_argument("--advertised-host", default=None,
                        help="host name Metadata advertises (default: --host)")
    parser.add_argument("--chunk-size", type=parse_size, default=131072,
                        help="input bytes down-converted per step, 16K-1M (default 128K)")
    parser.add_argument("--upstream-fetch-max-bytes", type=parse_size, default=4 << 20,
                        help="the most one upstream Fetch response may hold (default 4M): with one "
                             "converted chunk, what a client connection costs in memory")
    parser.add_argument("--request-timeout-ms", type=int, default=30000,
                        help="how long an upstream request may take (default 30000)")
    parser.add_argument("--metadata-max-age-ms", type=int, default=30000,
                        help="how long the cluster's metadata is trusted (default 30000)")
    parser.add_argument("--workers", type=int, default=None,
                        help="conversion threads (default: one per core)")
    add_conversion_cache_option(parser, GATEWAY_CONVERSION_CACHE_BYTES, compared="the upstream's bytes",
                                default_text=format_size(GATEWAY_CONVERSION_CACHE_BYTES))
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lazyconv._conversion_cache import conversion_cache
    from lazyconv.gateway import Gateway
    from lazyconv.net._limits import tune_allocator

    gateway = Gateway(args.upstream, host=args.host, port=args.port,
                      advertised_host=args.advertised_host, chunk_size=args.chunk_size,
                      upstream_fetch_max_bytes=args.upstream_fetch_max_bytes,
                      request_timeout_ms=args.request_timeout_ms,
                      metadata_max_age_ms=args.metadata_max_age_ms, workers=args.workers)
    tune_allocator()  # chunk-sized buffers stay in the heap, as for serve
    conversion_cache.resize(args.conversion_cache)

    async def main() -> None:
        await gateway.start()
        listener = gateway.listener
        # One line on stdout, so scripts can wait for it and read the port.
        print(f"gateway to {args.upstream} on {listener.host}:{listener.port} as node "
              f"{listener.node_id}", flush=True)
        try:
            await gateway.serve_forever()
        finally:
            await gateway.close()

    print(f"gateway stopped ({run_until_stopped(main)})", file=sys.stderr)
    return 0
