"""The fenced code blocks of README.md and docs/**/*.md, and the machinery that runs them.

What a block is, by its language:

- ``python``: run in-process, in doc order, in one namespace per page (a page's Python blocks
  may use what its earlier ones defined), with the session's folder as working directory.
- ``console``: a shell session: ``$ `` lines are commands (a line ending in ``\\`` goes on), the
  lines after a command are its output. Each command runs with ``bash -c`` in the session's
  folder; shown output is compared line by line (``...`` in a shown line matches anything), and a
  command whose shown output holds ``: error:`` must fail, any other must succeed.
  ``lazyconv serve`` and ``lazyconv gateway`` (not sent to the background with ``&``, not
  shown failing, and not ``gateway scram-credentials`` or ``--check-config``) are servers: started, their ready lines compared with the shown output, left running for the rest
  of the session (a reader starts them in another terminal), then stopped with SIGTERM, which
  must end them with status 0.
- ``bash``/``sh``/``shell`` without prompts: a script, run with ``bash -e`` in the session's
  folder as its own process group (what it sends to the background is stopped at its end).
- a block of any language titled with a file name (```` ```json title="input.json" ````) is that
  file: written into the folder before the session runs.

The folder of a session is a fresh temporary folder in which the clone's own folders (``.venv``,
``bench``, ``tests``, ``fixtures``, ``.ci``) appear as links, so that commands
given "from a clone" run as written while what they write lands in the temporary folder;
``/tmp/`` in a block means that folder. Ports a block listens on (``--port N``,
``--listener N``, ``port=N``) are replaced by free ones, and in a session that needs a Kafka
broker, port 9092 (a stock broker's) by the test broker's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent.parent

PYTHON = frozenset({"python", "py"})
CONSOLE = frozenset({"console"})
SCRIPT = frozenset({"bash", "sh", "shell"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_TITLE = re.compile(r'title="([^"]+)"')
# the ports a block listens on: --port N, --listener [HOST:]N[,...], Gateway(..., port=N)
_LISTEN = re.compile(r"(?:--port[ =]|--listener[ =](?:[\w.-]+:)?|\bport=)(\d{4,5})\b")
_SERVER = re.compile(r"^\s*(?:\S*/)?lazyconv\s+(serve|gateway)\b")
# what runs and exits although it names a server command (the gateway's sub-command, a check)
_ONE_SHOT = re.compile(r"\bscram-credentials\b|--check-config\b")
STOCK_KAFKA_PORT = 9092  # what the docs' Kafka cluster listens on
# the clone's folders a session's folder links to
CLONE_ENTRIES = (".venv", ".ci", "bench", "tests", "fixtures")


def pages() -> list[str]:
    """README.md and every page of the site, as paths relative to the clone."""
    docs = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))
    return ["README.md", *docs]


@dataclass(frozen=True)
class Block:
    """One fenced code block: ``line`` is the line of its opening fence (1-based)."""

    page: str
    line: int
    info: str
    text: str

    @property
    def lang(self) -> str:
        words = self.info.split()
        return words[0].lower() if words else ""

    @property
    def title(self) -> str | None:
        match = _TITLE.search(self.info)
        return match.group(1) if match else None

    @property
    def kind(self) -> str:
        """``python``, ``console``, ``script`` or ``other`` (not run)."""
        if self.lang in PYTHON:
            return "python"
        if self.lang in CONSOLE:
            return "console"
        if self.lang in SCRIPT:
            return "script"
        return "other"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def has_prompts(self) -> bool:
        return any(line.startswith("$ ") for line in self.text.splitlines())


def page_blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, in order (indented fences in lists included)."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        found.append(Block(page, i + 1, opening.group("info").strip(), "\n".join(body) + "\n"))
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in page_blocks(page)]


def find_block(page: str, snippet: str) -> Block:
    """The one block of ``page`` holding ``snippet`` (a table's key); fails on none or several."""
    matches = [b for b in page_blocks(page) if snippet in b.text]
    if len(matches) != 1:
        raise LookupError(f"{page}: {len(matches)} blocks hold {snippet!r} (want exactly one)")
    return matches[0]


# -- console sessions ----------------------------------------------------------------------


@dataclass
class Step:
    """One command of a console block and the output shown after it."""

    command: str
    line: int
    output: list[str] = field(default_factory=list)

    @property
    def is_server(self) -> bool:
        return (bool(_SERVER.match(self.command)) and not self.command.rstrip().endswith("&")
                and not self.expects_failure and not _ONE_SHOT.search(self.command))

    @property
    def expects_failure(self) -> bool:
        return any(": error:" in line for line in self.output)


def console_steps(block: Block) -> list[Step]:
    steps: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command, number = line[2:], block.line + 1 + i
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            steps.append(Step(command, number))
        elif line.strip():
            if not steps:
                raise ValueError(f"{block.where}: output before the first `$ ` command")
            steps[-1].output.append(line)
        i += 1
    return steps


def output_matches(shown: str, printed: str, varies: Mapping[str, str]) -> bool:
    """``printed`` is what ``shown`` says: equal, with ``...`` matching any text; a line starting
    with a prefix of ``varies`` (machine-dependent) is compared by that prefix only."""
    for prefix in varies:
        if shown.startswith(prefix):
            return printed.startswith(prefix)
    pattern = ".*".join(re.escape(part) for part in shown.rstrip().split("..."))
    return re.fullmatch(pattern, printed.rstrip()) is not None


# -- sessions ------------------------------------------------------------------------------


@dataclass
class Session:
    """Blocks that run in one folder (and, for Python, one namespace), in doc order."""

    page: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        kinds = "+".join(dict.fromkeys(b.kind for b in self.blocks))
        return f"{self.page}:{self.blocks[0].line}:{kinds}"

    @property
    def has_shell(self) -> bool:
        return any(b.kind in ("console", "script") for b in self.blocks)

    def listen_ports(self) -> list[int]:
        ports: list[int] = []
        for block in self.blocks:
            for match in _LISTEN.finditer(block.text):
                port = int(match.group(1))
                if 1024 <= port <= 65535 and port not in ports:
                    ports.append(port)
        return ports


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def substitute(text: str, folder: Path, ports: Mapping[int, int]) -> str:
    """The block as run: /tmp/ is the session's folder, the listened ports are free ones."""
    text = text.replace("/tmp/", f"{folder}/")
    for old, new in ports.items():
        text = re.sub(rf"(?<![\d.]){old}(?!\d)", str(new), text)
    return text


def make_folder(folder: Path, files: Iterable[Block]) -> None:
    """Links to the clone's folders, and the files the page shows."""
    for name in CLONE_ENTRIES:
        target = REPO / name
        if target.exists() and not (folder / name).exists():
            (folder / name).symlink_to(target, target_is_directory=True)
    for block in files:
        assert block.title is not None
        (folder / block.title).write_text(block.text, encoding="utf-8")


def shell_env() -> dict[str, str]:
    """The environment of shell blocks: the test's Python and its ``lazyconv`` first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


# -- servers -------------------------------------------------------------------------------


def default_sigint() -> None:
    """In a child process before it runs (``preexec_fn``): SIGINT back to its default action,
    as a terminal gives it. A suite started in the background (``&`` without job control, as
    CI jobs and nohup runs are) hands SIGINT down ignored, and a Python program that inherits it
    ignored installs no KeyboardInterrupt handler: Ctrl-C tests would then test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Server:
    """A process started by a session that runs until stopped; its stdout read line by line."""

    def __init__(self, argv: list[str], *, cwd: Path, env: Mapping[str, str], what: str,
                 stop_signal: int = signal.SIGTERM, expect_status: int | None = 0) -> None:
        self.what = what
        self.stop_signal = stop_signal
        self.expect_status = expect_status
        # PYTHONFAULTHANDLER: a Python server that does not stop is sent SIGABRT and prints
        # where it was. preexec_fn: SIGINT at its default action, as a terminal gives it (a suite
        # started in the background, nohup or `&` without job control, hands SIGINT down
        # ignored; a Python program that inherits it ignored installs no KeyboardInterrupt
        # handler, and asyncio.run then never stops on SIGINT).
        self.process = subprocess.Popen(argv, cwd=cwd, env={**env, "PYTHONFAULTHANDLER": "1"},
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True, preexec_fn=default_sigint)
        self.lines: Queue[str | None] = Queue()
        self.stderr: list[str | None] = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append),
                         daemon=True).start()

    @staticmethod
    def _pump(stream: IO[str] | None, sink: Callable[[str | None], None]) -> None:
        for line in stream or ():
            sink(line.rstrip("\n"))
        sink(None)

    def read_line(self, timeout: float = 120.0) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except Empty:
            raise AssertionError(f"{self.what}: no line on stdout within {timeout} s") from None
        if line is None:
            self.process.wait(10)
            raise AssertionError(f"{self.what} ended (status {self.process.returncode}) before "
                                 f"its ready line: {self.stderr_text()}")
        return line

    def stderr_text(self) -> str:
        return "\n".join(line for line in self.stderr if line is not None)[-3000:]

    def stop(self) -> int | None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, self.stop_signal)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                try:  # was the signal ignored, blocked, pending? (what it inherited, or did)
                    status = Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
                    signals = " ".join(line.replace("\t", "") for line in status
                                       if line.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
                except OSError as exc:
                    signals = f"(its signal masks could not be read: {exc})"
                os.killpg(self.process.pid, signal.SIGABRT)  # its threads' stacks on stderr
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(10)
                deadline = time.monotonic() + 5
                while None not in self.stderr and time.monotonic() < deadline:
                    time.sleep(0.05)
                raise AssertionError(f"{self.what} did not stop within 60 s of its signal "
                                     f"({signals}); its stderr ends:\n{self.stderr_text()}") from None
        return self.process.returncode


def wait_listening(port: int, server: Server, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"{server.what} ended (status {server.process.returncode}): "
                                 f"{server.stderr_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{server.what}: nothing listens on port {port} after {timeout} s")


def api_versions_round_trip(port: int) -> int:
    """Send ApiVersions v0 to a Kafka endpoint; return the answer's error code."""
    request = struct.pack(">hhih", 18, 0, 1, -1)  # key, version, correlation id, null client id
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(request)) + request)
        head = _recv_exactly(s, 4)
        body = _recv_exactly(s, struct.unpack(">i", head)[0])
    correlation_id, error_code = struct.unpack(">ih", body[:6])
    assert correlation_id == 1
    return int(error_code)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


@dataclass
class Servers:
    """The servers a session started; all stopped at its end."""

    running: dict[int, Server] = field(default_factory=dict)  # by the port they listen on

    def add(self, port: int, server: Server) -> None:
        self.stop_on(port)
        self.running[port] = server

    def stop_on(self, port: int) -> None:
        """A reader stops one server before starting another on its port."""
        server = self.running.pop(port, None)
        if server is not None:
            _check_stopped(server)

    def stop_all(self) -> None:
        problems = []
        for port in list(self.running):
            try:
                self.stop_on(port)
            except AssertionError as e:
                problems.append(str(e))
        assert not problems, "\n".join(problems)


def _check_stopped(server: Server) -> None:
    status = server.stop()
    if server.expect_status is not None:
        assert status == server.expect_status, (
            f"{server.what} ended with status {status} on its stop signal: {server.stderr_text()}")


# -- measurement commands (bench/): their arguments parsed, not run ------------------------

_BENCH = re.compile(r"^(?:\S*/)?python3?\s+(bench/(\w+)\.py)\b(.*)$", re.S)


def bench_commands(block: Block) -> list[tuple[str, list[str]]]:
    """``(script name, argv)`` of each command of a block of ``python bench/NAME.py ...`` lines,
    or [] when some line is not one (``$VAR`` stands for itself, a placeholder path)."""
    text = block.text.replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] in ("export",) or "=" in words[0]:
            return []
        joined = " ".join(words)
        match = _BENCH.match(joined)
        if not match:
            return []
        commands.append((match.group(2), words[2:]))
    return commands


class ArgumentsParsed(Exception):
    """Raised in place of running a benchmark once its arguments parsed."""


@contextlib.contextmanager
def parse_only() -> Iterator[None]:
    """Within this context a script's ``ArgumentParser.parse_args`` parses (exiting with status
    2 on a bad argument, as always) and then raises :class:`ArgumentsParsed`."""
    original_parse_args = argparse.ArgumentParser.parse_args
    original_parse_known = argparse.ArgumentParser.parse_known_args
    depth = [0]

    def parse_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        depth[0] += 1
        try:
            namespace = original_parse_args(self, args, namespace)
        finally:
            depth[0] -= 1
        raise ArgumentsParsed(namespace)

    def parse_known_args(self: argparse.ArgumentParser, args: Any = None,
                         namespace: Any = None) -> Any:
        result = original_parse_known(self, args, namespace)
        if depth[0] == 0:
            raise ArgumentsParsed(result)
        return result

    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original_parse_args  # type: ignore[method-assign]
        argparse.ArgumentParser.parse_known_args = original_parse_known  # type: ignore[method-assign]
