"""TLS and SASL in the shared connection loop (lazyconv.net._server with
lazyconv.net._secure_connection), with serve's broker behind it: a raw client drives every
step, so each refusal is checked for what the client sees, what reached the handler (nothing
before authentication) and the one log line it leaves (never a secret)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.net import ServerObserver
from lazyconv.net._observer import AUTHENTICATION_MECHANISMS
from lazyconv.net._sasl import plain_token
from lazyconv.protocol import _metadata
from tests.net.sasl_frames import handshake
from tests.net.secure_support import (
    USERS,
    Material,
    RawClient,
    client_context,
    listener_specs,
    make_material,
)
from tests.server_thread import ServerThread

SASL_SSL, SASL_PLAINTEXT, SSL, PLAINTEXT = range(4)
SECRETS = [*USERS.values(), "wrong-secret"]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("secure-listeners"))


class Recorder:
    """What reached serve's broker: sessions opened and requests handled, with principals; and
    what the server told its observer of each authentication."""

    def __init__(self, server: ServerThread) -> None:
        broker = server.server.handler
        self.opened: list[tuple[int, str]] = []
        self.handled: list[tuple[int, str, int]] = []
        self.authentications: list[tuple[str, bool]] = []
        recorder = self

        class Observer(ServerObserver):
            def authenticated(self, session, mechanism: str, ok: bool) -> None:
                recorder.authentications.append((mechanism, ok))

        server.server.observer = Observer()
        open_session, handle = broker.open_session, broker.handle

        def opened(session):
            self.opened.append((session.connection_id, session.principal))
            open_session(session)

        async def handled(request, session):
            self.handled.append((session.connection_id, session.principal, request.api_key))
            return await handle(request, session)

        broker.open_session, broker.handle = opened, handled


@pytest.fixture(scope="module")
def served(material: Material, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    logdir = tmp_path_factory.mktemp("secure-logdir")
    server = ServerThread(logdir, specs=listener_specs(material, timeout_s=1.0))
    try:
        yield server, Recorder(server)
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def settled(served: tuple) -> None:
    """Every connection of the tests before has ended (and logged why), so a test counts its
    own log lines only."""
    deadline = time.monotonic() + 5
    while served[0].server.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)


def port(served: tuple, index: int) -> int:
    return served[0].server.bound_port(index)


def test_sasl_listener_lists_sasl_apis_and_authenticates(served: tuple) -> None:
    server, recorder = served
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        versions = client.api_versions()
        assert versions is not None and versions["error_code"] == 0
        keys = {e["api_key"]: (e["min_version"], e["max_version"]) for e in versions["api_keys"]}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        assert client.authenticate("SCRAM-SHA-512", "alice", USERS["alice"])
        answer = client.metadata()
        assert answer is not None and answer["brokers"]
    ids = [c for c, p in recorder.opened if p == "User:alice"]
    assert ids and all(p == "User:alice" for c, p, _ in recorder.handled if c in ids)
    # ApiVersions is the front door's: the handler saw only the Metadata request
    assert [k for c, _, k in recorder.handled if c == ids[-1]] == [_metadata.SPEC.key]


def test_plaintext_listener_does_not_list_sasl(served: tuple) -> None:
    with RawClient(port(served, PLAINTEXT)) as client:
        versions = client.api_versions()
        assert versions is not None
        assert not {17, 36} & {e["api_key"] for e in versions["api_keys"]}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_ssl_mechanisms_and_versions(served: tuple, material: Material, mechanism: str,
                                          version: int) -> None:
    with RawClient(port(served, SASL_SSL), tls=client_context(material)) as client:
        assert client.authenticate(mechanism, "bob", USERS["bob"], version=version)
        assert client.metadata() is not None


def test_raw_tokens_after_handshake_v0(served: tuple) -> None:
    recorder = served[1]
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        answer = client.handshake("PLAIN", version=0)
        assert answer == {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]}
        assert client.raw_token(plain_token("alice", USERS["alice"])) == b""
        assert client.metadata() is not None
    assert recorder.opened[-1][1] == "User:alice"


def test_every_other_api_before_authentication_closes(served: tuple) -> None:
    server, recorder = served
    before = len(recorder.handled)
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        assert client.metadata() is None  # closed without an answer
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        assert client.api_versions() is not None
        assert client.metadata() is None
    assert len(recorder.handled) == before


def _closed_log(caplog: pytest.LogCaptureFixture, started: float) -> list[str]:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        lines = [r.getMessage() for r in caplog.records
                 if r.name == "lazyconv.net._server" and r.created >= started
                 and r.getMessage().startswith("closing")]
        if lines:
            return lines
        time.sleep(0.02)
    return []


def _no_secret(lines: list[str]) -> None:
    for line in lines:
        for secret in SECRETS:
            assert secret not in line


@pytest.mark.parametrize("who", ["wrong password", "unknown user"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_refused_credentials(served: tuple, caplog: pytest.LogCaptureFixture, who: str,
                             mechanism: str) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    user = "alice" if who == "wrong password" else "mallory"
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        exchange_ok = client.authenticate(mechanism, user, "wrong-secret")
        assert not exchange_ok
        assert client.closed_by_server()
    lines = _closed_log(caplog, started)
    assert len(lines) == 1 and "authentication failed" in lines[0], lines
    _no_secret(lines)


def test_failure_is_error_58_whatever_was_wrong(served: tuple) -> None:
    answers = []
    for user, password in (("alice", "wrong-secret"), ("mallory", "alice-secret")):
        with RawClient(port(served, SASL_PLAINTEXT)) as client:
            assert client.handshake("PLAIN")["error_code"] == 0
            from lazyconv.net._sasl import AUTHENTICATE

            answers.append(client.request(AUTHENTICATE, 1, {"auth_bytes": plain_token(user, password)}))
    assert answers[0] == answers[1]
    assert answers[0]["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_mechanism_not_enabled(served: tuple, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    with RawClient(port(served, SASL_PLAINTEXT)) as client:
        answer = client.handshake("GSSAPI")
        assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert "PLAIN" in answer["mechanisms"]
        assert client.closed_by_server()
    lines = _closed_log(caplog, started)
    assert len(lines) == 1 and "not enabled" in lines[0]


def test_mtls_principal_is_the_certificate_cn(served: tuple, material: Material) -> None:
    recorder = served[1]
    context = client_context(material, *material.certs["bob"])
    with RawClient(port(served, SSL), tls=context) as client:
        assert client.metadata() is not None
    assert recorder.opened[-1][1] == "User:bob"


@pytest.mark.parametrize("case", ["no certificate", "expired", "unknown CA"])
def test_refused_client_certificates(served: tuple, material: Material,
                                     caplog: pytest.LogCaptureFixture, case: str) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    cert, key = {"no certificate": (None, None), "expired": material.expired,
                 "unknown CA": material.foreign}[case]
    context = client_context(material, cert, key)
    try:
        with RawClient(port(served, SSL), tls=context) as client:
            assert client.metadata() is None  # TLS 1.3: the refusal comes after the handshake
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass
    lines = _closed_log(caplog, started)
    assert len(lines) == 1 and "certificate" in lines[0], lines


def test_plaintext_client_on_a_tls_port(served: tuple, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    with RawClient(port(served, SASL_SSL)) as client:
        assert client.api_versions() is None
    lines = _closed_log(caplog, started)
    assert len(lines) == 1 and "does not speak TLS" in lines[0], lines


def test_tls_client_on_a_plaintext_port(served: tuple, material: Material,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    for index in (PLAINTEXT, SASL_PLAINTEXT):
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            RawClient(port(served, index), tls=client_context(material), timeout=3)
    lines = _closed_log(caplog, started)
    deadline = time.monotonic() + 2
    while len(lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        lines = _closed_log(caplog, started)
    assert len(lines) == 2 and all("TLS" in line for line in lines), lines


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["TLS", "SASL", "half a frame"])
def test_stalled_handshake_is_cut_at_the_deadline(served: tuple, material: Material,
                                                  caplog: pytest.LogCaptureFixture,
                                                  stage: str) -> None:
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    if stage == "TLS":
        sock = socket.create_connection(("127.0.0.1", port(served, SASL_SSL)))
        sock.sendall(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
    else:
        sock = socket.create_connection(("127.0.0.1", port(served, SASL_PLAINTEXT)))
        if stage == "half a frame":
            sock.sendall(struct.pack(">i", 40) + b"\x00\x11\x00\x01")
    sock.settimeout(5)
    t0 = time.monotonic()
    assert sock.recv(100) == b""  # the listener's 1 s authentication bound
    assert time.monotonic() - t0 < 3
    sock.close()
    lines = _closed_log(caplog, started)
    assert len(lines) == 1, lines


def _sasl(mechanism: str, password: str):
    def run(client: RawClient) -> None:
        if client.authenticate(mechanism, "alice", password):
            assert client.metadata() is not None
    return run


def _tls_error_after_authenticating(client: RawClient) -> None:
    assert client.authenticate("PLAIN", "alice", USERS["alice"])
    raw = socket.socket(fileno=os.dup(client.sock.fileno()))
    try:  # an application-data record that does not decrypt: the server ends the connection
        raw.sendall(b"\x17\x03\x03\x00\x20" + bytes(32))
        raw.settimeout(5)
        with contextlib.suppress(OSError):
            while raw.recv(4096):
                pass
    finally:
        raw.close()


def _handshake(mechanism: str):
    def run(client: RawClient) -> None:
        client.handshake(mechanism)
    return run


# (case, listener, the client's certificate on a TLS listener: None, "bob", "foreign", or
# "plaintext" for no TLS at all; what the client does; what the observer hears)
AUTHENTICATIONS = [
    ("scram ok", SASL_PLAINTEXT, None, _sasl("SCRAM-SHA-512", USERS["alice"]), ("SCRAM-SHA-512", True)),
    ("plain ok over tls", SASL_SSL, None, _sasl("PLAIN", USERS["alice"]), ("PLAIN", True)),
    ("wrong password", SASL_PLAINTEXT, None, _sasl("PLAIN", "wrong-secret"), ("PLAIN", False)),
    ("mechanism not enabled", SASL_PLAINTEXT, None, _handshake("GSSAPI"), ("SASL", False)),
    ("metadata first", SASL_PLAINTEXT, None, lambda c: c.metadata(), ("SASL", False)),
    ("client certificate", SSL, "bob", lambda c: c.metadata(), ("mTLS", True)),
    ("certificate of an unknown CA", SSL, "foreign", lambda c: c.metadata(), ("TLS", False)),
    ("plaintext to a TLS port", SASL_SSL, "plaintext", lambda c: c.api_versions(), ("TLS", False)),
    # a TLS error once authenticated ends the connection, but is no failed authentication
    ("tls error after authenticating", SASL_SSL, None, _tls_error_after_authenticating,
     ("PLAIN", True)),
]


@pytest.mark.parametrize(("case", "listener", "cert", "act", "expected"), AUTHENTICATIONS,
                         ids=[a[0] for a in AUTHENTICATIONS])
def test_each_authentication_is_told_to_the_observer_once(served: tuple, material: Material,
                                                          case: str, listener: int, cert: str | None,
                                                          act, expected: tuple[str, bool]) -> None:
    """The server's observer hears of every authentication, good or failed, once, with a
    mechanism from the bounded set (the gateway's ``authentications_total`` counts them)."""
    server, recorder = served
    before = len(recorder.authentications)
    if listener == SSL or listener == SASL_SSL and cert != "plaintext":
        pair = (material.certs["bob"] if cert == "bob" else material.foreign if cert == "foreign"
                else (None, None))
        tls: ssl.SSLContext | None = client_context(material, *pair)
    else:
        tls = None
    try:
        with RawClient(port(served, listener), tls=tls) as client:
            act(client)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass  # a refused certificate may end the handshake on the client's side
    deadline = time.monotonic() + 5  # a failure is told when its connection has ended
    while len(recorder.authentications) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    while server.server.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.authentications[before:] == [expected]
    assert expected[0] in AUTHENTICATION_MECHANISMS


@pytest.mark.slow
@pytest.mark.parametrize("listener", [SASL_PLAINTEXT, SASL_SSL])
def test_a_frame_trickled_byte_by_byte_is_cut_at_the_deadline(served: tuple, material: Material,
                                                              caplog: pytest.LogCaptureFixture,
                                                              listener: int) -> None:
    """Each byte well within the read timeout, the whole frame not within the listener's 1 s
    authentication bound: the connection is closed at the bound, not when the frame ends."""
    caplog.set_level(logging.INFO, logger="lazyconv")
    started = time.time()
    tls = client_context(material) if listener == SASL_SSL else None
    body = handshake("PLAIN")
    frame = struct.pack(">i", len(body)) + body
    with RawClient(port(served, listener), tls=tls, timeout=10) as client:
        t0 = time.monotonic()
        client.send(frame[:5])  # the size and a byte: the request's body has begun
        closed_at = None
        for byte in frame[5:]:
            time.sleep(0.3)
            try:
                client.send(bytes([byte]))
            except OSError:
                closed_at = time.monotonic() - t0
                break
        if closed_at is None:
            assert client.read_frame() is None, "a trickled frame was answered past the deadline"
            closed_at = time.monotonic() - t0
    assert closed_at < 3, closed_at
    lines = _closed_log(caplog, started)
    assert len(lines) == 1 and "authentication deadline passed" in lines[0], lines


def test_sasl_ssl_takes_the_principal_from_sasl_not_the_certificate(material: Material,
                                                                     tmp_path: Path) -> None:
    """A client certificate on a SASL_SSL listener that requests one is not mapped (Kafka's
    principal builder uses SASL's principal there): a subject no rule maps is no refusal."""
    specs = listener_specs(material, timeout_s=2.0, **{
        "listener.name.sasl_ssl.ssl.client.auth": "requested",
        "listener.name.sasl_ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),O=other$/$1/"})
    server = ServerThread(tmp_path, specs=specs)
    try:
        recorder = Recorder(server)
        with RawClient(server.server.bound_port(SASL_SSL),
                       tls=client_context(material, *material.certs["bob"])) as client:
            assert client.authenticate("PLAIN", "alice", USERS["alice"])
            assert client.metadata() is not None
        assert recorder.opened[-1][1] == "User:alice"
    finally:
        server.stop()


@pytest.mark.slow
def test_a_tls_client_that_never_stops_sending_leaves_the_loop_to_the_others(
        served: tuple, material: Material) -> None:
    """Bytes TLS has decrypted already are read without waiting on the loop (epoll cannot tell
    of them); a client pipelining small requests without pause kept the loop to itself for as
    long as it sent (found by a review). Another client is answered in the meantime."""
    import threading

    # Produce v3, acks=0, no topics: no answer is due; 32 bytes, so frames never straddle reads
    produce = struct.pack(">ihhih6shhii", 28, 0, 3, 1, 6, b"abcdef", -1, 0, 1000, 0)
    count = 250000
    context = client_context(material, *material.certs["bob"])
    with RawClient(port(served, SSL), tls=context, timeout=30) as flooder:
        sender = threading.Thread(target=flooder.send, args=(produce * count,), daemon=True)
        sender.start()
        time.sleep(0.2)
        with RawClient(port(served, PLAINTEXT)) as other:
            started = time.monotonic()
            assert other.api_versions() is not None
            waited = time.monotonic() - started
        sender.join(30)
    assert waited < 0.5, f"another client waited {waited:.2f} s behind a TLS flood"


def test_other_connections_unaffected_by_a_stall(served: tuple) -> None:
    stalled = socket.create_connection(("127.0.0.1", port(served, SASL_PLAINTEXT)))
    try:
        with RawClient(port(served, SASL_PLAINTEXT)) as client:
            assert client.authenticate("PLAIN", "alice", USERS["alice"])
            assert client.metadata() is not None
    finally:
        stalled.close()


def test_serve_config_file(tmp_path: Path, material: Material) -> None:
    from lazyconv.errors import ConfigurationError
    from lazyconv.serve._listeners import load_listener_specs

    config = tmp_path / "serve.properties"
    config.write_text("listeners=SASL_SSL://127.0.0.1:0\n"
                      f"ssl.keystore.location={material.server_keystore_pem}\n"
                      "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
                      "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common."
                      'security.plain.PlainLoginModule required user_alice="${env:ALICE_PW}";\n'
                      f"serve.scram.credentials.file={material.scram_file}\n")
    (spec,) = load_listener_specs(config, environ={"ALICE_PW": "alice-secret"})
    assert spec.security is not None and spec.security.protocol == "SASL_SSL"
    config.write_text("listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0\n"
                      f"ssl.keystore.location={material.server_keystore_pem}\n"
                      "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
                      f"serve.scram.credentials.file={material.scram_file}\n")
    with pytest.raises(ConfigurationError, match="one security protocol"):
        load_listener_specs(config)
    config.write_text("listeners=PLAINTEXT://127.0.0.1:0\ngateway.identity=gateway\n")
    with pytest.raises(ConfigurationError, match="gateway.identity: not a listener setting"):
        load_listener_specs(config)


@pytest.mark.parametrize("client_auth,truststore", [("required", False), ("requested", False),
                                                    ("required", True), ("none", False)])
def test_client_certificates_verified_by_the_system_cas_are_warned_of_at_start(
        material: Material, tmp_path: Path, caplog: pytest.LogCaptureFixture, client_auth: str,
        truststore: bool) -> None:
    """ssl.client.auth required or requested without a trust store verifies client
    certificates against the system's CAs (as Kafka does with the JVM's): any public CA's
    certificate with a chosen subject would map to that principal. The server says so in one
    WARNING line per such listener when it starts; with a trust store, or without client
    authentication, it says nothing."""
    from lazyconv.net._listener_config import parse_listeners
    from lazyconv.net._properties import Properties
    from lazyconv.net._secure_connection import ListenerSecurity
    from lazyconv.serve import ListenerSpec

    props = {"listeners": "SSL://127.0.0.1:0", "ssl.client.auth": client_auth,
             "ssl.keystore.location": str(material.server_keystore_pem)}
    if truststore:
        props["ssl.truststore.location"] = str(material.ca_pem)
    (config,) = parse_listeners(Properties.from_mapping(props, "test"))
    caplog.set_level(logging.INFO, logger="lazyconv")
    server = ServerThread(tmp_path, specs=[ListenerSpec(
        config.host, config.port, 0, None, security=ListenerSecurity.from_config(config))])
    server.stop()
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and "truststore" in r.getMessage()]
    if truststore or client_auth == "none":
        assert warnings == []
        assert "system's CAs" not in config.describe()
    else:
        assert warnings == [
            f"listener SSL: ssl.client.auth={client_auth} without ssl.truststore.location: "
            "client certificates are verified against the system's CAs, so one any public CA "
            "issues with a chosen subject maps to that principal (as on Kafka, with the JVM's "
            "CAs); set ssl.truststore.location to the CA of your clients' certificates"]
        # what --check-config lists
        assert config.describe().endswith(
            f"client-auth={client_auth} (verified by the system's CAs: no ssl.truststore.location)")
