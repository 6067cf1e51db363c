"""``lazyconv dump``: readable listing, ``--json`` per record, ``--json --batches``, corrupt input."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import kafka.codec
import kafka.record.default_records
import kafka.record.legacy_records
import pytest
from kafka.record import MemoryRecordsBuilder as KafkaBuilder

from lazyconv._cli import main
from lazyconv.records import Compression, RecordsBuilder, TimestampType, build_end_txn_marker
from lazyconv.records._compression import compression_name

pytestmark = pytest.mark.slow  # many examples or real clients: the full suite runs them, the quick look does not

RECORD_KEYS = [
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
    "magic",
    "compression",
    "batch_base_offset",
    "control",
    "transactional",
    "producer_id",
    "producer_epoch",
    "base_sequence",
]
BATCH_KEYS = {
    "position",
    "base_offset",
    "last_offset",
    "magic",
    "compression",
    "timestamp_type",
    "max_timestamp",
    "partition_leader_epoch",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "transactional",
    "control",
    "size",
    "record_count",
    "crc",
    "crc_valid",
}


def dump(path: Path, *options: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["dump", str(path), *options])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def dump_json(path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> list[dict]:
    status, out, err = dump(path, "--json", *options, capsys=capsys)
    assert status == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's snappy needs python-snappy; give it cramjam's raw blocks instead."""
    import cramjam

    class _Snappy:
        compress = staticmethod(lambda data: bytes(cramjam.snappy.compress_raw(data)))
        decompress = staticmethod(lambda data: bytes(cramjam.snappy.decompress_raw(data)))

    monkeypatch.setattr(kafka.codec, "snappy", _Snappy)
    monkeypatch.setattr(kafka.codec, "has_snappy", lambda: True)
    for module in (kafka.record.legacy_records, kafka.record.default_records):
        if hasattr(module, "has_snappy"):
            monkeypatch.setattr(module, "has_snappy", lambda: True)


# ---------------------------------------------------------------------------------------------
# Files from kafka-python's builder

KAFKA_CODECS = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}  # kafka-python uses Kafka's codec ids


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize(
    ("magic", "codec"),
    # zstd exists only in magic 2
    [(m, c) for m in (0, 1, 2) for c in Compression if m == 2 or c != Compression.ZSTD],
    ids=lambda v: compression_name(v) if isinstance(v, Compression) else f"v{v}",
)
def test_json_on_kafka_python_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], magic: int, codec: int
) -> None:
    segment = bytearray()
    expected = []
    offset = 0
    for batch_index in range(3):
        # the last v2 batch carries producer state (a transactional producer)
        producer = magic == 2 and batch_index == 2
        builder = KafkaBuilder(
            magic,
            KAFKA_CODECS[codec],
            batch_size=1 << 20,
            offset=offset,
            transactional=producer,
            producer_id=5 if producer else -1,
            producer_epoch=1 if producer else -1,
            base_sequence=40 if producer else -1,
        )
        for i in range(4):
            key = None if i == 1 else f"key-{batch_index}-{i}".encode()
            # compressible values: kafka-python stores a batch uncompressed if that is smaller
            value = None if i == 2 else bytes([batch_index, i]) * (100 + i)
            headers = [("h", b"\x00\xff"), ("n", None)] if magic == 2 and i == 3 else []
            timestamp = 1_650_000_000_000 + 10 * batch_index + i
            builder.append(timestamp, key, value, headers)
            expected.append(
                {
                    "offset": offset,
                    "timestamp": None if magic == 0 else timestamp,
                    "timestamp_type": None if magic == 0 else "create_time",
                    "key": None if key is None else key.hex(),
                    "value": None if value is None else value.hex(),
                    "headers": [[n, None if v is None else v.hex()] for n, v in headers],
                    "magic": magic,
                    "compression": compression_name(codec),
                    # kafka-python writes v2 batches with base offset 0 (producer style) and
                    # the absolute offsets as deltas; a legacy message is its own batch
                    "batch_base_offset": 0 if magic == 2 else (offset - i if codec else offset),
                    "control": False,
                    "transactional": producer,
                    "producer_id": 5 if producer else -1,
                    "producer_epoch": 1 if producer else -1,
                    "base_sequence": 40 if producer else -1,
                }
            )
            offset += 1
        builder.close()
        segment += builder.buffer()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(segment))
    lines = dump_json(path, capsys)
    assert [list(line) for line in lines] == [RECORD_KEYS] * len(lines)
    assert lines == expected

    batches = dump_json(path, capsys, "--batches")
    batch_records = 4 if (codec != Compression.NONE or magic == 2) else 1
    assert len(batches) == len(expected) // batch_records
    for batch in batches:
        assert set(batch) == BATCH_KEYS
        assert batch["crc_valid"] is True
        assert batch["record_count"] == batch_records
        assert batch["magic"] == magic and batch["compression"] == compression_name(codec)
    assert sum(b["size"] for b in batches) == len(segment)


# ---------------------------------------------------------------------------------------------
# Files from our builder: headers, nulls, LogAppendTime, producer state, control batches


def _our_segment() -> tuple[bytes, list[dict]]:
    parts: list[bytes] = []
    expected: list[dict] = []
    offset = 0
    for magic, codec, ts_type in [
        (2, Compression.ZSTD, TimestampType.CREATE_TIME),
        (2, Compression.LZ4, TimestampType.LOG_APPEND_TIME),
        (1, Compression.SNAPPY, TimestampType.CREATE_TIME),
        (0, Compression.GZIP, TimestampType.CREATE_TIME),
        (1, Compression.NONE, TimestampType.CREATE_TIME),
    ]:
        transactional = magic == 2 and codec == Compression.ZSTD
        builder = RecordsBuilder(
            magic,
            codec,
            timestamp_type=ts_type,
            base_offset=offset,
            log_append_time=1_700_000_000_000 if ts_type == TimestampType.LOG_APPEND_TIME else None,
            producer_id=77 if transactional else -1,
            producer_epoch=3 if transactional else -1,
            base_sequence=10 if transactional else -1,
            is_transactional=transactional,
        )
        base = offset
        for i in range(3):
            headers = (("trace", b"\x01\x02"), ("none", None)) if magic == 2 else ()
            key = None if i == 0 else b"k%d" % i
            value = b"" if i == 1 else b"v" * (i + 1)
            builder.append(offset=offset, timestamp=1000 + i, key=key, value=value, headers=headers)
            if ts_type == TimestampType.LOG_APPEND_TIME:
                timestamp = 1_700_000_000_000
            else:
                timestamp = None if magic == 0 else 1000 + i
            expected.append(
                {
                    "offset": offset,
                    "timestamp": timestamp,
                    "timestamp_type": None
                    if magic == 0
                    else ("log_append_time" if ts_type else "create_time"),
                    "key": None if key is None else key.hex(),
                    "value": value.hex(),
                    "headers": [[n, None if v is None else v.hex()] for n, v in headers],
                    "magic": magic,
                    "compression": compression_name(codec),
                    "batch_base_offset": base if codec or magic == 2 else offset,
                    "control": False,
                    "transactional": transactional,
                    "producer_id": 77 if transactional else -1,
                    "producer_epoch": 3 if transactional else -1,
                    "base_sequence": 10 if transactional else -1,
                }
            )
            offset += 1
        parts.append(builder.build())
    parts.append(build_end_txn_marker(offset, 5000, 77, 3, commit=True, coordinator_epoch=9))
    expected.append(
        {
            "offset": offset,
            "timestamp": 5000,
            "timestamp_type": "create_time",
            "key": "00000001",  # control key: version 0, type 1 (COMMIT)
            "value": "000000000009",  # version 0, coordinator epoch 9
            "headers": [],
            "magic": 2,
            "compression": "none",
            "batch_base_offset": offset,
            "control": True,
            "transactional": True,
            "producer_id": 77,
            "producer_epoch": 3,
            "base_sequence": -1,
        }
    )
    return b"".join(parts), expected


def test_json_on_our_builder_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment, expected = _our_segment()
    path = tmp_path / "ours.log"
    path.write_bytes(segment)
    lines = dump_json(path, capsys)
    assert lines == expected
    assert all(list(line) == RECORD_KEYS for line in lines)
    batches = dump_json(path, capsys, "--batches")
    assert [b["record_count"] for b in batches] == [3, 3, 3, 3, 1, 1, 1, 1]
    assert [b["compression"] for b in batches[:4]] == ["zstd", "lz4", "snappy", "gzip"]
    assert batches[1]["timestamp_type"] == "log_append_time"
    assert batches[1]["max_timestamp"] == 1_700_000_000_000
    assert batches[3]["max_timestamp"] is None and batches[3]["timestamp_type"] is None
    assert batches[-1]["control"] is True and batches[-1]["transactional"] is True
    assert [b["position"] for b in batches] == [
        sum(b["size"] for b in batches[:i]) for i in range(len(batches))
    ]


def test_readable_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment, _ = _our_segment()
    path = tmp_path / "ours.log"
    path.write_bytes(segment)
    # Kafka's DumpLogSegments listing (tests/kafka/test_dump_kafka.py compares the two on a
    # broker's logs); records with --deep-iteration / --print-data-log, lazyconv's extras behind
    # --headers and --hex
    status, out, err = dump(path, "--print-data-log", "--headers", "--hex", capsys=capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert not lines[1].startswith("Log starting offset")  # the name is not a base offset
    headers = [line for line in lines if line.startswith(("baseOffset:", "offset:"))]
    records = [line for line in lines if line.startswith("| ")]
    assert len(headers) == 8 and len(records) == 16
    assert "compresscodec: zstd" in headers[0] and "isTransactional: true" in headers[0]
    assert "producerId: 77" in headers[0] and "isvalid: true" in headers[0]
    assert "lastSequence: " in headers[0] and "deleteHorizonMs: OptionalLong.empty" in headers[0]
    assert "LogAppendTime: 1700000000000" in headers[1]
    assert "magic: 0" in headers[3] and "NoTimestampType: -1" in headers[3]
    assert headers[3].startswith("offset: ")  # a legacy entry: Kafka's shorter line
    assert "| offset: 0 CreateTime: 1000 keySize: -1 valueSize: 1 sequence: " in records[0]
    assert "headerKeys: [trace,none] headers: trace=0x0102, none=null" in records[0]
    assert "key: k2 payload: vvv" in records[2]
    assert records[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")
    for options in ((), ("--batches",)):  # Kafka's default: batches only
        status, out, _ = dump(path, *options, capsys=capsys)
        assert status == 0 and not any(line.startswith("| ") for line in out.splitlines())
        assert len(out.splitlines()) == 1 + 8
    status, out, _ = dump(path, "--deep-iteration", capsys=capsys)
    assert status == 0 and "payload: " not in out and "headers: " not in out
    assert len([line for line in out.splitlines() if line.startswith("| ")]) == 16


# ---------------------------------------------------------------------------------------------
# Kafka's own view of the golden files (Java readers) against ours


def test_json_matches_kafka_on_golden_inputs(
    golden_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stored batches of every golden case (Java-written, every magic and codec)."""
    assert _compare_with_kafka(sorted(golden_dir.glob("*/input.bin")), capsys) >= 25


@pytest.mark.slow
def test_json_matches_kafka_on_golden_conversions(
    golden_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's down-converted records and lazy-send outputs (padding, cut batches included)."""
    paths = [p for p in sorted(golden_dir.glob("*/*.bin")) if p.name != "input.bin"]
    assert _compare_with_kafka(paths, capsys) >= 50


def _compare_with_kafka(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> int:
    timestamp_types = {"CreateTime": "create_time", "LogAppendTime": "log_append_time"}
    checked = 0
    for binary in paths:
        golden = binary.with_suffix(".dump.jsonl")
        if not golden.exists():
            continue
        kafka_lines = [json.loads(line) for line in golden.read_text().splitlines()]
        kafka_batches = [line for line in kafka_lines if line["type"] == "batch"]
        kafka_records = [line for line in kafka_lines if line["type"] == "record"]
        ours = dump_json(binary, capsys)
        assert len(ours) == len(kafka_records), binary
        for mine, theirs in zip(ours, kafka_records, strict=True):
            assert mine["offset"] == theirs["offset"], binary
            assert mine["key"] == theirs["key_hex"] and mine["value"] == theirs["value_hex"]
            assert mine["headers"] == [[h["key"], h["value_hex"]] for h in theirs["headers"]]
            if mine["magic"] == 0:
                assert mine["timestamp"] is None and mine["timestamp_type"] is None
            else:
                assert mine["timestamp"] == theirs["timestamp"], binary
        our_batches = dump_json(binary, capsys, "--batches")
        assert len(our_batches) == len(kafka_batches), binary
        for mine, theirs in zip(our_batches, kafka_batches, strict=True):
            for key in ("position", "size", "magic", "base_offset", "last_offset", "compression"):
                assert mine[key] == theirs[key], (binary, key)
            assert mine["crc"] == theirs["checksum"] and mine["crc_valid"] == theirs["valid"]
            assert mine["timestamp_type"] == timestamp_types.get(theirs["timestamp_type"])
            if theirs["magic"] == 2:
                for key in ("producer_id", "producer_epoch", "base_sequence", "transactional"):
                    assert mine[key] == theirs[key], (binary, key)
                assert mine["control"] == theirs["control"]
                assert mine["record_count"] == theirs["count"]
                assert mine["max_timestamp"] == theirs["max_timestamp"]
        checked += 1
    return checked


# ---------------------------------------------------------------------------------------------
# Corrupt input: valid part first, then exit 1 with message and position on stderr


def _two_batches() -> tuple[bytes, bytes]:
    first = RecordsBuilder(2, Compression.NONE, base_offset=0)
    first.append(timestamp=1, key=b"a", value=b"1")
    second = RecordsBuilder(2, Compression.GZIP, base_offset=1)
    second.append(timestamp=2, key=b"b", value=b"2")
    return first.build(), second.build()


def test_corrupt_crc_prints_valid_part_then_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _two_batches()
    broken = bytearray(second)
    broken[-3] ^= 0x40  # inside the compressed payload: the CRC no longer matches
    path = tmp_path / "corrupt.log"
    path.write_bytes(first + bytes(broken))
    status, out, err = dump(path, "--json", capsys=capsys)
    assert status == 1
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [0]
    assert "lazyconv dump: error:" in err and "CRC" in err.upper()
    assert f"(at byte {len(first)}" in err or f"at byte {len(first) + 17}" in err

    status, out, err = dump(path, "--json", "--batches", capsys=capsys)
    assert status == 1
    batches = [json.loads(line) for line in out.splitlines()]
    assert [b["crc_valid"] for b in batches] == [True, False]
    assert f"(at byte {len(first)})" in err

    status, out, err = dump(path, "--deep-iteration", capsys=capsys)
    assert status == 1
    assert "isvalid: false" in out and "| offset: 0" in out and "| offset: 1" not in out
    status, out, err = dump(path, capsys=capsys)  # batches only: listed, then exit 1
    assert status == 1 and out.count("isvalid: ") == 2 and "isvalid: false" in out


@pytest.mark.parametrize("magic", [0, 1])
def test_no_validate_record_line_of_a_legacy_message_says_its_crc_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], magic: int
) -> None:
    # Kafka's record line of a v0/v1 message prints the message's own isValid: a plain message
    # is its own record, so with --no-validate its line says false as its batch line does
    entries = b""
    for offset, value in enumerate((b"hello", b"world")):
        builder = RecordsBuilder(magic, Compression.NONE, base_offset=offset)
        builder.append(timestamp=offset + 1, key=b"k", value=value)
        entries += builder.build()
    broken = bytearray(entries)
    broken[-1] ^= 0x01  # the second message's value: its CRC-32 no longer matches
    path = tmp_path / "legacy.log"
    path.write_bytes(bytes(broken))
    status, out, err = dump(path, "--deep-iteration", "--no-validate", capsys=capsys)
    assert status == 0, err
    records = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(records) == 2
    assert " isValid: true crc: " in records[0]
    assert " isValid: false crc: " in records[1]


def test_control_record_of_an_unknown_type_prints_its_type_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's DumpLogSegments: " controlType: $controlType($controlTypeId)", the id from the key
    builder = RecordsBuilder(2, Compression.NONE, base_offset=0, is_control=True)
    builder.append(timestamp=5, key=struct.pack(">hh", 0, 42), value=b"\x00\x00")
    path = tmp_path / "control.log"
    path.write_bytes(builder.build())
    status, out, err = dump(path, "--deep-iteration", capsys=capsys)
    assert status == 0, err
    (record,) = [line for line in out.splitlines() if line.startswith("| ")]
    assert record.endswith(" controlType: UNKNOWN(42)")


def test_negative_base_sequences_print_as_kafka_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # what Kafka 4.0.1's DumpLogSegments printed for these batches: a negative base sequence
    # other than -1 is added to without wrapping for lastSequence, and its records have
    # sequence -1 (Kafka's reader gives records a sequence only from a base of 0 or more)
    data, offset = b"", 0
    for base, count in ((-5, 3), (-2147483648, 2), (2147483646, 3), (-1, 2)):
        builder = RecordsBuilder(2, Compression.NONE, base_offset=offset, producer_id=7,
                                 producer_epoch=0, base_sequence=base)
        for i in range(count):
            builder.append(timestamp=10 + i, key=b"k", value=b"v")
        data, offset = data + builder.build(), offset + count
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    status, out, err = dump(path, "--deep-iteration", capsys=capsys)
    assert status == 0, err
    batches = [line.split(" producerId: ")[0].split(" count: ")[1]
               for line in out.splitlines() if line.startswith("baseOffset: ")]
    assert batches == [
        "3 baseSequence: -5 lastSequence: -3",
        "2 baseSequence: -2147483648 lastSequence: -2147483647",
        "3 baseSequence: 2147483646 lastSequence: 0",
        "2 baseSequence: -1 lastSequence: -1",
    ]
    sequences = [int(line.split(" sequence: ")[1].split()[0])
                 for line in out.splitlines() if line.startswith("| ")]
    assert sequences == [-1, -1, -1, -1, -1, 2147483646, 2147483647, 0, -1, -1]


@pytest.mark.parametrize(("sequence", "increment", "kafka"), [
    (-5, 2, -3), (2147483646, 2, 0), (2147483647, 2147483647, 2147483646),
    # a negative increment (a corrupt offset delta): Java's int arithmetic overflows
    (5, -1, -2147483644), (-2147483648, -1, 2147483647),
])
def test_sequences_add_up_as_kafkas_increment_sequence(sequence: int, increment: int,
                                                        kafka: int) -> None:
    # the numbers are what Kafka 4.0.1's DefaultRecordBatch.incrementSequence returned
    from lazyconv.records._batch import increment_sequence

    assert increment_sequence(sequence, increment) == kafka


def test_corrupt_size_field_names_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _two_batches()
    broken = bytearray(second)
    broken[8:12] = struct.pack(">i", 5)  # size below the minimum of 14
    path = tmp_path / "corrupt.log"
    path.write_bytes(first + bytes(broken))
    status, out, err = dump(path, "--json", capsys=capsys)
    assert status == 1
    assert len(out.splitlines()) == 1
    assert f"(at byte {len(first) + 8})" in err


def test_truncated_tail_is_skipped_with_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = _two_batches()
    path = tmp_path / "partial.log"
    path.write_bytes(first + second[:-5])
    status, out, _ = dump(path, "--json", capsys=capsys)
    assert status == 0
    assert len(out.splitlines()) == 1
    assert "trailing bytes" in caplog.text


def test_max_bytes_reads_the_batches_within_the_first_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's --max-bytes N reads a .log as its first N bytes (FileRecords.slice(0, N)): the
    # batches that end within them; the batch the limit cuts is not a torn tail (no "Found N
    # invalid bytes" line, no warning, not an error under --strict)
    first, second = _two_batches()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(first + second)
    ends = [len(first), len(first) + len(second)]
    status = main(["dump", "-q", str(path), "--deep-iteration"])
    full = capsys.readouterr().out.splitlines()
    assert status == 0 and len(full) == 2 + 2 * len(ends)
    for limit in [*range(ends[-1] + 3), 2**31 - 1, 2**40]:
        whole = sum(end <= limit for end in ends)
        status = main(["dump", "-q", str(path), "--deep-iteration", "--strict", "--max-bytes",
                       str(limit)])
        out, err = capsys.readouterr()
        assert (status, err) == (0, ""), limit
        assert out.splitlines() == full[:2 + 2 * whole], limit
        status = main(["dump", "-q", str(path), "--json", "--max-bytes", str(limit)])
        out, err = capsys.readouterr()
        assert (status, err) == (0, ""), limit
        assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(whole))


def test_max_bytes_over_a_torn_tail_prints_kafkas_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's tool prints "Found N invalid bytes at the end of FILE" only with its default
    # --max-bytes (2147483647, no limit); a limit past the end of the file reads the torn
    # tail all the same: lazyconv still warns on stderr, and --strict fails
    first, second = _two_batches()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(first + second[:-5])
    found = f"Found {len(second) - 5} invalid bytes at the end of {path.name}"
    for limit, kafka_prints_it in ((None, True), (2**31 - 1, True), (len(first + second), False)):
        option = [] if limit is None else ["--max-bytes", str(limit)]
        status = main(["dump", "-q", str(path), *option])
        out, err = capsys.readouterr()
        assert status == 0
        assert (found in out.splitlines()) == kafka_prints_it, limit
        assert "trailing bytes" in err
        status = main(["dump", "-q", str(path), "--strict", *option])
        assert status == 1 and "trailing bytes" in capsys.readouterr().err


def test_max_bytes_leaves_index_files_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's tool limits only the .log files it reads (and KRaft snapshots); an index and
    # the check of its entries against its .log are read whole
    folder = _small_log_dir(tmp_path)
    log_file = sorted(folder.glob("*.log"))[0]
    files = [str(log_file.with_suffix(s)) for s in (".index", ".timeindex")]
    status = main(["dump", "-q", *files])
    whole = capsys.readouterr().out
    status = main(["dump", "-q", *files, "--max-bytes", "0"])
    assert status == 0 and capsys.readouterr().out == whole
    assert whole.count("offset: ") >= 2


def test_missing_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = dump(tmp_path / "nope.log", capsys=capsys)
    assert status == 2 and "cannot open" in err


def test_console_entry_point_exit_status(tmp_path: Path) -> None:
    first, second = _two_batches()
    broken = bytearray(second)
    broken[-3] ^= 0x40
    path = tmp_path / "corrupt.log"
    path.write_bytes(first + bytes(broken))
    result = subprocess.run(
        [sys.executable, "-m", "lazyconv._cli", "dump", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert json.loads(result.stdout.splitlines()[0])["key"] == "61"
    assert "(at byte" in result.stderr


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["dump", "--help"])
    help_text = capsys.readouterr().out
    for option in ("--json", "--batches", "--no-validate", "--max-decompressed-size", "--quiet",
                   "--files", "--max-bytes"):
        assert option in help_text


# ---------------------------------------------------------------------------------------------
# Kafka's other segment files, and several files at once (as kafka-dump-log.sh)


def _small_log_dir(tmp_path: Path) -> Path:
    from lazyconv.fixtures._generate import generate

    generate(tmp_path / "logs", 96 * 1024, partitions=1, seed=3, profile="mixed",
             index_interval_bytes=4096)
    return next(p for p in sorted((tmp_path / "logs").glob("*-0")) if any(p.glob("*.index")))


def test_index_entries_point_at_batches_of_the_segment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _small_log_dir(tmp_path)
    log_file = sorted(folder.glob("*.log"))[0]
    status, out, err = dump(log_file.with_suffix(".index"), "--json", capsys=capsys)
    assert status == 0, err
    entries = [json.loads(line) for line in out.splitlines()]
    assert entries, "the fixture writes an index entry every 4 KiB"
    batches = {}
    from lazyconv.records import FileRecords

    with FileRecords(log_file) as records:
        for batch in records.batches():
            batches[batch.position] = batch.last_offset
    for entry in entries:  # Kafka indexes a batch's last offset at the batch's position
        assert batches[entry["position"]] == entry["offset"]
    status, out, err = dump(log_file.with_suffix(".timeindex"), "--json", capsys=capsys)
    assert status == 0, err
    times = [json.loads(line) for line in out.splitlines()]
    assert times and all(t["offset"] in batches.values() for t in times)
    assert [t["timestamp"] for t in times] == sorted(t["timestamp"] for t in times)


@pytest.mark.parametrize(("suffix", "entry_size"), [(".index", 8), (".timeindex", 12)])
def test_an_index_with_a_partial_last_entry_lists_its_whole_entries_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, entry_size: int
) -> None:
    # Kafka's index readers round the size down and its tool lists the whole entries; lazyconv
    # lists them too (corrupt input: the valid part first), then fails at the partial one
    folder = _small_log_dir(tmp_path)
    index = sorted(folder.glob("*" + suffix))[0]
    status, whole, _ = dump(index, capsys=capsys)
    assert status == 0 and len(whole.splitlines()) > 1
    size = index.stat().st_size
    index.write_bytes(index.read_bytes() + bytes(entry_size - 3))
    status, out, err = dump(index, capsys=capsys)
    assert status == 1
    assert out == whole
    assert f"(at byte {size})" in err
    status, out, err = dump(index, "--json", capsys=capsys)
    assert status == 1 and len(out.splitlines()) == len(whole.splitlines()) - 1


def test_reports_name_a_file_as_kafka_does_without_following_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's reports name a file by java.io.File.getAbsolutePath(): the path as given, made
    # absolute, a symbolic link in it kept
    folder = _small_log_dir(tmp_path)
    index = next(p for p in sorted(folder.glob("*.index")) if p.stat().st_size >= 16)
    data = bytearray(index.read_bytes())
    relative, position = struct.unpack_from(">ii", data, 0)
    struct.pack_into(">ii", data, 0, relative - 1, position)
    index.write_bytes(bytes(data))
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    status, _, err = dump(Path("link") / index.name, "--verify-index-only", capsys=capsys)
    assert status == 1
    assert err.splitlines()[0] == f"Mismatches in :{tmp_path}/link/{index.name}"


def test_the_listing_names_a_file_as_kafka_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's "Dumping FILE", "FILE is empty." and "FILE passed sanity check." print a
    # java.io.File: the path as given, repeated slashes made one ("./a//b" -> "./a/b")
    folder = _small_log_dir(tmp_path)
    log_file = next(iter(sorted(folder.glob("*.log"))))
    index = log_file.with_suffix(".index")
    empty = folder / "00000000000000999999.index"
    empty.write_bytes(b"")
    monkeypatch.chdir(folder.parent)
    as_given = [f"./{folder.name}//{p.name}" for p in (log_file, index, empty)]
    status, out, err = main(["dump", "-q", as_given[0]]), *capsys.readouterr()
    assert status == 0, err
    assert out.splitlines()[0] == f"Dumping ./{folder.name}/{log_file.name}"
    status, out, err = main(["dump", "-q", "--index-sanity-check", *as_given[1:]]), *capsys.readouterr()
    assert status == 0, err
    assert out.splitlines() == [f"Dumping ./{folder.name}/{index.name}",
                                f"./{folder.name}/{index.name} passed sanity check.",
                                f"Dumping ./{folder.name}/{empty.name}",
                                f"./{folder.name}/{empty.name} is empty."]


def test_sanity_check_counts_the_pre_allocated_slots_as_kafka_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A broker pre-allocates the active segment's indexes with zeros and trims them on a clean
    # shutdown; killed, it leaves them long. Kafka's sanityCheck takes the file's last slot: a
    # zero offset entry is the base offset (passes), a zero time entry has timestamp 0, before
    # the first (fails: the broker rebuilds the time index). The messages are Kafka 4.0.1's.
    folder = _small_log_dir(tmp_path)
    index = next(iter(sorted(folder.glob("*.index"))))
    timeindex = index.with_suffix(".timeindex")
    first_timestamp = struct.unpack_from(">q", timeindex.read_bytes())[0]
    for path, slots in ((index, 8 * 100), (timeindex, 12 * 100)):
        path.write_bytes(path.read_bytes() + bytes(slots))
    status, out, err = dump(index, "--index-sanity-check", capsys=capsys)
    assert status == 0, err
    assert out.splitlines()[1] == f"{index} passed sanity check."
    status, out, err = dump(timeindex, "--index-sanity-check", capsys=capsys)
    assert status == 1 and out.splitlines() == [f"Dumping {timeindex}"]
    assert (f"Corrupt time index found, time index file ({timeindex}) has non-zero size but the "
            f"last timestamp is 0 which is less than the first timestamp {first_timestamp} "
            f"(at byte {timeindex.stat().st_size - 12})") in err
    # a last entry below the base offset, and a partial last entry: Kafka's order and words
    index.write_bytes(index.read_bytes() + struct.pack(">ii", -2, 0) + b"\x00")
    status, _, err = dump(index, "--index-sanity-check", capsys=capsys)
    assert status == 1
    assert (f"Corrupt index found, index file {index} has non-zero size but the last offset is "
            f"{int(index.stem) - 2} which is less than the base offset {int(index.stem)}") in err
    index.write_bytes(index.read_bytes()[:-9] + b"\x00")
    status, _, err = dump(index, "--index-sanity-check", capsys=capsys)
    assert status == 1
    assert (f"Index file {index} is corrupt, found {index.stat().st_size} bytes which is neither "
            "positive nor a multiple of 8") in err


def test_several_files_in_one_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _small_log_dir(tmp_path)
    log_file = sorted(folder.glob("*.log"))[0]
    status = main(["dump", str(log_file), str(log_file.with_suffix(".index")),
                   str(log_file.with_suffix(".timeindex"))])
    out = capsys.readouterr().out
    assert status == 0
    headers = [line for line in out.splitlines() if line.startswith("Dumping ")]
    assert headers == [f"Dumping {log_file.with_suffix(s)}" for s in (".log", ".index", ".timeindex")]
    assert "offset: " in out and "position: " in out and "timestamp: " in out


def test_files_is_kafkas_comma_separated_list_of_the_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kafka-dump-log.sh --files A,B,C: the same listing as the paths given one by one; a
    # trailing comma is allowed (Java's String.split drops trailing empty names); repeated,
    # the lists add up
    folder = _small_log_dir(tmp_path)
    log_file = sorted(folder.glob("*.log"))[0]
    paths = [str(log_file.with_suffix(s)) for s in (".log", ".index", ".timeindex")]
    status = main(["dump", "-q", "--deep-iteration", *paths])
    expected = capsys.readouterr()
    assert status == 0, expected.err
    for files in ([",".join(paths)], [",".join(paths) + ","], [paths[0], ",".join(paths[1:])]):
        argv = ["dump", "-q", "--deep-iteration"]
        for value in files:
            argv += ["--files", value]
        status = main(argv)
        got = capsys.readouterr()
        assert status == 0, got.err
        assert (got.out, got.err) == (expected.out, expected.err)
    # a name with a comma is given as a PATH argument
    odd = tmp_path / "a,b.log"
    odd.write_bytes(log_file.read_bytes())
    status = main(["dump", "-q", str(odd)])
    assert status == 0 and capsys.readouterr().out.startswith(f"Dumping {odd}\n")


def test_transaction_index_and_producer_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lazyconv._commands._segment_files import encode_producer_snapshot

    txn = tmp_path / "00000000000000000100.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 7, 100, 120, 99) + struct.pack(">hqqqq", 0, 8, 130, 131, 125))
    status, out, _ = dump(txn, capsys=capsys)
    assert status == 0
    assert out.splitlines()[1:] == [
        "version: 0 producerId: 7 firstOffset: 100 lastOffset: 120 lastStableOffset: 99",
        "version: 0 producerId: 8 firstOffset: 130 lastOffset: 131 lastStableOffset: 125",
    ]
    entry = {"producer_id": 5, "producer_epoch": 1, "last_sequence": 9, "last_offset": 42,
             "offset_delta": 9, "timestamp": 1_700_000_000_000, "coordinator_epoch": 3,
             "current_txn_first_offset": -1}
    snapshot = tmp_path / "00000000000000000043.snapshot"
    snapshot.write_bytes(encode_producer_snapshot([entry]))
    status, out, _ = dump(snapshot, "--json", capsys=capsys)
    assert status == 0 and [json.loads(line) for line in out.splitlines()] == [entry]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 1
    snapshot.write_bytes(bytes(data))
    status, _, err = dump(snapshot, capsys=capsys)
    assert status == 1 and "CRC" in err


def test_a_header_key_that_is_not_utf8_prints_as_kafka_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka stores any key bytes and its DumpLogSegments decodes them as Java does (U+FFFD for
    each bad byte); the records layer keeps them as lone surrogates (they round-trip), which
    dump must not print raw, nor put into --json (not valid JSON)."""
    builder = RecordsBuilder(2, Compression.NONE, base_offset=0)
    builder.append(timestamp=1000, key=b"k", value=b"v", headers=[("a\udcffb", b"x")])
    path = tmp_path / "keys.log"
    path.write_bytes(builder.build())
    assert b"a\xffb" in path.read_bytes()
    status, out, err = dump(path, "--print-data-log", capsys=capsys)
    assert status == 0, err
    assert "headerKeys: [a\ufffdb]" in out
    (record,) = [r for r in dump_json(path, capsys) if "headers" in r]
    assert record["headers"] == [["a\ufffdb", "78"]]
    json.dumps(record, ensure_ascii=False).encode("utf-8")  # no lone surrogate left


def test_json_is_refused_with_the_index_checks(tmp_path, capsys) -> None:
    """The checks report as text and set the exit status; with --json they listed the entries
    of a garbage index and exited 0 (found by a review)."""
    from lazyconv._cli import main

    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(bytes(range(256)) * 4)
    for check in ("--verify-index-only", "--index-sanity-check"):
        assert main(["dump", str(index), "--json", check]) == 2
        assert "--json cannot be combined with" in capsys.readouterr().err
