"""The validation job on a real standalone Spark cluster (master + worker on 127.0.0.1, started
by ``bench/spark_cluster.py``), through ``--master spark://...``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.spark_cluster import Standalone, cluster_env, standalone_cluster

pytestmark = pytest.mark.spark

COMMITTED = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (bash .ci/setup.sh installs one)")
    with standalone_cluster(tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


def test_the_job_runs_on_a_standalone_cluster(standalone: Standalone, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for name in ("tiny-0", "upgraded-0"):
        shutil.copytree(COMMITTED / name, logdir / name)
    lazyconv = Path(sys.executable).parent / "lazyconv"
    started = time.monotonic()
    done = subprocess.run(
        [str(lazyconv), "validate", str(logdir), "--master", standalone.url, "--chunk-sizes",
         "16K,1M", "--to-magic", "0,1", "--out", (tmp_path / "out").as_uri(), "--quiet",
         "--driver-memory", "512m"],
        env=cluster_env(), capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"job on the standalone cluster: {time.monotonic() - started:.1f} s")
    assert "no violations" in done.stdout
    for topic, segments in (("tiny", 1), ("upgraded", 2)):
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(topic + " "))
        # every range's consumer got exactly the expected records, for both target magics
        assert line.split()[-3:-1] == [f"{segments}/{segments}"] * 2, line
    assert (tmp_path / "out" / "violations").is_dir()
    # the tasks ran in executors the worker launched (not in a local fallback)
    apps = list((standalone.work).glob("app-*/*/stderr"))
    assert apps, "no executor was launched by the worker"
    _assert_compiled_kernel_everywhere(tmp_path / "out", standalone.work)


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
def test_executors_run_the_compiled_kernel_over_256_mib_from_a_relative_logdir(
        standalone: Standalone, tmp_path: Path) -> None:
    """256 MiB of mixed fixtures on the standalone cluster, LOGDIR relative as a user types it:
    resolved before it left the driver, every byte validated, every executor on the compiled
    kernel. (Issue 26's cost, the worker's CPU against local mode's, is a figure of
    ``python bench/validate.py standalone``: a CPU ratio under a loaded test run is noise.)"""
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "lazyconv"), "fixtures", "generate", str(tmp_path / "fx"),
                    "--size", "256M", "--segment-bytes", "16M", "--quiet"],
                   check=True, capture_output=True, timeout=600)
    cluster = subprocess.run(
        [str(bin_dir / "lazyconv"), "validate", "fx", "--master", standalone.url, "--out",
         (tmp_path / "out-cluster").as_uri(), "--chunk-sizes", "128K", "--to-magic", "0,1",
         "--quiet", "--driver-memory", "512m"],
        env=cluster_env(), cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert cluster.returncode == 0, cluster.stdout + cluster.stderr
    options = _assert_compiled_kernel_everywhere(tmp_path / "out-cluster", standalone.work)
    assert options["logdir"] == str(tmp_path / "fx")  # resolved before it left the driver
    assert "no violations" in cluster.stdout and "could not be read" not in cluster.stdout
    validated = [ln for ln in cluster.stdout.splitlines() if ln.startswith("validated")]
    assert validated and float(validated[0].split()[1]) >= 256, cluster.stdout


def test_an_executor_that_would_run_pure_python_stops_the_run(standalone: Standalone,
                                                              tmp_path: Path) -> None:
    """Executors that cannot use the compiled kernel (here: told not to, as a Python of another
    version would be) stop the run before the scan with one line, exit 2; with
    --allow-pure-python the run goes on and the report says what they ran."""
    logdir = tmp_path / "logs"
    shutil.copytree(COMMITTED / "tiny-0", logdir / "tiny-0")
    env = cluster_env()
    env["PYSPARK_SUBMIT_ARGS"] = ("--conf spark.executorEnv.LAZYCONV_NO_EXTENSIONS=1 "
                                  "pyspark-shell")
    command = [str(Path(sys.executable).parent / "lazyconv"), "validate", str(logdir),
               "--master", standalone.url, "--chunk-sizes", "1M", "--quiet", "--driver-memory",
               "512m", "--out", (tmp_path / "out").as_uri()]
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
