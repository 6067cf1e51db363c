"""Answers a handler defers (lazyconv.net._model.Deferred): the connection loop acts on a
client's next request of the same kind while an earlier answer is worked out (the gateway sends
a producer's next Produce upstream while the previous one's answer is on its way), writes the
answers in request order, owes at most MAX_DEFERRED at once, makes any other request wait for
the answers before it (a bad one closes the connection after them), writes what it owes a
client that stops sending or a draining server, and lets go of what a client that resets its
connection was owed."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import threading
import time

import pytest

from lazyconv.errors import RecordsError
from lazyconv.net import Listener
from lazyconv.net._model import Deferred, reply
from lazyconv.net._server import MAX_DEFERRED, KafkaServer, ListenerSpec
from lazyconv.protocol import _api_versions as api_versions
from lazyconv.protocol import _heartbeat as heartbeat
from lazyconv.protocol._connection import ApiTable
from tests.serve.wire import WireClient

pytestmark = pytest.mark.slow  # a server on real sockets with timed waits: the full suite runs them

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m"}
# generation ids that make the handler answer at once, answer nothing, fail later, or fail at
# once with a bug (an exception that is not lazyconv's)
NOW, NO_ANSWER, FAILS, BUG = 100, 101, 102, 103


def heartbeat_of(generation: int) -> dict:
    return {**HEARTBEAT, "generation_id": generation}


class DeferringHandler:
    """Heartbeats are answered later: each answer waits for its own release (``release(i)``)."""

    apis = ApiTable([api_versions.SPEC, heartbeat.SPEC])
    deferrable_keys = frozenset({heartbeat.SPEC.key})

    def __init__(self, listeners: list[Listener]) -> None:
        self.seen: list[int] = []  # correlation ids, as the handler acted on them
        self.releases: dict[int, asyncio.Event] = {}
        self.answers: list[asyncio.Future] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop): self.loop = loop
    def close(self): ...
    def open_session(self, session): ...

    def release(self, index: int) -> None:
        """Let the answer to the ``index``-th heartbeat (from 0) go, from any thread."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self._event(index).set)

    def _event(self, index: int) -> asyncio.Event:
        return self.releases.setdefault(index, asyncio.Event())

    async def handle(self, request, session):
        index = len(self.seen)
        self.seen.append(request.correlation_id)
        body = request.decode()
        if body["generation_id"] == NOW:
            return reply(request, {"error_code": 0})
        if body["generation_id"] == NO_ANSWER:
            return None
        if body["generation_id"] == BUG:
            raise OverflowError("a bug in the handler")

        async def later():
            await self._event(index).wait()
            if body["generation_id"] == FAILS:
                raise RecordsError("the records of this request do not decode", 7)
            return reply(request, {"error_code": 0})

        assert session.may_defer
        answer = asyncio.ensure_future(later())
        self.answers.append(answer)
        return Deferred(answer)


@pytest.fixture
def server():
    """(the server, its handler) on a loop of its own."""
    handlers: list[DeferringHandler] = []

    def factory(listeners):
        handlers.append(DeferringHandler(listeners))
        return handlers[0]

    kafka = KafkaServer(factory, [ListenerSpec("127.0.0.1", 0)])
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(kafka.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield kafka, handlers[0]
    asyncio.run_coroutine_threadsafe(kafka.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def _until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_next_request_is_acted_on_while_an_answer_is_owed(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        sent = [client.send(heartbeat.SPEC, 1, HEARTBEAT) for _ in range(3)]
        _until(lambda: len(handler.seen) == 3)  # none answered yet: all three acted on
        for index in (2, 1, 0):  # worked out last to first ...
            handler.release(index)
        # ... and answered first to last
        assert [client.receive(heartbeat.SPEC, 1)[0] for _ in sent] == sent


def test_at_most_max_deferred_answers_are_owed(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        sent = [client.send(heartbeat.SPEC, 1, HEARTBEAT) for _ in range(MAX_DEFERRED + 2)]
        _until(lambda: len(handler.seen) == MAX_DEFERRED)
        time.sleep(0.2)
        assert len(handler.seen) == MAX_DEFERRED  # the rest wait in the socket
        handler.release(0)
        assert client.receive(heartbeat.SPEC, 1)[0] == sent[0]
        _until(lambda: len(handler.seen) == MAX_DEFERRED + 1)
        for index in range(1, MAX_DEFERRED + 2):
            handler.release(index)
        assert [client.receive(heartbeat.SPEC, 1)[0] for _ in sent[1:]] == sent[1:]


def test_another_api_waits_for_the_answers_before_it(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        versions = client.send(api_versions.SPEC, 0, {})
        then = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 1)
        time.sleep(0.2)
        assert handler.seen == [first]  # the heartbeat after ApiVersions is not read yet
        client.sock.settimeout(0.2)
        with pytest.raises(socket.timeout):  # nor ApiVersions answered before the heartbeat
            client.sock.recv(1, socket.MSG_PEEK)
        client.sock.settimeout(10)
        handler.release(0)
        assert client.receive(heartbeat.SPEC, 1)[0] == first
        assert client.receive(api_versions.SPEC, 0)[0] == versions
        handler.release(1)
        assert client.receive(heartbeat.SPEC, 1)[0] == then
        assert handler.seen == [first, then]


def test_a_client_that_resets_its_connection_lets_go_of_its_owed_answers(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        client.send(heartbeat.SPEC, 1, HEARTBEAT)
        client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 2)
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _until(lambda: kafka.open_connections == 0)  # the reset ends it without waiting
    assert all(answer.cancelled() for answer in handler.answers)
    with WireClient(kafka.bound_port()) as client:  # the server goes on
        sent = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        handler.release(2)
        assert client.receive(heartbeat.SPEC, 1)[0] == sent


def test_answers_given_at_once_wait_behind_the_owed_ones(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        client.send(heartbeat.SPEC, 1, heartbeat_of(NO_ANSWER))  # acks=0-like: nothing due
        now = client.send(heartbeat.SPEC, 1, heartbeat_of(NOW))
        _until(lambda: len(handler.seen) == 3)
        client.sock.settimeout(0.2)
        with pytest.raises(socket.timeout):  # the answer known at once waits for the first
            client.sock.recv(1, socket.MSG_PEEK)
        client.sock.settimeout(10)
        handler.release(0)
        assert [client.receive(heartbeat.SPEC, 1)[0] for _ in range(2)] == [first, now]


def test_an_answer_that_fails_ends_the_connection_after_the_ones_before_it(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        client.send(heartbeat.SPEC, 1, heartbeat_of(FAILS))
        client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 3)
        for index in range(3):
            handler.release(index)
        assert client.receive(heartbeat.SPEC, 1)[0] == first
        assert client.sock.recv(1) == b""  # closed, the third never answered
    _until(lambda: kafka.open_connections == 0)
    with WireClient(kafka.bound_port()) as client:  # the server goes on
        sent = client.send(heartbeat.SPEC, 1, heartbeat_of(NOW))
        assert client.receive(heartbeat.SPEC, 1)[0] == sent


def test_a_client_that_stops_sending_still_gets_what_it_is_owed(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        sent = [client.send(heartbeat.SPEC, 1, HEARTBEAT) for _ in range(2)]
        _until(lambda: len(handler.seen) == 2)
        client.sock.shutdown(socket.SHUT_WR)
        time.sleep(0.1)
        handler.release(0)
        handler.release(1)
        assert [client.receive(heartbeat.SPEC, 1)[0] for _ in sent] == sent
        assert client.sock.recv(1) == b""


def test_a_bad_request_behind_owed_answers_gets_them_written_first(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 1)
        client.sock.sendall(b"\x00\x00\x00\x08" + b"\x7f\x7f" + b"\x00" * 6)  # API 32639
        time.sleep(0.1)
        handler.release(0)
        assert client.receive(heartbeat.SPEC, 1)[0] == first
        assert client.sock.recv(1) == b""


@pytest.mark.parametrize("size", [-5, 3, 200 << 20], ids=["negative", "too-small", "oversized"])
def test_a_bad_size_behind_owed_answers_gets_them_written_first(server, size) -> None:
    """A size field outside the bounds ends the connection after the answers owed for the
    requests before it, as a bad request does (found by a review: they were let go)."""
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 1)
        client.sock.sendall(struct.pack(">i", size))
        time.sleep(0.1)
        handler.release(0)
        assert client.receive(heartbeat.SPEC, 1)[0] == first
        assert client.sock.recv(1) == b""


def test_a_handler_bug_behind_owed_answers_gets_them_written_first(server) -> None:
    """A request the handler fails on with a bug ends the connection, but only after the answers
    owed for the requests before it, which were acted on (a Produce written upstream)."""
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        first = client.send(heartbeat.SPEC, 1, HEARTBEAT)
        _until(lambda: len(handler.seen) == 1)
        client.send(heartbeat.SPEC, 1, heartbeat_of(BUG))
        _until(lambda: len(handler.seen) == 2)
        handler.release(0)
        assert client.receive(heartbeat.SPEC, 1)[0] == first
        assert client.sock.recv(1) == b""


def test_draining_writes_what_is_owed_then_closes(server) -> None:
    kafka, handler = server
    with WireClient(kafka.bound_port()) as client:
        sent = [client.send(heartbeat.SPEC, 1, HEARTBEAT) for _ in range(2)]
        _until(lambda: len(handler.seen) == 2)
        drained = asyncio.run_coroutine_threadsafe(kafka.drain(10), handler.loop)
        time.sleep(0.2)
        assert not drained.done()  # it waits for the answers it owes
        handler.release(0)
        handler.release(1)
        assert [client.receive(heartbeat.SPEC, 1)[0] for _ in sent] == sent
        assert drained.result(10) is True
        assert client.sock.recv(1) == b""


@pytest.mark.parametrize("code", [errno.ETIMEDOUT, errno.EHOSTUNREACH])
def test_a_write_failing_because_the_peers_network_went_away_is_not_an_internal_error(
        server, monkeypatch, caplog, code) -> None:
    """ETIMEDOUT and EHOSTUNREACH are not ConnectionError, so a write that failed with them was
    logged as a lazyconv bug with its traceback (found by a review); the sender processes
    already took them for the peer gone. Now the connection ends with an info line."""
    import lazyconv.net._server as server_module

    async def fails(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(server_module, "_write_send", fails)
    kafka, handler = server
    with caplog.at_level(logging.INFO, logger="lazyconv.net._server"), \
            WireClient(kafka.bound_port()) as client:
        client.send(heartbeat.SPEC, 1, heartbeat_of(NOW))
        _until(lambda: any("ended" in r.getMessage() for r in caplog.records))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_accept_failing_over_and_over_logs_a_line_per_period_not_per_retry(monkeypatch, caplog) -> None:
    """With the descriptors exhausted (EMFILE) accept fails every time and the loop retries
    every 0.1 s: that was a warning per retry, a flood (found by a review)."""
    import asyncio.selector_events

    async def exhausted(self, sock):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_accept", exhausted)
    kafka = KafkaServer(DeferringHandler, [ListenerSpec("127.0.0.1", 0)])

    async def accept_for_a_while() -> None:
        with socket.socket() as listening, pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(kafka._accept_loop(listening, Listener(0, "127.0.0.1", 9092), 0), 1.0)

    with caplog.at_level(logging.WARNING, logger="lazyconv.net._server"):
        asyncio.run(accept_for_a_while())
    lines = [r.getMessage() for r in caplog.records if "accept failed" in r.getMessage()]
    assert len(lines) == 1 and "Too many open files" in lines[0]
