"""``lazyconv gateway`` as a command: it announces its port, answers through the upstream,
stops cleanly on SIGTERM, and refuses bad options and an unreachable cluster in one line."""

from __future__ import annotations

import signal
import socket

import pytest

from tests.serve.conftest import ServerThread
from tests.serve.test_cli import run_cli
from tests.serve.test_robustness import metadata_roundtrip

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
    (["--upstream", "127.0.0.1:9092", "--chunk-size", "1K"], 2, "chunk size must be between"),
    (["--upstream", "127.0.0.1:9092", "--conversion-cache", "lots"], 2,
     "argument --conversion-cache: "),
    (["--upstream", "127.0.0.1:{free}"], 1, "no upstream broker reachable: cannot connect to "
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
