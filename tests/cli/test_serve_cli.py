"""``lazyconv serve`` as a command: it starts, announces its port, answers, and rejects bad options."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.net.test_robustness import metadata_roundtrip

pytestmark = pytest.mark.slow  # each test starts Python processes


def run_cli(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen([sys.executable, "-m", "lazyconv._cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_serve_announces_each_listener_and_answers(tmp_path):
    (tmp_path / "t-0").mkdir()
    proc = run_cli("serve", str(tmp_path), "--port", "0", "--listener", "0,delay=5",
                   "--topic-config", "t:compression.type=zstd", "--chunk-size", "16K")
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        ports = [int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1]) for line in lines]
        assert "as node 0" in lines[0] and "as node 1" in lines[1]
        assert all(metadata_roundtrip(port) for port in ports)
    finally:
        proc.terminate()
        proc.wait(10)


def exit_status(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("lazyconv serve kept running despite a bad argument") from None
    return proc.returncode, err


def test_serve_rejects_bad_arguments(tmp_path):
    status, err = exit_status(run_cli("serve", str(tmp_path / "nope"), "--port", "0"))
    assert status == 2 and "No such file or directory" in err  # usage mistakes exit with 2
    status, err = exit_status(run_cli("serve", str(tmp_path), "--topic-config", "t:no.such=1", "--port", "0"))
    assert status == 2 and "unknown key" in err
    # a misspelt codec was taken silently, and the zstd gate it meant to set was never applied
    status, err = exit_status(run_cli("serve", str(tmp_path), "--topic-config", "t:compression.type=ztsd",
                                      "--port", "0"))
    assert status == 2 and "compression.type must be one of" in err
    status, err = exit_status(run_cli("serve", str(tmp_path), "--chunk-size", "1K", "--port", "0"))
    assert status == 2 and "--chunk-size: 1K is outside 16K..1M" in err  # the lazy send's bounds
    status, err = exit_status(run_cli("serve", str(tmp_path), "--conversion-cache", "lots", "--port", "0"))
    assert status == 2 and "not a size" in err
    status, err = exit_status(run_cli("serve", str(tmp_path), "--group-min-session-timeout-ms", "9000",
                                      "--group-max-session-timeout-ms", "8000", "--port", "0"))
    assert status == 2 and "--group-max-session-timeout-ms: 8000 is below" in err


def test_serve_help_explains_every_option():
    out = subprocess.run([sys.executable, "-m", "lazyconv._cli", "serve", "--help"], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), check=True).stdout
    for option in ("--host", "--port", "--chunk-size", "--no-downconversion", "--topic-config",
                   "--listener", "--produce-delay-ms", "--max-fetch-version", "--max-request-size",
                   "--group-initial-rebalance-delay-ms", "--group-min-session-timeout-ms",
                   "--segment-bytes", "--index-interval-bytes", "--flush-messages", "--flush-ms",
                   "--conversion-cache", "--sender-processes"):
        assert option in out
    # the durability contract is part of the help
    flat = " ".join(out.split())
    assert "kill -9 of this process loses nothing acknowledged" in flat
    assert "power loss" in flat and "Group membership is kept in memory only" in flat
    assert "SIGTERM" in flat


def _port_of(line: str) -> int:
    return int(line.split(" on ")[1].split()[0].rsplit(":", 1)[1])


def test_serve_converts_in_its_sender_processes_and_stops_them(tmp_path):
    """By default ``serve`` writes Fetch v0-3 responses in one sender process per core, the
    same bytes as with ``--sender-processes 0``; SIGTERM stops the senders with the server,
    and a server killed outright leaves no sender behind."""
    psutil = pytest.importorskip("psutil", reason="needs the dev extra: pip install -e '.[dev]'")
    import signal

    from lazyconv.net._sender_pool import default_sender_processes
    from tests.net.test_conversion_workers import fetched, read_response
    from tests.net.test_robustness import big_log, fetch_frame

    count = big_log(tmp_path, topic="big", batches=20, records=100, value=600)
    requests = [fetch_frame(v, "big", correlation_id=v + 1) for v in (0, 1, 2, 3, 4)]

    def answers(proc: subprocess.Popen) -> list[bytes]:
        import socket

        with socket.create_connection(("127.0.0.1", _port_of(proc.stdout.readline())), timeout=20) as s:
            frames = []
            for request in requests:
                s.sendall(request)
                frames.append(read_response(s)[1])
            return frames

    threads = run_cli("serve", str(tmp_path), "--port", "0", "--sender-processes", "0")
    try:
        expected = answers(threads)
        assert psutil.Process(threads.pid).children() == []
    finally:
        threads.terminate()
        threads.wait(10)
    topic, magic, offsets = fetched(expected[1], 1)  # converted (cut at the stored size)
    assert (topic, magic) == ("big", 0) and offsets == list(range(len(offsets))) and len(offsets) > count * 3 // 4

    proc = run_cli("serve", str(tmp_path), "--port", "0")
    try:
        assert answers(proc) == expected
        senders = psutil.Process(proc.pid).children()
        assert len(senders) == default_sender_processes()
        assert all("lazyconv.net._sender" in " ".join(s.cmdline()) for s in senders)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "stopped (SIGTERM)" in err
        _, alive = psutil.wait_procs(senders, timeout=10)  # (their exit codes go to serve)
        assert alive == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    proc = run_cli("serve", str(tmp_path), "--port", "0")
    try:
        answers(proc)
        senders = psutil.Process(proc.pid).children()
        assert senders
        proc.kill()  # kill -9: the senders see their control socket close and exit
        proc.wait(10)
        _, alive = psutil.wait_procs(senders, timeout=10)
        assert alive == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("option,value", [("--produce-delay-ms", "-5"),
                                          ("--max-decompressed-batch-bytes", "0"),
                                          ("--advertised-host", " ")])
def test_serve_refuses_values_that_make_no_server(tmp_path, capsys, option, value) -> None:
    """A negative delay, a bound that refuses every compressed batch, a broker advertised with
    no host: each was taken as given (found by a review); now a usage error before any start."""
    from lazyconv._cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tmp_path), "--port", "0", option, value])
    assert stopped.value.code == 2
    assert option in capsys.readouterr().err
