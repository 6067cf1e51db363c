"""``lazyconv dump`` on KRaft metadata: the control records of ``__cluster_metadata`` segments
and snapshots print as Kafka's DumpLogSegments prints them (``SnapshotHeader {...}`` JSON).
The snapshots in ``kraft_snapshot/`` and the listing beside them were made by Kafka 4.0.1
(tests/kafka/test_dump_kafka.py compares with the real tool on a broker's own files)."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from lazyconv._cli import main
from lazyconv.protocol._schema import (
    INT16,
    INT32,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    Field,
    Struct,
    walk_encode,
)
from lazyconv.records import Compression, RecordsBuilder

KRAFT = Path(__file__).parent / "kraft_snapshot"
SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
BOOTSTRAP = "bootstrap.checkpoint"

# VotersRecord.json (version 0, flexible), to write test records
_VOTERS = Struct("VotersRecord", (
    Field("version", INT16),
    Field("voters", ArrayOf(Struct("Voter", (
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
        Field("endpoints", ArrayOf(Struct("Endpoint", (
            Field("name", STRING), Field("host", STRING), Field("port", UINT16))))),
        Field("k_raft_version_feature", Struct("KRaftVersionFeature", (
            Field("min_supported_version", INT16), Field("max_supported_version", INT16)))),
    )))),
))


def dump(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    status = main(["dump", "-q", *argv])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def control_log(tmp_path: Path, *records: tuple[int, bytes]) -> Path:
    """A segment of one control batch holding a record per ``(type id, value)``."""
    builder = RecordsBuilder(2, Compression.NONE, base_offset=0, is_control=True)
    for type_id, value in records:
        builder.append(timestamp=5, key=struct.pack(">hh", 0, type_id), value=value)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(builder.build())
    return path


def test_kraft_snapshots_print_their_control_records_as_kafka_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(KRAFT)
    kafka = (KRAFT / "kafka-4.0.1-deep-iteration.txt").read_text().splitlines()
    status, ours, err = dump(capsys, "--deep-iteration", SNAPSHOT, BOOTSTRAP)
    assert status == 0, err
    assert ours == kafka  # the headings too: "Snapshot end offset: 0, epoch: 0", "KRaft bootstrap snapshot"
    text = "\n".join(ours)
    for name in ("SnapshotHeader {", "KRaftVersion {", "KRaftVoters {", "SnapshotFooter {"):
        assert name in text
    assert "controlType" not in text


def test_a_snapshot_is_read_as_record_batches_whatever_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's tool reads every .checkpoint as records; the heading needs END_OFFSET-EPOCH
    renamed = tmp_path / "copy.checkpoint"
    renamed.write_bytes((KRAFT / SNAPSHOT).read_bytes())
    named = tmp_path / "00000000000000001234-0000000056.checkpoint"
    named.write_bytes((KRAFT / SNAPSHOT).read_bytes())
    status, out, err = dump(capsys, str(renamed), str(named))
    assert status == 0, err
    assert out == [f"Dumping {renamed}", out[1], out[2],
                   f"Dumping {named}", "Snapshot end offset: 1234, epoch: 56", out[1], out[2]]
    assert all(line.startswith("baseOffset: ") for line in out[1:3])


def test_kraft_record_json_is_jacksons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the line Kafka 4.0.1's tool printed for this record: quotes, backslashes and control
    # characters escaped (\u00XX in upper case), other characters as they are, fields in
    # schema order, UUIDs as URL-safe base64, two voters (one without endpoints)
    voters = {"version": 0, "voters": [
        {"voter_id": 7, "voter_directory_id": uuid.UUID("0123456789abcdef0123456789abcdef"),
         "endpoints": [{"name": "CONTROLLER", "host": 'h"o\\s\nt\x1f\x7f\u00e9', "port": 65535},
                       {"name": "SSL", "host": "b", "port": 1}],
         "k_raft_version_feature": {"min_supported_version": -1, "max_supported_version": 32767}},
        {"voter_id": -2, "voter_directory_id": uuid.UUID(int=0), "endpoints": [],
         "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 0}},
    ]}
    path = control_log(
        tmp_path,
        (6, walk_encode(_VOTERS, voters, 0, True).to_bytes()),
        # a Version field of 2 and bytes after the record: read as version 0, the rest ignored
        (5, struct.pack(">hhB", 2, -3, 0) + b"junk"),
        (4, struct.pack(">hB", -7, 1) + b"\x05\x02ab"),  # an unknown tagged field: left out
    )
    status, out, err = dump(capsys, "--deep-iteration", str(path))
    assert status == 0, err
    records = [line.split(" headerKeys: [] ", 1)[1] for line in out if line.startswith("| ")]
    assert records == [
        'KRaftVoters {"version":0,"voters":[{"voterId":7,"voterDirectoryId":"ASNFZ4mrze8BI0VniavN7w",'
        '"endpoints":[{"name":"CONTROLLER","host":"h\\"o\\\\s\\nt\\u001F\x7f\u00e9","port":65535},'
        '{"name":"SSL","host":"b","port":1}],"kRaftVersionFeature":{"minSupportedVersion":-1,'
        '"maxSupportedVersion":32767}},{"voterId":-2,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA",'
        '"endpoints":[],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":0}}]}',
        'KRaftVersion {"version":2,"kRaftVersion":-3}',
        'SnapshotFooter {"version":-7}',
    ]


def test_a_kraft_record_that_does_not_decode_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's tool stops with an exception; lazyconv names the problem on the record's line
    path = control_log(tmp_path, (3, struct.pack(">h", 0)), (2, b"\x00\x00"))
    status, out, err = dump(capsys, "--deep-iteration", str(path))
    assert status == 0, err
    header, leader_change = [line for line in out if line.startswith("| ")]
    assert header.endswith(" controlType: unreadable (SnapshotHeaderRecord.last_contained_log_"
                           "timestamp needs 8 bytes but only 0 remain)")
    assert leader_change.endswith(" controlType: LEADER_CHANGE(2)")  # as Kafka: no JSON
