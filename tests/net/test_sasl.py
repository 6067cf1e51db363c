"""The server-side SASL state machine (Kafka's SaslServerAuthenticator and KafkaChannel facts)
and the client exchange, sans-IO: frames in, outcomes out."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
import scramp

from lazyconv.errors import AuthenticationError, ConfigurationError, LocalProtocolError
from lazyconv.net._listener_config import SaslListenerSettings
from lazyconv.net._principal import KafkaPrincipal
from lazyconv.net._sasl import (
    PlainCredentials,
    PlainUsers,
    SaslClientExchange,
    SaslOutcome,
    SaslServerConfig,
    SaslServerExchange,
    SaslState,
    parse_plain_token,
    plain_token,
    reauthentication_delay_s,
)
from lazyconv.net._scram_credentials import ScramCredentialStore, add_scram_user, scram_credential
from lazyconv.protocol._primitives import Reader
from tests.net.sasl_frames import (
    AUTHENTICATE,
    HANDSHAKE,
    api_versions,
    authenticate,
    handshake,
    metadata,
    response,
    unframe,
)

USERS = PlainUsers({"alice": "alice-secret", "bob": "bob-secret"})
STORE = ScramCredentialStore({
    "alice": {"SCRAM-SHA-512": scram_credential("SCRAM-SHA-512", "alice-secret"),
              "SCRAM-SHA-256": scram_credential("SCRAM-SHA-256", "alice-secret")},
    "bob": {"SCRAM-SHA-512": scram_credential("SCRAM-SHA-512", "bob-secret")},
})
ALL = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
FAILED_58 = 58


def config(**kwargs) -> SaslServerConfig:
    return SaslServerConfig(kwargs.pop("mechanisms", ALL), scram_lookup=STORE.lookup, **kwargs)


def plain_v1(exchange: SaslServerExchange, user: str, password: str, *, version: int = 2,
             now: float = 0.0, authzid: str = ""):
    out = exchange.receive(handshake("PLAIN"), now)
    assert response(HANDSHAKE, 1, out.reply, 1) == {"error_code": 0, "mechanisms": list(ALL)}
    out = exchange.receive(authenticate(plain_token(user, password, authzid), version), now)
    assert out.verify == PlainCredentials(authzid, user, password)
    assert exchange.state is SaslState.VERIFYING
    return exchange.complete_plain(USERS.check(out.verify), now)


def scram_v1(exchange: SaslServerExchange, mechanism: str, user: str, password: str, *,
             now: float = 0.0, version: int = 2):
    """Run a SCRAM exchange with scramp's client; the last outcome."""
    client = scramp.ScramClient([mechanism], user, password)
    out = exchange.receive(handshake(mechanism), now)
    assert response(HANDSHAKE, 1, out.reply)["error_code"] == 0
    out = exchange.receive(authenticate(client.get_client_first().encode(), version, 2), now)
    if out.close:
        return out
    first = response(AUTHENTICATE, version, out.reply, 2)
    assert first["error_code"] == 0 and not out.authenticated
    client.set_server_first(first["auth_bytes"].decode())
    out = exchange.receive(authenticate(client.get_client_final().encode(), version, 3), now)
    if out.authenticated:
        client.set_server_final(response(AUTHENTICATE, version, out.reply, 3)["auth_bytes"].decode())
    return out


# -- PLAIN ---------------------------------------------------------------------------------


def test_plain_token_rfc4616() -> None:
    assert parse_plain_token(b"\0alice\0pw") == PlainCredentials("", "alice", "pw")
    assert parse_plain_token(b"alice\0alice\0p\xc3\xa4") == PlainCredentials("alice", "alice", "pä")
    # Kafka keeps a third NUL in the password; RFC 4616 has none: refused here
    for bad in (b"\0alice\0pw\0x", b"alice\0pw", b"\0\0pw", b"\0alice\0", b"\0al\xffice\0pw", b""):
        with pytest.raises(AuthenticationError) as info:
            parse_plain_token(bad)
        assert str(info.value) == "invalid SASL/PLAIN credentials"
    assert "pw" not in repr(parse_plain_token(b"\0alice\0pw"))


def test_plain_users_check() -> None:
    assert USERS.check(PlainCredentials("", "alice", "alice-secret"))
    assert USERS.check(PlainCredentials("alice", "alice", "alice-secret"))
    assert not USERS.check(PlainCredentials("", "alice", "bob-secret"))
    assert not USERS.check(PlainCredentials("", "carol", "alice-secret"))
    assert not USERS.check(PlainCredentials("bob", "alice", "alice-secret"))  # authzid
    assert "secret" not in repr(USERS)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_v1_success(version: int) -> None:
    exchange = SaslServerExchange(config(max_reauth_ms={"PLAIN": 60000}), now=0.0)
    assert exchange.max_frame_size == 524288 and exchange.deadline() == 10.0
    out = plain_v1(exchange, "alice", "alice-secret", version=version, now=1.0)
    assert out.authenticated == KafkaPrincipal("User", "alice") and not out.close
    body = response(AUTHENTICATE, version, out.reply, 2)
    assert body["error_code"] == 0 and body["auth_bytes"] == b"" and body["error_message"] is None
    if version >= 1:
        assert body["session_lifetime_ms"] == 60000
    assert exchange.authenticated and exchange.principal == KafkaPrincipal.user("alice")
    assert exchange.session_expires_at == 61.0 and exchange.deadline() is None
    assert exchange.max_frame_size is None
    assert exchange.client_supports_reauthentication is (version > 0)
    assert exchange.receive(metadata(), 2.0).forward


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("carol", "alice-secret")])
def test_plain_v1_failure_is_58_then_close_same_message(user: str, password: str) -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    out = plain_v1(exchange, user, password)
    assert out.close and not out.authenticated and "refused" in out.reason
    body = response(AUTHENTICATE, 2, out.reply, 2)
    assert body["error_code"] == FAILED_58
    assert body["error_message"] == ("Authentication failed during authentication due to "
                                     "invalid credentials with SASL mechanism PLAIN")
    assert exchange.state is SaslState.FAILED
    assert exchange.receive(metadata(), 0.0).close


def test_plain_v0_raw_tokens() -> None:
    # 0.10 clients: SaslHandshake v0, then the token as a raw size-prefixed frame, answered by
    # an empty size-prefixed token on success
    exchange = SaslServerExchange(config(), now=0.0)
    out = exchange.receive(handshake("PLAIN", version=0), 0.0)
    assert response(HANDSHAKE, 0, out.reply) == {"error_code": 0, "mechanisms": list(ALL)}
    assert exchange.expects_raw_token
    out = exchange.receive(plain_token("bob", "bob-secret"), 0.0)
    assert out.verify is not None
    out = exchange.complete_plain(USERS.check(out.verify), 0.0)
    assert out.reply == b"\0\0\0\0" and out.authenticated == KafkaPrincipal.user("bob")


def test_plain_v0_failure_closes_without_a_frame() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN", version=0), 0.0)
    out = exchange.complete_plain(False, 0.0) if (v := exchange.receive(
        plain_token("bob", "nope"), 0.0)).verify else v
    assert out.close and out.reply is None
    # a malformed raw token: the same
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN", version=0), 0.0)
    out = exchange.receive(b"garbage", 0.0)
    assert out.close and out.reply is None and out.verify is None


def test_complete_plain_without_a_check_is_our_bug() -> None:
    with pytest.raises(LocalProtocolError):
        SaslServerExchange(config(), now=0.0).complete_plain(True, 0.0)


def test_frame_while_verifying_closes() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN"), 0.0)
    assert exchange.receive(authenticate(plain_token("alice", "alice-secret")), 0.0).verify
    assert exchange.receive(metadata(), 0.0).close


# -- SCRAM ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_success(mechanism: str, version: int) -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    out = scram_v1(exchange, mechanism, "alice", "alice-secret", version=version)
    assert out.authenticated == KafkaPrincipal.user("alice") and exchange.mechanism == mechanism


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret"),
                                                 ("bob", "alice-secret")])
def test_scram_failure_happens_at_the_proof_for_everyone(user: str, password: str) -> None:
    # an unknown user is answered with a server-first like a known one, and fails at the proof
    exchange = SaslServerExchange(config(), now=0.0)
    client = scramp.ScramClient(["SCRAM-SHA-512"], user, password)
    exchange.receive(handshake("SCRAM-SHA-512"), 0.0)
    out = exchange.receive(authenticate(client.get_client_first().encode()), 0.0)
    first = response(AUTHENTICATE, 2, out.reply)
    assert first["error_code"] == 0 and not out.close
    client.set_server_first(first["auth_bytes"].decode())
    out = exchange.receive(authenticate(client.get_client_final().encode(), 2, 3), 0.0)
    assert out.close and not out.authenticated
    body = response(AUTHENTICATE, 2, out.reply, 3)
    assert body["error_code"] == FAILED_58
    assert body["error_message"].endswith("with SASL mechanism SCRAM-SHA-512")


def _salt_for(cfg: SaslServerConfig, user: str) -> str:
    exchange = SaslServerExchange(cfg, now=0.0)
    exchange.receive(handshake("SCRAM-SHA-512"), 0.0)
    first = scramp.ScramClient(["SCRAM-SHA-512"], user, "x").get_client_first()
    out = exchange.receive(authenticate(first.encode()), 0.0)
    return dict(kv.split("=", 1) for kv in response(AUTHENTICATE, 2, out.reply)[
        "auth_bytes"].decode().split(","))["s"]


def test_scram_unknown_user_sees_the_same_salt_from_every_listener_of_one_file(
        tmp_path: Path) -> None:
    """A listener's SASL configuration is built again by a reload, and by every gateway or
    restart reading the same credentials file: an unknown user was shown a salt from a random
    key of each (a prober tried twice, across a SIGHUP or two gateways behind one name, and
    told an unknown user, whose salt changed, from a known one, whose salt never does); the key
    is now derived from the file's credentials."""
    path = tmp_path / "scram.json"
    add_scram_user(path, "alice", "alice-secret", ["SCRAM-SHA-512"])
    settings = SaslListenerSettings(("SCRAM-SHA-512",), scram_credentials_file=path)
    first, again = settings.server_config(), settings.server_config()
    assert _salt_for(first, "nobody") == _salt_for(again, "nobody") != _salt_for(first, "nobody2")
    assert _salt_for(first, "alice") == _salt_for(again, "alice")
    other = tmp_path / "other.json"
    add_scram_user(other, "alice", "alice-secret", ["SCRAM-SHA-512"])  # another salt and key
    elsewhere = SaslListenerSettings(("SCRAM-SHA-512",), scram_credentials_file=other)
    assert _salt_for(elsewhere.server_config(), "nobody") != _salt_for(first, "nobody")


def test_scram_unknown_user_sees_a_stable_salt() -> None:
    cfg = config()

    def salt_for(user: str) -> str:
        exchange = SaslServerExchange(cfg, now=0.0)
        exchange.receive(handshake("SCRAM-SHA-512"), 0.0)
        first = scramp.ScramClient(["SCRAM-SHA-512"], user, "x").get_client_first()
        out = exchange.receive(authenticate(first.encode()), 0.0)
        return dict(kv.split("=", 1) for kv in response(AUTHENTICATE, 2, out.reply)[
            "auth_bytes"].decode().split(","))["s"]

    assert salt_for("nobody") == salt_for("nobody") != salt_for("nobody2")
    # a known user is shown her stored salt; an unknown one a salt of the same size
    stored = STORE.lookup("SCRAM-SHA-512", "alice")
    assert stored is not None and base64.b64decode(salt_for("alice")) == stored.salt
    assert len(base64.b64decode(salt_for("nobody"))) == len(stored.salt) == 32


def test_scram_v0_raw_tokens() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    exchange.receive(handshake("SCRAM-SHA-512", version=0), 0.0)
    out = exchange.receive(client.get_client_first().encode(), 0.0)
    client.set_server_first(unframe(out.reply).decode())
    out = exchange.receive(client.get_client_final().encode(), 0.0)
    client.set_server_final(unframe(out.reply).decode())  # verifies the server's signature
    assert out.authenticated == KafkaPrincipal.user("bob")


@pytest.mark.parametrize("first", [
    "y,,n=alice,r=abc",  # channel binding flags other than n: Kafka refuses them
    "p=tls-unique,,n=alice,r=abc",
    "n,,n=alice,r=abc,tokenauth=true",  # delegation tokens are not served
    "n,,garbage",
    "\udcff",
])
def test_scram_bad_client_first(first: str) -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("SCRAM-SHA-512"), 0.0)
    token = first.encode("utf-8", "surrogateescape")
    out = exchange.receive(authenticate(token), 0.0)
    assert out.close and response(AUTHENTICATE, 2, out.reply)["error_code"] == FAILED_58


@pytest.mark.parametrize("authzid", ["alice", "bob"])
def test_scram_authorization_id_is_refused(authzid: str) -> None:
    # scramp refuses an authorization id, equal to the user or not (Kafka accepts one equal
    # to the user; no Kafka client sends one): refused at once, like any malformed first token
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("SCRAM-SHA-512"), 0.0)
    out = exchange.receive(authenticate(f"n,a={authzid},n=alice,r=clientnonce123".encode()), 0.0)
    assert out.close and response(AUTHENTICATE, 2, out.reply)["error_code"] == FAILED_58


# -- the handshake and what is allowed before authentication --------------------------------


def test_unsupported_mechanism_is_33_with_the_list_then_close() -> None:
    exchange = SaslServerExchange(config(mechanisms=("SCRAM-SHA-512",)), now=0.0)
    out = exchange.receive(handshake("PLAIN"), 0.0)
    assert out.close
    assert response(HANDSHAKE, 1, out.reply) == {"error_code": 33, "mechanisms": ["SCRAM-SHA-512"]}


def test_api_versions_is_forwarded_once() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    assert exchange.receive(api_versions(3), 0.0).forward
    assert exchange.state is SaslState.HANDSHAKE
    out = exchange.receive(api_versions(3), 0.0)
    assert out.close and out.reply is None


def test_api_versions_too_new_may_be_retried() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    too_new = bytearray(api_versions(3))
    too_new[2:4] = (99).to_bytes(2, "big")
    assert exchange.receive(bytes(too_new), 0.0).forward
    assert exchange.state is SaslState.INITIAL
    assert exchange.receive(api_versions(3), 0.0).forward
    assert exchange.receive(handshake("PLAIN"), 0.0).reply is not None


@pytest.mark.parametrize("frame", [metadata(1), b"\x60\x82\x02\x00garbage", b"\0\0",
                                   authenticate(b"\0a\0b")])
def test_nothing_else_before_authentication(frame: bytes) -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    out = exchange.receive(frame, 0.0)
    assert out.close and out.reply is None and not out.forward


def test_wrong_request_mid_exchange() -> None:
    # another SaslHandshake where a SaslAuthenticate was expected: ILLEGAL_SASL_STATE, close
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN"), 0.0)
    out = exchange.receive(handshake("PLAIN", correlation_id=7), 0.0)
    assert out.close and response(HANDSHAKE, 1, out.reply, 7) == {"error_code": 34, "mechanisms": []}
    # any other request: closed without an answer
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN"), 0.0)
    out = exchange.receive(metadata(), 0.0)
    assert out.close and out.reply is None


def test_frames_are_bounded_before_authentication() -> None:
    exchange = SaslServerExchange(config(max_receive_size=2048), now=0.0)
    exchange.receive(handshake("PLAIN"), 0.0)
    out = exchange.receive(authenticate(b"\0a\0" + b"x" * 4096), 0.0)
    assert out.close and out.reply is None and "2048" in out.reason


def test_unsupported_authenticate_version_closes() -> None:
    exchange = SaslServerExchange(config(), now=0.0)
    exchange.receive(handshake("PLAIN"), 0.0)
    frame = bytearray(authenticate(b"\0a\0b", 2))
    frame[2:4] = (3).to_bytes(2, "big")
    assert exchange.receive(bytes(frame), 0.0).close


# -- after authentication: the session, KIP-368 re-authentication ---------------------------


def authenticated(reauth_ms: int = 0, mechanism: str = "PLAIN") -> SaslServerExchange:
    exchange = SaslServerExchange(config(max_reauth_ms={"PLAIN": reauth_ms,
                                                        "SCRAM-SHA-512": reauth_ms}), now=0.0)
    if mechanism == "PLAIN":
        assert plain_v1(exchange, "alice", "alice-secret").authenticated
    else:
        assert scram_v1(exchange, mechanism, "alice", "alice-secret").authenticated
    return exchange


def test_sasl_requests_after_authentication_get_34_and_keep_the_connection() -> None:
    exchange = authenticated()
    out = exchange.receive(authenticate(b"x", 2, 9), 1.0)
    assert not out.close and response(AUTHENTICATE, 2, out.reply, 9)["error_code"] == 34
    out = exchange.receive(handshake("PLAIN", correlation_id=10), 1.0)  # no session expiry
    assert not out.close and response(HANDSHAKE, 1, out.reply, 10)["error_code"] == 34
    assert exchange.receive(metadata(), 1.0).forward


def test_session_expiry_closes_all_but_a_handshake() -> None:
    exchange = authenticated(reauth_ms=5000)
    assert exchange.receive(metadata(), 4.9).forward
    out = exchange.receive(metadata(), 5.1)
    assert out.close and "expired" in out.reason


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_reauthentication(mechanism: str) -> None:
    exchange = authenticated(reauth_ms=5000, mechanism=mechanism)
    # even after expiry a handshake begins re-authentication
    if mechanism == "PLAIN":
        out = plain_v1(exchange, "alice", "alice-secret", now=6.0)
    else:
        out = scram_v1(exchange, mechanism, "alice", "alice-secret", now=6.0)
    assert out.authenticated == KafkaPrincipal.user("alice")
    assert response(AUTHENTICATE, 2, out.reply)["session_lifetime_ms"] == 5000
    assert exchange.session_expires_at == 11.0 and exchange.authentications == 2
    assert exchange.receive(metadata(), 10.0).forward


def test_reauthentication_at_most_once_a_second() -> None:
    exchange = authenticated(reauth_ms=60000)
    assert plain_v1(exchange, "alice", "alice-secret", now=3.0).authenticated
    out = exchange.receive(handshake("PLAIN", correlation_id=5), 3.5)
    assert not out.close and response(HANDSHAKE, 1, out.reply, 5)["error_code"] == 34
    assert exchange.receive(metadata(), 3.6).forward
    assert plain_v1(exchange, "alice", "alice-secret", now=4.0).authenticated


def test_reauthentication_cannot_change_the_principal() -> None:
    """A PLAIN token naming another user fails before the driver is asked to check its
    password (in the gateway's passthrough mode that check is a login upstream as that user)."""
    exchange = authenticated(reauth_ms=60000)
    exchange.receive(handshake("PLAIN"), 2.0)
    out = exchange.receive(authenticate(plain_token("bob", "bob-secret")), 2.0)
    assert out.verify is None and out.close and not out.authenticated
    assert exchange.state is SaslState.FAILED
    body = response(AUTHENTICATE, 2, out.reply)
    assert body["error_code"] == 58 and "re-authentication" in body["error_message"]


def test_reauthentication_with_another_mechanism_fails_at_the_next_frame() -> None:
    exchange = authenticated(reauth_ms=60000)
    out = exchange.receive(handshake("SCRAM-SHA-512"), 2.0)
    assert not out.close and response(HANDSHAKE, 1, out.reply)["error_code"] == 0
    out = exchange.receive(authenticate(b"n,,n=alice,r=x"), 2.0)
    assert out.close and out.reply is None


def test_reauthentication_wrong_password_fails() -> None:
    exchange = authenticated(reauth_ms=60000)
    out = plain_v1(exchange, "alice", "nope", now=2.0)
    assert out.close and response(AUTHENTICATE, 2, out.reply)["error_code"] == 58


def test_config_checks() -> None:
    with pytest.raises(ConfigurationError, match="empty"):
        SaslServerConfig(())
    with pytest.raises(ConfigurationError, match="GSSAPI"):
        SaslServerConfig(("GSSAPI",))
    with pytest.raises(ConfigurationError, match="no SCRAM credentials"):
        SaslServerConfig(("SCRAM-SHA-256",))
    assert SaslServerConfig(("PLAIN", "PLAIN")).mechanisms == ("PLAIN",)


def test_a_broken_lookup_fails_the_exchange_not_the_loop() -> None:
    def lookup(mechanism: str, user: str):
        raise OSError("credentials file vanished")

    exchange = SaslServerExchange(SaslServerConfig(("SCRAM-SHA-512",), scram_lookup=lookup), 0.0)
    out = scram_v1(exchange, "SCRAM-SHA-512", "alice", "alice-secret")
    assert out.close and not out.authenticated


# -- the client side -----------------------------------------------------------------------


def drive(client: SaslClientExchange, server: SaslServerExchange, now: float = 0.0):
    """Run our client against our server; the server's last outcome and the client's step."""
    frame = client.start(now)
    while True:
        out = server.receive(unframe(frame), now)
        if out.verify is not None:
            out = server.complete_plain(USERS.check(out.verify), now)
        if out.reply is None:
            return out, None
        step = client.receive(unframe(out.reply), now)
        if step.done or out.close:
            return out, step
        assert step.send is not None
        frame = step.send


@pytest.mark.parametrize("mechanism", ALL)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_client_against_server(mechanism: str, version: int) -> None:
    server = SaslServerExchange(config(max_reauth_ms={mechanism: 10000}), now=0.0)
    client = SaslClientExchange(mechanism, "alice", "alice-secret", authenticate_version=version,
                                rng=random.Random(1))
    out, step = drive(client, server)
    assert out.authenticated == KafkaPrincipal.user("alice") and step and step.done
    if version >= 1:
        assert client.session_lifetime_ms == 10000
        assert 8.5 <= client.reauthenticate_at <= 9.5
        out, step = drive(client, server, now=client.reauthenticate_at)
        assert out.authenticated and server.authentications == 2
    else:
        assert client.reauthenticate_at is None


@pytest.mark.parametrize("mechanism", ALL)
def test_client_refused(mechanism: str) -> None:
    server = SaslServerExchange(config(), now=0.0)
    client = SaslClientExchange(mechanism, "alice", "WRONG-pw")
    with pytest.raises(AuthenticationError, match="refused") as info:
        drive(client, server)
    assert "WRONG-pw" not in str(info.value) and "alice" in str(info.value)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user,password,refused", [
    ("alice", "alice\x07secret", "the SCRAM password of user 'alice' is refused by SASLprep "
                                  "(RFC 4013): control characters forbidden"),
    ("alice", "alice\ue000secret", "the SCRAM password of user 'alice' is refused by SASLprep "
                                    "(RFC 4013): private use characters forbidden"),
    ("al\x07ice", "alice-secret", "SCRAM user name 'al\\x07ice' is refused by SASLprep "
                                   "(RFC 4013): control characters forbidden"),
])
def test_client_credentials_saslprep_refuses(mechanism: str, user: str, password: str,
                                             refused: str) -> None:
    """The SCRAM client SASLpreps the user name and password (scramp): one SASLprep refuses is
    a ConfigurationError when the exchange is made, saying which and why and never the
    password (scramp's own ScramException came out of the handshake's answer). PLAIN sends
    them as written (this server knows no such user)."""
    server = SaslServerExchange(config(), now=0.0)
    with pytest.raises(ConfigurationError) as info:
        drive(SaslClientExchange(mechanism, user, password), server)
    assert info.value.message == refused and password not in str(info.value)
    with pytest.raises(AuthenticationError, match="the broker refused PLAIN"):  # sent, not ours
        drive(SaslClientExchange("PLAIN", user, password), SaslServerExchange(config(), now=0.0))


def test_client_mechanism_not_enabled() -> None:
    server = SaslServerExchange(config(mechanisms=("SCRAM-SHA-512",)), now=0.0)
    with pytest.raises(AuthenticationError, match="enables: SCRAM-SHA-512"):
        drive(SaslClientExchange("PLAIN", "alice", "alice-secret"), server)


def test_client_detects_a_server_that_does_not_know_the_password() -> None:
    # a server-final whose signature is not the one the password gives: refused
    client = SaslClientExchange("SCRAM-SHA-512", "alice", "alice-secret")
    server = SaslServerExchange(config(), now=0.0)
    out = server.receive(unframe(client.start(0.0)), 0.0)
    step = client.receive(unframe(out.reply), 0.0)
    out = server.receive(unframe(step.send), 0.0)
    step = client.receive(unframe(out.reply), 0.0)
    out = server.receive(unframe(step.send), 0.0)
    assert out.authenticated
    body = response(AUTHENTICATE, 2, out.reply)
    forged = "v=" + "A" * 86 + "=="
    from lazyconv.protocol._headers import encode_response_header

    frame = encode_response_header(1, 3) + AUTHENTICATE.encode_response(
        2, {**body, "auth_bytes": forged.encode()})
    with pytest.raises(AuthenticationError, match="does not verify"):
        client.receive(frame, 0.0)


def test_client_checks_correlation_ids() -> None:
    from lazyconv.errors import ProtocolError

    client = SaslClientExchange("PLAIN", "alice", "pw", correlation_ids=iter([5, 6]))
    client.start(0.0)
    reply = SaslServerExchange(config(), 0.0).receive(handshake("PLAIN", correlation_id=4), 0.0).reply
    with pytest.raises(ProtocolError, match="correlation id 4, expected 5"):
        client.receive(unframe(reply), 0.0)


def test_reauthentication_delay_is_kafkas() -> None:
    assert reauthentication_delay_s(0) is None and reauthentication_delay_s(-5) is None
    rng = random.Random(7)
    delays = [reauthentication_delay_s(100000, rng) for _ in range(2000)]
    assert all(85.0 <= d <= 95.0 for d in delays)
    assert min(delays) < 86 and max(delays) > 94


# -- OAUTHBEARER, the client side (the gateway's upstream): a broker played from recorded
# answers of Kafka 4.0.1's unsecured validator (tests/security has the live broker)


def _request(frame: bytes) -> tuple[object, int, dict, dict]:
    """The client's ``frame`` (size-prefixed): its spec, version, header and body."""
    from lazyconv.protocol._headers import decode_request_header

    data = unframe(frame)
    key, version = int.from_bytes(data[:2], "big"), int.from_bytes(data[2:4], "big")
    spec = {HANDSHAKE.key: HANDSHAKE, AUTHENTICATE.key: AUTHENTICATE}[key]
    reader = Reader(data)
    header = decode_request_header(reader, spec.request_header_version(version))
    return spec, version, header, spec.decode_request(version, reader)


def _broker_answer(frame: bytes, body: dict) -> bytes:
    """What a broker answers to the client's ``frame`` with ``body``."""
    from lazyconv.protocol._headers import encode_response_header

    spec, version, header, _ = _request(frame)
    return (encode_response_header(spec.response_header_version(version), header["correlation_id"])
            + spec.encode_response(version, body))


def _sent_token(frame: bytes) -> bytes:
    return _request(frame)[3]["auth_bytes"]


JWT = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0."


def test_oauthbearer_client_sends_the_token_read_at_each_authentication() -> None:
    tokens = iter([JWT, JWT + "x"])
    client = SaslClientExchange("OAUTHBEARER", "", "", token=lambda: next(tokens))
    for expected in (JWT, JWT + "x"):  # the second: a re-authentication reads the file again
        frame = client.start(0.0)
        step = client.receive(_broker_answer(frame, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}), 0.0)
        assert step.send is not None
        assert _sent_token(step.send) == f"n,,\x01auth=Bearer {expected}\x01\x01".encode()
        done = client.receive(_broker_answer(step.send, {
            "error_code": 0, "error_message": "", "auth_bytes": b"", "session_lifetime_ms": 60000}), 0.0)
        assert done.done and client.session_lifetime_ms == 60000


def test_oauthbearer_refusal_sends_the_separator_then_names_the_status_never_the_token() -> None:
    client = SaslClientExchange("OAUTHBEARER", "", "", token=lambda: JWT)
    frame = client.start(0.0)
    step = client.receive(_broker_answer(frame, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}), 0.0)
    assert step.send is not None
    challenge = client.receive(_broker_answer(step.send, {
        "error_code": 0, "error_message": "", "auth_bytes": b'{"status":"invalid_token"}',
        "session_lifetime_ms": 0}), 0.0)
    assert challenge.send is not None and _sent_token(challenge.send) == b"\x01"  # RFC 7628 3.2.3
    with pytest.raises(AuthenticationError) as info:
        client.receive(_broker_answer(challenge.send, {
            "error_code": 58, "error_message": '{"status":"invalid_token"}', "auth_bytes": b"",
            "session_lifetime_ms": 0}), 0.0)
    assert str(info.value) == "the broker refused the OAUTHBEARER token (invalid_token)"


@pytest.mark.parametrize("token", ["", "has space", "a\x01b", "ä", "x" * 70000],
                         ids=["empty", "space", "separator", "not-ascii", "too-long"])
def test_oauthbearer_token_that_is_not_one_is_refused_without_quoting_it(token: str) -> None:
    client = SaslClientExchange("OAUTHBEARER", "", "", token=lambda: token)
    frame = client.start(0.0)
    with pytest.raises(AuthenticationError, match="not a bearer token") as info:
        client.receive(_broker_answer(frame, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}), 0.0)
    assert token[:20] not in str(info.value) or not token


def test_oauthbearer_needs_a_token() -> None:
    with pytest.raises(ConfigurationError, match="OAUTHBEARER needs a token"):
        SaslClientExchange("OAUTHBEARER", "", "")


def _scram_as_kafka_s_client(exchange: SaslServerExchange, user: str, password: str) -> SaslOutcome:
    """SCRAM-SHA-256 as Kafka's Java client does it: the user name only escaped (``=2C``,
    ``=3D``), never SASLprep'd (scramp's client would normalise it)."""
    import base64
    import hashlib
    import hmac

    exchange.receive(handshake("SCRAM-SHA-256"), 0.0)
    bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r=clientnonce"
    out = exchange.receive(authenticate(f"n,,{bare}".encode()), 0.0)
    server_first = response(AUTHENTICATE, 2, out.reply)["auth_bytes"].decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={fields['r']}"
    message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return exchange.receive(authenticate(f"{without_proof},p={proof}".encode(), correlation_id=3), 0.0)


@pytest.mark.parametrize("user", ["al\u00adice", "\u2168", "a,b=c"])
def test_scram_user_names_are_looked_up_as_written_as_kafka_does(user: str) -> None:
    """Kafka's server unescapes =2C and =3D in a SCRAM user name and does nothing else (no
    SASLprep): a user stored under a name SASLprep would change logs in, as that name."""
    store = ScramCredentialStore({user: {"SCRAM-SHA-256": scram_credential("SCRAM-SHA-256", "pw",
                                                                           iterations=4096)}})
    exchange = SaslServerExchange(SaslServerConfig(("SCRAM-SHA-256",), scram_lookup=store.lookup),
                                  now=0.0)
    out = _scram_as_kafka_s_client(exchange, user, "pw")
    assert out.authenticated == KafkaPrincipal.user(user), out
