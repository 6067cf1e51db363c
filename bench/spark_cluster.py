"""A Spark standalone cluster on 127.0.0.1 (one master, one worker), for the standalone tests
and ``bench/validate.py standalone``.

It is started from the pyspark distribution's ``bin/spark-class``: the pip distribution of
pyspark has no ``sbin/start-master.sh``/``start-worker.sh``, which only wrap it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Standalone", "cluster_env", "standalone_cluster", "wait_for_executors_to_end"]


@dataclass(frozen=True)
class Standalone:
    """A running cluster: the master's URL, the worker's work directory (executors' folders)
    and the worker JVM's pid (``spark-class`` execs the JVM, so it is the process started)."""

    url: str
    work: Path
    worker_pid: int


def cluster_env() -> dict[str, str]:
    """What a cluster node has: its own PATH (with a python3 that has lazyconv's dependencies),
    no PYSPARK_PYTHON and no PYTHONPATH from the driver's checkout."""
    import pyspark

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


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
    raise RuntimeError(f"{text!r} not in {path}:\n{path.read_text(errors='replace')[-3000:]}")


@contextmanager
def standalone_cluster(logs: Path, cores: int = 2, memory: str = "1g") -> Iterator[Standalone]:
    """Start a master and a worker (``cores``, ``memory``) logging into ``logs``; stop both on
    exit (terminate, then kill after 20 s)."""
    env = cluster_env()
    spark_class = Path(env["SPARK_HOME"]) / "bin" / "spark-class"
    logs.mkdir(parents=True, exist_ok=True)
    url = f"spark://127.0.0.1:{_free_port()}"
    master_log = logs / "master.log"
    worker_log = logs / "worker.log"
    procs: list[subprocess.Popen] = []
    try:
        with open(master_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host",
                 "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--webui-port",
                 str(_free_port())],
                stdout=out, stderr=subprocess.STDOUT, env=env))
        _wait_for(master_log, "I have been elected leader", procs[0], 90)
        with open(worker_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host",
                 "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                 str(_free_port()), "--work-dir", str(logs / "work"), url],
                stdout=out, stderr=subprocess.STDOUT, env=env))
        _wait_for(master_log, "Registering worker", procs[0], 90)
        yield Standalone(url, logs / "work", procs[1].pid)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for_executors_to_end(cluster: Standalone, seconds: float = 60) -> None:
    """Until the worker has no executor JVM left (the application ended)."""
    import psutil

    worker = psutil.Process(cluster.worker_pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and worker.children(recursive=True):
        time.sleep(0.2)
