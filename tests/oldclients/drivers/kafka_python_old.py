"""kafka-python 1.x driver (1.3.5 on Python 3.6, 1.4.7 on 3.11), one self-contained file.

It runs on the client's own interpreter, so it imports nothing from lazyconv or ``tests`` and
keeps to Python 3.6 (no ``from __future__ import annotations``, no dataclasses, no walrus).
Job and events: as tests/interop/drivers/common.py describes them, plus:

- ``client``: {"api_version": [0, 9] (pinned; null negotiates), "client_id": str,
  "compression": null, "gzip", "snappy" or "lz4" for produce, "config": {extra keyword
  arguments of KafkaConsumer/KafkaProducer, e.g. security: "security_protocol",
  "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ssl_cafile",
  "ssl_certfile", "ssl_keyfile", "ssl_check_hostname"}};
- ``start`` (consume): "zero" (default: seek to offset 0, no ListOffsets) or "earliest"
  (``seek_to_beginning``: the client asks ListOffsets for the log start).

``expect_partitions`` and ``hold`` (subscribe) are common.py's: a member whose assignment does
not have the expected size pauses it and reports no records (so a member that joins an empty
group first does not read and commit the partitions a second member is about to take), and a
member that holds stays in the group, polling, until stdin closes.

Below api_version (0, 9) there is no group (JoinGroup needs 0.9): "subscribe" is refused with
an ``error`` event. Records below magic v2 have no headers: a produce job with headers is
refused too, rather than sending records without them.
"""

import base64
import json
import sys
import threading
import time

import kafka
from kafka.structs import OffsetAndMetadata, TopicPartition


def emit(event, **fields):
    fields["ev"] = event
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def b64(data):
    return None if data is None else base64.b64encode(bytes(data)).decode()


def unb64(text):
    return None if text is None else base64.b64decode(text)


def api_version(job):
    api = job["client"].get("api_version")
    return tuple(api) if api else None


def common_settings(job):
    settings = {"bootstrap_servers": job["bootstrap"],
                "client_id": job["client"].get("client_id") or "kafka-python-old",
                "request_timeout_ms": 15000}
    if api_version(job):
        settings["api_version"] = api_version(job)
    settings.update(job["client"].get("config") or {})
    return settings


class Progress:
    """Which partitions delivered their last wanted record (``last``: "topic/p" -> offset)."""

    def __init__(self, last):
        self.last = last
        self.seen = {}

    def wanted(self, topic, partition, offset):
        key = f"{topic}/{partition}"
        if offset > self.last[key] or offset <= self.seen.get(key, -1):
            return False
        self.seen[key] = offset
        return True

    def done(self, topic, partition):
        key = f"{topic}/{partition}"
        return self.last[key] < 0 or self.seen.get(key, -1) >= self.last[key]


class Gate(kafka.ConsumerRebalanceListener):
    """Pauses a new assignment (before anything is fetched) unless it has the expected size."""

    def __init__(self, consumer, expect):
        self.consumer = consumer
        self.expect = expect

    def on_partitions_revoked(self, revoked):
        pass

    def on_partitions_assigned(self, assigned):
        if self.expect is not None and len(assigned) != self.expect:
            self.consumer.pause(*assigned)
        else:
            self.consumer.resume(*assigned)


def stdin_closed_event():
    """An event set once the test closes our stdin (the signal to leave the group)."""
    closed = threading.Event()

    def watch():
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch, daemon=True).start()
    return closed


def consume(job):
    if job.get("isolation", "read_uncommitted") != "read_uncommitted":
        raise ValueError("read_committed needs Fetch v4 (Kafka 0.11), which this client lacks")
    api = api_version(job)
    if job["mode"] != "assign" and api is not None and api < (0, 9):
        raise ValueError(f"api_version {api} has no consumer groups (they need 0.9)")
    progress = Progress(job["last"])
    consumer = kafka.KafkaConsumer(
        group_id=job.get("group") if job["mode"] != "assign" else None,
        enable_auto_commit=False, auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 << 20, fetch_max_wait_ms=100, session_timeout_ms=10000,
        heartbeat_interval_ms=1000, **common_settings(job))
    deadline = time.monotonic() + job["timeout"]
    expect = job.get("expect_partitions")
    reported = frozenset()
    try:
        if job["mode"] == "assign":
            tps = [TopicPartition(t, p) for t, p in job["partitions"]]
            consumer.assign(tps)
            if job.get("start", "zero") == "earliest":
                consumer.seek_to_beginning(*tps)
            else:
                for tp in tps:
                    consumer.seek(tp, 0)
        else:
            consumer.subscribe(job["topics"], listener=Gate(consumer, expect))
        while time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=100)
            owned = frozenset(consumer.assignment())
            if owned and owned != reported:
                emit("assigned", partitions=sorted([tp.topic, tp.partition] for tp in owned))
                reported = owned
            if expect is not None and len(owned) != expect:
                continue
            for tp, messages in polled.items():
                for m in messages:
                    if progress.wanted(tp.topic, tp.partition, m.offset):
                        emit("record", t=tp.topic, p=tp.partition, o=m.offset,
                             ts=-1 if m.timestamp is None else m.timestamp,
                             k=b64(m.key), v=b64(m.value), h=[])
                if progress.done(tp.topic, tp.partition):
                    consumer.pause(tp)
            if owned and all(progress.done(tp.topic, tp.partition) for tp in owned):
                break
        else:
            emit("error", message="timed out before every partition was read")
            return
        if job.get("commit"):
            offsets = {tp: OffsetAndMetadata(job["last"][f"{tp.topic}/{tp.partition}"] + 1,
                                             "")
                       for tp in consumer.assignment()}
            consumer.commit(offsets)
            emit("committed", offsets=sorted([tp.topic, tp.partition, o.offset]
                                             for tp, o in offsets.items()))
        emit("done")
        if job.get("hold"):
            closed = stdin_closed_event()
            while not closed.is_set() and time.monotonic() < deadline:
                consumer.poll(timeout_ms=100)  # records are not read here (nor reported)
                owned = frozenset(consumer.assignment())
                if owned and owned != reported:  # a later rebalance
                    emit("assigned", partitions=sorted([tp.topic, tp.partition] for tp in owned))
                    reported = owned
    finally:
        consumer.close()


def produce(job):
    if any(r.get("headers") for r in job["records"]):
        raise ValueError(f"kafka-python {kafka.__version__} below magic v2 cannot send headers")
    producer = kafka.KafkaProducer(acks="all", linger_ms=5, retries=0,
                                   compression_type=job["client"].get("compression"),
                                   **common_settings(job))
    try:
        futures = [producer.send(job["topic"], partition=r["partition"], key=unb64(r["key"]),
                                 value=unb64(r["value"]))
                   for r in job["records"]]
        producer.flush(timeout=job["timeout"])
        for f in futures:
            md = f.get(timeout=job["timeout"])
            emit("produced", t=md.topic, p=md.partition, o=md.offset)
        emit("done")
    finally:
        producer.close(timeout=5)


def main():
    job = json.loads(sys.argv[1])
    try:
        if job["action"] == "consume":
            consume(job)
        elif job["action"] == "produce":
            produce(job)
        else:
            raise ValueError(f"kafka-python {kafka.__version__}: action {job['action']!r} is not "
                             "supported (no transactions before 0.11)")
    except Exception as exc:  # reported to the test, which shows it in its failure
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
