"""The checks of one sound log entry, shared by the per-entry path and the runs: the facts of its
records (:class:`EntryFacts`), its offsets, leader epoch and max timestamp, the topic's
configuration, and the transaction markers the ``.txnindex`` check needs.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from lazyconv.errors import CorruptRecordError, LazyconvError
from lazyconv.records._control import ControlRecordType
from lazyconv.records._digest import MASK64, digest_v2_records, record_digest
from lazyconv.records._format import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LAST_OFFSET_DELTA_LENGTH,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LOG_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from lazyconv.spark._scan_state import RangeScan
from lazyconv.spark._topic_config import TIMESTAMP_TYPES

__all__ = [
    "EntryFacts",
    "entry_facts",
    "what_failed",
    "check_topic_config",
    "check_topic_config_run",
    "keep_place",
    "header_last_offset",
    "check_offsets",
    "check_v2_header",
    "note_control",
    "note_marker",
]

# an entry's header up to a v2 batch's last offset delta (its last offset)
_UP_TO_LAST_OFFSET_DELTA = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type


class EntryFacts(NamedTuple):
    """What the checks and the conversions need from an entry's records: their count, the
    offsets of the first and last, whether offsets increase, the max timestamp as stored (v2:
    base + delta), the sums of the record digests as a consumer sees them (``full``), without
    headers (a magic 1 consumer) and with timestamp -1 too (a magic 0 consumer), and a control
    batch's first key."""

    record_count: int
    first_offset: int
    last_offset: int
    offsets_increasing: bool
    max_raw_timestamp: int
    full: int
    no_headers: int
    no_timestamp: int
    control_key: bytes | None = None


_NO_FACTS = EntryFacts(0, 0, -1, True, -1, 0, 0, 0)


def entry_facts(batch: Any) -> tuple[EntryFacts, bytes | None]:
    """The facts of a validated entry, and a compressed v2 batch's decompressed records (for
    its conversions; ``None`` otherwise): a v2 data batch is digested from its (decompressed)
    record bytes in one kernel call; other entries, and records the digest declines, are
    decoded record by record (which raises the records layer's error for a damaged one)."""
    if batch.magic == 2 and not batch.is_control and batch.record_count > 0:
        override = batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else None
        payload = batch.records_payload()
        digest = digest_v2_records(payload, batch.record_count, batch.base_offset,
                                   batch.base_timestamp, override)
        if digest is not None:
            facts = EntryFacts(batch.record_count, *digest[:4], *digest[5:])
            return facts, payload if batch.attributes & COMPRESSION_CODEC_MASK else None
    return _facts_of_records(list(batch), batch.is_control), None


def _facts_of_records(records: list[Any], control: bool) -> EntryFacts:
    if not records:
        return _NO_FACTS
    full = no_headers = no_timestamp = 0
    increasing = True
    previous = None
    for r in records:
        plain = record_digest(r.offset, r.timestamp, r.key, r.value)
        no_headers += plain
        full += record_digest(r.offset, r.timestamp, r.key, r.value, r.headers) if r.headers else plain
        no_timestamp += plain if r.timestamp == -1 else record_digest(r.offset, -1, r.key, r.value)
        if previous is not None and r.offset <= previous:
            increasing = False
        previous = r.offset
    return EntryFacts(len(records), records[0].offset, records[-1].offset, increasing,
                  max(r.timestamp for r in records), full & MASK64, no_headers & MASK64,
                  no_timestamp & MASK64, records[0].key if control else None)

def what_failed(entry: bytes, exc: LazyconvError) -> str:
    """What is wrong with an entry that does not decode, naming its bytes: a compressed
    payload that does not decompress, or decompresses to bytes that are not records."""
    from lazyconv.errors import CompressionError
    from lazyconv.records._compression import Compression

    reason = f"{type(exc).__name__}: {exc.message}"
    # the attributes' low byte: the codec
    at = ATTRIBUTES_OFFSET + 1 if entry[MAGIC_OFFSET] == 2 else LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
    if isinstance(exc, CorruptRecordError) or len(entry) <= at:
        return reason
    codec = entry[at] & COMPRESSION_CODEC_MASK
    if not codec:
        return reason
    try:
        name = Compression(codec).name.lower()
    except ValueError:
        return reason
    if isinstance(exc, CompressionError):
        return f"{name} payload does not decode ({reason})"
    return f"the records decompressed from the {name} payload do not decode ({reason})"


def check_topic_config(scan: RangeScan, previous: int | None, pos: int, entry: bytes | memoryview,
                        base: int, last: int, records: int, control: bool) -> None:
    """The checks of the topic's configuration (:mod:`lazyconv.spark._topic_config`) on one
    sound entry at log byte ``pos`` (``previous``: the last offset of the entry before it in
    the range)."""
    config = scan.config
    assert config is not None
    magic = entry[MAGIC_OFFSET]
    where = f"batch {base}..{last}" if magic == 2 else f"message at offset {last}"
    if config.max_message_bytes is not None and len(entry) > config.max_message_bytes:
        scan.add("log", pos, "max_message_bytes",
                 f"{where} is {len(entry)} bytes, over the topic's max.message.bytes "
                 f"{config.max_message_bytes}", offset=base)
    if config.log_append_time is not None and magic > 0:
        at = ATTRIBUTES_OFFSET + 1 if magic == 2 else LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
        log_append = bool(entry[at] & TIMESTAMP_TYPE_MASK)
        if log_append != config.log_append_time:
            scan.add("log", pos, "timestamp_type",
                     f"{where} has {TIMESTAMP_TYPES[log_append]} timestamps, the topic's "
                     f"message.timestamp.type is {TIMESTAMP_TYPES[config.log_append_time]}",
                     offset=base)
    if config.contiguous_offsets:
        if previous is not None and base > previous + 1:
            scan.add("log", pos, "offset_gap",
                     f"offsets {previous + 1}..{base - 1} are missing before {where} (only "
                     f"compaction removes offsets; the topic's cleanup.policy is delete)",
                     offset=base)
        if magic == 2 and not control and records and records != last - base + 1:
            scan.add("log", pos, "offset_gap",
                     f"{where} holds {records} records for {last - base + 1} offsets (only "
                     f"compaction removes records; the topic's cleanup.policy is delete)",
                     offset=base)
    if config.keys_required and not control:
        from lazyconv.records import MemoryRecords

        keyless = sum(1 for b in MemoryRecords(bytes(entry)).batches() for r in b if r.key is None)
        if keyless:
            scan.add("log", pos, "null_key",
                     f"{where} has {keyless} record(s) without a key (the topic's cleanup.policy "
                     f"is compact: Kafka refuses keyless records there)", offset=base)


def check_topic_config_run(scan: RangeScan, run: Any, data: memoryview, pos: int) -> None:
    """:func:`check_topic_config` for every batch of a run (``data``: its bytes, from log
    byte ``pos``)."""
    previous = scan.prev_offset
    ends = [*run.positions[1:], pos + run.consumed]
    for start, end, last in zip(run.positions, ends, run.last_offsets, strict=True):
        entry = data[start - pos:end - pos]
        base = LOG_HEADER.unpack_from(entry)[0]
        control = bool(entry[ATTRIBUTES_OFFSET + 1] & CONTROL_FLAG_MASK)
        records = struct.unpack_from(">i", entry, RECORDS_COUNT_OFFSET)[0]
        scan.current = (start, last, len(entry))
        check_topic_config(scan, previous, start, entry, base, last, records, control)
        previous = last


def keep_place(scan: RangeScan, pos: int, last_offset: int, running_max: int | None) -> None:
    scan.positions.append(pos)
    scan.last_offsets.append(last_offset)
    scan.running_max_ts.append(running_max)


def header_last_offset(entry: bytes) -> int:
    """Last offset as an entry's header states it (v2: base + delta; legacy: its offset)."""
    offset = LOG_HEADER.unpack_from(entry)[0]
    if entry[MAGIC_OFFSET] >= 2 and len(entry) >= _UP_TO_LAST_OFFSET_DELTA:
        return int(offset + struct.unpack_from(">i", entry, LAST_OFFSET_DELTA_OFFSET)[0])
    return int(offset)


def check_offsets(scan: RangeScan, batch: Any, facts: EntryFacts, pos: int, base: int,
                   last: int) -> None:
    s = scan.summary
    task = scan.task
    if s["first_offset"] is None:
        s["first_offset"] = base
        if base < task.base_offset:
            scan.add("log", pos, "segment_base", f"first offset {base} is below the segment "
                                                 f"base offset {task.base_offset}", offset=base)
    prev = scan.prev_offset
    if prev is not None and base <= prev:
        scan.add("log", pos, "offset_order",
                 f"batch offsets {base}..{last} do not follow offset {prev}", offset=base)
    if last < base:
        scan.add("log", pos, "offset_order", f"last offset {last} is below base offset {base}",
                 offset=base)
    in_order = facts.record_count == 0 or (facts.offsets_increasing and facts.first_offset >= base
                                    and facts.last_offset <= last)
    if not in_order:  # rare: decode the records again to name the first one out of place
        record_prev = base - 1
        for r in batch:
            if r.offset <= record_prev or r.offset > last:
                scan.add("log", pos, "offset_order",
                         f"record offset {r.offset} out of order in batch {base}..{last} "
                         f"(previous {record_prev})", offset=r.offset)
                break
            record_prev = r.offset
    scan.prev_offset = last  # the next batch is compared with this one: one finding per fault


def check_v2_header(scan: RangeScan, batch: Any, facts: EntryFacts, pos: int) -> None:
    s = scan.summary
    epoch = batch.partition_leader_epoch
    if epoch >= 0:  # -1: unknown (written before leader epochs existed)
        if scan.prev_epoch is not None and epoch < scan.prev_epoch:
            scan.add("log", pos, "leader_epoch",
                     f"batch {batch.base_offset}..{batch.last_offset} has partition leader epoch "
                     f"{epoch}, below the previous batch's {scan.prev_epoch}",
                     offset=batch.base_offset)
        if s["first_epoch"] is None:
            s["first_epoch"] = epoch
            scan.first_epoch_position = pos
        s["last_epoch"] = scan.prev_epoch = epoch  # the next batch is compared with this one
    if facts.record_count and not batch.attributes & TIMESTAMP_TYPE_MASK:
        actual = facts.max_raw_timestamp  # create time: the header states the records' max
        if actual != batch.max_timestamp:
            scan.add("log", pos, "timestamp",
                     f"batch {batch.base_offset}..{batch.last_offset} states max timestamp "
                     f"{batch.max_timestamp} but its records' max is {actual}",
                     offset=batch.base_offset)


def note_control(scan: RangeScan, batch: Any, facts: EntryFacts, pos: int) -> None:
    """Remember ABORT markers (for the ``.txnindex`` check) and close the producer's txn."""
    if batch.magic != 2 or not facts.record_count:
        return
    key = facts.control_key
    abort = (key is not None and len(key) >= _CONTROL_KEY.size
             and _CONTROL_KEY.unpack_from(key)[1] == ControlRecordType.ABORT)
    note_marker(scan, batch.producer_id, facts.first_offset, abort, pos)


def note_marker(scan: RangeScan, producer_id: int, offset: int, abort: bool, pos: int) -> None:
    """A transaction marker of ``producer_id`` at ``offset`` (log byte ``pos``)."""
    if abort:
        marker = (producer_id, offset)
        scan.abort_markers[marker] = pos
        if producer_id in scan.txn_last_marker:
            scan.txn_after_marker[marker] = scan.txn_last_marker[producer_id]
        first = scan.txn_first.get(producer_id)
        if first is not None:
            scan.txn_starts[marker] = first
            if producer_id in scan.txn_marker_seen:
                scan.txn_start_known.add(marker)
    scan.txn_first.pop(producer_id, None)
    scan.txn_marker_seen.add(producer_id)
    scan.txn_last_marker[producer_id] = offset
