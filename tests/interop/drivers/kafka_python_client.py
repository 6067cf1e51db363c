"""kafka-python driver (see :mod:`common` for the job format). ``client``: {"api_version": [..] or
null for negotiated}."""

from __future__ import annotations

import time

import kafka  # type: ignore[import-untyped]
from kafka.consumer.fetcher import RecordTooLargeError  # type: ignore[import-untyped]
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

from tests.interop.drivers.common import (
    Progress,
    emit,
    emit_record,
    load_job,
    stdin_closed_event,
    unb64,
)


def settings(job: dict) -> dict:
    api = job["client"].get("api_version")
    client_id = job["client"].get("client_id")
    return {"bootstrap_servers": job["bootstrap"], "request_timeout_ms": 15000,
            **({"api_version": tuple(api)} if api else {}),
            **({"client_id": client_id} if client_id else {})}


class Gate(kafka.ConsumerRebalanceListener):
    """Pauses a new assignment (before anything is fetched) unless it has the expected size."""

    def __init__(self, consumer: kafka.KafkaConsumer, expect: int | None) -> None:
        self.consumer = consumer
        self.expect = expect

    def on_partitions_revoked(self, revoked) -> None:
        pass

    def on_partitions_assigned(self, assigned) -> None:
        if self.expect is not None and len(self.consumer.assignment()) != self.expect:
            self.consumer.pause(*self.consumer.assignment())
        else:
            self.consumer.resume(*self.consumer.assignment())


def wait_for_subscribed_metadata(consumer: kafka.KafkaConsumer, topics: list[str],
                                 partitions: set[int] | None = None, timeout_s: float = 10) -> bool:
    """Block until ``consumer`` has seen every topic of ``topics`` (with exactly ``partitions``
    when given, else with at least one) in metadata fetched for its subscription, i.e. until a
    JoinGroup it sends would find them; False if that takes longer than ``timeout_s``.

    Why: kafka-python 3.0.x loses a leader's rejoin triggered by its metadata snapshot when the
    join outlives a ``poll()`` timeout (reproduced in tests/serve/test_group_kafka_python_rejoin.py);
    a leader that joins before it has the topics' metadata assigns nothing and then stays
    "rebalancing" with heartbeats off until its session expires. The coordinator keeps what it
    saw as ``_metadata_snapshot`` (the leader assigns from it); the IO thread refreshes metadata
    when asked (``cluster.request_update()``, thread-safe). Asking again until it is there
    matters: the constructor's request for a topic is dropped when it lands while the bootstrap
    request for every topic is in flight, so an early answer can lack it."""
    deadline = time.monotonic() + timeout_s
    while True:
        snapshot = consumer._coordinator._metadata_snapshot
        if all((snapshot.get(t) == partitions) if partitions is not None else snapshot.get(t)
               for t in topics):
            return True
        if time.monotonic() >= deadline:
            return False
        consumer._cluster.request_update()
        time.sleep(0.02)


def consume(job: dict) -> None:
    progress = Progress(job["last"])
    consumer = kafka.KafkaConsumer(
        **settings(job), enable_auto_commit=False, auto_offset_reset="earliest",
        group_id=job.get("group"), isolation_level=job["isolation"],
        max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20, fetch_max_wait_ms=100,
        session_timeout_ms=10000, heartbeat_interval_ms=500, max_poll_interval_ms=10000,
    )
    deadline = time.monotonic() + job["timeout"]
    expect = job.get("expect_partitions")
    reported: set = set()
    try:
        if job["mode"] == "assign":
            tps = [kafka.TopicPartition(t, p) for t, p in job["partitions"]]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
        else:
            consumer.subscribe(job["topics"], listener=Gate(consumer, expect))
            wait_for_subscribed_metadata(consumer, job["topics"])  # else the poll loop times out
        while time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=100)
            except RecordTooLargeError as exc:
                # A Fetch v0-2 response holding only a trailing control batch converts to no
                # complete message (as with Kafka): legitimate only past the last record.
                stuck = exc.args[1]
                if not all(progress.done(tp.topic, tp.partition) for tp in stuck):
                    raise
                consumer.pause(*stuck)
                continue
            owned = consumer.assignment()
            if frozenset(owned) != frozenset(reported) and owned:
                emit("assigned", partitions=sorted([tp.topic, tp.partition] for tp in owned))
                reported = set(owned)
            if expect is not None and len(owned) != expect:
                continue
            for tp, messages in polled.items():
                for m in messages:
                    if progress.wanted(tp.topic, tp.partition, m.offset):
                        emit_record(tp.topic, tp.partition, m.offset, m.timestamp, m.key, m.value,
                                    [(h[0], h[1]) for h in (m.headers or ())])
                if progress.done(tp.topic, tp.partition):
                    consumer.pause(tp)
            if owned and all(progress.done(tp.topic, tp.partition) for tp in owned):
                break
        else:
            emit("error", message="timed out before every partition was read")
            return
        if job.get("commit"):
            offsets = {tp: OffsetAndMetadata(progress.commit_offset(tp.topic, tp.partition), "", -1)
                       for tp in consumer.assignment()}
            consumer.commit(offsets)
            emit("committed", offsets=sorted([tp.topic, tp.partition, o.offset]
                                             for tp, o in offsets.items()))
        emit("done")
        if job.get("hold"):
            closed = stdin_closed_event()
            while not closed.is_set() and time.monotonic() < deadline:
                consumer.poll(timeout_ms=100)  # records are not read here (nor reported)
                owned = consumer.assignment()
                if frozenset(owned) != frozenset(reported) and owned:  # a later rebalance
                    emit("assigned", partitions=sorted([tp.topic, tp.partition] for tp in owned))
                    reported = set(owned)
    finally:
        consumer.close()


def produce(job: dict) -> None:
    producer = kafka.KafkaProducer(**settings(job), linger_ms=5, acks="all")
    try:
        futures = [producer.send(job["topic"], partition=r["partition"], key=unb64(r["key"]),
                                 value=unb64(r["value"]),
                                 headers=[(k, unb64(v)) for k, v in r["headers"]])
                   for r in job["records"]]
        producer.flush(timeout=job["timeout"])
        for f in futures:
            md = f.get(timeout=job["timeout"])
            emit("produced", t=md.topic, p=md.partition, o=md.offset)
        emit("done")
    finally:
        producer.close(timeout=5)


def produce_txn(job: dict) -> None:
    producer = kafka.KafkaProducer(**settings(job), transactional_id=job["transactional_id"])
    try:
        producer.init_transactions()
        for txn in job["transactions"]:
            producer.begin_transaction()
            for r in txn["records"]:
                producer.send(job["topic"], partition=r["partition"], key=unb64(r["key"]),
                              value=unb64(r["value"]))
            producer.flush(timeout=job["timeout"])
            if txn["outcome"] == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        emit("done")
    finally:
        producer.close(timeout=5)


def main() -> None:
    job = load_job()
    try:
        {"consume": consume, "produce": produce, "produce_txn": produce_txn}[job["action"]](job)
    except Exception as exc:  # reported to the test, which shows it in its failure
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
