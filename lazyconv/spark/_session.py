"""A SparkSession sized for a small machine, with lazyconv importable on the executors."""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MASTER", "PACKAGE_ARCHIVE", "build_session", "check_master_reachable",
           "package_archive", "package_root"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
_LOG4J = Path(__file__).with_name("log4j2.properties")


def package_root() -> Path:
    """The folder holding the ``lazyconv`` package (put on the executors' ``PYTHONPATH``)."""
    return Path(__file__).absolute().parent.parent.parent  # lazyconv/spark/_session.py


PACKAGE_ARCHIVE = "lazyconv"  # the folder name each executor unpacks the package into


def package_archive() -> str:
    """The lazyconv package directory as ``lazyconv-package.tar.gz`` in a new temporary folder,
    its files at the top level (Python sources and the compiled kernel; no ``__pycache__``, no
    C sources), for ``SparkContext.addArchive(path#lazyconv)``: each executor unpacks it into
    ``<its SparkFiles folder>/lazyconv/``, and that folder is first on its Python workers'
    ``sys.path``, so ``import lazyconv`` there finds the driver's package, kernel included (a
    zip from ``addPyFile`` cannot hold an importable extension module, and would hide an
    installed copy that has one)."""
    import atexit
    import shutil
    import tarfile

    folder = tempfile.mkdtemp(prefix="lazyconv-package-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # executors fetch it until then
    target = Path(folder) / "lazyconv-package.tar.gz"
    package = package_root() / "lazyconv"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = Path(info.name)
        if "__pycache__" in name.parts or name.suffix in (".c", ".h", ".o", ".pyc"):
            return None
        return info

    with tarfile.open(target, "w:gz", compresslevel=1) as tar:
        for path in sorted(package.iterdir()):
            tar.add(path, arcname=path.name, filter=keep)
    return str(target)


def check_master_reachable(master: str, timeout: float = 10.0) -> None:
    """Raise :class:`~lazyconv.errors.ConfigurationError` (one line) when no master of a
    ``spark://HOST:PORT[,HOST:PORT...]`` URL accepts a TCP connection within ``timeout``
    seconds: before the JVM starts, which would try for a minute, log an error of its own and
    fail with an unrelated ``NullPointerException``. Other masters, and a URL Spark itself would
    refuse (no port), are left to Spark."""
    from lazyconv.errors import ConfigurationError

    if not master.startswith("spark://"):
        return
    reasons = []
    for entry in master[len("spark://"):].split(","):
        host, colon, port = entry.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            return
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{entry}: {exc.strerror or exc}")
    raise ConfigurationError(f"Spark master {master} cannot be reached ({'; '.join(reasons)})")


def _is_local(master: str) -> bool:
    return master.startswith("local")


def build_session(master: str = DEFAULT_MASTER, app_name: str = "lazyconv-validate",
                  driver_memory: str = "1g", shuffle_partitions: int = 4,
                  extra_conf: dict[str, str] | None = None,
                  ship_package: bool = True) -> Any:
    """Start (or reuse) a SparkSession with small-machine settings and quiet logs.

    A local master runs its Python workers on this machine: they use this interpreter (or
    ``spark.pyspark.python`` when given in ``extra_conf``; an exported ``PYSPARK_PYTHON`` is
    overridden, as it may lack lazyconv's dependencies or be another Python version) and
    import lazyconv from this checkout (``PYTHONPATH``). On a cluster, executors use their own
    Python: ``spark.pyspark.python`` when given in ``extra_conf`` (e.g. the interpreter of a
    packed environment shipped with ``--archives``), else ``PYSPARK_PYTHON`` as set in the
    environment, else the executors' ``python3``; nothing of the driver's interpreter path or
    checkout is forced on them. With ``ship_package`` the lazyconv package directory, compiled
    kernel included, goes along as an archive each executor unpacks (:func:`package_archive`),
    so executors import the driver's version and kernel (when their Python can load it: see
    :mod:`lazyconv.spark._executors`); its dependencies must be installed in the executors'
    Python.
    """
    conf = dict(extra_conf or {})
    executor_python = conf.get("spark.pyspark.python")
    if _is_local(master):
        python = executor_python or sys.executable
        exported = os.environ.get("PYSPARK_PYTHON")
        if exported not in (None, python):
            log.info("a local master runs its Python workers with %s, not PYSPARK_PYTHON=%s",
                     python, exported)
        # PySpark takes the workers' interpreter from this variable when the context starts
        os.environ["PYSPARK_PYTHON"] = python
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        root = str(package_root())
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
        conf.setdefault("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    elif executor_python:
        # PySpark takes the workers' interpreter from this variable when the context starts
        os.environ["PYSPARK_PYTHON"] = executor_python
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j.configurationFile=file:{_LOG4J} -Dlog4j2.configurationFile=file:{_LOG4J}"
    if _is_local(master):
        # The local JVM only schedules tasks and moves small results: its C2 compiler threads
        # (1.5-2 CPU-seconds in the first job) would take the cores from the Python workers.
        java_opts += " -XX:TieredStopAtLevel=1"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "false")
    )
    if _is_local(master):
        builder = builder.config("spark.executor.extraJavaOptions", java_opts)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not _is_local(master) and ship_package:
        spark.sparkContext.addArchive(f"{package_archive()}#{PACKAGE_ARCHIVE}")
    log.info("Spark %s session on %s", spark.version, master)
    return spark
