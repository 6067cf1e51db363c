"""What each interop client must receive, computed from the served fixture's own log files.

A record is compared as the tuple ``(offset, timestamp, key, value, headers)`` (timestamp -1 when
the reader gets none, headers ``()`` below magic v2), the same canonical form the fixture
manifest's checksums are defined over (:mod:`lazyconv.fixtures._checksum`), so the magic-v2
read_committed view is also checked against ``manifest.json``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lazyconv.fixtures import _checksum as fixture_checksum
from lazyconv.records import FileRecords

Record = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]

# Topics holding zstd batches in a compression.type=producer topic: a reader below Fetch v10
# gets UNSUPPORTED_COMPRESSION_TYPE for them, as from Kafka (zstd cannot be down-converted).
ZSTD_TOPICS = frozenset({"codecs", "upgraded"})
ABORT = 0


@dataclass(frozen=True)
class StoredRecord:
    """One data record of the log with what decides who sees it and how."""

    batch_magic: int
    aborted: bool
    record: Record


@dataclass(frozen=True)
class FixturePartition:
    """A partition of the fixture as the manifest describes it (``name`` is TOPIC-PARTITION)."""

    name: str
    topic: str
    partition: int
    records: int
    aborted_records: int
    last_record_offset: int
    checksum: str


def load_manifest(root: Path) -> dict[str, FixturePartition]:
    parts = json.loads((root / "manifest.json").read_text())["partitions"]
    return {name: FixturePartition(name, p["topic"], p["partition"], p["records"],
                                   p["aborted_records"], p["last_record_offset"], p["checksum"])
            for name, p in parts.items()}


@cache
def stored_records(folder: Path) -> tuple[StoredRecord, ...]:
    """Every data record of a partition folder, in offset order, with its transaction outcome.

    A transactional batch's records are aborted when the ABORT marker of its producer closes
    the transaction; records of a transaction still open at the log end are never committed.
    """
    out: list[StoredRecord] = []
    open_txns: dict[int, list[int]] = {}  # producer id -> indexes in ``out``
    aborted: set[int] = set()
    for segment in sorted(folder.glob("*.log")):
        with FileRecords.open(segment) as records:
            for batch in records.batches():
                if batch.is_control:
                    for r in batch:
                        if r.key is None or len(r.key) < 4:
                            raise ValueError(f"{folder}: control record without a key at {r.offset}")
                        _version, kind = struct.unpack(">hh", r.key[:4])
                        pending = open_txns.pop(batch.producer_id, [])
                        if kind == ABORT:
                            aborted.update(pending)
                    continue
                for r in batch:
                    if batch.magic == 2 and batch.is_transactional:
                        open_txns.setdefault(batch.producer_id, []).append(len(out))
                    out.append(StoredRecord(batch.magic, False, (
                        r.offset, r.timestamp, r.key, r.value, tuple(r.headers or ()))))
    for indexes in open_txns.values():
        aborted.update(indexes)
    return tuple(StoredRecord(s.batch_magic, i in aborted, s.record) for i, s in enumerate(out))


def expected(folder: Path, magic: int, *, read_committed: bool, from_offset: int = 0) -> list[Record]:
    """The records a reader of message format ``magic`` gets from a partition, in order:
    v0 messages carry no timestamp, headers exist only in v2. A read_committed reader misses
    aborted records and those of a transaction still open at the log end (past the last stable
    offset); a read_uncommitted one (and every Fetch v0-3 reader) gets them all, which is the
    set the manifest counts and checksums."""
    out = []
    for s in stored_records(folder):
        offset, ts, key, value, headers = s.record
        if offset < from_offset:
            continue
        if read_committed and s.aborted:
            continue
        no_ts = min(magic, s.batch_magic) == 0
        out.append((offset, -1 if no_ts else ts, key, value, headers if magic == 2 else ()))
    return out


def checksum(records: list[Record]) -> str:
    """The manifest's checksum over ``records``."""
    return fixture_checksum.format_checksum(
        sum(fixture_checksum.record_hash(*r) for r in records))
