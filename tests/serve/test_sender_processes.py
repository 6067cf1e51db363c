"""Sender processes (``lazyconv serve --sender-processes N``, lazyconv/net/_sender_pool.py):
converting Fetch responses written by other processes are byte for byte the ones the server
writes itself, each connection's answers stay whole and in order, what the senders did reaches
the server's counters, and every way a remote send can end is handled: a job the sender cannot
begin is written by the server, a client that reads nothing times out, a failing send or a
killed sender ends only its connections, and stopping the server stops the senders."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from lazyconv.net._remote_send import DONE, FAILED, NOT_STARTED, PEER_GONE, TIMED_OUT
from lazyconv.net._sender_pool import SenderPool
from lazyconv.records import Compression
from tests.serve.sender_jobs import BreaksMidwayJob, BytesJob, RefusedJob, UnloadableJob
from tests.serve.test_conversion_workers import fetched, read_response
from tests.serve.test_robustness import big_log, fetch_frame

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _senders_import_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # a sender unpickles the test jobs by module name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def _exchange(port: int, requests: list[bytes]) -> list[bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        frames = []
        for request in requests:
            sock.sendall(request)
            frames.append(read_response(sock)[1])
        return frames


def test_responses_from_senders_are_the_servers_own_bytes(serve_logdir, tmp_path):
    for topic, codec in (("plain", Compression.NONE), ("lz4", Compression.LZ4), ("gzip", Compression.GZIP)):
        big_log(tmp_path, topic=topic, batches=12, records=80, value=700, codec=codec)
    requests = [fetch_frame(version, topic, correlation_id=i)
                for i, (version, topic) in enumerate((v, t) for t in ("plain", "lz4", "gzip") for v in (0, 1, 2, 3, 4))]
    alone = serve_logdir(tmp_path)
    expected = _exchange(alone.port, requests)
    pool = SenderPool(2)
    remote = serve_logdir(tmp_path, senders=pool)
    assert _exchange(remote.port, requests) == expected
    # the converting ones (v0-3 of three topics) went to a sender, Fetch v4 did not
    assert pool.jobs_sent == 12
    stats = remote.server.broker.stats
    assert stats.records_converted == alone.server.broker.stats.records_converted > 0
    assert stats.converted_chunks == alone.server.broker.stats.converted_chunks


def test_connections_pipelining_through_senders_each_keep_their_order(serve_logdir, tmp_path):
    counts = {topic: big_log(tmp_path, topic=topic, batches=30, records=100, value=600, codec=codec)
              for topic, codec in (("a", Compression.LZ4), ("b", Compression.NONE))}
    pool = SenderPool(2)
    server = serve_logdir(tmp_path, senders=pool)
    plan = [(1, "a", 1), (2, "b", 2), (3, "a", 0), (4, "b", 3)]
    errors: list[BaseException] = []

    def consumer() -> None:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(b"".join(fetch_frame(v, t, correlation_id=c) for c, t, v in plan))
                for correlation, topic, version in plan:
                    got, frame = read_response(sock)
                    assert got == correlation
                    name, magic, offsets = fetched(frame, version)
                    assert (name, magic) == (topic, 1 if version >= 2 else 0)
                    assert offsets == list(range(len(offsets))) and len(offsets) >= counts[topic] // 3
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
    assert pool.jobs_sent == 24
    assert sum(s.process is not None for s in pool._senders) == 2  # both senders took jobs


def _pair() -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    server.close()
    conn.setblocking(False)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    return conn, client


def _read_framed(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


def test_the_pool_reports_every_ending_of_a_remote_send():
    async def scenario() -> dict[str, object]:
        pool = SenderPool(1)
        seen: dict[str, object] = {}
        try:
            conn, client = _pair()
            with conn, client:
                reader = asyncio.ensure_future(asyncio.to_thread(_read_framed, client))
                seen["done"] = await pool.write(conn, BytesJob(3 << 20), 10)
                seen["bytes"] = await reader
                seen["refused"] = await pool.write(conn, RefusedJob(), 10)
                seen["unloadable"] = await pool.write(conn, UnloadableJob(), 10)
                pid = pool._senders[0].process.pid
                seen["broken"] = await pool.write(conn, BreaksMidwayJob(1000), 10)
                seen["same sender"] = pool._senders[0].process.pid == pid
            conn, client = _pair()
            with conn, client:  # a client that reads nothing
                started = time.monotonic()
                seen["timeout"] = await pool.write(conn, BytesJob(8 << 20), 0.5)
                seen["waited"] = time.monotonic() - started
            conn, client = _pair()
            with conn:
                client.close()  # a client that went away
                seen["gone"] = await pool.write(conn, BytesJob(8 << 20), 10)
        finally:
            pool.close()
        return seen

    seen = asyncio.run(scenario())
    done = seen["done"]
    assert (done.outcome, done.written, done.details) == (DONE, 4 + (3 << 20), {"size": 3 << 20})
    assert seen["bytes"] == b"a" * (3 << 20)
    refused = seen["refused"]
    assert (refused.outcome, refused.written) == (NOT_STARTED, 0)
    assert "FileNotFoundError: segment 00000000000000000000.log is gone" in refused.error
    unloadable = seen["unloadable"]
    assert (unloadable.outcome, unloadable.written) == (NOT_STARTED, 0)
    assert "this job cannot be loaded here" in unloadable.error
    assert seen["same sender"]  # neither job ended the sender
    broken = seen["broken"]
    assert (broken.outcome, broken.written) == (FAILED, 1000)
    assert "CorruptRecordError" in broken.error
    timeout = seen["timeout"]
    assert timeout.outcome == TIMED_OUT and 0 < timeout.written < 8 << 20
    assert 0.4 < seen["waited"] < 5
    assert seen["gone"].outcome == PEER_GONE


def test_a_sender_killed_mid_response_ends_that_connection_only(serve_logdir, tmp_path):
    big_log(tmp_path, topic="big", batches=40, records=100, value=1000)
    pool = SenderPool(1)
    server = serve_logdir(tmp_path, senders=pool)
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as stuck:
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(fetch_frame(1, "big", correlation_id=1))  # its sender blocks on our buffer
        deadline = time.monotonic() + 10
        while pool.jobs_sent < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        received = stuck.recv(4096, socket.MSG_WAITALL)  # the sender is writing
        sender = pool._senders[0].process
        assert sender is not None
        os.kill(sender.pid, signal.SIGKILL)
        stuck.settimeout(10)
        while chunk := stuck.recv(65536):  # the server closes it: end of stream, no hang
            received += chunk
        assert len(received) < struct.unpack(">i", received[:4])[0] + 4
    # other connections are served (by a new sender)
    frame = _exchange(server.port, [fetch_frame(1, "big", correlation_id=7)])[0]
    assert fetched(frame, 1)[:2] == ("big", 0)
    assert pool._senders[0].process is not None and pool._senders[0].process.pid != sender.pid


def test_stopping_the_server_stops_its_senders(tmp_path):
    from tests.serve.conftest import ServerThread

    big_log(tmp_path, topic="big", batches=10, records=100, value=1000)
    pool = SenderPool(2)
    server = ServerThread(tmp_path, senders=pool)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(fetch_frame(0, "big", correlation_id=1))  # left unread: a response in flight
            deadline = time.monotonic() + 10
            while pool.jobs_sent < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            processes = [s.process for s in pool._senders if s.process is not None]
            assert processes
            server.stop()
            for process in processes:
                assert process.wait(10) == 0
            sock.settimeout(10)
            while sock.recv(65536):  # cut: the stream ends
                pass
    finally:
        server.stop()
