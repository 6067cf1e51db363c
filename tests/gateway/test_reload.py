"""A reload (SIGHUP; ``Gateway.apply_settings`` with the files read again) in front of
``lazyconv serve``: renewed certificates and changed SASL users reach new connections while
an open one goes on; a reload that would change the listeners, or whose files no longer load,
changes nothing and says why in one line; other changed settings are named as needing a
restart. The same through the command and a real SIGHUP: tests/cli/test_gateway_cli.py."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.gateway._settings import GatewaySettings
from lazyconv.net._sasl import PlainCredentials
from lazyconv.net._secure_connection import ListenerSecurity, ListenerUsers
from lazyconv.net._session import Session
from tests.gateway.conftest import GatewayThread
from tests.net.secure_support import (
    Material,
    RawClient,
    client_context,
    listener_specs,
    make_material,
)
from tests.server_thread import ServerThread

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("reload-material"))


def write_config(path: Path, material: Material, users: dict[str, str], *,
                 keystore: Path | None = None, extra: str = "") -> None:
    jaas = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    path.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} required {jaas};\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore or material.server_keystore_pem}\n"
        "gateway.identity=gateway\n" + extra)


@pytest.fixture
def gateway(serve_upstream: ServerThread, material: Material,
            tmp_path: Path) -> Iterator[tuple[GatewayThread, Path, Path]]:
    config, upstream = tmp_path / "gateway.properties", tmp_path / "upstream.properties"
    write_config(config, material, {"alice": "first-secret"})
    upstream.write_text(f"bootstrap.servers={serve_upstream.bootstrap}\n")
    thread = GatewayThread(None, settings=GatewaySettings.load(config, upstream))
    try:
        yield thread, config, upstream
    finally:
        thread.stop()


def reload(thread: GatewayThread, config: Path, upstream: Path) -> None:
    """What the command's SIGHUP does, on the gateway's loop."""
    gateway = thread.gateway

    async def run() -> None:
        gateway.on_reload(lambda: gateway.apply_settings(GatewaySettings.load(config, upstream)))
        gateway.reload()
        gateway._reload_hooks.clear()

    asyncio.run_coroutine_threadsafe(run(), thread.loop).result(10)


def logs_in(thread: GatewayThread, user: str, password: str) -> bool:
    with RawClient(thread.gateway.listeners[0].port) as client:
        return client.authenticate("PLAIN", user, password)


def server_serial(thread: GatewayThread, material: Material) -> int:
    with RawClient(thread.gateway.listeners[1].port, tls=client_context(material)) as client:
        der = client.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
    from cryptography import x509

    return x509.load_der_x509_certificate(der).serial_number


def test_new_users_and_a_renewed_certificate_reach_new_connections(
        gateway: tuple[GatewayThread, Path, Path], material: Material, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    thread, config, upstream = gateway
    caplog.set_level(logging.INFO, logger="lazyconv")
    assert logs_in(thread, "alice", "first-secret")
    assert not logs_in(thread, "bob", "bob-secret")
    before = server_serial(thread, material)
    renewed = material.ca.issue_cert("localhost", "127.0.0.1", common_name="localhost")
    keystore = tmp_path / "renewed.pem"
    keystore.write_bytes(renewed.private_key_pem.bytes()
                         + b"".join(c.bytes() for c in renewed.cert_chain_pems))
    with RawClient(thread.gateway.listeners[0].port) as open_before:
        assert open_before.authenticate("PLAIN", "alice", "first-secret")
        write_config(config, material, {"alice": "second-secret", "bob": "bob-secret"},
                     keystore=keystore)
        reload(thread, config, upstream)
        # the connection accepted before goes on as it was
        assert open_before.metadata() is not None
    assert not logs_in(thread, "alice", "first-secret")
    assert logs_in(thread, "alice", "second-secret")
    assert logs_in(thread, "bob", "bob-secret")
    after = server_serial(thread, material)
    assert after != before
    lines = [r.getMessage() for r in caplog.records if "reload" in r.getMessage()]
    assert any("reloaded the security of 2 listener(s)" in line for line in lines), lines
    assert not any("take a restart" in line for line in lines), lines
    assert all("second-secret" not in line and "bob-secret" not in line for line in caplog.messages)


def test_a_reauthentication_checks_the_reloaded_credentials(
        gateway: tuple[GatewayThread, Path, Path], material: Material) -> None:
    """KIP-368 with connections.max.reauth.ms: a connection accepted before a reload that
    changed alice's password re-authenticates with the new one and goes on, and one that
    re-authenticates with the old one is refused and closed (it re-authenticated for as long as
    it stayed connected: the listener's users of its accepting were kept), as on Kafka, whose
    re-authentication is a new authenticator over the credentials of the moment."""
    thread, config, upstream = gateway
    reauth = "connections.max.reauth.ms=60000\n"
    write_config(config, material, {"alice": "first-secret"}, extra=reauth)
    reload(thread, config, upstream)  # the session lifetime, for the connections below
    with RawClient(thread.gateway.listeners[0].port) as knows_new, \
            RawClient(thread.gateway.listeners[0].port) as knows_old:
        for client in (knows_new, knows_old):
            assert client.authenticate("PLAIN", "alice", "first-secret")
        write_config(config, material, {"alice": "second-secret"}, extra=reauth)
        reload(thread, config, upstream)
        assert knows_new.authenticate("PLAIN", "alice", "second-secret")
        assert knows_new.metadata() is not None
        assert not knows_old.authenticate("PLAIN", "alice", "first-secret")
        assert knows_old.closed_by_server()


def test_changed_listeners_change_nothing(gateway: tuple[GatewayThread, Path, Path],
                                          material: Material,
                                          caplog: pytest.LogCaptureFixture) -> None:
    thread, config, upstream = gateway
    caplog.set_level(logging.INFO, logger="lazyconv")
    write_config(config, material, {"alice": "second-secret"})
    config.write_text(config.read_text().replace("SSL://127.0.0.1:0", "SSL://127.0.0.1:19999"))
    reload(thread, config, upstream)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "the listeners changed" in errors[0], errors
    assert "takes a restart; nothing was reloaded" in errors[0]
    assert logs_in(thread, "alice", "first-secret")  # the users stay as they were


def test_a_file_that_no_longer_loads_keeps_the_settings(gateway: tuple[GatewayThread, Path, Path],
                                                        material: Material, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    thread, config, upstream = gateway
    caplog.set_level(logging.INFO, logger="lazyconv")
    before = server_serial(thread, material)
    write_config(config, material, {"alice": "second-secret"}, keystore=tmp_path / "missing.pem")
    reload(thread, config, upstream)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("reload: ") and "missing.pem" in errors[0], errors
    assert not any(r.exc_info for r in caplog.records)  # one line, no traceback
    assert logs_in(thread, "alice", "first-secret")
    assert server_serial(thread, material) == before


def test_other_changed_settings_are_named_as_needing_a_restart(
        gateway: tuple[GatewayThread, Path, Path], material: Material,
        caplog: pytest.LogCaptureFixture) -> None:
    thread, config, upstream = gateway
    caplog.set_level(logging.INFO, logger="lazyconv")
    write_config(config, material, {"alice": "second-secret"},
                 extra="gateway.chunk.size=262144\ngateway.fetch.ahead.bytes=0\n")
    reload(thread, config, upstream)
    warnings = [r.getMessage() for r in caplog.records if "take a restart" in r.getMessage()]
    assert warnings == ["changed settings that take a restart, not applied: chunk_size, "
                        "fetch_ahead_bytes"], warnings
    assert logs_in(thread, "alice", "second-secret")  # the security was applied all the same
    assert thread.gateway.settings is not None and thread.gateway.settings.chunk_size != 262144


def test_a_gateway_without_settings_has_nothing_to_reload(serve_upstream: ServerThread,
                                                          gateway_factory) -> None:
    thread = gateway_factory(serve_upstream.bootstrap)
    settings = GatewaySettings.load(None, None, upstream_overrides={
        "bootstrap.servers": serve_upstream.bootstrap})
    with pytest.raises(ConfigurationError, match="not started from settings"):
        thread.gateway.apply_settings(settings)


def test_a_principal_given_upstream_credentials_is_admitted_after_a_reload(
        material: Material, tmp_path: Path) -> None:
    """Gateway identity mode on a SASL upstream (serve's SASL_PLAINTEXT listener): bob, with
    no upstream credentials, is refused; once the reloaded file maps him to his own, he is
    admitted and the upstream serves him; alice's connection from before goes on."""
    from tests.net.secure_support import USERS, listener_specs

    (tmp_path / "logdir").mkdir()
    upstream_server = ServerThread(tmp_path / "logdir", specs=[listener_specs(material)[1]])
    config, upstream = tmp_path / "gateway.properties", tmp_path / "upstream.properties"
    upstream.write_text(f"bootstrap.servers=127.0.0.1:{upstream_server.port}\n"
                        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")

    def write(mapped: list[str]) -> None:
        lines = [f"gateway.upstream.credentials.{u}.{k}={v}" for u in mapped
                 for k, v in (("sasl.mechanism", "PLAIN"), ("username", u), ("password", USERS[u]))]
        write_config(config, material, {"alice": "alice-gw", "bob": "bob-gw"},
                     extra="\n".join(lines) + "\n")

    write(["alice"])
    thread = GatewayThread(None, settings=GatewaySettings.load(config, upstream))
    try:
        assert not logs_in(thread, "bob", "bob-gw")
        with RawClient(thread.gateway.listeners[0].port) as alice:
            assert alice.authenticate("PLAIN", "alice", "alice-gw")
            write(["alice", "bob"])
            reload(thread, config, upstream)
            assert alice.metadata() is not None
        with RawClient(thread.gateway.listeners[0].port) as bob:
            assert bob.authenticate("PLAIN", "bob", "bob-gw")
            answer = bob.metadata()
            assert answer is not None and answer["brokers"]
    finally:
        thread.stop()
        upstream_server.stop()


@pytest.mark.parametrize("change", ["fallback", "upstream protocol"])
def test_a_change_the_credentials_depend_on_changes_nothing(
        gateway: tuple[GatewayThread, Path, Path], material: Material,
        caplog: pytest.LogCaptureFixture, change: str) -> None:
    """New users or upstream credentials applied under another fallback, or for an upstream
    that is not SASL yet, would admit or refuse the wrong principals: the reload is refused
    whole. (A change of identity mode changes the listeners too: refused as such.)"""
    thread, config, upstream = gateway
    caplog.set_level(logging.INFO, logger="lazyconv")
    if change == "fallback":
        write_config(config, material, {"alice": "second-secret"},
                     extra="gateway.upstream.credentials.fallback=none\n")
        expected = "credentials_fallback changed"
    else:
        write_config(config, material, {"alice": "second-secret"}, extra=(
            "gateway.upstream.credentials.bob.sasl.mechanism=PLAIN\n"
            "gateway.upstream.credentials.bob.username=bob\n"
            "gateway.upstream.credentials.bob.password=bob-upstream\n"))
        upstream.write_text(upstream.read_text() + "security.protocol=SASL_PLAINTEXT\n"
                            "sasl.mechanism=PLAIN\n")
        expected = "the upstream's security.protocol changed"
    reload(thread, config, upstream)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and expected in errors[0], errors
    assert errors[0].endswith("that takes a restart; nothing was reloaded")
    assert logs_in(thread, "alice", "first-secret")
    assert not logs_in(thread, "alice", "second-secret")


class _RotatingUsers(ListenerUsers):
    """The upstream's PLAIN check against passwords the test changes (a password rotated on the
    cluster), counting each user's refused logins."""

    def __init__(self, passwords: dict[str, str]) -> None:
        self.passwords = passwords
        self.refused: Counter[str] = Counter()

    async def check_plain(self, credentials: PlainCredentials, session: Session,
                          security: ListenerSecurity) -> bool:
        ok = self.passwords.get(credentials.username) == credentials.password
        if not ok:
            self.refused[credentials.username] += 1
        return ok


def test_a_reloaded_upstream_password_is_what_new_clients_log_in_with(
        material: Material, tmp_path: Path, served_fixtures: Path) -> None:
    """alice's upstream password rotated on the cluster and in the gateway's file, reloaded
    while a client of hers from before stays connected: the metadata view of her upstream user,
    which that client keeps alive, logged in again with the old password once its connection
    went (a broker restart), and a client of hers accepted after the reload was answered from
    that view's stale cache (found by a review). A client accepted after a reload has a view of
    its own credentials; the one from before keeps what it was accepted with."""
    users = _RotatingUsers({"alice": "alice-old"})
    upstream_server = ServerThread(served_fixtures, specs=[listener_specs(material)[1]],
                                   authenticator=users)
    config, upstream = tmp_path / "gateway.properties", tmp_path / "upstream.properties"
    upstream.write_text(f"bootstrap.servers=127.0.0.1:{upstream_server.port}\n"
                        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")

    def write(password: str) -> None:
        write_config(config, material, {"alice": "alice-gw"}, extra=(
            "gateway.upstream.credentials.alice.sasl.mechanism=PLAIN\n"
            "gateway.upstream.credentials.alice.username=alice\n"
            f"gateway.upstream.credentials.alice.password={password}\n"))

    write("alice-old")
    thread = GatewayThread(None, settings=GatewaySettings.load(config, upstream))
    cluster = thread.gateway.cluster

    async def drop_metadata_connections() -> None:  # what a broker restart does to them
        for view in cluster.views.values():
            view.close()

    try:
        with RawClient(thread.gateway.listeners[0].port) as before:
            assert before.authenticate("PLAIN", "alice", "alice-gw")
            answer = before.metadata()
            assert answer is not None and answer["topics"]
            users.passwords["alice"] = "alice-new"
            write("alice-new")
            reload(thread, config, upstream)
            asyncio.run_coroutine_threadsafe(drop_metadata_connections(), thread.loop).result(10)
            with RawClient(thread.gateway.listeners[0].port) as after:
                assert after.authenticate("PLAIN", "alice", "alice-gw")
                answer = after.metadata()
                assert answer is not None and answer["topics"]
            assert users.refused["alice"] == 0
    finally:
        thread.stop()
        upstream_server.stop()
