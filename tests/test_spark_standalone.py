"""The validation job on a real standalone Spark cluster (master + worker on 127.0.0.1, started
from the pyspark distribution's ``spark-class``), through ``--master spark://...``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

COMMITTED = Path(__file__).resolve().parent.parent / "fixtures"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(path: Path, text: str, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in {path}:\n{path.read_text(errors='replace')[-3000:]}")


def _cluster_env() -> dict[str, str]:
    """What a cluster node has: its own PATH (with a python3 that has lazyconv's dependencies),
    no PYSPARK_PYTHON and no PYTHONPATH from the driver's checkout."""
    import pyspark

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


_WORK: dict[str, Path] = {}


def standalone_work(url: str) -> Path:
    return _WORK[url]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    env = _cluster_env()
    spark_class = Path(env["SPARK_HOME"]) / "bin" / "spark-class"
    logs = tmp_path_factory.mktemp("standalone")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = logs / "master.log"
    worker_log = logs / "worker.log"
    procs = []
    try:
        with open(master_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host",
                 "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
                stdout=out, stderr=subprocess.STDOUT, env=env))
        _wait_for(master_log, "I have been elected leader", procs[0], 90)
        with open(worker_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host",
                 "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port",
                 str(_free_port()), "--work-dir", str(logs / "work"), url],
                stdout=out, stderr=subprocess.STDOUT, env=env))
        _wait_for(master_log, "Registering worker", procs[0], 90)
        _WORK[url] = logs / "work"
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_job_runs_on_a_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for name in ("tiny-0", "upgraded-0"):
        shutil.copytree(COMMITTED / name, logdir / name)
    lazyconv = Path(sys.executable).parent / "lazyconv"
    started = time.monotonic()
    done = subprocess.run(
        [str(lazyconv), "validate", str(logdir), "--master", standalone, "--chunk-sizes",
         "16K,1M", "--to-magic", "0,1", "--out", str(tmp_path / "out"), "--quiet",
         "--driver-memory", "512m"],
        env=_cluster_env(), capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"job on the standalone cluster: {time.monotonic() - started:.1f} s")
    assert "no violations" in done.stdout
    for topic, segments in (("tiny", 1), ("upgraded", 2)):
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(topic + " "))
        # every range's consumer got exactly the expected records, for both target magics
        assert line.split()[-3:-1] == [f"{segments}/{segments}"] * 2, line
    assert (tmp_path / "out" / "violations").is_dir()
    # the tasks ran in executors the worker launched (not in a local fallback)
    apps = list((standalone_work(standalone)).glob("app-*/*/stderr"))
    assert apps, "no executor was launched by the worker"
