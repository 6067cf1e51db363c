"""The gateway in front of the secured Kafka 4 broker (tests/security/conftest.py), in both
identity modes, configured as a user would: a ``--config`` file of broker properties and a
``--upstream-config`` file of Kafka client properties, made per run (shared by the secured-gateway
test modules)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from lazyconv.gateway import GatewaySettings
from lazyconv.net._scram_credentials import add_scram_user
from tests.gateway.conftest import GatewayThread
from tests.kafka_broker import SecuredKafka

# what clients say to the gateway in gateway identity mode (the gateway maps each principal to
# its upstream credentials, SecuredKafka's); in passthrough mode clients use SecuredKafka's own
GATEWAY_PASSWORDS = {"alice": "alice-gw-secret", "bob": "bob-gw-secret"}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass
class SecuredGateway:
    """One gateway, its files and where each of its listeners is."""

    mode: str
    gateway: GatewayThread
    config: Path
    upstream_config: Path
    passwords: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)  # listener name -> port

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stop(self) -> None:
        self.gateway.stop()


def write_configs(kafka: SecuredKafka, folder: Path, mode: str, *,
                  auth_timeout_ms: int = 10000,
                  upstream_at: tuple[str, str] | None = None) -> tuple[Path, Path]:
    """The two files: passthrough (SASL_SSL and SASL_PLAINTEXT listeners, PLAIN only; PLAIN
    upstream) or gateway (SASL_SSL with PLAIN and SCRAM, SASL_PLAINTEXT with PLAIN, SSL with
    client certificates; each principal mapped to its SCRAM-SHA-512 credentials upstream).
    ``upstream_at``: (bootstrap, security protocol), SecuredKafka's SASL_SSL listener by
    default."""
    folder.mkdir(parents=True, exist_ok=True)
    material = kafka.material
    config, upstream = folder / "gateway.properties", folder / "upstream.properties"
    secrets = folder / "secrets"
    secrets.mkdir(mode=0o700, exist_ok=True)
    common = ["ssl.keystore.type=PEM", f"ssl.keystore.location={material.broker_keystore_pem}",
              f"gateway.authentication.timeout.ms={auth_timeout_ms}",
              f"gateway.identity={mode}"]
    if mode == "passthrough":
        lines = ["listeners=SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms=PLAIN", *common]
        upstream_lines = ["sasl.mechanism=PLAIN"]
    else:
        scram = folder / "scram.json"
        for user, password in GATEWAY_PASSWORDS.items():
            add_scram_user(scram, user, password, ["SCRAM-SHA-512", "SCRAM-SHA-256"])
        users = " ".join(f'user_{u}="${{file:{_secret(secrets, u + "-gw", p)}}}"'
                         for u, p in GATEWAY_PASSWORDS.items())
        lines = ["listeners=SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                 "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,SCRAM-SHA-256",
                 "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
                 f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_MODULE} required {users};",
                 f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} required {users};",
                 "listener.name.ssl.ssl.client.auth=required",
                 "ssl.truststore.type=PEM", f"ssl.truststore.location={material.ca_pem}",
                 "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
                 f"gateway.scram.credentials.file={scram}", *common]
        for user, password in kafka.users.items():
            lines += [f"gateway.upstream.credentials.{user}.sasl.mechanism=SCRAM-SHA-512",
                      f"gateway.upstream.credentials.{user}.username={user}",
                      f"gateway.upstream.credentials.{user}.password="
                      f"${{file:{_secret(secrets, user, password)}}}"]
        upstream_lines = ["sasl.mechanism=SCRAM-SHA-512"]
    config.write_text("\n".join(lines) + "\n")
    bootstrap, protocol = upstream_at or (kafka.sasl_ssl_bootstrap, "SASL_SSL")
    upstream.write_text("\n".join([
        f"bootstrap.servers={bootstrap}", f"security.protocol={protocol}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={material.ca_pem}",
        *upstream_lines]) + "\n")
    return config, upstream


def _secret(folder: Path, name: str, value: str) -> Path:
    path = folder / name
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def start_gateway(kafka: SecuredKafka, folder: Path, mode: str, **kwargs) -> SecuredGateway:
    config, upstream = write_configs(kafka, folder, mode, **kwargs)
    settings = GatewaySettings.load(config, upstream)
    thread = GatewayThread(None, settings=settings)
    gateway = SecuredGateway(mode, thread, config, upstream,
                             dict(kafka.users) if mode == "passthrough" else dict(GATEWAY_PASSWORDS))
    for listener in thread.gateway.listeners:
        gateway.ports[listener.name] = listener.port
    return gateway


class LogLines(logging.Handler):
    """Every log line lazyconv writes while installed (DEBUG and up), formatted with its
    traceback: what the secrets check greps."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def install(self) -> None:
        logger = logging.getLogger("lazyconv")
        self._level = logger.level
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self)

    def remove(self) -> None:
        logger = logging.getLogger("lazyconv")
        logger.removeHandler(self)
        logger.setLevel(self._level)
