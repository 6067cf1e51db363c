"""Transaction verification of Produce (KIP-890 part 1), serve against Kafka 4.x
(LAZYCONV_KAFKA_DIST): the same raw requests - InitProducerId, AddPartitionsToTxn, Produce of a
transactional batch at every version both serve (v3-v11), EndTxn - go to the session's broker
and to ``lazyconv serve`` over an empty log directory with the same topic, and the Produce
answers must carry the same error codes (and, where Kafka words one, the same message): an
unknown transactional id or producer id, a fenced epoch, a partition no AddPartitionsToTxn named,
no transactional id in the request, transactional batches of two producers in one request, and
the normal path with a batch continuing the transaction.

Each side uses the producer ids and epochs its own InitProducerId handed out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import KafkaBroker

from lazyconv.protocol import KAFKA_API_BY_KEY
from lazyconv.protocol import _produce as produce
from lazyconv.records import RecordsBuilder
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread

pytestmark = pytest.mark.kafka

VERSIONS = range(3, 12)  # Kafka 4 refuses Produce v0-v2; serve serves up to v11
INIT, ADD, END = (KAFKA_API_BY_KEY[k] for k in (22, 24, 26))
RETRIED = {14, 15, 16, 51}  # a coordinator still loading or moving, a transaction still ending


class Side:
    """One broker seen through raw requests."""

    def __init__(self, port: int, topic: str) -> None:
        self.client = WireClient(port, "txn-verification", timeout=30)
        self.topic = topic

    def _call(self, spec: Any, version: int, body: dict[str, Any], code_of: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while True:
            answer = self.client.call(spec, version, body)
            if code_of(answer) not in RETRIED or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def init(self, transactional_id: str) -> tuple[int, int]:
        # a broker creates __transaction_state, and becomes the id's coordinator, when asked
        found = self._call(KAFKA_API_BY_KEY[10], 4, {"key_type": 1, "coordinator_keys": [transactional_id]},
                           lambda a: a["coordinators"][0]["error_code"])
        assert found["coordinators"][0]["error_code"] == 0, found
        answer = self._call(INIT, 4, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000},
                            lambda a: a["error_code"])
        assert answer["error_code"] == 0, answer
        return answer["producer_id"], answer["producer_epoch"]

    def add(self, transactional_id: str, pid: int, epoch: int, partition: int) -> None:
        answer = self._call(ADD, 3, {
            "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": [partition]}]},
            lambda a: a["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"])
        assert answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0

    def end(self, transactional_id: str, pid: int, epoch: int, commit: bool) -> int:
        answer = self._call(END, 3, {"transactional_id": transactional_id, "producer_id": pid,
                                     "producer_epoch": epoch, "committed": commit}, lambda a: a["error_code"])
        code: int = answer["error_code"]
        return code

    def produce(self, version: int, transactional_id: str | None, partition: int, pid: int, epoch: int,
                sequence: int = 0) -> tuple[int, str | None, int]:
        (answer,) = self.produce_many(version, transactional_id, [(partition, pid, epoch, sequence)])
        return answer

    def produce_many(self, version: int, transactional_id: str | None,
                     batches: list[tuple[int, int, int, int]]) -> list[tuple[int, str | None, int]]:
        """One request: a transactional batch (partition, producer id, epoch, sequence) each."""
        data = []
        for partition, pid, epoch, sequence in batches:
            builder = RecordsBuilder(2, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                     is_transactional=True)
            for i in range(2):
                builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i)
            data.append({"index": partition, "records": builder.build()})
        answer = self.client.call(produce.SPEC, version, {
            "transactional_id": transactional_id, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": self.topic, "partition_data": data}]})
        return [(part["error_code"], part["error_message"] if version >= 8 else None, part["base_offset"])
                for part in answer["responses"][0]["partition_responses"]]


def _outcomes(side: Side, run: str) -> dict[str, Any]:
    """What every case answers on one side (codes and messages per Produce version)."""
    tx, fenced = f"lazyconv-verify-{run}", f"lazyconv-verify-fenced-{run}"
    pid, epoch = side.init(tx)
    found: dict[str, Any] = {}

    def each_version(name: str, tid: str | None, partition: int, producer: int, producer_epoch: int) -> None:
        found[name] = {v: side.produce(v, tid, partition, producer, producer_epoch)[:2] for v in VERSIONS}

    each_version("unknown transactional id", f"lazyconv-nobody-{run}", 0, pid, epoch)
    each_version("another producer id", tx, 0, pid + 1, epoch)
    each_version("no transactional id", None, 0, pid, epoch)
    found["two producers"] = {v: side.produce_many(v, tx, [(0, pid, epoch, 0), (1, pid + 1, epoch, 0)])
                              for v in VERSIONS}
    found["two epochs"] = {v: side.produce_many(v, tx, [(0, pid, epoch, 0), (1, pid, epoch + 1, 0)])
                           for v in VERSIONS}
    old_pid, old_epoch = side.init(fenced)
    new_pid, new_epoch = side.init(fenced)
    assert (new_pid, new_epoch) == (old_pid, old_epoch + 1)
    each_version("fenced epoch", fenced, 0, old_pid, old_epoch)

    side.add(tx, pid, epoch, 0)
    found["added partition"] = side.produce(11, tx, 0, pid, epoch, 0)
    each_version("partition not added", tx, 1, pid, epoch)
    found["continuing, without the transactional id"] = side.produce(9, None, 0, pid, epoch, 2)
    found["continuing"] = side.produce(9, tx, 0, pid, epoch, 2)
    found["commit"] = side.end(tx, pid, epoch, True)
    return found


@pytest.fixture
def sides(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    """The session's broker and a serve, each with a fresh two-partition topic of the same name
    (fresh at a rerun too: the offsets are compared)."""
    topic = f"lazyconv-verify-{uuid.uuid4().hex[:8]}"
    kafka = Side(kafka_broker.port, topic)
    created = kafka.client.call(KAFKA_API_BY_KEY[19], 7, {"topics": [{
        "name": topic, "num_partitions": 2, "replication_factor": 1, "configs": []}], "timeout_ms": 10000})
    assert created["topics"][0]["error_code"] == 0, created
    deadline = time.monotonic() + 30
    while True:  # KRaft metadata reaches the broker's cache a moment after the controller's
        answer = kafka.client.call(KAFKA_API_BY_KEY[3], 12, {"topics": [{"name": topic}],
                                                             "allow_auto_topic_creation": False})
        parts = answer["topics"][0]["partitions"]
        if len(parts) == 2 and all(p["leader_id"] >= 0 for p in parts):
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    root: Path = tmp_path_factory.mktemp("serve-verify")
    for p in (0, 1):
        (root / f"{topic}-{p}").mkdir()
    server = ServerThread(root)
    serve = Side(server.port, topic)
    try:
        yield kafka, serve
    finally:
        kafka.client.close()
        serve.client.close()
        server.stop()


def test_transactional_produce_is_verified_as_by_kafka(sides: tuple[Side, Side]) -> None:
    kafka, serve = sides
    run = uuid.uuid4().hex[:8]
    theirs, ours = _outcomes(kafka, run), _outcomes(serve, run)

    not_added = "Partition was not added to the transaction"
    assert theirs["unknown transactional id"] == {v: (49, None) for v in VERSIONS}
    assert theirs["another producer id"] == {v: (49, None) for v in VERSIONS}
    assert theirs["fenced epoch"] == {v: (47, None) for v in VERSIONS}
    assert theirs["partition not added"] == {
        v: (120, None) if v >= 11 else (48, not_added if v >= 8 else None) for v in VERSIONS}
    assert theirs["added partition"] == (0, None, 0)
    several = "Transactional records contained more than one producer ID"
    for case in ("two producers", "two epochs"):  # refused as a whole
        assert theirs[case] == {v: [(49, several if v >= 8 else None, -1)] * 2 for v in VERSIONS}
    # a request without a transactional id: refused as a whole, whatever the producer
    assert theirs["no transactional id"] == {v: (53, None) for v in VERSIONS}
    assert theirs["continuing, without the transactional id"] == (53, None, -1)
    assert theirs["continuing"] == (0, None, 2)
    assert theirs["commit"] == 0

    for case in theirs:
        assert ours[case] == theirs[case], case
