"""The gateway's memory per connection is one upstream Fetch response plus one converted chunk,
whatever fetch size the client asks for, and the answers fetched ahead of all of them at most
their budget: 30 slow consumers of 8 MiB converted responses, measured
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
    # and, over all connections, the answers fetched ahead for them (their own budget)
    from lazyconv.gateway._fetch_relay import DEFAULT_FETCH_AHEAD_BYTES
    bound = result["connections"] * (upstream + 3 * chunk + 16384) + DEFAULT_FETCH_AHEAD_BYTES
    assert result["peak_minus_idle"] <= bound, result


@pytest.mark.slow
def test_ten_thousand_idle_connections_cost_at_most_64_kib_each_and_are_all_answered_again():
    """10,000 old consumers that each made one small fetch stay open on one gateway at no more
    than 64 KiB of its memory each, and every one is answered when it fetches again. Each costs
    the gateway two descriptors (the client's, its upstream connection): the count is capped
    by the hard file limit, and the assertion message says so when it was."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "gateway_connections.py"
    spec = importlib.util.spec_from_file_location("gateway_connections", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run(10000)
    scaled = (f"{result['connections']} of {result['wanted']} connections (hard file limit "
              f"{result['file_limit']})")
    assert result["connections"] >= min(result["wanted"], 2000), scaled
    assert result["answered_again"] == result["connections"], scaled
    assert result["per_connection"] <= 64 * 1024, (scaled, result)
