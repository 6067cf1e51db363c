"""Fetch-ahead (lazyconv.gateway._fetch_ahead): a sequential consumer's next range is fetched
upstream while its answer is written, and its next fetch is answered from memory with exactly
what the upstream would have answered; a client that asks from inside the last batch (a cut
answer) gets that batch again first; a seek drops what was fetched ahead."""

from __future__ import annotations

import time

import pytest

from lazyconv.gateway._fetch_ahead import AheadBudget, FetchAhead, last_complete_batch
from lazyconv.protocol import _fetch as fetch
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder
from tests.gateway.conftest import GatewayThread
from tests.serve.wire import WireClient
from tests.server_thread import ServerThread


def _v2(base: int, count: int, compression: Compression = Compression.NONE) -> bytes:
    builder = RecordsBuilder(2, compression, base_offset=base)
    for i in range(count):
        builder.append(base + i, 1000 + i, b"k%d" % i, b"v" * 50)
    return builder.build()


def _v1(offset: int) -> bytes:
    builder = RecordsBuilder(1, Compression.NONE, base_offset=offset)
    builder.append(offset, 1000, b"k", b"v")
    return builder.build()


def test_the_last_complete_batch_is_found_from_headers_alone():
    data = _v2(0, 3) + _v2(3, 5, Compression.GZIP) + _v2(8, 2)
    position, size, next_offset = last_complete_batch(data)
    assert (position, next_offset) == (len(data) - size, 10)
    assert data[position:position + size] == _v2(8, 2)
    assert last_complete_batch(data[:-1])[2] == 8  # a partial last batch is not complete
    assert last_complete_batch(b"") is None and last_complete_batch(data[:20]) is None
    legacy = _v1(7) + _v1(9)
    assert last_complete_batch(legacy)[2] == 10


def test_entries_are_bounded_and_matched_by_offset_and_shape():
    async def scenario() -> None:
        budget = AheadBudget(1000)
        ahead = FetchAhead(budget, max_partitions_per_connection=2)
        first = ahead.start("t", 0, 10, (500, 0), b"x" * 100, 7, 500)
        assert first is not None and budget.used == 600
        assert ahead.start("t", 1, 10, (500, 0), b"", 0, 500) is None  # the budget is spent
        assert ahead.take("t", 0, 10, (400, 0)) is None  # another byte limit: dropped
        assert budget.used == 0 and len(ahead) == 0
        entry = ahead.start("t", 0, 10, (500, 0), b"x" * 100, 7, 500)
        assert ahead.take("t", 0, 8, (500, 0)) is not None  # inside the tail: a hit
        ahead.release(entry)
        entry = ahead.start("t", 0, 10, (500, 0), b"x" * 100, 7, 500)
        assert ahead.take("t", 0, 3, (500, 0)) is None  # before the tail: a seek
        assert budget.used == 0 and (ahead.hits, ahead.misses) == (1, 2)
        ahead.close()

    import asyncio
    asyncio.run(scenario())


def test_a_negative_size_reserves_nothing():
    """A client's negative partition_max_bytes must not lift the bound every connection shares
    (found by a review: the budget went to -2**31 while the entry was held)."""
    budget = AheadBudget(1000)
    assert not budget.reserve(-(1 << 31)) and budget.used == 0
    assert budget.reserve(1000) and not budget.reserve(1)


def test_an_entry_taken_by_a_fetch_gets_its_answer_when_its_sibling_is_dropped():
    # Two partitions asked ahead in one upstream fetch; the client's next fetch takes the first
    # (a hit) and seeks on the second (dropped). The shared ask must go on for the first: it
    # was cancelled once no entry *left in the table* waited for it, and the fetch that took
    # the first waited for an answer that never came.
    import asyncio

    async def scenario() -> None:
        ahead = FetchAhead(AheadBudget(10_000))
        entries = [ahead.start("t", p, 10, (500, 0), b"", 0, 500) for p in (0, 1)]
        released = asyncio.Event()

        async def fetch(asked: list) -> dict:
            await released.wait()
            return {("t", e.partition): {"error_code": 0, "records": b"r"} for e in asked}

        ahead.run(entries, fetch)
        taken = ahead.take("t", 0, 10, (500, 0))
        assert taken is not None
        assert ahead.take("t", 1, 99, (500, 0)) is None  # a seek: its entry is dropped
        released.set()
        answer = await asyncio.wait_for(taken[1], 5)
        assert answer == {"error_code": 0, "records": b"r"}
        ahead.close()

    asyncio.run(scenario())


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_an_answer_fetched_ahead_is_freed_once_used_without_the_cyclic_collector():
    # Each answer holds a whole upstream response. The entries of one ask used to share a list
    # of themselves: a reference cycle, so every used answer waited for the cyclic collector,
    # and 8 consumers left the gateway 100+ MiB above idle.
    import asyncio
    import gc
    import weakref

    class Records:  # stands in for an upstream response's records (which cannot be weakly referenced)
        pass

    freed: list[weakref.ref[Records]] = []

    async def scenario() -> None:
        ahead = FetchAhead(AheadBudget(10_000))
        entries = [ahead.start("t", p, 10, (500, 0), b"tail", 6, 500) for p in (0, 1, 2)]

        async def fetch(asked: list) -> dict:
            answers = {}
            for e in asked:
                records = Records()
                freed.append(weakref.ref(records))
                answers[("t", e.partition)] = {"error_code": 0, "records": records}
            return answers

        ahead.run(entries, fetch)
        del entries
        for partition in (0, 1):  # two used, the third dropped by a seek
            entry, answer = ahead.take("t", partition, 10, (500, 0))
            assert (await answer)["records"] is not None
            ahead.release(entry)
            del entry, answer
        assert ahead.take("t", 2, 99, (500, 0)) is None
        await asyncio.sleep(0)  # the ask's task finishes and lets go of its callbacks
        ahead.close()

    gc.collect()
    gc.disable()
    try:
        asyncio.run(scenario())
        assert len(freed) == 3 and all(ref() is None for ref in freed)
    finally:
        gc.enable()


def test_a_cancelled_ask_still_answers_every_entry_it_had():
    import asyncio

    async def scenario() -> None:
        ahead = FetchAhead(AheadBudget(10_000))
        entry = ahead.start("t", 0, 10, (500, 0), b"", 0, 500)

        async def fetch(asked: list) -> dict:
            await asyncio.sleep(60)
            return {}

        ahead.run([entry], fetch)
        taken = ahead.take("t", 0, 10, (500, 0))
        assert taken is not None
        await asyncio.sleep(0)
        entry.task.cancel()  # the connection ended, or the loop is shutting down
        assert await asyncio.wait_for(taken[1], 5) is None  # a miss, never a hang

    asyncio.run(scenario())


@pytest.mark.slow  # most of a second each: kept out of the quick look
@pytest.mark.parametrize("version", [2, 11])
def test_a_fetch_of_many_partitions_some_read_ahead_and_some_sought_never_waits(
        serve_upstream: ServerThread, gateway_factory, version: int) -> None:
    # 12 partitions of 6 topics, the client moving 3 offsets on each time whatever it got: some
    # partitions hit what was fetched ahead and some miss. This hung for the client's whole
    # timeout before the fix above.
    gateway = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)  # v11 is spliced else
    topics = [("codecs", 2), ("nulls", 2), ("headers", 2), ("compacted", 2), ("transactions", 2),
              ("tiny", 2)]
    with WireClient(gateway.port) as client:
        client.sock.settimeout(5)
        for offset in range(0, 40, 3):
            body = _fetch_body("codecs", offset, 64 << 10)
            body["topics"] = [{"topic": name, "partitions": [
                {"partition": p, "fetch_offset": offset, "partition_max_bytes": 64 << 10}
                for p in range(n)]} for name, n in topics]
            answer = client.call(fetch.SPEC, version, body)
            assert all(p["error_code"] == 0 for t in answer["responses"] for p in t["partitions"])
    assert gateway.handler.fetches.ahead_hits > 0


def _fetch_body(topic: str, offset: int, limit: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                        "partition_max_bytes": limit}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _records(answer: dict, offset: int) -> tuple[list[tuple], int | None]:
    """The records at or after ``offset`` of an answer's complete entries, and the offset after
    its last complete entry."""
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    out: list[tuple] = []
    after = None
    for batch in MemoryRecords(part["records"] or b"").batches():
        out += [(r.offset, r.key, r.value) for r in batch if r.offset >= offset]
        after = batch.last_offset + 1
    return out, after


@pytest.mark.parametrize("version", [2, 12])
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_sequential_reads_through_the_gateway_equal_the_upstream_s_and_come_from_memory(
        serve_upstream: ServerThread, gateway_factory, version: int) -> None:
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)  # v12 is spliced otherwise
    limit = 8192  # many small fetches (its batches are at most 4.6 KiB)
    with WireClient(gateway.port) as through, WireClient(serve_upstream.port) as direct:
        offset, reads = 0, 0
        while True:
            got, after = _records(through.call(fetch.SPEC, version, _fetch_body("headers", offset, limit)), offset)
            want, _ = _records(direct.call(fetch.SPEC, version, _fetch_body("headers", offset, limit)), offset)
            assert got == want, offset
            reads += 1
            if after is None:
                break
            if reads == 5:  # the client asks from inside the batch it just had (a cut answer)
                assert len(got) > 1
                offset = got[-1][0]
                continue
            offset = after
    relay = gateway.handler.fetches
    assert reads > 10
    assert relay.ahead_hits >= reads - 3, (relay.ahead_hits, relay.ahead_misses)


def test_a_seek_is_answered_from_the_upstream(serve_upstream: ServerThread, gateway_factory) -> None:
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap)
    with WireClient(gateway.port) as through, WireClient(serve_upstream.port) as direct:
        _, after = _records(through.call(fetch.SPEC, 2, _fetch_body("headers", 0, 8192)), 0)
        assert after
        for offset in (0, after + 7, after):  # back, forward past the next range, then on
            got, _ = _records(through.call(fetch.SPEC, 2, _fetch_body("headers", offset, 8192)), offset)
            want, _ = _records(direct.call(fetch.SPEC, 2, _fetch_body("headers", offset, 8192)), offset)
            assert got == want
    assert gateway.handler.fetches.ahead_misses >= 2


@pytest.mark.parametrize("ahead_bytes", [0, 32 << 20])
def test_an_old_client_s_partitions_all_get_records_under_the_upstream_cap(
        serve_upstream: ServerThread, gateway_factory, ahead_bytes: int) -> None:
    """Fetch v2 has no response limit, but the gateway caps what it asks of the upstream, which
    fills partitions in request order: without the gateway rotating that order, the second
    partition would stay empty until the first was read to its end (about 20 fetches here)."""
    gateway: GatewayThread = gateway_factory(serve_upstream.bootstrap, upstream_fetch_max_bytes=4096,
                                             fetch_ahead_bytes=ahead_bytes)
    offsets = {0: 0, 1: 0}
    answered = {0: 0, 1: 0}
    with WireClient(gateway.port) as through:
        for _ in range(4):
            body = _fetch_body("headers", 0, 8192)
            body["topics"][0]["partitions"] = [{"partition": p, "fetch_offset": offsets[p],
                                                "partition_max_bytes": 8192} for p in (0, 1)]
            answer = through.call(fetch.SPEC, 2, body)
            parts = answer["responses"][0]["partitions"]
            assert [p["partition_index"] for p in parts] == [0, 1]  # the client's order
            for part in parts:
                assert part["error_code"] == 0, part
                batches = list(MemoryRecords(part["records"] or b"").batches())
                if batches:
                    answered[part["partition_index"]] += 1
                    offsets[part["partition_index"]] = batches[-1].last_offset + 1
    assert answered[0] >= 1 and answered[1] >= 1, answered


def _high_watermark(port: int, topic: str) -> int:
    with WireClient(port) as client:
        part = client.call(fetch.SPEC, 4, _fetch_body(topic, 0, 100))["responses"][0]["partitions"][0]
    return int(part["high_watermark"])


@pytest.mark.slow  # fetches that wait out the client's max_wait_ms
@pytest.mark.parametrize("version", [2, 4])
@pytest.mark.parametrize("shape", ["one busy, one idle", "both caught up"])
def test_a_long_poll_waits_only_while_nothing_is_in_hand(serve_upstream: ServerThread,
                                                         gateway_factory, version: int,
                                                         shape: str) -> None:
    """A broker answers once it has records or max_wait_ms has passed. Through fetch-ahead, a
    consumer of a busy and an idle partition got every other answer after the whole wait (the
    idle one was asked with it while the busy one's records were in hand), and a caught-up
    consumer waited twice (the answers fetched ahead that were empty were asked again, with a
    wait of their own)."""
    gateway = gateway_factory(serve_upstream.bootstrap, fetch_splice=False)
    busy = "codecs" if shape == "one busy, one idle" else "headers"
    end = _high_watermark(serve_upstream.port, busy)
    offsets = {busy: 0 if shape == "one busy, one idle" else end - 1,
               "tiny": _high_watermark(serve_upstream.port, "tiny")}
    times = []
    with WireClient(gateway.port) as client:
        client.sock.settimeout(30)
        for _ in range(4 if shape == "one busy, one idle" else 2):
            body = _fetch_body(busy, 0, 8192)
            body["topics"] = [{"topic": name, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 8192}]}
                for name, offset in offsets.items()]
            body["max_wait_ms"], body["min_bytes"] = 1000, 1
            started = time.monotonic()
            answer = client.call(fetch.SPEC, version, body)
            times.append(time.monotonic() - started)
            for topic in answer["responses"]:
                part = topic["partitions"][0]
                assert part["error_code"] == 0
                batches = list(MemoryRecords(part["records"] or b"").batches())
                if batches:
                    offsets[topic["topic"]] = batches[-1].last_offset + 1
                elif topic["topic"] == busy and shape == "one busy, one idle":
                    raise AssertionError("the busy partition had records to give")
    if shape == "one busy, one idle":
        assert max(times) < 0.5, times  # records in hand every time: no wait
    else:
        assert 0.9 < times[1] < 1.5, times  # nothing new: the client's wait, once
