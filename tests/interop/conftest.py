"""Interop fixtures: the client tools (installed when missing, else skipped with the reason) and
``lazyconv serve`` subprocesses over copies of the committed fixture: per test module, one for
each set of server arguments the clients need (most need none)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.interop.clients import BY_ID, CLIENTS, Client, scratch_topic
from tests.interop.expected import FixturePartition, load_manifest
from tests.interop.harness import Server, which

# librdkafka sizes its Metadata v0 parse buffer from the response size, which is too small for
# one-partition topics with short names ("tmpabuf memory shortage", with any broker); longer
# served names keep the records identical and the response parseable.
TOPIC_PREFIX = "lazyconv-interop-"
# kafkajs and the codec packages its driver registers (kafkajs decodes only gzip itself)
NODE_PACKAGES = ("kafkajs@2.2.4", "kafkajs-snappy@1.1.0", "lz4js@0.2.0", "fzstd@0.1.1")
INSTALL_TIMEOUT_S = 300
SCRATCH_TOPICS = {"produce": 2, "group": 4, "txn": 2}  # purpose -> partitions


def _install_kcat() -> tuple[str | None, str]:
    if which("kcat"):
        return which("kcat"), ""
    if not which("apt-get"):
        return None, "kcat is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return None, "kcat is not installed and apt-get needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "kcat"]):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"`{' '.join(argv)}` took more than {INSTALL_TIMEOUT_S} s"
        if done.returncode != 0:
            return None, f"`{' '.join(argv)}` failed: {done.stderr.strip()[-500:]}"
    path = which("kcat")
    return path, "" if path else "apt-get installed kcat but it is not on PATH"


def _node_folder(config: pytest.Config) -> Path:
    venv = REPO_ROOT / ".venv"
    if venv.is_dir():
        return venv / "interop-node"
    return Path(config.cache.mkdir("interop-node")) if config.cache else REPO_ROOT / ".interop-node"


@contextlib.contextmanager
def _one_installer(name: str) -> Iterator[None]:
    """One process at a time installs ``name`` (apt-get holds dpkg's lock; two npm installs
    into one folder corrupt it): an exclusive lock on a file in the temporary folder."""
    with open(Path(tempfile.gettempdir()) / f"lazyconv-install-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install_kafkajs(folder: Path) -> tuple[str | None, str]:
    node, npm = which("node"), which("npm")
    if not node or not npm:
        return None, "kafkajs needs node and npm, which are not installed"
    names = [spec.rsplit("@", 1)[0] for spec in NODE_PACKAGES]
    if not all((folder / "node_modules" / name / "package.json").is_file() for name in names):
        folder.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                 "--no-save", *NODE_PACKAGES],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"npm install kafkajs took more than {INSTALL_TIMEOUT_S} s"
        if done.returncode != 0:
            return None, f"npm install kafkajs failed: {done.stderr.strip()[-500:]}"
    return node, ""


class Tools(dict[str, str]):
    """Paths of the non-Python clients ("kcat", "node", "node_path"), each installed the first
    time a test needs it; ``missing:<family>`` holds why one could not be had."""

    def __init__(self, node_folder: Path) -> None:
        super().__init__()
        self._node_folder = node_folder
        self._tried: set[str] = set()

    def ensure(self, family: str) -> None:
        """Install ``family``'s program if it needs one and was not tried yet; skip if missing."""
        if family in ("kcat", "kafkajs") and family not in self._tried:
            self._tried.add(family)
            installer = _install_kcat if family == "kcat" else (
                lambda: _install_kafkajs(self._node_folder))
            with _one_installer(family):  # the suite's workers may need it at once
                path, why = installer()
            if path is None:
                self[f"missing:{family}"] = why
            elif family == "kcat":
                self["kcat"] = path
            else:
                self["node"] = path
                self["node_path"] = str(self._node_folder / "node_modules")
        missing = self.get(f"missing:{family}")
        if missing:
            pytest.skip(f"{family} unavailable: {missing}")


@pytest.fixture(scope="session")
def tools(request: pytest.FixtureRequest) -> Tools:
    return Tools(_node_folder(request.config))


def require(client_id: str, tools: Tools) -> Client:
    """The client, or a skip saying why it cannot run here."""
    client = BY_ID[client_id]
    module = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka",
              "aiokafka": "aiokafka"}.get(client.family)
    if module:
        pytest.importorskip(module, reason=f"{client.family} is not installed")
    tools.ensure(client.family)
    return client


def not_applicable(client: Client, feature: str) -> None:
    if feature in client.not_applicable:
        pytest.skip(f"not applicable: {client.not_applicable[feature]}")


@dataclass
class Served:
    """The running server and the fixture it serves (manifest keyed by served TOPIC-PARTITION)."""

    server: Server
    logdir: Path
    manifest: dict[str, FixturePartition]

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def folder(self, part: FixturePartition) -> Path:
        return self.logdir / part.name


def fixture_topic(part: FixturePartition) -> str:
    """The topic's name in the fixture (without the served prefix)."""
    return part.topic.removeprefix(TOPIC_PREFIX)


def served_copy(tmp: Path) -> tuple[Path, dict[str, FixturePartition]]:
    """The committed fixture under prefixed topic names, plus empty scratch topics."""
    source = REPO_ROOT / "fixtures"
    logdir = tmp / "logdir"
    logdir.mkdir()
    manifest = {}
    for name, part in load_manifest(source).items():
        shutil.copytree(source / name, logdir / (TOPIC_PREFIX + name))
        manifest[TOPIC_PREFIX + name] = FixturePartition(
            TOPIC_PREFIX + name, TOPIC_PREFIX + part.topic, part.partition, part.records,
            part.aborted_records, part.last_record_offset, part.checksum)
    for client in CLIENTS:
        for purpose, partitions in SCRATCH_TOPICS.items():
            for p in range(partitions):
                (logdir / f"{scratch_topic(client, purpose)}-{p}").mkdir()
    return logdir, manifest


class ServerPool:
    """One ``lazyconv serve`` per set of server arguments a client needs (most need none),
    each over its own copy of the fixture, started on first use and stopped with the module."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._servers: dict[tuple[str, ...], Served] = {}

    def default(self) -> Served:
        return self._get(())

    def for_client(self, client: Client) -> Served:
        return self._get(client.server_args)

    def _get(self, args: tuple[str, ...]) -> Served:
        if args not in self._servers:
            logdir, manifest = served_copy(self._tmp.mktemp("interop"))
            server = Server(logdir, "--chunk-size", "16K", *args)
            self._servers[args] = Served(server, logdir, manifest)
        return self._servers[args]

    def restart(self, client: Client) -> Served:
        """Stop the client's server and serve the same log directory again (a new port)."""
        served = self.for_client(client)
        served.server.stop()
        served.server = Server(served.logdir, "--chunk-size", "16K", *client.server_args)
        return served

    def stop(self) -> None:
        for served in self._servers.values():
            served.server.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.stop()
