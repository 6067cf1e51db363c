"""A lazy send that meets a corrupt batch after committing its size: the good records before it
arrive, the rest is overflow padding, the size is exactly the committed one, the error is reported,
and the other partitions of the same FetchResponse arrive exactly."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from lazy_support import TrickleChannel, build_batch, consumer_records, drive

from lazyconv.conversion._chunks import overflow_padding
from lazyconv.conversion._down import down_convert
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import CorruptRecordError, RecordsError
from lazyconv.protocol._fetch import FetchResponse
from lazyconv.records import Compression, FileRecords, MemoryRecords


def good_batches(count: int, records_each: int = 3, compression: int = 0) -> list[bytes]:
    return [
        build_batch(
            2,
            [(1_000 + n, b"k%d" % n, b"value-%d-%d" % (i, n)) for n in range(records_each)],
            base_offset=i * records_each,
            compression=compression,
        )
        for i in range(count)
    ]


def garbage_records(batch: bytes) -> bytes:
    """``batch`` with its records overwritten by garbage and a CRC that matches again."""
    bad = bytearray(batch)
    bad[61:] = b"\xfe" * (len(batch) - 61)
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    return bytes(bad)


def expected_records(batches: list[bytes], to_magic: int, size: int | None = None) -> list[tuple]:
    """What a consumer reads from the eager conversion of ``batches`` (all good), cut at
    ``size`` bytes (a committed size) if given."""
    converted = down_convert(MemoryRecords(b"".join(batches)).batches(), to_magic, 0)
    return consumer_records(bytes(converted.records.buffer)[:size])


@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("bad_index", [1, 4])
def test_records_before_a_corrupt_batch_arrive_and_the_rest_is_padding(
    to_magic: int, compression: int, bad_index: int
) -> None:
    batches = good_batches(6, compression=compression)
    planted = batches[:bad_index] + [garbage_records(batches[bad_index])] + batches[bad_index + 1 :]
    errors: list[RecordsError] = []
    lazy = LazyDownConvertedRecords(MemoryRecords(b"".join(planted)), to_magic, 0, on_error=errors.append)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([7, 100, 1 << 20]))
    assert len(sent) == lazy.size_in_bytes == send.size and send.completed
    good = expected_records(batches[:bad_index], to_magic)
    assert consumer_records(sent) == good and len(good) == 3 * bad_index
    converted_length = send.converted_bytes_written
    assert sent[converted_length:] == overflow_padding(lazy.size_in_bytes - converted_length)
    assert errors == [send.error] and isinstance(send.error, RecordsError)
    assert lazy.send_error is send.error


def test_a_corrupt_size_field_mid_chunk_keeps_the_batches_before_it() -> None:
    batches = good_batches(4)
    bad = bytearray(batches[2])
    struct.pack_into(">i", bad, 8, 3)  # an entry size below the minimum of 14
    data = b"".join(batches[:2]) + bytes(bad) + batches[3]
    lazy = LazyDownConvertedRecords(MemoryRecords(data), 1, 0)
    send = lazy.to_send()
    sent = drive(send, TrickleChannel([1 << 20]))
    assert len(sent) == lazy.size_in_bytes == len(data)
    assert consumer_records(sent) == expected_records(batches[:2], 1)
    assert isinstance(send.error, CorruptRecordError) and send.padding_bytes > 0


def test_a_corrupt_batch_in_a_segment_file(tmp_path: Path) -> None:
    batches = good_batches(5, records_each=20)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches[:2]) + garbage_records(batches[2]) + b"".join(batches[3:]))
    with FileRecords.open(path) as records:
        lazy = LazyDownConvertedRecords(records, 0, 0)
        send = lazy.to_send()
        sent = drive(send, TrickleChannel([4096]))
    assert len(sent) == lazy.size_in_bytes
    assert consumer_records(sent) == expected_records(batches[:2], 0)
    assert send.error is not None and send.padding_bytes > 0


def test_a_fetch_response_stays_well_formed_and_the_other_partition_arrives_exactly() -> None:
    batches = good_batches(5)
    planted = batches[:2] + [garbage_records(batches[2])] + batches[3:]
    healthy = LazyDownConvertedRecords(MemoryRecords(b"".join(batches)), 1, 0)
    corrupt = LazyDownConvertedRecords(MemoryRecords(b"".join(planted)), 1, 0)

    def partition(index: int, records: object) -> dict:
        return {"partition_index": index, "error_code": 0, "high_watermark": 15,
                "last_stable_offset": 15, "log_start_offset": 0, "records": records}

    response = FetchResponse(4, {"responses": [
        {"topic": "t", "partitions": [partition(0, corrupt), partition(1, healthy)]}]})
    wire = drive(response.to_send(9), TrickleChannel([1000]))
    assert len(wire) == 4 + response.size_in_bytes
    header, body = FetchResponse.decode_framed(4, wire)
    assert header["correlation_id"] == 9
    bad_part, good_part = body["responses"][0]["partitions"]
    assert consumer_records(bytes(bad_part["records"])) == expected_records(batches[:2], 1)
    assert consumer_records(bytes(good_part["records"])) == expected_records(
        batches, 1, healthy.size_in_bytes
    )
    assert len(consumer_records(bytes(good_part["records"]))) >= 12
    assert corrupt.send_error is not None and healthy.send_error is None


# -- the input changing under the send (issue 24) ------------------------------------------------


def _many_batches(count: int = 40) -> bytes:
    return b"".join(
        build_batch(2, [(1_000 + n, b"k", b"v" * 700) for n in range(3)], base_offset=i * 3,
                    compression=Compression.GZIP if i % 5 == 4 else Compression.NONE)
        for i in range(count)
    )


def test_a_chunk_that_fails_whole_but_converts_batch_by_batch_ends_the_send_with_a_records_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What another thread rewriting the buffer (or a process overwriting the file) between the
    chunk's conversion and its batch-by-batch retry looks like to the send: the chunk fails,
    each of its batches converts. It used to escape as an AssertionError; now the send pads
    to its committed size and reports a CorruptRecordError."""
    import lazyconv.conversion._lazy_records as lazy_module

    real = lazy_module.down_convert_bytes
    failed: list[int] = []

    def changing(batches: list, to_magic: int, first_offset: int):  # type: ignore[no-untyped-def]
        if isinstance(batches, list) and len(batches) > 1 and not failed:
            failed.append(len(batches))
            raise CorruptRecordError("the bytes are being rewritten", batches[0].position)
        return real(batches, to_magic, first_offset)

    data = _many_batches()
    # the records changed: the kernel's chunking must not convert the chunk itself either
    monkeypatch.setattr(lazy_module._impl, "convert_v2_chunk", lambda *args: (0, 1, 0, 0))
    monkeypatch.setattr(lazy_module, "down_convert_bytes", changing)
    errors: list[RecordsError] = []
    lazy = LazyDownConvertedRecords(MemoryRecords(data), 1, 0, chunk_size=16 * 1024, on_error=errors.append)
    out = drive(lazy.to_send(), TrickleChannel([5000]))
    assert failed and len(out) == lazy.size_in_bytes
    assert isinstance(lazy.send_error, CorruptRecordError) and "changed while they were being sent" in str(lazy.send_error)
    assert errors == [lazy.send_error]


@pytest.mark.parametrize("backing", ["bytearray", "file"])
@pytest.mark.parametrize("rewrite", ["other records", "byte flips", "zeros"])
def test_input_rewritten_in_place_between_writes_keeps_the_committed_size(
    tmp_path: Path, backing: str, rewrite: str
) -> None:
    import random

    rng = random.Random(f"{backing} {rewrite}")
    data = _many_batches()
    other = _many_batches(41)[len(data) // 3:]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    buffer = bytearray(data)
    records = MemoryRecords(buffer) if backing == "bytearray" else FileRecords.open(path)

    def rewritten(current: bytes) -> bytes:
        new = bytearray(current)
        if rewrite == "other records":
            new[len(new) // 4:] = (other + bytes(len(new)))[: len(new) - len(new) // 4]
        elif rewrite == "byte flips":
            for _ in range(200):
                new[rng.randrange(len(new))] ^= 0xFF
        else:
            new[len(new) // 3:] = bytes(len(new) - len(new) // 3)
        return bytes(new)

    lazy = LazyDownConvertedRecords(records, 1, 0, chunk_size=16 * 1024)
    send = lazy.to_send()
    channel = TrickleChannel([7000])
    calls = 0
    while not send.completed:
        send.write_to(channel)
        calls += 1
        if calls == 2:
            if backing == "bytearray":
                buffer[:] = rewritten(bytes(buffer))
            else:
                with open(path, "r+b") as f:
                    f.write(rewritten(data))
        assert calls < 100_000
    assert send.written == len(channel.buffer) == lazy.size_in_bytes
    assert send.error is None or isinstance(send.error, RecordsError)
