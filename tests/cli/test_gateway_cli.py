"""``lazyconv gateway`` as a command: it announces its port, answers through the upstream,
stops cleanly on SIGTERM, and refuses bad options and an unreachable cluster in one line."""

from __future__ import annotations

import signal
import socket
import subprocess

import pytest

from tests.cli.test_serve_cli import run_cli
from tests.net.test_robustness import metadata_roundtrip
from tests.server_thread import ServerThread

pytestmark = pytest.mark.slow  # each test starts a Python process


def test_gateway_announces_answers_and_stops_on_sigterm(served_fixtures) -> None:
    upstream = ServerThread(served_fixtures)
    proc = run_cli("gateway", "--upstream", upstream.bootstrap, "--port", "0")
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"gateway to {upstream.bootstrap} on 127.0.0.1:"), line
        port = int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])
        assert metadata_roundtrip(port)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0
        assert err.strip().splitlines()[-1] == "gateway stopped (SIGTERM)"
    finally:
        if proc.poll() is None:
            proc.kill()
        upstream.stop()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,status,message", [
    (["--upstream", "nohostport"], 2, "upstream address 'nohostport' is not HOST:PORT"),
    (["--upstream", "127.0.0.1:9092", "--chunk-size", "1K"], 2,
     "argument --chunk-size: 1K is outside 16K..1M"),
    (["--upstream", "127.0.0.1:9092", "--conversion-cache", "lots"], 2,
     "argument --conversion-cache: "),
    (["--upstream", "127.0.0.1:{free}", "--client-id-prefix", "p" * 40000], 2,
     "argument --client-id-prefix: the prefix is 40000 bytes of UTF-8, longer than a client id"),
    # a cluster that cannot be reached is what the environment cannot give (docs/guide/cli.md),
    # exit 2 as serve's port that cannot be bound; 1 is bad data
    (["--upstream", "127.0.0.1:{free}"], 2, "no upstream broker reachable: cannot connect to "
                                             "upstream broker 127.0.0.1:{free}"),
])
def test_bad_options_and_an_unreachable_cluster_are_one_line(args, status, message) -> None:
    free = _unused_port()
    args = [a.format(free=free) for a in args]
    proc = run_cli("gateway", *args, "--port", "0")
    _out, err = proc.communicate(timeout=30)
    lines = err.strip().splitlines()
    assert proc.returncode == status, err
    assert len(lines) == 1 and lines[0].startswith("lazyconv gateway: error: "), err
    assert message.format(free=free) in lines[0]


def test_check_config_masks_secrets_and_reads_the_stores(tmp_path, monkeypatch) -> None:
    from tests.net.secure_support import make_material

    monkeypatch.setenv("UPSTREAM_PW", "up-secret-pw")
    material = make_material(tmp_path / "tls")
    config = tmp_path / "gateway.properties"
    config.write_text(
        "listeners=SASL_SSL://127.0.0.1:9094\n"
        f"ssl.keystore.location={material.server_keystore_pem}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_alice="gw-alice-pw";\n'
        f"gateway.scram.credentials.file={material.scram_file}\n")
    upstream = tmp_path / "upstream.properties"
    upstream.write_text(
        "bootstrap.servers=broker1:9094\nsecurity.protocol=SASL_SSL\n"
        f"ssl.truststore.location={material.ca_pem}\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="gateway" password="${env:UPSTREAM_PW}";\n')
    proc = run_cli("gateway", "--config", str(config), "--upstream-config", str(upstream),
                   "--check-config")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "gw-alice-pw" not in out + err and "up-secret-pw" not in out + err
    assert "[hidden]" in out and "bootstrap.servers=broker1:9094" in out
    assert "SASL_SSL 127.0.0.1:9094 PLAIN,SCRAM-SHA-512" in out
    # a key store that cannot be read is found without connecting anywhere
    config.write_text(config.read_text().replace(str(material.server_keystore_pem),
                                                 str(tmp_path / "missing.pem")))
    proc = run_cli("gateway", "--config", str(config), "--upstream-config", str(upstream),
                   "--check-config")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1
    assert "missing.pem: no such file" in err


def test_scram_credentials_sub_command(tmp_path) -> None:
    import json

    file = tmp_path / "scram.json"
    proc = run_cli("gateway", "scram-credentials", "add", str(file), "--user", "alice",
                   "--mechanism", "SCRAM-SHA-256", "--mechanism", "SCRAM-SHA-512",
                   stdin=subprocess.PIPE)
    out, err = proc.communicate("alice-pw-123\n", timeout=60)
    assert proc.returncode == 0, err
    assert "added alice" in out and "alice-pw-123" not in out + err + file.read_text()
    assert file.stat().st_mode & 0o777 == 0o600
    assert set(json.loads(file.read_text())["users"]["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    proc = run_cli("gateway", "scram-credentials", "list", str(file))
    out, _ = proc.communicate(timeout=60)
    assert out.splitlines() == ["alice\tSCRAM-SHA-256\titerations=4096",
                                "alice\tSCRAM-SHA-512\titerations=4096"]
    proc = run_cli("gateway", "scram-credentials", "remove", str(file), "--user", "alice")
    assert proc.communicate(timeout=60)[0].startswith("removed alice")
    assert proc.returncode == 0


def test_an_upstream_certificate_that_does_not_verify_stops_the_gateway(tmp_path) -> None:
    """No silent fallback: a broker whose certificate the trust store does not verify stops
    the gateway at start, in one line."""
    from tests.net.secure_support import listener_specs, make_material

    broker_material = make_material(tmp_path / "broker-ca")  # the CA the broker's cert has
    trusted = make_material(tmp_path / "other-ca")  # the one the gateway trusts
    (tmp_path / "logdir").mkdir()
    ssl_spec = listener_specs(broker_material)[2]  # SSL (client auth required: unreached)
    upstream = ServerThread(tmp_path / "logdir", specs=[ssl_spec])
    try:
        config = tmp_path / "upstream.properties"
        config.write_text(f"bootstrap.servers=127.0.0.1:{upstream.port}\nsecurity.protocol=SSL\n"
                          f"ssl.truststore.location={trusted.ca_pem}\n")
        proc = run_cli("gateway", "--upstream-config", str(config), "--port", "0")
        _out, err = proc.communicate(timeout=60)
    finally:
        upstream.stop()
    lines = err.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, err  # a cluster it cannot use
    assert "certificate does not verify" in lines[0]


def test_sighup_reopens_the_log_and_reloads_the_users(served_fixtures, tmp_path) -> None:
    """logrotate moves the log file and a user's password changes in --config: after SIGHUP the
    gateway writes to a new file at the old path, new connections check the new password, and
    the process goes on (then stops cleanly on SIGTERM)."""
    import time

    from tests.net.secure_support import RawClient

    port = _unused_port()
    config, log_file = tmp_path / "gateway.properties", tmp_path / "gateway.log"

    def write(password: str) -> None:
        config.write_text(
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\nsasl.enabled.mechanisms=PLAIN\n"
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security."
            f'plain.PlainLoginModule required user_alice="{password}";\n'
            "gateway.identity=gateway\n")

    def logs_in(password: str) -> bool:
        with RawClient(port) as client:
            return client.authenticate("PLAIN", "alice", password)

    write("first-secret")
    upstream = ServerThread(served_fixtures)
    proc = run_cli("gateway", "--upstream", upstream.bootstrap, "--config", str(config),
                   "--log-file", str(log_file))
    try:
        assert proc.stdout.readline().startswith("gateway to ")
        assert logs_in("first-secret")
        log_file.rename(tmp_path / "gateway.log.1")
        write("second-secret")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                log_file.exists() and "reloaded (2 hook(s))" in log_file.read_text()):
            time.sleep(0.05)
        text = log_file.read_text()
        assert "reloaded the security of 1 listener(s)" in text and "reloaded (2 hook(s))" in text
        assert "listening on port" in (tmp_path / "gateway.log.1").read_text()
        assert not logs_in("first-secret")
        assert logs_in("second-secret")
        every_line = log_file.read_text() + (tmp_path / "gateway.log.1").read_text()
        assert "first-secret" not in every_line and "second-secret" not in every_line
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        upstream.stop()


def test_a_sighup_during_start_up_is_kept_for_after_it(served_fixtures) -> None:
    """SIGHUP's default action ends a process, and the gateway installed its reload handler only
    once it had reached the cluster: a reload sent while it started (a service manager's, a
    certificate renewal's) killed it. The gateway is held in its start-up by a first bootstrap
    broker that accepts and never answers; the SIGHUP sent then is kept and the reload done
    once it has started (found by a review)."""
    upstream = ServerThread(served_fixtures)
    silent = socket.create_server(("127.0.0.1", 0))
    silent.settimeout(30)
    proc = run_cli("gateway", "--upstream",
                   f"127.0.0.1:{silent.getsockname()[1]},{upstream.bootstrap}", "--port", "0")
    try:
        held, _ = silent.accept()  # the gateway is reaching the cluster: not started yet
        proc.send_signal(signal.SIGHUP)
        held.close()  # the first broker fails: the second one is asked
        line = proc.stdout.readline()
        assert line.startswith("gateway to "), (line, proc.wait(timeout=10))
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "reloaded (0 hook(s))" in err
        assert err.strip().splitlines()[-1] == "gateway stopped (SIGTERM)"
    finally:
        if proc.poll() is None:
            proc.kill()
        silent.close()
        upstream.stop()


# A child that runs the CLI as `python -m lazyconv._cli` does, but stops when the CLI imports
# the module named in LAZYCONV_TEST_PAUSE_AT (the sub-commands are imported while the command
# line is parsed): it prints "paused" and goes on when a line comes on its stdin.
_PAUSING_CLI = """
import importlib.abc, os, runpy, sys

class Pause(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["LAZYCONV_TEST_PAUSE_AT"] and self in sys.meta_path:
            sys.meta_path.remove(self)
            print("paused", flush=True)
            sys.stdin.readline()
        return None

sys.meta_path.insert(0, Pause())
runpy.run_module("lazyconv._cli", run_name="__main__", alter_sys=True)
"""


def _default_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _run_pausing_cli(*args: str) -> subprocess.Popen:
    import os
    import sys

    from tests.cli.test_serve_cli import REPO_ROOT

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT),
               LAZYCONV_TEST_PAUSE_AT="lazyconv._commands.gateway")
    # SIGHUP's default action in the child, whatever the test run inherited (under nohup it is
    # ignored, and a command that gives SIGHUP back would rightly keep ignoring it)
    proc = subprocess.Popen([sys.executable, "-c", _PAUSING_CLI, *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sighup)
    assert proc.stdout.readline() == "paused\n", proc.communicate(timeout=20)
    return proc


def test_sighups_from_the_cli_s_start_on_never_end_the_gateway(served_fixtures) -> None:
    """The gateway counted a SIGHUP only from its own command's start: one sent while the
    interpreter imported the sub-commands and parsed the command line (a service manager's
    ExecReload right after the start) ended the process (found by a review). The child is
    stopped there, gets SIGHUPs, then starts with a SIGHUP every 10 ms until it announces
    itself: it serves, did one reload for the early ones, and stops on SIGTERM with status 0."""
    import threading
    import time

    upstream = ServerThread(served_fixtures)
    proc = _run_pausing_cli("gateway", "--upstream", upstream.bootstrap, "--port", "0")
    try:
        for _ in range(3):
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate(timeout=20)
        announced: list[str] = []
        reader = threading.Thread(target=lambda: announced.append(proc.stdout.readline()))
        reader.start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        sent = 0
        while reader.is_alive() and proc.poll() is None:
            proc.send_signal(signal.SIGHUP)
            sent += 1
            time.sleep(0.01)
        reader.join(20)
        assert proc.poll() is None and announced[0].startswith("gateway to "), (
            announced, proc.communicate(timeout=20))
        assert sent > 3  # SIGHUPs came all along its start
        port = int(announced[0].split(" on ")[1].split()[0].rsplit(":", 1)[1])
        assert metadata_roundtrip(port)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "a SIGHUP came while the gateway started: reloading now" in err
        assert err.strip().splitlines()[-1] == "gateway stopped (SIGTERM)"
    finally:
        if proc.poll() is None:
            proc.kill()
        upstream.stop()


def test_a_sighup_while_another_command_starts_still_ends_it(tmp_path) -> None:
    """Only a command that reloads on SIGHUP keeps one sent while it starts: for any other, the
    SIGHUP the CLI counted meanwhile is raised again once the command line is parsed, and
    ends the process as SIGHUP always did (a dump reading a terminal that hung up)."""
    (tmp_path / "t-0").mkdir()
    proc = _run_pausing_cli("dump", str(tmp_path / "t-0"))
    proc.send_signal(signal.SIGHUP)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGHUP, (out, err)
    assert out == ""


def test_a_notify_unit_is_told_when_the_gateway_is_ready_and_when_it_stops(
        served_fixtures, tmp_path, monkeypatch) -> None:
    """systemd runs ExecReload (kill -HUP) on a Type=simple unit from its start on, also while
    the interpreter starts, before anything of lazyconv can keep SIGHUP; a Type=notify unit is
    reloaded only once the service said READY=1. The gateway says it on $NOTIFY_SOCKET once it
    listens (nothing before), and STOPPING=1 when SIGTERM drains it."""
    import time

    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(20)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    upstream = ServerThread(served_fixtures)
    proc = run_cli("gateway", "--upstream", upstream.bootstrap, "--port", "0")
    try:
        started = time.monotonic()
        said = notify.recv(4096)
        line = proc.stdout.readline()  # printed before it said READY=1
        assert said == b"READY=1" and line.startswith("gateway to "), (said, line)
        assert time.monotonic() - started < 20
        port = int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])
        assert metadata_roundtrip(port)
        proc.send_signal(signal.SIGTERM)
        assert notify.recv(4096) == b"STOPPING=1"
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
        upstream.stop()


def test_a_password_typed_at_a_terminal_is_not_shown(tmp_path) -> None:
    """`scram-credentials add` reading the password from a terminal asks without echo (it
    showed what was typed, found by a review)."""
    import os
    import pty
    import select
    import sys

    from tests.cli.test_serve_cli import REPO_ROOT

    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lazyconv._cli", "gateway", "scram-credentials", "add",
         str(tmp_path / "scram.json"), "--user", "carol"],
        stdin=child_fd, stdout=child_fd, stderr=child_fd,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    os.close(child_fd)
    shown = b""

    def read_for(seconds: float, until: bytes | None = None) -> None:
        nonlocal shown
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (until and until in shown):
            ready, _, _ = select.select([main_fd], [], [], 0.1)
            if ready:
                try:
                    shown += os.read(main_fd, 1024)
                except OSError:
                    return

    import time

    read_for(30, until=b"Password")
    os.write(main_fd, b"hunter2secret\n")
    proc.wait(30)
    read_for(0.5)
    os.close(main_fd)
    assert proc.returncode == 0, shown
    assert b"Password" in shown and b"hunter2secret" not in shown
    assert "carol" in (tmp_path / "scram.json").read_text()
