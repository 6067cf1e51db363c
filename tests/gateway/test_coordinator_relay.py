"""Requests relayed to a transaction's coordinator, against a stand-in broker (no cluster): a
coordinator that moved is forgotten whatever field of the answer says so. And the config relay's
reading of a broker resource's name."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace
from typing import Any

import pytest

from lazyconv._send import drain
from lazyconv.errors import ErrorCode
from lazyconv.gateway._api_relay import ApiRelay
from lazyconv.gateway._coordinators import Coordinators
from lazyconv.gateway._relayed import Relayed
from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY
from lazyconv.net._model import Listener
from lazyconv.protocol import KAFKA_API_BY_KEY
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _end_txn as end_txn
from lazyconv.protocol._connection import Request, response_frame
from lazyconv.protocol._headers import decode_response_header
from lazyconv.protocol._primitives import Reader

NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
TRANSACTION = 1  # FindCoordinator's key type of a transactional id


class _Broker:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    async def relay(self, spec: Any, version: int, payload: Any, timeout: float | None = None) -> bytes:
        return response_frame(1, spec.response_header_version(version),
                              spec.encode_response(version, self.answer))[4:]


class _Session:
    identity = ANONYMOUS_IDENTITY

    def __init__(self, broker: _Broker) -> None:
        self.broker = broker
        self.cluster = SimpleNamespace(request_timeout=30, state=None)

    async def connection(self, node: int) -> _Broker:
        return self.broker

    async def any_connection(self) -> _Broker:
        return self.broker


def _relay(spec: Any, version: int, body: dict[str, Any], answer: dict[str, Any]) -> Coordinators:
    """``body`` relayed to the coordinator of transaction "txn" (cached: broker 1), which
    answers ``answer``; the coordinators cache afterwards."""
    cluster = SimpleNamespace(brokers={1: "a", 2: "b"}, state=SimpleNamespace(warn=lambda *a: None))
    coordinators = Coordinators(cluster)
    coordinators._nodes[(ANONYMOUS_IDENTITY.key, TRANSACTION, "txn")] = 1
    request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                      memoryview(spec.encode_request(version, body)), 0)
    relayed = Relayed(request, body, _Session(_Broker(answer)), None)
    asyncio.run(ApiRelay(cluster, coordinators)._to_coordinator(relayed, TRANSACTION, "txn"))
    return coordinators


@pytest.mark.parametrize("api", ["AddPartitionsToTxn v3 (per partition)", "EndTxn v3 (top level)"])
def test_a_coordinator_that_moved_is_forgotten(api: str) -> None:
    """NOT_COORDINATOR from the cached coordinator: the gateway asks the cluster again at the
    client's next FindCoordinator. AddPartitionsToTxn v0-3 says it per partition only
    (``partition_error_code``), which was missed, so the producer was sent back to the old
    coordinator until its transaction timed out (found by a review)."""
    if api.startswith("AddPartitionsToTxn"):
        coordinators = _relay(add_partitions_to_txn.SPEC, 3, {
            "v3_and_below_transactional_id": "txn", "v3_and_below_producer_id": 5,
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]},
            {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
                {"name": "t", "results_by_partition": [
                    {"partition_index": 0, "partition_error_code": NOT_COORDINATOR}]}]})
    else:
        coordinators = _relay(end_txn.SPEC, 3, {"transactional_id": "txn", "producer_id": 5,
                                                "producer_epoch": 0, "committed": True},
                              {"throttle_time_ms": 0, "error_code": NOT_COORDINATOR})
    assert coordinators.cached(TRANSACTION, "txn") is None


def test_a_broker_resource_named_by_a_digit_int_refuses_is_relayed() -> None:
    """DescribeConfigs for a BROKER resource named "\u00b2": ``str.isdigit()`` took it for a
    broker id, ``int()`` refused it, and the ValueError closed the client's connection (found by
    a review). It goes to any broker, as any name that is no broker's id does."""
    spec, version = KAFKA_API_BY_KEY[32], 4
    body = {"resources": [{"resource_type": 4, "resource_name": "\u00b2",
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    broker = _Broker({"throttle_time_ms": 0, "results": [
        {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": None,
         "resource_type": 4, "resource_name": "\u00b2", "configs": []}]})
    cluster = SimpleNamespace(brokers={1: "a", 2: "b"}, request_timeout=30, state=None)
    session = _Session(broker)
    session.cluster = cluster
    request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                      memoryview(spec.encode_request(version, body)), 0)
    response = asyncio.run(ApiRelay(cluster, Coordinators(cluster)).relay(  # type: ignore[arg-type]
        request, session, Listener(0, "gateway", 9092)))  # type: ignore[arg-type]
    out = io.BytesIO()
    drain(response.send, out)
    reader = Reader(out.getvalue()[4:])
    decode_response_header(reader, spec.response_header_version(version))
    answer = spec.decode_response(version, reader)
    assert [(r["resource_name"], r["error_code"]) for r in answer["results"]] == [
        ("\u00b2", int(ErrorCode.INVALID_REQUEST))]


class _CutBroker(_Broker):
    """Answers with the first bytes of the answer only: a frame that does not decode."""

    async def relay(self, spec: Any, version: int, payload: Any, timeout: float | None = None) -> bytes:
        return (await super().relay(spec, version, payload, timeout))[:5]


def test_a_coordinator_whose_answer_does_not_decode_is_forgotten() -> None:
    """The cached coordinator answers with a frame that does not decode: the request is answered
    COORDINATOR_NOT_AVAILABLE, which sends the client to FindCoordinator, and the gateway
    forgot the coordinator after a lost connection or a NOT_COORDINATOR, but not after this,
    so it named the same broker again and the client's retries met the same answer (found by
    a review). It is forgotten: the next request asks the cluster where the coordinator is."""
    spec, version = end_txn.SPEC, 3
    body = {"transactional_id": "txn", "producer_id": 5, "producer_epoch": 0, "committed": True}
    cluster = SimpleNamespace(brokers={1: "a", 2: "b"}, state=SimpleNamespace(warn=lambda *a: None))
    coordinators = Coordinators(cluster)  # type: ignore[arg-type]
    coordinators._nodes[(ANONYMOUS_IDENTITY.key, TRANSACTION, "txn")] = 1
    request = Request(spec, version, {"correlation_id": 7, "client_id": "c"},
                      memoryview(spec.encode_request(version, body)), 0)
    relayed = Relayed(request, body, _Session(_CutBroker({"throttle_time_ms": 0, "error_code": 0})),
                      None)  # type: ignore[arg-type]
    response = asyncio.run(ApiRelay(cluster, coordinators)._to_coordinator(  # type: ignore[arg-type]
        relayed, TRANSACTION, "txn"))
    out = io.BytesIO()
    drain(response.send, out)
    reader = Reader(out.getvalue()[4:])
    decode_response_header(reader, spec.response_header_version(version))
    assert spec.decode_response(version, reader)["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinators.cached(TRANSACTION, "txn") is None
