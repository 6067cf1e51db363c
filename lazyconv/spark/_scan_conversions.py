"""The lazy send derived from the scan: each batch converted once per target magic and handed to
a :class:`~lazyconv.spark._derived_conversion.DerivedConsumer`, which plays a consumer for every
chunk size; the digests of what that consumer receives; and the ``conversions`` rows and
``conversion`` violations of a range (a failure located by the reference consumer).
"""

from __future__ import annotations

from typing import Any

from lazyconv.errors import LazyconvError
from lazyconv.logdir._entry import MIN_ENTRY_SIZE as MIN_ENTRY_SIZE_FIELD
from lazyconv.records._compression import decompress
from lazyconv.records._digest import DIGEST_DECLINED, MASK64, digest_delivered, record_digest
from lazyconv.records._format import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_HEADER,
    LOG_OVERHEAD,
)
from lazyconv.spark._derived_conversion import ConvertedBatch, DerivedConsumer
from lazyconv.spark._scan_entries import EntryFacts
from lazyconv.spark._scan_state import RangeScan

__all__ = ["consumer_for", "feed_consumers", "feed_consumer", "decompress_wrapper",
           "conversion_rows"]

_INT64_MIN = -(1 << 63)


def consumer_for(scan: RangeScan, to_magic: int, base_offset: int) -> DerivedConsumer:
    """The consumer of ``to_magic``, created at the first batch (``base_offset``) it sees."""
    assert scan.consumers is not None
    consumer = scan.consumers.get(to_magic)
    if consumer is None:
        options = scan.options
        start = scan.task.base_offset if scan.task.start == 0 else base_offset
        consumer = DerivedConsumer(to_magic, options.chunk_sizes, options.fetch_max_bytes, start,
                                   _digest_delivered)
        scan.consumers[to_magic] = consumer
    return consumer

def _digest_delivered(data: memoryview, min_offset: int) -> tuple[int, int | None, int, int]:
    """What a consumer receives from ``data`` (converted bytes, possibly cut inside the last
    entry) at fetch offset ``min_offset``: ``(bytes of complete entries, last offset of the
    last complete entry or None, records at or above min_offset, sum of their digests without
    headers)``.

    Plain legacy messages and compressed wrappers (what v2 batches convert to below magic 2)
    are digested in one kernel call (:func:`lazyconv.records._digest.digest_delivered`, each
    wrapper decompressed once); any entry it leaves (a v2 batch, a damaged entry) is decoded by
    the records layer's reader, which raises the error reading it would.
    """
    pos = 0
    end = len(data)
    last: int | None = None
    count = total = 0
    while pos < end:
        run = digest_delivered(data[pos:], min_offset, decompress_wrapper)
        if run.entries:
            last = run.last_offset
            count += run.records
            total += run.sum
        pos += run.consumed
        if run.stop != DIGEST_DECLINED:
            break
        size = _entry_size(data, pos, end)
        if size is None:
            break  # cut by the committed size: not received
        entry_last, entry_count, entry_sum = _digest_entries_by_records(data[pos:pos + size], min_offset)
        last = entry_last if entry_last is not None else last
        count += entry_count
        total += entry_sum
        pos += size
    return pos, last, count, total & MASK64


def decompress_wrapper(codec: int, magic: int, value: bytes) -> bytes | None:
    """A legacy wrapper's inner messages for :func:`digest_delivered` (or, with magic 2, a v2
    batch's records); ``None`` when they do not decompress (the reader then reports why)."""
    try:
        return decompress(codec, value, magic)
    except LazyconvError:
        return None


def _entry_size(data: memoryview, pos: int, end: int) -> int | None:
    """The size of the entry at ``pos``: ``None`` when it does not end within ``data``; the
    rest of ``data`` when its size field is impossible (the reader then reports it)."""
    if end - pos < LOG_OVERHEAD:
        return None
    size = LOG_OVERHEAD + LOG_HEADER.unpack_from(data, pos)[1]
    if size < LOG_OVERHEAD + MIN_ENTRY_SIZE_FIELD:
        return end - pos
    return size if size <= end - pos else None


def _digest_entries_by_records(data: memoryview, min_offset: int) -> tuple[int | None, int, int]:
    """``(last offset of the last entry or None, count, digest sum)`` of the complete entries
    of ``data``, decoded record by record by the records layer's reader (a consumer receives no
    record from a control batch); the reference for the kernel's digests."""
    from lazyconv.records import MemoryRecords

    last: int | None = None
    count = total = 0
    for batch in MemoryRecords(bytes(data)).batches():
        last = batch.last_offset
        if batch.is_control:
            continue
        for r in batch:
            if r.offset >= min_offset:
                count += 1
                total += record_digest(r.offset, r.timestamp, r.key, r.value)
    return last, count, total


def _digest_delivered_by_records(data: memoryview, min_offset: int) -> tuple[int, int | None, int, int]:
    """:func:`_digest_delivered` decoding every record (the reference)."""
    valid = 0
    end = len(data)
    while (size := _entry_size(data, valid, end)) is not None and valid + size <= end:
        valid += size
    last, count, total = _digest_entries_by_records(data[:valid], min_offset)
    return valid, last, count, total & MASK64


def _expected_digest_sum(batch: Any, facts: EntryFacts, to_magic: int) -> int:
    """The digest sum of the records a consumer of ``to_magic`` receives from ``batch``: no
    headers below magic 2, and timestamp -1 unless both magics carry one."""
    if to_magic > 0 and batch.magic > 0:
        return facts.no_headers
    return facts.no_timestamp


def _convert_once(batch: Any, data: bytes, to_magic: int,
                  payload: bytes | None = None) -> tuple[bytes | bytearray, int, int]:
    """``batch`` (whose entry bytes are ``data``) converted to ``to_magic`` with no first-offset
    filter: ``(bytes, records converted, temporary memory)``. A plain v2 batch goes straight to
    the kernel's run converter, a compressed one whose records were decompressed for the checks
    (``payload``) is converted from them; anything else through ``down_convert_bytes``."""
    from lazyconv.conversion._down import append_compressed_v2_entry, down_convert_bytes
    from lazyconv.conversion._to_legacy import convert_uncompressed_run

    if payload is not None and to_magic < 2 and batch.magic == 2 and batch.base_offset >= 0:
        converted = bytearray()
        records, temporary = append_compressed_v2_entry(converted, data, payload, to_magic,
                                                        batch.position)
        return converted, records, temporary

    plain_data = not batch.attributes & (COMPRESSION_CODEC_MASK | CONTROL_FLAG_MASK)
    if to_magic < 2 and batch.magic == 2 and plain_data and batch.base_offset >= 0:
        out = bytearray()
        run = convert_uncompressed_run(data, out, to_magic, 0)
        if run is not None and run.consumed == len(data):
            return out, run.converted, run.temporary
    # no first-offset filter: 0 keeps every offset of a sane log; a negative base offset keeps
    # the reference path (which refuses negative offsets)
    no_filter = 0 if batch.base_offset >= 0 else _INT64_MIN
    conv, stats = down_convert_bytes([batch], to_magic, no_filter)
    return conv, stats.records_converted, stats.temporary_memory_bytes


def feed_consumers(scan: RangeScan, batch: Any, data: bytes, facts: EntryFacts,
                    payload: bytes | None, pos: int) -> None:
    assert scan.consumers is not None
    for to_magic in scan.options.to_magics:
        consumer = consumer_for(scan, to_magic, batch.base_offset)
        feed_consumer(scan, consumer, batch, data, facts, payload, pos, to_magic)


def feed_consumer(scan: RangeScan, consumer: DerivedConsumer, batch: Any, data: bytes,
                   facts: EntryFacts, payload: bytes | None, pos: int, to_magic: int) -> None:
    """One batch (its entry bytes: ``data``, at log byte ``pos``; ``payload``: its records
    decompressed, for a compressed v2 batch), converted to ``to_magic``."""
    from lazyconv.conversion._down import is_zstd_below_v2

    control = batch.is_control
    plain = not batch.attributes & COMPRESSION_CODEC_MASK  # v2 and legacy alike
    count = facts.record_count
    zstd = not plain and is_zstd_below_v2(batch, to_magic)
    expected = not control and not zstd and count > 0
    if zstd or (to_magic < 2 and control):
        conv: bytes | bytearray = b""
        converted = temporary = 0
    else:
        conv, converted, temporary = _convert_once(batch, data, to_magic, payload)
    if expected:
        consumer.expect_records(count, _expected_digest_sum(batch, facts, to_magic))
    consumer.add(ConvertedBatch(pos, batch.size_in_bytes, batch.last_offset, zstd, conv, converted,
                                temporary, batch.magic > to_magic and plain,
                                facts.last_offset if expected else None))


def _locate_conversion_failure(scan: RangeScan, to_magic: int) -> tuple[int, int | None, str]:
    """Where a consumer of ``to_magic`` first gets other records than expected: the
    reference consumer (:mod:`lazyconv.spark._conversion_check`, the real lazy send, record by
    record) is run over the segment, which costs more than the derived scan but happens only
    when a conversion fails. ``(log position, offset, what it found)``."""
    from lazyconv.spark._conversion_check import check_conversions

    task = scan.task
    options = scan.options
    found = check_conversions(task, to_magic, [options.chunk_sizes[0]], options.fetch_max_bytes)
    for result in found:
        for v in result["violations"]:
            return v["position"], v.get("offset"), f"the lazy send itself: {v['message']}"
    return -1, scan.summary["first_offset"], ("the reference consumer, running the lazy send, "
                                             "receives the expected records (a bug in the "
                                             "derived consumer)")


def conversion_rows(scan: RangeScan) -> list[dict[str, Any]]:
    """One row per target magic x chunk size; a ``conversion`` violation when the records a
    consumer receives differ from the expected ones."""
    if not scan.consumers:
        return []
    task = scan.task
    rows = []
    for to_magic, consumer in sorted(scan.consumers.items()):
        t = consumer.totals
        ok = t.delivered == t.expected and t.delivered_hash == t.expected_hash
        if not ok:
            position, offset, where = _locate_conversion_failure(scan, to_magic)
            scan.add("log", position, "conversion",
                     f"to magic {to_magic}: a consumer receives {t.delivered} records "
                     f"(hash {t.delivered_hash:016x}), {t.expected} expected "
                     f"(hash {t.expected_hash:016x}); {where}", offset=offset)
        for chunk_size, tally in sorted(t.tallies.items()):
            rows.append({
                "topic": task.topic, "partition": task.partition, "segment": task.segment,
                "start": task.start, "first_offset": scan.summary["first_offset"],
                "last_offset": scan.summary["last_offset"], "to_magic": to_magic,
                "chunk_size": chunk_size,
                "bytes_in": scan.summary["scan_end"] - task.start,
                "records_expected": t.expected, "records_delivered": t.delivered,
                "fetches": t.fetches, "bytes_committed": t.bytes_committed,
                "bytes_written": t.bytes_committed, "bytes_valid": t.bytes_valid,
                "padding_bytes": t.padding_bytes,
                "discarded_bytes": t.bytes_committed - t.bytes_valid, "chunks": tally.chunks,
                "records_converted": tally.records_converted,
                "temporary_memory_bytes": tally.temporary_memory_bytes,
                "zstd_batches": t.zstd_batches, "stalls": t.stalls,
                "window_peak_bytes": consumer.peak_window_bytes, "ok": ok,
            })
    return rows
