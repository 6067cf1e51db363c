"""The pure-Python reference passes the record, conversion, lazy-send and golden tests too.

The rest of the suite runs on whichever implementation was imported (the compiled kernel when it
was built). This test runs the tests that exercise the hot path once more in a child process with
``LAZYCONV_NO_EXTENSIONS=1``, so that one ``pytest`` covers both implementations; the differential
tests in ``tests/records/test_kernel*.py`` compare the two directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

HOT_PATH_TESTS = [
    "tests/records",
    "tests/test_convert.py",
    "tests/test_convert_fused.py",
    "tests/test_convert_negative_offsets.py",
    "tests/test_golden.py",
    "tests/test_lazy.py",
    "tests/test_lazy_corrupt.py",
    "tests/test_lazy_properties.py",
    "tests/test_lazy_memory.py",
    "tests/test_send.py",
]


@pytest.mark.slow
def test_pure_python_reference_passes_the_hot_path_tests() -> None:
    env = {**os.environ, "LAZYCONV_NO_EXTENSIONS": "1"}
    env.pop("LAZYCONV_EXPECT_NATIVE", None)
    env.pop("CI", None)  # the child must not insist on the kernel
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not spark and not interop",
         *HOT_PATH_TESTS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200,
    )
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, tail
