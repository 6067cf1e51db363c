"""Old Kafka clients as test drivers: which configurations exist, how each is installed and
started, and what each one sends.

Every configuration takes the job of tests/interop/drivers/common.py (argv[1] for Python,
argv[2] for node) and prints its JSON-lines events (``record``, ``produced``, ``done``,
``error`` ...). Use::

    tools = OldClientTools()                      # installs on first use, under .venv/oldclients
    client = BY_ID["kafka-python-1.3.5-0.9"]
    events = start(client, tools, "127.0.0.1:9092", job, timeout=20)   # -> harness.Events
    events = run(client, tools, "127.0.0.1:9092", job, timeout=20)     # start, wait for done

``start`` raises :class:`Unavailable` (with the reason) when the client cannot be installed
here; under pytest, ``tools.require(client)`` turns that into a skip.

The fields of a configuration:

- ``magic``: the message format its fetches read (Fetch v0-1: v0, v2-3: v1, v4+: v2);
  ``produce_magic``: the one it writes (Produce v0-1: v0, v2: v1, v3+: v2).
- ``unreadable_codecs``: codec -> why this client cannot read that codec's batches from any
  broker (nobody below Fetch v10 reads zstd: a broker answers UNSUPPORTED_COMPRESSION_TYPE,
  since zstd cannot be down-converted).
- ``sends``: API name -> the version it uses for that API (None: what it negotiated), as
  checked against ``lazyconv serve``'s request log by test_drivers_vs_serve.py; ListOffsets
  only where a job asks for ``"start": "earliest"`` (or kcat's ``-o beginning``).
- ``groups``: whether its driver can consume in a group ("subscribe" with ``group`` and
  ``commit``): kafka-python from api_version (0, 9) on and librdkafka; not kafka-node's
  driver (assign only), nor kafka-python at (0, 8, 2) (groups need a 0.9 broker).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT
from tests.interop.conftest import INSTALL_TIMEOUT_S, _install_kcat
from tests.interop.harness import ChildProcess, Events, which

DRIVERS = REPO_ROOT / "tests" / "oldclients" / "drivers"
INTEROP_DRIVERS = "tests.interop.drivers"
INSTALL_ROOT = REPO_ROOT / ".venv" / "oldclients"

NO_ZSTD_BELOW_FETCH_V10 = ("zstd batches cannot be down-converted: below Fetch v10 a broker "
                           "answers UNSUPPORTED_COMPRESSION_TYPE")
KAFKA_PYTHON_NO_ZSTD = ("kafka-python 1.x has no zstd codec (added in 2.0) and fetches "
                        "below v10: the broker's UNSUPPORTED_COMPRESSION_TYPE (76) is unknown "
                        "to it, so it fetches again and again, delivering nothing")
KAFKA_NODE_NO_LZ4 = ("kafka-node has only gzip and snappy: an LZ4 wrapper reaches the "
                     "application as one message holding the compressed bytes")


@dataclass(frozen=True)
class OldClient:
    """One old client at one protocol level."""

    id: str
    family: str  # kafka-python-1.3.5, kafka-python-1.4.7, kafka-node, confluent-kafka, kcat
    settings: dict[str, Any] = field(default_factory=dict)
    magic: int = 0
    produce_magic: int = 0
    unreadable_codecs: dict[str, str] = field(default_factory=dict)
    sends: dict[str, int | None] = field(default_factory=dict)
    groups: bool = False
    note: str = ""


# The group APIs of a 0.9 broker, which kafka-python 1.x (api_version 0.9 and 0.10) and
# librdkafka with fallback 0.9.0 use for subscribe() and commits.
GROUP_0_9 = {"FindCoordinator": 0, "JoinGroup": 0, "SyncGroup": 0, "Heartbeat": 0,
             "LeaveGroup": 0, "OffsetCommit": 2, "OffsetFetch": 1}


def _kafka_python(version: str, api: tuple[int, ...]) -> OldClient:
    fetch, produce = {(0, 8, 2): (0, 0), (0, 9): (1, 1), (0, 10): (2, 2)}[api]
    magic = 1 if api >= (0, 10) else 0
    sends: dict[str, int | None] = {"Fetch": fetch, "Produce": produce,
                                    "Metadata": 1 if api >= (0, 10) else 0, "ListOffsets": 0,
                                    **(GROUP_0_9 if api >= (0, 9) else {})}
    return OldClient(f"kafka-python-{version}-{'.'.join(map(str, api))}",
                     f"kafka-python-{version}", {"api_version": list(api)}, magic, magic,
                     {"zstd": KAFKA_PYTHON_NO_ZSTD}, sends, groups=api >= (0, 9))


def _librdkafka(family: str, fallback: str, magic: int, sends: dict[str, int | None],
                note: str = "") -> OldClient:
    config = {"api.version.request": False, "broker.version.fallback": fallback}
    name = "confluent-kafka" if family == "confluent-kafka" else "kcat"
    unreadable = {"zstd": NO_ZSTD_BELOW_FETCH_V10} if magic < 2 else {}
    return OldClient(f"{name}-fallback-{fallback}", family, {"config": config}, magic, magic,
                     unreadable, sends, groups=True, note=note)


# (confluent-kafka's assign-only consumer also sends FindCoordinator v0 for its group.id)
LIBRDKAFKA_0_9 = {"Fetch": 1, "Produce": 1, "Metadata": 0, "ListOffsets": 0, **GROUP_0_9}
# librdkafka sends ApiVersions anyway when the fallback is 0.10.0 or later (see
# tests/interop/clients.py), so these two negotiate like a current client: magic v2, versions
# by the librdkafka release (seen against serve: confluent-kafka 2.16 ApiVersions v3, Metadata
# v12, Fetch v16, Produce v10; Debian's kcat 1.7.1 ApiVersions v3, Metadata v4, Fetch v11,
# ListOffsets v2, Produce v7). None: whatever version was negotiated.
NEGOTIATES = "api.version.request=false is overridden from fallback 0.10.0 on: it negotiates"
NEGOTIATED: dict[str, int | None] = {"ApiVersions": None, "Fetch": None, "Produce": None,
                                     "Metadata": None, "JoinGroup": None}

CLIENTS: list[OldClient] = [
    _kafka_python("1.3.5", (0, 8, 2)),
    _kafka_python("1.3.5", (0, 9)),
    _kafka_python("1.3.5", (0, 10)),
    _kafka_python("1.4.7", (0, 8, 2)),
    _kafka_python("1.4.7", (0, 9)),
    _kafka_python("1.4.7", (0, 10)),
    # ApiVersions v0, then Metadata v1; but its consumer fetches with v0 and ListOffsets v0
    # whatever the broker offers, and produces with the negotiated v2 (magic v1).
    OldClient("kafka-node-5.0.0", "kafka-node", {"api_support": "negotiated"}, 0, 1,
              {"lz4": KAFKA_NODE_NO_LZ4, "zstd": NO_ZSTD_BELOW_FETCH_V10},
              {"ApiVersions": 0, "Fetch": 0, "Produce": 2, "Metadata": 1, "ListOffsets": 0}),
    # What kafka-node does against a 0.9 broker (no ApiVersions answer): its base versions.
    OldClient("kafka-node-5.0.0-no-apiversions", "kafka-node", {"api_support": "base"}, 0, 0,
              {"lz4": KAFKA_NODE_NO_LZ4, "zstd": NO_ZSTD_BELOW_FETCH_V10},
              {"Fetch": 0, "Produce": 1, "Metadata": 0, "ListOffsets": 0}),
    _librdkafka("confluent-kafka", "0.9.0", 0, LIBRDKAFKA_0_9),
    _librdkafka("confluent-kafka", "0.10.0", 2, NEGOTIATED, NEGOTIATES),
    _librdkafka("kcat", "0.9.0", 0, LIBRDKAFKA_0_9),
    _librdkafka("kcat", "0.10.0", 2, NEGOTIATED, NEGOTIATES),
]

BY_ID = {c.id: c for c in CLIENTS}


def client_ids() -> list[str]:
    return [c.id for c in CLIENTS]


class Unavailable(RuntimeError):
    """The client cannot be installed or run here (the message says why)."""


@dataclass(frozen=True)
class Runtime:
    """How to start one family's driver: the argv before the job, and extra environment."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    # codec -> why, for what the installed client lacks here (e.g. a native module not built)
    unreadable_codecs: dict[str, str] = field(default_factory=dict)
    install_seconds: float = 0.0


# -- installation -----------------------------------------------------------------------------

PYTHON_PACKAGES = {
    # python-snappy (through cramjam) and lz4 for the codecs; xxhash for LZ4 in magic v0
    # messages (Kafka's broken frame-header checksum, which kafka-python fixes up).
    "kafka-python-1.3.5": ("kafka-python==1.3.5", "python-snappy", "lz4", "xxhash"),
    "kafka-python-1.4.7": ("kafka-python==1.4.7", "python-snappy", "lz4", "xxhash"),
}
# kafka-python 1.3.5 uses ``async`` as an identifier (a keyword from 3.7); 1.4.7's vendored
# six fails to import on 3.12+ (its meta-path importer has no find_spec).
PYTHON_RANGE = {"kafka-python-1.3.5": ((3, 6), (3, 6)), "kafka-python-1.4.7": ((3, 6), (3, 11))}
NODE_PACKAGES = ("kafka-node@5.0.0",)


def _python_version(python: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    major, minor = done.stdout.split()
    return int(major), int(minor)


def find_python(low: tuple[int, int], high: tuple[int, int]) -> str | None:
    """An interpreter whose version is in [low, high]: this one's base interpreter, pyenv's
    versions, or pythonX.Y on PATH, newest first."""
    candidates = [getattr(sys, "_base_executable", sys.executable)]
    pyenv = which("pyenv")
    roots = [os.environ.get("PYENV_ROOT", "")]
    if pyenv:
        try:
            roots.append(subprocess.run([pyenv, "root"], capture_output=True, text=True,
                                        timeout=30).stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    minors = range(high[1], low[1] - 1, -1) if low[0] == high[0] == 3 else ()
    for minor in minors:
        for root in filter(None, roots):
            for folder in sorted(Path(root, "versions").glob(f"3.{minor}*"), reverse=True):
                candidates.append(str(folder / "bin" / f"python3.{minor}"))
        on_path = which(f"python3.{minor}")
        if on_path:
            candidates.append(on_path)
    for python in candidates:
        if Path(python).is_file():
            version = _python_version(python)
            if version is not None and low <= version <= high:
                return python
    return None


def _run(argv: list[str], what: str, **kwargs: Any) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"{what} took more than {INSTALL_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        err = "\n".join(line for line in (done.stderr + done.stdout).splitlines()
                        if noise not in line)
        raise Unavailable(f"{what} failed: {err.strip()[-600:]}")


def _stamped(folder: Path, want: str) -> bool:
    stamp = folder / ".oldclients-installed"
    return stamp.is_file() and stamp.read_text() == want


def install_kafka_python(family: str, root: Path = INSTALL_ROOT) -> Runtime:
    """A venv under ``root/<family>`` with the client and its codecs (made once)."""
    folder = root / family
    python = folder / "bin" / "python"
    packages = PYTHON_PACKAGES[family]
    want = json.dumps(packages)
    started = time.monotonic()
    if not _stamped(folder, want):
        low, high = PYTHON_RANGE[family]
        base = find_python(low, high)
        if base is None:
            raise Unavailable(f"{family} needs a Python {'.'.join(map(str, low))}-"
                              f"{'.'.join(map(str, high))} interpreter (pyenv or on PATH); "
                              "none was found")
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        _run([base, "-m", "venv", str(folder)], f"{base} -m venv")
        pip = [str(python), "-m", "pip", "install", "--quiet", "--prefer-binary",
               "--disable-pip-version-check"]
        if _python_version(str(python)) == (3, 6):
            # Python 3.6's bundled pip (18.1) knows no manylinux2014 wheels: the last pip for
            # 3.6 does, so that lz4, cramjam and xxhash install as wheels.
            _run([*pip, "pip==21.3.1"], "pip install pip==21.3.1")
        _run([*pip, *packages], f"pip install {' '.join(packages)}")
        (folder / ".oldclients-installed").write_text(want)
    return Runtime((str(python), str(DRIVERS / "kafka_python_old.py")),
                   install_seconds=time.monotonic() - started)


def install_kafka_node(root: Path = INSTALL_ROOT) -> Runtime:
    """kafka-node from npm under ``root/node`` (made once); its optional native snappy
    module is built by node-gyp where a compiler and the node headers are present."""
    node, npm = which("node"), which("npm")
    if not node or not npm:
        raise Unavailable("kafka-node needs node and npm, which are not installed")
    folder = root / "node"
    want = json.dumps(NODE_PACKAGES)
    started = time.monotonic()
    if not _stamped(folder, want):
        folder.mkdir(parents=True, exist_ok=True)
        _run([npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--no-save",
              *NODE_PACKAGES], f"npm install {' '.join(NODE_PACKAGES)}")
        (folder / ".oldclients-installed").write_text(want)
    modules = folder / "node_modules"
    unreadable = {}
    check = subprocess.run([node, "-e", "require('snappy').uncompressSync("
                                        "require('snappy').compressSync('x'))"],
                           env={**os.environ, "NODE_PATH": str(modules)}, capture_output=True,
                           text=True, timeout=60)
    if check.returncode != 0:
        unreadable["snappy"] = ("kafka-node's optional native snappy module is not usable here: "
                                + check.stderr.strip()[-300:])
    return Runtime((node, str(DRIVERS / "kafka_node_client.js")), {"NODE_PATH": str(modules)},
                   unreadable, time.monotonic() - started)


def install_librdkafka(family: str) -> Runtime:
    if family == "confluent-kafka":
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"confluent-kafka is not installed: {exc}") from exc
        return Runtime((sys.executable, "-m", f"{INTEROP_DRIVERS}.confluent_client"))
    started = time.monotonic()
    path, why = _install_kcat()
    if path is None:
        raise Unavailable(why)
    return Runtime((sys.executable, "-m", f"{INTEROP_DRIVERS}.kcat_client"),
                   {"KCAT_PATH": path}, install_seconds=time.monotonic() - started)


class OldClientTools:
    """Each family's runtime, installed the first time it is asked for (then cached, also
    when it failed: ``missing`` keeps the reason)."""

    def __init__(self, root: Path = INSTALL_ROOT) -> None:
        self.root = root
        self.runtimes: dict[str, Runtime] = {}
        self.missing: dict[str, str] = {}

    def runtime(self, family: str) -> Runtime:
        if family in self.missing:
            raise Unavailable(self.missing[family])
        if family not in self.runtimes:
            try:
                if family.startswith("kafka-python-"):
                    self.runtimes[family] = install_kafka_python(family, self.root)
                elif family == "kafka-node":
                    self.runtimes[family] = install_kafka_node(self.root)
                else:
                    self.runtimes[family] = install_librdkafka(family)
            except Unavailable as exc:
                self.missing[family] = str(exc)
                raise
        return self.runtimes[family]

    def require(self, client: OldClient) -> Runtime:
        """The client's runtime, or a pytest skip saying why it cannot run here."""
        import pytest

        try:
            return self.runtime(client.family)
        except Unavailable as exc:
            pytest.skip(f"{client.family} unavailable: {exc}")

    def unreadable_codecs(self, client: OldClient) -> dict[str, str]:
        """What this client cannot read: its own limits plus what is missing here."""
        return {**client.unreadable_codecs, **self.runtime(client.family).unreadable_codecs}


# -- starting drivers -------------------------------------------------------------------------

def start(client: OldClient, tools: OldClientTools, bootstrap: str, job: dict[str, Any], *,
          timeout: float) -> Events:
    """Start ``client``'s driver on ``job`` (without bootstrap/client/timeout, which are added)
    against ``bootstrap`` ("host:port"); the client id it sends is ``client.id``. The caller
    reads the events and kills the child (``events.child.kill()``)."""
    runtime = tools.runtime(client.family)
    settings = dict(client.settings)
    if client.family in ("confluent-kafka", "kcat"):
        settings["config"] = {**settings["config"], "client.id": client.id}
        if client.family == "kcat":
            settings["kcat"] = runtime.env["KCAT_PATH"]
    else:
        settings["client_id"] = client.id
    full = {"isolation": "read_uncommitted", **job, "bootstrap": bootstrap, "client": settings,
            "timeout": timeout}
    if full["action"] == "produce":  # the interop drivers expect every record to have headers
        full["records"] = [{"headers": [], **r} for r in full["records"]]
    child = ChildProcess([*runtime.argv, json.dumps(full)], cwd=REPO_ROOT, stdin=True,
                         env=runtime.env)
    return Events(child)


def run(client: OldClient, tools: OldClientTools, bootstrap: str, job: dict[str, Any], *,
        timeout: float) -> Events:
    """Start the driver, wait for its ``done`` event (an ``error`` event, an exit or the
    timeout raise AssertionError with the driver's stderr), and stop it."""
    events = start(client, tools, bootstrap, job, timeout=timeout)
    try:
        events.wait_for("done", timeout + 10)
    finally:
        events.child.kill()
    return events
