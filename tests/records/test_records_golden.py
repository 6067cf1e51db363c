"""The golden inputs produced by Kafka's Java code decode to what input.dump.jsonl says,
from memory and from a file."""

from __future__ import annotations

import json

import pytest
from golden_cases import GOLDEN_DIR, case_dirs

from lazyconv.records import (
    Compression,
    ControlRecordType,
    FileRecords,
    MemoryRecords,
    TimestampType,
    parse_control_key,
    parse_end_txn_marker,
)

GOLDEN = GOLDEN_DIR
CASES = sorted(p.name for p in case_dirs())
# every other golden byte file with a dump: Java's down-converted outputs and lazy sends
OUTPUTS = (
    sorted(
        str(p.relative_to(GOLDEN))
        for p in GOLDEN.glob("*/*.bin")
        if p.name != "input.bin" and p.with_suffix(".dump.jsonl").is_file()
    )
)

TS_NAMES = {
    "CreateTime": TimestampType.CREATE_TIME,
    "LogAppendTime": TimestampType.LOG_APPEND_TIME,
    "NoTimestampType": TimestampType.NO_TIMESTAMP,
}


def unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def load_dump(case: str, name: str = "input") -> tuple[list[dict], list[list[dict]], dict]:
    batches: list[dict] = []
    records: list[list[dict]] = []
    end: dict = {}
    for line in (GOLDEN / case / f"{name}.dump.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if obj["type"] == "batch":
            batches.append(obj)
            records.append([])
        elif obj["type"] == "record":
            records[-1].append(obj)
        else:
            end = obj
    return batches, records, end


def check(records_obj, case: str, name: str = "input") -> None:
    want_batches, want_records, end = load_dump(case, name)
    got = list(records_obj.batches())
    assert len(got) == len(want_batches) == end["batches"]
    valid_bytes = 0
    for batch, want, want_recs in zip(got, want_batches, want_records, strict=True):
        assert batch.position == want["position"]
        assert batch.size_in_bytes == want["size"]
        assert batch.magic == want["magic"]
        assert batch.base_offset == want["base_offset"]
        assert batch.last_offset == want["last_offset"]
        assert batch.compression == Compression[want["compression"].upper()]
        assert batch.timestamp_type == TS_NAMES[want["timestamp_type"]]
        assert batch.max_timestamp == want["max_timestamp"]
        assert batch.crc == want["checksum"]
        assert batch.is_valid() == want["valid"]
        if batch.magic == 2:
            assert batch.record_count == want["count"]
            assert batch.producer_id == want["producer_id"]
            assert batch.producer_epoch == want["producer_epoch"]
            assert batch.base_sequence == want["base_sequence"]
            assert batch.last_sequence == want["last_sequence"]
            assert batch.is_transactional == want["transactional"]
            assert batch.is_control == want["control"]
            assert batch.partition_leader_epoch == want["partition_leader_epoch"]
        recs = list(batch)
        assert len(recs) == len(want_recs)
        for rec, w in zip(recs, want_recs, strict=True):
            assert rec.offset == w["offset"]
            assert rec.timestamp == w["timestamp"]
            assert rec.key == unhex(w["key_hex"])
            assert rec.value == unhex(w["value_hex"])
            assert rec.headers == tuple((h["key"], unhex(h["value_hex"])) for h in w["headers"])
            if "control_type" in w:
                kind = parse_control_key(rec.key)
                assert kind == ControlRecordType[w["control_type"]]
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    assert parse_end_txn_marker(rec.key, rec.value).coordinator_epoch == w["coordinator_epoch"]
        valid_bytes = batch.position + batch.size_in_bytes
    assert valid_bytes == end["valid_bytes"]


@pytest.mark.parametrize("case", CASES)
def test_golden_input_from_memory(case: str) -> None:
    data = (GOLDEN / case / "input.bin").read_bytes()
    records = MemoryRecords(data)
    check(records, case)
    _, _, end = load_dump(case)
    assert len(data) - records.valid_bytes() == end["trailing_bytes"]


@pytest.mark.parametrize("case", CASES)
def test_golden_input_from_file(case: str) -> None:
    with FileRecords.open(GOLDEN / case / "input.bin") as records:
        check(records, case)


@pytest.mark.parametrize("output", OUTPUTS)
def test_golden_java_outputs_decode_as_java_reads_them(output: str) -> None:
    case, filename = output.split("/")
    name = filename[: -len(".bin")]
    data = (GOLDEN / output).read_bytes()
    records = MemoryRecords(data)
    check(records, case, name)
    _, _, end = load_dump(case, name)
    assert len(data) - records.valid_bytes() == end["trailing_bytes"]
