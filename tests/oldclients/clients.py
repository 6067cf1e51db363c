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
  ``commit``): kafka-python from api_version (0, 9) on, librdkafka, kafka-node (its
  ConsumerGroup) and the Java clients; not kafka-python at (0, 8, 2) (groups need a 0.9
  broker). ``group_magic``: what "subscribe" reads where it differs from ``magic``
  (kafka-node's ConsumerGroup fetches at the negotiated v2, its Consumer at v0); use
  ``client.subscribe_magic``.

The Java clients (family "java", ``settings["version"]``) are Apache Kafka's own client jars
from the folder named by ``LAZYCONV_KAFKA_OLD_CLIENTS`` (``<version>/kafka-clients-<version>.jar``
plus its runtime jars): drivers/JavaClientDriver.java is compiled against each version with
``javac --release 8`` into .venv/oldclients/java-<version>/ (once, stamped) and run as
``java -cp "<version>/*:<build>" JavaClientDriver '<job json>'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import KAFKA_OLD_CLIENTS_ENV, REPO_ROOT
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
JAVA_NO_ZSTD = ("the Java clients before 2.1 fetch below v10 and know no zstd: the broker "
                "answers UNSUPPORTED_COMPRESSION_TYPE (76)")


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
    group_magic: int | None = None  # what its "subscribe" reads, where that is not ``magic``
    note: str = ""

    @property
    def subscribe_magic(self) -> int:
        """The message format its group consumer ("subscribe") reads."""
        return self.magic if self.group_magic is None else self.group_magic


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


def _java(version: str, magic: int, sends: dict[str, int | None]) -> OldClient:
    return OldClient(f"java-{version}", "java", {"version": version}, magic, magic,
                     {"zstd": JAVA_NO_ZSTD}, sends, groups=True)


# What Apache Kafka's Java clients send, as seen in lazyconv serve's request log: ApiVersions
# first, then for each API the highest version both sides have (serve has all of these).
JAVA_APIS = ("ApiVersions", "Metadata", "Fetch", "Produce", "ListOffsets", "FindCoordinator",
             "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch")
JAVA_SENDS = {  # version -> the versions of JAVA_APIS, in that order
    "0.10.2.2": (0, 2, 3, 2, 1, 0, 1, 0, 0, 0, 2, 2),
    "0.11.0.3": (1, 4, 5, 3, 2, 1, 2, 1, 1, 1, 3, 3),
    "1.1.1": (1, 5, 7, 5, 2, 1, 2, 1, 1, 1, 3, 3),
    "2.0.1": (2, 6, 8, 6, 3, 2, 3, 2, 2, 2, 4, 4),
}
# Fetch v3 and Produce v2 (0.10.2) read and write magic v1; Fetch v4+ and Produce v3+ magic v2.
JAVA_CLIENTS = [_java(version, 1 if version.startswith("0.10.") else 2,
                      dict(zip(JAVA_APIS, sends, strict=True)))
                for version, sends in JAVA_SENDS.items()]

CLIENTS: list[OldClient] = [
    _kafka_python("1.3.5", (0, 8, 2)),
    _kafka_python("1.3.5", (0, 9)),
    _kafka_python("1.3.5", (0, 10)),
    _kafka_python("1.4.7", (0, 8, 2)),
    _kafka_python("1.4.7", (0, 9)),
    _kafka_python("1.4.7", (0, 10)),
    # ApiVersions v0, then Metadata v1; but its Consumer (assign) fetches with v0 and
    # ListOffsets v0 whatever the broker offers, and produces with the negotiated v2 (magic
    # v1). Its ConsumerGroup (subscribe) fetches with the negotiated Fetch v2 (magic v1), so
    # Fetch is v0 or v2 by mode; its group APIs are a 0.9 broker's.
    OldClient("kafka-node-5.0.0", "kafka-node", {"api_support": "negotiated"}, 0, 1,
              {"lz4": KAFKA_NODE_NO_LZ4, "zstd": NO_ZSTD_BELOW_FETCH_V10},
              {"ApiVersions": 0, "Fetch": None, "Produce": 2, "Metadata": 1, "ListOffsets": 0,
               **GROUP_0_9}, groups=True, group_magic=1),
    # What kafka-node does against a 0.9 broker (no ApiVersions answer): its base versions
    # (Fetch v0 from its Consumer, v1 from its ConsumerGroup: magic v0 either way).
    OldClient("kafka-node-5.0.0-no-apiversions", "kafka-node", {"api_support": "base"}, 0, 0,
              {"lz4": KAFKA_NODE_NO_LZ4, "zstd": NO_ZSTD_BELOW_FETCH_V10},
              {"Fetch": None, "Produce": 1, "Metadata": 0, "ListOffsets": 0, **GROUP_0_9},
              groups=True),
    _librdkafka("confluent-kafka", "0.9.0", 0, LIBRDKAFKA_0_9),
    _librdkafka("confluent-kafka", "0.10.0", 2, NEGOTIATED, NEGOTIATES),
    _librdkafka("kcat", "0.9.0", 0, LIBRDKAFKA_0_9),
    _librdkafka("kcat", "0.10.0", 2, NEGOTIATED, NEGOTIATES),
    *JAVA_CLIENTS,
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


@contextlib.contextmanager
def _installing(folder: Path) -> Iterator[None]:
    """One process at a time installs into ``folder`` (the suite runs on several workers, and
    two of them may need the same client at once): an exclusive lock on a file beside it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
    with _installing(folder):
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
    with _installing(folder):
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


JAVA_DRIVER = DRIVERS / "JavaClientDriver.java"


def java_clients_folder() -> Path:
    """The folder of the old Java clients, from LAZYCONV_KAFKA_OLD_CLIENTS."""
    value = os.environ.get(KAFKA_OLD_CLIENTS_ENV)
    if not value:
        raise Unavailable(f"{KAFKA_OLD_CLIENTS_ENV} is not set: no old Kafka Java clients")
    return Path(value).expanduser().resolve()


def install_java(version: str, clients: Path, root: Path = INSTALL_ROOT) -> Runtime:
    """JavaClientDriver.java compiled against ``clients/<version>/*`` into
    ``root/java-<version>`` (once: stamped with the source and the jars' names and sizes)."""
    java, javac = which("java"), which("javac")
    if not java or not javac:
        raise Unavailable("the Java client driver needs java and javac (a JDK 8 or later; "
                          ".ci/setup.sh installs openjdk-17-jdk-headless)")
    jars = clients / version
    if not (jars / f"kafka-clients-{version}.jar").is_file():
        raise Unavailable(f"no {jars}/kafka-clients-{version}.jar")
    classpath = f"{jars}{os.sep}*"
    build = root / f"java-{version}"
    want = hashlib.sha256(JAVA_DRIVER.read_bytes() + json.dumps(
        sorted((j.name, j.stat().st_size) for j in jars.glob("*.jar"))).encode()).hexdigest()
    started = time.monotonic()
    with _installing(build):
        if not _stamped(build, want):
            shutil.rmtree(build, ignore_errors=True)
            build.mkdir(parents=True)
            _run([javac, "--release", "8", "-nowarn", "-cp", classpath, "-d", str(build),
                  str(JAVA_DRIVER)], f"javac JavaClientDriver.java against {version}")
            (build / ".oldclients-installed").write_text(want)
    extra = [str(j) for j in (_jaxb_api_jar(),) if j is not None]
    return Runtime((java, "-cp", os.pathsep.join([classpath, str(build), *extra]),
                    "JavaClientDriver"), install_seconds=time.monotonic() - started)


def _jaxb_api_jar() -> Path | None:
    """A JAXB API jar (javax.xml.bind), which the 0.10 Java clients' SCRAM code needs
    (DatatypeConverter) and JDK 11+ no longer has: pyspark's copy, when the spark extra is
    installed. Without it those clients cannot use SCRAM on a current JDK."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder, "jars").glob("jakarta.xml.bind-api-*.jar"))
        if found:
            return found[-1]
    return None


def runtime_key(client: OldClient) -> str:
    """What OldClientTools.runtime installs for the client: its family, or java-<version>."""
    return f"java-{client.settings['version']}" if client.family == "java" else client.family


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
    """Each family's runtime (each version's for the Java clients), installed the first time
    it is asked for (then cached, also when it failed: ``missing`` keeps the reason).
    ``java_clients``: the old Java clients' folder (default: LAZYCONV_KAFKA_OLD_CLIENTS)."""

    def __init__(self, root: Path = INSTALL_ROOT, java_clients: Path | None = None) -> None:
        self.root = root
        self.java_clients = java_clients
        self.runtimes: dict[str, Runtime] = {}
        self.missing: dict[str, str] = {}

    def runtime(self, key: str) -> Runtime:
        """The runtime of a family, or of ``java-<version>`` (see :func:`runtime_key`)."""
        if key in self.missing:
            raise Unavailable(self.missing[key])
        if key not in self.runtimes:
            try:
                if key.startswith("kafka-python-"):
                    self.runtimes[key] = install_kafka_python(key, self.root)
                elif key == "kafka-node":
                    self.runtimes[key] = install_kafka_node(self.root)
                elif key.startswith("java-"):
                    self.runtimes[key] = install_java(
                        key.removeprefix("java-"), self.java_clients or java_clients_folder(),
                        self.root)
                else:
                    self.runtimes[key] = install_librdkafka(key)
            except Unavailable as exc:
                self.missing[key] = str(exc)
                raise
        return self.runtimes[key]

    def require(self, client: OldClient) -> Runtime:
        """The client's runtime, or a pytest skip saying why it cannot run here."""
        import pytest

        try:
            return self.runtime(runtime_key(client))
        except Unavailable as exc:
            pytest.skip(f"{runtime_key(client)} unavailable: {exc}")

    def unreadable_codecs(self, client: OldClient) -> dict[str, str]:
        """What this client cannot read: its own limits plus what is missing here."""
        return {**client.unreadable_codecs, **self.runtime(runtime_key(client)).unreadable_codecs}


# -- starting drivers -------------------------------------------------------------------------

def start(client: OldClient, tools: OldClientTools, bootstrap: str, job: dict[str, Any], *,
          timeout: float) -> Events:
    """Start ``client``'s driver on ``job`` (without bootstrap/client/timeout, which are added)
    against ``bootstrap`` ("host:port"); the client id it sends is ``client.id``. The caller
    reads the events and kills the child (``events.child.kill()``)."""
    runtime = tools.runtime(runtime_key(client))
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


# -- security settings ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects to a secured listener, whatever its family.

    ``protocol``: SASL_SSL, SASL_PLAINTEXT or SSL; ``mechanism``: PLAIN, SCRAM-SHA-256 or
    SCRAM-SHA-512 (SASL_*); ``username``/``password``; ``ca_pem``: the CA (PEM) to trust, and
    ``truststore_p12`` the same as a PKCS12 trust store for the Java clients (which read no PEM
    before Kafka 2.7); ``cert_pem``/``key_pem`` (PEM) and ``keystore_p12`` (PKCS12): a client
    certificate for mTLS; ``store_password``: the PKCS12 stores' password; ``check_hostname``:
    whether the broker's certificate must name the host."""

    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_pem: str | None = None
    truststore_p12: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    keystore_p12: str | None = None
    store_password: str | None = None
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_SSL", "SASL_PLAINTEXT")


def _jaas_line(security: ClientSecurity) -> str:
    module = ("plain.PlainLoginModule" if security.mechanism == "PLAIN"
              else "scram.ScramLoginModule")
    return (f"org.apache.kafka.common.security.{module} required "
            f'username="{security.username}" password="{security.password}";')


def security_settings(client: OldClient, security: ClientSecurity) -> dict[str, Any]:
    """The client's driver settings for ``security`` (merged over its own by
    :func:`secured`). Raises :class:`Unavailable` for what the family cannot do."""
    family = client.family
    if family == "java":
        config: dict[str, Any] = {"security.protocol": security.protocol}
        if security.sasl:
            config["sasl.mechanism"] = security.mechanism
            config["sasl.jaas.config"] = _jaas_line(security)  # 0.10.2+ (KIP-85)
        if security.tls:
            config.update({"ssl.truststore.type": "PKCS12",
                           "ssl.truststore.location": security.truststore_p12,
                           "ssl.truststore.password": security.store_password})
            if security.check_hostname:
                config["ssl.endpoint.identification.algorithm"] = "HTTPS"
            if security.keystore_p12:
                config.update({"ssl.keystore.type": "PKCS12",
                               "ssl.keystore.location": security.keystore_p12,
                               "ssl.keystore.password": security.store_password,
                               "ssl.key.password": security.store_password})
        return {"config": {**client.settings.get("config", {}), **config}}
    if family.startswith("kafka-python"):
        if security.sasl and security.mechanism != "PLAIN":
            raise Unavailable(f"{family} has no {security.mechanism} (SCRAM came with 2.0)")
        config = {"security_protocol": security.protocol}
        if security.sasl:
            config.update({"sasl_mechanism": "PLAIN", "sasl_plain_username": security.username,
                           "sasl_plain_password": security.password})
        if security.tls:
            config.update({"ssl_cafile": security.ca_pem,
                           "ssl_check_hostname": security.check_hostname})
            if security.cert_pem:
                config.update({"ssl_certfile": security.cert_pem, "ssl_keyfile": security.key_pem})
        return {"config": config}
    if family in ("confluent-kafka", "kcat"):
        config = {"security.protocol": security.protocol.lower()}
        if security.sasl:
            config.update({"sasl.mechanisms": security.mechanism, "sasl.username": security.username,
                           "sasl.password": security.password})
        if security.tls:
            config.update({"ssl.ca.location": security.ca_pem,
                           "ssl.endpoint.identification.algorithm":
                               "https" if security.check_hostname else "none"})
            if security.cert_pem:
                config.update({"ssl.certificate.location": security.cert_pem,
                               "ssl.key.location": security.key_pem})
        return {"config": {**client.settings["config"], **config}}
    if family == "kafka-node":
        if security.sasl and security.mechanism != "PLAIN":
            raise Unavailable(f"kafka-node 5 speaks SASL/PLAIN only, not {security.mechanism}")
        out: dict[str, Any] = {}
        if security.tls:
            out["ssl"] = {"ca_file": security.ca_pem, "cert_file": security.cert_pem,
                          "key_file": security.key_pem, "check_hostname": security.check_hostname}
        if security.sasl:
            out["sasl"] = {"mechanism": "plain", "username": security.username,
                           "password": security.password}
        return out
    raise Unavailable(f"no security settings for {family}")


def secured(client: OldClient, security: ClientSecurity, suffix: str = "") -> OldClient:
    """``client`` with ``security`` in its settings (its id gets ``suffix``)."""
    return dataclasses.replace(client, id=client.id + suffix,
                               settings={**client.settings, **security_settings(client, security)})
