"""``lazyconv validate`` refuses bad input with one line and exit status 2 before Spark starts
(fast: no JVM is needed for any of these)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lazyconv._cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED = REPO_ROOT / "fixtures"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main(["validate", *argv, "--quiet"])
    except SystemExit as exc:  # refused by argparse
        status = int(exc.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to start Spark fails the test: these errors come before it."""
    import lazyconv.spark._session as session

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "build_session", refuse)


def test_a_folder_without_segments_is_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "not-a-partition").mkdir()
    status, out, err = _run(capsys, str(tmp_path))
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("lazyconv validate: error: ")
    assert "no segments" in err


def test_a_missing_logdir_is_exit_2(tmp_path: Path, capsys) -> None:
    status, _, err = _run(capsys, str(tmp_path / "missing"))
    assert status == 2 and "does not exist" in err and err.count("\n") == 1


def test_a_file_as_logdir_is_exit_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"x")
    status, _, err = _run(capsys, str(path))
    assert status == 2 and "is a file" in err and err.count("\n") == 1


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--to-magic", "abc", "--to-magic"),
    ("--to-magic", "3", "not 0, 1 or 2"),
    ("--to-magic", ",", "names no value"),
    ("--chunk-sizes", "4K", "outside 16K..1M"),
    ("--chunk-sizes", "big", "--chunk-sizes"),
    ("--fetch-max-bytes", "zz", "--fetch-max-bytes"),
])
def test_bad_option_values_are_exit_2_with_one_line(capsys, option: str, value: str,
                                                    says: str) -> None:
    status, _, err = _run(capsys, str(COMMITTED), option, value)
    assert status == 2
    assert err.count("\n") == 1 and says in err


@pytest.mark.parametrize(("value", "says"), [
    ("codecs", "is not TOPIC:KEY=VALUE"),
    ("codecs:retention.ms=5", "retention.ms is not checked"),
    ("codecs:max.message.bytes=0", "must be a positive number of bytes"),
    ("codecs:message.timestamp.type=Now", "CreateTime or LogAppendTime"),
    ("codecs:cleanup.policy=keep", "delete, compact or compact,delete"),
    ("nosuchtopic:cleanup.policy=delete", "topic nosuchtopic has no segments"),
])
def test_bad_topic_configs_are_exit_2_with_one_line(capsys, value: str, says: str) -> None:
    status, out, err = _run(capsys, str(COMMITTED), "--topic-config", value)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and says in err, err
    # named as argparse names an option's bad value, as every other option's is
    assert err.startswith("lazyconv validate: error: argument --topic-config: "), err
    assert err.rstrip().endswith(" (see 'lazyconv validate --help')"), err


def test_topic_config_library_messages_name_no_option() -> None:
    from lazyconv.errors import ConfigurationError
    from lazyconv.spark._topic_config import parse_topic_configs

    for value, message in [("codecs", "'codecs' is not TOPIC:KEY=VALUE"),
                           ("t:max.message.bytes=0", "'t:max.message.bytes=0': max.message.bytes "
                                                     "must be a positive number of bytes")]:
        with pytest.raises(ConfigurationError) as caught:
            parse_topic_configs([value])
        assert str(caught.value) == message


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_out_that_is_a_file_is_exit_2_before_spark(tmp_path: Path, capsys) -> None:
    target = tmp_path / "report"
    target.write_text("not a folder")
    status, _, err = _run(capsys, str(COMMITTED), "--out", str(target))
    assert status == 2 and err.count("\n") == 1 and "is not a folder" in err, err
    status, _, err = _run(capsys, str(COMMITTED), "--out", str(target / "inside"))
    assert status == 2 and err.count("\n") == 1 and "which is not a folder" in err, err
    assert target.read_text() == "not a folder"


def test_out_in_an_unwritable_place_is_exit_2_before_spark(capsys) -> None:
    status, _, err = _run(capsys, str(COMMITTED), "--out", "/sys/lazyconv-validate-out")
    assert status == 2 and err.count("\n") == 1 and "cannot be written" in err, err
    assert not Path("/sys/lazyconv-validate-out").exists()


@pytest.mark.parametrize(("out", "master", "says"), [
    ("{file}", "local[1]", "{file} is not a folder"),
    ("{file}/inside", "local[1]", "{file}/inside is inside {file}, which is not a folder"),
    ("/sys/lazyconv-validate-out", "local[1]", "/sys/lazyconv-validate-out cannot be written: "),
    ("{tmp}/out", "yarn", "{tmp}/out is a path on this machine, which the executors of yarn "),
])
def test_out_errors_are_worded_as_every_other_options(tmp_path: Path, capsys, out: str,
                                                      master: str, says: str) -> None:
    """``--out``'s refusals began "--out PATH ..." with no "(see --help)", where every other
    option's are worded as argparse words its own: "argument --out: ... (see ... --help)"."""
    file = tmp_path / "report"
    file.write_text("not a folder")
    out, says = (text.format(file=file, tmp=tmp_path) for text in (out, says))
    status, stdout, err = _run(capsys, str(COMMITTED), "--master", master, "--out", out)
    assert status == 2 and stdout == "" and err.count("\n") == 1, err
    assert err.startswith(f"lazyconv validate: error: argument --out: {says}"), err
    assert err.rstrip().endswith(" (see 'lazyconv validate --help')"), err


def test_out_is_created_where_given_and_removed_when_nothing_is_written(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from lazyconv._commands.validate import prepare_out

    monkeypatch.chdir(tmp_path)
    path, created = prepare_out("a/b/c")
    assert path == str(tmp_path / "a" / "b" / "c") and Path(path).is_dir()
    assert created == [str(tmp_path / "a" / "b" / "c"), str(tmp_path / "a" / "b"),
                       str(tmp_path / "a")]
    # a run that fails after --out was made (here: Spark does not start) leaves nothing behind
    status, _, err = _run(capsys, str(COMMITTED), "--out", "x/y")
    assert status == 2 and "Spark did not start" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()
    assert not Path("/x").exists()


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "yarn", "k8s://https://k:443"])
def test_a_local_out_with_a_cluster_master_is_exit_2_before_spark(
        tmp_path: Path, capsys, master: str) -> None:
    """The executors write the violations table: on several hosts, a plain path would scatter
    it over their disks (the other tables on the driver's), so a URL is asked for."""
    status, out, err = _run(capsys, str(COMMITTED), "--master", master,
                            "--out", str(tmp_path / "out"))
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert f"argument --out: {tmp_path / 'out'} is a path on this machine" in err
    assert f"the executors of {master}" in err and "file:///" in err
    assert not (tmp_path / "out").exists()


def test_an_out_url_or_a_local_master_takes_the_out_given() -> None:
    from lazyconv._commands.validate import check_paths_for_master

    check_paths_for_master("spark://h:7077", "/shared/logs", "file:///shared/validate")
    check_paths_for_master("yarn", "s3://bucket/logs", "s3a://bucket/validate")
    check_paths_for_master("local[2]", "logs", "out/validate")
    check_paths_for_master("local-cluster[2,1,1024]", "logs", "out/validate")  # one host
    check_paths_for_master("local[*]", None, "out/validate")  # the generated fixture


def test_no_logdir_with_a_cluster_master_is_exit_2_before_the_fixture(
        capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture would be generated in the driver's temporary folder, which the executors
    of other hosts cannot read."""
    import lazyconv.fixtures

    def refuse(*args, **kwargs):
        raise AssertionError("the fixture was generated")

    monkeypatch.setattr(lazyconv.fixtures, "generate", refuse)
    status, out, err = _run(capsys, "--master", "spark://127.0.0.1:7077",
                            "--out", "file:///shared/validate")
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "without LOGDIR a fixture is generated in this machine's temporary folder" in err
    assert "the executors of spark://127.0.0.1:7077 cannot read" in err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_master_is_one_line_before_spark(tmp_path: Path) -> None:
    """Spark tried for a minute, logged its own 'All masters are unresponsive! Giving up.' and
    failed with a NullPointerException: two lines, the second not saying why."""
    port = _closed_port()
    done = subprocess.run(
        [sys.executable, "-m", "lazyconv", "validate", str(COMMITTED), "--master",
         f"spark://127.0.0.1:{port}", "--out", (tmp_path / "out").as_uri(), "--quiet"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"lazyconv validate: error: Spark master spark://127.0.0.1:{port} "
                           f"cannot be reached (127.0.0.1:{port}: Connection refused)\n")


def test_a_master_list_is_reached_when_one_of_its_masters_answers() -> None:
    from lazyconv.errors import ConfigurationError
    from lazyconv.spark._session import check_master_reachable

    closed = _closed_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        answers = listener.getsockname()[1]
        check_master_reachable(f"spark://127.0.0.1:{closed},127.0.0.1:{answers}")
    with pytest.raises(ConfigurationError, match=rf"127.0.0.1:{closed}: .*; \[::1\]:{closed}: "):
        check_master_reachable(f"spark://127.0.0.1:{closed},[::1]:{closed}")
    for left_to_spark in ("yarn", "local[*]", "spark://host", "spark://host:99999"):
        check_master_reachable(left_to_spark)


def test_a_master_url_spark_cannot_take_is_one_line(capsys) -> None:
    """Refused before the JVM starts (which printed its stack trace, hiding the cause)."""
    import pytest as _pytest

    from lazyconv._cli import main

    with _pytest.raises(SystemExit) as exit_:
        main(["validate", "--master", "bogus://x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --master: 'bogus://x' is not a Spark master URL" in err[0]


@pytest.mark.parametrize(("manifest", "says"), [
    (b'{"format": "lazyconv-fixture/2", "partitions": {', "manifest.json: not a JSON document"),
    (b"\xff\xfe{}", "manifest.json: not a JSON document"),
    (b'{"format": "lazyconv-fixture/2"}', 'manifest.json: "partitions" is not an object'),
    (b'{"format": "lazyconv-fixture/2", "partitions": {"tiny-0": {"partition": 0}}}',
     "manifest.json: partition 'tiny-0' is not an object with a topic and a partition"),
], ids=["truncated", "not-utf8", "no-partitions", "no-topic"])
def test_a_bad_manifest_is_exit_2_before_spark(tmp_path: Path, capsys, manifest: bytes,
                                               says: str) -> None:
    """Read after Spark started, it failed the run as 'the Spark job failed: KeyError: ...'
    (after the whole scan) or with json's message, naming no file."""
    import shutil

    shutil.copytree(COMMITTED / "tiny-0", tmp_path / "tiny-0")
    (tmp_path / "manifest.json").write_bytes(manifest)
    status, out, err = _run(capsys, str(tmp_path))
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and says in err, err


def test_a_failed_job_is_one_line_naming_the_task_failure(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job aborted by a task (here: an executor's Python without pyarrow) says which executor
    and why, not Py4J's 'An error occurred while calling z:...collectAndServe.'"""
    from types import SimpleNamespace

    import lazyconv.spark._job as job
    import lazyconv.spark._session as session

    stopped = []
    spark = SimpleNamespace(sparkContext=None, stop=lambda: stopped.append(True))
    monkeypatch.setattr(session, "build_session", lambda *a, **k: spark)

    def fail(*args, **kwargs):
        raise Exception(
            "An error occurred while calling z:org.apache.spark.api.python.PythonRDD."
            "collectAndServe.\n: org.apache.spark.SparkException: Job aborted due to stage "
            "failure: Task 3 in stage 1.0 failed 4 times, most recent failure: Lost task 3.3 in "
            "stage 1.0 (TID 17) (10.0.0.7 executor 2): org.apache.spark.api.python."
            "PythonException: Traceback (most recent call last):\n"
            '  File "/x/lazyconv/spark/_tables.py", line 12, in to_ipc\n'
            "ModuleNotFoundError: No module named 'pyarrow'\n\n"
            "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator\n")

    monkeypatch.setattr(job, "run_validation", fail)
    status, out, err = _run(capsys, str(COMMITTED), "--out", str(tmp_path / "out"))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err == ("lazyconv validate: error: the Spark job failed: executor 2 on 10.0.0.7: "
                   "ModuleNotFoundError: No module named 'pyarrow'\n")
    assert stopped == [True]


def test_an_out_url_spark_has_no_filesystem_for_is_exit_2_before_the_scan(
        capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out s3://... on a Spark without an s3 filesystem failed after the whole scan, with
    'the Spark job failed: Py4JJavaError: An error occurred while calling o129.parquet.'"""
    from types import SimpleNamespace

    import lazyconv.spark._job as job
    import lazyconv.spark._session as session

    class JavaError(Exception):  # as Py4JJavaError: the JVM's exception beside a useless text
        java_exception = SimpleNamespace(toString=lambda: (
            'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3"'
            "\n\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass(FileSystem.java:3443)"))

    def get_file_system(conf: object) -> None:
        raise JavaError("An error occurred while calling o129.getFileSystem.\n")

    jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(hadoop=SimpleNamespace(
        fs=SimpleNamespace(Path=lambda url: SimpleNamespace(getFileSystem=get_file_system))))))
    sc = SimpleNamespace(_jvm=jvm, _jsc=SimpleNamespace(hadoopConfiguration=lambda: None))
    stopped = []
    spark = SimpleNamespace(sparkContext=sc, stop=lambda: stopped.append(True))
    monkeypatch.setattr(session, "build_session", lambda *a, **k: spark)

    def scan(*args, **kwargs):
        raise AssertionError("the scan ran")

    monkeypatch.setattr(job, "run_validation", scan)
    status, out, err = _run(capsys, str(COMMITTED), "--out", "s3://bucket/validate-out")
    assert status == 2 and out == ""
    assert err == ("lazyconv validate: error: argument --out: s3://bucket/validate-out: Spark "
                   "cannot write there: org.apache.hadoop.fs.UnsupportedFileSystemException: No "
                   'FileSystem for scheme "s3" (see \'lazyconv validate --help\')\n')
    assert stopped == [True]
