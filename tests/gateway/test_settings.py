"""GatewaySettings from --config, --upstream-config and command-line overrides: Kafka's names,
the identity modes' rules, unknown keys with a hint, secrets never from the command line and
never in --check-config's listing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trustme

from lazyconv.errors import ConfigurationError
from lazyconv.gateway._settings import GATEWAY_KEYS, UPSTREAM_KEYS, GatewaySettings
from lazyconv.net._scram_credentials import add_scram_user

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(folder / "ks.pem"))
    return {"ca": folder / "ca.pem", "ks": folder / "ks.pem"}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def gateway_mode(folder: Path, certs: dict[str, Path]) -> tuple[Path, Path]:
    add_scram_user(folder / "scram.json", "alice", "alice-secret")
    config = write(folder, "gateway.properties", f"""
listeners=SASL_SSL://0.0.0.0:9094,PLAINTEXT://127.0.0.1:9092
ssl.keystore.type=PEM
ssl.keystore.location={certs['ks']}
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_MODULE} required user_alice="alice-secret" user_bob="${{env:BOB_PW}}";
gateway.identity=gateway
gateway.scram.credentials.file=scram.json
gateway.upstream.credentials.alice.sasl.mechanism=SCRAM-SHA-512
gateway.upstream.credentials.alice.username=alice
gateway.upstream.credentials.alice.password=${{env:ALICE_UPSTREAM}}
gateway.upstream.credentials.bob.username=bob
gateway.upstream.credentials.bob.password=${{file:bob.pw}}
gateway.upstream.credentials.CN\\=carol,OU\\=eng.username=carol
gateway.upstream.credentials.CN\\=carol,OU\\=eng.password=carol-upstream
gateway.client.id.prefix=gw-
connections.max.idle.ms=60000
""")
    write(folder, "bob.pw", "bob-upstream\n")
    upstream = write(folder, "upstream.properties", f"""
bootstrap.servers=localhost:9096
security.protocol=SASL_SSL
ssl.truststore.type=PEM
ssl.truststore.location={certs['ca']}
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config={SCRAM_MODULE} required username="gateway" password="${{env:GW_PW}}";
""")
    return config, upstream


ENV = {"BOB_PW": "bob-secret", "ALICE_UPSTREAM": "alice-upstream", "GW_PW": "gw-secret"}


def test_gateway_identity(tmp_path: Path, certs: dict[str, Path]) -> None:
    config, upstream = gateway_mode(tmp_path, certs)
    settings = GatewaySettings.load(config, upstream, environ=ENV)
    assert settings.identity == "gateway" and settings.client_id_prefix == "gw-"
    assert [lc.name for lc in settings.listeners] == ["SASL_SSL", "PLAINTEXT"]
    assert settings.listeners[0].sasl.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert settings.scram_credentials_file == tmp_path / "scram.json"
    assert settings.upstream.bootstrap_servers == ("localhost:9096",)
    assert settings.upstream.security_protocol == "SASL_SSL" and settings.upstream.ssl is not None
    assert settings.upstream.ssl.check_hostname
    assert settings.upstream.credentials.username == "gateway"
    assert settings.upstream.credentials.password == "gw-secret"
    alice = settings.upstream_credentials_for("alice")
    assert (alice.mechanism, alice.username, alice.password) == ("SCRAM-SHA-512", "alice", "alice-upstream")
    bob = settings.upstream_credentials_for("bob")
    assert (bob.mechanism, bob.password) == ("PLAIN", "bob-upstream")
    # a certificate principal (DEFAULT mapping): its "=" escaped in the key, as Java's syntax wants
    assert settings.upstream_credentials_for("CN=carol,OU=eng").username == "carol"
    # credentials are mapped, so a principal without them is refused unless fallback=service
    assert settings.credentials_fallback == "none" and settings.upstream_credentials_for("dave") is None
    assert settings.connections_max_idle_ms == 60000
    assert settings.socket_request_max_bytes == 104857600


def test_describe_masks_every_secret(tmp_path: Path, certs: dict[str, Path]) -> None:
    config, upstream = gateway_mode(tmp_path, certs)
    settings = GatewaySettings.load(config, upstream, environ=ENV)
    text = settings.describe()
    for secret in ("alice-secret", "bob-secret", "alice-upstream", "bob-upstream", "gw-secret",
                   "carol-upstream"):
        assert secret not in text, secret
    assert "user_alice=\"[hidden]\"" in text
    assert "gateway.upstream.credentials.alice.password=[hidden]" in text
    assert "security.protocol=SASL_SSL" in text and "request.timeout.ms=30000  # default" in text
    assert "#   SASL_SSL SASL_SSL 0.0.0.0:9094 SCRAM-SHA-512,PLAIN" in text
    assert "gw-secret" in settings.describe(masked=False)
    assert "gw-secret" not in repr(settings)


def test_passthrough(tmp_path: Path, certs: dict[str, Path]) -> None:
    config = write(tmp_path, "gw.properties", f"""
listeners=SASL_SSL://:9094
ssl.keystore.location={certs['ks']}
sasl.enabled.mechanisms=PLAIN
gateway.identity=passthrough
""")
    upstream = write(tmp_path, "up.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                                                f"ssl.truststore.location={certs['ca']}\n")
    settings = GatewaySettings.load(config, upstream, upstream_overrides={
        "bootstrap.servers": "127.0.0.1:9096"})
    assert settings.identity == "passthrough" and settings.listeners[0].sasl.plain_users is None
    assert settings.upstream.credentials is None


@pytest.mark.parametrize(("gateway_text", "upstream_text", "message"), [
    ("listeners=PLAINTEXT://:9092\ngateway.identity=passthrough\n",
     "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", r"listener PLAINTEXT \(PLAINTEXT\) must be SASL"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
     "gateway.scram.credentials.file=/x\ngateway.identity=passthrough\n",
     "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "cannot be replayed"),
    ("listeners=SASL_PLAINTEXT://:9094\nsasl.enabled.mechanisms=PLAIN\ngateway.identity=passthrough\n",
     "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n", "sasl.mechanism=PLAIN"),
    ("listeners=PLAINTEXT://:9092\n", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n",
     "needs credentials"),
    ("listeners=PLAINTEXT://:9092\ngateway.identity=proxy\n", "", "'proxy' is not one of passthrough"),
    ("listeners=PLAINTEXT://:9092\nssl.keystore.locaton=/x\n", "",
     r"gw.properties:2 ssl.keystore.locaton: unknown setting \(did you mean 'ssl.keystore.location'\?\)"),
    ("listeners=PLAINTEXT://:9092\nlistener.name.x.ssl.bogus=1\n", "", "per-listener settings"),
    ("listeners=PLAINTEXT://:9092\ngateway.upstream.credentials.alice.secret=x\n", "", "unknown setting"),
    ("listeners=PLAINTEXT://:9092\n", "bootstrap.server=x:1\n",
     r"up.properties:1 bootstrap.server: unknown setting \(did you mean 'bootstrap.servers'\?\)"),
    ("listeners=PLAINTEXT://:9092\n", "security.protocol=PLAINTEXT\nsasl.mechanism=PLAIN\n",
     "SASL settings are given but security.protocol is PLAINTEXT"),
    ("listeners=PLAINTEXT://:9092\n", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
     f"sasl.jaas.config={SCRAM_MODULE} required username=a password=b;\n", "needs " + PLAIN_MODULE),
    ("listeners=PLAINTEXT://:9092\n", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
     f"sasl.jaas.config={PLAIN_MODULE} required username=a;\n", "no password= option"),
    ("listeners=PLAINTEXT://:9092\ngateway.upstream.credentials.alice.password=x\n",
     "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "principal 'alice'.*username and a password"),
    ("listeners=PLAINTEXT://:9092\nconnections.max.idle.ms=-5\n", "", "must be at least 1"),
    # what the gateway refuses at start, refused here too (--check-config)
    ("listeners=PLAINTEXT://:9092\ngateway.chunk.size=4096\n", "",
     r"gw.properties:2 gateway.chunk.size: chunk size must be between 16384 and 1048576"),
    ("listeners=PLAINTEXT://:9092\ngateway.chunk.size=2097152\n", "", "must be between 16384"),
    ("listeners=PLAINTEXT://:9092\nqueued.max.request.bytes=2000\n", "",
     "gw.properties:2 queued.max.request.bytes: 2000 is below socket.request.max.bytes"),
    ("listeners=PLAINTEXT://:9092\n", "metadata.max.age.ms=0\n", "up.properties:1 "
     "metadata.max.age.ms: must be at least 1"),
])
def test_errors(tmp_path: Path, gateway_text: str, upstream_text: str, message: str) -> None:
    config = write(tmp_path, "gw.properties", gateway_text)
    upstream = write(tmp_path, "up.properties", upstream_text)
    with pytest.raises(ConfigurationError, match=message):
        GatewaySettings.load(config, upstream, upstream_overrides={"bootstrap.servers": "h:1"}
                             if "bootstrap" not in upstream_text else None)


def test_relative_paths_of_a_config_named_with_a_tilde(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/gw.properties`` (the Python API, ``--config=~/...``, a systemd unit): its relative
    paths are its folder's, not those of a folder named ``~`` in the working directory (found
    by a review)."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    write(home, "gw.properties", "gateway.log.file=gw.log\ngateway.scram.credentials.file=scram.json\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    settings = GatewaySettings.load("~/gw.properties", upstream_overrides={"bootstrap.servers": "h:1"})
    assert (settings.log_file, settings.scram_credentials_file) == (home / "gw.log", home / "scram.json")


def test_values_are_trimmed_as_kafka_trims_them(tmp_path: Path) -> None:
    """Kafka's ConfigDef trims every value; a trailing blank was refused in a choice and kept
    in a path or a string (found by a review)."""
    config = write(tmp_path, "gw.properties", f"gateway.log.file={tmp_path}/gw.log \n"
                   "gateway.client.id.prefix=team- \ngateway.identity=gateway\t\n")
    upstream = write(tmp_path, "up.properties", "bootstrap.servers=h:1\nsecurity.protocol=PLAINTEXT \n")
    settings = GatewaySettings.load(config, upstream)
    assert (settings.log_file, settings.client_id_prefix) == (tmp_path / "gw.log", "team-")
    assert (settings.identity, settings.upstream.security_protocol) == ("gateway", "PLAINTEXT")


def test_no_upstream_brokers(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no upstream brokers"):
        GatewaySettings.load()


def test_overrides_win_and_secrets_are_refused(tmp_path: Path) -> None:
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    settings = GatewaySettings.load(config, overrides={"listeners": "PLAINTEXT://127.0.0.1:0"},
                                    upstream_overrides={"bootstrap.servers": "h:1"})
    assert settings.listeners[0].port == 0
    assert "command line (gateway)" in settings.gateway_properties.where("listeners")
    for key in ("ssl.key.password", "sasl.jaas.config",
                "listener.name.x.plain.sasl.jaas.config", "gateway.upstream.credentials.a.password"):
        with pytest.raises(ConfigurationError, match="never taken from the command line"):
            GatewaySettings.load(config, overrides={key: "s3cret"},
                                 upstream_overrides={"bootstrap.servers": "h:1"})
    with pytest.raises(ConfigurationError, match="never taken from the command line"):
        GatewaySettings.load(config, upstream_overrides={"bootstrap.servers": "h:1",
                                                         "sasl.jaas.config": "x"})


def test_service_identity_fallback(tmp_path: Path) -> None:
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    upstream = write(tmp_path, "up.properties", "bootstrap.servers=h:1\nsecurity.protocol=SASL_PLAINTEXT\n"
                     f"sasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_MODULE} required "
                     'username="svc" password="svc-pw";\n')
    settings = GatewaySettings.load(config, upstream)
    assert settings.credentials_fallback == "service"
    assert settings.upstream_credentials_for("anyone").username == "svc"


def test_an_upstream_scram_password_saslprep_refuses_is_refused_at_load(tmp_path: Path) -> None:
    """The upstream SCRAM client SASLpreps passwords: one SASLprep refuses (a control
    character) is refused when the settings load, with where it was given and never the
    password, rather than by scramp's ScramException at the first upstream connection. A
    PLAIN password is sent as written: the same one loads."""
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    jaas = f'{SCRAM_MODULE} required username="svc" password="svc\\u0007pw";'
    upstream = write(tmp_path, "up.properties", "bootstrap.servers=h:1\nsecurity.protocol="
                     f"SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={jaas}\n")
    with pytest.raises(ConfigurationError) as info:
        GatewaySettings.load(config, upstream)
    assert info.value.message == (
        f"{upstream}:4 sasl.jaas.config: the SCRAM password of user 'svc' is refused by "
        "SASLprep (RFC 4013): control characters forbidden")
    upstream.write_text(upstream.read_text().replace("SCRAM-SHA-512", "PLAIN")
                        .replace(SCRAM_MODULE, PLAIN_MODULE))
    assert GatewaySettings.load(config, upstream).upstream.credentials.password == "svc\x07pw"
    config.write_text(config.read_text() + "gateway.upstream.credentials.alice.sasl.mechanism="
                      "SCRAM-SHA-256\ngateway.upstream.credentials.alice.username=alice\n"
                      "gateway.upstream.credentials.alice.password=alice\\u0007pw\n")
    with pytest.raises(ConfigurationError) as info:
        GatewaySettings.load(config, upstream)
    assert info.value.message == (
        "upstream credentials of principal 'alice': the SCRAM password of user 'alice' is "
        "refused by SASLprep (RFC 4013): control characters forbidden")


def test_every_key_is_documented() -> None:
    keys = [s.key for s in (*GATEWAY_KEYS, *UPSTREAM_KEYS)]
    assert len(set(s.key for s in GATEWAY_KEYS)) == len(GATEWAY_KEYS)
    assert len(set(s.key for s in UPSTREAM_KEYS)) == len(UPSTREAM_KEYS)
    for setting in (*GATEWAY_KEYS, *UPSTREAM_KEYS):
        assert setting.doc and len(setting.doc) > 10, setting.key
        assert setting.type in ("str", "int", "bool", "list", "password", "path", "choice")
    assert all(k.startswith("gateway.") or k in {s.key for s in (*GATEWAY_KEYS, *UPSTREAM_KEYS)
                                                   if s.kafka} for k in keys)
    assert {s.key for s in GATEWAY_KEYS if s.secret} >= {"ssl.key.password", "ssl.keystore.password",
                                                         "ssl.keystore.key"}


@pytest.mark.parametrize("value", ["0", "-1", "-2"])
def test_queued_max_request_bytes_at_most_0_is_unbounded(tmp_path: Path, value: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """As Kafka's SocketServer (a memory pool only for queued.max.request.bytes > 0), whether
    the value comes from the settings file or from serve's and the gateway's option, which the
    help says."""
    from lazyconv._cli import build_parser, main
    from lazyconv._commands._common import connection_limits
    from lazyconv._commands.gateway import load_settings
    from lazyconv.net._limits import RequestMemoryPool

    config = write(tmp_path, "gateway.properties", f"queued.max.request.bytes={value}\n")
    settings = GatewaySettings.load(config, None, upstream_overrides={"bootstrap.servers": "b:1"})
    pools = [settings.connection_limits().queued_max_request_bytes]
    parser = build_parser()
    option = f"--queued-max-request-bytes={value}"
    pools.append(connection_limits(parser.parse_args(["serve", str(tmp_path), option]))
                 .queued_max_request_bytes)
    gateway = load_settings(parser.parse_args(["gateway", "--upstream", "b:1", option]))
    pools.append(gateway.connection_limits().queued_max_request_bytes)
    assert pools == [int(value)] * 3
    pool = RequestMemoryPool(int(value), max_request_size=1 << 20)
    assert pool._fits(1 << 30, large=True)  # unbounded: any request is admitted at once
    for command in (["serve", str(tmp_path)], ["gateway"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "0 or -1 for unbounded, as on Kafka" in " ".join(capsys.readouterr().out.split())


def test_every_command_line_option_has_a_key(tmp_path: Path) -> None:
    """The CLI's options are settings too: sizes, threads and the conversion cache in --config,
    fetch size and timeouts in --upstream-config; the connection limits under Kafka's names."""
    config = write(tmp_path, "gateway.properties", "gateway.chunk.size=65536\ngateway.workers=3\n"
                   "gateway.conversion.cache=0\nconnections.max.idle.ms=5000\n"
                   "socket.request.max.bytes=2048\nqueued.max.request.bytes=4096\n"
                   "socket.send.buffer.bytes=65536\n")
    upstream = write(tmp_path, "upstream.properties", "bootstrap.servers=b:9092\n"
                     "fetch.max.bytes=65536\nrequest.timeout.ms=1000\nmetadata.max.age.ms=500\n")
    settings = GatewaySettings.load(config, upstream)
    assert (settings.chunk_size, settings.workers, settings.conversion_cache_bytes) == (65536, 3, 0)
    upstream_settings = settings.upstream
    assert (upstream_settings.fetch_max_bytes, upstream_settings.request_timeout_ms,
            upstream_settings.metadata_max_age_ms) == (65536, 1000, 500)
    limits = settings.connection_limits()
    assert (limits.connections_max_idle_ms, limits.max_request_size,
            limits.queued_max_request_bytes) == (5000, 2048, 4096)
    assert settings.socket_send_buffer_bytes == 65536
    defaults = GatewaySettings.load(None, None, upstream_overrides={"bootstrap.servers": "b:1"})
    assert (defaults.chunk_size, defaults.workers, defaults.conversion_cache_bytes) == (
        1 << 20, None, 16 << 20)
    assert defaults.socket_send_buffer_bytes == 1 << 20  # not Kafka's 102400: see its Setting


@pytest.mark.parametrize("value, expected", [("-1", -1), ("102400", 102400), ("0", None),
                                             ("-2", None), ("1M", None), ("2147483648", None),
                                             ("--5", None)])
def test_the_send_buffer_is_the_os_default_or_a_positive_count(value: str, expected: int | None) -> None:
    def load() -> GatewaySettings:
        return GatewaySettings.load(None, None, overrides={"socket.send.buffer.bytes": value},
                                    upstream_overrides={"bootstrap.servers": "b:1"})

    if expected is not None:
        assert load().socket_send_buffer_bytes == expected
        return
    with pytest.raises(ConfigurationError, match="socket.send.buffer.bytes") as caught:
        load()
    assert "\n" not in str(caught.value) and "-1 (the OS default)" in str(caught.value)


def test_the_property_reference_in_the_docs_is_the_tables() -> None:
    """docs/guide/gateway.md's property reference is generated from GATEWAY_KEYS and
    UPSTREAM_KEYS: a key added to a table must be added to the page (paste
    ``settings_reference()`` between the markers)."""
    from lazyconv.gateway._settings import settings_reference

    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "gateway.md").read_text()
    shown = page.split("<!-- settings:start -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert shown == settings_reference()


def test_the_tables_defaults_are_the_gateways_own() -> None:
    """A setting left out of the config file gives what the gateway built without one uses: the
    tables and the gateway's constants cannot drift apart (the docs quote the tables)."""
    from lazyconv.conversion._cache import GATEWAY_CONVERSION_CACHE_BYTES
    from lazyconv.gateway._fetch_relay import (
        DEFAULT_FETCH_AHEAD_BYTES,
        DEFAULT_UPSTREAM_FETCH_MAX_BYTES,
    )

    gateway = {s.key: s.default for s in GATEWAY_KEYS}
    upstream = {s.key: s.default for s in UPSTREAM_KEYS}
    assert upstream["fetch.max.bytes"] == DEFAULT_UPSTREAM_FETCH_MAX_BYTES == 1 << 20
    assert gateway["gateway.fetch.ahead.bytes"] == DEFAULT_FETCH_AHEAD_BYTES
    assert gateway["gateway.conversion.cache"] == GATEWAY_CONVERSION_CACHE_BYTES


def test_the_gateway_gives_its_client_sockets_the_send_buffer() -> None:
    from lazyconv.gateway import Gateway

    assert Gateway("127.0.0.1:9").server.send_buffer_bytes == 1 << 20
    assert Gateway("127.0.0.1:9", socket_send_buffer_bytes=-1).server.send_buffer_bytes == -1
    settings = GatewaySettings.load(None, None, overrides={"socket.send.buffer.bytes": "65536"},
                                    upstream_overrides={"bootstrap.servers": "127.0.0.1:9"})
    assert Gateway(settings=settings).server.send_buffer_bytes == 65536
    for bad in (0, -2, 1 << 31):
        with pytest.raises(ConfigurationError, match="socket send buffer"):
            Gateway("127.0.0.1:9", socket_send_buffer_bytes=bad)


@pytest.mark.parametrize("kwargs, message", [
    ({"port": 70000}, "port 70000 is outside 0..65535"),  # was OverflowError from start()
    ({"port": -1}, "port -1 is outside"),
    ({"workers": 0}, "at least one thread"),  # was a bare ValueError
    ({"max_clients": 0}, "max_clients must be at least 1"),
    ({"client_id_prefix": "p" * 40000}, "client_id_prefix is 40000 bytes of UTF-8, longer than"),
    ({"client_id_prefix": "gw\udcff-"}, "client_id_prefix is not UTF-8 text"),
])
def test_the_gateways_bad_arguments_are_configuration_errors(kwargs: dict, message: str) -> None:
    from lazyconv.gateway import Gateway

    with pytest.raises(ConfigurationError, match=message):
        Gateway("127.0.0.1:9", **kwargs)


@pytest.mark.parametrize("argument, expected", [("1M", 1 << 20), ("-1", -1), ("64K", 65536)])
def test_the_command_line_sets_the_send_buffer(argument: str, expected: int) -> None:
    from lazyconv._cli import build_parser
    from lazyconv._commands.gateway import load_settings

    args = build_parser().parse_args(["gateway", "--upstream", "b:1", f"--socket-send-buffer={argument}"])
    assert load_settings(args).socket_send_buffer_bytes == expected


@pytest.mark.parametrize("options, expected", [
    (["--metrics-port", "9500"], ("0.0.0.0", 9500)),
    (["--metrics-host", "10.0.0.5"], ("10.0.0.5", 9404)),
    (["--metrics-host", "10.0.0.5", "--metrics-port", "9500"], ("10.0.0.5", 9500)),
])
def test_a_metrics_option_replaces_only_its_part_of_the_file_setting(
        tmp_path: Path, options: list[str], expected: tuple[str, int]) -> None:
    """--metrics-port alone kept the port but moved the listener to 127.0.0.1, away from the
    file's host; --metrics-host alone was refused (found by a review)."""
    from lazyconv._cli import build_parser
    from lazyconv._commands.gateway import load_settings

    config = write(tmp_path, "gw.properties", "gateway.metrics.listener=0.0.0.0:9404\n")
    args = build_parser().parse_args(["gateway", "--upstream", "b:1", "--config", str(config),
                                      *options])
    assert load_settings(args).metrics_listener == expected


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_the_command_line_refuses_a_wildcard_host_without_an_advertised_host(host: str) -> None:
    """The help and docs/guide/gateway.md say a wildcard --host needs --advertised-host; the
    command built its listener from settings, which skipped Gateway's check, and advertised
    the machine's host name instead; an IPv6 --host (`::`) made a listener the settings could
    not parse (found by a review)."""
    from lazyconv._cli import build_parser
    from lazyconv._commands.gateway import load_settings

    parser = build_parser()
    args = parser.parse_args(["gateway", "--upstream", "b:1", "--host", host])
    with pytest.raises(ConfigurationError, match="wildcard address.*--advertised-host"):
        load_settings(args)
    args = parser.parse_args(["gateway", "--upstream", "b:1", "--host", host,
                              "--advertised-host", "gw.example"])
    assert [c.host for c in load_settings(args).listeners] == [host]
    # an IPv6 --host is written into listeners= in brackets, as Kafka writes it
    args = parser.parse_args(["gateway", "--upstream", "b:1", "--host", "::1", "--port", "19092"])
    assert [(c.host, c.port) for c in load_settings(args).listeners] == [("::1", 19092)]


def test_a_wildcard_host_is_refused_by_the_settings_as_the_host_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rule has one home, GatewaySettings.load (the command line had its own copy, whose
    error named no option): the refusal is --host's, said as argparse says a bad value, and
    the file's advertised.listeners (or advertised_host) lets a wildcard host through."""
    from lazyconv._cli import main

    with pytest.raises(ConfigurationError) as refused:
        GatewaySettings.load(upstream_overrides={"bootstrap.servers": "b:1"}, host="0.0.0.0")
    assert refused.value.option == "--host"
    assert str(refused.value).startswith("argument --host: 0.0.0.0 is a wildcard address")
    GatewaySettings.load(upstream_overrides={"bootstrap.servers": "b:1"}, host="0.0.0.0",
                         advertised_host="gw.example")
    config = write(tmp_path, "gw.properties", "advertised.listeners=PLAINTEXT://gw.example:9092\n")
    GatewaySettings.load(config, upstream_overrides={"bootstrap.servers": "b:1"}, host="::")
    assert main(["gateway", "--upstream", "b:1", "--host", "::"]) == 2
    assert capsys.readouterr().err == (
        "lazyconv gateway: error: argument --host: :: is a wildcard address, which clients "
        "cannot connect to: give the address clients reach the gateway at with "
        "--advertised-host (see 'lazyconv gateway --help')\n")


def test_the_wildcard_host_rule_is_written_once() -> None:
    """Gateway(host=...) and the command line refuse a wildcard host through
    refuse_a_wildcard_host: its words are in no other module of the package."""
    import lazyconv

    package = Path(lazyconv.__file__).resolve().parent
    holders = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     if "is a wildcard address" in path.read_text(encoding="utf-8"))
    assert holders == ["gateway/_settings.py"]
@pytest.mark.parametrize("options, expected", [
    ({}, ("0.0.0.0", 9404)),
    ({"metrics_port": 9500}, ("0.0.0.0", 9500)),
    ({"metrics_host": "10.0.0.5"}, ("10.0.0.5", 9404)),
    ({"metrics_host": "::1", "metrics_port": 0}, ("::1", 0)),
])
def test_the_metrics_host_and_port_win_over_the_files_setting(
        tmp_path: Path, options: dict, expected: tuple[str, int]) -> None:
    """GatewaySettings.load merges --metrics-host/--metrics-port with the file's
    gateway.metrics.listener (${env:...} resolved), each part the command line gives winning."""
    config = write(tmp_path, "gw.properties", "gateway.metrics.listener=${env:METRICS}\n")
    settings = GatewaySettings.load(config, upstream_overrides={"bootstrap.servers": "b:1"},
                                    environ={"METRICS": "0.0.0.0:9404"}, **options)
    assert settings.metrics_listener == expected


def test_the_host_and_port_options_and_their_conflicts(tmp_path: Path) -> None:
    up = {"bootstrap.servers": "b:1"}
    assert GatewaySettings.load(upstream_overrides=up, port=0).listeners[0].port == 0
    assert GatewaySettings.load(upstream_overrides=up, host="127.0.0.2").listeners[0].port == 9092
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9093\n")
    with pytest.raises(ConfigurationError, match="--host/--port and the --config file's listeners="):
        GatewaySettings.load(config, upstream_overrides=up, port=0)
    with pytest.raises(ConfigurationError, match="--metrics-host needs --metrics-port"):
        GatewaySettings.load(config, upstream_overrides=up, metrics_host="10.0.0.5")


@pytest.mark.parametrize("prefix, message", [
    ("p" * 40000, "the prefix is 40000 bytes of UTF-8, longer than a client id may be (32767)"),
    ("gw\udcff-", "the prefix is not UTF-8 text"),  # a byte of argv that is not UTF-8
], ids=["too-long", "not-utf-8"])
def test_a_client_id_prefix_that_no_client_id_can_hold_is_refused(prefix: str, message: str) -> None:
    """Such a prefix was taken, and every request the gateway sent upstream then failed to
    encode (its broker taken as failed: NOT_LEADER_FOR_PARTITION, forever; found by a
    review)."""
    with pytest.raises(ConfigurationError) as info:
        GatewaySettings.load(overrides={"gateway.client.id.prefix": prefix},
                             upstream_overrides={"bootstrap.servers": "b:1"})
    assert str(info.value) == f"command line (gateway) gateway.client.id.prefix: {message}"
    assert GatewaySettings.load(overrides={"gateway.client.id.prefix": "é" * 16383},
                                upstream_overrides={"bootstrap.servers": "b:1"}).client_id_prefix


def test_the_command_reads_its_config_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command read --config a second time to merge --metrics-port with the file's
    gateway.metrics.listener, and to check --host against listeners=; GatewaySettings.load,
    which reads it anyway, does both (found by a review)."""
    import lazyconv.net._properties as properties
    from lazyconv._cli import build_parser
    from lazyconv._commands.gateway import load_settings

    read = []
    real = properties._read_text
    monkeypatch.setattr(properties, "_read_text", lambda path, *rest: read.append(path) or real(path, *rest))
    config = write(tmp_path, "gw.properties", "gateway.metrics.listener=0.0.0.0:9404\n")
    args = build_parser().parse_args(["gateway", "--upstream", "b:1", "--config", str(config),
                                      "--metrics-port", "9500", "--port", "0"])
    assert load_settings(args).metrics_listener == ("0.0.0.0", 9500)
    assert read == [config]


@pytest.mark.parametrize("argument", ["0", "-2", "lots", "2G"])
def test_the_command_line_refuses_a_send_buffer_that_is_not_one(argument: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from lazyconv._cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["gateway", "--upstream", "b:1", f"--socket-send-buffer={argument}"])
    error = capsys.readouterr().err
    assert "--socket-send-buffer" in error and "-1 (the OS default)" in error


OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzdmMifQ."


def oauth_upstream(folder: Path, *extra: str, url: str | None = None) -> Path:
    token = write(folder, "svc.jwt", TOKEN + "\n")
    return write(folder, "up.properties", "\n".join([
        "bootstrap.servers=h:1", "security.protocol=SASL_SSL", "sasl.mechanism=OAUTHBEARER",
        f"sasl.jaas.config={OAUTH_MODULE} required;",
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler",
        f"sasl.oauthbearer.token.endpoint.url={url or token.as_uri()}", *extra]) + "\n")


def test_oauthbearer_token_file_upstream(tmp_path: Path) -> None:
    """Kafka's client settings for a token read from a file: the gateway's own identity is
    that file, read at each authentication; --check-config shows the path, not the token."""
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    settings = GatewaySettings.load(config, oauth_upstream(tmp_path))
    credentials = settings.upstream.credentials
    assert credentials is not None and credentials.mechanism == "OAUTHBEARER"
    assert credentials.token_file == tmp_path / "svc.jwt" and credentials.token() == TOKEN
    (tmp_path / "svc.jwt").write_text(TOKEN + "refreshed\n")  # refreshed in place
    assert credentials.token() == TOKEN + "refreshed"
    assert TOKEN not in settings.describe(masked=True)


@pytest.mark.parametrize(("change", "message"), [
    ({"url": "https://idp.example.com/token"}, "https: URLs are not supported, only file:///PATH"),
    ({"url": "file://otherhost/x.jwt"}, "expected file:///PATH"),
    ({"url": "file:///nonexistent/x.jwt"}, "token file /nonexistent/x.jwt cannot be read"),
    ({"extra": (f"sasl.jaas.config={OAUTH_MODULE} required unsecuredLoginStringClaim_sub=\"a\";",)},
     "takes no OAuthBearerLoginModule options"),
    ({"extra": ("sasl.login.callback.handler.class=com.example.Handler",)},
     "only Kafka's OAuthBearerLoginCallbackHandler"),
])
def test_oauthbearer_settings_refused_in_one_line(tmp_path: Path, change: dict, message: str) -> None:
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    upstream = oauth_upstream(tmp_path, *change.get("extra", ()), url=change.get("url"))
    with pytest.raises(ConfigurationError, match=re.escape(message)) as info:
        GatewaySettings.load(config, upstream)
    assert TOKEN not in str(info.value)


def test_oauthbearer_token_file_that_holds_no_token(tmp_path: Path) -> None:
    config = write(tmp_path, "gw.properties", "listeners=PLAINTEXT://127.0.0.1:9092\n")
    upstream = oauth_upstream(tmp_path)
    (tmp_path / "svc.jwt").write_text("\n")
    with pytest.raises(ConfigurationError, match="svc.jwt holds no token"):
        GatewaySettings.load(config, upstream)


def test_oauthbearer_upstream_credentials_per_principal(tmp_path: Path, certs: dict[str, Path]) -> None:
    """Gateway identity mode: a principal's upstream identity may be a token file (a relative
    path is the config file's folder's)."""
    write(tmp_path, "alice.jwt", TOKEN + "\n")
    config = write(tmp_path, "gw.properties", f"""
listeners=SASL_PLAINTEXT://127.0.0.1:9094
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} required user_alice="a";
gateway.identity=gateway
gateway.upstream.credentials.alice.sasl.mechanism=OAUTHBEARER
gateway.upstream.credentials.alice.token.file=alice.jwt
""")
    settings = GatewaySettings.load(config, oauth_upstream(tmp_path))
    alice = settings.principal_credentials["alice"]
    assert alice.token_file == tmp_path / "alice.jwt" and alice.token() == TOKEN
    assert "# principal alice: OAUTHBEARER, token from " in settings.describe()
    config.write_text(config.read_text().replace("OAUTHBEARER", "PLAIN"))
    with pytest.raises(ConfigurationError, match="a token file is for OAUTHBEARER"):
        GatewaySettings.load(config, oauth_upstream(tmp_path))


def test_check_config_flags_client_certificates_verified_by_the_system_cas(
        tmp_path: Path, certs: dict[str, Path]) -> None:
    """--check-config's listing warns of an mTLS listener without a trust store (its clients'
    certificates verified against the system's CAs); with one it does not."""
    text = (f"listeners=SSL://127.0.0.1:9095\nssl.keystore.location={certs['ks']}\n"
            "ssl.client.auth=required\n")
    upstream = write(tmp_path, "upstream.properties", "bootstrap.servers=localhost:9092\n")
    described = GatewaySettings.load(write(tmp_path, "gateway.properties", text),
                                     upstream).describe()
    assert ("#   SSL SSL 127.0.0.1:9095 client-auth=required (verified by the system's CAs: no "
            "ssl.truststore.location)\n") in described
    assert ("\n# WARNING listener SSL: ssl.client.auth=required without ssl.truststore.location: "
            "client certificates are verified against the system's CAs") in described
    text += f"ssl.truststore.location={certs['ca']}\n"
    described = GatewaySettings.load(write(tmp_path, "gateway.properties", text),
                                     upstream).describe()
    assert "WARNING" not in described and "system's CAs" not in described


@pytest.mark.parametrize("service", [False, True])
def test_one_upstream_user_with_two_passwords_is_refused(tmp_path: Path, service: bool) -> None:
    """The gateway keeps one metadata view per upstream user (its connection authenticated with
    the password of whoever made it first): principals, or a principal and the service
    identity, that give one upstream user two passwords are refused at load, in one line that
    names who (never a password); one user with one password, or two users, load."""
    jaas = f'sasl.jaas.config={PLAIN_MODULE} required username="svc" password="svc-pw";\n'
    upstream = write(tmp_path, "up.properties", "bootstrap.servers=h:1\nsecurity.protocol="
                     "SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" + (jaas if service else ""))
    first = "svc" if service else "carol"

    def load(alice: tuple[str, str], bob: tuple[str, str]) -> GatewaySettings:
        lines = ["listeners=PLAINTEXT://127.0.0.1:9092", "gateway.identity=gateway",
                 "gateway.upstream.credentials.carol.username=carol",
                 "gateway.upstream.credentials.carol.password=carol-pw"]
        for principal, (user, password) in (("alice", alice), ("bob", bob)):
            lines += [f"gateway.upstream.credentials.{principal}.username={user}",
                      f"gateway.upstream.credentials.{principal}.password={password}"]
        return GatewaySettings.load(write(tmp_path, "gw.properties", "\n".join(lines) + "\n"),
                                    upstream)

    assert load((first, f"{first}-pw"), ("bob", "bob-pw")).principal_credentials["alice"].username == first
    load(("dave", "dave-pw"), ("dave", "dave-pw"))
    with pytest.raises(ConfigurationError) as info:
        load((first, "other-pw"), ("bob", "bob-pw"))
    who = ("the service identity (sasl.jaas.config) and principal 'alice'" if service
           else "principal 'alice' and principal 'carol'")
    assert info.value.message == (f"upstream user {first!r} is given two passwords ({who}): one "
                                  "upstream user, one password (the gateway keeps one metadata "
                                  "view per upstream user)")
    with pytest.raises(ConfigurationError, match="upstream user 'dave' is given two passwords "
                                                 r"\(principal 'alice' and principal 'bob'\)"):
        load(("dave", "dave-pw"), ("dave", "dave-other"))
