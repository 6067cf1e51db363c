"""Every API key Kafka 4 defines, at every version the gateway advertises, through the gateway in
front of a Kafka 4.0.1 node (marker ``kafka``): answered — with a response that decodes exactly —
or refused with an error code, never a crash, a hang or a closed connection for a well-formed
request. The bodies: a minimal sensible one per API (tests/minimal_requests.py), bodies drawn
from the declarations (hypothesis, bounded: two per API and version, integers kept small and
changes validate-only so that the broker stays usable), and random bytes after a valid header (those
may close the connection, as a broker does, but never take the gateway down or hang). The APIs
the gateway does not route are answered UNSUPPORTED_VERSION at every declared version.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kafka_broker import KafkaBroker
from minimal_requests import MINIMAL

from lazyconv.gateway._apis import NOT_ROUTED
from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS, ApiSpec
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import ArrayOf, ScalarType, Struct
from tests.gateway.conftest import GatewayThread
from tests.protocol.schema_values import every_field_set, message_values

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

ANSWER_TIMEOUT_S = 40  # the gateway's upstream timeout (10 s) plus the longest wait field
UNSUPPORTED_VERSION = 35
_INTS = ("int8", "int16", "int32", "int64", "uint16")


@pytest.fixture(scope="module")
def broker(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A node of its own: the drawn requests create users, topics and transactions."""
    node = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("every-api") / "broker")
    node.start()
    try:
        yield node
    finally:
        node.stop()


class _Errors(logging.Handler):
    """The gateway's errors (a bug serving a request is logged at ERROR)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def gateway(broker: KafkaBroker) -> Iterator[GatewayThread]:
    errors = _Errors()
    logging.getLogger("lazyconv").addHandler(errors)
    gateway = GatewayThread(broker.bootstrap, request_timeout_ms=10000)
    try:
        yield gateway
    finally:
        gateway.stop()
        logging.getLogger("lazyconv").removeHandler(errors)
    crashes = [r.getMessage() for r in errors.records]
    assert not crashes, f"the gateway logged errors: {crashes[:5]}"


@pytest.fixture(scope="module")
def advertised(gateway: GatewayThread) -> dict[int, tuple[int, int]]:
    answer = _call(gateway.port, KAFKA_API_BY_KEY[18], 3, {"client_software_name": "t",
                                                           "client_software_version": "1"})
    assert answer is not None and answer["error_code"] == 0
    return {e["api_key"]: (e["min_version"], e["max_version"]) for e in answer["api_keys"]}


def _exchange(port: int, spec: ApiSpec, version: int, body: bytes) -> bytes | None:
    """One request on a connection of its own: the response frame, or None when the gateway
    closed the connection. A hang fails the test (socket timeout)."""
    header = encode_request_header(spec.request_header_version(version), spec.key, version, 7,
                                   "every-api")
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        data = bytearray()
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    return None
                data += chunk
        except ConnectionResetError:
            return None
        except TimeoutError:
            raise AssertionError(f"{spec.name} v{version}: no answer within "
                                 f"{ANSWER_TIMEOUT_S} s") from None
    return bytes(data[4:])


def _call(port: int, spec: ApiSpec, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
    """The decoded answer (exactly: no byte left over); None when the connection closed."""
    frame = _exchange(port, spec, version, spec.encode_request(version, body))
    if frame is None:
        return None
    reader = Reader(frame)
    assert decode_response_header(reader, spec.response_header_version(version))["correlation_id"] == 7
    return spec.decode_response(version, reader, exact=True)


def _tame(struct: Struct, value: dict[str, Any], version: int) -> dict[str, Any]:
    """A drawn body made harmless: integers in [-1, 3] (partition counts, timeouts, acks...),
    validate_only set, Produce's acks never 0 (no answer is due then)."""
    out = dict(value)
    for f in struct.fields:
        if f.name not in out or out[f.name] is None:
            continue
        item = out[f.name]
        if isinstance(f.type, ScalarType) and f.type.name in _INTS:
            out[f.name] = max(min(item, 3), -1) if f.type.name != "uint16" else min(item, 3)
        elif f.name == "validate_only":
            out[f.name] = True
        elif isinstance(f.type, Struct):
            out[f.name] = _tame(f.type, item, version)
        elif isinstance(f.type, ArrayOf) and isinstance(f.type.element, Struct):
            out[f.name] = [_tame(f.type.element, e, version) for e in item]
        elif isinstance(f.type, ArrayOf) and f.type.element.name in _INTS:
            out[f.name] = [max(min(e, 3), -1) for e in item]
    if struct.name == "ProduceRequest" and out.get("acks", 0) == 0:
        out["acks"] = 1
    return out


def _served(spec: ApiSpec, advertised: dict[int, tuple[int, int]]) -> range:
    low, high = advertised[spec.key]
    return range(low, high + 1)


ROUTED = [spec for spec in KAFKA_APIS if spec.key not in NOT_ROUTED]


@pytest.mark.parametrize("spec", ROUTED, ids=lambda s: s.name)
def test_a_minimal_request_is_answered_at_every_advertised_version(
        spec: ApiSpec, gateway: GatewayThread, advertised: dict[int, tuple[int, int]]) -> None:
    assert spec.key in advertised, f"{spec.name} is routed but not advertised"
    for version in _served(spec, advertised):
        answer = _call(gateway.port, spec, version, MINIMAL[spec.name])
        assert answer is not None, f"{spec.name} v{version}: the connection was closed"


def _codes(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [c for k, v in value.items()
                for c in ([v] if k == "error_code" else _codes(v))]
    if isinstance(value, list):
        return [c for v in value for c in _codes(v)]
    return []


@pytest.mark.parametrize("spec", [KAFKA_API_BY_KEY[k] for k in sorted(NOT_ROUTED)],
                         ids=lambda s: s.name)
def test_an_api_not_routed_is_refused_with_unsupported_version(
        spec: ApiSpec, gateway: GatewayThread, advertised: dict[int, tuple[int, int]]) -> None:
    """Sent anyway (every field set, one element in every list), it is answered with
    UNSUPPORTED_VERSION wherever the answer carries a code."""
    assert spec.key not in advertised
    for version in range(spec.min_version, spec.max_version + 1):
        answer = _call(gateway.port, spec, version, every_field_set(spec.request, version))
        assert answer is not None, f"{spec.name} v{version}: the connection was closed"
        assert set(_codes(answer)) == {UNSUPPORTED_VERSION}, (spec.name, version, answer)


@pytest.mark.parametrize("spec", ROUTED, ids=lambda s: s.name)
@settings(max_examples=2, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.generate],  # a failure is reported, not shrunk for minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_drawn_and_random_bodies_are_answered_or_refused(
        spec: ApiSpec, gateway: GatewayThread, advertised: dict[int, tuple[int, int]],
        data: st.DataObject) -> None:
    for version in _served(spec, advertised):
        body = _tame(spec.request, data.draw(message_values(spec.request, version),
                                             label=f"v{version} body"), version)
        answer = _call(gateway.port, spec, version, body)
        assert answer is not None, f"{spec.name} v{version} {body!r}: the connection was closed"
        garbage = data.draw(st.binary(max_size=48), label=f"v{version} random body")
        _exchange(gateway.port, spec, version, garbage)  # answered or closed: either is fine
    # the gateway still serves
    alive = _call(gateway.port, KAFKA_API_BY_KEY[3], 12, {"topics": [],
                                                          "allow_auto_topic_creation": False})
    assert alive is not None and alive["brokers"]
