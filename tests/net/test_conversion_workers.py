"""Converting Fetch responses are planned and written on the conversion worker pool
(lazyconv/net/_workers.py), zero-copy ones on the event loop; several connections convert at once; one connection's
responses still come back whole and in request order (issue 23, conversion on every core)."""

from __future__ import annotations

import concurrent.futures
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from lazyconv.net._workers import ConversionWorkers
from lazyconv.protocol import FetchResponse
from lazyconv.protocol._fetch import response_header_version
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from lazyconv.records import Compression, MemoryRecords
from tests.net.test_robustness import _recv, big_log, fetch_frame

T = TypeVar("T")


class RecordingWorkers(ConversionWorkers):
    """The pool, noting which thread ran each step and when."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self.steps: list[tuple[str, float, float]] = []
        self.submitted: list[tuple[str, str]] = []  # (thread, function) of work handed over
        self._lock = threading.Lock()
        self._running = 0

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        def timed(*inner: Any) -> T:
            with self._lock:
                self._running += 1
            started = time.perf_counter()
            try:
                return fn(*inner)
            finally:
                with self._lock:
                    self.steps.append((threading.current_thread().name, started, time.perf_counter()))
                    self._running -= 1

        return await super().run(timed, *args)

    def submit(self, fn: Callable[..., T], *args: object) -> concurrent.futures.Future[T]:
        def noted(*inner: Any) -> T:
            with self._lock:
                self.submitted.append((threading.current_thread().name, getattr(fn, "__name__", "")))
            return fn(*inner)

        return super().submit(noted, *args)

    def settled(self, timeout: float = 10.0) -> list[tuple[str, float, float]]:
        """The steps, once none is running: a step's last write reaches the client before
        the step returns, so a client can read a whole response while its step is still
        being noted on a loaded machine."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._running == 0:
                    return list(self.steps)
            if time.monotonic() >= deadline:
                raise AssertionError(f"{self._running} conversion step(s) still running after {timeout} s")
            time.sleep(0.005)

    def most_at_once(self) -> int:
        """The most steps that were running at the same moment."""
        events = sorted([(start, 1) for _, start, _ in self.steps] + [(end, -1) for _, _, end in self.steps])
        running = peak = 0
        for _, change in events:
            running += change
            peak = max(peak, running)
        return peak


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    size = struct.unpack(">i", _recv(sock, 4))[0]
    frame = _recv(sock, size)
    return struct.unpack(">i", frame[:4])[0], frame


def fetched(frame: bytes, version: int) -> tuple[str, int, list[int]]:
    """(topic, magic, offsets) of a one-partition Fetch response frame (complete messages only:
    a converted response is cut at the stored size, its consumer fetches the rest next)."""
    reader = Reader(frame)
    decode_response_header(reader, response_header_version(version))
    answer = FetchResponse.decode(version, memoryview(frame)[reader.pos:])
    topic = answer["responses"][0]
    (part,) = topic["partitions"]
    assert part["error_code"] == 0
    batches = list(MemoryRecords(part["records"]).batches())
    return topic["topic"], batches[0].magic, [r.offset for b in batches for r in b]


def test_converting_fetches_are_planned_and_written_on_the_pool_zero_copy_ones_are_not(serve_logdir, tmp_path):
    count = big_log(tmp_path, batches=20, records=100, value=600)
    workers = RecordingWorkers(2)
    server = serve_logdir(tmp_path, workers=workers)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(fetch_frame(4, "big", correlation_id=1))  # magic 2 as stored: zero-copy
        _, frame = read_response(sock)
        assert fetched(frame, 4) == ("big", 2, list(range(count)))
        assert workers.settled() == []
        sock.sendall(fetch_frame(1, "big", correlation_id=2))  # magic 0: converted
        _, frame = read_response(sock)
        topic, magic, offsets = fetched(frame, 1)
        assert (topic, magic) == ("big", 0)
        assert offsets == list(range(len(offsets))) and len(offsets) > count * 3 // 4
    steps = workers.settled()
    assert steps
    assert {name.split("_")[0] for name, _, _ in steps} == {"lazyconv-convert"}
    # the converting fetch was also planned and sized there (its first batch converted), the
    # zero-copy one on the loop
    assert [fn for _, fn in workers.submitted] == ["_plan_fetch", "_fetch_response"]
    assert {name.split("_")[0] for name, _ in workers.submitted} == {"lazyconv-convert"}


@pytest.mark.slow  # about half a second: kept out of the quick look
def test_connections_convert_at_once_and_each_keeps_its_order(serve_logdir, tmp_path):
    """Six connections each pipeline three converting fetches (of two lz4 topics and an
    uncompressed one) and a Metadata request without waiting for answers."""
    counts = {topic: big_log(tmp_path, topic=topic, batches=30, records=100, value=600, codec=codec)
              for topic, codec in (("a", Compression.LZ4), ("b", Compression.NONE), ("c", Compression.LZ4))}
    workers = RecordingWorkers(3)
    server = serve_logdir(tmp_path, workers=workers)
    metadata = encode_request_header(1, 3, 0, 4, "order") + struct.pack(">i", 0)
    plan = [(1, "a", 1), (2, "b", 2), (3, "c", 1)]  # correlation id, topic, Fetch version
    errors: list[BaseException] = []

    def consumer() -> None:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(b"".join(fetch_frame(v, topic, correlation_id=c) for c, topic, v in plan)
                             + struct.pack(">i", len(metadata)) + metadata)
                for correlation, topic, version in plan:
                    got, frame = read_response(sock)
                    assert got == correlation
                    name, magic, offsets = fetched(frame, version)
                    assert (name, magic) == (topic, 1 if version == 2 else 0)
                    assert offsets == list(range(len(offsets)))
                    assert len(offsets) >= counts[topic] // 3  # lz4 to v0 grows: cut sooner
                assert read_response(sock)[0] == 4
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
    workers.settled()
    assert workers.most_at_once() >= 2  # steps of different connections ran side by side
    assert len({name for name, _, _ in workers.steps}) >= 2


def test_a_cancelled_caller_waits_for_its_running_step_before_it_ends() -> None:
    """A step keeps running on its thread when its caller is cancelled (a drain cut, a closed
    connection). It writes to the caller's socket by descriptor number, so the caller must not
    close the socket (freeing the number for the next client) until the step has ended: the
    cancellation reaches the caller only then (found by a review). A step not started yet is
    dropped at once."""
    import asyncio

    workers = ConversionWorkers(1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def step(name: str) -> str:
        started.set()
        release.wait(5)
        ran.append(name)
        return name

    async def scenario() -> tuple[bool, bool, list[str]]:
        running = asyncio.ensure_future(workers.run(step, "running"))
        queued = asyncio.ensure_future(workers.run(ran.append, "queued"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        running.cancel()
        queued.cancel()
        await asyncio.sleep(0.2)
        running_ended_early = running.done()  # before the fix: cancelled at once, step still on
        await asyncio.wait([queued])
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await running
        return running_ended_early, queued.cancelled(), list(ran)

    try:
        early, queued_cancelled, order = asyncio.run(scenario())
    finally:
        release.set()
        workers.close()
    assert not early
    assert queued_cancelled and order == ["running"]  # the queued step never ran
