"""Property test of authentication through the real connection loop (lazyconv.net._server with
its SecureConnection, serve's broker behind it): thousands of random SASL frame sequences and
handshake orders, each on a connection of its own, sent over a socket to a SASL_PLAINTEXT
listener (and a few hundred to a SASL_SSL one).

For every sequence:

- the server authenticates a connection only as the user whose right password (or a whole
  right SCRAM exchange) the sequence sent, and the success it answers is the only one;
- before that, every API key other than ApiVersions, SaslHandshake and SaslAuthenticate (and
  any frame that is not a request) closes the connection, and nothing reaches the handler;
- after it, the handler sees only that principal.

Across the run: the server never logs an internal error, answers a fresh client after every
batch of sequences, ends every connection (none left open, no request memory held) and its
memory stays flat (RSS after the run within a bound of RSS after the first sequences)."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.net._sasl import plain_token
from lazyconv.protocol import _api_versions, _metadata, _sasl_authenticate, _sasl_handshake
from tests.net.sasl_frames import authenticate, handshake, request
from tests.net.secure_support import USERS, client_context, listener_specs, make_material
from tests.net.test_secure_listeners import Recorder
from tests.server_thread import ServerThread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SASL_SSL, SASL_PLAINTEXT = 0, 1
REPLY_TIMEOUT_S = 3.0
ALLOWED_BEFORE = {_api_versions.SPEC.key, _sasl_handshake.SPEC.key, _sasl_authenticate.SPEC.key}

user = st.sampled_from(["alice", "bob", "mallory"])
mechanism = st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "plain", ""])
token_kind = st.sampled_from(["good", "wrong", "random"])

# one step of a sequence: what the client sends, as a tagged tuple
steps = st.one_of(
    st.tuples(st.just("api_versions"), st.sampled_from([0, 1, 2, 3, 9])),
    st.tuples(st.just("handshake"), st.sampled_from([0, 1]), mechanism),
    st.tuples(st.just("authenticate"), st.sampled_from([0, 1, 2]), token_kind, user,
              st.binary(max_size=40)),
    st.tuples(st.just("raw"), token_kind, user, st.binary(max_size=40)),
    st.tuples(st.just("scram"), st.sampled_from([None, 0, 1, 2]), user, st.booleans()),
    st.tuples(st.just("request"), st.integers(0, 70), st.integers(0, 12)),
    st.tuples(st.just("metadata"), st.sampled_from([0, 1, 4, 9, 12])),
    st.tuples(st.just("garbage"), st.binary(min_size=0, max_size=64)),
    st.tuples(st.just("huge")),
)
sequences = st.lists(steps, min_size=1, max_size=8)


@dataclass
class Outcome:
    """What one connection saw: whether (and as whom) the server said it authenticated, and
    the forbidden frames it sent before that (the connection must have ended at the first)."""

    authenticated_as: str | None = None
    forbidden_before: list[str] = field(default_factory=list)
    closed_at: int | None = None  # index of the step after which the server had closed
    requests_after: int = 0


class Connection:
    def __init__(self, port: int, tls: ssl.SSLContext | None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S)
        self.sock: Any = tls.wrap_socket(sock, server_hostname="localhost") if tls else sock
        self.correlation = 100
        self.closed = False

    def close(self) -> None:
        self.sock.close()

    def next_id(self) -> int:
        self.correlation += 1
        return self.correlation

    def send(self, payload: bytes) -> None:
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        except OSError:
            self.closed = True

    def read(self) -> bytes | None:
        """The next frame, None when the server closed (or said nothing in time: an error of
        the server, reported by the caller)."""
        head = self._exactly(4)
        if head is None:
            return None
        return self._exactly(struct.unpack(">i", head)[0])

    def _exactly(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            try:
                piece = self.sock.recv(n - len(out))
            except TimeoutError:
                raise AssertionError("the server neither answered nor closed") from None
            except (OSError, ssl.SSLError):
                piece = b""
            if not piece:
                self.closed = True
                return None
            out += piece
        return bytes(out)


def _error_code(frame: bytes, version: int) -> int:
    # SaslAuthenticate response: correlation id, [tagged fields from v2], error code
    at = 4 + (1 if version >= 2 else 0)
    return int.from_bytes(frame[at:at + 2], "big", signed=True)


def _token(kind: str, name: str, noise: bytes) -> bytes:
    if kind == "good":
        return plain_token(name, USERS.get(name, "no-password"))
    if kind == "wrong":
        return plain_token(name, "wrong-secret")
    return noise


def play(conn: Connection, sequence: list[tuple]) -> Outcome:
    out = Outcome()
    raw_mode = False  # after a SaslHandshake v0 the server took
    for index, step in enumerate(sequence):
        if conn.closed:
            out.closed_at = out.closed_at if out.closed_at is not None else index
            break
        kind = step[0]
        authed = out.authenticated_as is not None
        if kind == "api_versions":
            body = {"client_software_name": "p", "client_software_version": "1"}
            version = step[1]
            if version == 9:
                payload = struct.pack(">hhi", 18, 9, conn.next_id()) + b"\x00\x01p" + b"\x00"
            else:
                payload = request(_api_versions.SPEC, version, body, conn.next_id())
            conn.send(payload)
            conn.read()
        elif kind == "handshake":
            conn.send(handshake(step[2], step[1], conn.next_id()))
            answer = conn.read()
            if answer is not None and not authed:
                raw_mode = step[1] == 0 and int.from_bytes(answer[4:6], "big") == 0
        elif kind == "authenticate":
            _, version, token, name, noise = step
            conn.send(authenticate(_token(token, name, noise), version, conn.next_id()))
            answer = conn.read()
            if answer is not None and not raw_mode and _error_code(answer, version) == 0 and \
                    not authed:
                assert token == "good" and name in USERS, f"authenticated with {step}"
                out.authenticated_as = name
        elif kind == "raw":
            _, token, name, noise = step
            conn.send(_token(token, name, noise))
            answer = conn.read()
            if answer is not None and raw_mode and not authed:
                assert token == "good" and name in USERS, f"authenticated with {step}"
                out.authenticated_as = name
                raw_mode = False
        elif kind == "scram":
            _, version, name, right = step
            if _scram(conn, version, name, right) and not authed:
                assert right and name in USERS, f"authenticated with {step}"
                out.authenticated_as = name
        else:
            if kind == "request":
                payload = struct.pack(">hhi", step[1], step[2], conn.next_id()) + b"\x00\x00"
            elif kind == "metadata":
                payload = request(_metadata.SPEC, step[1], {
                    "topics": [] if step[1] == 0 else None, "allow_auto_topic_creation": False},
                    conn.next_id())
            elif kind == "garbage":
                payload = step[1]
            else:  # "huge": a size no frame may have before authentication
                if authed:
                    continue  # afterwards the server would wait for the whole request
                conn.sock.sendall(struct.pack(">i", 1 << 20))
                payload = b""
            forbidden = not authed and (len(payload) < 2 or int.from_bytes(
                payload[:2], "big", signed=True) not in ALLOWED_BEFORE) and not raw_mode
            if kind != "huge":
                conn.send(payload)
            if forbidden:
                out.forbidden_before.append(kind)
            if authed and kind == "metadata":
                out.requests_after += 1
            answer = conn.read() if kind in ("metadata", "request", "huge") or forbidden else None
            if forbidden:
                assert answer is None, f"an answer to {step} before authentication"
            if kind == "garbage" and not forbidden:
                # an allowed key with a body that does not decode: answered or closed
                conn.sock.settimeout(0.3)
                try:
                    conn.read()
                except AssertionError:
                    pass
                finally:
                    conn.sock.settimeout(REPLY_TIMEOUT_S)
        if conn.closed and out.closed_at is None:
            out.closed_at = index
    return out


def _scram(conn: Connection, version: int | None, name: str, right: bool) -> bool:
    """A whole SCRAM-SHA-256 exchange (with its own handshake; ``version`` None: raw tokens
    after SaslHandshake v0); whether the server said it succeeded."""
    password = USERS.get(name, "x") if right else "wrong-secret"
    client = scramp.ScramClient(["SCRAM-SHA-256"], name, password)
    conn.send(handshake("SCRAM-SHA-256", 0 if version is None else 1, conn.next_id()))
    answer = conn.read()
    if answer is None or int.from_bytes(answer[4:6], "big") != 0:
        return False

    def step(token: bytes) -> bytes | None:
        if version is None:
            conn.send(token)
            return conn.read()
        conn.send(authenticate(token, version, conn.next_id()))
        reply = conn.read()
        if reply is None or _error_code(reply, version) != 0:
            return None
        return _sasl_authenticate.SPEC.decode_response(version, _reader(reply, version))["auth_bytes"]

    first = step(client.get_client_first().encode())
    if first is None:
        return False
    try:
        client.set_server_first(first.decode())
    except scramp.ScramException:
        return False
    final = step(client.get_client_final().encode())
    if final is None:
        return False
    client.set_server_final(final.decode())  # the server proved it knows the password
    return True


def _reader(frame: bytes, version: int) -> Any:
    from lazyconv.protocol._headers import decode_response_header
    from lazyconv.protocol._primitives import Reader

    reader = Reader(frame)
    decode_response_header(reader, _sasl_authenticate.SPEC.response_header_version(version))
    return reader


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


@pytest.fixture(scope="module")
def loop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    material = make_material(tmp_path_factory.mktemp("sasl-loop"))
    server = ServerThread(tmp_path_factory.mktemp("sasl-loop-logdir"),
                          specs=listener_specs(material, timeout_s=5.0))
    errors = Errors()
    logger = logging.getLogger("lazyconv")
    logger.addHandler(errors)
    try:
        yield server, Recorder(server), material, errors
    finally:
        logger.removeHandler(errors)
        server.stop()


def _check(server: ServerThread, recorder: Recorder, port: int, tls: ssl.SSLContext | None,
           sequence: list[tuple]) -> None:
    opened, handled = len(recorder.opened), len(recorder.handled)
    conn = Connection(port, tls)
    try:
        out = play(conn, sequence)
    finally:
        conn.close()
    new_opened = recorder.opened[opened:]
    # the handler knows the connection only once it authenticated, as that user
    expected = [] if out.authenticated_as is None else [f"User:{out.authenticated_as}"]
    deadline = time.monotonic() + 2
    while [p for _, p in recorder.opened[opened:]] != expected and time.monotonic() < deadline:
        time.sleep(0.005)
    new_opened = recorder.opened[opened:]
    assert [p for _, p in new_opened] == expected, (sequence, out)
    seen = recorder.handled[handled:]
    if out.authenticated_as is None:
        assert not seen, (sequence, seen)
    else:
        assert {p for _, p, _ in seen} <= {f"User:{out.authenticated_as}"}
        assert len(seen) <= out.requests_after + len(sequence)
    if out.forbidden_before:  # the first forbidden frame ended the connection
        assert out.closed_at is not None, (sequence, out)


def _rss() -> int:
    return int(psutil.Process().memory_info().rss)


@settings(max_examples=2000, deadline=None)
@given(sequence=sequences)
def test_random_sasl_sequences_over_sasl_plaintext(loop_server: tuple, sequence: list[tuple]) -> None:
    server, recorder, _, errors = loop_server
    _check(server, recorder, server.server.bound_port(SASL_PLAINTEXT), None, sequence)
    assert not errors.records, errors.records


@settings(max_examples=300, deadline=None)
@given(sequence=sequences)
def test_random_sasl_sequences_over_sasl_ssl(loop_server: tuple, sequence: list[tuple]) -> None:
    server, recorder, material, errors = loop_server
    _check(server, recorder, server.server.bound_port(SASL_SSL), client_context(material), sequence)
    assert not errors.records, errors.records


def test_after_thousands_the_server_is_whole(loop_server: tuple) -> None:
    """After the property runs (this module's order): every connection ended, no request
    memory held, still answering, memory flat over one more thousand sequences."""
    server, recorder, _, errors = loop_server
    port = server.server.bound_port(SASL_PLAINTEXT)
    sample = [
        [("api_versions", 3), ("handshake", 1, "PLAIN"), ("authenticate", 2, "good", "alice", b""),
         ("metadata", 4)],
        [("handshake", 0, "PLAIN"), ("raw", "wrong", "alice", b"")],
        [("scram", 1, "bob", True), ("metadata", 9)],
        [("scram", None, "alice", False)],
        [("api_versions", 9), ("api_versions", 2), ("metadata", 1)],
        [("handshake", 1, "GSSAPI")],
        [("handshake", 1, "PLAIN"), ("authenticate", 1, "random", "alice", b"\x00" * 40)],
        [("garbage", b"\xff" * 30)],
        [("huge",)],
        [("request", 3, 1)],
        [("handshake", 1, "SCRAM-SHA-256"), ("authenticate", 0, "wrong", "mallory", b"")],
    ]

    def burst(n: int) -> None:
        for i in range(n):
            _check(server, recorder, port, None, sample[i % len(sample)])

    burst(300)
    before = _rss()
    burst(1000)
    after = _rss()
    deadline = time.monotonic() + 10
    while server.server.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.server.open_connections == 0
    assert server.server.request_memory.in_use == 0
    assert after - before < 16 << 20, f"RSS grew by {(after - before) >> 20} MiB"
    assert not errors.records, errors.records
    conn = Connection(port, None)
    try:
        out = play(conn, [("handshake", 1, "PLAIN"), ("authenticate", 2, "good", "bob", b""),
                          ("metadata", 1)])
    finally:
        conn.close()
    assert out.authenticated_as == "bob" and out.closed_at is None
