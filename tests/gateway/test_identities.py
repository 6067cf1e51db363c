"""Which upstream identity a client gets, in front of ``lazyconv serve`` as a SASL cluster (its
SASL_PLAINTEXT listener, users alice and bob): the gateway's identity modes and their refusals,
checked by the principals the upstream's own connections authenticated as."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.errors import AuthenticationError
from lazyconv.gateway._settings import GatewaySettings
from lazyconv.net._sasl import PlainCredentials
from lazyconv.net._secure_connection import ListenerSecurity, ListenerUsers
from lazyconv.net._session import Session
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol._connection import ClientConnection
from tests.gateway.conftest import GatewayThread
from tests.net.secure_support import USERS, Material, RawClient, listener_specs, make_material
from tests.server_thread import ServerThread

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("identities-material"))


@pytest.fixture
def sasl_upstream(material: Material, tmp_path: Path) -> Iterator[ServerThread]:
    """serve with one SASL_PLAINTEXT listener (PLAIN users alice and bob)."""
    (tmp_path / "logdir").mkdir()
    server = ServerThread(tmp_path / "logdir", specs=[listener_specs(material)[1]])
    yield server
    server.stop()


def start(upstream: ServerThread, folder: Path, extra: str) -> GatewayThread:
    """A gateway in identity mode ``gateway`` with a SASL_PLAINTEXT listener (PLAIN user carol)
    and a PLAINTEXT one; upstream, bob is the service identity and alice is mapped to herself."""
    config, upstream_config = folder / "gateway.properties", folder / "upstream.properties"
    upstream_config.write_text(
        f"bootstrap.servers={upstream.bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_MODULE} required username=\"bob\" "
        f"password=\"{USERS['bob']}\";\n")
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} required "
        "user_carol=\"carol-gw\";\n"
        "gateway.identity=gateway\n"
        "gateway.upstream.credentials.alice.username=alice\n"
        f"gateway.upstream.credentials.alice.password={USERS['alice']}\n" + extra)
    return GatewayThread(None, settings=GatewaySettings.load(config, upstream_config))


def upstream_principals(upstream: ServerThread, wanted: str | None = None) -> list[str]:
    """Who the upstream's connections authenticated as (waiting up to 2 s for ``wanted``)."""
    deadline = time.monotonic() + 2
    while True:
        found = sorted(s.principal for s in list(upstream.server.sessions.values())
                       if s.principal != "User:ANONYMOUS")
        if wanted is None or wanted in found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


@pytest.mark.parametrize("mapped", ["nobody", "ANONYMOUS"])
def test_a_plaintext_client_is_refused_without_upstream_credentials_of_its_own(
        sasl_upstream: ServerThread, tmp_path: Path, mapped: str) -> None:
    """A PLAINTEXT listener's clients are User:ANONYMOUS: with principals mapped and no
    fallback (gateway.upstream.credentials.fallback=none, the default then) ANONYMOUS is
    refused as carol is (it was served as the service identity, bob); mapped, it is its
    user. An SSL listener without client certificates was refused already."""
    extra = "" if mapped == "nobody" else (
        "gateway.upstream.credentials.ANONYMOUS.username=alice\n"
        f"gateway.upstream.credentials.ANONYMOUS.password={USERS['alice']}\n")
    gateway = start(sasl_upstream, tmp_path, extra)
    try:
        assert gateway.gateway.settings is not None
        assert gateway.gateway.settings.credentials_fallback == "none"
        with RawClient(gateway.gateway.listeners[0].port) as carol:
            assert not carol.authenticate("PLAIN", "carol", "carol-gw")
        assert upstream_principals(sasl_upstream) == ["User:bob"]  # the gateway's own
        with RawClient(gateway.gateway.listeners[1].port) as anonymous:
            answer = anonymous.metadata()
            if mapped == "nobody":
                assert answer is None and anonymous.closed_by_server()
                assert list(gateway.gateway.cluster.views) == ["User:bob"]
            else:
                assert answer is not None and answer["brokers"]
                assert upstream_principals(sasl_upstream, "User:alice") == ["User:alice",
                                                                            "User:bob"]
    finally:
        gateway.stop()


def test_a_plaintext_client_gets_the_service_identity_with_fallback_service(
        sasl_upstream: ServerThread, tmp_path: Path) -> None:
    """What fallback=service says: every principal without credentials, ANONYMOUS too."""
    gateway = start(sasl_upstream, tmp_path, "gateway.upstream.credentials.fallback=service\n")
    try:
        with RawClient(gateway.gateway.listeners[1].port) as anonymous:
            answer = anonymous.metadata()
            assert answer is not None and answer["brokers"]
            assert anonymous.api_versions() is not None  # still served
    finally:
        gateway.stop()


def metadata_frame() -> bytes:
    """A Metadata v1 request frame as the front door takes it (without its size)."""
    _, data = ClientConnection("no-loop", max_response_size=1 << 20).send_request(metadata.SPEC, 1, {"topics": None})
    return bytes(data[4:])


@pytest.mark.parametrize("mode", ["gateway", "passthrough"])
def test_a_principal_without_an_identity_gets_none_without_a_connection_loop(
        sasl_upstream: ServerThread, tmp_path: Path, mode: str) -> None:
    """A caller that never asked admit() (no connection loop: the front door called directly)
    with carol, who has no upstream credentials under fallback=none, or any client that did not
    pass passthrough's PLAIN check: refused with an AuthenticationError, where it was served as
    the service identity (bob)."""
    gateway = start(sasl_upstream, tmp_path, "")
    try:
        identities = gateway.gateway.identities
        identities.mode = mode
        handler = gateway.gateway.handler
        assert handler is not None
        session = Session(handler.listeners[0], principal="User:carol")

        async def ask() -> object:
            return await gateway.gateway.server.front_door.answer(metadata_frame(), session)

        with pytest.raises(AuthenticationError, match=r"^User:carol is not admitted: "):
            asyncio.run_coroutine_threadsafe(ask(), gateway.loop).result(10)
        assert session.state is None
    finally:
        gateway.stop()


def test_a_session_the_handler_refuses_is_closed_as_refused(
        sasl_upstream: ServerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The connection loop's side: a principal admit() let through but the handler refuses
    (here admit() is bypassed) is closed with the refusal's one line, not served as the service
    identity, nor closed as an internal error."""
    caplog.set_level(logging.INFO, logger="lazyconv")
    gateway = start(sasl_upstream, tmp_path, "")
    try:
        gateway.gateway.server.authenticator = _AdmitsEveryone()
        with RawClient(gateway.gateway.listeners[1].port) as anonymous:
            assert anonymous.metadata() is None and anonymous.closed_by_server()
        assert list(gateway.gateway.cluster.views) == ["User:bob"]  # the gateway's own only
    finally:
        gateway.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("User:ANONYMOUS is not admitted: no upstream credentials for principal "
               "'ANONYMOUS'" in line for line in warnings), warnings
    assert not any("internal error" in line for line in warnings), warnings


class _AdmitsEveryone:
    async def check_plain(self, credentials: object, session: Session, security: object) -> bool:
        return False

    def admit(self, session: Session) -> str | None:
        return None


class _CountingUsers(ListenerUsers):
    """serve's PLAIN check, counting each user's logins (the gateway's upstream ones)."""

    def __init__(self) -> None:
        self.logins: Counter[str] = Counter()

    async def check_plain(self, credentials: PlainCredentials, session: Session,
                          security: ListenerSecurity) -> bool:
        self.logins[credentials.username] += 1
        return await super().check_plain(credentials, session, security)


def test_a_passthrough_reauthentication_as_another_user_never_logs_in_upstream(
        material: Material, tmp_path: Path) -> None:
    """KIP-368 in passthrough mode: a client authenticated as alice that re-authenticates as bob
    is refused (the principal may not change) before the gateway checks bob's password
    upstream, so the cluster sees no login as bob (it saw one, then the refusal came); a
    re-authentication as alice herself is checked upstream as before."""
    (tmp_path / "logdir").mkdir()
    users = _CountingUsers()
    upstream = ServerThread(tmp_path / "logdir", specs=[listener_specs(material)[1]],
                            authenticator=users)
    config, upstream_config = tmp_path / "gateway.properties", tmp_path / "upstream.properties"
    upstream_config.write_text(f"bootstrap.servers={upstream.bootstrap}\n"
                               "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    config.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n"
                      "connections.max.reauth.ms=60000\ngateway.identity=passthrough\n")
    gateway = GatewayThread(None, settings=GatewaySettings.load(config, upstream_config))
    try:
        port = gateway.gateway.listeners[0].port
        with RawClient(port) as client:
            assert client.authenticate("PLAIN", "alice", USERS["alice"])
            assert client.authenticate("PLAIN", "alice", USERS["alice"])  # KIP-368, herself
            assert client.metadata() is not None
        logins_as_alice = users.logins["alice"]
        assert logins_as_alice >= 2
        with RawClient(port) as client:
            assert client.authenticate("PLAIN", "alice", USERS["alice"])
            assert not client.authenticate("PLAIN", "bob", USERS["bob"])
            assert client.closed_by_server()
        assert users.logins["bob"] == 0
        assert users.logins["alice"] == logins_as_alice + 1
    finally:
        gateway.stop()
        upstream.stop()
