"""Runs of sound v2 batches: taken by one kernel call each
(:func:`lazyconv.records._segment_run.segment_run`: CRC-32C, record structure, offsets, leader
epochs, max timestamps and the record digests, no Python object per batch), recorded as the
per-entry checks would record them, and converted once per target magic for the derived
consumers (plain stretches in one kernel call, compressed batches from the records the run
decompressed).
"""

from __future__ import annotations

from typing import Any

from lazyconv.records._format import LOG_HEADER, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD
from lazyconv.spark._derived_conversion import DerivedConsumer
from lazyconv.spark._scan_conversions import consumer_for, decompress_wrapper, feed_consumer
from lazyconv.spark._scan_entries import check_topic_config_run, entry_facts, note_marker
from lazyconv.spark._scan_state import BLOCK_SIZE, BlockReader, RangeScan

__all__ = ["take_runs"]

_INT64_MAX = (1 << 63) - 1


def take_runs(scan: RangeScan, reader: BlockReader, pos: int, end: int) -> int:
    """Take the runs of sound, in-order v2 batches from ``pos`` on
    (:func:`lazyconv.records._segment_run.segment_run`: one call per run, no Python per batch
    but the decompression of compressed ones);
    returns where the per-entry path must go on (an entry the runs leave, or ``end``). With
    conversions, a run holds at most one fetch of input (the consumers' memory bound)."""
    from lazyconv.records._segment_run import segment_run

    if scan.prev_offset is not None and scan.prev_offset > _INT64_MAX:
        return pos  # a batch's last offset left int64 (reported): no later batch can be sound
    limit = scan.options.fetch_max_bytes if scan.consumers is not None else BLOCK_SIZE
    limit = max(limit, RECORD_BATCH_OVERHEAD)
    while pos < end:
        scan.where = ("log", pos)  # an unexpected error inside a run is reported at its start
        block, offset = reader.block_from(pos, min(limit, RECORD_BATCH_OVERHEAD))
        if len(block) - offset > MAGIC_OFFSET and block[offset + MAGIC_OFFSET] != 2:
            return pos  # a legacy entry (or garbage): the per-entry path
        available = min(len(block) - offset, end - pos, limit)
        with memoryview(block) as view, view[offset:offset + available] as data:
            run = segment_run(data, pos, scan.prev_offset, scan.task.base_offset, scan.prev_epoch,
                              scan.max_ts, _decompress_records)
            if not run.consumed:
                return pos
            first_base = LOG_HEADER.unpack_from(data)[0]
            if scan.config is not None:
                check_topic_config_run(scan, run, data[:run.consumed], pos)
            _apply_run(scan, run, first_base)
            if scan.consumers is not None:
                _feed_run(scan, run, data[:run.consumed], first_base)
        pos += run.consumed
    return pos


def _decompress_records(codec: int, data: bytes) -> bytes | None:
    """A compressed v2 batch's records for :func:`segment_run`; ``None`` when they do not
    decompress (the per-entry path then reports why)."""
    return decompress_wrapper(codec, 2, data)


def _apply_run(scan: RangeScan, run: Any, first_base: int) -> None:
    """What the per-entry checks would have recorded for every batch of ``run`` (none of
    them has anything to report; the first one's base offset is ``first_base``)."""
    from lazyconv.records._segment_run import RUN_ABORT, RUN_CONTROL

    s = scan.summary
    count = len(run.positions)
    s["batches"] += count
    s["batches_v2"] += count
    s["records"] += run.data_records
    s["checksum"] += run.full
    if s["first_offset"] is None:
        s["first_offset"] = first_base
    s["last_offset"] = run.last_offsets[-1]
    if s["first_epoch"] is None and run.first_epoch is not None:
        s["first_epoch"], scan.first_epoch_position = run.first_epoch
    s["last_epoch"] = run.prev_epoch
    scan.prev_epoch = run.prev_epoch
    scan.prev_offset = run.prev_offset
    scan.max_ts = run.max_timestamp
    s["max_timestamp"] = scan.max_ts
    scan.positions += run.positions
    scan.last_offsets += run.last_offsets
    scan.running_max_ts += run.max_timestamps
    for marker in run.markers:
        if marker.flags & RUN_CONTROL:
            s["control_batches"] += 1
            note_marker(scan, marker.producer_id, marker.first_record, bool(marker.flags & RUN_ABORT),
                         marker.position)
        elif marker.producer_id not in scan.txn_first:
            scan.txn_first[marker.producer_id] = marker.base_offset


def _feed_run(scan: RangeScan, run: Any, data: memoryview, first_base: int) -> None:
    """Convert ``run`` (its bytes: ``data``) once per target magic and give it to each
    consumer: stretches of uncompressed batches in one kernel call each, every compressed one
    from the records the run decompressed; a run the converters decline goes batch by batch."""
    assert scan.consumers is not None
    run_end = run.positions[0] + run.consumed
    base = run.positions[0]
    # where each batch starts in data, and the run's end: for the compressed batches' slices
    starts = [p - base for p in run.positions] + [run.consumed] if run.compressed else []
    for to_magic in scan.options.to_magics:
        consumer = consumer_for(scan, to_magic, first_base)
        converted = (_convert_run(run, data, starts, consumer.conversion_buffer, to_magic)
                     if to_magic < 2 else None)
        if converted is None:
            _feed_run_by_batch(scan, consumer, data, run.positions[0], to_magic)
            continue
        ends, records, last_records, temporaries, zstd = converted
        consumer.expect_records(run.convertible_records,
                                run.no_headers if to_magic > 0 else run.no_timestamp)
        consumer.add_run(run.positions, run_end, run.last_offsets, ends, records, last_records,
                         temporaries, zstd)


def _convert_run(run: Any, data: memoryview, starts: list[int], out: bytearray,
                 to_magic: int) -> tuple[Any, ...] | None:
    """``run`` converted to ``to_magic`` (0 or 1) into ``out``: ``(ends, records, last records,
    temporaries of compressed batches, zstd batch indexes)`` for
    :meth:`DerivedConsumer.add_run`; ``None`` (``out`` unchanged) when a converter declines.
    ``starts``: where each batch starts in ``data``, then the run's length (needed only when
    the run holds compressed batches)."""
    from lazyconv.conversion._down import append_compressed_v2_entry
    from lazyconv.conversion._to_legacy import convert_run_ends

    start = len(out)
    if not run.compressed:
        whole = convert_run_ends(data, out, to_magic)
        return None if whole is None else (whole, run.records, run.last_records, None, ())
    ends: list[int] = []
    records = list(run.records)
    last_records = list(run.last_records)
    temporaries: dict[int, int] = {}
    zstd: list[int] = []
    done = 0  # batches converted so far
    for index, payload in [*run.compressed, (len(run.positions), None)]:
        if index > done:  # the plain stretch before it
            stretch = convert_run_ends(data[starts[done]:starts[index]], out, to_magic)
            if stretch is None:
                del out[start:]
                return None
            ends += stretch
        if index == len(run.positions):
            break
        if payload is None:  # zstd: error 76 below magic 2, never converted
            zstd.append(index)
            records[index] = 0
            last_records[index] = None
        else:
            records[index], temporaries[index] = append_compressed_v2_entry(
                out, data[starts[index]:starts[index + 1]], payload, to_magic, run.positions[index])
        ends.append(len(out))
        done = index + 1
    return ends, records, last_records, temporaries, zstd


def _feed_run_by_batch(scan: RangeScan, consumer: DerivedConsumer, data: memoryview, start: int,
                       to_magic: int) -> None:
    from lazyconv.records import MemoryRecords

    for batch in MemoryRecords(bytes(data)).batches():
        position = start + batch.position
        entry = bytes(data[batch.position:batch.position + batch.size_in_bytes])
        facts, payload = entry_facts(batch)
        feed_consumer(scan, consumer, batch, entry, facts, payload, position, to_magic)
