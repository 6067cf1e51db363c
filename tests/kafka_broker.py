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
    "unique_topic",
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

    ``format_args``: extra ``StorageTool format`` arguments, e.g. ``("--add-scram",
    "SCRAM-SHA-512=[name=alice,password=alice-secret]")`` (users exist before the first start).
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
        format_args: Sequence[str] = (),
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
        self.format_args = tuple(format_args)
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
                         "-c", str(self.properties_file), *self.format_args)
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


def unique_topic(prefix: str) -> str:
    """``prefix`` and a random suffix: a topic of this try's own on a broker that outlives it
    (a session broker; the live tests' rerun, tests/conftest.py, must not meet the last try's)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


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


def wait_high_watermark(bootstrap: str, topic: str, partition: int, offset: int,
                        timeout: float = 30.0) -> None:
    """Until ``topic``'s ``partition`` has a high watermark of at least ``offset``."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"watermark-{uuid.uuid4().hex}"})
    try:
        deadline = time.monotonic() + timeout
        while _high_watermark(consumer, topic, partition, deadline) < offset:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic}-{partition} did not reach offset {offset} in {timeout:.0f} s")
            time.sleep(0.05)
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


# -- a secured broker ------------------------------------------------------------------------
# TLS with certificates made per run (trustme), SASL (SCRAM and PLAIN), KRaft's
# StandardAuthorizer with ACLs; the PLAINTEXT listener stays for the test's own admin work
# (ANONYMOUS is a super user there). See SecuredKafka.

SECURED_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
# the ACLs SecuredKafka.grant_default_acls() gives: alice reads and writes topic A and uses
# group gA; bob reads topic B (with group gB)
TOPIC_A, TOPIC_B, GROUP_A, GROUP_B = "A", "B", "gA", "gB"
STORE_PASSWORD = "store-secret"
REAUTH_MS = 4000  # connections.max.reauth.ms of SecuredKafka's REAUTH listener


class SecurityMaterial:
    """A CA and the certificates of a run, as files under ``folder`` (made by trustme, RSA
    keys so that every old client can use them):

    - ``ca_pem``: the CA certificate (trust stores in PEM);
    - ``broker_keystore_pem``: the broker's PKCS#8 key and certificate chain for 127.0.0.1 and
      localhost (Kafka's ``ssl.keystore.type=PEM``);
    - ``truststore_p12``: the CA as a Java PKCS12 trust store (password :data:`STORE_PASSWORD`),
      for clients older than Kafka 2.7's PEM stores;
    - per user (``alice``, ``bob``): ``client_cert_pem(user)``, ``client_key_pem(user)``, and
      ``client_keystore_p12(user)`` (PKCS12, same password) for mTLS, subject ``CN=<user>,O=lazyconv-tests``.
    """

    def __init__(self, folder: Path, users: Iterable[str] = tuple(SECURED_USERS)) -> None:
        import trustme
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(key_type=trustme.KeyType.RSA)
        self.ca_pem = self.folder / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        encryption = serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
        ca_cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())
        self.truststore_p12 = self.folder / "truststore.p12"
        self.truststore_p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca_cert, b"ca")], encryption))

        def pkcs8(leaf: Any) -> bytes:
            key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
            return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())

        broker = self.ca.issue_cert("localhost", "127.0.0.1", common_name="localhost",
                                    key_type=trustme.KeyType.RSA)
        self.broker_keystore_pem = self.folder / "broker-keystore.pem"
        self.broker_keystore_pem.write_bytes(
            pkcs8(broker) + b"".join(c.bytes() for c in broker.cert_chain_pems))
        self.broker_keystore_pem.chmod(0o600)
        for user in users:
            leaf = self.ca.issue_cert(f"{user}.clients.lazyconv.test", common_name=user,
                                      organization_name="lazyconv-tests",
                                      key_type=trustme.KeyType.RSA)
            self.client_cert_pem(user).write_bytes(b"".join(c.bytes() for c in leaf.cert_chain_pems))
            self.client_key_pem(user).write_bytes(pkcs8(leaf))
            self.client_key_pem(user).chmod(0o600)
            key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
            cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
            self.client_keystore_p12(user).write_bytes(pkcs12.serialize_key_and_certificates(
                user.encode(), key, cert, [ca_cert], encryption))  # type: ignore[arg-type]

    def client_cert_pem(self, user: str) -> Path:
        return self.folder / f"{user}-cert.pem"

    def client_key_pem(self, user: str) -> Path:
        return self.folder / f"{user}-key.pem"

    def client_keystore_p12(self, user: str) -> Path:
        return self.folder / f"{user}-keystore.p12"


def _jaas(module: str, **options: str) -> str:
    quoted = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"org.apache.kafka.common.security.{module} required {quoted};".replace("  ", " ")


class SecuredKafka:
    """A single KRaft node with security on, from any Kafka distribution (3.5+: SCRAM users
    are added at format time):

    - ``PLAINTEXT`` on :attr:`port` (``bootstrap``): no authentication, ``User:ANONYMOUS`` is a
      super user (the test's own topics and ACLs go through it);
    - ``SASL_SSL`` on :attr:`sasl_ssl_port` and ``SASL_PLAINTEXT`` on
      :attr:`sasl_plaintext_port`: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, users
      :data:`SECURED_USERS` (SCRAM users added by ``StorageTool format --add-scram``, PLAIN users
      in the listener's JAAS line);
    - ``REAUTH`` (SASL_PLAINTEXT, the same users) on :attr:`reauth_port` with
      ``connections.max.reauth.ms`` = :data:`REAUTH_MS`: a client must re-authenticate (KIP-368)
      within seconds, or its connection is closed;
    - with ``mtls=True``, ``SSL`` on :attr:`ssl_port` with ``ssl.client.auth=required``: the
      principal is the certificate's CN (``RULE:^CN=([^,]+),.*$/$1/``), so ``alice``'s
      certificate gets alice's ACLs;
    - KRaft's StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``: nothing is allowed
      to alice and bob until :meth:`grant_default_acls` (or :meth:`create_acls`).

    Certificates are :class:`SecurityMaterial` (made per instance in ``workdir/tls``).
    Use as a context manager or ``start()``/``stop()``; :meth:`client_config` gives a
    confluent-kafka configuration for a user, a mechanism and a listener.
    """

    def __init__(self, dist: Path, workdir: Path, *, mtls: bool = True,
                 users: Mapping[str, str] = SECURED_USERS, heap: str = "512m",
                 request_log: bool = False) -> None:
        self.workdir = Path(workdir)
        self.users = dict(users)
        self.material = SecurityMaterial(self.workdir / "tls", users=tuple(self.users))
        ports = free_ports(6 if mtls else 5)
        self.port, controller = ports[0], ports[1]
        self.sasl_ssl_port, self.sasl_plaintext_port, self.reauth_port = ports[2:5]
        self.ssl_port = ports[5] if mtls else None
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}", f"CONTROLLER://127.0.0.1:{controller}",
                     f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}",
                     f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext_port}",
                     f"REAUTH://127.0.0.1:{self.reauth_port}"]
        advertised = [f"PLAINTEXT://127.0.0.1:{self.port}",
                      f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}",
                      f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext_port}",
                      f"REAUTH://127.0.0.1:{self.reauth_port}"]
        protocol_map = ("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
                        "SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT")
        if mtls:
            listeners.append(f"SSL://127.0.0.1:{self.ssl_port}")
            advertised.append(f"SSL://127.0.0.1:{self.ssl_port}")
            protocol_map += ",SSL:SSL"
        plain_jaas = _jaas("plain.PlainLoginModule", **{f"user_{u}": p for u, p in self.users.items()})
        props = {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": protocol_map,
            "sasl.enabled.mechanisms": ",".join((*SCRAM_MECHANISMS, "PLAIN")),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.material.broker_keystore_pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.material.ca_pem),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
        props["listener.name.reauth.connections.max.reauth.ms"] = str(REAUTH_MS)
        for listener in ("sasl_ssl", "sasl_plaintext", "reauth"):
            props[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas
            for mechanism in SCRAM_MECHANISMS:
                props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = \
                    _jaas("scram.ScramLoginModule")
        if mtls:
            props["listener.name.ssl.ssl.client.auth"] = "required"
            props["listener.name.ssl.ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
        scram = [arg for mechanism in SCRAM_MECHANISMS for user, password in self.users.items()
                 for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
        self.broker = KafkaBroker(dist, self.workdir / "broker", port=self.port,
                                  controller_port=controller, extra_props=props, heap=heap,
                                  format_args=scram, request_log=request_log)

    @property
    def version(self) -> str:
        return self.broker.version

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener (super user: for setting up topics and ACLs)."""
        return self.broker.bootstrap

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def sasl_plaintext_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_plaintext_port}"

    @property
    def reauth_bootstrap(self) -> str:
        """SASL_PLAINTEXT with a session lifetime of :data:`REAUTH_MS` (KIP-368)."""
        return f"127.0.0.1:{self.reauth_port}"

    @property
    def ssl_bootstrap(self) -> str:
        if self.ssl_port is None:
            raise RuntimeError("this SecuredKafka has no mTLS listener (mtls=False)")
        return f"127.0.0.1:{self.ssl_port}"

    def start(self) -> SecuredKafka:
        self.broker.start()
        return self

    def stop(self) -> None:
        self.broker.stop()

    def __enter__(self) -> SecuredKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client_config(self, user: str | None, mechanism: str = "SCRAM-SHA-512", *,
                      listener: str = "SASL_SSL", password: str | None = None) -> dict[str, Any]:
        """A confluent-kafka (librdkafka) configuration: ``listener`` SASL_SSL, SASL_PLAINTEXT
        or SSL (mTLS with ``user``'s certificate; ``mechanism`` unused), or PLAINTEXT."""
        conf: dict[str, Any] = {"broker.address.family": "v4"}
        if listener == "PLAINTEXT":
            return {**conf, "bootstrap.servers": self.bootstrap}
        if listener in ("SASL_SSL", "SSL"):
            conf.update({"ssl.ca.location": str(self.material.ca_pem),
                         "ssl.endpoint.identification.algorithm": "https"})
        if listener == "SSL":
            assert user is not None
            return {**conf, "bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SSL",
                    "ssl.certificate.location": str(self.material.client_cert_pem(user)),
                    "ssl.key.location": str(self.material.client_key_pem(user))}
        assert user is not None
        bootstrap = self.sasl_ssl_bootstrap if listener == "SASL_SSL" else self.sasl_plaintext_bootstrap
        return {**conf, "bootstrap.servers": bootstrap, "security.protocol": listener,
                "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": self.users[user] if password is None else password}

    def create_acls(self, bindings: Iterable[tuple[str, str, str, str]], *,
                    timeout: float = 60.0) -> None:
        """Allow ACLs through the PLAINTEXT listener: ``(principal, resource type ("topic",
        "group", "cluster"), resource name, operation ("read", "write", "describe", ...))``."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        acls = [AclBinding(getattr(ResourceType, kind.upper()), name, ResourcePatternType.LITERAL,
                           principal, "*", getattr(AclOperation, operation.upper()),
                           AclPermissionType.ALLOW)
                for principal, kind, name, operation in bindings]
        admin = _admin(self.bootstrap)  # kept alive until every future is done
        futures = admin.create_acls(acls, request_timeout=timeout)
        for future in futures.values():
            future.result(timeout=timeout)

    def grant_default_acls(self, topic_a: str = TOPIC_A, topic_b: str = TOPIC_B,
                           group_a: str = GROUP_A, group_b: str = GROUP_B) -> None:
        """alice: read, write and describe ``topic_a``, read ``group_a``; bob: read and
        describe ``topic_b``, read ``group_b``. Nothing else."""
        self.create_acls([
            ("User:alice", "topic", topic_a, "read"), ("User:alice", "topic", topic_a, "write"),
            ("User:alice", "topic", topic_a, "describe"), ("User:alice", "group", group_a, "read"),
            ("User:bob", "topic", topic_b, "read"), ("User:bob", "topic", topic_b, "describe"),
            ("User:bob", "group", group_b, "read"),
        ])
