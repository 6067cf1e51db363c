"""A wheel built from the repository works on its own: installed in a clean virtualenv with the
runtime dependencies only, every command a user starts with runs, and the commands that need an
extra say which one to install."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from golden_cases import GOLDEN_DIR

REPO = Path(__file__).resolve().parents[2]
ASSIGN_INPUT = {
    "clients": [{"id": "c1", "rack": "rack0"}, {"id": "c2", "rack": "rack1"}],
    "tasks": [
        {"id": "0_0", "subtopology": 0, "stateful": False,
         "partitions": [{"topic": "t", "partition": 0, "replica_racks": ["rack1"]}]},
        {"id": "0_1", "subtopology": 0, "stateful": False,
         "partitions": [{"topic": "t", "partition": 1, "replica_racks": ["rack0"]}]},
    ],
    "current": {"c1": {"active": ["0_0"]}, "c2": {"active": ["0_1"]}},
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist built from the repository, and the wheel pip builds from that sdist (what a
    user without a published wheel gets)."""
    root = tmp_path_factory.mktemp("dist")
    # the wheel a user gets holds the kernel: setup.py skips building it when the pure-Python
    # switch is set, so a run under LAZYCONV_NO_EXTENSIONS=1 must not hand it on to the build
    env = {k: v for k, v in os.environ.items() if k != "LAZYCONV_NO_EXTENSIONS"}
    sdist_build = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(root / "sdist"),
         str(REPO)],
        capture_output=True, text=True, env=env,
    )
    assert sdist_build.returncode == 0, sdist_build.stdout + sdist_build.stderr
    sdists = list((root / "sdist").glob("lazyconv-*.tar.gz"))
    assert len(sdists) == 1
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(root / "wheel"),
         str(sdists[0])],
        capture_output=True, text=True, env=env,
    )
    assert build.returncode == 0, build.stderr
    wheels = list((root / "wheel").glob("lazyconv-*.whl"))
    assert len(wheels) == 1
    return sdists[0], wheels[0]


def test_the_sdist_carries_the_kernel_sources(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
    kernel = REPO / "lazyconv" / "records" / "_kernel"
    sources = {p.relative_to(REPO).as_posix() for p in kernel.iterdir() if p.suffix in (".c", ".h")}
    assert sources and sources <= names, sorted(sources - names)


def test_what_the_wheel_contains(built: tuple[Path, Path]) -> None:
    _, wheel = built
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("tests/")], "the tests are not part of the wheel"
    assert not [n for n in names if n.startswith(("bench/", "lazyconv/benchmarks/"))], \
        "the benchmarks and fuzzers are developer tools, not part of the wheel"
    assert not [n for n in names if n.endswith((".c", ".h"))], "C sources belong in the sdist only"
    assert [n for n in names if n.startswith("lazyconv/records/_ckernel.") and n.endswith(".so")], \
        "the compiled kernel is in the wheel"
    assert "lazyconv/py.typed" in names
    assert "lazyconv/spark/log4j2.properties" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith("/LICENSE") for n in names)


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin/`` folder of a fresh virtualenv holding the wheel and its runtime deps."""
    root = tmp_path_factory.mktemp("wheel")
    wheel = built[1]
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_env())
    # a clean environment: a PYTHONPATH naming the checkout (a local Spark session in this
    # process sets one) would make pip find this checkout's metadata and install nothing
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True, text=True, env=_clean_env(),
    )
    assert install.returncode == 0, install.stderr
    assert (venv / "bin" / "lazyconv").exists(), install.stdout + install.stderr
    return venv / "bin"


def _clean_env() -> dict[str, str]:
    """This process's environment without what points at the checkout or its virtualenv."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PYSPARK")}


def _lazyconv(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = _clean_env()
    return subprocess.run([str(bin_dir / "lazyconv"), *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=60)


def test_only_runtime_dependencies_are_installed(installed: Path) -> None:
    listed = subprocess.run([str(installed / "python"), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True, env=_clean_env())
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "lazyconv" in names
    assert not names & {"pyspark", "kafka-python", "aiokafka", "matplotlib", "pytest"}


def test_record_commands(installed: Path, tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    shutil.copy(GOLDEN_DIR / "09_control_first_duplicate" / "input.bin", segment)
    dump = _lazyconv(installed, "dump", str(segment), "--json", cwd=tmp_path)
    assert dump.returncode == 0 and dump.stderr == ""
    assert len(dump.stdout.splitlines()) >= 3
    convert = _lazyconv(installed, "convert", str(segment), "v1.bin", "--to-magic", "1", cwd=tmp_path)
    assert convert.returncode == 0, convert.stderr
    assert json.loads(convert.stdout)["records_converted"] == 3
    send = _lazyconv(installed, "lazy-send", str(segment), "sent.bin", "--to-magic", "1",
                     "--chunk-size", "16K", cwd=tmp_path)
    assert send.returncode == 0, send.stderr
    stats = json.loads(send.stdout)
    assert stats["bytes_written"] == stats["committed_size"] == (tmp_path / "sent.bin").stat().st_size
    module = subprocess.run([str(installed / "python"), "-m", "lazyconv", "--version"],
                            capture_output=True, text=True, cwd=tmp_path, env=_clean_env())
    assert module.stdout.startswith("lazyconv ")


def test_assign_and_simulate(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text(json.dumps(ASSIGN_INPUT))
    assign = _lazyconv(installed, "assign", "in.json", "--indent", "0", cwd=tmp_path)
    assert assign.returncode == 0, assign.stderr
    assert json.loads(assign.stdout)["cost"] == {"before": 2, "after": 0}
    simulate = _lazyconv(installed, "simulate", "partitioner", "--no-plot", "--records", "3000",
                         "--rate", "2048", "--variant", "uniform", "--json", cwd=tmp_path)
    assert simulate.returncode == 0, simulate.stderr
    assert json.loads(simulate.stdout)[0]["partitioner"] == "uniform"
    assert list(tmp_path.iterdir()) == [tmp_path / "in.json"], "no file written unasked"


def test_serve_starts_answers_and_stops(installed: Path, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    (logdir / "t-0").mkdir(parents=True)
    shutil.copy(GOLDEN_DIR / "02_v2_gzip" / "input.bin", logdir / "t-0" / "00000000000000000000.log")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen([str(installed / "lazyconv"), "serve", str(logdir), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert "serving" in line, line + (server.stderr.read() if server.stderr else "")
        port = int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            # ApiVersions v0: api key 18, version 0, correlation id 7, client id "t"
            body = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
            conn.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", conn.recv(4))[0]
            answer = b""
            while len(answer) < size:
                answer += conn.recv(size - len(answer))
        correlation_id, error_code = struct.unpack_from(">ih", answer)
        assert (correlation_id, error_code) == (7, 0)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=20)
    assert server.returncode == 0


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["validate", str(REPO / "fixtures")], "spark"),  # a log directory with segments
        (["simulate", "partitioner", "--records", "100"], "plot"),
    ],
)
def test_missing_extras_print_the_pip_install(
    installed: Path, tmp_path: Path, argv: list[str], extra: str
) -> None:
    result = _lazyconv(installed, *argv, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"pip install 'lazyconv[{extra}]'" in result.stderr
