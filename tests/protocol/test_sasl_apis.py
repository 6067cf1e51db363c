"""SaslHandshake (17) and SaslAuthenticate (36), every version, against kafka-python's codecs
(generated from Kafka's own message JSON): our bytes decode there and re-encode identically.
They are not in ALL_APIS yet (the served tables are decided where the front door serves them),
so test_kafka_python_round_trips.py does not cover them."""

from __future__ import annotations

import pytest

from lazyconv.errors import RemoteProtocolError
from lazyconv.protocol import _sasl_authenticate, _sasl_handshake
from tests.protocol.test_kafka_python_round_trips import sample

sasl = pytest.importorskip("kafka.protocol.sasl")

SPECS = (_sasl_handshake.SPEC, _sasl_authenticate.SPEC)
CASES = [(spec, version, kind) for spec in SPECS
         for version in range(spec.min_version, spec.max_version + 1)
         for kind in ("request", "response")]


@pytest.mark.parametrize(("spec", "version", "kind"), CASES,
                         ids=[f"{s.name}-v{v}-{k}" for s, v, k in CASES])
def test_round_trip_through_kafka_python(spec, version: int, kind: str) -> None:
    cls = getattr(sasl, spec.name + kind.capitalize())
    struct = spec.request if kind == "request" else spec.response
    body = sample(struct)
    ours = (spec.encode_request(version, body) if kind == "request"
            else spec.encode_response(version, body))
    theirs = cls.decode(ours, version=version)
    if not hasattr(theirs, "_header"):
        theirs._header = None
    assert theirs.encode(version=version) == ours
    decode = spec.decode_request if kind == "request" else spec.decode_response
    decoded = decode(version, ours)
    assert (spec.encode_request(version, decoded) if kind == "request"
            else spec.encode_response(version, decoded)) == ours
    present = {f.name for f in struct.fields if f.present_in(version)}
    assert {k: v for k, v in decoded.items() if k in present} == {
        k: v for k, v in body.items() if k in present}


def test_known_bytes() -> None:
    # SaslHandshake v1 request "PLAIN"; response: no error, [PLAIN, SCRAM-SHA-512]
    assert _sasl_handshake.SPEC.encode_request(1, {"mechanism": "PLAIN"}) == b"\x00\x05PLAIN"
    assert _sasl_handshake.SPEC.encode_response(0, {"error_code": 0, "mechanisms": [
        "PLAIN", "SCRAM-SHA-512"]}) == (b"\x00\x00\x00\x00\x00\x02\x00\x05PLAIN"
                                         b"\x00\x0dSCRAM-SHA-512")
    # SaslAuthenticate v2 (flexible): compact bytes, tagged-field section
    assert _sasl_authenticate.SPEC.encode_request(2, {"auth_bytes": b"ab"}) == b"\x03ab\x00"
    # v1 response carries the session lifetime; v0 has none; error message nullable
    v1 = _sasl_authenticate.SPEC.encode_response(1, {"error_code": 0, "error_message": None,
                                                      "auth_bytes": b"", "session_lifetime_ms": 5})
    assert v1 == b"\x00\x00\xff\xff\x00\x00\x00\x00" + (5).to_bytes(8, "big")
    v0 = _sasl_authenticate.SPEC.encode_response(0, {"error_code": 58, "error_message": "x",
                                                      "auth_bytes": b""})
    assert v0 == b"\x00\x3a\x00\x01x\x00\x00\x00\x00"


def test_versions_and_headers() -> None:
    hs, auth = _sasl_handshake.SPEC, _sasl_authenticate.SPEC
    assert (hs.key, hs.min_version, hs.max_version, hs.first_flexible) == (17, 0, 1, None)
    assert (auth.key, auth.min_version, auth.max_version, auth.first_flexible) == (36, 0, 2, 2)
    assert auth.request_header_version(2) == 2 and auth.response_header_version(2) == 1
    assert hs.request_header_version(1) == 1 and hs.response_header_version(1) == 0
    with pytest.raises(RemoteProtocolError):
        auth.decode_request(3, b"\x00")
    with pytest.raises(RemoteProtocolError):
        hs.decode_request(1, b"\x00\x09PLA")  # a string running past the end

