"""Fixtures for the old-client drivers: the installed tools (per session) and a ``lazyconv
serve`` over a log directory built here (per module), run with -vv so that its log names every
request's API, version and client id."""

from __future__ import annotations

import queue
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lazyconv.records import Compression, RecordsBuilder
from tests.conftest import REPO_ROOT
from tests.interop.harness import SERVING, ChildProcess
from tests.oldclients.clients import CLIENTS, OldClient, OldClientTools

TOPIC_PREFIX = "lazyconv-oldclients-"  # long names: librdkafka's Metadata v0 parse buffer
BASE_TS = 1_700_000_000_000
# topic (without the prefix) -> codecs of its batches; the v2-* topics hold magic v2 batches of
# one codec each, "legacy" a log upgraded from magic v0 to v1 to v2 (codecs every client reads)
V2_TOPICS = {"v2-none": "none", "v2-gzip": "gzip", "v2-snappy": "snappy", "v2-lz4": "lz4",
             "v2-zstd": "zstd"}
LEGACY = "legacy"
SPLIT = "split"  # 2 partitions of SPLIT_RECORDS uncompressed magic v2 records: for 2 members
SPLIT_RECORDS = 12
LEGACY_SEGMENTS = ((0, Compression.NONE), (0, Compression.GZIP), (1, Compression.NONE),
                   (1, Compression.SNAPPY), (2, Compression.NONE), (2, Compression.GZIP))
REQUEST = re.compile(r"request (?P<api>\w+) v(?P<version>\d+) corr=\d+ from Session\(\S+ from \S+ '(?P<client>[^']*)'")


def _key(offset: int) -> bytes | None:
    return None if offset % 7 == 3 else b"" if offset % 11 == 5 else b"key-%d" % offset


def _value(offset: int) -> bytes | None:
    if offset % 13 == 6:
        return None
    if offset % 17 == 8:
        return b""
    return (b"value %d " % offset) * (1 + offset % 23)


def _write(folder: Path, segments: list[tuple[int, list[bytes]]]) -> None:
    folder.mkdir(parents=True)
    for base, entries in segments:
        (folder / f"{base:020d}.log").write_bytes(b"".join(entries))


def build_log(root: Path) -> None:
    """One partition per topic: V2_TOPICS (12 batches of 1-15 records in 2 segments) and
    LEGACY (a segment of 4 batches per (magic, codec) of LEGACY_SEGMENTS); and SPLIT, with
    2 partitions of 4 batches of 3 records."""
    for topic, codec in V2_TOPICS.items():
        offset, segments = 0, []
        for segment in range(2):
            base, entries = offset, []
            for b in range(6):
                builder = RecordsBuilder(2, compression=Compression[codec.upper()],
                                         base_offset=offset)
                for _ in range(1 + (segment * 6 + b) * 7 % 15):
                    headers = [("h", b"%d" % offset)] if offset % 5 == 0 else []
                    builder.append(offset=offset, timestamp=BASE_TS + 7 * offset,
                                   key=_key(offset), value=_value(offset), headers=headers)
                    offset += 1
                entries.append(builder.build())
            segments.append((base, entries))
        _write(root / f"{TOPIC_PREFIX}{topic}-0", segments)
    offset, segments = 0, []
    for magic, codec in LEGACY_SEGMENTS:
        base, entries = offset, []
        for b in range(4):
            builder = RecordsBuilder(magic, compression=codec, base_offset=offset)
            for _ in range(1 + b * 3):
                builder.append(offset=offset, timestamp=-1 if magic == 0 else BASE_TS + offset,
                               key=_key(offset), value=_value(offset))
                offset += 1
            entries.append(builder.build())
        segments.append((base, entries))
    _write(root / f"{TOPIC_PREFIX}{LEGACY}-0", segments)
    for partition in range(2):
        entries = []
        for base in range(0, SPLIT_RECORDS, 3):
            builder = RecordsBuilder(2, base_offset=base)
            for offset in range(base, base + 3):
                builder.append(offset=offset, timestamp=BASE_TS + offset, key=_key(offset),
                               value=b"record %d of partition %d" % (offset, partition))
            entries.append(builder.build())
        _write(root / f"{TOPIC_PREFIX}{SPLIT}-{partition}", [(0, entries)])


def scratch_topic(client: OldClient, purpose: str) -> str:
    return f"{TOPIC_PREFIX}{purpose}-{client.id.replace('.', '_')}"


SCRATCH = ("produce", "produce-gzip")  # each with 2 partitions, empty


class LoggedServer:
    """``lazyconv -vv serve LOGDIR --port 0`` in a subprocess (as tests/interop/harness.py's
    Server, plus the debug log of every request on stderr)."""

    def __init__(self, logdir: Path) -> None:
        argv = [sys.executable, "-m", "lazyconv._cli", "-vv", "serve", str(logdir), "--port", "0",
                "--chunk-size", "16K"]
        self.child = ChildProcess(argv, cwd=REPO_ROOT)
        deadline = time.monotonic() + 30
        while True:
            try:
                line = self.child.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            m = SERVING.match(line.decode().strip()) if line else None
            if m:
                self.bootstrap = f"127.0.0.1:{m.group('port')}"
                return
            if line is None or time.monotonic() > deadline:
                self.child.kill()
                raise RuntimeError(f"lazyconv serve did not start: {self.child.stderr_tail()}")

    def requests(self, client_id: str) -> dict[str, set[int]]:
        """API name -> the versions of the requests that client id sent so far."""
        out: dict[str, set[int]] = {}
        for m in REQUEST.finditer(bytes(self.child.stderr).decode(errors="replace")):
            if m.group("client") == client_id:
                out.setdefault(m.group("api"), set()).add(int(m.group("version")))
        return out

    def stop(self) -> None:
        self.child.kill()


@dataclass
class Served:
    server: LoggedServer
    logdir: Path

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def folder(self, topic: str, partition: int = 0) -> Path:
        return self.logdir / f"{topic}-{partition}"


@pytest.fixture(scope="session")
def oldclient_tools() -> OldClientTools:
    return OldClientTools()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    logdir = tmp_path_factory.mktemp("oldclients") / "logdir"
    build_log(logdir)
    for client in CLIENTS:
        for purpose in SCRATCH:
            for p in range(2):
                (logdir / f"{scratch_topic(client, purpose)}-{p}").mkdir()
    server = LoggedServer(logdir)
    try:
        yield Served(server, logdir)
    finally:
        server.stop()
