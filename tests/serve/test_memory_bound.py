"""100 concurrent slow consumers of large converted responses: the server's memory stays within
connections × (chunk bound), measured on a real ``lazyconv serve`` process (bench/serve_memory.py)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("psutil", reason="needs the dev extra: pip install -e '.[dev]'")


def load_bench():
    spec = importlib.util.spec_from_file_location("serve_memory", REPO_ROOT / "bench" / "serve_memory.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["serve_memory"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_hundred_slow_consumers_stay_within_connections_times_chunk():
    bench = load_bench()
    chunk = 16384
    result = bench.run(connections=100, chunk_size="16K", partition_bytes=1 << 20, fetch_version=1,
                       batch_records=20)
    assert result["response_bytes_each"] > 1 << 20  # every response was read to its declared end
    # Per connection: one converted chunk (a little larger than its input) while its reader is
    # slow, while a sender converts the next chunk also that chunk's read window (a chunk plus a
    # batch header) and its output, and the connection's own objects; materialising the
    # responses would need the whole 100 MiB.
    bound = result["connections"] * (3 * chunk + 16384)
    assert result["peak_minus_idle"] <= bound, result
    assert result["peak_minus_idle"] < result["materialised_would_be"] / 20
