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
from tests.net.sender_jobs import (
    BreaksMidwayJob,
    BytesJob,
    RefusedJob,
    SleepThenBytesJob,
    UnloadableJob,
    UnreadableReportJob,
)
from tests.net.test_conversion_workers import fetched, read_response
from tests.net.test_robustness import big_log, fetch_frame

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _senders_import_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # a sender unpickles the test jobs by module name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def _eventually(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _exchange(port: int, requests: list[bytes]) -> list[bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        frames = []
        for request in requests:
            sock.sendall(request)
            frames.append(read_response(sock)[1])
        return frames


@pytest.mark.slow  # over a second: kept out of the quick look
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
    # the converting ones (v0-3 of three topics) were written by a sender, Fetch v4 was not
    assert _eventually(lambda: (pool.jobs_sent, pool.jobs_done, pool.jobs_not_started) == (12, 12, 0))
    stats, alone_stats = remote.server.handler.stats, alone.server.handler.stats

    def counted() -> tuple[int, int, int]:
        return stats.records_converted, stats.converted_chunks, stats.padded_bytes

    # what the senders did reaches the server's counters as if it had written the responses
    assert _eventually(lambda: counted() == (alone_stats.records_converted, alone_stats.converted_chunks,
                                             alone_stats.padded_bytes))
    assert stats.records_converted > 0 and stats.converted_chunks > 0


@pytest.mark.slow  # over a second: kept out of the quick look
def test_responses_repeated_through_the_senders_conversion_caches_stay_exact(serve_logdir, tmp_path):
    """Consumers fetching the same compressed records again get the bytes of a fresh conversion
    (here the serving process's own, with its cache off) from senders whose caches hold them."""
    from lazyconv.conversion._cache import conversion_cache
    from lazyconv.serve._remote_fetch import fetch_send_job

    for topic, codec in (("lz4", Compression.LZ4), ("gzip", Compression.GZIP)):
        big_log(tmp_path, topic=topic, batches=12, records=80, value=700, codec=codec)
    requests = [fetch_frame(version, topic, correlation_id=i)
                for i, (version, topic) in enumerate((v, t) for t in ("lz4", "gzip") for v in (0, 2))]
    saved = conversion_cache.max_bytes
    conversion_cache.resize(0)
    try:
        expected = _exchange(serve_logdir(tmp_path).port, requests)
        conversion_cache.resize(8 << 20)  # a sender is sized as the serving process
        assert fetch_send_job([], 0, None, 8).conversion_cache_bytes == 8 << 20
        pool = SenderPool(2)
        remote = serve_logdir(tmp_path, senders=pool)
        for _ in range(3):
            assert _exchange(remote.port, requests) == expected
        assert _eventually(lambda: (pool.jobs_sent, pool.jobs_done) == (12, 12))
        # the senders did answer conversions from their caches (their counts reach the server)
        assert _eventually(lambda: remote.server.handler.stats.conversions_reused > 0)
    finally:
        conversion_cache.resize(saved)


@pytest.mark.slow
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
    assert _eventually(lambda: (pool.jobs_sent, pool.jobs_done) == (24, 24))
    assert all(s.jobs_taken for s in pool._senders)  # both senders wrote responses


@pytest.mark.slow  # over a second: kept out of the quick look
def test_a_response_no_sender_can_begin_is_written_by_the_server(serve_logdir, tmp_path, monkeypatch):
    from lazyconv.serve._remote_fetch import FetchSendJob
    from tests.net import sender_jobs

    big_log(tmp_path, topic="plain", batches=12, records=80, value=700)
    requests = [fetch_frame(version, "plain", correlation_id=version) for version in (0, 1, 2, 3)]
    alone = serve_logdir(tmp_path)
    expected = _exchange(alone.port, requests)
    # every job arrives in a form the senders cannot load (a newer server than its senders)
    monkeypatch.setattr(FetchSendJob, "__reduce__", lambda self: (sender_jobs._refuse_to_load, ()),
                        raising=False)
    pool = SenderPool(1)
    server = serve_logdir(tmp_path, senders=pool)
    assert _exchange(server.port, requests) == expected
    assert _eventually(lambda: (pool.jobs_sent, pool.jobs_done, pool.jobs_not_started) == (4, 0, 4))
    # counted once, by the server, as when it writes everything itself
    assert _eventually(lambda: server.server.handler.stats.records_converted
                       == alone.server.handler.stats.records_converted > 0)


@pytest.mark.slow  # over a second: kept out of the quick look
def test_the_loop_plans_only_fetches_cheap_to_size_there(serve_logdir, tmp_path):
    """With senders, a converting fetch whose first batch is cheap to convert (uncompressed up
    to 1 MiB, lz4 or snappy up to 256 KiB stored) is planned on the event loop; one that starts
    at a gzip batch (which may inflate to many MiB, slowly) is planned on the worker threads.
    All are written by a sender."""
    from tests.net.test_conversion_workers import RecordingWorkers

    for topic, codec in (("plain", Compression.NONE), ("lz4", Compression.LZ4), ("gzip", Compression.GZIP)):
        big_log(tmp_path, topic=topic, batches=8, records=50, value=500, codec=codec)
    workers = RecordingWorkers(2)
    pool = SenderPool(1)
    server = serve_logdir(tmp_path, workers=workers, senders=pool)
    _exchange(server.port, [fetch_frame(1, "plain", correlation_id=1), fetch_frame(1, "lz4", correlation_id=2)])
    assert workers.submitted == []
    _exchange(server.port, [fetch_frame(1, "gzip", correlation_id=3)])
    assert [fn for _, fn in workers.submitted] == ["_plan_fetch", "_fetch_response"]
    assert _eventually(lambda: pool.jobs_done == 3)  # (the client may read all before the report)
    assert workers.settled() == []  # no write step ran on the threads


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


@pytest.mark.slow  # includes a half-second write timeout: kept out of the quick look
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


@pytest.mark.slow  # over a second: kept out of the quick look
def test_a_sender_killed_mid_response_ends_that_connection_only(serve_logdir, tmp_path):
    big_log(tmp_path, topic="big", batches=40, records=100, value=1000)
    pool = SenderPool(2)
    server = serve_logdir(tmp_path, senders=pool)
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as stuck, \
            socket.create_connection(("127.0.0.1", server.port), timeout=20) as other:
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for sock, correlation in ((stuck, 1), (other, 2)):  # each blocks its sender unread
            sock.sendall(fetch_frame(1, "big", correlation_id=correlation))
            assert _eventually(lambda c=correlation: pool.jobs_sent >= c)
        received = stuck.recv(4096, socket.MSG_WAITALL)  # both senders are writing
        first = other.recv(4096, socket.MSG_WAITALL)
        assert all(s.jobs_taken == 1 for s in pool._senders)  # one response each
        killed = next(s for s in pool._senders if s.pending and min(s.pending) == 1).process
        assert killed is not None
        os.kill(killed.pid, signal.SIGKILL)
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # drain what is left fast
        stuck.settimeout(10)
        while chunk := stuck.recv(65536):  # the server closes it: end of stream, no hang
            received += chunk
        assert len(received) < struct.unpack(">i", received[:4])[0] + 4
        # the response of the other sender arrives whole
        size = struct.unpack(">i", first[:4])[0]
        whole = bytearray(first)
        while len(whole) < size + 4:
            piece = other.recv(size + 4 - len(whole))
            assert piece, "the other response was cut"
            whole += piece
        assert fetched(bytes(whole[4:]), 1)[:2] == ("big", 0)
    # new connections are served (the killed sender is started again)
    frame = _exchange(server.port, [fetch_frame(1, "big", correlation_id=7)])[0]
    assert fetched(frame, 1)[:2] == ("big", 0)
    assert all(s.process is not None and s.process.pid != killed.pid for s in pool._senders)


@pytest.mark.slow  # waits out a sender's silence
def test_a_sender_that_stops_answering_is_replaced_and_its_connection_cut(serve_logdir, tmp_path, monkeypatch):
    """A sender stopped (SIGSTOP) mid-response says nothing: it is killed after the silence
    allowed, its connection is closed, and the next response gets a new sender. A working
    sender whose client reads nothing for as long is not taken for a silent one."""
    from lazyconv.net import _sender_pool

    # 8 s: a sender on a busy machine (the suite on four workers, or its pure-Python pass
    # nested in one of them) took more than 4 s to report that it was ready
    monkeypatch.setattr(_sender_pool, "_SILENT_AFTER_S", 8.0)
    big_log(tmp_path, topic="big", batches=40, records=100, value=1000)
    pool = SenderPool(1)
    server = serve_logdir(tmp_path, senders=pool)
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as stuck:
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(fetch_frame(1, "big", correlation_id=1))
        assert _eventually(lambda: pool.jobs_sent >= 1)
        received = stuck.recv(4096, socket.MSG_WAITALL)
        sender = pool._senders[0]
        assert sender.process is not None
        pid = sender.process.pid
        time.sleep(10.0)  # longer than the silence allowed: the sender says it is alive
        assert sender.process is not None and sender.process.pid == pid and sender.pending
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            stuck.settimeout(40)
            while chunk := stuck.recv(65536):  # the server closes it: end of stream, no hang
                received += chunk
            assert time.monotonic() - started < 30  # within two watchdog periods
            assert len(received) < struct.unpack(">i", received[:4])[0] + 4
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    frame = _exchange(server.port, [fetch_frame(1, "big", correlation_id=7)])[0]
    assert fetched(frame, 1)[:2] == ("big", 0)
    assert pool._senders[0].process is not None and pool._senders[0].process.pid != pid


@pytest.mark.slow  # over a second: kept out of the quick look
def test_stopping_the_server_stops_its_senders(tmp_path):
    from tests.server_thread import ServerThread

    big_log(tmp_path, topic="big", batches=100, records=100, value=1000)
    pool = SenderPool(2)
    server = ServerThread(tmp_path, senders=pool)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(fetch_frame(0, "big", correlation_id=1))  # left unread: a response in flight
            # every sender up (a sender still importing on a busy machine is not what this
            # is about) and one of them writing the response
            deadline = time.monotonic() + 30
            while (pool.jobs_sent < 1 or not all(s.ready for s in pool._senders)) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            processes = [s.process for s in pool._senders if s.process is not None]
            assert processes and all(s.ready for s in pool._senders)
            stopping = time.monotonic()
            server.stop()
            for process in processes:
                assert process.wait(10) == 0, "a sender was killed: it did not end at the end of its control socket"
            print(f"\nthe senders ended {time.monotonic() - stopping:.2f} s after the stop began")
            sock.settimeout(10)
            while sock.recv(65536):  # cut: the stream ends
                pass
    finally:
        server.stop()


@pytest.mark.slow  # seconds of stalled requests or busy senders: kept out of the quick look
def test_jobs_queued_behind_a_busy_sender_all_complete():
    """More jobs than the control socket holds wait for room together; none is lost."""

    async def scenario() -> tuple[list, int]:
        pool = SenderPool(1)
        pairs = [_pair() for _ in range(80)]
        try:
            async def one(conn: socket.socket, client: socket.socket, job) -> object:
                reader = asyncio.ensure_future(asyncio.to_thread(_read_framed, client))
                report = await pool.write(conn, job, 30)
                await reader
                return report

            first = one(*pairs[0], SleepThenBytesJob(1000, 2.0))
            rest = [one(conn, client, BytesJob(1000, 0x62) if i % 2 else SleepThenBytesJob(1000, 0, 8192))
                    for i, (conn, client) in enumerate(pairs[1:])]
            return await asyncio.wait_for(asyncio.gather(first, *rest), 60), pool._senders[0].room_waits
        finally:
            for conn, client in pairs:
                conn.close()
                client.close()
            pool.close()

    reports, waited = asyncio.run(scenario())
    assert [r.outcome for r in reports] == [DONE] * 80
    assert waited > 0  # some submits did wait for room


def test_a_sender_that_cannot_start_gives_its_responses_back(monkeypatch):
    """A sender that dies before it is ready (here: an interpreter that cannot start): the
    jobs come back NOT_STARTED for the server to write, and no new sender is started for
    every job."""
    monkeypatch.setenv("PYTHONHOME", "/nonexistent")  # the sender's interpreter cannot start

    async def scenario() -> tuple[list, int]:
        pool = SenderPool(1)
        try:
            reports = []
            for _ in range(3):
                conn, client = _pair()
                with conn, client:
                    reports.append(await asyncio.wait_for(pool.write(conn, BytesJob(10), 10), 20))
            return reports, pool.jobs_not_started
        finally:
            pool.close()

    reports, given_back = asyncio.run(scenario())
    assert [r.outcome for r in reports] == [NOT_STARTED] * 3 and given_back == 3
    # the sender seen dead before it was ready, or (when it died first) its pipe refusing the job
    assert any(reason in reports[0].error
               for reason in ("before it was ready", "stopped", "did not take the job")), reports[0].error
    assert any("no sender process is running" in r.error for r in reports[1:])  # backing off


def test_a_job_too_large_to_describe_is_given_back():
    async def scenario():
        pool = SenderPool(1)
        try:
            conn, client = _pair()
            with conn, client:
                return await pool.write(conn, SleepThenBytesJob(10, 0, 70 * 1024), 10)
        finally:
            pool.close()

    report = asyncio.run(scenario())
    assert report.outcome == NOT_STARTED and "bytes to describe" in report.error


@pytest.mark.slow
def test_a_report_the_server_cannot_read_stops_that_sender_only():
    async def scenario() -> tuple[object, object, bool]:
        pool = SenderPool(1)
        try:
            conn, client = _pair()
            with conn, client:
                reader = asyncio.ensure_future(asyncio.to_thread(_read_framed, client))
                bad = await asyncio.wait_for(pool.write(conn, UnreadableReportJob(100), 10), 20)
                await reader
                first = pool._senders[0].process  # stopped by now
            conn, client = _pair()
            with conn, client:
                reader = asyncio.ensure_future(asyncio.to_thread(_read_framed, client))
                good = await asyncio.wait_for(pool.write(conn, BytesJob(100), 10), 20)
                await reader
            return bad, good, first is None and pool._senders[0].process is not None  # a new sender
        finally:
            pool.close()

    bad, good, restarted = asyncio.run(scenario())
    assert bad.outcome == PEER_GONE and "cannot be read" not in bad.error  # cut, not hung
    assert good.outcome == DONE and restarted


@pytest.mark.slow  # over a second: kept out of the quick look
def test_jobs_waiting_for_a_sender_that_dies_are_given_back(monkeypatch):
    """Jobs not yet handed over when their sender dies come back NOT_STARTED (the server
    writes them), never to a sender started meanwhile; the one it had is cut."""

    async def scenario() -> list:
        pool = SenderPool(1)
        pairs = [_pair() for _ in range(40)]
        try:
            busy = asyncio.ensure_future(pool.write(pairs[0][0], SleepThenBytesJob(10, 30), 60))
            while not pool._senders[0].ready:
                await asyncio.sleep(0.01)
            waiting = [asyncio.ensure_future(pool.write(conn, SleepThenBytesJob(10, 0, 16384), 60))
                       for conn, _ in pairs[1:]]
            while pool._senders[0].room_waits == 0:
                await asyncio.sleep(0.01)
            os.kill(pool._senders[0].process.pid, signal.SIGKILL)
            return await asyncio.wait_for(asyncio.gather(busy, *waiting), 30)
        finally:
            for conn, client in pairs:
                conn.close()
                client.close()
            pool.close()

    reports = asyncio.run(scenario())
    assert reports[0].outcome == PEER_GONE
    given_back = [r for r in reports[1:] if r.outcome == NOT_STARTED]
    assert given_back and all(r.outcome in (NOT_STARTED, PEER_GONE) for r in reports[1:])
