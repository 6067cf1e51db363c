"""Fetch-ahead: a sequential consumer's next range, fetched upstream before it asks.

Without it the gateway is store-and-forward: it reads a partition's answer from the upstream
broker, writes it to the client, and only then does the client ask for the next range, so every
MiB crosses loopback twice in sequence and the broker sees fetches in a stop-and-go rhythm. With
it, once a partition's answer is in hand, the range after it is asked of the same broker while
the client is still reading, and the client's next fetch is answered from memory.

What a consumer asks next is the offset after the last message it received whole. That is the
offset after the answer's last complete batch (``start``), unless the answer was cut inside its
last batch (a down-converted answer larger than its committed size loses its tail; a client's
byte limit can cut too): then the client asks again from inside that batch. So each entry keeps
that last complete batch (``tail``): a next fetch at ``start`` gets the prefetched records, one
inside the tail gets the tail and then the prefetched records, as Kafka would have answered
(a fetch at an offset inside a batch returns that whole batch first). Anything else (a seek, a
different byte limit or isolation level, an upstream error, a partition led elsewhere now) drops
the entry and the fetch goes upstream as before.

Bounds: an entry per partition of a connection's last fetch, at most
``max_partitions_per_connection`` of them, each kept ``keep_s`` for the client's next fetch
(a client that stops fetching holds nothing after that); the prefetched bytes of all
connections together at most the budget's ``max_bytes`` (what an upstream answer may hold is
reserved before it is asked): when the budget is spent nothing is fetched ahead, and the
gateway is as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lazyconv.records._format import LOG_HEADER, LOG_OVERHEAD

log = logging.getLogger(__name__)

__all__ = ["AheadBudget", "FetchAhead", "Prefetched", "last_complete_batch", "offset_after"]

_BASE_AND_LENGTH = LOG_HEADER  # an entry starts with its base offset (int64) and length (int32)
# the last offset delta of a v2 batch: int32 at byte 23; legacy entries' offset is their last
_LAST_OFFSET_DELTA_AT = 23
_MAGIC_AT = 16


def offset_after(view: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """The offset after the entry of ``size`` bytes at ``pos`` (a batch, or a legacy message),
    from its header alone: a v2 batch's base offset plus its last offset delta, else the
    entry's own offset (a legacy message's, or wrapper's, offset is its last), plus one."""
    last = int.from_bytes(view[pos:pos + 8], "big", signed=True)
    if view[pos + _MAGIC_AT] >= 2 and size > _LAST_OFFSET_DELTA_AT + 4:
        last += int.from_bytes(view[pos + _LAST_OFFSET_DELTA_AT:pos + _LAST_OFFSET_DELTA_AT + 4],
                               "big", signed=True)
    return last + 1


def last_complete_batch(records: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """``(position, size, next offset)`` of the last complete entry of ``records``: where it
    starts, how long it is, and the offset after it; ``None`` when there is none. Only the entry
    headers are read (offset, size, magic, last offset delta)."""
    view = memoryview(records)
    end = len(view)
    unpack = _BASE_AND_LENGTH.unpack_from
    pos = 0
    last = -1
    while end - pos >= LOG_OVERHEAD:
        length = unpack(view, pos)[1]
        if length < 0 or pos + LOG_OVERHEAD + length > end:
            break
        last = pos
        pos += LOG_OVERHEAD + length
    if last < 0:
        return None
    size = pos - last  # the offset after it is read from the last entry only
    return last, size, offset_after(view, last, size)


class AheadBudget:
    """The bytes every connection's prefetched answers may hold together."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0

    def reserve(self, size: int) -> bool:
        # a negative size (a client's negative partition_max_bytes) would lift the bound for
        # every connection while it is held
        if size < 0 or self.used + size > self.max_bytes:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used = max(0, self.used - size)


@dataclass
class Prefetched:
    """One partition's next range, asked upstream (``future``: the upstream partition answer,
    ``None`` when the ask failed)."""

    topic: str
    partition: int
    start: int  # the offset the prefetched records start at
    shape: tuple[Any, ...]  # what the client's fetch must match: byte limit, isolation, ...
    tail: bytes  # the last complete batch of the answer before (empty: none kept)
    tail_base: int  # the first offset the tail answers for
    reserved: int
    future: asyncio.Future[dict[str, Any] | None] = field(repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    #: the futures of every entry the same upstream ask answers (this one's included). Not the
    #: entries: a list of them that each entry held would put the entries in a reference cycle,
    #: and their answers (a whole upstream response each) would wait for the cyclic collector.
    ask_futures: list[asyncio.Future[dict[str, Any] | None]] = field(default_factory=list,
                                                                      repr=False)
    expiry: asyncio.TimerHandle | None = field(default=None, repr=False)
    throttle_ms: int = 0  # the throttle time of the upstream answer (passed on when used)


class FetchAhead:
    """One downstream connection's prefetched ranges (see the module docstring)."""

    def __init__(self, budget: AheadBudget, *, max_partitions_per_connection: int = 64,
                 keep_s: float = 2.0) -> None:
        """``keep_s``: how long an answer fetched ahead waits for the client's next fetch before
        it is dropped (a client that stops fetching holds nothing)."""
        self.budget = budget
        self.max_partitions = max_partitions_per_connection
        self.keep_s = keep_s
        self._entries: dict[tuple[str, int], Prefetched] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, topic: str, partition: int, offset: int,
             shape: tuple[Any, ...]) -> tuple[Prefetched, Awaitable[dict[str, Any] | None]] | None:
        """The prefetched answer for a fetch of ``partition`` at ``offset``, if one matches (the
        entry is handed over: the caller :meth:`release` s it once used); any other entry of that
        partition is dropped."""
        entry = self._entries.pop((topic, partition), None)
        if entry is None:
            return None
        if entry.expiry is not None:
            entry.expiry.cancel()
        if entry.shape == shape and (offset == entry.start or
                                     (entry.tail and entry.tail_base <= offset < entry.start)):
            self.hits += 1
            return entry, entry.future
        self.misses += 1
        self._drop(entry)
        return None

    def release(self, entry: Prefetched) -> None:
        """The entry's answer was used (or given up): its bytes leave the budget."""
        self.budget.release(entry.reserved)
        entry.reserved = 0

    def start(self, topic: str, partition: int, start: int, shape: tuple[Any, ...], tail: bytes,
              tail_base: int, reserve: int) -> Prefetched | None:
        """A new entry whose answer the caller will fetch (``None``: over a bound)."""
        old = self._entries.pop((topic, partition), None)
        if old is not None:
            self._drop(old)
        if len(self._entries) >= self.max_partitions or not self.budget.reserve(reserve + len(tail)):
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any] | None] = loop.create_future()
        entry = Prefetched(topic, partition, start, shape, tail, tail_base, reserve + len(tail), future)
        self._entries[(topic, partition)] = entry
        entry.expiry = loop.call_later(self.keep_s, self._expire, entry)
        return entry

    def _expire(self, entry: Prefetched) -> None:
        if self._entries.get((entry.topic, entry.partition)) is entry:
            del self._entries[(entry.topic, entry.partition)]
            self.misses += 1
            self._drop(entry)

    def run(self, entries: list[Prefetched],
            fetch: Callable[[list[Prefetched]], Awaitable[dict[tuple[str, int], dict[str, Any]]]]) -> None:
        """Ask for ``entries`` (one broker's) with ``fetch`` in the background; each entry's
        future gets its partition's answer (``None`` on any failure: its fetch goes upstream)."""

        async def ask() -> None:
            answers: dict[tuple[str, int], dict[str, Any]] = {}
            try:
                answers = await fetch(entries)
            except Exception as exc:  # any failure is a miss, never the client's error
                log.debug("fetch-ahead of %d partitions failed: %s", len(entries), exc)
            finally:  # cancelled too: an entry a fetch took must never be left waiting
                for entry in entries:
                    if not entry.future.done():
                        entry.future.set_result(answers.get((entry.topic, entry.partition)))

        def answered(_: asyncio.Task[None]) -> None:  # cancelled before it ran too
            for entry in entries:
                if not entry.future.done():
                    entry.future.set_result(None)

        task = asyncio.get_running_loop().create_task(ask())
        task.add_done_callback(answered)
        futures = [entry.future for entry in entries]
        for entry in entries:
            entry.task = task
            entry.ask_futures = futures

    def _drop(self, entry: Prefetched) -> None:
        if entry.expiry is not None:
            entry.expiry.cancel()
        self.release(entry)
        if not entry.future.done():
            entry.future.cancel()
        # The ask is cancelled once no entry waits for it: the siblings a fetch has taken (no
        # longer in _entries) still wait for their answers.
        if entry.task is not None and all(future.done() for future in entry.ask_futures):
            entry.task.cancel()

    def close(self) -> None:
        """The connection ended: every entry dropped, every ask cancelled."""
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            if entry.expiry is not None:
                entry.expiry.cancel()
            self.release(entry)
            if not entry.future.done():
                entry.future.cancel()
            if entry.task is not None:
                with contextlib.suppress(Exception):
                    entry.task.cancel()
