"""Memory of ``lazyconv serve`` (or of ``lazyconv gateway`` in front of it, with
``--through-gateway``) under many concurrent consumers of large converted responses.

Starts ``lazyconv serve`` as a subprocess over a generated log (one partition of uncompressed
v2 batches), opens N connections that each send one Fetch v1 request (down-conversion to magic
v0) for the whole partition, and reads the N responses slowly and round-robin, so every
connection has a lazy send in flight at once. The server's RSS is sampled throughout; the
figure is the peak RSS above the idle server's RSS (serve's sender processes included: they
start with the first converting response, so they are in the idle figure), compared with the bound the design promises
(connections × per-connection bound) and with what materialising the responses would take.

    python bench/serve_memory.py --connections 100 --chunk-size 128K --partition-mb 8
    python bench/serve_memory.py --connections 30 --chunk-size 16K --partition-mb 8 \
        --through-gateway --upstream-fetch-max 1M
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.*, this checkout's lazyconv

from bench.bench_common import tree_rss  # noqa: E402
from lazyconv.protocol import FetchRequest
from lazyconv.protocol._headers import encode_request_header
from lazyconv.records import RecordsBuilder

TOPIC = "memory"


def build_log(root: Path, partition_bytes: int, value_size: int = 500, batch_records: int = 200) -> int:
    part = root / f"{TOPIC}-0"
    part.mkdir(parents=True)
    written = offset = 0
    with open(part / f"{0:020d}.log", "wb") as f:
        while written < partition_bytes:
            builder = RecordsBuilder(2, base_offset=offset)
            for _ in range(batch_records):
                builder.append(offset=offset, timestamp=1_700_000_000_000 + offset, key=b"key",
                               value=(b"%08d" % offset) * (value_size // 8))
                offset += 1
            data = builder.build()
            f.write(data)
            written += len(data)
    return written


def fetch_request(version: int, correlation_id: int) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 30,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 30}]}]}
    payload = encode_request_header(1, 1, version, correlation_id, "bench") + FetchRequest.encode(version, body)
    return struct.pack(">i", len(payload)) + payload


def start_server(logdir: Path, chunk_size: str, sender_processes: int | None = None) -> tuple[subprocess.Popen, int]:
    # Serve with this checkout's lazyconv, whatever the current directory is.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    senders = [] if sender_processes is None else ["--sender-processes", str(sender_processes)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lazyconv._cli", "serve", str(logdir), "--port", "0",
         "--chunk-size", chunk_size, *senders],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    line = proc.stdout.readline()  # "serving ... on HOST:PORT as node 0"
    port = int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])
    return proc, port


def start_gateway(upstream_port: int, chunk_size: str, upstream_fetch_max: str) -> tuple[subprocess.Popen, int]:
    """``lazyconv gateway`` in front of the server on ``upstream_port``."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lazyconv._cli", "gateway", "--upstream", f"127.0.0.1:{upstream_port}",
         "--port", "0", "--chunk-size", chunk_size, "--upstream-fetch-max-bytes", upstream_fetch_max],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    line = proc.stdout.readline()  # "gateway to ... on HOST:PORT as node 0"
    port = int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])
    return proc, port


def _warm_up(port: int, fetch_version: int) -> None:
    """One complete fetch first, so imports and caches are in the idle figure."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(fetch_request(fetch_version, 0))
        size = struct.unpack(">i", _recv_exactly(s, 4))[0]
        while size:
            size -= len(s.recv(min(size, 1 << 20)))


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        data += s.recv(n - len(data))
    return data


def run(connections: int, chunk_size: str, partition_bytes: int, fetch_version: int = 1,
        read_piece: int = 16384, batch_records: int = 200, reader_pause: float = 0.05,
        through_gateway: bool = False, upstream_fetch_max: str = "4M",
        sender_processes: int | None = None) -> dict:
    """``through_gateway``: the consumers connect to ``lazyconv gateway`` in front of the
    server, and the figures are the gateway's (its upstream Fetch responses are capped at
    ``upstream_fetch_max``); ``sender_processes``: serve's ``--sender-processes`` (None: its
    default)."""
    with tempfile.TemporaryDirectory() as tmp:
        stored = build_log(Path(tmp), partition_bytes, batch_records=batch_records)
        proc, port = start_server(Path(tmp), chunk_size, sender_processes)
        gateway = None
        try:
            if through_gateway:
                gateway, port = start_gateway(port, chunk_size, upstream_fetch_max)
            server = psutil.Process((gateway or proc).pid)
            _warm_up(port, fetch_version)
            time.sleep(0.5)  # every sender process has started with the first response
            idle_rss = tree_rss(server)
            socks = []
            for i in range(connections):
                s = socket.create_connection(("127.0.0.1", port))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
                s.sendall(fetch_request(fetch_version, i))
                socks.append(s)
            state = {s: [None, 0, bytearray()] for s in socks}  # declared size, read, prefix
            for s in socks:
                s.setblocking(False)
            peak_rss = idle_rss
            samples = 0
            started = time.monotonic()
            total_bytes = 0
            pending = list(socks)
            # Slow readers: each round takes at most read_piece bytes per connection, then
            # pauses, so the server fills every socket buffer and each lazy send is left
            # holding its current piece: the worst case for server memory.
            while pending:
                for s in list(pending):
                    st = state[s]
                    try:
                        data = s.recv(read_piece)
                    except BlockingIOError:
                        continue
                    if not data:
                        raise RuntimeError("server closed a connection before the response ended")
                    if st[0] is None:
                        st[2] += data
                        if len(st[2]) < 4:
                            continue
                        st[0] = struct.unpack(">i", st[2][:4])[0]
                        data = st[2][4:]
                    st[1] += len(data)
                    total_bytes += len(data)
                    if st[1] >= st[0]:
                        if st[1] != st[0]:
                            raise RuntimeError(f"read {st[1]} bytes of a {st[0]}-byte response")
                        s.close()
                        pending.remove(s)
                time.sleep(reader_pause)
                peak_rss = max(peak_rss, tree_rss(server))
                samples += 1
            elapsed = time.monotonic() - started
            peak_rss = max(peak_rss, tree_rss(server))
        finally:
            for child in (gateway, proc):
                if child is not None:
                    child.terminate()
                    child.wait(10)
    chunk = _size(chunk_size)
    return {
        "measured": "gateway" if through_gateway else "serve",
        "upstream_fetch_max": _size(upstream_fetch_max) if through_gateway else None,
        "connections": connections, "chunk_size": chunk, "fetch_version": fetch_version,
        "stored_partition_bytes": stored, "batch_records": batch_records, "response_bytes_each": st[0] + 4,
        "total_response_bytes": total_bytes + 4 * connections,
        "idle_rss": idle_rss, "peak_rss": peak_rss, "peak_minus_idle": peak_rss - idle_rss,
        "per_connection": (peak_rss - idle_rss) / connections,
        "materialised_would_be": (st[0] + 4) * connections,
        "samples": samples, "read_piece": read_piece, "reader_pause_s": reader_pause, "seconds": round(elapsed, 2),
    }


def _size(text: str) -> int:
    units = {"K": 1024, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--chunk-size", default="128K")
    parser.add_argument("--partition-mb", type=float, default=8)
    parser.add_argument("--fetch-version", type=int, default=1)
    parser.add_argument("--batch-records", type=int, default=200, help="records per stored batch")
    parser.add_argument("--through-gateway", action="store_true",
                        help="measure lazyconv gateway in front of the server instead")
    parser.add_argument("--upstream-fetch-max", default="4M",
                        help="the gateway's --upstream-fetch-max-bytes (default 4M)")
    parser.add_argument("--sender-processes", type=int, default=None,
                        help="serve's --sender-processes (default: serve's own default, one per core)")
    args = parser.parse_args()
    result = run(args.connections, args.chunk_size, int(args.partition_mb * (1 << 20)), args.fetch_version,
                 batch_records=args.batch_records, through_gateway=args.through_gateway,
                 upstream_fetch_max=args.upstream_fetch_max, sender_processes=args.sender_processes)
    print(json.dumps(result, indent=2))
    mib = 1 << 20
    print(f"{result['connections']} connections x {result['response_bytes_each'] / mib:.1f} MiB converted "
          f"responses, chunk {result['chunk_size'] // 1024} KiB: {result['measured']} peak RSS "
          f"{result['peak_minus_idle'] / mib:.1f} MiB above idle "
          f"({result['per_connection'] / 1024:.0f} KiB per connection; materialised responses would be "
          f"{result['materialised_would_be'] / mib:.0f} MiB)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
