"""Recent down-conversions of file bytes (or keyed bytes in memory), reused by every lazy send
of the process.

Old consumers of one topic read the same batches at about the same time (several consumer
groups, or the members of one restarting); Kafka converts those batches again for each of them.
A :class:`ConversionCache` keeps the latest conversions of input whose source names where it
comes from (a file; records in memory given a ``cache_key``, as the gateway gives each upstream
response's records), bounded in bytes, so the next send that needs the same input bytes
converted the same way writes the kept output.

A hit is exact, not probable: an entry keeps a copy of the input bytes it was converted from,
and a lookup reads the input again and compares it byte for byte (the cost of a ``pread`` and a
``memcmp``, against decompressing and compressing again). The key (which file or buffer key,
where, which target magic and fetch offset) only finds the candidate, so a file replaced,
truncated or rewritten in place, or another buffer under the same key, is never answered from
an older conversion. Only complete, error-free
conversions are stored; every error is met again by the conversion itself.

The output of a down-conversion is the concatenation of each input batch's own conversion
(Kafka's ``RecordsUtil.downConvert``), so an entry may be reused by a send whose chunks would
have ended elsewhere: its bytes are the same, only the chunking differs.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any

from lazyconv.conversion._down import ConversionStats
from lazyconv.errors import ConfigurationError

__all__ = ["ConversionCache", "CachedConversion", "CacheCounts", "DEFAULT_CONVERSION_CACHE_BYTES",
           "GATEWAY_CONVERSION_CACHE_BYTES", "conversion_cache"]

# What `lazyconv serve` keeps per process (the library's own cache is off until sized).
# Consumers of one topic drift apart by several MiB of log even when they start together: with
# 8 consumers of a 1 MiB fetch on two senders, 16 MiB answered about 30 % of a sender's lookups,
# 64 MiB 63-72 % (ad-hoc runs of an earlier version, docs/guide/benchmarks.md).
DEFAULT_CONVERSION_CACHE_BYTES = 64 * 1024 * 1024
# What `lazyconv gateway` keeps: with 8 old consumers of one lz4 topic 16 MiB gave 1.29-1.49x
# Kafka 3.9's throughput at an RSS peak of about 80 MiB, 64 MiB 1.72x at about 150 MiB
# (docs/guide/benchmarks.md); the smaller keeps the gateway within the 64 MiB (+ a chunk per
# connection) it is built to stay in.
GATEWAY_CONVERSION_CACHE_BYTES = 16 * 1024 * 1024
# What an entry costs besides its bytes (key, dict node, objects), counted against the size.
ENTRY_OVERHEAD = 1024

_Key = tuple[Any, int, int, int, int, int]


@dataclass(frozen=True)
class CachedConversion:
    """A kept conversion: ``consumed`` input bytes from the looked-up position became ``data``."""

    data: bytes
    consumed: int
    stats: ConversionStats


@dataclass(frozen=True)
class CacheCounts:
    """What a cache did so far: lookups answered, lookups not answered, entries evicted, and
    the bytes (input copies and outputs) it holds now."""

    hits: int
    misses: int
    evictions: int
    held_bytes: int


class _Entry:
    __slots__ = ("source", "output")

    def __init__(self, source: bytes, output: CachedConversion) -> None:
        self.source = source
        self.output = output

    @property
    def size(self) -> int:
        return len(self.source) + len(self.output.data) + ENTRY_OVERHEAD


class ConversionCache:
    """At most ``max_bytes`` of recent conversions (input copies, outputs and
    :data:`ENTRY_OVERHEAD` each), least recently used evicted first; 0 keeps nothing. Safe to
    share between threads."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = 0
        self._entries: collections.OrderedDict[_Key, _Entry] = collections.OrderedDict()
        self._held = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._lock = threading.Lock()
        self.resize(max_bytes)

    @property
    def counts(self) -> CacheCounts:
        with self._lock:
            return CacheCounts(self._hits, self._misses, self._evictions, self._held)

    def key(self, source: object, position: int, to_magic: int, first_offset: int,
            max_decompressed_size: int, span: int) -> _Key | None:
        """The key of converting the input at ``position`` of ``source`` for a fetch from
        ``first_offset``, ``span`` at a time (a chunk size; 0 for one batch); ``None`` when it is
        not cached."""
        if not self.max_bytes:
            return None
        file_key = getattr(source, "cache_key", None)  # its file or buffer key; None: not kept
        if file_key is None:
            return None
        return (file_key, position, span, to_magic, first_offset, max_decompressed_size)

    def lookup(self, key: _Key | None, source: Any, end: int) -> CachedConversion | None:
        """The kept conversion of exactly the input ``[key position, end)`` of ``source`` if
        those bytes are still the ones it was made from (one that consumed more or fewer bytes
        is not an answer: counted as a miss)."""
        if key is None:
            return None
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or key[1] + len(entry.source) != end:
            self._count_miss()
            return None
        current = source.read(key[1], len(entry.source))
        if not isinstance(current, bytes):
            # a read-ahead window's view: memoryview compares byte by byte through its format
            # (about 1 s per GiB), bytes with memcmp
            current = bytes(current)
        if current != entry.source:
            self._count_miss()
            return None
        with self._lock:
            self._hits += 1
            if key in self._entries:
                self._entries.move_to_end(key)
        return entry.output

    def fits(self, consumed: int, converted: int) -> bool:
        """Whether an entry of these sizes would be kept (at most a quarter of the cache: one
        huge batch would flush everything else)."""
        return consumed + converted + ENTRY_OVERHEAD <= self.max_bytes // 4

    def store(self, key: _Key | None, consumed: bytes | memoryview, data: bytes | bytearray,
              stats: ConversionStats) -> None:
        """Keep that the ``consumed`` input bytes at the key's position converted to ``data``:
        ``consumed`` must be the very bytes the conversion read (not read again), or a change
        in between would pair new input with old output."""
        if key is None or not data or not self.fits(len(consumed), len(data)):
            return
        entry = _Entry(bytes(consumed), CachedConversion(bytes(data), len(consumed), stats))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= old.size
            self._entries[key] = entry
            self._held += entry.size
            while self._held > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._held -= evicted.size
                self._evictions += 1

    def resize(self, max_bytes: int) -> None:
        """Hold at most ``max_bytes`` from now on (0 turns the cache off); what it held is
        dropped."""
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ConfigurationError(f"the conversion cache size must be >= 0 bytes, got {max_bytes!r}")
        with self._lock:
            self.max_bytes = max_bytes
        self.clear()

    def clear(self) -> None:
        """Drop every entry (a sender does when it has been idle: its memory goes back)."""
        with self._lock:
            self._entries.clear()
            self._held = 0

    def release_idle(self) -> None:
        """What a :class:`~lazyconv.net._remote_send.SenderContext` calls on an idle sender."""
        self.clear()

    def _count_miss(self) -> None:
        with self._lock:
            self._misses += 1


# The process's cache, used by every lazy send (lazyconv.conversion._lazy_records): off until sized (`lazyconv
# serve` sizes it at start-up and its sender processes with their jobs).
conversion_cache = ConversionCache()
