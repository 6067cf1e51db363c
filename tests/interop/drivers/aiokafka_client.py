"""aiokafka driver (see :mod:`common` for the job format). ``client``: {}."""

from __future__ import annotations

import asyncio
import time

import aiokafka  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from tests.interop.drivers.common import (
    Progress,
    emit,
    emit_record,
    load_job,
    stdin_closed_event,
    unb64,
)


class Gate(aiokafka.ConsumerRebalanceListener):
    """Pauses a new assignment (before anything is fetched) unless it has the expected size."""

    def __init__(self, consumer: aiokafka.AIOKafkaConsumer, expect: int | None) -> None:
        self.consumer = consumer
        self.expect = expect

    def on_partitions_revoked(self, revoked) -> None:
        pass

    def on_partitions_assigned(self, assigned) -> None:
        if self.expect is not None and len(assigned) != self.expect:
            self.consumer.pause(*assigned)
        else:
            self.consumer.resume(*assigned)


async def consume(job: dict) -> None:
    progress = Progress(job["last"])
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=job["bootstrap"], group_id=job.get("group"), enable_auto_commit=False,
        auto_offset_reset="earliest", isolation_level=job["isolation"],
        max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20, fetch_max_wait_ms=100,
        session_timeout_ms=10000, heartbeat_interval_ms=500, request_timeout_ms=15000,
    )
    deadline = time.monotonic() + job["timeout"]
    expect = job.get("expect_partitions")
    reported: set = set()
    await asyncio.wait_for(consumer.start(), job["timeout"])
    try:
        if job["mode"] == "assign":
            tps = [TopicPartition(t, p) for t, p in job["partitions"]]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
        else:
            consumer.subscribe(job["topics"], listener=Gate(consumer, expect))
        while time.monotonic() < deadline:
            polled = await consumer.getmany(timeout_ms=100)
            owned = consumer.assignment()
            if owned and set(owned) != reported:
                emit("assigned", partitions=sorted([tp.topic, tp.partition] for tp in owned))
                reported = set(owned)
            if expect is not None and len(owned) != expect:
                continue
            for tp, messages in polled.items():
                for m in messages:
                    if progress.wanted(tp.topic, tp.partition, m.offset):
                        emit_record(tp.topic, tp.partition, m.offset, m.timestamp, m.key, m.value,
                                    list(m.headers or ()))
                if progress.done(tp.topic, tp.partition):
                    consumer.pause(tp)
            if owned and all(progress.done(tp.topic, tp.partition) for tp in owned):
                break
        else:
            emit("error", message="timed out before every partition was read")
            return
        if job.get("commit"):
            offsets = {tp: progress.commit_offset(tp.topic, tp.partition)
                       for tp in consumer.assignment()}
            await consumer.commit(offsets)
            emit("committed", offsets=sorted([tp.topic, tp.partition, o] for tp, o in offsets.items()))
        emit("done")
        if job.get("hold"):
            closed = stdin_closed_event()
            while not closed.is_set() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=100)
    finally:
        await consumer.stop()


async def produce(job: dict) -> None:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=job["bootstrap"], acks="all",
                                         linger_ms=5, request_timeout_ms=15000)
    await asyncio.wait_for(producer.start(), job["timeout"])
    try:
        futures = [await producer.send(job["topic"], partition=r["partition"],
                                       key=unb64(r["key"]), value=unb64(r["value"]),
                                       headers=[(k, unb64(v)) for k, v in r["headers"]])
                   for r in job["records"]]
        for f in futures:
            md = await asyncio.wait_for(f, job["timeout"])
            emit("produced", t=md.topic, p=md.partition, o=md.offset)
        emit("done")
    finally:
        await producer.stop()


async def produce_txn(job: dict) -> None:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=job["bootstrap"],
                                         transactional_id=job["transactional_id"],
                                         request_timeout_ms=15000)
    await asyncio.wait_for(producer.start(), job["timeout"])
    try:
        for txn in job["transactions"]:
            await producer.begin_transaction()
            for r in txn["records"]:
                await producer.send(job["topic"], partition=r["partition"],
                                    key=unb64(r["key"]), value=unb64(r["value"]))
            if txn["outcome"] == "commit":
                await asyncio.wait_for(producer.commit_transaction(), job["timeout"])
            else:
                await asyncio.wait_for(producer.abort_transaction(), job["timeout"])
        emit("done")
    finally:
        await producer.stop()


def main() -> None:
    job = load_job()
    try:
        actions = {"consume": consume, "produce": produce, "produce_txn": produce_txn}
        asyncio.run(actions[job["action"]](job))
    except Exception as exc:
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
