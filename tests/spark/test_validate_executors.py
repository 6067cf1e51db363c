"""What the validation job accepts of its executors (lazyconv.spark._executors): fast, no Spark;
the standalone cluster test runs the real thing."""

from __future__ import annotations

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
