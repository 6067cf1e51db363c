"""What the secured-listener tests share: certificates made per run (trustme), listener
configurations in Kafka's property names, a serve over them in a thread that records what
reached its handler, and a small blocking Kafka client speaking raw frames (ApiVersions,
SaslHandshake v0/v1, SaslAuthenticate, Metadata) over a socket or TLS."""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyconv.net._listener_config import parse_listeners
from lazyconv.net._properties import Properties
from lazyconv.net._sasl import AUTHENTICATE, HANDSHAKE, SaslClientExchange
from lazyconv.net._scram_credentials import add_scram_user
from lazyconv.net._secure_connection import ListenerSecurity
from lazyconv.net._server import ListenerSpec
from lazyconv.protocol import _api_versions, _metadata
from lazyconv.protocol._connection import ClientConnection

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


@dataclass
class Material:
    """A CA and certificates made for this run (trustme, EC keys: quick to make), as files
    under ``folder``: the server's key store (PEM, for 127.0.0.1 and localhost), the users'
    client certificates (subject ``CN=<user>,O=lazyconv-tests``), an expired one and one from
    a CA nobody trusts (both for alice), and a SCRAM credentials file with :data:`USERS`."""

    folder: Path

    def __post_init__(self) -> None:
        import trustme

        self.ca = trustme.CA()
        self.ca_pem = self.folder / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        server = self.ca.issue_cert("localhost", "127.0.0.1", common_name="localhost")
        self.server_keystore_pem = self.folder / "server-keystore.pem"
        self.server_keystore_pem.write_bytes(
            server.private_key_pem.bytes() + b"".join(c.bytes() for c in server.cert_chain_pems))
        self.certs: dict[str, tuple[Path, Path]] = {}
        for user in USERS:
            self.certs[user] = self._write(user, self.ca.issue_cert(
                f"{user}.clients.lazyconv.test", common_name=user, organization_name="lazyconv-tests"))
        now = datetime.datetime.now(datetime.timezone.utc)
        self.expired = self._write("expired", self.ca.issue_cert(
            "alice.clients.lazyconv.test", common_name="alice", organization_name="lazyconv-tests",
            not_before=now - datetime.timedelta(days=10), not_after=now - datetime.timedelta(days=1)))
        self.foreign = self._write("foreign", trustme.CA().issue_cert(
            "alice.clients.lazyconv.test", common_name="alice"))
        self.scram_file = self.folder / "scram.json"
        for user, password in USERS.items():
            add_scram_user(self.scram_file, user, password, ["SCRAM-SHA-512", "SCRAM-SHA-256"])

    def _write(self, name: str, leaf: Any) -> tuple[Path, Path]:
        cert, key = self.folder / f"{name}-cert.pem", self.folder / f"{name}-key.pem"
        cert.write_bytes(b"".join(c.bytes() for c in leaf.cert_chain_pems))
        key.write_bytes(leaf.private_key_pem.bytes())
        return cert, key


def make_material(folder: Path) -> Material:
    folder.mkdir(parents=True, exist_ok=True)
    return Material(folder)


def listener_props(material: Material, **extra: str) -> dict[str, str]:
    """Four listeners on free ports: SASL_SSL, SASL_PLAINTEXT, SSL with client certificates
    required (principal: the CN), PLAINTEXT."""
    props = {
        "listeners": ("SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
                      "PLAINTEXT://127.0.0.1:0"),
        "ssl.keystore.location": str(material.server_keystore_pem),
        "ssl.truststore.location": str(material.ca_pem),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
    }
    props.update(extra)
    return props


def listener_specs(material: Material, timeout_s: float = 10.0, **extra: str) -> list[ListenerSpec]:
    configs = parse_listeners(Properties.from_mapping(listener_props(material, **extra), "test"),
                              scram_credentials_file=material.scram_file,
                              authentication_timeout_s=timeout_s)
    return [ListenerSpec(c.host, c.port, 0, None,
                         security=ListenerSecurity.from_config(c).with_handshake_timeout(timeout_s))
            for c in configs]


# -- a raw blocking client -------------------------------------------------------------------


class RawClient:
    """One connection speaking whole frames (tests drive every step themselves)."""

    def __init__(self, port: int, *, tls: ssl.SSLContext | None = None, timeout: float = 5.0) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock: socket.socket | ssl.SSLSocket = (
            tls.wrap_socket(sock, server_hostname="localhost") if tls is not None else sock)
        self.conn = ClientConnection("raw-test", max_response_size=16 << 20)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def read_frame(self) -> bytes | None:
        """The next frame (without its size), None when the server closed."""
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            try:
                piece = self.sock.recv(n - len(out))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not piece:
                return None
            out += piece
        return bytes(out)

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True

    def request(self, spec: Any, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
        pending, data = self.conn.send_request(spec, version, body)
        self.send(data)
        frame = self.read_frame()
        if frame is None:
            return None
        self.conn.frames.feed(struct.pack(">i", len(frame)) + frame)
        answered = self.conn.next_response()
        assert answered is not None
        return ClientConnection.decode_response(answered[0], answered[1])

    def api_versions(self) -> dict[str, Any] | None:
        return self.request(_api_versions.SPEC, 3, {"client_software_name": "raw",
                                                    "client_software_version": "1"})

    def metadata(self) -> dict[str, Any] | None:
        return self.request(_metadata.SPEC, 1, {"topics": None})

    def authenticate(self, mechanism: str, user: str, password: str, *, version: int = 2) -> bool:
        """SaslHandshake v1 and SaslAuthenticate ``version``; whether it succeeded."""
        exchange = SaslClientExchange(mechanism, user, password, authenticate_version=version,
                                      correlation_ids=_ids(self.conn))
        frame: bytes | None = exchange.start(0.0)
        while frame is not None:
            self.send(frame)
            answer = self.read_frame()
            if answer is None:
                return False
            try:
                step = exchange.receive(answer, 0.0)
            except Exception:
                return False
            if step.done:
                return True
            frame = step.send
        return False

    def handshake(self, mechanism: str, version: int = 1) -> dict[str, Any] | None:
        return self.request(HANDSHAKE, version, {"mechanism": mechanism})

    def raw_token(self, token: bytes) -> bytes | None:
        """After SaslHandshake v0: a size-prefixed token, the server's token back."""
        self.send(struct.pack(">i", len(token)) + token)
        return self.read_frame()


def _ids(conn: ClientConnection):
    while True:
        yield conn.reserve_correlation_id()


def client_context(material: Material, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(material.ca_pem))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


__all__ = ["AUTHENTICATE", "HANDSHAKE", "Material", "RawClient", "USERS", "client_context",
           "listener_props", "listener_specs", "make_material"]
