"""``lazyconv dump`` next to Kafka's own ``kafka.tools.DumpLogSegments`` (3.9 and 4.x), on the
logs a real broker wrote (tests/kafka_logs.py: every codec, transactions committed and aborted,
an idempotent producer, LogAppendTime, several segments, DeleteRecords, a compacted topic the log
cleaner cleaned: batches with a delete horizon).

Both tools read the same files with the same options; their standard output must be equal line
for line, and so must the checks they report on standard error (Kafka's JVM logging aside).
The only differences are documented ones (docs/differences.md, "dump"):

- with ``--skip-record-metadata`` Kafka drops the ``|`` that starts a record line when the
  record has no key, and prints an empty line for a control record; lazyconv starts every
  record line with ``| ``;
- lazyconv exits with status 1 when an index check fails (Kafka's tool exits 0);
- lazyconv's extras (``--hex``, ``--headers``, ``--json``) only add to or replace Kafka's
  fields behind their options;
- the reports of several files with offset gaps come in the order of the files, Kafka's in the
  order of its hash map (compared as a set of reports).
"""

from __future__ import annotations

import itertools
import logging
import random
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_broker import random_cluster_id

from lazyconv._cli import main
from lazyconv.records import Compression, FileRecords, RecordsBuilder

pytestmark = pytest.mark.kafka


def kafka_dump(dist: Path, files: list[Path] | str, *options: str) -> tuple[int, list[str], list[str]]:
    """Kafka's tool on ``files`` (a list, or the text of its ``--files`` as is)."""
    listing = files if isinstance(files, str) else ",".join(map(str, files))
    done = subprocess.run(
        ["java", "-cp", f"{dist}/libs/*", "kafka.tools.DumpLogSegments",
         "--files", listing, *options],
        capture_output=True, text=True, timeout=120,
    )
    err = [line for line in done.stderr.splitlines() if not line.startswith("log4j:")]
    return done.returncode, done.stdout.splitlines(), err


@pytest.fixture(autouse=True)
def _kafka_python_quiet() -> Iterator[None]:
    """A kafka-python client thread another test of this worker left running must not log into
    the dump command's stderr (the CLI's handler is on the root logger); ``disabled`` is not
    inherited, so every kafka-python logger (kafka.cluster, kafka.conn, ...) is silenced."""
    silenced = [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)
                if name == "kafka" or name.startswith("kafka.")]
    saved = [logger.disabled for logger in silenced]
    for logger in silenced:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was_disabled in zip(silenced, saved, strict=True):
            logger.disabled = was_disabled


def lazyconv_dump(capsys: pytest.CaptureFixture[str], files: list[Path],
                  *options: str) -> tuple[int, list[str], list[str]]:
    status = main(["dump", "-q", *map(str, files), *options])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def reports(err: list[str]) -> list[list[str]]:
    """Standard error as its reports (a line, then its indented lines), sorted: Kafka prints the
    files' "Non-consecutive offsets" reports in the order of a hash map."""
    out: list[list[str]] = []
    for line in err:
        if out and line.startswith(" "):
            out[-1].append(line)
        else:
            out.append([line])
    return sorted(out)


def segment_files(root: Path, *suffixes: str) -> list[Path]:
    return sorted(p for p in root.glob("*-0/*") if p.suffix in suffixes)


@pytest.fixture(params=["3", "4"])
def dist(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("kafka_dist_3" if request.param == "3" else "kafka_dist")


@pytest.mark.parametrize("options", [(), ("--deep-iteration",), ("--print-data-log",)])
def test_log_segments_line_for_line(oracle_log_4, dist: Path, capsys, options) -> None:
    files = segment_files(oracle_log_4.copy, ".log")
    assert len(files) >= 10
    status, ours, our_err = lazyconv_dump(capsys, files, *options)
    _, theirs, their_err = kafka_dump(dist, files, *options)
    assert status == 0, our_err
    assert ours == theirs
    # deep iteration: the offsets the cleaner removed, reported alike on stderr
    assert reports(our_err) == reports(their_err)
    assert bool(our_err) == bool(options)
    # what the logs hold, seen in both listings
    text = "\n".join(theirs)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert f"compresscodec: {codec}" in text
    assert "isControl: true" in text and "LogAppendTime:" in text
    assert "deleteHorizonMs: OptionalLong[" in text  # the cleaner's mark
    if options:
        assert "endTxnMarker: ABORT" in text and "endTxnMarker: COMMIT" in text
        assert "headerKeys: [h1,bin]" in text


def test_files_option_line_for_line(oracle_log_4, dist: Path, capsys) -> None:
    """``--files A,B,...``, the way Kafka's tool is given its files (here with the trailing
    comma its String.split drops): the same listing and reports as Kafka's, and as the same
    files given as PATH arguments."""
    files = segment_files(oracle_log_4.copy, ".log", ".index", ".timeindex", ".txnindex",
                          ".snapshot")
    listing = ",".join(map(str, files)) + ","
    status = main(["dump", "-q", "--files", listing, "--deep-iteration"])
    ours = capsys.readouterr()
    _, theirs, their_err = kafka_dump(dist, listing, "--deep-iteration")
    assert status == 0, ours.err
    assert ours.out.splitlines() == theirs
    assert reports(ours.err.splitlines()) == reports(their_err)
    assert sum(line.startswith("Dumping ") for line in theirs) == len(files)
    assert lazyconv_dump(capsys, files, "--deep-iteration")[1] == theirs


def test_max_bytes_line_for_line(oracle_log_4, dist: Path, capsys, tmp_path: Path) -> None:
    """``--max-bytes N``: each .log read as its first N bytes, the batches that end within them
    listed (limits cutting the files at different batches; 2147483647 is Kafka's default);
    the indexes are read whole; a torn tail gives "Found N invalid bytes" only with Kafka's
    default."""
    logs = segment_files(oracle_log_4.copy, ".log")
    torn = tmp_path / logs[0].name
    data = logs[0].read_bytes()
    torn.write_bytes(data + data[:40])
    files = [*logs, *segment_files(oracle_log_4.copy, ".index", ".timeindex"), torn]
    largest = max(logs, key=lambda p: p.stat().st_size)
    with FileRecords(str(largest)) as records:
        second = [b.position + b.size_in_bytes for b in itertools.islice(records.batches(), 2)][1]
    # a limit one byte short of a batch's end, and at its end
    limits = sorted({0, second - 1, second, 4096, largest.stat().st_size // 2, 2**31 - 1})
    listed = []
    for limit in limits:
        options = ("--deep-iteration", "--max-bytes", str(limit))
        status, ours, our_err = lazyconv_dump(capsys, files, *options)
        _, theirs, their_err = kafka_dump(dist, files, *options)
        assert status == 0, our_err
        assert ours == theirs, limit
        assert reports([e for e in our_err if "lazyconv dump: warning:" not in e]) == \
            reports(their_err)
        listed.append(sum(line.startswith("baseOffset: ") for line in theirs))
        found = f"Found 40 invalid bytes at the end of {torn.name}"
        assert (found in theirs) == (limit == 2**31 - 1), limit
    assert listed == sorted(set(listed)), (limits, listed)  # each limit lists more batches


def test_malformed_utf8_line_for_line(dist: Path, capsys, tmp_path: Path) -> None:
    """Keys, values and header keys that are not UTF-8 (a KRaft segment's UUIDs are such bytes)
    print as Kafka's tool prints them, decoded by Java's ``new String(bytes, UTF_8)``: bytes
    around each lead byte, the sequences where Java's replacement differs from Python's (a
    UTF-8 encoded surrogate, its first two bytes) and random bytes."""
    rng = random.Random(7)
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xF8, 0xFF]
    values = [bytes([lead, *tail]) for lead in alphabet for tail in ((), (0x80,), (0xA0,),
                                                                    (0x90, 0x80), (0xA0, 0x80))]
    values += [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(400)]
    builder = RecordsBuilder(2, Compression.NONE, base_offset=0)
    for index, value in enumerate(values):
        header = value.decode("utf-8", "surrogateescape")  # the records layer's header keys
        builder.append(timestamp=1000 + index, key=b"k" + value, value=value,
                       headers=[(header, b"v")])
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(builder.build())
    status, ours, our_err = lazyconv_dump(capsys, [path], "--print-data-log")
    _, theirs, _ = kafka_dump(dist, [path], "--print-data-log")
    assert status == 0, our_err
    assert len(theirs) == len(values) + 3
    assert ours == theirs


def test_skip_record_metadata_keeps_the_record_indent(oracle_log_4, dist: Path, capsys) -> None:
    files = segment_files(oracle_log_4.copy, ".log")
    options = ("--print-data-log", "--skip-record-metadata")
    status, ours, _ = lazyconv_dump(capsys, files, *options)
    _, theirs, _ = kafka_dump(dist, files, *options)
    assert status == 0 and len(ours) == len(theirs)
    differ = [(k, o) for k, o in zip(theirs, ours, strict=True) if k != o]
    assert differ, "the null keys and control records of the logs show Kafka's quirk"
    for kafka_line, our_line in differ:  # docs/differences.md: the lost "|"
        assert our_line.startswith("| ")
        assert kafka_line in (our_line[1:], "")


@pytest.mark.parametrize("options", [(), ("--verify-index-only",), ("--index-sanity-check",)])
def test_index_files_line_for_line(oracle_log_4, dist: Path, capsys, options) -> None:
    files = segment_files(oracle_log_4.copy, ".index", ".timeindex", ".txnindex", ".snapshot")
    assert {p.suffix for p in files} == {".index", ".timeindex", ".txnindex", ".snapshot"}
    status, ours, our_err = lazyconv_dump(capsys, files, *options)
    _, theirs, their_err = kafka_dump(dist, files, *options)
    assert status == 0, our_err
    assert ours == theirs
    assert our_err == their_err == []
    if not options:
        assert sum(line.startswith("offset: ") for line in ours) >= 10
        assert any(line.startswith("version: 0 producerId: ") for line in ours)
        assert any("currentTxnFirstOffset: " in line for line in ours)


def test_index_checks_report_what_kafka_reports(oracle_log_4, kafka_dist: Path, capsys,
                                                tmp_path: Path) -> None:
    """Planted faults: an offset index entry naming the wrong offset, a time index entry with
    the wrong timestamp: the same report on stderr; lazyconv exits 1 (Kafka 0)."""
    source = oracle_log_4.copy / "segments-0"
    folder = tmp_path / "segments-0"
    shutil.copytree(source, folder)
    index = next(p for p in sorted(folder.glob("*.index")) if p.stat().st_size >= 16)
    data = bytearray(index.read_bytes())
    relative, position = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, relative - 1, position)
    index.write_bytes(bytes(data))
    timeindex = index.with_suffix(".timeindex")
    times = bytearray(timeindex.read_bytes())
    stamp, relative = struct.unpack_from(">qi", times, 0)
    struct.pack_into(">qi", times, 0, stamp + 5, relative)
    timeindex.write_bytes(bytes(times))
    for options in ((), ("--verify-index-only",)):
        status, ours, our_err = lazyconv_dump(capsys, [index, timeindex], *options)
        kafka_status, theirs, their_err = kafka_dump(kafka_dist, [index, timeindex], *options)
        assert kafka_status == 0 and status == 1
        assert ours == theirs
        assert our_err == their_err
        assert any(line.startswith("Mismatches in :") for line in our_err)
        assert "Found timestamp mismatch in :" + str(timeindex.resolve()) in our_err


def test_sanity_check_of_indexes_left_pre_allocated(oracle_log_4, dist: Path, capsys,
                                                     tmp_path: Path) -> None:
    """The active segment's indexes as a broker killed while writing leaves them (pre-allocated
    with zeros): the offset index passes Kafka's sanityCheck, the time index fails it (its last
    slot's timestamp 0), with the same words in both tools (Kafka's in an exception)."""
    folder = tmp_path / "segments-0"
    shutil.copytree(oracle_log_4.copy / "segments-0", folder)
    index = sorted(folder.glob("*.index"))[-1]
    timeindex = index.with_suffix(".timeindex")
    for path, slots in ((index, 8 * 1000), (timeindex, 12 * 1000)):
        path.write_bytes(path.read_bytes() + bytes(slots))
    files = [index, timeindex]
    status, ours, our_err = lazyconv_dump(capsys, files, "--index-sanity-check")
    kafka_status, theirs, their_err = kafka_dump(dist, files, "--index-sanity-check")
    assert status == 1 and kafka_status != 0
    assert ours == theirs == [f"Dumping {index}", f"{index} passed sanity check.",
                              f"Dumping {timeindex}"]
    (exception,) = [line for line in their_err if "CorruptIndexException: " in line]
    message = exception.split("CorruptIndexException: ", 1)[1]
    assert "the last timestamp is 0 which is less than the first timestamp" in message
    assert our_err[-1].startswith(f"lazyconv dump: error: {message} (at byte ")


def test_extras_only_add_to_kafkas_fields(oracle_log_4, capsys) -> None:
    files = [oracle_log_4.copy / "codec-gzip-0" / "00000000000000000000.log"]
    _, plain, _ = lazyconv_dump(capsys, files, "--print-data-log")
    status, extra, _ = lazyconv_dump(capsys, files, "--print-data-log", "--headers", "--hex")
    assert status == 0 and len(plain) == len(extra)
    binary_key = [line for line in extra if "key: 0xfffe" in line]
    assert binary_key, "the non-UTF-8 key shows as hex with --hex"
    with_headers = [line for line in extra if " headers: h1=v" in line]
    assert with_headers and all("headerKeys: [h1,bin]" in line for line in with_headers)
    for ours, kafka_like in zip(extra, plain, strict=True):
        if ours != kafka_like:
            assert ours.split(" keySize: ")[0] == kafka_like.split(" keySize: ")[0]


def format_standalone(dist: Path, folder: Path) -> Path:
    """A log directory formatted by ``kafka-storage format --standalone`` (a dynamic KRaft
    quorum of this one controller): its ``__cluster_metadata-0`` holds a snapshot whose control
    records are SnapshotHeader, KRaftVersion, KRaftVoters and SnapshotFooter."""
    data = folder / "data"
    properties = folder / "server.properties"
    folder.mkdir(parents=True, exist_ok=True)
    properties.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1",
        "controller.quorum.bootstrap.servers=127.0.0.1:9093",
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        f"log.dirs={data}", ""]))
    done = subprocess.run(
        ["java", "-cp", f"{dist}/libs/*", "kafka.tools.StorageTool", "format",
         "-t", random_cluster_id(), "-c", str(properties), "--standalone"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return data


@pytest.mark.parametrize("options", [("--deep-iteration",), ("--print-data-log",)])
def test_kraft_metadata_line_for_line(oracle_log_4, dist: Path, capsys, tmp_path: Path,
                                      options) -> None:
    """The broker's own ``__cluster_metadata`` segment (LEADER_CHANGE control records, metadata
    records) and the KRaft snapshots (``.checkpoint``) of a log directory formatted with
    ``--standalone``: their headings, and every KRaft control record as Kafka prints it
    (``KRaftVoters {...}``)."""
    metadata = tmp_path / "__cluster_metadata-0"  # a copy: the serve tests restart the broker
    shutil.copytree(oracle_log_4.broker.data_dir / "__cluster_metadata-0", metadata)
    log_files = sorted(metadata.glob("*.log"))
    status, ours, our_err = lazyconv_dump(capsys, log_files, *options)
    _, theirs, _ = kafka_dump(dist, log_files, *options)
    assert status == 0, our_err
    assert ours == theirs
    assert "controlType: LEADER_CHANGE(2)" in "\n".join(theirs)
    formatted = format_standalone(dist, tmp_path / "standalone")
    snapshots = [*sorted(formatted.glob("__cluster_metadata-0/*.checkpoint")),
                 formatted / "bootstrap.checkpoint"]
    status, ours, our_err = lazyconv_dump(capsys, snapshots, *options)
    _, theirs, _ = kafka_dump(dist, snapshots, *options)
    assert status == 0, our_err
    assert ours == theirs
    text = "\n".join(theirs)
    assert "Snapshot end offset: 0, epoch: 0" in text and "KRaft bootstrap snapshot" in text
    for name in ("SnapshotHeader {", "KRaftVersion {", "KRaftVoters {", "SnapshotFooter {"):
        assert name in text
