"""The gateway reaching Kafka 4.0.1 with SASL/OAUTHBEARER, its token read from a file (Kafka's
client settings: ``sasl.oauthbearer.token.endpoint.url=file:///...``). The broker validates
unsigned tokens (Kafka's default validator, for tests) and authorizes only its super users, so
an old producer's and consumer's records through the gateway prove the cluster saw the
token's subject; the session lifetime makes the gateway re-authenticate, reading the file
again; a token the broker refuses stops the gateway in one line that names the broker's
status, never the token."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv.errors import UpstreamError
from lazyconv.gateway._settings import GatewaySettings
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, MemoryRecords
from tests.gateway.conftest import GatewayThread
from tests.gateway.test_gateway_over_serve import legacy_set, produce_request
from tests.kafka_broker import KafkaBroker, create_topic, free_ports, unique_topic
from tests.serve.wire import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SUBJECT = "gateway-svc"
REAUTH_MS = 3000


def unsigned_token(subject: str, lifetime_s: float) -> str:
    """An unsecured JWS (``alg: none``), what Kafka's default OAUTHBEARER validator accepts."""
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time()
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': int(now), 'exp': int(now + lifetime_s)})}."


class OAuthBroker:
    def __init__(self, dist: Path, folder: Path) -> None:
        port, controller, self.oauth_port = free_ports(3)
        self.broker = KafkaBroker(dist, folder, port=port, controller_port=controller, extra_props={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},"
                         f"OAUTH://127.0.0.1:{self.oauth_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},OAUTH://127.0.0.1:{self.oauth_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                              "OAUTH:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oauth.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="broker";',
            "listener.name.oauth.connections.max.reauth.ms": str(REAUTH_MS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:ANONYMOUS;User:{SUBJECT}",
            "allow.everyone.if.no.acl.found": "false",
        })


@pytest.fixture(scope="module")
def oauth_broker(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    broker = OAuthBroker(kafka_dist, tmp_path_factory.mktemp("oauth-broker"))
    broker.broker.start()
    try:
        yield broker
    finally:
        broker.broker.stop()


def gateway_settings(folder: Path, broker: OAuthBroker, token: str) -> GatewaySettings:
    folder.mkdir(parents=True, exist_ok=True)
    token_file = folder / "gateway.jwt"
    token_file.write_text(token + "\n")
    config, upstream = folder / "gateway.properties", folder / "upstream.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:0\n")
    upstream.write_text("\n".join([
        f"bootstrap.servers=127.0.0.1:{broker.oauth_port}", "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=OAUTHBEARER",
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        "required;", f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}"]) + "\n")
    return GatewaySettings.load(config, upstream)


def test_old_clients_through_an_oauthbearer_upstream(oauth_broker: OAuthBroker, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lazyconv.gateway._upstream")
    topic = unique_topic("oauth")
    create_topic(oauth_broker.broker.bootstrap, topic)
    settings = gateway_settings(tmp_path, oauth_broker, unsigned_token(SUBJECT, 3600))
    token_file = tmp_path / "gateway.jwt"
    gateway = GatewayThread(None, settings=settings)
    try:
        with WireClient(gateway.port, "old-producer") as client:
            answer = client.call(produce.SPEC, 2, produce_request(
                2, topic, legacy_set(1, Compression.NONE, 5)))
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
            # a refreshed token in the file: the next re-authentication reads it
            token_file.write_text(unsigned_token(SUBJECT, 7200) + "\n")
            time.sleep(REAUTH_MS / 1000 + 1)
            answer = client.call(produce.SPEC, 2, produce_request(
                2, topic, legacy_set(1, Compression.NONE, 3, ts0=1_700_000_001_000)))
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        got: list[tuple[int, bytes | None]] = []
        with WireClient(gateway.port, "old-consumer") as client:
            while len(got) < 8:  # as an old consumer does: again from the next offset (the
                # size a down-converted answer commits to first may cut it short: KIP-283)
                answer = client.call(fetch.SPEC, 2, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                        {"topic": topic, "partitions": [
                            {"partition": 0, "fetch_offset": len(got), "partition_max_bytes": 1 << 20}]}]})
                part = answer["responses"][0]["partitions"][0]
                assert part["error_code"] == 0 and part["high_watermark"] == 8
                more = [(r.offset, r.key) for b in MemoryRecords(part["records"]).batches() for r in b
                        if r.offset >= len(got)]
                assert more, "no progress"
                got += more
        assert got == [(i, b"k%d" % i) for i in range(5)] + [(5 + i, b"k%d" % i) for i in range(3)]
        # the broker's session lifetime made the gateway authenticate again (with the file's
        # token of the moment: tests/net/test_sasl.py shows it is read at each authentication)
        assert any(r.getMessage().startswith("re-authenticated to 127.0.0.1:") for r in caplog.records)
        assert not any("eyJ" in r.getMessage() for r in caplog.records)  # no token logged
    finally:
        gateway.stop()


@pytest.mark.parametrize("case", ["expired", "another subject"])
def test_a_token_the_broker_refuses(oauth_broker: OAuthBroker, tmp_path: Path, case: str) -> None:
    token = unsigned_token(SUBJECT, -60) if case == "expired" else unsigned_token("mallory", 3600)
    settings = gateway_settings(tmp_path, oauth_broker, token)
    if case == "expired":
        with pytest.raises(UpstreamError) as info:
            GatewayThread(None, settings=settings)
        assert "the broker refused the OAUTHBEARER token (invalid_token)" in str(info.value)
        assert token not in str(info.value)
        return
    # a valid token of someone the cluster does not authorize: the old client gets its
    # version's authorization error, as it would from the broker itself
    topic = unique_topic("oauth-denied")
    create_topic(oauth_broker.broker.bootstrap, topic)
    gateway = GatewayThread(None, settings=settings)
    try:
        with WireClient(gateway.port, "old-producer") as client:
            answer = client.call(produce.SPEC, 2, produce_request(
                2, topic, legacy_set(1, Compression.NONE, 1)))
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 29
    finally:
        gateway.stop()
