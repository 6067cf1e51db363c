"""A SparkSession sized for a small machine, with lazyconv importable on the executors."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MASTER", "build_session", "package_root"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
_LOG4J = Path(__file__).with_name("log4j2.properties")


def package_root() -> Path:
    """The folder holding the ``lazyconv`` package (put on the executors' ``PYTHONPATH``)."""
    import lazyconv

    return Path(lazyconv.__file__).absolute().parent.parent


def _zip_package(directory: Path) -> str:
    """Zip the lazyconv package for ``SparkContext.addPyFile`` (non-local masters)."""
    target = Path(tempfile.mkdtemp(prefix="lazyconv-pyfiles-")) / "lazyconv.zip"
    root = package_root()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in (root / "lazyconv").rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(root))
    return str(target)


def build_session(master: str = DEFAULT_MASTER, app_name: str = "lazyconv-validate",
                  driver_memory: str = "1g", shuffle_partitions: int = 8,
                  extra_conf: dict[str, str] | None = None) -> Any:
    """Start (or reuse) a SparkSession with small-machine settings and quiet logs.

    Executors run the same Python as the driver (``PYSPARK_PYTHON``); on a local master they
    import lazyconv from this checkout through ``PYTHONPATH``, on a cluster it is shipped as a
    zip with ``addPyFile`` (the cluster's Python needs lazyconv's dependencies installed).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = str(package_root())
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j.configurationFile=file:{_LOG4J} -Dlog4j2.configurationFile=file:{_LOG4J}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(_zip_package(Path(root)))
    log.info("Spark %s session on %s", spark.version, master)
    return spark
