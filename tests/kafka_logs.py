"""Log directories written by a real Kafka broker, for the tests that take Kafka as the oracle of
``lazyconv dump`` (tests/kafka/test_dump_kafka.py) and ``lazyconv serve``
(tests/kafka/test_serve_differential.py).

:func:`write_oracle_topics` writes, through a running :class:`KafkaBroker`, small topics that
cover what a real log holds (all partitions 1, replication 1):

- ``codec-none``, ``codec-gzip``, ``codec-snappy``, ``codec-lz4``, ``codec-zstd``: a
  confluent-kafka producer per codec (librdkafka's batches as the broker stores them), keys,
  null keys, null values, headers, a non-UTF-8 key, explicit old timestamps;
- ``txn``: two transactional producers interleaved: committed, aborted and again committed
  transactions (control batches, an aborted range overlapping a committed one, ``.txnindex``);
- ``idempotent``: an idempotent producer (producer id, epoch, sequences, no transaction);
- ``log-append``: ``message.timestamp.type=LogAppendTime`` (the broker sets the time);
- ``segments``: ``segment.bytes`` 1 MiB (Kafka 4's minimum) and ~2.6 MiB of records: several
  segments with their indexes;
- ``deleted``: DeleteRecords up to offset 120 (log start offset 120 > 0, an offset below it
  is out of range);
- ``compacted``: ``cleanup.policy=compact`` with the log cleaner run over it (the broker needs
  :data:`CLEANER_PROPS`): keys written again and again, tombstones, a transactional producer
  with an aborted transaction, segments rolled every 100 ms; once the cleaner has cleaned it
  (offset gaps, batches with a delete horizon, aborted data gone, markers kept) the topic is
  switched to ``cleanup.policy=delete`` so that nothing changes it again when the broker
  restarts;
- ``compacted-once``: two transactional producers' committed and aborted transactions, then
  exactly one cleaner pass: aborted data gone (one producer's last aborted batch kept empty),
  ABORT markers without a delete horizon yet and their ``.txnindex`` entries kept (one with the
  first offset of batches removed whole): the state between two cleaner passes;
- ``compacted-twice``: the same and a second pass: the ABORT marker whose batches are all gone
  has a delete horizon and no entry any more; the one with an empty batch keeps its entry.

:func:`copy_log_dir` copies the broker's data folder after it stopped cleanly. Everything is
small: the whole set writes in a few seconds.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from kafka_broker import KafkaBroker, create_topic, produce_records, wait_high_watermark

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_650_000_000_000  # explicit timestamps (old: the broker keeps them, retention is off)
DELETED_BEFORE = 120
EPOCH_2_TIME = 500_000  # the epochs topic's records after the restart start at T0 + this
# broker settings for the compacted topic: the cleaner looks for work every 200 ms
CLEANER_PROPS = {"log.cleaner.backoff.ms": "200", "log.cleaner.threads": "1"}


def _values(count: int, seed: int, size: int = 180) -> list[bytes]:
    """Semi-compressible values: words from a fixed list, different per record."""
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel",
             b"india", b"juliett", b"kilo", b"lima", b"mike", b"november", b"oscar", b"papa"]
    out = []
    for i in range(count):
        x = (i * 2654435761 + seed) & 0xFFFFFFFF
        value = bytearray(b"%d:" % i)
        while len(value) < size:
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            value += words[x % len(words)] + b" "
        out.append(bytes(value[:size]))
    return out


def _records(count: int, seed: int) -> list[tuple[Any, ...]]:
    values = _values(count, seed)
    records: list[tuple[Any, ...]] = []
    for i in range(count):
        key: bytes | None = b"key-%04d" % (i % 37)
        value: bytes | None = values[i]
        headers = None
        if i % 11 == 3:
            key = None
        if i % 13 == 5:
            value = None
        if i % 7 == 2:
            headers = [("h1", b"v%d" % i), ("bin", bytes([0, 255, i & 0xFF]))]
        if i == 17:
            key = b"\xff\xfe not utf-8"
        records.append((0, key, value, T0 + i * 10, headers))
    return records


def _producer(bootstrap: str, **conf: Any) -> Any:
    from confluent_kafka import Producer

    base = {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5}
    base.update(conf)
    return Producer(base)


def _send(producer: Any, topic: str, records: list[tuple[Any, ...]]) -> None:
    for _partition, key, value, timestamp, headers in records:
        kwargs: dict[str, Any] = {"key": key, "value": value, "timestamp": timestamp,
                                  "partition": 0}
        if headers:
            kwargs["headers"] = headers
        producer.produce(topic, **kwargs)
    producer.flush(30)


def write_oracle_topics(broker: KafkaBroker) -> dict[str, Any]:
    """Writes the topics above; returns facts the tests check against (``high`` per topic)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = broker.bootstrap
    facts: dict[str, Any] = {"high": {}}
    for codec in CODECS:
        topic = f"codec-{codec}"
        create_topic(bootstrap, topic)
        records = _records(400, seed=len(codec))
        produce_records(bootstrap, topic, records, codec, config={"linger.ms": 20,
                                                                   "batch.num.messages": 60})
        facts["high"][topic] = len(records)

    # transactions: A commits, B aborts (interleaved with A's second), A commits again
    create_topic(bootstrap, "txn")
    a = _producer(bootstrap, **{"transactional.id": "oracle-a", "compression.type": "lz4"})
    b = _producer(bootstrap, **{"transactional.id": "oracle-b"})
    a.init_transactions(30)
    b.init_transactions(30)
    recs = _records(120, seed=99)
    a.begin_transaction()
    _send(a, "txn", recs[0:30])
    a.commit_transaction(30)
    b.begin_transaction()
    _send(b, "txn", recs[30:50])
    a.begin_transaction()
    _send(a, "txn", recs[50:70])
    _send(b, "txn", recs[70:80])
    b.abort_transaction(30)
    a.commit_transaction(30)
    b.begin_transaction()
    _send(b, "txn", recs[80:120])
    b.commit_transaction(30)
    facts["high"]["txn"] = None  # markers take offsets too: read from the broker

    create_topic(bootstrap, "idempotent")
    idem = _producer(bootstrap, **{"enable.idempotence": True, "compression.type": "snappy"})
    _send(idem, "idempotent", _records(200, seed=7))
    _send(idem, "idempotent", _records(50, seed=8))

    create_topic(bootstrap, "log-append", configs={"message.timestamp.type": "LogAppendTime"})
    produce_records(bootstrap, "log-append", _records(150, seed=5), "gzip")
    produce_records(bootstrap, "log-append", _records(50, seed=6), "none")

    create_topic(bootstrap, "segments", configs={"segment.bytes": str(1 << 20)})
    big = [(0, b"k%06d" % i, v, T0 + i, None) for i, v in enumerate(_values(2600, 3, size=1000))]
    # batches of ~16 KiB: an offset and a time index entry every few batches
    produce_records(bootstrap, "segments", big, "none",
                    config={"linger.ms": 5, "batch.size": 16384})

    create_topic(bootstrap, "deleted")
    produce_records(bootstrap, "deleted", _records(300, seed=4), "none")
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    futures = admin.delete_records([TopicPartition("deleted", 0, DELETED_BEFORE)])
    for future in futures.values():
        future.result(30)
    facts["log_start"] = {"deleted": DELETED_BEFORE}
    _write_compacted(broker, admin)
    _write_cleaned_txn(broker, admin, "compacted-once", passes=1)
    _write_cleaned_txn(broker, admin, "compacted-twice", passes=2)
    create_topic(bootstrap, "epochs")
    produce_records(bootstrap, "epochs", _records(50, seed=12), "none")
    broker.restart()  # a new leader election: the next records carry a new leader epoch
    later = [(0, key, value, T0 + EPOCH_2_TIME + i, headers)
             for i, (_p, key, value, _t, headers) in enumerate(_records(50, seed=13))]
    produce_records(broker.bootstrap, "epochs", later, "none")
    return facts


def _write_compacted(broker: KafkaBroker, admin: Any) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "compacted", configs={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"})
    txn = _producer(bootstrap, **{"transactional.id": "oracle-compacted", "compression.type": "gzip"})
    txn.init_transactions(30)
    values = _values(300, 11)
    for round_ in range(5):
        records = [(0, b"key-%02d" % (i % 12), None if (i + round_) % 17 == 0 else values[i],
                    T0 + round_ * 1000 + i, None) for i in range(round_ * 60, round_ * 60 + 60)]
        txn.begin_transaction()
        _send(txn, "compacted", records)
        if round_ == 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
        time.sleep(0.15)  # segment.ms: the next append rolls a new segment
    produce_records(bootstrap, "compacted", [(0, b"key-00", b"last", T0 + 9999, None)], "none")
    checkpoint = broker.data_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 90
    while "compacted 0 " not in (checkpoint.read_text() if checkpoint.exists() else ""):
        assert time.monotonic() < deadline, "the log cleaner did not clean the compacted topic"
        time.sleep(0.2)
    _set_policy(admin, "compacted", "delete")


def _write_cleaned_txn(broker: KafkaBroker, admin: Any, topic: str, passes: int) -> None:
    """Two transactional producers written with ``cleanup.policy=delete``, then switched to
    ``compact`` for ``passes`` cleaner passes (each over everything but the last record, which
    rolled a new segment; nothing dirty is left after it), then back to ``delete``. P commits,
    Q aborts (its last data batch: the cleaner keeps it, empty, for Q's producer state), P
    aborts (those batches are removed whole) and commits: offsets 0..29 + COMMIT 30, Q 31..40 +
    ABORT 41, P 42..71 + ABORT 72, P 73..102 + COMMIT 103, a plain record 104 (and 105 for a
    second pass) in a segment of its own."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic, configs={
        "cleanup.policy": "delete", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"})
    p = _producer(bootstrap, **{"transactional.id": f"oracle-{topic}-p"})
    q = _producer(bootstrap, **{"transactional.id": f"oracle-{topic}-q", "compression.type": "lz4"})
    p.init_transactions(30)
    q.init_transactions(30)
    values = _values(100, 21)

    def records(first: int, count: int) -> list[tuple[Any, ...]]:
        return [(0, b"key-%02d" % (i % 6), values[i], T0 + i, None) for i in range(first, first + count)]

    end = 0
    for producer, first, count, commit in ((p, 0, 30, True), (q, 30, 10, False),
                                           (p, 40, 30, False), (p, 70, 30, True)):
        producer.begin_transaction()
        _send(producer, topic, records(first, count))
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        # the coordinator writes the marker after EndTxn has answered: without this wait the
        # next producer's batches can land before it and the offsets above shift
        end += count + 1
        wait_high_watermark(bootstrap, topic, 0, end)
    for n in range(passes):
        # segment.ms: the record rolls a new segment (the cleaner's limit); a segment rolls on
        # the timestamps of its batches, and the markers' are the broker's clock
        time.sleep(0.15)
        now = int(time.time() * 1000)
        produce_records(bootstrap, topic, [(0, b"key-00", b"last", now, None)], "none")
        if n == 0:
            _set_policy(admin, topic, "compact")
        _wait_cleaned(broker, topic, 104 + n)
    _set_policy(admin, topic, "delete")


def _wait_cleaned(broker: KafkaBroker, topic: str, offset: int) -> None:
    """Until the cleaner checkpoint of ``topic``'s partition 0 is at ``offset`` or beyond."""
    checkpoint = broker.data_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 90
    while True:
        lines = checkpoint.read_text().splitlines() if checkpoint.exists() else []
        done = [int(line.split()[2]) for line in lines if line.startswith(f"{topic} 0 ")]
        if done and done[0] >= offset:
            return
        assert time.monotonic() < deadline, f"the log cleaner did not clean {topic}"
        time.sleep(0.2)


def _set_policy(admin: Any, topic: str, policy: str) -> None:
    """``cleanup.policy`` of ``topic`` (``delete``: nothing cleans it again, even after a
    restart)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def copy_log_dir(broker: KafkaBroker, target: Path) -> Path:
    """Copies the partition folders (``topic-N``) and the checkpoint files of a stopped
    broker's data folder into ``target``; returns ``target``."""
    assert not broker.is_running(), "stop the broker cleanly first"
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(broker.data_dir.iterdir()):
        if entry.is_dir() and not entry.name.startswith("__"):
            shutil.copytree(entry, target / entry.name)
        elif entry.is_file():
            shutil.copy2(entry, target / entry.name)
    return target
