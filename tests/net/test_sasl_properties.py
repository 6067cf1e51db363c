"""Property tests of the server SASL exchange: thousands of random frame sequences and
handshake orders never authenticate wrongly, never raise, never hold more memory than a small
bound, and nothing but ApiVersions/SaslHandshake/SaslAuthenticate gets through before
authentication."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.net._principal import KafkaPrincipal
from lazyconv.net._sasl import (
    PlainUsers,
    SaslServerConfig,
    SaslServerExchange,
    SaslState,
    parse_plain_token,
    plain_token,
)
from lazyconv.net._scram_credentials import ScramCredentialStore, scram_credential
from tests.net.sasl_frames import (
    AUTHENTICATE,
    api_versions,
    authenticate,
    handshake,
    metadata,
    request,
)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_USERS = PlainUsers(USERS)
STORE = ScramCredentialStore({"alice": {"SCRAM-SHA-512": scram_credential("SCRAM-SHA-512",
                                                                          "alice-secret")}})
MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
CONFIG = SaslServerConfig(MECHANISMS, scram_lookup=STORE.lookup,
                          max_reauth_ms={"PLAIN": 3000, "SCRAM-SHA-512": 3000},
                          max_receive_size=4096)
SASL_KEYS = {17, 18, 36}

mechanism = st.sampled_from([*MECHANISMS, "GSSAPI", "OAUTHBEARER", "", "plain"])
user = st.sampled_from(["alice", "bob", "carol", "", "al\0ice"])
password = st.sampled_from(["alice-secret", "bob-secret", "wrong", "", "alice-secret\0x"])
plain_tokens = st.builds(lambda a, u, p: f"{a}\0{u}\0{p}".encode("utf-8", "surrogatepass"),
                         st.sampled_from(["", "alice", "bob"]), user, password)
scram_firsts = st.builds(lambda u, n: f"n,,n={u},r={n}".encode(), user,
                         st.text("abcdefghijklmnop0123456789", min_size=1, max_size=24))
tokens = st.one_of(plain_tokens, scram_firsts, st.binary(max_size=64),
                   st.builds(lambda n: b"x" * n, st.integers(4000, 5000)))


@st.composite
def other_request(draw: Any) -> bytes:
    key = draw(st.integers(-5, 80).filter(lambda k: k not in SASL_KEYS))
    version = draw(st.integers(0, 15))
    body = draw(st.binary(max_size=32))
    return (key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big")
            + draw(st.integers(0, 2**31 - 1)).to_bytes(4, "big") + b"\xff\xff" + body)


def with_version(frame: bytes, version: int) -> bytes:
    """The frame with its header's api_version replaced (versions no codec would write)."""
    return frame[:2] + version.to_bytes(2, "big", signed=True) + frame[4:]


frames = st.one_of(
    st.builds(handshake, mechanism, st.sampled_from([0, 1, 1]), st.integers(0, 99)),
    st.builds(with_version, st.builds(handshake, mechanism), st.sampled_from([2, -1, 300])),
    st.builds(authenticate, tokens, st.sampled_from([0, 1, 2, 2]), st.integers(0, 99)),
    st.builds(with_version, st.builds(authenticate, tokens), st.sampled_from([3, -2])),
    st.builds(api_versions, st.sampled_from([0, 1, 2, 3, 4])),
    st.builds(metadata, st.sampled_from([0, 1, 4])),
    tokens,  # raw tokens (or garbage where a request is expected)
    other_request(),
    st.binary(max_size=40),
)


def retained_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes an exchange holds of its own (its config, classes and functions excluded)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or obj is CONFIG or isinstance(obj, type) or callable(obj) and not hasattr(
            obj, "__dict__"):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(retained_size(k, seen) + retained_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(retained_size(v, seen) for v in obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        size += retained_size(vars(obj), seen)
    return size


def run(sequence: list[bytes], answers: list[bool] | None = None) -> None:
    exchange = SaslServerExchange(CONFIG, now=0.0)
    now = 0.0
    verified: dict[str, bool] = {}  # the PLAIN checks the driver made: user -> right password
    for frame in sequence:
        now += 0.4
        was = exchange.state
        out = exchange.receive(frame, now)
        if out.verify is not None:
            ok = PLAIN_USERS.check(out.verify)
            verified[out.verify.username] = ok
            out = exchange.complete_plain(ok, now)
        if out.authenticated is not None:
            name = out.authenticated.name
            # authenticated only as a user whose right password the check just confirmed, or
            # by a SCRAM proof (which random frames cannot forge)
            assert verified.get(name) is True or exchange.mechanism != "PLAIN", (name, verified)
            assert out.authenticated == KafkaPrincipal.user(name) and name in USERS
            assert exchange.state is SaslState.COMPLETE
        if was is not SaslState.COMPLETE and out.forward:
            # before authentication only ApiVersions is forwarded
            assert frame[:2] == b"\x00\x12", frame[:8]
        if was in (SaslState.INITIAL, SaslState.HANDSHAKE) and len(frame) >= 2:
            key = int.from_bytes(frame[:2], "big", signed=True)
            if key not in SASL_KEYS:
                assert out.close and out.reply is None and not out.forward
        if out.close:
            assert exchange.state is SaslState.FAILED
            assert not exchange.receive(metadata(), now).forward
            break
        assert retained_size(exchange) < 16384, retained_size(exchange)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None)
@given(st.lists(frames, max_size=12))
def test_random_frames_never_authenticate_wrongly_or_raise(sequence: list[bytes]) -> None:
    run(sequence)


@settings(max_examples=25, deadline=None)
@given(st.lists(frames, max_size=6))
def test_random_frames_quick(sequence: list[bytes]) -> None:
    run(sequence)


GOOD = {
    "api_versions": api_versions(3),
    "handshake_plain": handshake("PLAIN"),
    "handshake_plain_v0": handshake("PLAIN", 0),
    "auth_alice": authenticate(plain_token("alice", "alice-secret")),
    "auth_alice_wrong": authenticate(plain_token("alice", "nope")),
    "raw_alice": plain_token("alice", "alice-secret"),
    "metadata": metadata(1),
    "handshake_scram": handshake("SCRAM-SHA-512"),
    "sasl_after": request(AUTHENTICATE, 1, {"auth_bytes": b""}),
}


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(sorted(GOOD)), max_size=10))
def test_random_handshake_orders(order: list[str]) -> None:
    run([GOOD[name] for name in order])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted(GOOD)), max_size=6))
def test_random_handshake_orders_quick(order: list[str]) -> None:
    run([GOOD[name] for name in order])


def test_the_right_order_authenticates() -> None:
    # the property tests above would pass vacuously if nothing ever authenticated
    exchange = SaslServerExchange(CONFIG, now=0.0)
    for frame in (api_versions(3), handshake("PLAIN")):
        assert not exchange.receive(frame, 0.0).close
    out = exchange.receive(authenticate(plain_token("alice", "alice-secret")), 0.0)
    assert out.verify is not None and parse_plain_token(plain_token("alice", "x")).username == "alice"
    assert exchange.complete_plain(PLAIN_USERS.check(out.verify), 0.0).authenticated
