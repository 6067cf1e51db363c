"""TLS from Kafka's ``ssl.*`` properties: SSL contexts for listeners and for the upstream
side, and :class:`TlsChannel`, TLS over a non-blocking socket for the connection loop.

**Key stores** (``ssl.keystore.*``, a listener's certificate or a client's for mTLS):

- ``ssl.keystore.type=PEM``: ``ssl.keystore.location`` names one file with the private key
  and the certificate chain, or the PEM text is given inline in ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``; an encrypted key is opened with ``ssl.key.password``
  (as in Kafka, ``ssl.keystore.password`` cannot be set for PEM);
- ``ssl.keystore.type=PKCS12``: ``ssl.keystore.location`` and ``ssl.keystore.password`` (and
  ``ssl.key.password`` when the key has its own);
- ``JKS`` is refused with the ``keytool`` line that converts it to PKCS12. Kafka's default
  type is JKS; here an unset type is taken from the file (PEM text, else PKCS12).

**Trust stores** (``ssl.truststore.*``): ``PEM`` (``ssl.truststore.location`` or inline
``ssl.truststore.certificates``) or ``PKCS12`` (with ``ssl.truststore.password``); none given:
the system's CAs.

**Listeners** (:class:`SslServerSettings`): ``ssl.client.auth`` = ``required`` (mTLS: a client
without a certificate the trust store verifies is refused), ``requested`` (verified when
presented) or ``none`` (default); without a trust store client certificates are verified
against the system's CAs, as Kafka does with the JVM's (a warning at start:
:meth:`~lazyconv.net._listener_config.ListenerConfig.trust_warning`); ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``);
``ssl.cipher.suites`` (OpenSSL or IANA names of TLS 1.2 suites; TLS 1.3's suites cannot be
chosen through Python's ssl module, so naming only some of them is an error).

**Upstream** (:class:`SslClientSettings`): the trust store (or the system's CAs), a key store
for mTLS, ``ssl.endpoint.identification.algorithm`` = ``https`` (default: the certificate must
name the host) or empty (the chain is still verified: there is no unverified mode), SNI from
the host name.

Key material never touches the disk: what Python's ``ssl`` must read from a file is handed
over through an anonymous in-memory file (``memfd``) where the platform has one, else a
private temporary file removed at once.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import logging
import os
import socket
import ssl
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from lazyconv.errors import (
    CertificateVerificationError,
    ConfigurationError,
    LocalProtocolError,
    TlsError,
    TlsMismatchError,
)
from lazyconv.net._principal import KafkaPrincipal, SslPrincipalMapper

log = logging.getLogger(__name__)

__all__ = [
    "KeyStore",
    "TrustStore",
    "SslServerSettings",
    "SslClientSettings",
    "TlsChannel",
    "HandshakeStatus",
    "looks_like_tls",
    "CLIENT_AUTH_VALUES",
]

CLIENT_AUTH_VALUES = ("required", "requested", "none")
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
              "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = ("TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256")
_MAX_STORE_BYTES = 16 << 20
_JKS_HINT = ("keytool -importkeystore -srckeystore {src} -destkeystore {src}.p12 "
             "-deststoretype PKCS12")


def looks_like_tls(first_bytes: bytes) -> bool:
    """Whether the first bytes a PLAINTEXT listener read are a TLS ClientHello record (type 22,
    version 3.x): a TLS client on a plaintext port. As a Kafka size field they would announce
    some 369 MB."""
    return len(first_bytes) >= 3 and first_bytes[0] == 0x16 and first_bytes[1] == 0x03 \
        and first_bytes[2] <= 0x04


# -- reading stores ------------------------------------------------------------------------


def _get(props: Mapping[str, str], key: str) -> str | None:
    value = props.get(key)
    return value if value not in (None, "") else None


def _read_store(path: str, what: str) -> bytes:
    file = Path(path).expanduser()
    try:
        size = file.stat().st_size
        if size > _MAX_STORE_BYTES:
            raise ConfigurationError(f"{what}={path}: larger than 16 MiB, not a key store")
        return file.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(f"{what}={path}: no such file") from None
    except OSError as exc:
        raise ConfigurationError(f"{what}={path}: cannot be read ({exc.strerror})") from None


def _store_type(props: Mapping[str, str], key: str, data: bytes | None) -> str:
    given = _get(props, key)
    if given is not None:
        kind = given.upper()
    elif data is None or data.lstrip().startswith(b"-----BEGIN"):
        kind = "PEM"
    else:
        kind = "PKCS12"
    if kind not in ("PEM", "PKCS12", "JKS"):
        raise ConfigurationError(f"{key}={given}: unknown key store type (PEM, PKCS12; JKS is "
                                 "refused)")
    return kind


def _refuse_jks(location_key: str, location: str | None) -> ConfigurationError:
    src = location or "store.jks"
    return ConfigurationError(f"{location_key}: JKS key stores are not read here: convert it with "
                              f"'{_JKS_HINT.format(src=src)}' and set the type to PKCS12")


def _password(props: Mapping[str, str], key: str) -> bytes | None:
    value = _get(props, key)
    return value.encode() if value is not None else None


@dataclass(frozen=True)
class KeyStore:
    """A private key and its certificate chain, as unencrypted PEM held in memory (out of
    repr); ``source`` says where they came from (for messages)."""

    key_pem: bytes = field(repr=False)
    chain_pem: bytes
    source: str

    @property
    def certificate(self) -> x509.Certificate:
        """The leaf certificate."""
        return x509.load_pem_x509_certificates(self.chain_pem)[0]

    @classmethod
    def from_properties(cls, props: Mapping[str, str], prefix: str = "ssl.") -> KeyStore | None:
        """The key store ``props`` describe (None when none is configured)."""
        location_key = f"{prefix}keystore.location"
        location = _get(props, location_key)
        inline_key = _get(props, f"{prefix}keystore.key")
        inline_chain = _get(props, f"{prefix}keystore.certificate.chain")
        if location is None and inline_key is None and inline_chain is None:
            return None
        data = _read_store(location, location_key) if location is not None else None
        kind = _store_type(props, f"{prefix}keystore.type", data)
        key_password = _password(props, f"{prefix}key.password")
        store_password = _password(props, f"{prefix}keystore.password")
        if kind == "JKS":
            raise _refuse_jks(location_key, location)
        if kind == "PEM":
            if store_password is not None:
                raise ConfigurationError(f"{prefix}keystore.password cannot be set for a PEM key "
                                         f"store (Kafka's rule): give {prefix}key.password for an "
                                         "encrypted key")
            if data is not None and (inline_key or inline_chain):
                raise ConfigurationError(f"give {location_key} or {prefix}keystore.key with "
                                         f"{prefix}keystore.certificate.chain, not both")
            if data is None:
                if inline_key is None or inline_chain is None:
                    raise ConfigurationError(f"{prefix}keystore.key and "
                                             f"{prefix}keystore.certificate.chain go together")
                return cls._from_pem(inline_key.encode(), inline_chain.encode(), key_password,
                                     f"{prefix}keystore.key")
            return cls._from_pem(data, data, key_password, f"{location_key}={location}")
        assert data is not None  # PKCS12 needs a file
        return cls._from_pkcs12(data, store_password, key_password, f"{location_key}={location}")

    @classmethod
    def _from_pem(cls, key_text: bytes, chain_text: bytes, password: bytes | None,
                  source: str) -> KeyStore:
        try:
            key = serialization.load_pem_private_key(_pem_blocks(key_text, "PRIVATE KEY"),
                                                     password=password)
        except TypeError:
            raise ConfigurationError(f"{source}: the private key is encrypted: set ssl.key.password"
                                     if password is None else
                                     f"{source}: the private key is not encrypted: remove "
                                     "ssl.key.password") from None
        except ValueError:
            raise ConfigurationError(f"{source}: no readable private key (a PKCS#8 or PKCS#1 PEM "
                                     "block), or ssl.key.password does not open it") from None
        try:
            chain = x509.load_pem_x509_certificates(chain_text)
        except ValueError:
            raise ConfigurationError(f"{source}: no certificate (a PEM CERTIFICATE block)") from None
        return cls._checked(key, chain, source)

    @classmethod
    def _from_pkcs12(cls, data: bytes, store_password: bytes | None, key_password: bytes | None,
                     source: str) -> KeyStore:
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, store_password)
        except ValueError:
            if key_password is not None and key_password != store_password:
                try:
                    key, cert, extra = pkcs12.load_key_and_certificates(data, key_password)
                except ValueError:
                    key = None
                if key is not None:
                    return cls._checked(key, [c for c in (cert, *extra) if c is not None], source)
            raise ConfigurationError(f"{source}: not a PKCS12 key store, or ssl.keystore.password "
                                     "does not open it") from None
        if key is None or cert is None:
            raise ConfigurationError(f"{source}: the PKCS12 store holds no private key with its "
                                     "certificate")
        return cls._checked(key, [cert, *extra], source)

    @classmethod
    def _checked(cls, key: object, chain: list[x509.Certificate], source: str) -> KeyStore:
        private = key
        assert hasattr(private, "private_bytes") and hasattr(private, "public_key")
        if private.public_key() != chain[0].public_key():
            raise ConfigurationError(f"{source}: the private key does not belong to the first "
                                     "certificate of the chain")
        key_pem = private.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
        chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
        return cls(key_pem, chain_pem, source)

    def load_into(self, context: ssl.SSLContext) -> None:
        """Give the key and chain to ``context`` (through an in-memory file)."""
        with _private_file(self.chain_pem + self.key_pem) as path:
            try:
                context.load_cert_chain(path)
            except ssl.SSLError as exc:
                raise ConfigurationError(f"{self.source}: TLS refuses this key and certificate "
                                         f"({exc.reason or exc})") from None


def _pem_blocks(text: bytes, kind: str) -> bytes:
    """The PEM blocks of ``text`` whose label ends in ``kind`` (keys out of a combined file)."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(b"-----BEGIN ") and stripped.endswith(f"{kind}-----".encode()):
            inside = True
        if inside:
            out.append(line)
        if stripped.startswith(b"-----END ") and stripped.endswith(f"{kind}-----".encode()):
            inside = False
    return b"".join(out) or text


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path that reads ``data``: an anonymous memory file on Linux, else a 0600 temporary
    file in a 0700 folder, gone when the block ends."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("lazyconv-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    folder = tempfile.mkdtemp(prefix="lazyconv-tls-")
    path = os.path.join(folder, "material.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.rmdir(folder)


@dataclass(frozen=True)
class TrustStore:
    """CA certificates (PEM) to verify peers with; ``source`` for messages."""

    cas_pem: bytes
    source: str

    @classmethod
    def from_properties(cls, props: Mapping[str, str], prefix: str = "ssl.") -> TrustStore | None:
        """The trust store ``props`` describe (None: none configured, use the system's CAs)."""
        location_key = f"{prefix}truststore.location"
        location = _get(props, location_key)
        inline = _get(props, f"{prefix}truststore.certificates")
        if location is None and inline is None:
            return None
        if location is not None and inline is not None:
            raise ConfigurationError(f"give {location_key} or {prefix}truststore.certificates, "
                                     "not both")
        data = _read_store(location, location_key) if location is not None else None
        kind = _store_type(props, f"{prefix}truststore.type", data)
        source = f"{location_key}={location}" if location else f"{prefix}truststore.certificates"
        if kind == "JKS":
            raise _refuse_jks(location_key, location)
        if kind == "PEM":
            text = data if data is not None else (inline or "").encode()
            try:
                certs = x509.load_pem_x509_certificates(text)
            except ValueError:
                raise ConfigurationError(f"{source}: no certificate (a PEM CERTIFICATE block)") from None
        else:
            if data is None:
                raise ConfigurationError(f"{prefix}truststore.type=PKCS12 needs {location_key}")
            try:
                _, cert, extra = pkcs12.load_key_and_certificates(
                    data, _password(props, f"{prefix}truststore.password"))
            except ValueError:
                raise ConfigurationError(f"{source}: not a PKCS12 store, or "
                                         f"{prefix}truststore.password does not open it") from None
            certs = [c for c in (cert, *extra) if c is not None]
            if not certs:
                raise ConfigurationError(f"{source}: the PKCS12 store holds no certificate")
        return cls(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs), source)

    def load_into(self, context: ssl.SSLContext) -> None:
        context.load_verify_locations(cadata=self.cas_pem.decode("ascii"))


def _protocol_range(props: Mapping[str, str], prefix: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    key = f"{prefix}enabled.protocols"
    text = _get(props, key) or DEFAULT_ENABLED_PROTOCOLS
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigurationError(f"{key}={text}: unknown protocol {unknown[0] if unknown else ''!r} "
                                 f"(known: {', '.join(_PROTOCOLS)})")
    order = list(_PROTOCOLS)
    positions = sorted(order.index(p) for p in set(names))
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise ConfigurationError(f"{key}={text}: the protocols must be a contiguous range (a gap "
                                 "cannot be expressed to OpenSSL)")
    return _PROTOCOLS[order[positions[0]]], _PROTOCOLS[order[positions[-1]]]


def _iana_to_openssl(name: str) -> str:
    """The OpenSSL name of a TLS 1.2 suite given by its IANA (Java) name; others unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[4:].split("_WITH_", 1)
    kx = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-",
          "RSA": ""}.get(exchange)
    table = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
             "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305",
             "AES_128_CBC_SHA256": "AES128-SHA256", "AES_256_CBC_SHA384": "AES256-SHA384",
             "AES_128_CBC_SHA": "AES128-SHA", "AES_256_CBC_SHA": "AES256-SHA"}
    suffix = table.get(cipher)
    if kx is None or suffix is None:
        return name
    return kx + suffix


def _apply_protocols_and_ciphers(context: ssl.SSLContext, props: Mapping[str, str],
                                 prefix: str) -> None:
    context.minimum_version, context.maximum_version = _protocol_range(props, prefix)
    key = f"{prefix}cipher.suites"
    text = _get(props, key)
    if text is None:
        return
    names = [c.strip() for c in text.split(",") if c.strip()]
    tls13 = [c for c in names if c in _TLS13_SUITES]
    if tls13 and set(tls13) != set(_TLS13_SUITES):
        raise ConfigurationError(f"{key}: TLS 1.3 suites cannot be chosen one by one here (Python's "
                                 f"ssl module); list all of {', '.join(_TLS13_SUITES)} or none "
                                 "and limit ssl.enabled.protocols to TLSv1.2")
    tls12 = [_iana_to_openssl(c) for c in names if c not in _TLS13_SUITES]
    if not tls12:
        if context.minimum_version <= ssl.TLSVersion.TLSv1_2:
            raise ConfigurationError(f"{key} names no TLS 1.2 suite but TLSv1.2 is enabled")
        return
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise ConfigurationError(f"{key}={text}: no cipher suite OpenSSL knows (OpenSSL or IANA "
                                 "names of TLS 1.2 suites)") from None
    known = {c["name"] for c in context.get_ciphers()}
    missing = [c for c in tls12 if c not in known]
    if missing:
        raise ConfigurationError(f"{key}: unknown cipher suite {missing[0]!r}")


# -- contexts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SslServerSettings:
    """A listener's TLS: its key store, the trust store for client certificates, client
    authentication, protocols and cipher suites (``props`` kept to build contexts again, for a
    reload). ``prefix``: ``ssl.`` or ``listener.name.<l>.ssl.`` resolution is the caller's."""

    key_store: KeyStore
    trust_store: TrustStore | None
    client_auth: str
    principal_mapper: SslPrincipalMapper
    props: Mapping[str, str] = field(repr=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> SslServerSettings:
        """From ``ssl.*`` settings (already resolved for one listener)."""
        key_store = KeyStore.from_properties(props)
        if key_store is None:
            raise ConfigurationError("an SSL listener needs a key store: ssl.keystore.location "
                                     "(or ssl.keystore.key and ssl.keystore.certificate.chain)")
        client_auth = (_get(props, "ssl.client.auth") or "none").lower()
        if client_auth not in CLIENT_AUTH_VALUES:
            raise ConfigurationError(f"ssl.client.auth={client_auth}: expected one of "
                                     f"{', '.join(CLIENT_AUTH_VALUES)}")
        settings = cls(key_store, TrustStore.from_properties(props), client_auth,
                       SslPrincipalMapper(_get(props, "ssl.principal.mapping.rules")), dict(props))
        settings.context()  # every mistake shows now, not at the first connection
        return settings

    @property
    def trusts_system_cas(self) -> bool:
        """Whether client certificates are verified against the system's CAs: asked for
        (``ssl.client.auth`` required or requested) with no trust store given. Any public CA
        then vouches for a client, and a certificate it issues with a chosen subject maps to
        that principal (Kafka does the same with the JVM's CAs)."""
        return self.client_auth != "none" and self.trust_store is None

    def context(self) -> ssl.SSLContext:
        """A new server-side context."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _apply_protocols_and_ciphers(context, self.props, "ssl.")
        self.key_store.load_into(context)
        context.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                               "none": ssl.CERT_NONE}[self.client_auth]
        if self.client_auth != "none":
            if self.trust_store is not None:
                self.trust_store.load_into(context)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return context


@dataclass(frozen=True)
class SslClientSettings:
    """The upstream side's TLS (a Kafka client's ``ssl.*`` settings)."""

    trust_store: TrustStore | None
    key_store: KeyStore | None
    check_hostname: bool
    props: Mapping[str, str] = field(repr=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> SslClientSettings:
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
        if algorithm.lower() not in ("https", ""):
            raise ConfigurationError(f"ssl.endpoint.identification.algorithm={algorithm}: expected "
                                     "https or an empty value")
        settings = cls(TrustStore.from_properties(props), KeyStore.from_properties(props),
                       algorithm.lower() == "https", dict(props))
        settings.context()
        return settings

    def context(self) -> ssl.SSLContext:
        """A new client-side context: the certificate chain is always verified."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _apply_protocols_and_ciphers(context, self.props, "ssl.")
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = self.check_hostname
        if self.trust_store is not None:
            self.trust_store.load_into(context)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.key_store is not None:
            self.key_store.load_into(context)
        return context


# -- the channel ---------------------------------------------------------------------------


class HandshakeStatus(enum.Enum):
    """What :meth:`TlsChannel.handshake_step` needs next."""

    DONE = "done"
    WANT_READ = "want-read"  # wait until the socket is readable, then call again
    WANT_WRITE = "want-write"  # wait until the socket is writable, then call again


DEFAULT_MAX_BUFFERED = 256 * 1024
DEFAULT_READ_SIZE = 64 * 1024
# Plaintext per SSLObject.write: at most 256 KiB (the gateway's CPU per GiB over TLS 8-12 % below
# 64 KiB writes), at most what fits under max_buffered, at least one TLS record.
_WRITE_CHUNK = 256 * 1024
_TLS_RECORD = 16 * 1024


class TlsChannel:
    """TLS over a connected non-blocking socket, with the socket methods a Send and a frame
    reader use (ssl.SSLObject over two MemoryBIOs: no blocking call, no thread of its own).

    The contract, for the connection loop:

    - :meth:`handshake_step` until it returns DONE (WANT_READ / WANT_WRITE: wait for that
      readiness of :meth:`fileno`, then call again); it raises :class:`TlsMismatchError` for a
      peer that does not speak TLS, :class:`CertificateVerificationError` for a certificate
      that does not verify (or none where one is required) and :class:`TlsError` for anything
      else. It never times out: the loop bounds the handshake.
    - :meth:`send` encrypts and returns how many plaintext bytes it took (the rest is the
      caller's, as with a socket). Ciphertext the socket could not take stays buffered; once
      that exceeds ``max_buffered`` it raises ``BlockingIOError`` without taking anything
      (one call takes at most what fits under ``max_buffered``, and at least one TLS record).
      After the last ``send`` of a response, call :meth:`flush` until it returns True (wait
      for writability between calls): :attr:`wants_write` says whether ciphertext is waiting.
    - :meth:`recv` / :meth:`recv_into` return decrypted bytes, ``b""`` / 0 at the end of the
      stream (close_notify or the peer closing the socket), and raise ``BlockingIOError`` when
      a socket read is needed and the socket has nothing. :meth:`pending` > 0 means bytes are
      already here (decrypted, or ciphertext read from the socket): call ``recv`` before
      waiting for readability, or it may wait for bytes that already arrived.
    - It is not a ``socket.socket``: a Send writes to it with ``send`` and never with
      ``os.sendfile`` (TLS costs the zero-copy path, as it does Kafka). Its methods may be
      called from a worker thread, one at a time (a lock keeps OpenSSL's object consistent).
    - :meth:`close` sends close_notify if the socket takes it at once, then closes the socket.
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, *, server_side: bool,
                 server_hostname: str | None = None, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 read_size: int = DEFAULT_READ_SIZE) -> None:
        if sock.gettimeout() != 0.0:
            raise LocalProtocolError("TlsChannel needs a non-blocking socket (setblocking(False))")
        self._sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=server_hostname)
        self.server_side = server_side
        self.max_buffered = max_buffered
        self.read_size = read_size
        # ciphertext taken from the BIO that the socket has not taken yet (a view: a partial
        # send moves along it instead of copying what is left)
        self._unsent = memoryview(b"")
        self._handshaken = False
        self._seen_first_byte = False
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        state = "open" if self._handshaken else "handshaking"
        return f"<TlsChannel {'server' if self.server_side else 'client'} fd={self.fileno()} {state}>"

    # -- the socket-like surface -------------------------------------------------------------

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def socket(self) -> socket.socket:
        return self._sock

    @property
    def handshake_done(self) -> bool:
        return self._handshaken

    @property
    def buffered_output(self) -> int:
        """Ciphertext bytes waiting for the socket."""
        return len(self._unsent) + self._out.pending

    @property
    def wants_write(self) -> bool:
        """Whether ciphertext waits for the socket (call :meth:`flush` when writable)."""
        return self.buffered_output > 0

    def pending(self) -> int:
        """Bytes already here: decrypted and not yet read, plus ciphertext read from the
        socket and not yet decrypted (see the class docstring)."""
        with self._lock:
            return self._ssl.pending() + self._in.pending

    def flush(self) -> bool:
        """Write buffered ciphertext to the socket as far as it takes it; True when none is left."""
        with self._lock:
            return self._flush()

    def _flush(self) -> bool:
        while True:
            if not self._unsent:
                if not self._out.pending:
                    return True
                self._unsent = memoryview(self._out.read())
            try:
                sent = self._sock.send(self._unsent)
            except (BlockingIOError, InterruptedError):
                return False
            self._unsent = self._unsent[sent:]
            if self._unsent:
                return False

    def handshake_step(self) -> HandshakeStatus:
        """Advance the handshake as far as possible without blocking (see the class docstring)."""
        with self._lock:
            while True:
                if self._handshaken:
                    return HandshakeStatus.DONE if self._flush() else HandshakeStatus.WANT_WRITE
                try:
                    self._ssl.do_handshake()
                except ssl.SSLWantReadError:
                    if not self._flush():
                        return HandshakeStatus.WANT_WRITE
                    if not self._read_socket(during_handshake=True):
                        return HandshakeStatus.WANT_READ
                    continue
                except ssl.SSLError as exc:
                    self._flush_quietly()  # let the peer see our alert
                    raise self._handshake_error(exc) from None
                self._handshaken = True

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Encrypt a prefix of ``data``; how many bytes were taken (see the class docstring)."""
        with self._lock:
            self._require_handshake()
            self._flush()
            if self.buffered_output > self.max_buffered:
                raise BlockingIOError(errno.EAGAIN, "TLS output buffer full: wait for the socket")
            view = memoryview(data)
            if not view.nbytes:
                return 0
            try:
                room = self.max_buffered - self.buffered_output
                taken = self._ssl.write(view[:min(_WRITE_CHUNK, max(_TLS_RECORD, room))])
            except ssl.SSLWantReadError:  # a post-handshake message must be read first
                self._flush()
                raise BlockingIOError(errno.EAGAIN, "TLS wants to read first") from None
            except ssl.SSLError as exc:
                raise TlsError(f"TLS write failed: {exc.reason or exc}") from None
            self._flush()
            return taken

    def recv(self, n: int) -> bytes:
        """Up to ``n`` decrypted bytes (``b""``: the stream ended)."""
        with self._lock:
            self._require_handshake()
            while True:
                try:
                    return self._ssl.read(n)
                except ssl.SSLWantReadError:
                    self._flush()
                    if not self._read_socket(during_handshake=False):
                        raise BlockingIOError(errno.EAGAIN, "no TLS data yet") from None
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return b""
                except ssl.SSLError as exc:
                    raise TlsError(f"TLS read failed: {exc.reason or exc}") from None

    def recv_into(self, buffer: bytearray | memoryview, nbytes: int = 0) -> int:
        """Decrypted bytes into ``buffer`` (at most ``nbytes`` when given); 0: the stream ended."""
        view = memoryview(buffer).cast("B")
        size = nbytes or view.nbytes
        with self._lock:
            self._require_handshake()
            while True:
                try:
                    return cast(int, self._ssl.read(size, view))
                except ssl.SSLWantReadError:
                    self._flush()
                    if not self._read_socket(during_handshake=False):
                        raise BlockingIOError(errno.EAGAIN, "no TLS data yet") from None
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return 0
                except ssl.SSLError as exc:
                    raise TlsError(f"TLS read failed: {exc.reason or exc}") from None

    def close(self) -> None:
        """Send close_notify if the socket takes it now, then close the socket (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._handshaken:
                with contextlib.suppress(ssl.SSLError, OSError):
                    self._ssl.unwrap()
                self._flush_quietly()
            self._sock.close()

    # -- what the handshake established ------------------------------------------------------

    def peer_certificate(self) -> bytes | None:
        """The peer's certificate (DER) when it presented one that verified, else None."""
        return self._ssl.getpeercert(binary_form=True) if self._handshaken else None

    def principal(self, mapper: SslPrincipalMapper) -> KafkaPrincipal:
        """The peer's Kafka principal by its certificate (``User:ANONYMOUS`` without one)."""
        return mapper.principal(self.peer_certificate())

    def version(self) -> str | None:
        return self._ssl.version()

    def cipher(self) -> tuple[str, str, int] | None:
        return self._ssl.cipher()

    # -- internals ---------------------------------------------------------------------------

    def _require_handshake(self) -> None:
        if not self._handshaken:
            raise LocalProtocolError("TlsChannel: finish handshake_step() before reading or writing")

    def _read_socket(self, *, during_handshake: bool) -> bool:
        """Feed one socket read to OpenSSL; False when the socket has nothing now."""
        try:
            data = self._sock.recv(self.read_size)
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionError as exc:
            if during_handshake:
                raise TlsError(f"the connection failed during the TLS handshake ({exc.strerror})") from None
            self._in.write_eof()
            return True
        if not data:
            if during_handshake:
                raise self._eof_during_handshake()
            self._in.write_eof()
            return True
        if self.server_side and not self._seen_first_byte:
            self._seen_first_byte = True
            if data[0] != 0x16:  # a TLS connection begins with a handshake record
                raise TlsMismatchError("the peer does not speak TLS: its first bytes are not a TLS "
                                       "handshake (a PLAINTEXT client on an SSL listener?)")
        self._in.write(data)
        return True

    def _eof_during_handshake(self) -> TlsError:
        if self.server_side:
            return TlsError("the client closed the connection during the TLS handshake")
        return TlsMismatchError("the server closed the connection during the TLS handshake: is it "
                                "a PLAINTEXT listener (or does it refuse our certificate)?")

    def _handshake_error(self, exc: ssl.SSLError) -> TlsError:
        if isinstance(exc, ssl.SSLCertVerificationError):
            whose = "client" if self.server_side else "server"
            return CertificateVerificationError(f"the {whose}'s certificate does not verify: "
                                                f"{exc.verify_message}")
        reason = (exc.reason or "").upper()
        if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
                      "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
            return TlsMismatchError("the peer does not speak TLS (a PLAINTEXT port or client?): "
                                    f"{exc.reason}")
        if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE",):
            return CertificateVerificationError("the client presented no certificate "
                                                "(ssl.client.auth=required)")
        if "CERTIFICATE" in reason and "ALERT" in reason:
            return CertificateVerificationError(f"the peer refused our certificate ({exc.reason})")
        return TlsError(f"TLS handshake failed: {exc.reason or exc}")

    def _flush_quietly(self) -> None:
        with contextlib.suppress(OSError):
            self._flush()
