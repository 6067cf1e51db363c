"""``lazyconv validate`` on hostile log directories: each case finishes with the right exit status
and names its fault in one line, once (issue 26). Needs Java (``pytest -m spark``)."""

from __future__ import annotations

import gzip
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fault_planting import entries, leader_epoch_backwards, random_payload

pytestmark = pytest.mark.spark

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"
SEGMENT = "00000000000000000000"


@pytest.fixture(autouse=True)
def java() -> None:
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")


@pytest.fixture(scope="module")
def _one_session() -> Iterator[Any]:
    """The Spark session ``lazyconv validate`` builds with its default options (``--master``,
    ``--driver-memory``), started once for this module's in-process runs instead of once per run."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    from lazyconv.spark._session import build_session

    spark = build_session("local[*]", driver_memory="1g", extra_conf={})
    yield spark
    spark.stop()


@pytest.fixture(autouse=True)
def shared_session(_one_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each in-process ``lazyconv validate`` run (and run_validation below) gets the module's
    session, and its ``stop()`` leaves it running for the next test; a run asking for other
    options than the defaults still builds its own. The commands run as processes (the signal
    tests) start their own Spark, as a user's command does."""
    from lazyconv.spark import _session

    real = _session.build_session

    def build_session(master: str = _session.DEFAULT_MASTER, *args: Any, **options: Any) -> Any:
        if master == "local[*]" and not args and options.get("driver_memory", "1g") == "1g" \
                and not options.get("extra_conf"):
            return _one_session
        return real(master, *args, **options)

    monkeypatch.setattr(_session, "build_session", build_session)
    monkeypatch.setattr(_one_session, "stop", lambda: None)


def _copy(logdir: Path, *names: str) -> None:
    for name in names:
        shutil.copytree(COMMITTED / name, logdir / name)


def _validate(capsys, logdir: Path, *options: str) -> tuple[int, list[str], str]:
    """Exit status, the violation lines of the report, and the whole output."""
    from lazyconv._cli import main

    status = main(["validate", str(logdir), "--chunk-sizes", "1M", "--to-magic", "1",
                   "--quiet", "--out", str(logdir.parent / "out"), *options])
    out = capsys.readouterr().out
    return status, [ln.strip() for ln in out.splitlines() if ln.startswith("  [")], out


def _fifo(logdir: Path) -> str:
    (logdir / "fifo-0").mkdir(parents=True)
    os.mkfifo(logdir / "fifo-0" / f"{SEGMENT}.log")
    return "[unreadable] fifo-0 00000000000000000000.log: cannot open"


def _fifo_index(logdir: Path) -> str:
    _copy(logdir, "tiny-0")
    index = logdir / "tiny-0" / f"{SEGMENT}.index"
    index.unlink()
    os.mkfifo(index)
    return "[unreadable] tiny-0 00000000000000000000.log (index): cannot read"


def _log_symlink_loop(logdir: Path) -> str:
    _copy(logdir, "tiny-0")
    (logdir / "loop-0").mkdir()
    (logdir / "loop-0" / f"{SEGMENT}.log").symlink_to(f"{SEGMENT}.log")
    return "[unreadable] loop-0 00000000000000000000.log: cannot open"


def _partition_symlink_loop(logdir: Path) -> str:
    _copy(logdir, "tiny-0")
    (logdir / "looped-0").symlink_to("looped-0")
    return "[unreadable] looped-0: partition folder"


def _gzip_renamed(logdir: Path) -> str:
    (logdir / "gz-0").mkdir(parents=True)
    text = random.Random(5).randbytes(200_000)
    (logdir / "gz-0" / f"{SEGMENT}.log").write_bytes(gzip.compress(text))
    return ("[not_a_segment] gz-0 00000000000000000000.log @ byte 0: not a Kafka segment: it "
            "starts like a gzip file (1f 8b)")


def _zstd_noise(logdir: Path) -> str:
    _copy(logdir, "codecs-0")
    random_payload(logdir, "codecs", 0, codec=4)
    return "zstd payload does not decode"


def _txnindex_deleted(logdir: Path) -> str:
    _copy(logdir, "transactions-0")
    (logdir / "transactions-0" / f"{SEGMENT}.txnindex").unlink()
    return "ABORT marker(s)"


def _leader_epoch_drop(logdir: Path) -> str:
    _copy(logdir, "upgraded-0")
    leader_epoch_backwards(logdir, "upgraded", 0)
    return "has partition leader epoch 0, below the previous batch's 7"


CASES: dict[str, Callable[[Path], str]] = {
    "fifo named like a segment": _fifo,
    "fifo as the offset index": _fifo_index,
    ".log symlink loop": _log_symlink_loop,
    "partition folder symlink loop": _partition_symlink_loop,
    "gzip file renamed .log": _gzip_renamed,
    "zstd payload of random bytes": _zstd_noise,
    ".txnindex deleted": _txnindex_deleted,
    "one leader epoch drop": _leader_epoch_drop,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_input_is_one_violation_and_the_run_finishes(case: str, tmp_path: Path,
                                                              capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    says = CASES[case](logdir)
    status, lines, out = _validate(capsys, logdir)
    assert status == 1, out
    assert len(lines) == 1, out
    assert says in lines[0], out
    assert "1 error(s), 0 warning(s)" in out


def test_txnindex_message_counts_the_markers(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _txnindex_deleted(logdir)
    status, lines, _ = _validate(capsys, logdir)
    assert status == 1
    assert lines[0].startswith("[txnindex] transactions-0 00000000000000000000.log (txnindex) "
                               "offset ")
    assert "read_committed consumers would receive the aborted records" in lines[0]


def test_a_leader_epoch_drop_is_one_violation_wherever_ranges_are_cut(tmp_path: Path) -> None:
    from lazyconv.spark._job import run_validation
    from lazyconv.spark._session import build_session

    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "upgraded-0", "codecs-0")
    fault = leader_epoch_backwards(logdir, "upgraded", 0)
    spark = build_session("local[2]", app_name="lazyconv-tests", driver_memory="768m")
    try:
        found = []
        for range_bytes in (None, 16 * 1024, 40 * 1024):
            result = run_validation(str(logdir), spark=spark, chunk_sizes=(), to_magics=(),
                                    range_bytes=range_bytes)
            found.append([(v["segment"], v["position"], v["kind"], v["message"])
                          for v in result.violations])
            assert range_bytes is None or result.ranges > result.segments
    finally:
        spark.stop()
    assert found[0] == found[1] == found[2]
    assert [(s, p, k) for s, p, k, _ in found[0]] == [fault[2:3] + fault[4:6]]


def test_the_summary_counts_bytes_checked(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "tiny-0")
    _fifo(logdir)
    _gzip_renamed(logdir)
    status, _, out = _validate(capsys, logdir)
    assert status == 1
    tiny = sum(p.stat().st_size for p in (logdir / "tiny-0").glob("*.log"))
    gz = (logdir / "gz-0" / f"{SEGMENT}.log").stat().st_size
    line = next(ln for ln in out.splitlines() if ln.startswith("validated"))
    assert line.startswith(f"validated {tiny / 1048576:.2f} MiB"), line
    assert f"; {gz / 1048576:.2f} MiB of the segments could not be read or delimited" in line


# --- --topic-config ------------------------------------------------------------------------------

def _entry_sizes(path: Path) -> list[int]:
    return [size for _, size, _ in entries(str(path))]


def test_max_message_bytes_finds_the_batch_over_it(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "large-0")
    sizes = sorted(s for p in (logdir / "large-0").glob("*.log") for s in _entry_sizes(p))
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   f"large:max.message.bytes={sizes[-1] - 1}")
    assert status == 1 and len(lines) == 1, out
    assert lines[0].startswith("[max_message_bytes] large-0 ")
    assert f"is {sizes[-1]} bytes, over the topic's max.message.bytes {sizes[-1] - 1}" in lines[0]
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   f"large:max.message.bytes={sizes[-1]}")
    assert status == 0 and not lines, out


def test_message_timestamp_type(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "codecs-0")
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   "codecs:message.timestamp.type=CreateTime")
    assert status == 0 and not lines, out
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   "codecs:message.timestamp.type=LogAppendTime")
    assert status == 1, out
    assert "has CreateTime timestamps, the topic's message.timestamp.type is LogAppendTime" in lines[0]
    batches = sum(len(_entry_sizes(p)) for p in (logdir / "codecs-0").glob("*.log"))
    assert f"{batches} error(s)" in out  # one per batch


def test_cleanup_policy(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "compacted-0", "nulls-0")
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   "compacted:cleanup.policy=compact")
    assert status == 0 and not lines, out
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   "compacted:cleanup.policy=delete")
    assert status == 1 and lines, out
    assert all(ln.startswith("[offset_gap] compacted-0 ") for ln in lines), lines
    assert "the topic's cleanup.policy is delete" in lines[0]
    status, lines, out = _validate(capsys, logdir, "--topic-config",
                                   "nulls:cleanup.policy=compact")
    assert status == 1 and lines, out
    assert all(ln.startswith("[null_key] nulls-0 ") for ln in lines), lines
    assert "record(s) without a key" in lines[0]


def test_epoch_message_names_the_previous_batch(tmp_path: Path) -> None:
    """Without Spark: the drop is reported at the batch where it happens, once."""
    from lazyconv.spark._listing import list_log_directory
    from lazyconv.spark._segment_check import check_segment

    logdir = tmp_path / "logs"
    logdir.mkdir()
    _copy(logdir, "upgraded-0")
    fault = leader_epoch_backwards(logdir, "upgraded", 0)
    first = list_log_directory(str(logdir)).segments[0]
    found = check_segment(first)["violations"]
    assert [(v["position"], v["kind"]) for v in found] == [(fault[4], fault[5])]
    with open(first.log_path, "rb") as f:
        f.seek(fault[4] + 12)
        assert struct.unpack(">i", f.read(4))[0] == 0


# --- signals ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def busy_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log directory that keeps the job busy for a few seconds."""
    from lazyconv.fixtures._generate import generate

    root = tmp_path_factory.mktemp("busy") / "logs"
    generate(root, 32 * 1024 * 1024, partitions=1, seed=3, segment_bytes=4 * 1024 * 1024)
    return root


def _scanning(pid: int) -> bool:
    """Whether a Python worker of the job is running (a descendant running pyspark's worker)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return False
    for child in children:
        try:  # a child may end, or be a zombie, while it is looked at
            if child.name().startswith("python") and "pyspark" in " ".join(child.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


@pytest.mark.parametrize(("signum", "status", "group"), [
    (signal.SIGINT, 130, True),  # Ctrl-C in a terminal: the whole foreground group
    (signal.SIGTERM, 143, False),  # kill, systemd, Docker: the command's own process
])
def test_a_signal_stops_spark_with_one_line(busy_logdir: Path, tmp_path: Path, signum: int,
                                           status: int, group: bool) -> None:
    import psutil

    command = [str(Path(sys.executable).parent / "lazyconv"), "validate", str(busy_logdir),
               "--out", str(tmp_path / "out"), "--quiet"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _scanning(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        (os.killpg if group else os.kill)(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, (out, err)
    assert out == ""
    assert err == f"lazyconv validate: stopped by {signal.Signals(signum).name}\n"
    time.sleep(1)  # nothing of the run is left running (the JVM, Python workers)
    assert not [p for p in psutil.process_iter() if _running_in_group(p, proc.pid)]


def _running_in_group(proc, pgid: int) -> bool:
    import psutil

    try:
        return os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE
    except (OSError, psutil.Error):
        return False
