"""What the validation job accepts of its executors (lazyconv.spark._executors): fast, no Spark;
the standalone cluster test runs the real thing."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest

from lazyconv.spark import _executors as executors
from lazyconv.spark._executors import (
    PURE_PYTHON_MARKER,
    ExecutorRuntimeError,
    check_runtimes,
    describe_runtime,
)


def _like_driver(**changes: object) -> dict:
    return {**describe_runtime(), "executor": "worker-1:4242", **changes}


@pytest.fixture
def native_driver(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A driver with the compiled kernel (whatever this process has)."""
    driver = {**describe_runtime(), "implementation": "native", "kernel_sha256": "abc"}
    monkeypatch.setattr(executors, "describe_runtime", lambda: driver)
    return driver


def test_the_drivers_own_runtime_is_accepted() -> None:
    check_runtimes([_like_driver()], allow_pure_python=False)


def test_an_executor_in_pure_python_is_refused_in_one_line(native_driver: dict) -> None:
    slow = {**native_driver, "executor": "worker-1:4242", "implementation": "python",
            "kernel_sha256": None, "python": "3.12.1"}
    with pytest.raises(ExecutorRuntimeError) as refused:
        check_runtimes([native_driver, slow], allow_pure_python=False)
    message = str(refused.value)
    assert "\n" not in message
    assert "worker-1:4242 (Python 3.12.1) would run lazyconv in pure Python" in message
    assert "--allow-pure-python" in message
    check_runtimes([native_driver, slow], allow_pure_python=True)  # allowed: goes on


def test_another_version_or_kernel_build_is_refused(native_driver: dict) -> None:
    with pytest.raises(ExecutorRuntimeError, match="imports lazyconv 0.0.1"):
        check_runtimes([{**native_driver, "lazyconv_version": "0.0.1"}], allow_pure_python=True)
    with pytest.raises(ExecutorRuntimeError, match="another build of lazyconv's kernel"):
        check_runtimes([{**native_driver, "kernel_sha256": "def"}], allow_pure_python=True)


def test_a_pure_python_driver_has_no_kernel_to_ship(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = {**describe_runtime(), "implementation": "python", "kernel_sha256": None}
    monkeypatch.setattr(executors, "describe_runtime", lambda: driver)
    check_runtimes([{**driver, "executor": "worker-1:4242"}], allow_pure_python=False)


def test_a_scan_task_refused_in_pure_python_becomes_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor that joined after the probe refuses in its task; the job's failure (Spark
    wraps the Python traceback in a Java exception) becomes the task's line."""
    from lazyconv.spark._job import _executor_failure

    monkeypatch.setattr(executors, "describe_runtime", lambda: _like_driver(
        implementation="python", python="3.9.2", executor="late:7"))
    with pytest.raises(ExecutorRuntimeError) as refused:
        executors.require_kernel(allow_pure_python=False)
    executors.require_kernel(allow_pure_python=True)
    wrapped = Exception("An error occurred while calling o42.collectAndServe.\n"
                        "org.apache.spark.SparkException: Job aborted ...\n"
                        f"lazyconv.spark._executors.ExecutorRuntimeError: {refused.value}\n"
                        "\tat org.apache.spark.api.python.BasePythonRunner ...")
    failure = _executor_failure(wrapped)
    assert failure is not None
    assert str(failure) == ("executor late:7 (Python 3.9.2) runs lazyconv in pure Python "
                            "(pass --allow-pure-python to accept that)")
    assert PURE_PYTHON_MARKER not in str(failure)
    assert _executor_failure(Exception("Job aborted: something else")) is None


# Py4JJavaError's text when every try of a task failed (Spark 3.5 on a standalone cluster,
# trimmed): the first line names no cause
_IMPORT_FAILED = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 4 times, most recent failure: Lost task 0.3 in stage 0.0 (TID 5) (127.0.0.1 "
    "executor 0): org.apache.spark.api.python.PythonException: Traceback (most recent call "
    "last):\n"
    '  File "/usr/lib/python3.11/site-packages/pyspark/worker.py", line 1231, in main\n'
    "    func, profiler, deserializer, serializer = read_command(pickleSer, infile)\n"
    "ModuleNotFoundError: No module named 'crc32c'\n"
    "\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
    "(PythonRunner.scala:572)\n"
    "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call "
    "last):\n"
    "ModuleNotFoundError: No module named 'crc32c'\n")
_OTHER_MINOR = (
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 4 times, most recent failure: Lost task 0.3 in stage 0.0 (TID 6) (10.0.0.7 "
    "executor 3): org.apache.spark.api.python.PythonException: Traceback (most recent call "
    "last):\n"
    '  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1100, in main\n'
    "    raise PySparkRuntimeError(\n"
    "pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in "
    "worker has different version (3, 12) than that in driver 3.11, PySpark cannot run with "
    "different minor versions.\n"
    "Please check environment variables PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON are correctly "
    "set.\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
    "(PythonRunner.scala:572)\n")
_NOT_STARTED = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 4 times, most recent failure: Lost task 0.3 in stage 0.0 (TID 6) (127.0.0.1 "
    'executor 0): java.io.IOException: Cannot run program "/opt/py/bin/python3": error=2, No '
    "such file or directory\n"
    "\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)\n")


def test_an_executor_python_that_cannot_import_lazyconv_is_one_line_naming_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor whose Python lacks one of lazyconv's dependencies, or cannot be started,
    fails the probe: the run stops with the executor and the cause, not with Py4J's 'An error
    occurred while calling z:...collectAndServe.'"""
    from pathlib import Path
    from types import SimpleNamespace

    from lazyconv.spark import _job

    logdir = Path(__file__).resolve().parents[2] / "fixtures"
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master="spark://127.0.0.1:7077"))
    for text, says in ((_IMPORT_FAILED, "ModuleNotFoundError: No module named 'crc32c'"),
                       (_NOT_STARTED, 'java.io.IOException: Cannot run program '
                                      '"/opt/py/bin/python3": error=2')):
        def probe(sc: object, text: str = text) -> list:
            raise Exception(text)

        monkeypatch.setattr(_job, "probe_executors", probe)
        with pytest.raises(ExecutorRuntimeError) as refused:
            _job.run_validation(str(logdir), spark=spark)
        message = str(refused.value)
        assert "\n" not in message and "An error occurred" not in message
        assert message.startswith(f"executor 0 on 127.0.0.1: {says}"), message
        assert "--executor-python" in message


def test_a_task_failure_with_a_message_of_several_lines_keeps_its_first() -> None:
    """An executor Python of another minor version than the driver's is refused by PySpark
    itself, before lazyconv is imported; the line says so (not only its last line, 'Please
    check environment variables ...')."""
    failure = executors.task_failure(Exception(_OTHER_MINOR))
    assert failure is not None and failure.startswith(
        "executor 3 on 10.0.0.7: pyspark.errors.exceptions.base.PySparkRuntimeError: "
        "[PYTHON_VERSION_MISMATCH] Python in worker has different version (3, 12) than that in "
        "driver 3.11"), failure
    assert executors.task_failure(Exception("Job aborted: something else")) is None


class _Builder:
    """SparkSession.builder as build_session calls it: records PYSPARK_PYTHON when the context
    would start (PySpark reads the workers' interpreter from it there)."""

    def __init__(self) -> None:
        self.python: str | None = None

    def master(self, *args: object) -> _Builder:
        return self

    appName = config = master  # noqa: N815 - PySpark's names

    def getOrCreate(self) -> object:  # noqa: N802 - PySpark's name
        self.python = os.environ.get("PYSPARK_PYTHON")
        return SimpleNamespace(version="3.5", sparkContext=SimpleNamespace(
            setLogLevel=lambda level: None))


@pytest.mark.parametrize(("master", "exported", "given", "runs"), [
    ("local[*]", "/usr/bin/python3", None, sys.executable),
    ("local[2]", None, None, sys.executable),
    ("local[*]", "/usr/bin/python3", "/opt/py/bin/python", "/opt/py/bin/python"),
    ("spark://h:7077", "/usr/bin/python3", None, "/usr/bin/python3"),
    ("spark://h:7077", "/usr/bin/python3", "./environment/bin/python",
     "./environment/bin/python"),
])
def test_a_local_master_runs_this_interpreter_whatever_pyspark_python_says(
        monkeypatch: pytest.MonkeyPatch, master: str, exported: str | None, given: str | None,
        runs: str) -> None:
    """An exported PYSPARK_PYTHON ran a local master's workers, under a Python that may lack
    lazyconv's dependencies (the run failed on ModuleNotFoundError) or be another version; on
    a cluster it is still the executors' Python unless --executor-python says otherwise."""
    pyspark_sql = pytest.importorskip("pyspark.sql")

    from lazyconv.spark._session import build_session

    environ = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    if exported is not None:
        environ["PYSPARK_PYTHON"] = exported
    monkeypatch.setattr(os, "environ", environ)
    builder = _Builder()
    monkeypatch.setattr(pyspark_sql, "SparkSession", SimpleNamespace(builder=builder))
    build_session(master, extra_conf={"spark.pyspark.python": given} if given else None,
                  ship_package=False)
    assert builder.python == runs
