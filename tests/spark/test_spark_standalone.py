"""The validation job on a real standalone Spark cluster (master + worker on 127.0.0.1, started
from the pyspark distribution's ``bin/spark-class``: the pip distribution of pyspark has no
``sbin/start-master.sh``/``start-worker.sh``, which only wrap it), through
``--master spark://...``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.proc_cpu import TreeCPU

pytestmark = pytest.mark.spark

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"


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
_WORKER_PID: dict[str, int] = {}


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
        _WORKER_PID[url] = procs[1].pid  # spark-class execs the JVM: the worker itself
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
    _assert_compiled_kernel_everywhere(tmp_path / "out", standalone_work(standalone))


def _run_options(out: Path) -> dict:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "segments")
    options = {json.dumps(json.loads(o), sort_keys=True) for o in table.column("run_options").to_pylist()}
    assert len(options) == 1
    return json.loads(options.pop())


def _assert_compiled_kernel_everywhere(out: Path, work: Path) -> dict:
    """Every executor that scanned ran the driver's lazyconv with its compiled kernel, as
    shipped (unpacked in the executor's folder under the worker's ``work``): from the report's
    run_options and each range's row."""
    import pyarrow.parquet as pq

    import lazyconv

    options = _run_options(out)
    assert options["implementation"] == "native"
    executors = options["executors"]
    assert executors, options
    for executor in executors:
        assert executor["implementation"] == "native", executor
        assert executor["lazyconv_version"] == lazyconv.__version__, executor
        assert Path(executor["package"]).is_relative_to(work), executor
        assert executor["kernel"].startswith(executor["package"]), executor
    ranges = pq.read_table(out / "segments").to_pylist()
    assert {r["implementation"] for r in ranges} == {"native"}
    assert sum(e["ranges"] for e in executors) == len(ranges)
    return options


@pytest.mark.slow
def test_executors_run_the_compiled_kernel_at_the_cost_of_local_mode(
        standalone: str, tmp_path: Path) -> None:
    """Issue 26's done-when: 256 MiB of mixed fixtures on the standalone cluster (a relative
    LOGDIR, as a user types it) and in local mode; every executor ran the compiled kernel, and
    the worker's processes (worker JVM, executor JVM, Python workers) used at most 1.3x the CPU
    of the whole local run (driver, JVM, Python workers)."""
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "lazyconv"), "fixtures", "generate", str(tmp_path / "fx"),
                    "--size", "256M", "--segment-bytes", "16M", "--quiet"],
                   check=True, capture_output=True, timeout=600)
    common = ["--chunk-sizes", "128K", "--to-magic", "0,1", "--quiet", "--driver-memory", "512m"]

    def validate(master: str, out: str) -> tuple[subprocess.CompletedProcess, float]:
        proc = subprocess.Popen([str(bin_dir / "lazyconv"), "validate", "fx", "--master", master,
                                 "--out", out, *common], env=_cluster_env(), cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        meter = TreeCPU(_WORKER_PID[standalone] if master.startswith("spark") else proc.pid)
        try:
            stdout, stderr = proc.communicate(timeout=900)
        finally:
            if master.startswith("spark"):
                _wait_for_executors_to_end(standalone)
            cpu = meter.stop()
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), cpu

    cluster, cluster_cpu = validate(standalone, "out-cluster")
    assert cluster.returncode == 0, cluster.stdout + cluster.stderr
    local, local_cpu = validate("local[2]", "out-local")
    assert local.returncode == 0, local.stdout + local.stderr
    print(f"256 MiB: worker processes {cluster_cpu:.1f} CPU s on the cluster, "
          f"{local_cpu:.1f} CPU s for the whole local run ({cluster_cpu / local_cpu:.2f}x)")
    options = _assert_compiled_kernel_everywhere(tmp_path / "out-cluster",
                                                 standalone_work(standalone))
    assert options["logdir"] == str(tmp_path / "fx")  # resolved before it left the driver
    assert "no violations" in cluster.stdout and "could not be read" not in cluster.stdout
    validated = [ln for ln in cluster.stdout.splitlines() if ln.startswith("validated")]
    assert validated and float(validated[0].split()[1]) >= 256, cluster.stdout
    assert cluster_cpu <= 1.3 * local_cpu, (cluster_cpu, local_cpu)


def _wait_for_executors_to_end(url: str, seconds: float = 60) -> None:
    """Until the worker has no executor JVM left (the application ended)."""
    import psutil

    worker = psutil.Process(_WORKER_PID[url])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and worker.children(recursive=True):
        time.sleep(0.2)


def test_an_executor_that_would_run_pure_python_stops_the_run(standalone: str,
                                                              tmp_path: Path) -> None:
    """Executors that cannot use the compiled kernel (here: told not to, as a Python of another
    version would be) stop the run before the scan with one line, exit 2; with
    --allow-pure-python the run goes on and the report says what they ran."""
    logdir = tmp_path / "logs"
    shutil.copytree(COMMITTED / "tiny-0", logdir / "tiny-0")
    env = _cluster_env()
    env["PYSPARK_SUBMIT_ARGS"] = ("--conf spark.executorEnv.LAZYCONV_NO_EXTENSIONS=1 "
                                  "pyspark-shell")
    command = [str(Path(sys.executable).parent / "lazyconv"), "validate", str(logdir),
               "--master", standalone, "--chunk-sizes", "1M", "--quiet", "--driver-memory",
               "512m", "--out", str(tmp_path / "out")]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stdout == ""
    errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("lazyconv validate:")]
    assert len(errors) == 1, refused.stderr
    assert "would run lazyconv in pure Python" in errors[0]
    assert "--allow-pure-python" in errors[0]
    assert not (tmp_path / "out").exists()  # refused before the scan
    allowed = subprocess.run([*command, "--allow-pure-python"], env=env, capture_output=True,
                             text=True, timeout=240)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    options = _run_options(tmp_path / "out")
    assert options["allow_pure_python"] is True
    assert {e["implementation"] for e in options["executors"]} == {"python"}
