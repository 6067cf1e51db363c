"""Every Python block and shell session of README.md and docs/ runs as written (issue 38).

A reader copies the docs' examples; they must work. This test runs each ``python``, ``console``
and ``bash`` block (how, in :mod:`tests.docs.blocks`), in doc order per page: a page's Python
blocks share one namespace; each shell block runs in a fresh folder of its own unless
:data:`CONTINUES` says it goes on from an earlier block. The few blocks it cannot run are in
:data:`NOT_RUN`, each with the reason, and the tables' keys must still name a block, so a list
cannot rot. Measurement commands (``python bench/NAME.py ...``: minutes to hours each; figures
live in the docs, never in timed tests) are not run: their arguments are parsed by the script's
own parser, so a renamed or removed option fails here.

Markers: a session with a shell block is ``slow`` (every command starts a Python process); one
that needs a Kafka broker is ``kafka`` (the session broker of tests/conftest.py, from
``LAZYCONV_KAFKA_DIST``; skipped with the reason without it); one that runs ``lazyconv
validate`` is ``spark``. The Python-only sessions are the quick part.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import (
    REPO,
    STOCK_KAFKA_PORT,
    ArgumentsParsed,
    Block,
    Server,
    Servers,
    Session,
    all_blocks,
    api_versions_round_trip,
    bench_commands,
    console_steps,
    find_block,
    free_port,
    make_folder,
    output_matches,
    page_blocks,
    pages,
    parse_only,
    shell_env,
    substitute,
    wait_listening,
)

# (page, a snippet of the block) -> why the test does not run it
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "pip install ./lazyconv "):
        "installs lazyconv into the environment it runs in; tests/house/test_wheel.py builds the sdist "
        "and the wheel from the repository and installs the wheel in a clean virtualenv",
    ("README.md", "bash .ci/setup.sh && .venv/bin/python -m pytest -n 4 --dist loadgroup"):
        "the set-up and the whole suite, which holds this test: .ci/run runs both, and "
        "tests/spark/test_spark_validate.py runs `lazyconv validate` without a LOGDIR",
    ("README.md", "pytest -m kafka"):
        "the broker tests, which this suite holds (marker kafka), with distributions from the "
        "reader's own folders",
    ("docs/index.md", "pip install ./lazyconv "):
        "installs lazyconv (as README.md's install block; tests/house/test_wheel.py)",
    ("docs/quickstart.md", ".venv/bin/mkdocs serve"):
        "the set-up, the suite this test is part of, and a site server that runs until stopped "
        "(tests/house/test_quality.py builds the site)",
    ("docs/guide/spark.md", "--size 1G"):
        "writes 1 GiB (minutes); the same command at 8M runs in the quick start and the README",
    ("docs/guide/partitioner.md", "LAZYCONV_SLOW_BROKER_BASELINE=1"):
        "runs one of this suite's broker tests (tests/partitioner/test_slow_broker_kafka.py, "
        "marker kafka) with a distribution from the reader's own folders",
    ("docs/guide/gateway.md", "lazyconv gateway --config gateway.properties --upstream-config "
                              "upstream.properties\ngateway to"):
        "needs a secured Kafka cluster at kafka1.example.com; tests/security/"
        "test_gateway_secured.py runs the gateway with these settings against a secured Kafka "
        "4.0.1 (its --check-config runs here, in the block before)",
    ("docs/guide/gateway.md", "sasl_plain_username=\"bob\""):
        "needs the gateway in front of a secured cluster and kafka-python 1.4.7; "
        "tests/security/test_gateway_secured.py runs kafka-python 1.4.7 with these settings",
    ("docs/guide/spark.md", "venv-pack"):
        "needs a Spark cluster and an object store; tests/spark/test_spark_standalone.py runs validate "
        "against a standalone master and worker",
}

# (page, a snippet of a console command) -> what the test does instead of running it
STOOD_IN: dict[tuple[str, str], str] = {
    ("docs/guide/gateway.md", "KAFKA=~/kafka_2.13-4.0.1"):
        "Kafka's own scripts with its stock config (fixed ports 9092/9093, /tmp/kraft-combined-"
        "logs); the test starts the same single KRaft node from LAZYCONV_KAFKA_DIST "
        "(tests/kafka_broker.py) on a free port, which stands for 127.0.0.1:9092",
    ("docs/guide/gateway.md", "kafka-storage.sh format"): "(the same)",
    ("docs/guide/gateway.md", "kafka-server-start.sh"): "(the same)",
}

# (page, a snippet of the block) -> what it needs beyond lazyconv and the dev extra
NEEDS: dict[tuple[str, str], str] = {
    ("README.md", "lazyconv gateway --upstream"): "kafka",
    ("docs/guide/gateway.md", "lazyconv gateway --upstream 127.0.0.1:9092 --port 19092\n"): "kafka",
    ("docs/guide/gateway.md", "import kafka"): "kafka",
    ("docs/guide/gateway.md", "Gateway("): "kafka",
    ("docs/guide/partitioner.md", "KIP794Partitioner(batch_size"): "kafka",
    ("docs/quickstart.md", "lazyconv validate /tmp/fx"): "spark",
    ("docs/guide/validate-report.md", "lazyconv validate --out"): "spark",
}

# (page, a snippet of a block) -> a snippet of the earlier block of that page it goes on from
CONTINUES: dict[tuple[str, str], str] = {
    # the old client talks to the gateway the console started
    ("docs/guide/gateway.md", "import kafka"): "lazyconv gateway --upstream 127.0.0.1:9092 --port 19092\n",
    # the log directory the first shell block generated
    ("docs/quickstart.md", "lazyconv serve /tmp/fx"): "lazyconv fixtures generate /tmp/fx",
    ("docs/quickstart.md", "lazyconv validate /tmp/fx"): "lazyconv fixtures generate /tmp/fx",
    # the report the block before wrote
    ("docs/guide/validate-report.md", "pq.read_table"): "lazyconv validate --out",
}

# (page, a snippet of a Python block) -> what its print() must show
PRINTS: dict[tuple[str, str], str] = {
    ("docs/guide/gateway.md", "import kafka"): "b'hello from 2016'",
    ("docs/quickstart.md", "for batch in MemoryRecords(data).batches()"): "100 b'k' b'v'",
    ("docs/guide/fetch-response.md", "FetchBudget(version"): "LazyDownConvertedRecords",
    ("docs/guide/robustness.md", "validate_produce("): "0 0",
}

# shown output lines that depend on the machine: compared by this prefix only
VARIES: dict[str, str] = {
    "implementation: ": "the kernel's build and the CPU's features differ between machines",
}


def _needs(block: Block) -> set[str]:
    return {need for (page, snippet), need in NEEDS.items()
            if page == block.page and snippet in block.text}


def _is_measurement(block: Block) -> bool:
    return block.kind == "script" and bool(bench_commands(block))


def _not_run(block: Block) -> bool:
    return any(page == block.page and snippet in block.text for page, snippet in NOT_RUN)


def sessions() -> list[Session]:
    """The runnable blocks grouped into sessions (see the module's docstring)."""
    found: list[Session] = []
    for page in pages():
        python: Session | None = None
        by_block: dict[int, Session] = {}
        for block in page_blocks(page):
            if block.kind == "other" or _not_run(block) or _is_measurement(block):
                continue
            goes_on = [earlier for (p, snippet), earlier in CONTINUES.items()
                       if p == page and snippet in block.text]
            target = None
            if goes_on:
                try:  # a table entry that names no block fails test_every_table_entry_names_one_block
                    target = by_block.get(find_block(page, goes_on[0]).line)
                except LookupError:
                    pass
            if block.kind == "python":
                if python is None:
                    python = target or Session(page)
                    if target is None:
                        found.append(python)
                session = python
            elif target is not None:
                session = target
            else:
                session = Session(page)
                found.append(session)
            session.blocks.append(block)
            by_block[block.line] = session
    return found


def _session_marks(session: Session) -> list[pytest.MarkDecorator]:
    needs = set().union(*(_needs(block) for block in session.blocks))
    marks = [getattr(pytest.mark, need) for need in sorted(needs)]
    if session.has_shell or needs:
        marks.append(pytest.mark.slow)
    return marks


SESSIONS = sessions()


# -- the tables and the blocks agree -------------------------------------------------------


def test_every_table_entry_names_one_block() -> None:
    for table in (NOT_RUN, NEEDS, CONTINUES, PRINTS):
        for page, snippet in table:
            find_block(page, snippet)  # raises unless exactly one block holds it
    for (page, snippet), earlier in CONTINUES.items():
        assert find_block(page, earlier).line < find_block(page, snippet).line
    for (page, snippet), reason in {**NOT_RUN, **STOOD_IN}.items():
        assert reason, (page, snippet)
    for page, snippet in STOOD_IN:
        commands = [step.command for block in page_blocks(page) if block.kind == "console"
                    for step in console_steps(block) if snippet in step.command]
        assert len(commands) == 1, (page, snippet, commands)


def test_every_block_is_run_checked_or_listed() -> None:
    run = {block.where for session in SESSIONS for block in session.blocks}
    for block in all_blocks():
        if block.kind == "other":
            # a shell session in disguise would escape the test
            assert not block.has_prompts(), f"{block.where}: `$ ` prompts: make it ```console"
            continue
        if block.kind == "console":
            assert block.text.startswith("$ "), f"{block.where}: a console block starts with `$ `"
        if block.kind == "script":
            assert not block.has_prompts(), f"{block.where}: prompts in a script: use ```console"
        listed = _not_run(block)
        assert (block.where in run) + listed + _is_measurement(block) == 1, block.where


def test_the_markers_follow_the_needs() -> None:
    """The quick set runs no shell and no broker; a broker session is marked kafka."""
    for session in SESSIONS:
        names = {mark.name for mark in _session_marks(session)}
        if any("kafka" in _needs(b) for b in session.blocks):
            assert {"kafka", "slow"} <= names, session.id
        if not session.has_shell and not names:
            assert all(b.kind == "python" for b in session.blocks), session.id


# -- running them --------------------------------------------------------------------------


@pytest.mark.parametrize("session", [pytest.param(s, marks=_session_marks(s), id=s.id)
                                     for s in SESSIONS])
def test_the_blocks_run_as_written(session: Session, tmp_path: Path, request: pytest.FixtureRequest,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "session"
    folder.mkdir()
    make_folder(folder, [b for b in page_blocks(session.page) if b.title])
    ports: dict[int, int] = {}
    if any("kafka" in _needs(b) for b in session.blocks):
        assert STOCK_KAFKA_PORT not in session.listen_ports(), session.id
        ports[STOCK_KAFKA_PORT] = request.getfixturevalue("kafka_broker").port
    for port in session.listen_ports():
        ports[port] = free_port()
    monkeypatch.chdir(folder)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    servers = Servers()
    try:
        for block in session.blocks:
            code = substitute(block.text, folder, ports)
            if block.kind == "python":
                _run_python(block, code, namespace, folder, servers, capsys)
            elif block.kind == "console":
                _run_console(block, code, folder, servers)
            else:
                _run_script(block, code, folder)
    except BaseException:
        _close_clients(namespace)
        for server in servers.running.values():
            server.stop()
        raise
    _close_clients(namespace)
    servers.stop_all()


_CLIENT_PACKAGES = ("kafka", "confluent_kafka", "aiokafka")


def _close_clients(namespace: dict[str, object]) -> None:
    """Close the Kafka clients a page's Python blocks left open (the pages do not close them:
    a reader's session ends with the interpreter), so their threads do not go on reconnecting
    and logging through later tests."""
    for value in list(namespace.values()):
        close = getattr(value, "close", None)
        if type(value).__module__.split(".")[0] not in _CLIENT_PACKAGES or not callable(close):
            continue
        try:
            close(timeout=5)
        except TypeError:  # a client whose close() takes no timeout
            with contextlib.suppress(Exception):
                close()
        except Exception:  # the session's own servers may be gone: the threads still end
            pass


def _run_python(block: Block, code: str, namespace: dict[str, object], folder: Path,
                servers: Servers, capsys: pytest.CaptureFixture[str]) -> None:
    if "serve_forever()" in code:
        # a server until interrupted: run as a program, asked once, then stopped by Ctrl-C
        port = Session(block.page, [Block(block.page, block.line, block.info, code)]).listen_ports()[0]
        server = Server([sys.executable, "-c", code], cwd=folder, env=shell_env(),
                        what=f"{block.where} (python)", stop_signal=signal.SIGINT,
                        expect_status=None)
        servers.add(port, server)
        wait_listening(port, server)
        assert api_versions_round_trip(port) == 0
        return
    capsys.readouterr()
    exec(compile(code, block.where, "exec"), namespace)  # noqa: S102 - the doc's own code
    printed = capsys.readouterr().out
    for (page, snippet), expected in PRINTS.items():
        if page == block.page and snippet in block.text:
            assert expected in printed, f"{block.where} printed {printed!r}"


def _run_console(block: Block, code: str, folder: Path, servers: Servers) -> None:
    env = shell_env()
    for step in console_steps(Block(block.page, block.line, block.info, code)):
        if any(page == block.page and snippet in step.command for page, snippet in STOOD_IN):
            continue
        where = f"{block.page}:{step.line}"
        if step.is_server:
            listened = Session(block.page, [Block(block.page, step.line, "", step.command)])
            port = listened.listen_ports()[0]
            server = Server(["bash", "-c", step.command], cwd=folder, env=env, what=where)
            servers.add(port, server)
            for shown in step.output or ["..."]:
                line = server.read_line()
                assert output_matches(shown, line, VARIES), f"{where}: printed {line!r}, the doc shows {shown!r}"
            continue
        done = subprocess.run(["bash", "-c", step.command], cwd=folder, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        printed = done.stdout.rstrip("\n").splitlines()
        if step.expects_failure:
            assert done.returncode != 0, f"{where}: `{step.command}` succeeded:\n{done.stdout}"
        else:
            assert done.returncode == 0, f"{where}: `{step.command}` failed ({done.returncode}):\n{done.stdout}"
        if step.output:
            assert len(printed) == len(step.output) and all(
                output_matches(shown, line, VARIES) for shown, line in zip(step.output, printed, strict=True)
            ), f"{where}: `{step.command}` printed\n{done.stdout}\nthe doc shows\n" + "\n".join(step.output)


def _run_script(block: Block, code: str, folder: Path) -> None:
    log = folder / f".script-{block.line}.out"
    with log.open("w") as out:
        process = subprocess.Popen(["bash", "-e", "-c", code], cwd=folder, env=shell_env(),
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = process.wait(600)
        finally:
            try:  # what the script left running in the background
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    assert status == 0, f"{block.where} failed ({status}):\n{log.read_text()[-4000:]}"


# -- measurement commands: parsed by their script, not run ---------------------------------

MEASUREMENTS = [block for block in all_blocks() if _is_measurement(block)]


@pytest.mark.parametrize("block", MEASUREMENTS, ids=[b.where for b in MEASUREMENTS])
def test_measurement_commands_parse(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    for script, argv in bench_commands(block):
        module = importlib.import_module(f"bench.{script}")
        monkeypatch.setattr(sys, "argv", [f"bench/{script}.py", *argv])
        with parse_only(), pytest.raises(ArgumentsParsed):
            if inspect.signature(module.main).parameters:
                module.main(argv)
            else:
                module.main()


def test_a_measurement_with_a_wrong_option_fails_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    module = importlib.import_module("bench.codecs")
    with parse_only(), pytest.raises(SystemExit):
        module.main(["--no-such-option"])


def test_the_output_rules() -> None:
    assert output_matches('{"a": 1, ...}', '{"a": 1, "b": 2}', VARIES)
    assert not output_matches('{"a": 1, ...}', '{"a": 2, "b": 2}', VARIES)
    assert output_matches("implementation: native (x)", "implementation: python", VARIES)
    assert not output_matches("lazyconv 0.2.0", "lazyconv 0.3.0", VARIES)
    assert re.fullmatch(r"\d+", str(free_port()))
