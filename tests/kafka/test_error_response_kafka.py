"""lazyconv's error answers against Kafka's own, run live: ``ErrorResponseReference.java``
(beside this file) parses each request as a broker does and asks it for its
``getErrorResponse`` through each distribution's kafka-clients, and ``error_response`` must give
the same answer, field by field (as a client decodes it), for every API and version of
``KAFKA_APIS`` the distribution serves, requests with every field set and with every nullable
field null, and each error code a gateway refuses with. lazyconv answers as Kafka 4.0.1 does;
Kafka 3.9.0 holds the versions 4.0.1 no longer serves, and the others, but where 4.0.1 changed
the answer and lazyconv does as 4.0.1 at every version (``NOT_3_9``).
tests/protocol/test_error_response.py pins the same answers as a table without Java."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from java_reference import run_java_reference

from lazyconv.protocol import KAFKA_APIS, ApiSpec
from lazyconv.protocol._error_messages import _MESSAGES
from lazyconv.protocol._error_response import error_response
from tests.protocol.schema_values import refused_requests

pytestmark = pytest.mark.kafka

SOURCE = Path(__file__).with_name("ErrorResponseReference.java")
# UNSUPPORTED_VERSION (an API or version not routed), REQUEST_TIMED_OUT (no upstream answered),
# COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER (the gateway's own refusals)
CODES = (35, 7, 15, 6)
# requests Kafka's getErrorResponse cannot answer: Produce with null records (partitionSizes
# reads their size), DescribeUserScramCredentials asking for every user (null users)
KAFKA_FAILS = {("Produce", "null-fields"), ("Produce", "null"),
               ("DescribeUserScramCredentials", "null")}


def _fetch_records_null(answer: dict[str, Any]) -> dict[str, Any]:
    for topic in answer.get("responses") or []:
        for partition in topic["partitions"]:
            if partition["records"] == b"":
                partition["records"] = None
    return answer


# (API, version) -> what 3.9.0's answer has where lazyconv's is 4.0.1's: Fetch's partitions carry
# null records in 3.9.0, MemoryRecords.EMPTY in 4.0.1 (FetchResponse.partitionResponse), and in
# lazyconv's at v0-3 too (librdkafka refuses null records there: docs/differences.md)
NOT_3_9 = {("Fetch", version): _fetch_records_null for version in range(13)}


@pytest.fixture(scope="module", params=["3", "4"])
def kafka_answers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    dist: Path = request.getfixturevalue("kafka_dist_3" if request.param == "3" else "kafka_dist")
    cases: dict[str, tuple[ApiSpec, int, str, int, dict[str, Any]]] = {}
    inputs: dict[str, bytes] = {}
    for spec in KAFKA_APIS:
        for version in range(spec.min_version, spec.max_version + 1):
            for shape, body in refused_requests(spec.request, version).items():
                data = spec.encode_request(version, body)
                for code in CODES:
                    name = f"{spec.key}-{version}-{code}-{shape}"
                    cases[name] = (spec, version, shape, code, spec.decode_request(version, data))
                    inputs[name] = struct.pack(">hhh", spec.key, version, code) + data
    work = tmp_path_factory.mktemp(f"error-response-{request.param}")
    files = run_java_reference(dist, SOURCE, work, inputs)
    return request.param, cases, files


def test_error_answers_equal_kafkas(kafka_answers) -> None:
    release, cases, files = kafka_answers
    differ, failed, served = [], [], 0
    for name, (spec, version, shape, code, request) in cases.items():
        path = files[name]
        if Path(f"{path}.unsupported").exists():
            continue
        if Path(f"{path}.err").exists():
            if (spec.name, shape) not in KAFKA_FAILS:
                failed.append(f"{name}: {Path(f'{path}.err').read_text()[:200]}")
            continue
        served += 1
        kafka = spec.decode_response(version, Path(f"{path}.out").read_bytes())
        ours = spec.decode_response(version, spec.encode_response(
            version, error_response(spec, version, request, code)))
        if release == "3" and (spec.name, version) in NOT_3_9:
            ours = NOT_3_9[(spec.name, version)](ours)
        if ours != kafka:
            differ.append(f"{spec.name} v{version} {shape} code {code}: lazyconv {ours}, "
                          f"Kafka {kafka}"[:800])
    assert not failed, failed
    assert served > 1000, served  # every API answered, not a distribution refusing everything
    assert not differ, differ[:20]


def test_error_messages_are_kafkas(tmp_path: Path, kafka_dist: Path) -> None:
    """The messages of _error_messages are Kafka's Errors.message(), code by code (FindCoordinator
    v3 carries the message of the code it is refused with)."""
    spec = next(s for s in KAFKA_APIS if s.name == "FindCoordinator")
    request = spec.encode_request(3, {"key": "g", "key_type": 0})
    inputs = {str(code): struct.pack(">hhh", spec.key, 3, code) + request for code in _MESSAGES}
    files = run_java_reference(kafka_dist, SOURCE, tmp_path, inputs)
    kafka = {}
    for path in files.values():
        if Path(f"{path}.out").exists():
            answer = spec.decode_response(3, Path(f"{path}.out").read_bytes())
            kafka[answer["error_code"]] = answer["error_message"]
    assert kafka == _MESSAGES
