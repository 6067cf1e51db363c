"""Our client side against real Kafka brokers: TlsChannel (SNI, host name check, the broker's
PEM key store) and SaslClientExchange (PLAIN, SCRAM-SHA-256/512, SaslAuthenticate v0-2), then a
Metadata request over the authenticated channel; a wrong password is refused with Kafka's own
message and never echoed."""

from __future__ import annotations

import select
import socket
import time

import pytest

from lazyconv.errors import AuthenticationError, CertificateVerificationError
from lazyconv.net._sasl import SaslClientExchange
from lazyconv.net._tls import HandshakeStatus, SslClientSettings, TlsChannel
from lazyconv.protocol import _metadata
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from tests.kafka_broker import TOPIC_A, SecuredKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


class Conn:
    """A tiny blocking driver over a non-blocking socket (plain or TlsChannel)."""

    def __init__(self, address: str, tls: SslClientSettings | None = None,
                 hostname: str = "127.0.0.1") -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setblocking(False)
        self.chan: socket.socket | TlsChannel = self.sock
        if tls is not None:
            self.chan = TlsChannel(self.sock, tls.context(), server_side=False,
                                   server_hostname=hostname)
            deadline = time.monotonic() + 10
            while (state := self.chan.handshake_step()) is not HandshakeStatus.DONE:
                self.wait(state is HandshakeStatus.WANT_WRITE, deadline)

    def wait(self, write: bool, deadline: float) -> None:
        left = deadline - time.monotonic()
        assert left > 0, "timed out"
        select.select([] if write else [self.sock], [self.sock] if write else [], [], left)

    def send(self, data: bytes) -> None:
        view, deadline = memoryview(data), time.monotonic() + 10
        while view.nbytes:
            try:
                view = view[self.chan.send(view):]
            except BlockingIOError:
                self.wait(True, deadline)
        if isinstance(self.chan, TlsChannel):
            while not self.chan.flush():
                self.wait(True, deadline)

    def recv_exact(self, n: int) -> bytes:
        out, deadline = bytearray(), time.monotonic() + 10
        while len(out) < n:
            try:
                chunk = self.chan.recv(n - len(out))
            except BlockingIOError:
                self.wait(False, deadline)
                continue
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def frame(self) -> bytes:
        return self.recv_exact(int.from_bytes(self.recv_exact(4), "big"))

    def close(self) -> None:
        self.chan.close()


def authenticate(conn: Conn, exchange: SaslClientExchange) -> None:
    conn.send(exchange.start(time.monotonic()))
    while True:
        step = exchange.receive(conn.frame(), time.monotonic())
        if step.done:
            return
        assert step.send is not None
        conn.send(step.send)


def metadata_topics(conn: Conn) -> dict[str, int]:
    spec = _metadata.SPEC
    conn.send(_frame(encode_request_header(1, spec.key, 4, 77, "lazyconv-test")
                     + spec.encode_request(4, {"topics": None, "allow_auto_topic_creation": False})))
    reader = Reader(conn.frame())
    assert decode_response_header(reader, 0)["correlation_id"] == 77
    body = spec.decode_response(4, reader)
    return {t["name"]: t["error_code"] for t in body["topics"]}


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def tls_settings(kafka: SecuredKafka, **extra: str) -> SslClientSettings:
    return SslClientSettings.from_properties({"ssl.truststore.type": "PEM",
                                              "ssl.truststore.location": str(kafka.material.ca_pem),
                                              **extra})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_ssl_then_metadata(secured_kafka: SecuredKafka, mechanism: str, version: int) -> None:
    conn = Conn(secured_kafka.sasl_ssl_bootstrap, tls_settings(secured_kafka))
    try:
        exchange = SaslClientExchange(mechanism, "alice", "alice-secret",
                                      authenticate_version=version, client_id="lazyconv-test")
        authenticate(conn, exchange)
        assert exchange.authenticated and exchange.reauthenticate_at is None  # no reauth.ms set
        topics = metadata_topics(conn)
        assert topics.get(TOPIC_A) == 0  # alice may describe A; B is not listed for her
        assert "B" not in topics
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password(secured_kafka: SecuredKafka, mechanism: str) -> None:
    conn = Conn(secured_kafka.sasl_plaintext_bootstrap)
    try:
        with pytest.raises(AuthenticationError, match="refused") as info:
            authenticate(conn, SaslClientExchange(mechanism, "alice", "nope-secret"))
        assert "nope-secret" not in str(info.value) and "error 58" in str(info.value)
    finally:
        conn.close()


def test_mechanism_not_enabled_upstream(secured_kafka: SecuredKafka) -> None:
    conn = Conn(secured_kafka.sasl_plaintext_bootstrap)
    try:
        # GSSAPI is not enabled on the broker; our client does not speak it either, so ask
        # for a mechanism by hand: the broker answers 33 with its list
        exchange = SaslClientExchange("SCRAM-SHA-256", "alice", "alice-secret")
        frame = bytearray(exchange.start(time.monotonic()))
        frame[-13:] = b"SCRAM-SHA-1XX"  # same length, not enabled
        conn.send(bytes(frame))
        with pytest.raises(AuthenticationError, match="enables: .*SCRAM-SHA-512"):
            exchange.receive(conn.frame(), time.monotonic())
    finally:
        conn.close()


def test_host_name_must_match(secured_kafka: SecuredKafka) -> None:
    with pytest.raises(CertificateVerificationError, match="mismatch"):
        Conn(secured_kafka.sasl_ssl_bootstrap, tls_settings(secured_kafka), hostname="kafka.example")
    conn = Conn(secured_kafka.sasl_ssl_bootstrap,
                tls_settings(secured_kafka, **{"ssl.endpoint.identification.algorithm": ""}),
                hostname="kafka.example")
    conn.close()


def test_mtls_with_our_client_certificate(secured_kafka: SecuredKafka) -> None:
    settings = tls_settings(secured_kafka, **{
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(secured_kafka.material.client_keystore_p12("alice")),
        "ssl.keystore.password": "store-secret"})
    conn = Conn(secured_kafka.ssl_bootstrap, settings)
    try:
        assert metadata_topics(conn).get(TOPIC_A) == 0
    finally:
        conn.close()
