"""Helpers for the down-conversion and lazy-send tests: build inputs, read outputs as a consumer
would (kafka-python, an independent implementation), and partial-write channels."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from crc32c import crc32c
from kafka.record import MemoryRecords as KafkaMemoryRecords

from lazyconv.records import RecordsBuilder, TimestampType

# (offset, timestamp, key, value): what a consumer sees of a record after down-conversion.
ConsumerRecord = tuple[int, int, bytes | None, bytes | None]


def consumer_records(data: bytes, *, magic_zero_timestamp: int = -1) -> list[ConsumerRecord]:
    """Records kafka-python's ``MemoryRecords`` reads from ``data`` (stops at the first
    incomplete entry, as the Java consumer does). v0 timestamps (None) become -1."""
    out: list[ConsumerRecord] = []
    records = KafkaMemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for record in batch:
            ts = record.timestamp
            out.append(
                (record.offset, magic_zero_timestamp if ts is None else ts, record.key, record.value)
            )
    return out


def consumer_entries(data: bytes) -> list[tuple[int, int]]:
    """``(magic, size)`` of each complete top-level entry kafka-python finds in ``data``."""
    out = []
    records = KafkaMemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        out.append((batch.magic, batch.size_in_bytes))
    return out


def build_batch(
    magic: int,
    records: Sequence[tuple[int, bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    offsets: Sequence[int] | None = None,
    compression: int = 0,
    headers: Sequence[tuple[str, bytes | None]] = (),
    log_append_time: int | None = None,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One v2 batch, one legacy wrapper (compressed v0/v1) or a run of legacy messages.

    ``records`` are ``(timestamp, key, value)``; offsets run from ``base_offset`` unless
    ``offsets`` gives them (gaps as after compaction). ``headers`` go on every v2 record.
    """
    builder = RecordsBuilder(
        magic,
        compression=compression,
        timestamp_type=(
            TimestampType.NO_TIMESTAMP
            if magic == 0
            else TimestampType.LOG_APPEND_TIME
            if log_append_time is not None
            else TimestampType.CREATE_TIME
        ),
        base_offset=base_offset if offsets is None else offsets[0],
        log_append_time=log_append_time,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i, (timestamp, key, value) in enumerate(records):
        builder.append(
            offset=base_offset + i if offsets is None else offsets[i],
            timestamp=timestamp if magic > 0 else -1,
            key=key,
            value=value,
            headers=tuple(headers) if magic == 2 else (),
        )
    return builder.build()


def v2_set_log_append_time(batch: bytes, log_append_time: int) -> bytes:
    """Return the v2 ``batch`` with the LogAppendTime bit set, MaxTimestamp = ``log_append_time``
    and the CRC-32C recomputed (what a broker does with message.timestamp.type=LogAppendTime)."""
    data = bytearray(batch)
    attributes = struct.unpack_from(">h", data, 21)[0] | 0x08
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">q", data, 35, log_append_time)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def v2_end_txn_marker(
    offset: int, timestamp: int, producer_id: int, producer_epoch: int = 0, commit: bool = True
) -> bytes:
    """A transaction marker control batch (its layout in docs/guide/records.md), built by hand."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    body = bytes([0, 0, 0]) + b"\x08" + key + b"\x0c" + value + b"\x00"  # attrs, tsΔ, offΔ, klen
    record = bytes([len(body) << 1]) + body
    after_crc = struct.pack(
        ">hiqqqhii", 0x30, 0, timestamp, timestamp, producer_id, producer_epoch, -1, 1
    ) + record
    crc = crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", offset, length, -1, 2, crc) + after_crc


def v2_empty_batch(base_offset: int, last_offset_delta: int = 0, max_timestamp: int = 5) -> bytes:
    """A v2 batch with no records, as compaction leaves it (docs/guide/records.md: empty v2 batches)."""
    after_crc = struct.pack(">hiqqqhii", 0, last_offset_delta, -1, max_timestamp, -1, -1, -1, 0)
    crc = crc32c(after_crc)
    return struct.pack(">qiibI", base_offset, 9 + len(after_crc), -1, 2, crc) + after_crc


class TrickleChannel:
    """A channel that accepts at most ``pattern[i % len(pattern)]`` bytes per call (0 = would
    block), like a non-blocking socket with a tiny send buffer."""

    def __init__(self, pattern: Sequence[int] = (1,)) -> None:
        self.pattern = list(pattern)
        self.calls = 0
        self.buffer = bytearray()

    def send(self, data: memoryview | bytes) -> int:
        limit = self.pattern[self.calls % len(self.pattern)]
        self.calls += 1
        taken = bytes(data[:limit])
        self.buffer += taken
        return len(taken)


def drive(send: Any, channel: TrickleChannel, max_calls: int = 10_000_000) -> bytes:
    """Call ``send.write_to(channel)`` until completed; check each return value is honest."""
    calls = 0
    while not send.completed:
        before = len(channel.buffer)
        n = send.write_to(channel)
        assert n == len(channel.buffer) - before
        assert n >= 0
        calls += 1
        assert calls < max_calls, "send made no progress"
    assert send.write_to(channel) == 0  # a completed send writes nothing more
    return bytes(channel.buffer)


def compressible_batches(compression: int, count: int = 12, per_batch: int = 40,
                         word: bytes = b"value") -> bytes:
    """``count`` v2 batches of ``per_batch`` records of repetitive ~400-byte values, one after
    another from offset 0 (what the conversion cache tests convert again and again)."""
    out = bytearray()
    for b in range(count):
        records = [(1_700_000_000_000 + i, b"k%d" % i, (b"%s-%d-%d " % (word, b, i)) * 40)
                   for i in range(per_batch)]
        out += build_batch(2, records, base_offset=b * per_batch, compression=compression)
    return bytes(out)
