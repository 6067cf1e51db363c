"""The short run of the sanitized differential fuzz (tests/native/fuzz_asan.sh): the kernel
built with AddressSanitizer + UBSan, fed mutated, truncated and lying-length inputs, must
produce no sanitizer report, no crash and no difference from the pure-Python path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("fuzz_asan.sh")


def _have_asan() -> bool:
    if shutil.which("gcc") is None:
        return False
    found = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return Path(found).is_absolute() and Path(found).exists()


@pytest.mark.slow
@pytest.mark.skipif(not _have_asan(), reason="needs gcc with libasan to build the sanitized kernel")
@pytest.mark.skipif(os.environ.get("LAZYCONV_NO_EXTENSIONS") == "1",
                    reason="builds and fuzzes its own sanitized kernel: once, in the compiled pass")
def test_sanitized_differential_fuzz() -> None:
    # 15 s in the suite (> 100k executions even on a loaded 2-core machine); the longer run is
    # the manual command docs/guide/kernel.md names: tests/native/fuzz_asan.sh 240
    done = subprocess.run(
        ["bash", str(SCRIPT), "15"], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    match = re.search(r"(\d+) kernel executions on (\d+) inputs in \d+ s, 0 differences", done.stdout)
    assert match is not None, done.stdout + done.stderr
    # it ran (a busy machine runs fewer: 47,760 in 15 s with the suite on four workers)
    assert int(match.group(1)) > 10_000
