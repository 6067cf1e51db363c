"""Idle connections on ``lazyconv gateway``: what each costs once it made one small fetch.

Starts ``lazyconv serve`` over a small generated log as the upstream cluster and ``lazyconv
gateway`` in front of it (both with this process's file limit raised to its hard limit), opens
``--connections`` client connections that each make one Fetch v2 (magic 1, 16 KiB) and stay
open, then reads the gateway's RSS: the figure is (held − idle) / connections. Then every
connection fetches again, so they are all still served. Each connection costs the gateway two
descriptors (the client's and its own upstream connection), so the count is capped by the hard
file limit; the output says when it was.

    python bench/gateway_connections.py --connections 10000
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.serve_memory import TOPIC, build_log  # noqa: E402
from lazyconv.protocol import FetchRequest  # noqa: E402
from lazyconv.protocol._headers import encode_request_header  # noqa: E402

_SPARE_DESCRIPTORS = 256
_AT_ONCE = 50  # connections opened (and fetching) together: below a listen backlog


def _raise_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _fetch_frame(correlation_id: int) -> bytes:
    header = encode_request_header(1, 1, 2, correlation_id, "idle-probe")
    body = FetchRequest.encode(2, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                                   "max_bytes": 1 << 20, "topics": [{"topic": TOPIC, "partitions": [
                                       {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 16384}]}]})
    return struct.pack(">i", len(header) + len(body)) + header + body


def _answered(sock: socket.socket) -> int:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    got = 0
    while got < size:
        piece = sock.recv(min(65536, size - got))
        if not piece:
            raise ConnectionError("the gateway closed a connection")
        got += len(piece)
    return size


def _started(argv: list[str], prefix: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=_raise_limit)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(prefix):
        proc.kill()
        raise RuntimeError(f"{argv[3]} did not start: {line!r}")
    return proc, int(line.split(" on ", 1)[1].split()[0].rsplit(":", 1)[1])


def run(connections: int, settle_s: float = 3.0) -> dict[str, Any]:
    """Held connections' cost (the dict the script prints as JSON)."""
    limit = _raise_limit()
    # the gateway holds two descriptors per client connection, this process one
    possible = max(1, (limit - _SPARE_DESCRIPTORS) // 2)
    wanted = connections
    connections = min(connections, possible)
    with tempfile.TemporaryDirectory() as tmp:
        build_log(Path(tmp), 4 << 20)
        python = [sys.executable, "-m", "lazyconv"]
        serve, serve_port = _started([*python, "serve", tmp, "--port", "0", "--sender-processes", "0"], "serving ")
        gateway = None
        socks: list[socket.socket] = []
        try:
            gateway, port = _started([*python, "gateway", "--upstream", f"127.0.0.1:{serve_port}",
                                      "--port", "0", "--conversion-cache", "0"], "gateway to ")
            process = psutil.Process(gateway.pid)
            frame = _fetch_frame(1)
            first = socket.create_connection(("127.0.0.1", port))  # one fetch before "idle"
            first.sendall(frame)
            _answered(first)
            socks.append(first)
            time.sleep(settle_s)
            idle = process.memory_info().rss
            started = time.monotonic()
            # a few connections at a time, as clients arrive: a round trip each, one after
            # the other, would time the machine's scheduling rather than the gateway
            opened = 1
            while opened < connections:
                batch = [socket.create_connection(("127.0.0.1", port))
                         for _ in range(min(_AT_ONCE, connections - opened))]
                socks.extend(batch)
                for sock in batch:
                    sock.sendall(frame)
                for sock in batch:
                    _answered(sock)
                opened += len(batch)
            opened_s = time.monotonic() - started
            time.sleep(settle_s)  # what a fetch leaves behind for a while (fetched ahead) goes
            held = process.memory_info().rss
            again = 0
            again_frame = _fetch_frame(2)
            for first_of_batch in range(0, len(socks), _AT_ONCE):
                batch = socks[first_of_batch:first_of_batch + _AT_ONCE]
                for sock in batch:
                    sock.sendall(again_frame)
                for sock in batch:
                    _answered(sock)
                    again += 1
            return {"connections": connections, "wanted": wanted, "file_limit": limit,
                    "idle_rss": idle, "held_rss": held,
                    "per_connection": (held - idle) / max(1, connections - 1),
                    "answered_again": again, "open_seconds": opened_s}
        finally:
            for sock in socks:
                sock.close()
            if gateway is not None:
                gateway.terminate()
                gateway.wait(30)
            serve.terminate()
            serve.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.connections)
    if result["connections"] < result["wanted"]:
        print(f"(the hard file limit, {result['file_limit']}, allows {result['connections']} "
              f"of the {result['wanted']} connections asked for)")
    print(f"{result['connections']} connections: gateway RSS idle {result['idle_rss'] / 2**20:.1f} MiB, "
          f"held {result['held_rss'] / 2**20:.1f} MiB: {result['per_connection'] / 1024:.1f} KiB "
          f"per connection; {result['answered_again']} answered again")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
