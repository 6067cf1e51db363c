"""The benchmark scripts in ``bench/`` (developer tools run from a checkout, not part of the
package): each documents its options, and the kernel fuzzer refuses to run without the kernel
with one error line."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the benchmarks moved out of the package (lazyconv/benchmarks/) into bench/
SCRIPTS = ["peers", "lazy_sink", "chunk_sizes", "memory", "codecs", "decode", "lz4_overhead",
           "fuzz", "fuzz_kernel", "serve_reads", "message_codec", "gateway_profile",
           "relay_floor", "fetch_sessions", "snappy_compress"]


def test_the_package_holds_no_benchmarks() -> None:
    assert not (REPO / "lazyconv" / "benchmarks").exists()
    assert not (REPO / "lazyconv" / "commands" / "bench.py").exists()
    for name in SCRIPTS:
        assert (REPO / "bench" / f"{name}.py").is_file(), name


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_help_names_itself_and_explains_its_options(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module(f"bench.{name}")
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: bench/{name}.py")
    blocks: list[list[str]] = []
    for line in out.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            blocks.append([line.strip()])
        elif line.startswith("   ") and blocks:
            blocks[-1].append(line.strip())
    assert len(blocks) >= 3
    for block in blocks:
        # the help text follows the option on its line, or on the next lines
        assert len(re.split(r"\s{2,}", block[0])) > 1 or len(block) > 1, block


def test_a_script_runs_from_the_checkout() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "decode.py"), "--help"],
                          capture_output=True, text=True, cwd=REPO / "bench", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: bench/decode.py")


def test_fuzz_kernel_without_the_kernel_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lazyconv.records
    from bench import fuzz_kernel

    monkeypatch.setattr(lazyconv.records, "IMPLEMENTATION", "python")
    assert fuzz_kernel.main(["--seconds", "0.1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench/fuzz_kernel.py: error:")
    assert "compiled kernel" in lines[0]


def test_the_message_codec_benchmark_times_codecs_that_agree(capsys: pytest.CaptureFixture[str]) -> None:
    """Each case of bench/message_codec.py gives the walker's result by the generated codec."""
    module = importlib.import_module("bench.message_codec")
    assert module.main(["--messages", "20", "--repeat", "1", "--check"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| Fetch")]
    assert len(rows) == 4


def test_the_profile_summary_counts_work_and_leaves_waiting_threads_out(tmp_path: Path) -> None:
    from bench.gateway_profile import summarize

    collapsed = tmp_path / "gateway.collapsed"
    collapsed.write_text(
        "process 1;main (x.py:1);write_to_channel (lazyconv/_send.py:60) 30\n"
        "process 1;main (x.py:1);convert_plain_chunk (lazyconv/conversion/_to_legacy.py:114) 10\n"
        "process 1;t (threading.py:1);_worker (concurrent/futures/thread.py:81) 50\n"
        "process 1;main (x.py:1);FrameReader.next_frame (lazyconv/protocol/_connection.py:135) 10\n")
    summary = summarize(collapsed)
    assert summary.startswith("50 samples of work (and 50 of threads waiting")
    assert "| socket I/O (send, recv) | 60.0 % |" in summary
    assert "| down-conversion (kernel and its Python driver) | 20.0 % |" in summary
    assert "| request and response framing | 20.0 % |" in summary
    assert "_worker" not in summary


def test_the_perf_summary_groups_libraries_and_names_the_symbols(tmp_path: Path) -> None:
    """``--sampler perf``: ``perf report``'s shares by library become the summary's rows (a
    stand-in perf prints what the real one does for ``--sort dso`` and ``--sort dso,sym``)."""
    from bench.gateway_profile import perf_group, summarize_perf

    fake = tmp_path / "perf"
    fake.write_text("""#!/bin/sh
case "$*" in
  *"dso,sym"*) printf '# Overhead  Shared Object  Symbol\\n    17.41%%  libpython3.11.so.1.0  [.] _PyEval_EvalFrameDefault\\n     8.59%%  [kernel.kallsyms]  [k] _copy_to_iter\\n' ;;
  *) printf '# Overhead  Shared Object\\n#\\n    40.50%%  libpython3.11.so.1.0\\n    33.70%%  [kernel.kallsyms]\\n    14.44%%  libc.so.6\\n    10.23%%  _ckernel.cpython-311-x86_64-linux-gnu.so\\n     0.67%%  _struct.cpython-311-x86_64-linux-gnu.so\\n' ;;
esac
""")
    fake.chmod(0o755)
    summary = summarize_perf(str(fake), tmp_path / "x.perf.data", (12.0, 6.0), 20.0)
    assert summary.startswith("the gateway used 12.00 s of user and 6.00 s of system CPU in the "
                              "20.0 s sampled (0.90 cores)")
    assert "| the interpreter (libpython: bytecode, objects, asyncio in Python) | 40.5 % |" in summary
    assert "| the OS kernel (socket copies, TCP, scheduling, system calls) | 33.7 % |" in summary
    assert "| libc (memcpy, memset, malloc) | 14.4 % |" in summary
    assert "| lazyconv's compiled kernel (conversion, CRC) | 10.2 % |" in summary
    assert "| other extension modules | 0.7 % |" in summary
    assert perf_group("cramjam.cpython-311-x86_64-linux-gnu.so") == "compression libraries"
    assert perf_group("_block.cpython-311-x86_64-linux-gnu.so") == "compression libraries"
    assert perf_group("zlib.cpython-311-x86_64-linux-gnu.so") == "compression libraries"
    assert perf_group("[nf_conntrack]").startswith("the OS kernel")
    assert perf_group("[unknown]") == "other extension modules"
    assert "| `_PyEval_EvalFrameDefault` | libpython3.11.so.1.0 | 17.4 % |" in summary
    assert "| `_copy_to_iter` | [kernel.kallsyms] | 8.6 % |" in summary


def test_the_relay_floor_moves_every_byte_both_ways(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Each stream's bytes reach its sink whole through a copying and a splicing relay (the
    script raises when a sink received fewer), and each side's CPU is reported."""
    import json

    from bench import relay_floor

    modes = "copy,splice" if hasattr(__import__("os"), "splice") else "copy"
    out_json = tmp_path / "floor.json"
    assert relay_floor.main(["--size", "3M", "--file-size", "1M", "--streams", "1,2",
                             "--buffer", "64K", "--rounds", "1", "--modes", modes,
                             "--json", str(out_json)]) == 0
    runs = json.loads(out_json.read_text())["runs"]
    assert {(r["mode"], r["streams"]) for r in runs} == {
        (m, s) for m in modes.split(",") for s in (1, 2)}
    for run in runs:  # 3 MiB per stream: the 1 MiB file sent three times over
        assert run["bytes"] == run["streams"] * 3 * (1 << 20)
        assert {"relay_s_per_gib", "source_s_per_gib", "sink_s_per_gib"} <= run.keys()
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert "relay CPU s/GiB" in table[0] and len(table) == 1 + len(runs)  # one round: a row a run


@pytest.mark.parametrize("args", [["--modes", "copy,teleport"], ["--modes", ","],
                                  ["--streams", "x"], ["--streams", "0"], ["--buffer", "1K"]])
def test_the_relay_floor_refuses_bad_options_in_one_line(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from bench import relay_floor

    with pytest.raises(SystemExit) as exit_:
        relay_floor.main(args)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("bench/relay_floor.py: error: ")


def test_a_relay_floor_source_that_dies_fails_the_run_instead_of_hanging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import socket

    from bench import relay_floor

    def dying_source(port, path, size, go, out) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        go.wait(relay_floor.START_TIMEOUT_S)
        sock.sendall(b"x" * 1000)
        sock.close()
        os._exit(0)  # no report: as a source killed mid-run

    monkeypatch.setattr(relay_floor, "_source", dying_source)
    path = tmp_path / "source.bin"
    path.write_bytes(b"y" * (1 << 20))
    with pytest.raises(RuntimeError, match="source ended without reporting"):
        relay_floor.one_run("copy", 1, 1 << 20, 65536, str(path))


def test_fetch_sessions_counts_records_as_the_other_benchmarks_do() -> None:
    """MiB/s and CPU per GiB are of records, key + value as produced (1,040 bytes each), as in
    the gateway's and serve's benchmarks, not of their values alone."""
    from bench import fetch_sessions

    read = fetch_sessions.Read("stream", "full", records=(1 << 30) // 1024, seconds=2.0,
                               broker_cpu=1.04)
    assert read.payload_gib == pytest.approx(1040 / 1024)
    assert read.mib_s == pytest.approx(1040 / 2)
    assert read.broker_cpu / read.payload_gib == pytest.approx(1.024)
