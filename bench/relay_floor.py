"""What a relay's kernel work costs: the CPU a process spends only moving bytes from loopback
connections to others, with no protocol, no conversion and no Python per byte.

The gateway receives every byte of an upstream Fetch response and sends every byte it answers
with; ``bench/gateway_vs_kafka.py`` compares its CPU per GiB (plus the Kafka 4 broker's) with
Kafka 3.9, which reads its log and sends once. This measures the part of the gateway's CPU
that no rewrite of its Python can remove: ``--streams`` sources send a file from the page
cache with ``sendfile`` (as a broker does), one relay process moves each stream to a sink,
and the sinks read and drop. The relay moves bytes two ways in turn:

* ``copy``: ``recv_into`` a buffer of ``--buffer`` bytes, then ``send`` it (a thread per
  stream, blocking sockets: the fewest system calls per byte a copying relay can make);
* ``splice``: ``os.splice`` from the socket into a pipe of ``--buffer`` bytes and from the
  pipe into the other socket (the bytes never enter the relay's memory).

Prints, per mode and stream count, the medians over ``--rounds`` of MiB/s and of the CPU
seconds per GiB of the relay, of the sources and of the sinks (user + system, every thread)::

    python bench/relay_floor.py --size 1G --streams 1,8 --rounds 3
"""

from __future__ import annotations

import argparse
import fcntl
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_common import format_table, machine_line  # noqa: E402
from lazyconv._commands._common import parse_size  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
# how long the processes of one run wait for each other at the start, and for a report
START_TIMEOUT_S = 60.0
REPORT_TIMEOUT_S = 3600.0
MODES = ("copy", "splice")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _source(port: int, path: str, size: int, go: Any, out: Connection) -> None:
    """Sends ``size`` bytes of ``path`` (the file again and again) with sendfile, then reports
    its CPU seconds."""
    sock = socket.create_connection(("127.0.0.1", port))
    go.wait(START_TIMEOUT_S)
    start = _cpu()
    with open(path, "rb") as file:
        length = os.fstat(file.fileno()).st_size
        left = size
        while left:
            offset = (size - left) % length
            left -= os.sendfile(sock.fileno(), file.fileno(), offset, min(left, length - offset))
    sock.close()
    out.send(_cpu() - start)


def _sink(port: int, buffer: int, out: Connection) -> None:
    """Reads until the relay closes, then reports (bytes, CPU seconds)."""
    sock = socket.create_connection(("127.0.0.1", port))
    view = memoryview(bytearray(buffer))
    start = _cpu()
    got = 0
    while True:
        n = sock.recv_into(view)
        if not n:
            break
        got += n
    out.send((got, _cpu() - start))


def _copy(a: socket.socket, b: socket.socket, buffer: int) -> None:
    view = memoryview(bytearray(buffer))
    while True:
        n = a.recv_into(view)
        if not n:
            break
        b.sendall(view[:n])
    b.close()


def pipe_of(buffer: int) -> tuple[int, int]:
    """A pipe of ``buffer`` bytes (read end, write end); ``ValueError`` when the kernel grants
    less (``fs.pipe-max-size``, the user's pipe pages): a smaller pipe would be measured under
    the larger one's name."""
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, _F_SETPIPE_SZ, buffer)
    except OSError:
        pass
    granted = fcntl.fcntl(write, _F_GETPIPE_SZ)
    if granted < buffer:
        os.close(read)
        os.close(write)
        raise ValueError(f"the kernel grants a pipe of {granted} bytes, not {buffer} "
                         "(fs.pipe-max-size): a smaller --buffer")
    return read, write


def _splice(a: socket.socket, b: socket.socket, buffer: int) -> None:
    read, write = pipe_of(buffer)
    try:
        while True:
            n = os.splice(a.fileno(), write, buffer)
            if not n:
                break
            while n:
                n -= os.splice(read, b.fileno(), n)
    finally:
        os.close(read)
        os.close(write)
        b.close()


def _relay(mode: str, streams: int, buffer: int, ports: Any, go: Any, out: Connection) -> None:
    """Accepts ``streams`` sinks and then ``streams`` sources, moves each source's bytes to a
    sink on a thread of its own, then reports its CPU seconds."""
    into = socket.create_server(("127.0.0.1", 0), backlog=streams)
    onto = socket.create_server(("127.0.0.1", 0), backlog=streams)
    ports.send((into.getsockname()[1], onto.getsockname()[1]))
    sinks = [onto.accept()[0] for _ in range(streams)]
    sources = [into.accept()[0] for _ in range(streams)]
    pump = _copy if mode == "copy" else _splice
    threads = [threading.Thread(target=pump, args=(a, b, buffer)) for a, b in zip(sources, sinks, strict=True)]
    go.wait(START_TIMEOUT_S)
    start = _cpu()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.send(_cpu() - start)


def _report(pipe: Connection, who: str) -> Any:
    """What a child sent, or ``RuntimeError`` when it ended without (the pipe's sending end is
    the child's alone, so its end is the pipe's end) or sent nothing for REPORT_TIMEOUT_S."""
    try:
        if not pipe.poll(REPORT_TIMEOUT_S):
            raise RuntimeError(f"the {who} reported nothing for {REPORT_TIMEOUT_S:.0f} s")
        return pipe.recv()
    except EOFError:
        raise RuntimeError(f"the {who} ended without reporting (see its traceback above)") from None


def one_run(mode: str, streams: int, size: int, buffer: int, path: str) -> dict[str, Any]:
    """One relay of ``size`` bytes per stream: seconds, bytes and each side's CPU seconds.
    Raises ``RuntimeError`` when a process of the run fails, or the sinks miss bytes."""
    context = multiprocessing.get_context("fork")
    go = context.Barrier(streams + 2)  # the relay, the sources and this process
    ports_in, ports_out = context.Pipe(False)
    relay_in, relay_out = context.Pipe(False)
    sink_pipes = [context.Pipe(False) for _ in range(streams)]
    source_pipes = [context.Pipe(False) for _ in range(streams)]
    children: list[Any] = []

    def start(target: Any, args: tuple[Any, ...], *mine: Connection) -> None:
        child = context.Process(target=target, args=args, daemon=True)
        child.start()
        children.append(child)
        for end in mine:  # the child's sending ends: closed here, so its exit ends the pipe
            end.close()

    try:
        start(_relay, (mode, streams, buffer, ports_out, go, relay_out), ports_out, relay_out)
        into, onto = _report(ports_in, "relay")
        for (_, sending) in sink_pipes:
            start(_sink, (onto, buffer, sending), sending)
        for (_, sending) in source_pipes:
            start(_source, (into, path, size, go, sending), sending)
        try:  # the sinks do not wait at the barrier: they block in recv until bytes come
            go.wait(START_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise RuntimeError(f"{mode}: the relay or a source did not start") from None
        started = time.perf_counter()
        received = [_report(r, "sink") for r, _ in sink_pipes]
        seconds = time.perf_counter() - started
        source_cpu = sum(_report(r, "source") for r, _ in source_pipes)
        relay_cpu = _report(relay_in, "relay")
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
            child.join()
    moved = sum(got for got, _ in received)
    if moved != streams * size:
        raise RuntimeError(f"{mode}: the sinks received {moved} bytes of {streams * size}")
    gib = moved / GIB
    return {"mode": mode, "streams": streams, "seconds": seconds, "bytes": moved,
            "mib_s": moved / MIB / seconds, "relay_s_per_gib": relay_cpu / gib,
            "source_s_per_gib": source_cpu / gib,
            "sink_s_per_gib": sum(cpu for _, cpu in received) / gib}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/relay_floor.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=parse_size, default=parse_size("1G"),
                        help="bytes each stream moves (default 1G)")
    parser.add_argument("--streams", default="1,8",
                        help="comma-separated numbers of concurrent streams (default 1,8)")
    parser.add_argument("--modes", default=",".join(MODES), help="of copy, splice")
    parser.add_argument("--buffer", type=parse_size, default=parse_size("1M"),
                        help="the relay's buffer, or its pipe, per stream (default 1M, the "
                             "gateway's conversion step)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each running every case once; medians are printed (default 3)")
    parser.add_argument("--file-size", type=parse_size, default=parse_size("256M"),
                        help="the page-cached file the sources send from, again and again")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args(argv)
    modes = list(dict.fromkeys(m.strip() for m in args.modes.split(",") if m.strip()))
    if not modes:
        parser.error(f"--modes: none given (of {', '.join(MODES)})")
    if unknown := set(modes) - set(MODES):
        parser.error(f"--modes: unknown {', '.join(sorted(unknown))} (of {', '.join(MODES)})")
    try:
        streams = list(dict.fromkeys(int(s) for s in args.streams.split(",") if s.strip()))
    except ValueError:
        parser.error(f"--streams {args.streams!r}: comma-separated whole numbers, e.g. 1,8")
    if not streams or min(streams) < 1:
        parser.error(f"--streams {args.streams!r}: at least one, each at least 1")
    if args.size < 1 or args.rounds < 1:
        parser.error("--size and --rounds must be positive")
    if args.buffer < 4096 or args.file_size < MIB:
        parser.error("--buffer must be at least 4K, --file-size at least 1M")
    if "splice" in modes:
        if not hasattr(os, "splice"):
            parser.error("--modes splice: this Python has no os.splice (Linux, Python 3.10+)")
        try:
            for end in pipe_of(args.buffer):
                os.close(end)
        except ValueError as exc:
            parser.error(f"--buffer {args.buffer}: {exc}")
    print(machine_line(), flush=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="relay-floor-") as tmp:
        path = os.path.join(tmp, "source.bin")
        file_size = min(args.file_size, args.size)
        with open(path, "wb") as file:
            block = os.urandom(MIB)
            for _ in range(max(1, file_size // MIB)):
                file.write(block)
        for round_ in range(args.rounds):
            for count in streams:
                for mode in modes:  # interleaved: each round runs every case once
                    run = one_run(mode, count, args.size, args.buffer, path)
                    run["round"] = round_
                    runs.append(run)
                    print(f"  round {round_ + 1}: {mode:<6} x{count}: {run['mib_s']:8.0f} MiB/s, "
                          f"relay {run['relay_s_per_gib']:.3f} s/GiB", flush=True)
    rows = []
    for count in streams:
        for mode in modes:
            mine = [r for r in runs if r["mode"] == mode and r["streams"] == count]
            rows.append([mode, count, *(f"{statistics.median(r[k] for r in mine):.{p}f}" for k, p in
                                        (("mib_s", 0), ("relay_s_per_gib", 3),
                                         ("source_s_per_gib", 3), ("sink_s_per_gib", 3)))])
    print()
    print(format_table(["relay", "streams", "MiB/s", "relay CPU s/GiB", "sources (sendfile) s/GiB",
                        "sinks s/GiB"], rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
