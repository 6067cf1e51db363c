"""TLS from Kafka's ssl.* properties and TlsChannel over socketpairs, with certificates made
per run by trustme: stores of every kind, mTLS and principals, partial writes, a slow reader,
a stalled handshake, a wrong CA, a host name mismatch, an expired certificate, plaintext on a
TLS port and TLS on a plaintext port."""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from lazyconv._send import BytesSend
from lazyconv.errors import (
    CertificateVerificationError,
    ConfigurationError,
    LocalProtocolError,
    TlsError,
    TlsMismatchError,
)
from lazyconv.net._principal import ANONYMOUS, KafkaPrincipal
from lazyconv.net._tls import (
    HandshakeStatus,
    KeyStore,
    SslClientSettings,
    SslServerSettings,
    TlsChannel,
    TrustStore,
    looks_like_tls,
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tls")
    server = ca.issue_cert("localhost", "127.0.0.1", common_name="localhost")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Example",
                           organization_unit_name="Eng")
    out = {
        "ca": folder / "ca.pem", "keystore": folder / "keystore.pem",
        "client": folder / "client.pem",
    }
    ca.cert_pem.write_to_path(str(out["ca"]))
    server.private_key_and_cert_chain_pem.write_to_path(str(out["keystore"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(out["client"]))
    return out


def server_settings(files: dict[str, Path], **extra: str) -> SslServerSettings:
    return SslServerSettings.from_properties({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files["keystore"]),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files["ca"]), **extra})


def client_settings(files: dict[str, Path], **extra: str) -> SslClientSettings:
    return SslClientSettings.from_properties({
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files["ca"]), **extra})


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def channels(pair: tuple[socket.socket, socket.socket], server: SslServerSettings,
             client: SslClientSettings, hostname: str = "localhost") -> tuple[TlsChannel, TlsChannel]:
    return (TlsChannel(pair[0], server.context(), server_side=True),
            TlsChannel(pair[1], client.context(), server_side=False, server_hostname=hostname))


def handshake(*chans: TlsChannel, rounds: int = 50) -> None:
    """Step every channel until all are done (socketpairs: no waiting needed)."""
    for _ in range(rounds):
        states = [c.handshake_step() for c in chans]
        if all(s is HandshakeStatus.DONE for s in states):
            return
    raise AssertionError(f"handshake stuck: {states}")


def pump(sender: TlsChannel, receiver: TlsChannel, data: bytes) -> bytes:
    """Send ``data`` through, reading on the other side whenever the sender would block."""
    view, got = memoryview(data), bytearray()
    while view.nbytes or sender.wants_write or len(got) < len(data):
        if view.nbytes:
            try:
                view = view[sender.send(view):]
            except BlockingIOError:
                pass
        sender.flush()
        try:
            chunk = receiver.recv(65536)
            assert chunk, "unexpected end of stream"
            got += chunk
        except BlockingIOError:
            pass
    return bytes(got)


# -- stores and settings -------------------------------------------------------------------


def test_round_trip_and_send_contract(files: dict[str, Path], pair) -> None:
    server, client = channels(pair, server_settings(files), client_settings(files))
    handshake(server, client)
    assert server.version() in ("TLSv1.2", "TLSv1.3") and client.cipher() is not None
    data = bytes(range(256)) * 8000  # 2 MB: many records, partial writes
    assert pump(server, client, data) == data
    assert pump(client, server, data[:100000]) == data[:100000]
    # a Send writes through TlsChannel.send (never sendfile: it is not a socket)
    send = BytesSend(b"x" * 300000)
    got = bytearray()
    while not send.completed or server.wants_write:
        if not send.completed:
            try:
                send.write_to(server)
            except BlockingIOError:
                pass
        server.flush()
        try:
            got += client.recv(70000)
        except BlockingIOError:
            pass
    while len(got) < 300000:
        got += client.recv(70000)
    assert got == b"x" * 300000


def test_sni_carries_the_host_name(files: dict[str, Path], pair) -> None:
    seen: list[str | None] = []
    context = server_settings(files).context()
    context.sni_callback = lambda sslobj, name, ctx: seen.append(name)
    server = TlsChannel(pair[0], context, server_side=True)
    client = TlsChannel(pair[1], client_settings(files).context(), server_side=False,
                        server_hostname="localhost")
    handshake(server, client)
    assert seen == ["localhost"]


def test_recv_into_and_pending(files: dict[str, Path], pair) -> None:
    server, client = channels(pair, server_settings(files), client_settings(files))
    handshake(server, client)
    assert server.send(b"hello world") == 11 and server.flush()
    buf = bytearray(5)
    assert client.recv_into(buf) == 5 and bytes(buf) == b"hello"
    assert client.pending() == 6  # the rest is decrypted already: no socket read needed
    assert client.recv(100) == b" world" and client.pending() == 0
    with pytest.raises(BlockingIOError):
        client.recv(100)


def test_close_notify_ends_the_stream(files: dict[str, Path], pair) -> None:
    server, client = channels(pair, server_settings(files), client_settings(files))
    handshake(server, client)
    server.send(b"last")
    server.close()
    assert client.recv(10) == b"last" and client.recv(10) == b""
    server.close()  # idempotent


def test_reading_before_the_handshake_is_our_bug(files: dict[str, Path], pair) -> None:
    server, _ = channels(pair, server_settings(files), client_settings(files))
    with pytest.raises(LocalProtocolError):
        server.recv(1)
    blocking = socket.socket()
    try:
        with pytest.raises(LocalProtocolError, match="non-blocking"):
            TlsChannel(blocking, server_settings(files).context(), server_side=True)
    finally:
        blocking.close()


def test_inline_pem_and_encrypted_key(ca: trustme.CA, files: dict[str, Path], pair) -> None:
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pw"))
    chain = b"".join(p.bytes() for p in leaf.cert_chain_pems).decode()
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.key": encrypted.decode(),
             "ssl.keystore.certificate.chain": chain, "ssl.key.password": "key-pw"}
    server = SslServerSettings.from_properties(props)
    assert "key-pw" not in repr(server) and "PRIVATE" not in repr(server.key_store)
    s, c = channels(pair, server, client_settings(files))
    handshake(s, c)
    with pytest.raises(ConfigurationError, match="does not open it"):
        SslServerSettings.from_properties({**props, "ssl.key.password": "wrong"})
    with pytest.raises(ConfigurationError, match="encrypted: set ssl.key.password"):
        SslServerSettings.from_properties({k: v for k, v in props.items() if k != "ssl.key.password"})
    with pytest.raises(ConfigurationError, match="keystore.password cannot be set for a PEM"):
        SslServerSettings.from_properties({**props, "ssl.keystore.password": "x"})
    with pytest.raises(ConfigurationError, match="go together"):
        SslServerSettings.from_properties({"ssl.keystore.type": "PEM", "ssl.keystore.key": encrypted.decode()})


def test_pkcs12_stores(ca: trustme.CA, files: dict[str, Path], tmp_path: Path, pair) -> None:
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    (tmp_path / "ks.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", key, cert, None, serialization.BestAvailableEncryption(b"store-pw")))
    (tmp_path / "ts.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], serialization.BestAvailableEncryption(b"trust-pw")))
    server = SslServerSettings.from_properties({
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "ks.p12"),
        "ssl.keystore.password": "store-pw"})
    client = SslClientSettings.from_properties({
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(tmp_path / "ts.p12"),
        "ssl.truststore.password": "trust-pw"})
    s, c = channels(pair, server, client)
    handshake(s, c)
    # the type is taken from the file when unset (Kafka's default, JKS, is not read here)
    assert KeyStore.from_properties({"ssl.keystore.location": str(tmp_path / "ks.p12"),
                                     "ssl.keystore.password": "store-pw"}) is not None
    with pytest.raises(ConfigurationError, match="does not open it"):
        KeyStore.from_properties({"ssl.keystore.type": "PKCS12", "ssl.keystore.password": "no",
                                  "ssl.keystore.location": str(tmp_path / "ks.p12")})


def test_jks_refused_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "ks.jks").write_bytes(b"\xfe\xed\xfe\xed")
    with pytest.raises(ConfigurationError, match=r"keytool -importkeystore -srckeystore .*ks.jks "
                                                 r"-destkeystore .*ks.jks.p12 -deststoretype PKCS12"):
        KeyStore.from_properties({"ssl.keystore.type": "JKS",
                                  "ssl.keystore.location": str(tmp_path / "ks.jks")})
    with pytest.raises(ConfigurationError, match="JKS"):
        TrustStore.from_properties({"ssl.truststore.type": "jks",
                                    "ssl.truststore.location": str(tmp_path / "ks.jks")})


def test_setting_errors(files: dict[str, Path], ca: trustme.CA, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="needs a key store"):
        SslServerSettings.from_properties({})
    with pytest.raises(ConfigurationError, match="no such file"):
        KeyStore.from_properties({"ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigurationError, match="ssl.client.auth=sometimes"):
        server_settings(files, **{"ssl.client.auth": "sometimes"})
    with pytest.raises(ConfigurationError, match="unknown protocol 'SSLv3'"):
        server_settings(files, **{"ssl.enabled.protocols": "SSLv3,TLSv1.2"})
    with pytest.raises(ConfigurationError, match="contiguous"):
        server_settings(files, **{"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"})
    with pytest.raises(ConfigurationError, match="TLS 1.3 suites cannot be chosen"):
        server_settings(files, **{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    with pytest.raises(ConfigurationError, match="unknown cipher suite 'NOPE'|no cipher suite"):
        server_settings(files, **{"ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256,NOPE"})
    with pytest.raises(ConfigurationError, match="identification.algorithm=ldap"):
        client_settings(files, **{"ssl.endpoint.identification.algorithm": "ldap"})
    other = trustme.CA().issue_cert("localhost")
    mismatched = tmp_path / "mismatch.pem"
    mismatched.write_bytes(other.private_key_pem.bytes() + ca.issue_cert("x").cert_chain_pems[0].bytes())
    with pytest.raises(ConfigurationError, match="does not belong"):
        KeyStore.from_properties({"ssl.keystore.location": str(mismatched)})


def test_protocols_and_ciphers_apply(files: dict[str, Path], pair) -> None:
    server = server_settings(files, **{"ssl.enabled.protocols": "TLSv1.2",
                                       "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
    s, c = channels(pair, server, client_settings(files))
    handshake(s, c)
    assert s.version() == "TLSv1.2" and s.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


# -- verification failures -----------------------------------------------------------------


def expect_failure(server: TlsChannel, client: TlsChannel) -> tuple[Exception | None, Exception | None]:
    """Step both until each is done or failed; the exception each raised."""
    errors: list[Exception | None] = [None, None]
    done = [False, False]
    for _ in range(50):
        for i, chan in enumerate((server, client)):
            if errors[i] is None and not done[i]:
                try:
                    done[i] = chan.handshake_step() is HandshakeStatus.DONE
                except TlsError as exc:
                    errors[i] = exc
        if all(e is not None or d for e, d in zip(errors, done, strict=True)):
            break
    return errors[0], errors[1]


def test_wrong_ca(files: dict[str, Path], tmp_path: Path, pair) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    client = SslClientSettings.from_properties({"ssl.truststore.location": str(other)})
    s, c = channels(pair, server_settings(files), client)
    _, client_error = expect_failure(s, c)
    assert isinstance(client_error, CertificateVerificationError)
    assert "server's certificate does not verify" in str(client_error)
    assert "unable to get local issuer certificate" in str(client_error)


def test_hostname_mismatch_and_turning_the_check_off(files: dict[str, Path], pair) -> None:
    s, c = channels(pair, server_settings(files), client_settings(files), hostname="kafka.example")
    _, client_error = expect_failure(s, c)
    assert isinstance(client_error, CertificateVerificationError)
    assert "mismatch" in str(client_error).lower()
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        relaxed = client_settings(files, **{"ssl.endpoint.identification.algorithm": ""})
        s, c = channels((a, b), server_settings(files), relaxed, hostname="kafka.example")
        handshake(s, c)
    finally:
        a.close()
        b.close()


def test_expired_certificate(ca: trustme.CA, files: dict[str, Path], tmp_path: Path, pair) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    expired = ca.issue_cert("localhost", not_before=now - datetime.timedelta(days=30),
                            not_after=now - datetime.timedelta(days=1))
    path = tmp_path / "expired.pem"
    expired.private_key_and_cert_chain_pem.write_to_path(str(path))
    server = SslServerSettings.from_properties({"ssl.keystore.location": str(path)})
    s, c = channels(pair, server, client_settings(files))
    _, client_error = expect_failure(s, c)
    assert isinstance(client_error, CertificateVerificationError)
    assert "expired" in str(client_error)


def test_mtls_principal_with_mapping_rules(files: dict[str, Path], pair) -> None:
    server = server_settings(files, **{
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=Eng,.*$/$1@eng/L,DEFAULT"})
    client = client_settings(files, **{"ssl.keystore.location": str(files["client"])})
    s, c = channels(pair, server, client)
    handshake(s, c)
    assert s.principal(server.principal_mapper) == KafkaPrincipal("User", "alice@eng")
    assert c.peer_certificate() is not None


def test_mtls_required_refuses_a_client_without_a_certificate(files: dict[str, Path], pair) -> None:
    server = server_settings(files, **{"ssl.client.auth": "required"})
    s, c = channels(pair, server, client_settings(files))
    server_error, _ = expect_failure(s, c)
    assert isinstance(server_error, CertificateVerificationError)
    assert "presented no certificate" in str(server_error), server_error


def test_mtls_required_refuses_a_certificate_of_another_ca(files: dict[str, Path], tmp_path: Path,
                                                           pair) -> None:
    stranger = tmp_path / "stranger.pem"
    trustme.CA().issue_cert("mallory").private_key_and_cert_chain_pem.write_to_path(str(stranger))
    server = server_settings(files, **{"ssl.client.auth": "required"})
    client = client_settings(files, **{"ssl.keystore.location": str(stranger)})
    s, c = channels(pair, server, client)
    server_error, _ = expect_failure(s, c)
    assert isinstance(server_error, CertificateVerificationError)
    assert "client's certificate does not verify" in str(server_error)


def test_requested_without_a_certificate_is_anonymous(files: dict[str, Path], pair) -> None:
    server = server_settings(files, **{"ssl.client.auth": "requested"})
    s, c = channels(pair, server, client_settings(files))
    handshake(s, c)
    assert s.principal(server.principal_mapper) == ANONYMOUS


# -- plaintext against TLS, slow readers, stalls ----------------------------------------------


def test_plaintext_client_on_a_tls_port(files: dict[str, Path], pair) -> None:
    server = TlsChannel(pair[0], server_settings(files).context(), server_side=True)
    # an ApiVersions v0 request, as a PLAINTEXT Kafka client sends it first
    pair[1].send(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
    with pytest.raises(TlsMismatchError, match="PLAINTEXT client on an SSL listener"):
        handshake(server)


def test_tls_client_on_a_plaintext_port(files: dict[str, Path], pair) -> None:
    client = TlsChannel(pair[1], client_settings(files).context(), server_side=False,
                        server_hostname="localhost")
    assert client.handshake_step() is HandshakeStatus.WANT_READ
    first = pair[0].recv(65536)
    assert looks_like_tls(first) and not looks_like_tls(b"\x00\x00\x00\x0a\x00\x12")
    pair[0].close()  # a plaintext broker closes: the size field says ~369 MB
    with pytest.raises(TlsMismatchError, match="PLAINTEXT listener"):
        client.handshake_step()


def test_garbage_answer_to_a_client_hello(files: dict[str, Path], pair) -> None:
    client = TlsChannel(pair[1], client_settings(files).context(), server_side=False,
                        server_hostname="localhost")
    client.handshake_step()
    pair[0].send(b"\x00\x00\x00\x08" + b"\x00" * 8)  # a Kafka-looking answer, not TLS
    with pytest.raises(TlsMismatchError):
        handshake(client)


def test_slow_reader_bounds_the_buffer(files: dict[str, Path], pair) -> None:
    s, c = channels(pair, server_settings(files), client_settings(files))
    handshake(s, c)
    s.max_buffered = 100_000
    data = b"y" * 5_000_000
    view, taken = memoryview(data), 0
    with pytest.raises(BlockingIOError):
        while True:  # the client reads nothing: the socket fills, then the channel's buffer
            n = s.send(view[taken:])
            taken += n
            assert s.buffered_output <= s.max_buffered + 70_000, s.buffered_output
    assert 0 < taken < len(data)
    assert s.buffered_output <= s.max_buffered + 70_000
    # the reader catches up: every byte arrives, in order
    got = bytearray()
    while len(got) < taken:
        s.flush()
        try:
            got += c.recv(1 << 20)
        except BlockingIOError:
            pass
    assert got == data[:taken] and not s.wants_write
    assert pump(s, c, data[taken:]) == data[taken:]


def test_slow_reader_delivers_every_byte(files: dict[str, Path], pair) -> None:
    s, c = channels(pair, server_settings(files), client_settings(files))
    handshake(s, c)
    s.max_buffered = 50_000
    data = bytes(range(251)) * 4000
    view, got, blocked = memoryview(data), bytearray(), 0
    while view.nbytes or s.wants_write or len(got) < len(data):
        try:
            if view.nbytes:
                view = view[s.send(view):]
        except BlockingIOError:
            blocked += 1
            s.flush()
            try:  # the reader reads a little only when the writer is stuck
                got += c.recv(4096)
            except BlockingIOError:
                pass
        if not view.nbytes:
            s.flush()
            try:
                got += c.recv(65536)
            except BlockingIOError:
                pass
    assert blocked > 0 and bytes(got) == data


def test_stalled_handshake_waits_without_growing(files: dict[str, Path], pair) -> None:
    server = TlsChannel(pair[0], server_settings(files).context(), server_side=True)
    for _ in range(100):
        assert server.handshake_step() is HandshakeStatus.WANT_READ
    # half a ClientHello, then nothing
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO())
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    hello = out.read()
    pair[1].send(hello[: len(hello) // 2])
    for _ in range(100):
        assert server.handshake_step() is HandshakeStatus.WANT_READ
    assert server.buffered_output == 0 and server.pending() <= len(hello)


def test_peer_vanishing_mid_handshake(files: dict[str, Path], pair) -> None:
    server = TlsChannel(pair[0], server_settings(files).context(), server_side=True)
    server.handshake_step()
    pair[1].close()
    with pytest.raises(TlsError, match="closed the connection during the TLS handshake"):
        server.handshake_step()
