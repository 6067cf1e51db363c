"""KAFKA_APIS, every API a Kafka 4.0.1 broker listener serves: the table, and every declaration
encoding and decoding its own messages at every version (requests and responses alike).

The declarations' facts are checked against Kafka itself elsewhere: a live 4.0.1 broker
(tests/kafka/test_kafka_apis_live.py) and kafka-python's codecs generated from Kafka's message
JSON (tests/protocol/test_kafka_python_round_trips.py).
"""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyconv.protocol import ALL_APIS, API_BY_KEY, KAFKA_API_BY_KEY, KAFKA_APIS, ApiSpec
from lazyconv.protocol._registry import api_versions_table
from lazyconv.protocol._schema import Struct
from tests.protocol.schema_values import after_round_trip, every_field_set, message_values

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

# What a Kafka 4.0.1 broker listener answers in ApiVersions (key: min, max), as asked of one; the
# live test asks again. Produce's 0-2 are advertised (a librdkafka workaround) but refused.
KAFKA_4_0_1_BROKER = {
    0: (0, 12), 1: (4, 17), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1),
    28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 4),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2),
    44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0),
    55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 1), 68: (0, 1),
    69: (0, 1), 74: (0, 0), 75: (0, 0), 80: (0, 0), 81: (0, 0),
}

MESSAGES = [
    (spec, kind, version)
    for spec in KAFKA_APIS
    for kind in ("request", "response")
    for version in range(spec.min_version, spec.max_version + 1)
]
IDS = [f"{spec.name}-{kind}-v{version}" for spec, kind, version in MESSAGES]


def _schema(spec: ApiSpec, kind: str) -> Struct:
    return spec.request if kind == "request" else spec.response


def _round_trip(spec: ApiSpec, kind: str, version: int, value: dict[str, Any]) -> None:
    encode = spec.encode_request if kind == "request" else spec.encode_response
    decode = spec.decode_request if kind == "request" else spec.decode_response
    data = encode(version, value)
    decoded = decode(version, data)  # exact: no byte left over
    assert decoded == after_round_trip(_schema(spec, kind), value, version)
    assert encode(version, decoded) == data


# -- the table -------------------------------------------------------------------------------


def test_kafka_apis_declare_every_api_a_kafka_4_0_1_broker_serves() -> None:
    assert [spec.key for spec in KAFKA_APIS] == sorted(KAFKA_4_0_1_BROKER)
    assert dict(KAFKA_API_BY_KEY) == {spec.key: spec for spec in KAFKA_APIS}
    short = {spec.name: ((spec.min_version, spec.max_version), KAFKA_4_0_1_BROKER[spec.key])
             for spec in KAFKA_APIS
             if spec.min_version > KAFKA_4_0_1_BROKER[spec.key][0]
             or spec.max_version < KAFKA_4_0_1_BROKER[spec.key][1]}
    assert short == {}


def test_names_are_unique_and_headers_follow_flexibility() -> None:
    assert len({spec.name for spec in KAFKA_APIS}) == len(KAFKA_APIS)
    for spec in KAFKA_APIS:
        for version in range(spec.min_version, spec.max_version + 1):
            flexible = spec.is_flexible(version)
            assert spec.request_header_version(version) == (2 if flexible else 1)
            assert spec.response_header_version(version) == (
                0 if spec.key == 18 else (1 if flexible else 0))


def test_serves_apis_are_the_same_declarations_at_their_old_ranges() -> None:
    """One schema per API: KAFKA_APIS widens serve's ranges, never redeclares them."""
    for spec in ALL_APIS:
        wide = KAFKA_API_BY_KEY[spec.key]
        assert wide.request is spec.request and wide.response is spec.response
        assert wide.first_flexible == spec.first_flexible
        assert wide.min_version <= spec.min_version and wide.max_version >= spec.max_version


def test_serves_api_versions_table_is_unchanged() -> None:
    """What ``serve`` advertises stays what it answers (ALL_APIS), whatever KAFKA_APIS adds."""
    assert {row["api_key"]: (row["min_version"], row["max_version"])
            for row in api_versions_table()} == {
        0: (0, 11), 1: (0, 17), 2: (0, 8), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4),
        11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 18: (0, 4),
        22: (0, 5), 24: (0, 3), 25: (0, 3), 26: (0, 3), 28: (0, 3)}
    assert set(API_BY_KEY) < set(KAFKA_API_BY_KEY)


# -- every declaration round-trips -------------------------------------------------------------


@pytest.mark.parametrize(("spec", "kind", "version"), MESSAGES, ids=IDS)
def test_every_field_set_round_trips(spec: ApiSpec, kind: str, version: int) -> None:
    _round_trip(spec, kind, version, every_field_set(_schema(spec, kind), version))


@pytest.mark.parametrize(("spec", "kind", "version"), MESSAGES, ids=IDS)
def test_defaults_round_trip(spec: ApiSpec, kind: str, version: int) -> None:
    _round_trip(spec, kind, version, {})


@st.composite
def _any_message(draw: st.DrawFn) -> tuple[ApiSpec, str, int, dict[str, Any]]:
    spec, kind, version = draw(st.sampled_from(MESSAGES))
    return spec, kind, version, draw(message_values(_schema(spec, kind), version))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_any_message())
@pytest.mark.slow  # over a second: kept out of the quick look
def test_random_messages_round_trip(case: tuple[ApiSpec, str, int, dict[str, Any]]) -> None:
    _round_trip(*case)


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "kind", "version"), MESSAGES, ids=IDS)
def test_many_random_messages_round_trip_at_every_version(spec: ApiSpec, kind: str,
                                                          version: int) -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(message_values(_schema(spec, kind), version))
    def run(value: dict[str, Any]) -> None:
        _round_trip(spec, kind, version, value)

    run()


@pytest.mark.slow  # a fresh interpreter
def test_import_lazyconv_does_not_load_the_kafka_only_declarations() -> None:
    """KAFKA_APIS loads on first use: ``import lazyconv`` stays what serve needs."""
    code = ("import sys, lazyconv, lazyconv.protocol; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('lazyconv.protocol'))))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    from lazyconv import protocol
    from lazyconv.protocol import _kafka_apis

    declarations = {m.__name__ for m in vars(_kafka_apis).values() if isinstance(m, types.ModuleType)}
    assert len(declarations) == len(KAFKA_APIS) == 61
    assert "lazyconv.protocol._kafka_apis" not in loaded
    assert len(declarations - loaded) == len(KAFKA_APIS) - len(ALL_APIS)  # 42 left unloaded
    assert protocol.KAFKA_APIS is KAFKA_APIS  # the lazy name resolves to the one table
