"""The gateway's memory per connection is one upstream Fetch response plus one converted chunk,
whatever fetch size the client asks for: 30 slow consumers of 8 MiB converted responses, measured
on real ``lazyconv serve`` + ``lazyconv gateway`` processes (bench/serve_memory.py)."""

from __future__ import annotations

import pytest

from tests.serve.test_memory_bound import load_bench

pytest.importorskip("psutil", reason="needs the dev extra: pip install -e '.[dev]'")


@pytest.mark.slow
def test_slow_consumers_through_the_gateway_stay_within_one_upstream_response_and_a_chunk():
    bench = load_bench()
    chunk, upstream = 16384, 1 << 20
    result = bench.run(connections=30, chunk_size="16K", partition_bytes=8 << 20,
                       fetch_version=1, batch_records=20, through_gateway=True,
                       upstream_fetch_max="1M")
    assert result["measured"] == "gateway"
    # each client asked for the whole 8 MiB partition and got at most one upstream response
    assert result["response_bytes_each"] <= upstream + 64 * 1024
    bound = result["connections"] * (upstream + 3 * chunk + 16384)
    assert result["peak_minus_idle"] <= bound, result
