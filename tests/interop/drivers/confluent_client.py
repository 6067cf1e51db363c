"""confluent-kafka (librdkafka) driver (see :mod:`common` for the job format). ``client``:
{"config": {extra librdkafka settings}}."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck

from tests.interop.drivers.common import (
    Progress,
    emit,
    emit_record,
    load_job,
    stdin_closed_event,
    unb64,
)


def settings(job: dict) -> dict:
    return {"bootstrap.servers": job["bootstrap"], "log_level": 3, **job["client"]["config"]}


# A coordinator that moved or is still loading its groups answers a commit with one of these;
# librdkafka hands them to a synchronous commit's caller rather than retrying, so the caller
# retries, as an application that must not lose its position does.
_COORDINATOR_MOVING = frozenset({
    ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS, ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
    ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.REQUEST_TIMED_OUT,
    ck.KafkaError._TRANSPORT, ck.KafkaError._TIMED_OUT, ck.KafkaError._WAIT_COORD,
})


def commit_until(consumer: ck.Consumer, offsets: list, deadline: float) -> None:
    """Commit ``offsets`` synchronously, again after a retriable coordinator error."""
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except ck.KafkaException as exc:
            error = exc.args[0]
            if error.code() not in _COORDINATOR_MOVING or time.monotonic() >= deadline:
                raise
            emit("warning", message=f"commit retried: {error}", code=error.code())
            time.sleep(0.2)


def consume(job: dict) -> None:
    progress = Progress(job["last"])
    consumer = ck.Consumer({
        **settings(job), "group.id": job.get("group") or f"assign-only-{uuid.uuid4()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": job["isolation"], "fetch.wait.max.ms": 100,
        "fetch.message.max.bytes": 8 << 20, "receive.message.max.bytes": 100 << 20,
        "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
    })
    deadline = time.monotonic() + job["timeout"]
    expect = job.get("expect_partitions")
    reported: list[tuple[str, int]] = []
    try:
        if job["mode"] == "assign":
            consumer.assign([ck.TopicPartition(t, p, 0) for t, p in job["partitions"]])
        else:
            def on_assign(c: ck.Consumer, partitions: list) -> None:
                # Pause a new assignment before anything is fetched unless it has the size
                # the job waits for.
                c.assign(partitions)
                if expect is not None and len(partitions) != expect:
                    c.pause(partitions)
                else:  # a partition paused in an earlier generation stays paused otherwise
                    c.resume(partitions)

            consumer.subscribe(job["topics"], on_assign=on_assign)
        while time.monotonic() < deadline:
            m = consumer.poll(0.1)
            owned = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
            if owned != reported and owned:
                emit("assigned", partitions=[list(tp) for tp in owned])
                reported = owned
            if expect is not None and len(owned) != expect:
                continue
            if m is not None:
                error = m.error()
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                if error is not None:
                    if error.fatal():
                        raise RuntimeError(str(error))
                    emit("warning", message=str(error), code=error.code(), t=topic, p=partition)
                    if job.get("stop_on_error") and topic is not None:
                        break
                elif topic is not None and partition is not None and offset is not None:
                    ts_type, ts = m.timestamp()
                    if progress.wanted(topic, partition, offset):
                        emit_record(topic, partition, offset,
                                    None if ts_type == ck.TIMESTAMP_NOT_AVAILABLE else ts,
                                    m.key(), m.value(), m.headers())
                    if progress.done(topic, partition):
                        consumer.pause([ck.TopicPartition(topic, partition)])
            if owned and all(progress.done(t, p) for t, p in owned):
                break
        else:
            emit("error", message="timed out before every partition was read")
            return
        if job.get("commit"):
            offsets = [ck.TopicPartition(t, p, progress.commit_offset(t, p)) for t, p in owned]
            commit_until(consumer, offsets, deadline)
            emit("committed", offsets=sorted([tp.topic, tp.partition, tp.offset] for tp in offsets))
        emit("done")
        if job.get("hold"):
            closed = stdin_closed_event()
            while not closed.is_set() and time.monotonic() < deadline:
                consumer.poll(0.1)  # records are not read here (nor reported)
                owned = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
                if owned != reported and owned:  # a later rebalance
                    emit("assigned", partitions=[list(tp) for tp in owned])
                    reported = owned
    finally:
        consumer.close()


def produce(job: dict) -> None:
    producer = ck.Producer({**settings(job), "acks": "all", "linger.ms": 5})
    results: list = []

    def delivered(err, msg) -> None:
        results.append((err, msg))

    for r in job["records"]:
        producer.produce(job["topic"], partition=r["partition"], key=unb64(r["key"]),
                         value=unb64(r["value"]),
                         headers=[(k, unb64(v)) for k, v in r["headers"]] or None,
                         on_delivery=delivered)
    left = producer.flush(job["timeout"])
    for err, msg in results:
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        emit("produced", t=msg.topic(), p=msg.partition(), o=msg.offset())
    if left:
        raise RuntimeError(f"{left} records not delivered within {job['timeout']} s")
    emit("done")


def produce_txn(job: dict) -> None:
    producer = ck.Producer({**settings(job), "transactional.id": job["transactional_id"]})
    producer.init_transactions(job["timeout"])
    for txn in job["transactions"]:
        producer.begin_transaction()
        for r in txn["records"]:
            producer.produce(job["topic"], partition=r["partition"], key=unb64(r["key"]),
                             value=unb64(r["value"]))
        # Deliver before ending: librdkafka's abort purges what is still queued, and aborted
        # records that never reached the log would test nothing.
        producer.flush(job["timeout"])
        if txn["outcome"] == "commit":
            producer.commit_transaction(job["timeout"])
        else:
            producer.abort_transaction(job["timeout"])
    emit("done")


def main() -> None:
    job = load_job()
    try:
        {"consume": consume, "produce": produce, "produce_txn": produce_txn}[job["action"]](job)
    except Exception as exc:
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
