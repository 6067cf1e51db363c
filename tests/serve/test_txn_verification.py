"""A transactional batch that would open a transaction in a partition is verified against the
transaction coordinator first, as Kafka 3.6+ does (KIP-890 part 1,
``transaction.partition.verification.enable``, default true): a producer id no transactional id
holds, or a transaction that does not include the partition, is refused with Kafka's code for
the Produce version, and nothing is appended. Accepted, such a batch opened a transaction
nothing would end until serve's next start, and the partition's last stable offset stood there
(read_committed consumers saw nothing after it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lazyconv.errors import ErrorCode
from lazyconv.logdir._directory import LogDirectory
from lazyconv.net._model import Listener
from lazyconv.protocol import _add_partitions_to_txn as add_partitions_to_txn
from lazyconv.protocol import _end_txn as end_txn
from lazyconv.protocol import _init_producer_id as init_producer_id
from lazyconv.protocol import _produce as produce
from lazyconv.serve._broker import Broker
from lazyconv.serve._offsets import split_entries
from tests.serve.test_append_validation import idem, v2_batch
from tests.serve.wire import WireClient

NOT_ADDED = "Partition was not added to the transaction"  # Kafka's message for the 48


def _broker(root: Path) -> Broker:
    for p in (0, 1):
        (root / f"t-{p}").mkdir(exist_ok=True)
    return Broker(LogDirectory(root), [Listener(0, "127.0.0.1", 9092)], offsets_in_memory=True)


def _body(parts: dict[int, bytes], transactional_id: str | None) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": p, "records": r} for p, r in parts.items()]}]}


def _produce(broker: Broker, version: int, parts: dict[int, bytes],
             transactional_id: str | None) -> dict[int, dict[str, Any]]:
    answer = broker.produce(version, _body(parts, transactional_id))
    return {p["index"]: p for t in answer["responses"] for p in t["partition_responses"]}


def _untouched(broker: Broker, partition: int, end: int = 0) -> bool:
    plog = broker.logdir.partition("t", partition)
    return plog.high_watermark == plog.last_stable_offset() == end


@pytest.mark.parametrize("version", range(3, 12))
def test_a_producer_id_no_transactional_id_holds_opens_no_transaction(tmp_path, version) -> None:
    """Kafka's coordinator answers INVALID_PRODUCER_ID_MAPPING for an id it does not hold, or
    that holds another producer id, at every version, without a message."""
    broker = _broker(tmp_path)
    _, pid, epoch = broker.transactions.init_producer_id("tx", 60000)
    for transactional_id, producer_id in (("nobody", 4242), ("tx", pid + 1)):
        got = _produce(broker, version, {0: idem(0, pid=producer_id, txn=True)}, transactional_id)[0]
        assert (got["error_code"], got["base_offset"], got["error_message"]) == (
            ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, None)
        assert _untouched(broker, 0)
    assert broker.stats.rejected_produce_partitions == 2
    broker.close()


@pytest.mark.parametrize("version", range(0, 12))
def test_transactional_records_without_a_transactional_id_refuse_the_whole_request(tmp_path, version) -> None:
    """Kafka's ``handleProduceRequest`` answers a request in which a partition opens with a
    transactional batch, but that carries no transactional id (the field came with Produce v3),
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED in every partition, the other partitions and a topic it
    does not have included, before it looks at anything else: the batch of a producer no
    transactional id holds, and one continuing an open transaction too."""
    broker = _broker(tmp_path)
    c = broker.transactions
    _, pid, epoch = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, epoch, [("t", 0)])
    assert _produce(broker, 9, {0: idem(0, pid=pid, epoch=epoch, txn=True)}, "tx")[0]["base_offset"] == 0
    for batch in (idem(0, pid=4242, txn=True), idem(2, pid=pid, epoch=epoch, txn=True)):
        body = _body({1: v2_batch(2), 0: batch}, None)
        body["topic_data"].append({"name": "nope", "partition_data": [{"index": 0, "records": v2_batch(1)}]})
        answer = broker.produce(version, body)
        got = [(t["name"], p["index"], p["error_code"], p["base_offset"], p["log_start_offset"], p["error_message"])
               for t in answer["responses"] for p in t["partition_responses"]]
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert got == [("t", 1, refused, -1, -1, None), ("t", 0, refused, -1, -1, None),
                       ("nope", 0, refused, -1, -1, None)]
        assert _untouched(broker, 1)
        plog = broker.logdir.partition("t", 0)
        assert (plog.last_stable_offset(), plog.high_watermark) == (0, 2)
    broker.close()


@pytest.mark.parametrize("version", [3, 11])
def test_transactional_batches_of_two_producers_refuse_the_whole_request(tmp_path, version) -> None:
    """Kafka's ``handleProduceAppend`` verifies the one producer of a request's transactional
    batches: two producer ids (or two epochs of one) refuse every partition of the request with
    INVALID_PRODUCER_ID_MAPPING "Transactional records contained more than one producer ID",
    before anything is verified or appended; an idempotent batch of another producer is no
    transactional batch."""
    broker = _broker(tmp_path)
    c = broker.transactions
    _, pid, epoch = c.init_producer_id("tx", 60000)
    _, other, other_epoch = c.init_producer_id("other", 60000)
    c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    c.add_partitions("other", other, other_epoch, [("t", 1)])
    message = "Transactional records contained more than one producer ID"  # sent from Produce v8
    for second in (idem(0, pid=other, epoch=other_epoch, txn=True), idem(0, pid=pid, epoch=epoch + 1, txn=True)):
        body = _body({0: idem(0, pid=pid, epoch=epoch, txn=True), 1: second}, "tx")
        body["topic_data"].append({"name": "nope", "partition_data": [{"index": 0, "records": v2_batch(1)}]})
        answer = broker.produce(version, body)
        got = [(t["name"], p["index"], p["error_code"], p["base_offset"], p["error_message"])
               for t in answer["responses"] for p in t["partition_responses"]]
        refused = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert got == [("t", 0, refused, -1, message), ("t", 1, refused, -1, message),
                       ("nope", 0, refused, -1, message)]
        assert _untouched(broker, 0) and _untouched(broker, 1)
    got = _produce(broker, version, {0: idem(0, pid=pid, epoch=epoch, txn=True), 1: idem(0, pid=777)}, "tx")
    assert [(got[p]["error_code"], got[p]["base_offset"]) for p in (0, 1)] == [(0, 0), (0, 0)]
    broker.close()


@pytest.mark.parametrize("version", range(3, 12))
def test_a_partition_the_transaction_does_not_include_is_refused(tmp_path, version) -> None:
    """The producer holds its transactional id, but no AddPartitionsToTxn named t-1: Kafka's
    TRANSACTION_ABORTABLE from Produce v11 (KIP-890), INVALID_TXN_STATE "Partition was not added
    to the transaction" before; t-0 of the same request, added, is appended, and the commit
    leaves nothing open."""
    broker = _broker(tmp_path)
    c = broker.transactions
    _, pid, epoch = c.init_producer_id("tx", 60000)
    assert c.add_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): 0}
    got = _produce(broker, version, {0: idem(0, pid=pid, epoch=epoch, txn=True),
                                     1: idem(0, pid=pid, epoch=epoch, txn=True)}, "tx")
    assert (got[0]["error_code"], got[0]["base_offset"]) == (0, 0)
    expected = ((ErrorCode.TRANSACTION_ABORTABLE, None) if version >= 11
                else (ErrorCode.INVALID_TXN_STATE, NOT_ADDED))
    assert (got[1]["error_code"], got[1]["error_message"], got[1]["base_offset"]) == (*expected, -1)
    assert _untouched(broker, 1)
    assert c.end_txn("tx", pid, epoch, True) == 0
    assert _untouched(broker, 0, end=3) and _untouched(broker, 1)  # the COMMIT marker at 2
    # the transaction ended: the next batch of t-0 would open another one, not yet added
    late = _produce(broker, version, {0: idem(2, pid=pid, epoch=epoch, txn=True)}, "tx")[0]
    assert late["error_code"] == expected[0]
    broker.close()


@pytest.mark.parametrize("version", [3, 10, 11])
def test_a_fenced_epoch_is_refused_before_it_opens_a_transaction(tmp_path, version) -> None:
    """Kafka's coordinator answers PRODUCER_FENCED, which the broker gives the producer as
    INVALID_PRODUCER_EPOCH."""
    broker = _broker(tmp_path)
    c = broker.transactions
    _, pid, old = c.init_producer_id("tx", 60000)
    _, _, new = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", pid, new, [("t", 0)])
    got = _produce(broker, version, {0: idem(0, pid=pid, epoch=old, txn=True)}, "tx")[0]
    assert (got["error_code"], got["error_message"]) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    assert _untouched(broker, 0)
    broker.close()


def test_a_batch_continuing_an_open_transaction_is_not_verified_again(tmp_path) -> None:
    """As Kafka: once the partition has the producer's transaction open, its next batches are
    appended without asking the coordinator. So the producer of a transaction left open in a log
    another coordinator wrote (its producer id is no transactional id's here) goes on writing
    into it until serve aborts it at its timeout, but opens none elsewhere; idempotent batches
    are never verified."""
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    written = LogDirectory(tmp_path)
    written.partition("t", 0).append(split_entries(idem(0, pid=777, epoch=3, txn=True)))  # 0-1
    written.close()
    broker = _broker(tmp_path)
    assert list(broker.transactions.unknown) == [777]
    got = _produce(broker, 9, {0: idem(2, pid=777, epoch=3, txn=True)}, "elsewhere")[0]
    assert (got["error_code"], got["base_offset"]) == (0, 2)
    got = _produce(broker, 9, {1: idem(0, pid=777, epoch=3, txn=True)}, "elsewhere")[1]
    assert (got["error_code"], got["base_offset"]) == (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1)
    assert _produce(broker, 11, {1: idem(0, pid=778)}, None)[1]["base_offset"] == 0
    broker._tick(time.monotonic() + 901)  # unknown_producer_transaction_timeout_ms
    assert _untouched(broker, 0, end=5)  # the ABORT marker at 4
    broker.close()


def test_raw_produce_requests_over_the_wire(serve_logdir, tmp_path) -> None:
    """The same through the server: an unknown producer id, a partition no AddPartitionsToTxn
    named, then the normal path."""
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
    server = serve_logdir(tmp_path)
    with WireClient(server.port) as client:
        ids = client.call(init_producer_id.SPEC, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
        pid, epoch = ids["producer_id"], ids["producer_epoch"]

        def send(version: int, partition: int, producer_id: int) -> dict[str, Any]:
            body = _body({partition: idem(0, pid=producer_id, epoch=epoch, txn=True)}, "tx")
            return client.call(produce.SPEC, version, body)["responses"][0]["partition_responses"][0]

        assert send(9, 0, pid + 100)["error_code"] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        added = client.call(add_partitions_to_txn.SPEC, 3, {
            "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
        assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0
        refused = send(9, 1, pid)
        assert (refused["error_code"], refused["error_message"]) == (ErrorCode.INVALID_TXN_STATE, NOT_ADDED)
        assert send(11, 1, pid)["error_code"] == ErrorCode.TRANSACTION_ABORTABLE
        assert (send(9, 0, pid)["error_code"], send(9, 0, pid)["error_code"]) == (0, 0)  # the retry: a duplicate
        ended = client.call(end_txn.SPEC, 3, {"transactional_id": "tx", "producer_id": pid,
                                              "producer_epoch": epoch, "committed": True})
        assert ended["error_code"] == 0
    for p, end in ((0, 3), (1, 0)):
        plog = server.logdir.partition("t", p)
        assert plog.last_stable_offset() == plog.high_watermark == end
