"""The pure-Python reference passes the suite too: every test that converts, reads, writes or
validates records.

The suite runs on whichever implementation was imported (the compiled kernel when it was built).
This test runs the other tests once more in a child process with ``LAZYCONV_NO_EXTENSIONS=1``,
so that one ``pytest`` covers both implementations; the differential tests in
``tests/records/test_kernel*.py`` and ``tests/records/test_digest.py`` compare the two directly.
Left out of the second pass: the ``spark``, ``interop`` and ``kafka`` tests (minutes each, with
JVMs and real clients; the code they drive, the per-segment functions, the server and the
gateway, is covered by the other tests in this pass); the tests in ``NOT_IN_THE_PURE_PASS``
below, which run no records code or run it no differently on either implementation (packaging,
code quality, benchmarks, the assignor and the partitioner, the server's and the gateway's
timeouts, admission, signals, descriptor and memory bounds, SASL handshakes), each with its reason; and, when CI
runs them on the pure-Python reference itself (``.ci/run`` names them in
``LAZYCONV_PURE_PASS_TESTS``), the records, protocol, conversion and lazy-send tests.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
THIS_TEST = "tests/house/test_reference_implementation.py::test_pure_python_reference_passes_the_suite"

# (a test file, folder or test of the first pass, why running it again on the reference adds nothing)
NOT_IN_THE_PURE_PASS: tuple[tuple[str, str], ...] = (
    ("tests/house/test_wheel.py", "packaging: the wheel it builds always holds the kernel (the build drops the switch)"),
    ("tests/house/test_quality.py", "code quality: mypy, ruff and the docs build read the sources, not records"),
    ("tests/house/test_self_contained.py", "repository hygiene: scans files for outside paths"),
    ("tests/docs", "documentation: its style, and examples whose library calls the records tests cover"),
    ("tests/house/test_layers.py", "AST scans of the package's imports against docs/layout.md"),
    ("tests/house/test_public_surface.py", "module names and the guides' imports: same on either implementation"),
    ("tests/logdir/test_logdir_layer.py", "AST scans of the package's layering"),
    ("tests/house/test_ci_run.py", ".ci/run's control flow, with stub commands"),
    ("tests/benchmarks/test_bench_codecs.py", "benchmark script smoke test (the conversion it times is tested itself)"),
    ("tests/benchmarks/test_bench_kernel.py", "benchmark script smoke tests (the kernel's fuzz skips itself without it)"),
    ("tests/benchmarks/test_bench_scripts.py", "benchmark scripts' help and layout"),
    ("tests/benchmarks/test_bench_smoke.py", "benchmark script smoke tests (the conversion they time is tested itself)"),
    ("tests/native", "builds and fuzzes its own sanitized kernel; skips itself without the kernel"),
    ("tests/assignment", "the task assignor: no records code"),
    ("tests/partitioner", "the partitioner: no records code beyond the format's size constants"),
    ("tests/serve/test_load.py", "the server's descriptor, memory and event-loop bounds under load"),
    ("tests/serve/test_memory_bound.py", "the server's memory bound under 100 slow consumers, a real "
     "serve process measured by RSS (its conversion is tested on the reference by the records tests)"),
    ("tests/net/test_fair_admission.py", "admission to queued.max.request.bytes"),
    ("tests/net/test_connection_limits.py", "idle, read and write timeouts and request-size limits"),
    ("tests/gateway/test_gateway_memory.py::test_ten_thousand_idle_connections_cost_at_most_64_kib_each_and_are_all_answered_again",
     "descriptors and memory per idle connection (each one's single fetch converts what other gateway tests do)"),
    ("tests/net/test_sasl_properties.py", "SASL frames and handshake orders drawn by hypothesis: no records code"),
    ("tests/net/test_sasl_loop_properties.py", "SASL sequences through the connection loop: no records code"),
    ("tests/serve/test_crash_recovery.py::test_a_signal_stops_serve_cleanly_with_one_line",
     "SIGTERM/SIGINT handling of the process"),
    ("tests/cli/test_serve_cli.py", "the serve command's announcement, options and help"),
    ("tests/cli/test_gateway_cli.py", "the gateway command's announcement, SIGTERM and options"),
)


def _left_out_arguments() -> list[str]:
    """``--deselect`` for a single test, ``--ignore`` for a file or folder."""
    return [f"--deselect={path}" if "::" in path else f"--ignore={path}" for path, _ in NOT_IN_THE_PURE_PASS]


def test_what_the_pure_pass_leaves_out_exists() -> None:
    for path, reason in NOT_IN_THE_PURE_PASS:
        file, _, test = path.partition("::")
        assert (REPO / file).exists(), path
        assert not test or f"def {test}(" in (REPO / file).read_text(), path
        assert reason, path


@pytest.mark.slow
@pytest.mark.timeout(2700)  # the quick suite again, on one worker of a busy machine
def test_pure_python_reference_passes_the_suite(tmp_path: Path) -> None:
    env = {**os.environ, "LAZYCONV_NO_EXTENSIONS": "1"}
    env.pop("LAZYCONV_EXPECT_NATIVE", None)
    env.pop("CI", None)  # the child must not insist on the kernel
    run_by_ci = os.environ.get("LAZYCONV_PURE_PASS_TESTS", "").split()  # .ci/run's own pure pass
    ignored = [f"--ignore={path}" for pattern in run_by_ci for path in sorted(glob.glob(pattern, root_dir=REPO))]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not spark and not interop and not kafka",
         "--deselect", THIS_TEST, *_left_out_arguments(), *ignored, f"--basetemp={tmp_path / 'pure'}", "tests"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500,
    )
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and not re.search(r"\b\d+ failed", summary), tail  # "1 xfailed" is fine
