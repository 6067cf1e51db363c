"""Differential fuzzing of the compiled kernel against the pure-Python reference.

Each execution builds a small random record set (v2 batches with random records, headers,
nulls, long and non-canonical varints, extreme offsets and timestamps; compressed and control
batches; legacy entries), mutates it (byte flips, truncation, lying batch lengths, record
counts and record lengths, random garbage), and then:

1. calls the kernel's entry points directly on the raw bytes (``convert_v2_run`` and
   ``convert_v2_chunk`` with random chunk sizes on the whole stream and a random suffix,
   ``send_plain_chunk`` reading those windows from a file (some past its end) and writing to a
   socket with a small buffer, compared with ``convert_v2_chunk`` on the same window,
   ``encode_v2_records`` on random builder records, compared with the reference encoder, ``convert_v2_records`` on a batch's payload,
   ``iter_plain_v2`` on the raw bytes with a random end, ``lz4_frame_blocks`` on random and
   mutated lz4 frames with decompression compared against the reference frame parser, and
   ``xxh32`` against the xxhash package, ``snappy_compress_raw`` against the reference
   compressor, the record digests ``digest_v2_records`` and
   ``digest_legacy_run`` against their references, and the validation job's runs
   ``segment_run`` and ``convert_v2_run_ends`` against ``segment_run_reference`` and
   ``convert_run_ends_reference``, on the input and on logs of in-order batches with a semantic
   fault under a valid CRC, and ``convert_v2_compressed`` against ``convert_compressed_v2_entry``
   on an entry made gzip, snappy or lz4 with its records, a cut of them or random bytes, and
   ``legacy_set_to_v2`` on mutated magic 0/1 sets (lying sizes and lengths under good CRCs) and
   on the v2 input, against ``_plain_set`` + ``_v2_batch``, with ``up_convert`` on the kernel
   against the reference twin, plain and as a compressed wrapper's inner messages), which must
   not crash or read out of bounds whatever the length
   fields say (run it under AddressSanitizer: tests/native/fuzz_asan.sh);
2. scans the stream with ``scan_batches`` (kernel) and ``scan_batches_reference``, and converts
   it with ``down_convert_bytes`` and decodes its records on the kernel and on the pure-Python
   path (lz4 frames included), decodes it with a scan laxer than the kernel's (so the record
   iterator meets malformed records and hands over itself), and (every fourth input) drives the lazy send with the kernel's chunking and with the
   reference grouping: scan results, output bytes, stats, decoded records, sent bytes, chunk
   pieces and errors (type, message, position) must be identical.

``python bench/fuzz_kernel.py --seconds 120`` runs for a time budget and prints the number of
executions (kernel calls) and differences; exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import logging
import random
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.records._codec import _encode_unsigned  # the codec's varint body (any width)  # noqa: E402
from lazyconv.records._format import RECORDS_OFFSET  # noqa: E402

log = logging.getLogger(__name__)

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


def _varint(rng: random.Random, value: int, bits: int = 64) -> bytes:
    u = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    raw = _encode_unsigned(u)
    if rng.random() < 0.03 and len(raw) < (5 if bits == 32 else 10):  # non-canonical: a padding byte
        raw = raw[:-1] + bytes([raw[-1] | 0x80, 0x00])
    return raw


def _bytes(rng: random.Random) -> bytes | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.25:
        return b""
    return rng.randbytes(rng.choice((1, 3, 8, 30, 70, 200)))


def _record(rng: random.Random, offset_delta: int) -> bytes:
    body = bytearray([rng.getrandbits(8) if rng.random() < 0.05 else 0])
    ts = rng.choice((0, 1, 5, 1000, 1 << 40, rng.getrandbits(20), rng.getrandbits(8))) if rng.random() < 0.97 else \
        rng.choice((-1, -1000, _INT64_MAX, _INT64_MIN))
    body += _varint(rng, ts)
    body += _varint(rng, offset_delta, 32)
    for field in (_bytes(rng), _bytes(rng)):
        body += _varint(rng, -1 if field is None else len(field), 32)
        body += field or b""
    keys = (b"h", "é".encode(), "\U0001F600".encode(), b"", b"key") if rng.random() < 0.97 else \
        (b"\xff\xfe", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\xe0\x80\x80")
    headers = [] if rng.random() < 0.7 else [
        (rng.choice(keys), _bytes(rng))
        for _ in range(rng.randint(1, 3))
    ]
    body += _varint(rng, len(headers), 32)
    for key, value in headers:
        body += _varint(rng, len(key), 32) + key
        body += _varint(rng, -1 if value is None else len(value), 32) + (value or b"")
    return _varint(rng, len(body), 32) + bytes(body)


def _batch(rng: random.Random) -> bytes:
    from crc32c import crc32c

    from lazyconv.records._compression import Compression, compress

    count = rng.choice((0, 1, 2, 3, 5, 12))
    delta = 0
    parts = []
    for _ in range(count):
        parts.append(_record(rng, delta))
        delta += rng.choice((1, 1, 1, 2, 100)) if rng.random() < 0.97 else rng.choice((0, -1))
    records = b"".join(parts)
    codec = rng.choice((0, 0, 0, 0, 0, 1, 3))
    payload = records if codec == 0 else compress(Compression(codec), records, 2)
    attributes = codec | rng.choice((0, 0, 0x08, 0x10, 0x20 if rng.random() < 0.3 else 0))
    base_offset = rng.choice((0, 10, 1 << 40, _INT64_MAX - 3, _INT64_MIN + 2, rng.getrandbits(16)))
    base_ts = rng.choice((0, 1_700_000_000_000, -1, 1 << 50)) if rng.random() < 0.95 else rng.choice((-5, _INT64_MAX - 2))
    max_ts = rng.choice((base_ts, -1, 1_700_000_000_123)) if rng.random() < 0.95 else -7
    header = bytearray(
        _V2_HEADER.pack(base_offset, 49 + len(payload), -1, 2, 0, attributes, max(count - 1, 0), base_ts, max_ts,
                        -1, -1, -1, count)
    )
    struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + payload))
    return bytes(header) + payload


def _legacy(rng: random.Random) -> bytes:
    from lazyconv.records import RecordsBuilder

    builder = RecordsBuilder(rng.choice((0, 1)), rng.choice((0, 0, 1)), base_offset=rng.randint(0, 50))
    for _ in range(rng.randint(1, 3)):
        builder.append(None, 1_700_000_000_000, _bytes(rng), _bytes(rng))
    return bytes(builder.build())


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((0, 0, 0, 1, 1, 2, 4))):
        if not buf:
            break
        kind = rng.random()
        position = rng.randrange(len(buf))
        if kind < 0.4:
            buf[position] = rng.getrandbits(8)
        elif kind < 0.55 and len(buf) >= 12:
            at = position if position + 12 <= len(buf) and rng.random() < 0.5 else 0
            struct.pack_into(">i", buf, at + 8, rng.choice((-1, 0, 13, 48, 49, 50, len(buf), 1 << 30, 0x7FFFFFFF)))
        elif kind < 0.7 and len(buf) >= 61:
            struct.pack_into(">i", buf, 57, rng.choice((-1, 0, 1, 2, 100, 0x7FFFFFFF)))
        elif kind < 0.85:
            del buf[position:]
        elif kind < 0.95 and len(buf) > 61:
            position = rng.randrange(61, len(buf))  # a lying varint inside the records
            buf[position:position + 1] = rng.choice((b"\xff", b"\x80\x80\x80\x80\x80\x01", b"\x7f", b"\x01"))
        else:
            buf[position:position] = rng.randbytes(rng.randint(1, 20))
    return bytes(buf)


def _outcome(data: bytes, to_magic: int, first_offset: int) -> tuple[Any, ...]:
    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.errors import LazyconvError
    from lazyconv.records import MemoryRecords

    try:
        out, stats = down_convert_bytes(MemoryRecords(data).batches(), to_magic, first_offset)
    except LazyconvError as exc:
        return ("error", type(exc).__name__, str(exc), exc.position)
    return ("ok", bytes(out), stats.records_converted, stats.temporary_memory_bytes)


def _decoded(data: bytes) -> tuple[Any, ...]:
    from lazyconv.errors import LazyconvError
    from lazyconv.records import MemoryRecords

    out: list[Any] = []
    try:
        for record in MemoryRecords(data).records():
            out.append(record)
    except LazyconvError as exc:
        return ("error", out, type(exc).__name__, str(exc), exc.position)
    return ("ok", out)


def _random_builder_records(rng: random.Random) -> tuple[list[Any], int, int]:
    base_offset = rng.choice((0, 5, _INT64_MAX - 3, _INT64_MIN))
    base_timestamp = rng.choice((-1, 0, 1_700_000_000_000, _INT64_MAX))
    records: list[Any] = []
    for index in range(rng.randint(0, 5)):
        offset = base_offset + rng.choice((index, rng.randint(-2, 2**31 + 2)))
        timestamp = rng.choice((-1, base_timestamp, rng.randint(-2, 2**64), 1.5))
        headers = tuple(
            (rng.choice(("", "h", "\u00e9t\u00e9", "\ud800")), _bytes(rng)) for _ in range(rng.randint(0, 2))
        )
        records.append((offset, timestamp, _bytes(rng), _bytes(rng), headers))
    return records, base_offset, base_timestamp


def _encode_reference(records: list[Any], base_offset: int, base_timestamp: int) -> tuple[Any, ...]:
    from lazyconv.records._codec import append_v2_record

    out = bytearray()
    try:
        for offset, timestamp, key, value, headers in records:
            append_v2_record(out, offset - base_offset, timestamp - base_timestamp, key, value, headers)
    except Exception as exc:  # whatever the reference raises on input the builder would refuse
        return ("error", type(exc))
    return ("ok", bytes(out))


def _lazy_outcome(data: bytes, to_magic: int, first_offset: int) -> tuple[Any, ...]:
    from lazyconv.conversion._chunks import MIN_CHUNK_SIZE
    from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
    from lazyconv.errors import LazyconvError
    from lazyconv.records import MemoryRecords

    try:
        send = LazyDownConvertedRecords(MemoryRecords(data), to_magic, first_offset, MIN_CHUNK_SIZE).to_send()
    except LazyconvError as exc:
        return ("error", type(exc), str(exc), exc.position)
    sent = send.to_bytes()
    error = send.error
    return (sent, send.piece_sizes, send.stats.records_converted, send.stats.temporary_memory_bytes,
            None if error is None else (type(error), str(error), error.position))


class _PlainSendRig:
    """What ``send_plain_chunk`` reads from and writes to: the input in a memory file, and a
    socket pair whose sending side has a small buffer (so sends stop part-way too)."""

    def __init__(self) -> None:
        import os
        import socket

        self.os = os
        self.file = os.memfd_create("fuzz-input")
        self.send_side, self.receive_side = socket.socketpair()
        self.send_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        self.send_side.setblocking(False)
        self.receive_side.setblocking(False)

    def load(self, data: bytes) -> None:
        self.os.ftruncate(self.file, 0)
        self.os.pwrite(self.file, data, 0)

    def received(self) -> bytes:
        out = bytearray()
        while True:
            try:
                piece = self.receive_side.recv(1 << 20)
            except BlockingIOError:
                return bytes(out)
            out += piece


def _send_plain_differences(rng: random.Random, data: bytes, rig: _PlainSendRig, kernel: Any,
                            to_magic: int, first_offset: int) -> tuple[int, int]:
    """``send_plain_chunk`` against ``convert_v2_chunk`` on the same window of the input (read
    from a file, some windows running past its end): the same decision, chunk end, stats and
    bytes (those sent, then the rest it kept), nothing sent when it declines."""
    rig.load(data)
    executions = differences = 0
    first_offset = max(first_offset, 0)
    for start in (0, rng.randrange(len(data) + 1)):
        length = rng.choice((len(data) - start, len(data) - start + rng.randint(1, 70), rng.randint(1, 200)))
        if length <= 0:
            continue
        chunk_size = rng.choice((0, 61, rng.randrange(len(data) + 100), 1 << 20))
        remaining = rng.choice((1 << 30, rng.randint(1, 5000)))
        stop, end, converted, temporary, out_len, sent, rest, _, failure = kernel.send_plain_chunk(
            rig.file, start, length, rig.send_side.fileno(), remaining, chunk_size, to_magic, first_offset)
        got = rig.received()
        executions += 1
        window = data[start:start + length]
        out = bytearray()
        expected_end, decided, expected_converted, expected_temporary = kernel.convert_v2_chunk(
            window, out, chunk_size, to_magic, first_offset)
        if len(window) < length:
            expected: tuple[Any, ...] = (kernel.SEND_SHORT, 0, 0, 0, 0, b"")
        elif decided != kernel.CHUNK_DONE or expected_end == 0:
            expected = (kernel.SEND_DECLINED, 0, 0, 0, 0, b"")
        else:
            expected = (kernel.SEND_CONVERTED, expected_end, expected_converted, expected_temporary, len(out),
                        bytes(out[:remaining]))
        # what reached the socket and what the kernel kept are the piece, in order
        actual = (stop, end, converted, temporary, out_len, got + (rest or b""))
        if actual != expected or sent != len(got) or failure != 0:
            differences += 1
            log.error("send_plain_chunk difference on input %s at %d+%d (chunk %d, remaining %d, sent %d, "
                      "error %d):\n kernel   %r\n expected %r", data.hex(), start, length, chunk_size, remaining,
                      sent, failure, actual[:5], expected[:5])
    return executions, differences


def _lz4_frame(rng: random.Random) -> tuple[bytes, int]:
    """A Kafka lz4 frame of random data (one or more blocks, some stored), possibly mutated."""
    from lazyconv.records._compression import Compression, compress

    magic = rng.choice((0, 1, 2))
    size = rng.choice((0, 1, 50, 3000, 70_000 if rng.random() < 0.05 else 500))
    data = rng.randbytes(size) if rng.random() < 0.3 else (b"abcd" * (size // 4 + 1))[:size]
    frame = bytearray(compress(Compression.LZ4, data, magic))
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        if not frame:
            break
        position = rng.randrange(len(frame))
        kind = rng.random()
        if kind < 0.5:
            frame[position] = rng.getrandbits(8)
        elif kind < 0.7:
            del frame[position:]
        elif position + 4 <= len(frame):
            struct.pack_into("<I", frame, position, rng.choice((0, 0x80000000, 1 << 16, (1 << 16) + 1, 0xFFFFFFFF,
                                                               rng.getrandbits(32))))
    return bytes(frame), magic


def _xxh32(data: bytes, seed: int) -> int:
    import xxhash

    return int(xxhash.xxh32_intdigest(data, seed))


def _lz4_outcome(frame: bytes, magic: int, max_size: int) -> tuple[Any, ...]:
    from lazyconv.errors import LazyconvError
    from lazyconv.records._compression import decompress

    try:
        return ("ok", decompress(3, frame, magic, max_size, position=5))
    except LazyconvError as exc:
        return ("error", type(exc).__name__, str(exc), exc.position)


def _complete_v2_end(data: bytes) -> int:
    """The end of the entries when the splitter delimits every one as a v2 batch (a scan laxer
    than the kernel's: the kernel's record iterator then meets malformed records itself)."""
    from lazyconv.errors import LazyconvError
    from lazyconv.records import MemoryRecords
    from lazyconv.records._batch import DefaultBatch

    end = 0
    try:
        for batch in MemoryRecords(data).batches():
            if not isinstance(batch, DefaultBatch):
                return -1
            end = batch.position + batch.size_in_bytes
    except LazyconvError:
        return -1
    return end


def _digest_differences(rng: random.Random, data: bytes) -> tuple[int, int]:
    """The record digests (lazyconv.records._digest) on kernel and reference: the v2 records
    region of ``data`` as a batch payload, and ``data`` as a run of legacy messages, at random
    counts, offsets, shifts and overrides; returns ``(executions, differences)``."""
    from lazyconv.records import _digest as digest

    differences = 0
    payload = data[RECORDS_OFFSET:] if len(data) > RECORDS_OFFSET else data
    count = rng.choice((1, rng.randint(0, 20), len(payload)))
    base_offset = rng.choice((0, 7, _INT64_MAX - 5, _INT64_MIN))
    base_timestamp = rng.choice((0, -3, _INT64_MAX - 2, 1_700_000_000_000))
    override = rng.choice((None, None, 5, -1))
    args_v2 = (payload, count, base_offset, base_timestamp, override)
    if digest.digest_v2_records(*args_v2) != digest.digest_v2_records_reference(*args_v2):
        differences += 1
        log.error("digest_v2_records difference on %r", args_v2)
    start = rng.randrange(len(data) + 1)
    args_legacy = (data[start:], rng.choice((0, 5, _INT64_MIN)), rng.choice((0, 3, _INT64_MAX - 1)),
                   rng.choice((None, 9)))
    if digest.digest_legacy_run(*args_legacy) != digest.digest_legacy_run_reference(*args_legacy):
        differences += 1
        log.error("digest_legacy_run difference on %r", args_legacy)
    executions = 2
    for stream in (data, _converted(data, rng.choice((0, 1)), rng)):
        if stream is None:
            continue
        cut = stream[:rng.randrange(len(stream) + 1)] if rng.random() < 0.3 else stream
        args_delivered = (cut, rng.choice((0, 5, _INT64_MIN)), rng.choice(_WRAPPER_DECOMPRESSORS))
        executions += 1
        if digest.digest_delivered(*args_delivered) != digest.digest_delivered_reference(*args_delivered):
            differences += 1
            log.error("digest_delivered difference on %s", cut.hex())
    return executions, differences


def _converted(data: bytes, to_magic: int, rng: random.Random) -> bytes | None:
    """``data`` down-converted (legacy messages and compressed wrappers), mutated a little half
    of the time; ``None`` when it does not convert."""
    from lazyconv.conversion._down import down_convert_bytes
    from lazyconv.errors import LazyconvError
    from lazyconv.records import MemoryRecords

    try:
        out, _ = down_convert_bytes(MemoryRecords(data).batches(), to_magic, 0)
    except LazyconvError:
        return None
    out = bytearray(out)
    for _ in range(rng.choice((0, 0, 1, 2)) if out else 0):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _decompress_or_none(codec: int, magic: int, value: bytes) -> bytes | None:
    from lazyconv.errors import LazyconvError
    from lazyconv.records._compression import decompress

    try:
        return decompress(codec, value, magic)
    except LazyconvError:
        return None


def _decompress_truncated(codec: int, magic: int, value: bytes) -> bytes | None:
    inner = _decompress_or_none(codec, magic, value)
    return None if inner is None else inner[: len(inner) * 2 // 3]


_WRAPPER_DECOMPRESSORS = (_decompress_or_none, _decompress_or_none, _decompress_truncated,
                          lambda codec, magic, value: None)


def _records_or_none(codec: int, data: bytes) -> bytes | None:
    return _decompress_or_none(codec, 2, data)


def _records_truncated(codec: int, data: bytes) -> bytes | None:
    return _decompress_truncated(codec, 2, data)


_RECORD_DECOMPRESSORS = (None, None, _records_or_none, _records_or_none, _records_truncated,
                         lambda codec, data: None)


def _run_log(rng: random.Random) -> bytes:
    """A log the validation job's runs take whole (data batches, plain, transactional,
    LogAppendTime, with headers and compaction gaps, and commit/abort markers; offsets, leader
    epochs and timestamps in order), then maybe one batch with a fault the segment scan reports
    (CRC recomputed: base offset, epoch, max timestamp, record count, attributes, a record
    byte), and half of the time the fuzz's own mutations."""
    from crc32c import crc32c

    from lazyconv.records import RecordsBuilder, TimestampType, build_end_txn_marker

    base = rng.choice((0, 3, 1 << 40, _INT64_MAX - (1 << 31) - 100))
    epoch = rng.choice((-1, 0, 5))
    parts: list[bytearray] = []
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.15:
            parts.append(bytearray(build_end_txn_marker(base, 1_700_000_000_000, 9, 0, rng.random() < 0.5,
                                                        partition_leader_epoch=epoch)))
            base += 1
        else:
            log_append = rng.random() < 0.25
            transactional = rng.random() < 0.2
            builder = RecordsBuilder(
                2, timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
                base_offset=base, log_append_time=1_700_000_000_999 if log_append else None,
                producer_id=9 if transactional else -1, is_transactional=transactional,
                partition_leader_epoch=epoch,
            )
            offset = base
            for _ in range(rng.randint(1, 5)):
                offset += rng.choice((0, 0, 0, 2))
                builder.append(offset, rng.choice((-1, 0, 1_700_000_000_000, rng.getrandbits(41))), _bytes(rng),
                               _bytes(rng), [("h", _bytes(rng))] if rng.random() < 0.2 else ())
                offset += 1
            parts.append(bytearray(builder.build()))
            base = offset
        base += rng.choice((0, 0, 1, 7))
        if rng.random() < 0.2:
            epoch = epoch + 1 if epoch >= 0 else rng.choice((-1, 1))
    if rng.random() < 0.7:
        batch = rng.choice(parts)
        field, fmt, value = rng.choice((
            (0, ">q", rng.choice((-1, 0, 2, _INT64_MAX - 3, struct.unpack_from(">q", batch, 0)[0] - 1))),
            (12, ">i", rng.choice((-1, 0, 1, 4))),                                          # leader epoch
            (35, ">q", struct.unpack_from(">q", batch, 35)[0] + rng.choice((-1, 1))),       # max timestamp
            (57, ">i", rng.choice((-1, 0, 1, 2, 6))),                                       # record count
            (23, ">i", rng.choice((-1, 0, struct.unpack_from(">i", batch, 23)[0] - 1))),    # last offset delta
            (21, ">h", struct.unpack_from(">h", batch, 21)[0] ^ rng.choice((1, 2, 3, 4, 8, 0x10, 0x20))),
            (rng.randrange(61, len(batch)) if len(batch) > 61 else 61, ">B", rng.getrandbits(8)),
        ))
        if field + struct.calcsize(fmt) <= len(batch):
            struct.pack_into(fmt, batch, field, value)
            struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    data = b"".join(parts)
    return _mutate(rng, data) if rng.random() < 0.5 else data


def _segment_run_differences(rng: random.Random, data: bytes) -> tuple[int, int]:
    """``segment_run`` and ``convert_v2_run_ends`` (kernel) against their references on
    ``data`` and on a random suffix, in random states; returns ``(executions, differences)``."""
    from lazyconv.conversion._to_legacy import convert_run_ends, convert_run_ends_reference
    from lazyconv.records._segment_run import (
        segment_run,
        segment_run_reference,
    )

    executions = differences = 0
    start = rng.choice((0, 0, rng.randrange(len(data) + 1)))
    view = data[start:]
    args = (view, rng.choice((0, 7, 1 << 40)), rng.choice((None, None, -1, 0, 5, 1 << 40)),
            rng.choice((0, 0, 4, 1 << 40)), rng.choice((None, None, 0, 3, 6)),
            rng.choice((-1, -1, 0, 1_700_000_000_500, _INT64_MAX)), rng.choice(_RECORD_DECOMPRESSORS))
    native = segment_run(*args)
    executions += 1
    if native != segment_run_reference(*args):
        differences += 1
        log.error("segment_run difference on %s, state %r", view.hex(), args[1:])
    for piece in (view[:native.consumed], view):
        to_magic = rng.choice((0, 1))
        native_out, reference_out = bytearray(b"~"), bytearray(b"~")
        ends = convert_run_ends(piece, native_out, to_magic)
        executions += 1
        if (ends, native_out) != (convert_run_ends_reference(piece, reference_out, to_magic), reference_out):
            differences += 1
            log.error("convert_v2_run_ends difference on %s (to_magic %d)", piece.hex(), to_magic)
    return executions, differences


def _compress_or_fail(codec: int, inner: bytes, magic: int) -> bytes:
    from lazyconv.records._compression import compress

    return compress(codec, inner, magic)


def _compress_refusing(codec: int, inner: bytes, magic: int) -> bytes:
    raise _CodecRefused(f"codec {codec} refused {len(inner)} bytes (magic {magic})")


class _CodecRefused(Exception):
    pass


def _compressed_entry_differences(rng: random.Random, data: bytes) -> tuple[int, int]:
    """``convert_v2_compressed`` (kernel) against ``convert_compressed_v2_entry`` (records
    layer without the kernel) on the first entry of ``data`` given a gzip, snappy or lz4 codec
    and on a random cut of it, with its records (or random bytes, or a cut of them) as the
    payload: same bytes, counts and errors; a declined entry leaves the output as it was."""
    from lazyconv.conversion._down import convert_compressed_v2_entry
    from lazyconv.records import _impl

    kernel: Any = _impl.kernel_module()
    entry = bytearray(data[: 12 + max(0, struct.unpack_from(">i", data, 8)[0])] if len(data) >= 12 else data)
    records = bytes(entry[61:])
    if len(entry) > 22:
        if entry[22] & 7:  # a compressed batch: its records, when they decompress
            records = _records_or_none(entry[22] & 7, records) or records
        entry[22] = (entry[22] & ~7) | rng.choice((1, 2, 3, 1, 2, 3, 0, 4))
    if rng.random() < 0.1:
        entry = entry[: rng.randrange(len(entry) + 1)]
    payload = rng.choice((records, records, records, records[: rng.randrange(len(records) + 1)],
                          rng.randbytes(rng.randint(0, 40))))
    to_magic = rng.choice((0, 1, 0, 1, 2))
    compress_function = _compress_refusing if rng.random() < 0.05 else _compress_or_fail
    out = bytearray(b"~")
    try:
        native: Any = ("ok", kernel.convert_v2_compressed(out, bytes(entry), payload, to_magic, compress_function))
    except _CodecRefused as exc:
        native = ("refused", str(exc))
    if native[1] is None or native[0] == "refused":
        if out != b"~":
            log.error("convert_v2_compressed declined but changed its output on %s", bytes(entry).hex())
            return 1, 1
        return 1, 0
    with _impl.using(_impl.REFERENCE):  # the records in Python, and the wrapper written in Python too
        try:
            converted, written, temporary = convert_compressed_v2_entry(bytes(entry), payload, to_magic)
            reference: Any = ("ok", (written, temporary), bytes(converted))
        except Exception as exc:  # noqa: BLE001 - any outcome is compared
            reference = ("error", type(exc).__name__)
    if reference != ("ok", native[1], bytes(out[1:])):
        log.error("convert_v2_compressed difference on %s (payload %s, to_magic %d): %r, reference %r",
                  bytes(entry).hex(), payload.hex(), to_magic, native, reference)
        return 1, 1
    return 1, 0


def _legacy_set(rng: random.Random) -> bytes:
    """A set of uncompressed magic 0/1 messages as an old producer sends it (one magic, offsets
    in order), now and then with what ``legacy_set_to_v2`` declines written in: another magic,
    codec bits, LogAppendTime with and without a timestamp, timestamps below -1 or far apart,
    a last message cut to a size around the overheads; then the fuzz's mutations, and half of the time every whole message's CRC made right again
    (so lying sizes and lengths get past the CRC)."""
    from lazyconv.records._codec import append_legacy_message_reference

    out = bytearray()
    magic = rng.choice((0, 1))
    offset = rng.choice((0, 0, 7, _INT64_MAX - 10, -1))
    for _ in range(rng.choice((1, 1, 2, 3, 5, 20))):
        exotic = rng.random() < 0.05
        attributes = rng.choice((8, 1, 2, 3, 7, 0x10, -0x80)) if exotic else 0
        timestamp = rng.choice((-1, 0, 1_700_000_000_000, rng.getrandbits(41)))
        if exotic and rng.random() < 0.5:
            timestamp = rng.choice((-2, _INT64_MIN, _INT64_MAX))
        start = len(out)
        append_legacy_message_reference(out, offset, timestamp, _bytes(rng), _bytes(rng),
                                        1 - magic if exotic and rng.random() < 0.3 else magic, attributes)
        offset = min(offset + rng.choice((1, 1, 1, 0, 5)), _INT64_MAX)
        if rng.random() < 0.05:  # this message cut to a size around the overheads, ending the set
            size = rng.randint(10, 30)
            struct.pack_into(">i", out, start + 8, size)
            del out[start + 12 + size:]
            out += bytes(max(0, start + 12 + size - len(out)))
            break
    data = _mutate(rng, bytes(out))
    return _fix_legacy_crcs(data) if rng.random() < 0.5 else data


def _fix_legacy_crcs(data: bytes) -> bytes:
    """``data`` with the CRC-32 of every whole legacy entry its size fields delimit recomputed."""
    import zlib

    out = bytearray(data)
    position = 0
    while len(out) - position >= 17:
        size = struct.unpack_from(">i", out, position + 8)[0]
        if size < 5 or position + 12 + size > len(out):
            break
        struct.pack_into(">I", out, position + 12, zlib.crc32(bytes(out[position + 16:position + 12 + size])))
        position += 12 + size
    return bytes(out)


def _upconvert_differences(rng: random.Random, data: bytes, kernel: Any) -> tuple[int, int]:
    """``legacy_set_to_v2`` (kernel) against ``_plain_set`` + ``_v2_batch`` (the up-conversion's
    reference) on a legacy set and on ``data`` (any bytes: it must decline them safely) and on
    random suffixes of both: the same facts and records, or a decline (``out`` untouched)
    exactly where the reference declines or raises; and ``up_convert`` on the kernel against the
    reference twin for the set as it is and inside a compressed wrapper. Returns
    ``(executions, differences)``."""
    from lazyconv.conversion import _up
    from lazyconv.records import _impl
    from lazyconv.records._codec import append_legacy_message_reference
    from lazyconv.records._compression import Compression, compress
    from lazyconv.records._format import BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET

    executions = differences = 0
    legacy = _legacy_set(rng)
    for source in (legacy, data):
        for start in (0, rng.randrange(len(source) + 1)):
            piece = source[start:]
            compacted = rng.random() < 0.3
            out = bytearray(b"~")
            native = kernel.legacy_set_to_v2(piece, out, compacted)
            executions += 1
            plain = _up._plain_set(memoryview(piece), compacted)
            expected: Any = None
            if plain is not None:
                magic, last_offset, rows = plain
                try:
                    batch = _up._v2_batch(Compression.NONE, rows)
                except Exception:  # noqa: BLE001 - timestamps below -1, deltas past int64: declined
                    pass
                else:
                    base_ts, max_ts = (struct.unpack_from(">q", batch, at)[0]
                                       for at in (BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET))
                    expected = ((magic, last_offset, len(rows), base_ts, max_ts), b"~" + batch[RECORDS_OFFSET:])
            if (native, bytes(out)) != (expected or (None, b"~")):
                differences += 1
                log.error("legacy_set_to_v2 difference on %s (compacted %s):\n kernel    %r\n reference %r",
                          piece.hex(), compacted, (native, bytes(out)), expected)
    if rng.random() < 0.5:
        message_set = legacy
    else:  # the set as a wrapper's inner messages (magic 1 LogAppendTime now and then)
        magic = legacy[16] if len(legacy) > 16 and legacy[16] in (0, 1) else 1
        codec = rng.choice((Compression.GZIP, Compression.SNAPPY, Compression.LZ4))
        attributes = codec | (8 if magic == 1 and rng.random() < 0.2 else 0)
        out = bytearray()
        append_legacy_message_reference(out, rng.choice((0, 0, 3, 100)), rng.choice((-1, 1_700_000_000_000)), None,
                                        compress(codec, legacy, magic), magic, attributes)
        message_set = bytes(out)
    compacted = rng.random() < 0.3
    native_outcome = _upconvert_outcome(message_set, compacted)
    with _impl.using(_impl.REFERENCE):
        reference_outcome = _upconvert_outcome(message_set, compacted)
    executions += 1
    if native_outcome != reference_outcome:
        differences += 1
        log.error("up_convert difference on %s (compacted %s):\n kernel    %r\n reference %r",
                  message_set.hex(), compacted, native_outcome, reference_outcome)
    return executions, differences


def _upconvert_outcome(message_set: bytes, compacted: bool) -> tuple[Any, ...]:
    from lazyconv.conversion._up import up_convert

    try:
        result = up_convert(message_set, produce_version=2, compacted_topic=compacted)
    except Exception as exc:  # noqa: BLE001 - any outcome is compared
        return ("error", type(exc).__name__, str(exc), getattr(exc, "position", None))
    return ("ok", result.batch, result.record_count, result.source_compression, result.source_magic)


def run(seconds: float, seed: int) -> tuple[int, int, int]:
    """Fuzz for ``seconds``; returns ``(executions, inputs, differences)``."""
    from lazyconv.records import Record, _impl
    from lazyconv.records._scan import scan_batches, scan_batches_reference

    logging.getLogger("lazyconv.conversion").setLevel(logging.CRITICAL)  # the sends log every stop
    kernel: Any = _impl.kernel_module()
    if kernel is None:
        raise SystemExit("the compiled kernel is not in use: nothing to fuzz")
    reference_twin = _impl.REFERENCE
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    executions = inputs = differences = 0
    scratch = bytearray()
    rig = _PlainSendRig()
    while time.monotonic() < deadline:
        for _ in range(50):
            parts = [_batch(rng) if rng.random() < 0.85 else _legacy(rng) for _ in range(rng.randint(1, 4))]
            data = _mutate(rng, b"".join(parts))
            if rng.random() < 0.02:
                data = rng.randbytes(rng.randint(0, 300))
            to_magic = rng.choice((0, 1))
            first_offset = rng.choice((0, 0, 3, 11, _INT64_MAX, _INT64_MIN))
            inputs += 1
            # 1. raw kernel calls on every suffix start a parser could be pointed at
            for start in (0, rng.randrange(len(data) + 1)):
                del scratch[:]
                kernel.convert_v2_run(data[start:], scratch, to_magic, first_offset)
                del scratch[:]
                chunk_size = rng.choice((0, 1, 61, rng.randrange(len(data) + 100), 1 << 20))
                kernel.convert_v2_chunk(data[start:], scratch, chunk_size, to_magic, first_offset)
                executions += 2
            if len(data) > RECORDS_OFFSET:
                payload = data[RECORDS_OFFSET:]
                for count in (rng.randint(0, 20), len(payload)):
                    kernel.convert_v2_records(
                        scratch, payload, count, rng.choice((0, _INT64_MAX - 5)), rng.choice((0, -3)),
                        rng.choice((None, 5, -9)), to_magic, 0, rng.random() < 0.5,
                    )
                    executions += 1
            # the record iterator over whole runs, on any bytes and end (raises ValueError when a
            # batch would run past the end it was given; must never read past it)
            try:
                for _ in kernel.iter_plain_v2(Record, data, rng.randrange(len(data) + 1), lambda *_: ()):
                    pass
            except ValueError:
                pass
            executions += 1
            # the lz4 frame walk and its xxHash32, against the reference frame parser and xxhash
            frame, frame_magic = _lz4_frame(rng)
            max_size = rng.choice((1 << 20, 1 << 20, 10, 0))
            kernel.lz4_frame_blocks(frame, frame_magic)
            native_lz4 = _lz4_outcome(frame, frame_magic, max_size)
            with _impl.using(reference_twin):
                reference_lz4 = _lz4_outcome(frame, frame_magic, max_size)
            if native_lz4 != reference_lz4:
                differences += 1
                log.error("lz4 difference on frame %s (magic %d, max %d)", frame.hex(), frame_magic, max_size)
            if kernel.xxh32(frame[:97], 7) != _xxh32(frame[:97], 7):
                differences += 1
                log.error("xxh32 difference on %s", frame[:97].hex())
            executions += 3
            # snappy compression (snappy.c) against the reference compressor, on the input, on
            # runs of repeats (long copies) and on inputs around the hash table's sizes
            snappy_input = rng.choice((data, data * rng.randint(2, 40), rng.randbytes(rng.randint(8180, 8200)),
                                       (data[:rng.randint(1, 9)] or b"x") * rng.randint(1, 3000)))
            if kernel.snappy_compress_raw(snappy_input) != reference_twin.snappy_compress_raw(snappy_input):
                differences += 1
                log.error("snappy difference on %s", snappy_input.hex())
            executions += 1
            # the builder's record encoding: the kernel's bytes are the reference's when it accepts
            records, base_offset, base_timestamp = _random_builder_records(rng)
            encoded = bytearray(b"~")
            if kernel.encode_v2_records(encoded, records, base_offset, base_timestamp):
                if ("ok", bytes(encoded[1:])) != _encode_reference(records, base_offset, base_timestamp):
                    differences += 1
                    log.error("encode_v2_records difference on %r", records)
            elif encoded != b"~":
                differences += 1
                log.error("encode_v2_records declined but changed its output on %r", records)
            executions += 1
            send_executions, send_differences = _send_plain_differences(rng, data, rig, kernel, to_magic,
                                                                        first_offset)
            executions += send_executions
            differences += send_differences
            digest_executions, digest_differences = _digest_differences(rng, data)
            executions += digest_executions
            differences += digest_differences
            compressed_executions, compressed_differences = _compressed_entry_differences(
                rng, parts[0] if rng.random() < 0.5 else data)
            executions += compressed_executions
            differences += compressed_differences
            upconvert_executions, upconvert_differences = _upconvert_differences(rng, data, kernel)
            executions += upconvert_executions
            differences += upconvert_differences
            for run_input in (data, _run_log(rng)):
                run_executions, run_differences = _segment_run_differences(rng, run_input)
                executions += run_executions
                differences += run_differences
            # 2. differential: the scan and the public conversion on both implementations
            scanned = scan_batches(data, 7)
            executions += 1
            expected = scan_batches_reference(data, 7)
            if (scanned.entries, scanned.end, scanned.stop) != (expected.entries, expected.end, expected.stop):
                differences += 1
                log.error("scan difference on input %s", data.hex())
            native: tuple[Any, ...] = _outcome(data, to_magic, first_offset), _decoded(data)
            executions += 2
            if inputs % 4 == 1:  # the record iterator meeting malformed records (a lax scan)
                lax_end = _complete_v2_end(data)
                if lax_end >= 0:
                    _impl.scan_plain_v2 = lambda view, end=lax_end: end
                    try:
                        native += (_decoded(data),)
                    finally:
                        _impl.scan_plain_v2 = kernel.scan_plain_v2
                    executions += 1
            with _impl.using(reference_twin):
                reference: tuple[Any, ...] = _outcome(data, to_magic, first_offset), _decoded(data)
                if len(native) == 3:
                    reference += (reference[1],)
            if inputs % 4 == 0:  # the lazy send: kernel chunking against the reference grouping
                native += (_lazy_outcome(data, to_magic, first_offset),)
                executions += 1
                with _impl.using(reference_twin):
                    reference += (_lazy_outcome(data, to_magic, first_offset),)
            if native != reference:
                differences += 1
                log.error("difference on input %s (to_magic %d, first_offset %d):\n native    %r\n reference %r",
                          data.hex(), to_magic, first_offset, native, reference)
    return executions, inputs, differences


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--seconds`` (time budget), ``--seed``."""
    parser = argparse.ArgumentParser(prog="bench/fuzz_kernel.py", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    args = parser.parse_args(argv)
    from lazyconv.records import IMPLEMENTATION

    if IMPLEMENTATION != "native":
        print("bench/fuzz_kernel.py: error: needs the compiled kernel, which is not in use "
              "(not built, or LAZYCONV_NO_EXTENSIONS is set): nothing to fuzz", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.monotonic()
    executions, inputs, differences = run(args.seconds, args.seed)
    elapsed = time.monotonic() - start
    print(f"fuzz_kernel: {executions} kernel executions on {inputs} inputs in {elapsed:.0f} s, "
          f"{differences} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
