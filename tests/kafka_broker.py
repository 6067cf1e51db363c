"""Real Apache Kafka brokers for tests (the ``kafka`` marker): start, stop, crash and restart a
KRaft node from any Kafka distribution folder (``libs/*.jar`` + ``config/``), plus small
confluent-kafka helpers to create topics, write records straight to Kafka and read them back.

What :class:`KafkaBroker` does is what Kafka's own scripts do, in Python: it writes a
``server.properties`` for one KRaft node (broker and controller in one JVM), copies the
distribution's log4j configuration into its work folder (Kafka 4: ``config/log4j2.yaml``, 3.x:
``config/log4j.properties``; with ``request_log=True`` the ``kafka.request.logger`` is raised to
DEBUG so that every request is logged in ``logs/kafka-request.log``), formats the data folder
once (``kafka.tools.StorageTool format``) and runs ``kafka.Kafka server.properties``. Nothing is
ever written into the distribution folder (CI copies it read-only).

A cluster is several :class:`KafkaBroker` objects with distinct ``node_id`` and ports, one
``cluster_id`` and the same ``quorum_voters``: :class:`KafkaCluster` builds them.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "KafkaBroker",
    "KafkaCluster",
    "KafkaDistError",
    "RequestLogEntry",
    "check_dist",
    "dist_version",
    "free_ports",
    "random_cluster_id",
    "create_topic",
    "delete_topic",
    "produce_records",
    "consume_all",
]

READY_MARKER = "Kafka Server started"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 40


class KafkaDistError(Exception):
    """The folder is not a Kafka distribution (no ``libs/`` with Kafka's jars)."""


# -- the distribution ----------------------------------------------------------------------

# libs/kafka_2.13-4.0.1.jar (the server), else libs/kafka-clients-4.0.1.jar; never the
# -sources/-javadoc/-test jars some builds put beside them
_SERVER_JAR = re.compile(r"^kafka_\d+\.\d+-(\d[\w.\-]*?)\.jar$")
_CLIENTS_JAR = re.compile(r"^kafka-clients-(\d[\w.\-]*?)\.jar$")
_NOT_A_RUNTIME_JAR = re.compile(r"-(sources|javadoc|scaladoc|test|tests|test-sources)$")


def dist_version(dist: Path) -> str:
    """Kafka's version of a distribution folder, read from its jars' names (``"4.0.1"``)."""
    libs = Path(dist) / "libs"
    if not libs.is_dir():
        raise KafkaDistError(f"{dist} is not a Kafka distribution: it has no libs/ folder")
    names = sorted(p.name for p in libs.iterdir())
    for pattern in (_SERVER_JAR, _CLIENTS_JAR):
        for name in names:
            m = pattern.match(name)
            if m and not _NOT_A_RUNTIME_JAR.search(m.group(1)):
                return m.group(1)
    raise KafkaDistError(
        f"{dist} is not a Kafka distribution: libs/ has neither kafka_<scala>-<version>.jar "
        "nor kafka-clients-<version>.jar"
    )


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def check_dist(dist: Path) -> Path:
    """``dist`` resolved, after checking it looks like a Kafka distribution (raises
    :class:`KafkaDistError` saying what is missing)."""
    dist = Path(dist).expanduser().resolve()
    if not dist.is_dir():
        raise KafkaDistError(f"{dist} is not a folder")
    dist_version(dist)  # libs/ with Kafka's jars
    if not (dist / "config" / "log4j2.yaml").is_file() and not (
        dist / "config" / "log4j.properties"
    ).is_file():
        raise KafkaDistError(
            f"{dist} is not a Kafka distribution: no config/log4j2.yaml (Kafka 4) "
            "nor config/log4j.properties (Kafka 3)"
        )
    return dist


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH (nor in JAVA_HOME): a Kafka broker needs a JRE 17+")
    return found


def random_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` prints it (Kafka's ``Uuid.randomUuid``:
    16 random bytes, URL-safe base64 without padding, never starting with ``-``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-") and text != "AAAAAAAAAAAAAAAAAAAAAA":
            return text


def free_ports(count: int = 1) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (held together while chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _accepts(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


# -- the request log -----------------------------------------------------------------------


class RequestLogEntry(tuple):
    """One request from ``kafka-request.log``: a tuple ``(api, api_version, client_id)``,
    e.g. ``("FETCH", 2, "my-client")``, so that it compares equal to such a tuple.

    ``api`` is the name Kafka logs (``requestApiKeyName``: ``ApiKeys`` spelling, ``"FETCH"``,
    ``"PRODUCE"``, ``"API_VERSIONS"`` …), ``api_key`` the number. Also: ``correlation_id``,
    ``forwarded`` (the controller's copy of a request a broker forwarded to it),
    ``deprecated`` (Kafka marked the version deprecated: ``requestApiVersionDeprecated``),
    ``details`` (the whole logged JSON: request, response, ``messageConversionsTime`` …, or
    ``{}`` for a line in an older format) and ``line`` (the raw log line)."""

    api_key: int | None
    correlation_id: int | None
    forwarded: bool
    deprecated: bool
    details: dict[str, Any]
    line: str

    def __new__(
        cls,
        api: str,
        api_version: int,
        client_id: str | None,
        *,
        api_key: int | None = None,
        correlation_id: int | None = None,
        forwarded: bool = False,
        deprecated: bool = False,
        details: dict[str, Any] | None = None,
        line: str = "",
    ) -> RequestLogEntry:
        self = super().__new__(cls, (api, api_version, client_id))
        self.api_key = api_key
        self.correlation_id = correlation_id
        self.forwarded = forwarded
        self.deprecated = deprecated
        self.details = details if details is not None else {}
        self.line = line
        return self

    @property
    def api(self) -> str:
        return self[0]

    @property
    def api_version(self) -> int:
        return self[1]

    @property
    def client_id(self) -> str | None:
        return self[2]

    def __repr__(self) -> str:
        return f"RequestLogEntry{tuple(self)!r}"


# Kafka 2.8+ (3.9, 4.0), request logger at DEBUG, layout "[%d] %p %m (%c)%n":
#   [2026-11-26 07:08:23,871] DEBUG Completed request:{"isForwarded":false,"requestHeader":
#   {"requestApiKey":1,"requestApiVersion":2,"correlationId":7,"clientId":"raw-v2",
#   "requestApiKeyName":"FETCH","requestApiVersionDeprecated":true},"request":{...},
#   "response":{...},"connection":"...","totalTimeMs":6.514,...,"messageConversionsTime":1.468}
#   (kafka.request.logger)
_COMPLETED = "Completed request:"
_LOGGER_SUFFIX = " (kafka.request.logger)"
# the header alone, for a line whose JSON does not parse (cut or odd)
_HEADER = re.compile(
    r'"requestHeader":\{"requestApiKey":(?P<key>-?\d+),"requestApiVersion":(?P<version>-?\d+),'
    r'"correlationId":(?P<corr>-?\d+),"clientId":(?P<client>null|"(?:[^"\\]|\\.)*")'
    r'(?:,"requestApiKeyName":"(?P<name>\w+)")?'
)
# before Kafka 2.8: "Completed request:RequestHeader(apiKey=FETCH, apiVersion=2, clientId=x,
# correlationId=7) -- ..."
_OLD_HEADER = re.compile(
    r"RequestHeader\(apiKey=(?P<api>\w+), apiVersion=(?P<version>-?\d+), "
    r"clientId=(?P<client>[^,]*), correlationId=(?P<corr>-?\d+)"
)
_API_NAMES: dict[int, str] | None = None


def _api_name(key: int) -> str:
    """Kafka's ApiKeys name for a key, for lines that do not carry it."""
    global _API_NAMES
    if _API_NAMES is None:
        names = dict(_FALLBACK_API_NAMES)
        try:
            from lazyconv.protocol._registry import API_BY_KEY

            for k, spec in API_BY_KEY.items():
                names.setdefault(int(k), re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", spec.name).upper())
        except Exception:  # the names are a convenience; the key is what matters
            pass
        _API_NAMES = names
    return _API_NAMES.get(key, str(key))


_FALLBACK_API_NAMES = {
    0: "PRODUCE", 1: "FETCH", 2: "LIST_OFFSETS", 3: "METADATA", 8: "OFFSET_COMMIT",
    9: "OFFSET_FETCH", 10: "FIND_COORDINATOR", 11: "JOIN_GROUP", 12: "HEARTBEAT",
    13: "LEAVE_GROUP", 14: "SYNC_GROUP", 15: "DESCRIBE_GROUPS", 16: "LIST_GROUPS",
    17: "SASL_HANDSHAKE", 18: "API_VERSIONS", 19: "CREATE_TOPICS", 20: "DELETE_TOPICS",
    22: "INIT_PRODUCER_ID", 32: "DESCRIBE_CONFIGS", 60: "DESCRIBE_CLUSTER",
}


def parse_request_log_line(line: str) -> RequestLogEntry | None:
    """The request a ``kafka-request.log`` line logs, or None for other lines."""
    at = line.find(_COMPLETED)
    if at < 0:
        return None
    text = line[at + len(_COMPLETED):].rstrip("\r\n")
    if text.startswith("{"):
        if text.endswith(_LOGGER_SUFFIX):
            text = text[: -len(_LOGGER_SUFFIX)]
        try:
            details = json.loads(text)
            header = details["requestHeader"]
            key = int(header["requestApiKey"])
            return RequestLogEntry(
                header.get("requestApiKeyName") or _api_name(key),
                int(header["requestApiVersion"]), header.get("clientId"), api_key=key,
                correlation_id=header.get("correlationId"),
                forwarded=bool(details.get("isForwarded")),
                deprecated=bool(header.get("requestApiVersionDeprecated")),
                details=details, line=line,
            )
        except (ValueError, KeyError, TypeError):
            pass
    m = _HEADER.search(line)
    if m:
        key = int(m.group("key"))
        client = m.group("client")
        return RequestLogEntry(
            m.group("name") or _api_name(key), int(m.group("version")),
            None if client == "null" else json.loads(client), api_key=key,
            correlation_id=int(m.group("corr")), forwarded='"isForwarded":true' in line,
            line=line,
        )
    m = _OLD_HEADER.search(line)
    if m:
        return RequestLogEntry(m.group("api"), int(m.group("version")), m.group("client"),
                               correlation_id=int(m.group("corr")), line=line)
    return None


# -- one node ------------------------------------------------------------------------------

_LIVE: set[KafkaBroker] = set()


@atexit.register
def _kill_leftovers() -> None:  # a crashed test session must not leave JVMs behind
    for broker in list(_LIVE):
        try:
            broker.kill()
        except Exception:
            pass


class KafkaBroker:
    """One Kafka KRaft node (``process.roles=broker,controller`` by default) in its own JVM.

    ``dist``: a Kafka distribution folder (an official ``kafka_2.13-x.y.z`` download works),
    only read. ``workdir``: everything the node writes: ``server.properties``, the log4j
    config, ``data/`` (formatted once, kept across :meth:`restart`) and ``logs/`` (the JVM's
    ``stdout.log``/``stderr.log``, Kafka's ``server.log``, ``kafka-request.log`` …).
    ``port``/``controller_port``: chosen free on 127.0.0.1 when None, kept across restarts.
    ``extra_props`` overrides or adds ``server.properties`` entries. ``request_log=True``
    logs every request (see :meth:`request_log_entries`). ``heap``: ``-Xmx``/``-Xms``.

    For a cluster (see :class:`KafkaCluster`): ``node_id``, ``quorum_voters``
    (``"1@127.0.0.1:9093,2@…"``, default: this node alone), one shared ``cluster_id``, and
    ``start(wait=False)`` on every node before :meth:`wait_ready` on each.
    """

    def __init__(
        self,
        dist: Path,
        workdir: Path,
        *,
        port: int | None = None,
        extra_props: Mapping[str, str] | None = None,
        request_log: bool = False,
        heap: str = "512m",
        node_id: int = 1,
        controller_port: int | None = None,
        quorum_voters: str | None = None,
        cluster_id: str | None = None,
        process_roles: str = "broker,controller",
        ready_timeout: float = READY_TIMEOUT_S,
    ) -> None:
        self.dist = check_dist(dist)
        self.workdir = Path(workdir).resolve()
        self.version = dist_version(self.dist)
        self.version_info = _version_tuple(self.version)
        self.kafka4 = self.version_info[:1] >= (4,)
        self.extra_props = dict(extra_props or {})
        self.request_log = request_log
        self.heap = heap
        self.node_id = node_id
        self.process_roles = process_roles
        self.ready_timeout = ready_timeout
        if port is None or controller_port is None:
            a, b = free_ports(2)
            port = a if port is None else port
            controller_port = (b if b != port else a) if controller_port is None else controller_port
        self.port = port
        self.controller_port = controller_port
        self.quorum_voters = quorum_voters or f"{node_id}@127.0.0.1:{controller_port}"
        self.cluster_id = cluster_id
        self.proc: subprocess.Popen[bytes] | None = None
        self._stdout_from = 0

    # -- paths and facts

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def properties_file(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def stdout_log(self) -> Path:
        return self.logs_dir / "stdout.log"

    @property
    def stderr_log(self) -> Path:
        return self.logs_dir / "stderr.log"

    @property
    def request_log_file(self) -> Path:
        return self.logs_dir / "kafka-request.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<KafkaBroker {self.version} node {self.node_id} {self.bootstrap} {state}>"

    # -- configuration

    def server_properties(self) -> dict[str, str]:
        """The ``server.properties`` entries this node runs with (``extra_props`` applied)."""
        props = {
            "process.roles": self.process_roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.quorum_voters,
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},"
                          f"CONTROLLER://127.0.0.1:{self.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.partitions": "1",
            "num.recovery.threads.per.data.dir": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            # no time-based retention: test records often carry old timestamps, and the
            # default 168 h would delete their segments at the first retention check
            "log.retention.ms": "-1",
            # a restarted (or killed) KRaft node's new registration is refused with
            # DUPLICATE_BROKER_REGISTRATION until the old one's session expires (Kafka 4.0:
            # even after a clean shutdown): the default 9 s made restart() take ~12 s
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "1000",
        }
        if self.process_roles == "broker":
            del props["listeners"]
            props["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        elif self.process_roles == "controller":
            props["listeners"] = f"CONTROLLER://127.0.0.1:{self.controller_port}"
            for k in ("advertised.listeners", "inter.broker.listener.name"):
                del props[k]
        if self.kafka4:
            props["share.coordinator.state.topic.replication.factor"] = "1"
            props["share.coordinator.state.topic.min.isr"] = "1"
        props.update({k: str(v) for k, v in self.extra_props.items()})
        return props

    def _write_config(self) -> list[str]:
        """Writes server.properties and the log4j config; returns the JVM's log options."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = ["# written by tests/kafka_broker.py (KRaft)"]
        lines += [f"{k}={v}" for k, v in self.server_properties().items()]
        self.properties_file.write_text("\n".join(lines) + "\n")
        log4j2 = self.dist / "config" / "log4j2.yaml"
        if log4j2.is_file():
            text = log4j2.read_text()
            if self.request_log:
                text = _log4j2_request_logger_debug(text)
            target = self.workdir / "log4j2.yaml"
            _write_writable(target, text)
            log_opt = f"-Dlog4j2.configurationFile={target}"
        else:
            text = (self.dist / "config" / "log4j.properties").read_text()
            if self.request_log:
                text, n = re.subn(r"(?m)^(log4j\.logger\.kafka\.request\.logger=)\s*\w+",
                                  r"\1DEBUG", text)
                if n != 1:
                    raise KafkaDistError(
                        f"{self.dist}/config/log4j.properties has no "
                        "log4j.logger.kafka.request.logger line to raise to DEBUG"
                    )
            target = self.workdir / "log4j.properties"
            _write_writable(target, text)
            log_opt = f"-Dlog4j.configuration=file:{target}"
        return [log_opt, f"-Dkafka.logs.dir={self.logs_dir}"]

    def _jvm(self, log_opts: list[str], main: str, *args: str) -> list[str]:
        return [
            _java(), f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC",
            "-Djava.awt.headless=true", *log_opts,
            "-cp", str(self.dist / "libs" / "*"), main, *args,
        ]

    def _format(self, log_opts: list[str]) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return
        if self.cluster_id is None:
            self.cluster_id = random_cluster_id()
        argv = self._jvm(log_opts, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                         "-c", str(self.properties_file))
        done = subprocess.run(argv, cwd=self.workdir, capture_output=True, text=True,
                              timeout=self.ready_timeout, stdin=subprocess.DEVNULL)
        (self.logs_dir / "format.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(
                f"kafka-storage format failed for {self.workdir} (exit {done.returncode}):\n"
                f"{_tail_text(done.stdout + done.stderr)}"
            )

    # -- lifecycle

    def start(self, *, wait: bool = True) -> KafkaBroker:
        """Formats the data folder (first start only) and starts the JVM in its own process
        group; with ``wait``, returns once the node logged "Kafka Server started" and its
        port accepts connections (raises with the log tail when the JVM exits or after
        ``ready_timeout`` seconds, killing it)."""
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        log_opts = self._write_config()
        self._format(log_opts)
        for p in {self.port, self.controller_port}:
            if self.process_roles != "controller" or p == self.controller_port:
                if _accepts(p, timeout=0.2):
                    raise RuntimeError(f"127.0.0.1:{p} is already in use")
        self._stdout_from = self.stdout_log.stat().st_size if self.stdout_log.exists() else 0
        with open(self.stdout_log, "ab") as out, open(self.stderr_log, "ab") as err:
            self.proc = subprocess.Popen(
                self._jvm(log_opts, "kafka.Kafka", str(self.properties_file)),
                cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, preexec_fn=_die_with_parent(),
            )
        _LIVE.add(self)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Waits for "Kafka Server started" (in this start's part of stdout.log) and, for a
        node with the broker role, the broker port accepting connections."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        needs_port = "broker" in self.process_roles.split(",")
        while True:
            if self._logged_since_start(READY_MARKER) and (not needs_port or _accepts(self.port)):
                return
            if self.proc.poll() is not None:
                code = self.proc.returncode
                _LIVE.discard(self)
                raise RuntimeError(
                    f"Kafka {self.version} node {self.node_id} exited with {code} before it "
                    f"was ready ({self.workdir}):\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                tail = self.log_tail()
                self.kill()
                raise RuntimeError(
                    f"Kafka {self.version} node {self.node_id} not ready after "
                    f"{self.ready_timeout:.0f} s (killed; {self.workdir}):\n{tail}"
                )
            time.sleep(0.25)

    def _logged_since_start(self, marker: str) -> bool:
        try:
            with open(self.stdout_log, "rb") as f:
                f.seek(self._stdout_from)
                return marker.encode() in f.read()
        except FileNotFoundError:
            return False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (a controlled shutdown), then SIGKILL after ``timeout`` seconds. Returns
        the exit status (None when it was not running)."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL the node's process group at once (a crash: no controlled shutdown)."""
        return self._signal(signal.SIGKILL, STOP_TIMEOUT_S)

    def _signal(self, sig: signal.Signals, timeout: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            _killpg(proc.pid, sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT_S)
        else:
            _killpg(proc.pid, signal.SIGKILL)  # anything the JVM left in its group
        _LIVE.discard(self)
        return proc.returncode

    def restart(self, *, wait: bool = True) -> KafkaBroker:
        """:meth:`stop`, then :meth:`start` on the same ports and data."""
        self.stop()
        return self.start(wait=wait)

    def __enter__(self) -> KafkaBroker:
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- logs

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the JVM's stdout.log and stderr.log (for error messages)."""
        parts = []
        for path in (self.stdout_log, self.stderr_log):
            if path.exists() and path.stat().st_size:
                parts.append(f"--- {path} (last {lines} lines)\n{_tail_file(path, lines)}")
        return "\n".join(parts) or f"(no output in {self.logs_dir})"

    def request_log_entries(self) -> list[RequestLogEntry]:
        """Every request in ``logs/kafka-request.log`` (hourly-rolled files first), oldest
        first, as :class:`RequestLogEntry` (unpacks as ``(api, api_version, client_id)``,
        e.g. ``("FETCH", 2, "my-client")``). Needs ``request_log=True``.

        Kafka logs a request when it has been answered ("Completed request:" at DEBUG), so
        wait for the answer before reading. Kafka 4 refuses versions below its floor (e.g.
        Fetch v0–3, Produce v0–2) while parsing the header, before anything is logged: such
        requests never show up here (the connection is closed).

        The node's own traffic is logged too, so filter by ``client_id``: its broker side
        talking to its controller side (client id ``"1"`` for node 1: API_VERSIONS,
        BROKER_REGISTRATION, CONTROLLER_REGISTRATION, a BROKER_HEARTBEAT every second, a
        client's CREATE_TOPICS forwarded as v7) and the controller's copy of each forwarded
        request (``forwarded=True``, with the client's own header)."""
        if not self.request_log:
            raise RuntimeError("request_log_entries() needs KafkaBroker(..., request_log=True)")
        files = sorted(self.logs_dir.glob("kafka-request.log.*"))
        if self.request_log_file.exists():
            files.append(self.request_log_file)
        entries = []
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    entry = parse_request_log_line(line)
                    if entry is not None:
                        entries.append(entry)
        return entries


def _log4j2_request_logger_debug(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == "- name: kafka.request.logger":
            for j in range(i + 1, min(i + 4, len(lines))):
                if lines[j].strip().startswith("level:"):
                    lines[j] = re.sub(r"level:\s*\w+", "level: DEBUG", lines[j])
                    return "\n".join(lines)
    raise KafkaDistError("config/log4j2.yaml has no kafka.request.logger level to raise to DEBUG")


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: the JVM gets SIGKILL when the test process dies without cleaning up (SIGKILL,
    os._exit by a thread timeout: no atexit). Only from the main thread: the kernel's
    "parent" is the thread that started the child."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _write_writable(path: Path, text: str) -> None:
    if path.exists():
        path.chmod(0o644)
    path.write_text(text)


def _killpg(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _tail_file(path: Path, lines: int) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 256 * 1024))
        data = f.read().decode("utf-8", errors="replace")
    return "\n".join(data.splitlines()[-lines:])


def _tail_text(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


# -- several nodes -------------------------------------------------------------------------


class KafkaCluster:
    """``size`` combined broker+controller nodes (node ids 1..size), one KRaft quorum of all of
    them, one cluster id; workdirs ``workdir/node-<id>``. Replication factors of the internal
    topics default to ``min(3, size)``; ``extra_props`` applies to every node."""

    def __init__(
        self,
        dist: Path,
        workdir: Path,
        size: int = 3,
        *,
        extra_props: Mapping[str, str] | None = None,
        request_log: bool = False,
        heap: str = "512m",
    ) -> None:
        ports = free_ports(2 * size)
        voters = ",".join(f"{i + 1}@127.0.0.1:{ports[size + i]}" for i in range(size))
        cluster_id = random_cluster_id()
        rf = str(min(3, size))
        props = {
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, size)),
            "default.replication.factor": rf,
        }
        self.brokers = []
        for i in range(size):
            broker = KafkaBroker(dist, Path(workdir) / f"node-{i + 1}", port=ports[i],
                                 controller_port=ports[size + i], quorum_voters=voters,
                                 cluster_id=cluster_id, node_id=i + 1, request_log=request_log,
                                 heap=heap, extra_props={**props, **(extra_props or {})})
            if broker.kafka4:
                broker.extra_props = {
                    "share.coordinator.state.topic.replication.factor": rf,
                    "share.coordinator.state.topic.min.isr": str(min(2, size)),
                    **broker.extra_props,
                }
            self.brokers.append(broker)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> KafkaCluster:
        try:
            for b in self.brokers:
                b.start(wait=False)
            for b in self.brokers:
                b.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for b in self.brokers:
            if b.is_running():
                _killpg(b.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        for b in self.brokers:
            b.stop()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- client helpers (confluent-kafka) ------------------------------------------------------


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
    *,
    replication_factor: int = 1,
    timeout: float = 60.0,
) -> None:
    """Creates ``name`` and waits until its metadata shows a leader for every partition."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                     config=dict(configs or {}))
    futures = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=min(10.0, timeout)).topics.get(name)
        if (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in md.partitions.values())):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r} has no leader for every partition after "
                               f"{timeout:.0f} s: {md and md.partitions}")
        time.sleep(0.1)


def delete_topic(bootstrap: str, name: str, *, timeout: float = 60.0) -> None:
    """Deletes ``name`` and waits until the metadata no longer lists it."""
    admin = _admin(bootstrap)
    futures = admin.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    # all topics, never this one by name: a by-name Metadata request may auto-create it again
    while name in admin.list_topics(timeout=min(10.0, timeout)).topics:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r} still listed {timeout:.0f} s after its deletion")
        time.sleep(0.1)


Header = tuple[str, bytes | None]
Record = tuple[int | None, bytes | str | None, bytes | str | None, int | None,
               Sequence[Header] | None]


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    compression: str = "none",
    *,
    config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> list[int]:
    """Writes ``records`` (``(partition, key, value, timestamp_ms, headers)``; partition None:
    the partitioner picks, timestamp None: now, headers a list of ``(name, bytes)``) with a
    confluent-kafka producer (``compression.type=compression``, acks=all, linger 5 ms so that
    the codec gets batches of several records); flushes, asserts every delivery succeeded, and
    returns each record's offset, in the order given."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
            "compression.type": compression, "acks": "all", "linger.ms": 5}
    conf.update(config or {})
    producer = Producer(conf)
    results: list[tuple[int, int] | None] = []
    errors: list[str] = []

    def on_delivery(index: int):
        def callback(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                results[index] = (msg.partition(), msg.offset())
        return callback

    for i, (partition, key, value, timestamp_ms, headers) in enumerate(records):
        results.append(None)
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery(i)}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        if headers:
            kwargs["headers"] = list(headers)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"{left} records still undelivered after {timeout:.0f} s"
    assert not errors, "deliveries failed: " + "; ".join(errors[:10])
    assert all(r is not None for r in results), "a delivery report is missing"
    return [r[1] for r in results]  # type: ignore[index]


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int | Iterable[int],
    *,
    config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> list[tuple[int, int, bytes | None, bytes | None, int, list[Header]]]:
    """Reads ``topic``'s ``partitions`` (a count, or partition ids) from their start to the
    high watermark seen at the call, with an assigned confluent-kafka consumer (no group
    membership, nothing committed). Returns ``(partition, offset, key, value, timestamp_ms,
    headers)`` tuples sorted by partition and offset, ``headers`` a list (``[]`` when none)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    ids = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    conf = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
            "group.id": f"consume-all-{uuid.uuid4().hex}", "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest"}
    conf.update(config or {})
    consumer = Consumer(conf)
    try:
        deadline = time.monotonic() + timeout
        high = {p: _high_watermark(consumer, topic, p, deadline) for p in ids}
        pending = {p for p in ids if high[p] > 0}
        if not pending:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        out = []
        while pending:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"consume_all({topic!r}): partitions {sorted(pending)} not read up to "
                    f"their high watermarks {high} after {timeout:.0f} s ({len(out)} records)"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high[msg.partition()]:
                        pending.discard(msg.partition())
                    continue
                raise RuntimeError(f"consume_all({topic!r}): {err}")
            p, offset = msg.partition(), msg.offset()
            if offset < high[p]:
                out.append((p, offset, msg.key(), msg.value(), msg.timestamp()[1],
                            list(msg.headers() or [])))
            if offset >= high[p] - 1:
                pending.discard(p)
        out.sort(key=lambda r: (r[0], r[1]))
        return out
    finally:
        consumer.close()


def _high_watermark(consumer: Any, topic: str, partition: int, deadline: float) -> int:
    """The partition's high watermark, asked again until ``deadline`` while its leader moves
    (librdkafka's ListOffsets to a dead leader fails instead of following the new one)."""
    from confluent_kafka import KafkaException, TopicPartition

    while True:
        left = deadline - time.monotonic()
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                  timeout=max(0.1, min(5.0, left)),
                                                  cached=False)[1]
        except KafkaException:  # _TIMED_OUT, _DESTROY_BROKER, NOT_LEADER…: ask again
            if left <= 0:
                raise
        time.sleep(0.2)
