"""What the gateway's metrics cost per request, without a broker: the hooks one old consumer's
Fetch runs when ``--metrics-port`` is on, timed in a loop, as CPU seconds per GiB of records.

One downstream Fetch v2 of one partition answered from one upstream Fetch: the server's
observer (the clients registry, then the metrics: latency histogram, bytes), the upstream
connection's counters (request count and bytes, latency histogram, bytes received), the fetch's
``written`` callback (records converted, the upstream batches from the summary of their headers
that the relay read for its choice of loop or pool, bytes) and the error map's lookup, over a response of ``--fetch-size`` bytes of ``--batch-size``
batches, as in ``bench/gateway_vs_kafka.py``'s reads. With metrics off none of this runs but
the clients registry's per-request step, which is timed alone too. The CPU per GiB is the
per-request CPU times the requests a GiB of records takes, to set beside the gateway's whole CPU
per GiB (``bench/gateway_vs_kafka.py``, docs/guide/benchmarks.md).

    python bench/gateway_metrics_hooks.py --requests 20000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lazyconv._commands._common import parse_size  # noqa: E402
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords  # noqa: E402
from lazyconv.gateway._clients import ClientRegistry  # noqa: E402
from lazyconv.gateway._metrics import GatewayMetrics, fetch_written  # noqa: E402
from lazyconv.net._model import Listener  # noqa: E402
from lazyconv.net._session import Session, current_session  # noqa: E402
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder  # noqa: E402
from lazyconv.records._entries import summarize_entries  # noqa: E402

GIB = 1 << 30


def _records(fetch_size: int, batch_size: int) -> bytes:
    """Uncompressed v2 batches of about ``batch_size`` bytes (1 KiB values, 16-byte keys, as
    bench/gateway_vs_kafka.py writes) filling ``fetch_size`` bytes."""
    per_batch = max(1, batch_size // 1050)
    data = bytearray()
    offset = 0
    while True:
        builder = RecordsBuilder(2, Compression.NONE, base_offset=offset)
        for _ in range(per_batch):
            builder.append(timestamp=1, key=b"k" * 16, value=b"x" * 1024)
        batch = builder.build()
        if len(data) + len(batch) > fetch_size:
            return bytes(data)
        data += batch
        offset += per_batch


def cpu_per_call(step: Callable[[], None], calls: int) -> float:
    """CPU seconds per call of ``step`` (the process's, over ``calls`` calls)."""
    step()
    started = time.process_time()
    for _ in range(calls):
        step()
    return (time.process_time() - started) / calls


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/gateway_metrics_hooks.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20000, help="requests timed (default 20000)")
    p.add_argument("--fetch-size", type=parse_size, default=1 << 20,
                   help="bytes of records per response (default 1M)")
    p.add_argument("--batch-size", type=parse_size, default=64 << 10,
                   help="bytes per upstream batch (default 64K)")
    args = p.parse_args(argv)
    records = _records(args.fetch_size, args.batch_size)
    metrics = GatewayMetrics()
    registry = ClientRegistry(metrics=metrics)
    plain_registry = ClientRegistry()
    listener = Listener(0, "127.0.0.1", 9092)
    session = Session(listener, "/127.0.0.1", client_id="bench", observer=registry)
    plain = Session(listener, "/127.0.0.1", client_id="bench", observer=plain_registry)
    session.request = plain.request = (1, 2)
    lazy = LazyDownConvertedRecords(MemoryRecords(records), 1, 0)
    summary = summarize_entries(records)  # read by the relay with metrics on or off
    current_session.set(session)

    def with_metrics() -> None:
        registry.request_done(session, 0.01, 120, len(records))
        metrics.upstream_sent(1, 17, 150)
        metrics.upstream_answered(1, 0.005)
        metrics.upstream_received_bytes += len(records)
        fetch_written(session, metrics, [({"records": lazy}, summary)])()

    def without_metrics() -> None:
        plain_registry.request_done(plain, 0.01, 120, len(records))

    on = cpu_per_call(with_metrics, args.requests)
    off = cpu_per_call(without_metrics, args.requests)
    per_gib = GIB / len(records)
    print(f"# {len(records)} bytes of records per response ({args.batch_size} B batches), "
          f"{per_gib:.0f} requests per GiB; {args.requests} requests timed")
    print(f"metrics on:  {on * 1e6:8.2f} us per request  {on * per_gib * 1000:7.2f} ms CPU per GiB")
    print(f"metrics off: {off * 1e6:8.2f} us per request  {off * per_gib * 1000:7.2f} ms CPU per GiB")
    print(f"the metrics' own: {(on - off) * per_gib * 1000:.2f} ms CPU per GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
