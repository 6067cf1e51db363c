"""Mutation fuzzer for everything that reads untrusted bytes, with a time budget.

Targets (``TARGETS``): ``records`` (MemoryRecords: split, validate, iterate), ``file_records``
(FileRecords over a scratch segment, slices, ``down_convert_file``), ``down_convert``,
``lazy_send`` (LazyDownConvertedRecords driven through a trickling channel), ``protocol`` (every
request decoder, the request header, FetchResponse), ``append_validation`` (Produce validation
with producer state) and ``broker`` (``Broker.handle`` on whole request frames against a scratch
log directory, the response written out and closed).

Each execution mutates an input of the target's corpus (bit flips, interesting integers, inserts,
deletes, truncation, duplication, splices; for record inputs the CRCs are then often repaired so
mutations reach the record parser). The oracle:

- only :class:`~lazyconv.errors.LazyconvError` may escape a target (anything else is a finding);
- no input may run longer than ``timeout`` seconds (a SIGALRM timer interrupts it: a hang);
- no input may raise the traced Python memory (tracemalloc) by more than ``memory_bound`` bytes;
- the lazy send writes exactly its committed size.

Inputs whose outcome (success, or the error's type and message shape) was not seen before join
the corpus; with ``save_dir`` up to ``max_saved`` small ones per target are written to
``save_dir/<target>/<hash>.bin`` (the regression corpus replayed by the test suite).

Usage (see ``--help``)::

    python bench/fuzz.py --budget 600                      # all targets, 10 minutes
    python bench/fuzz.py --budget 60 --targets records,broker
    python bench/fuzz.py --budget 120 --save-corpus tests/fuzz_corpus
    python bench/fuzz.py --replay tests/fuzz_corpus        # the regression corpus only
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import random
import re
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.conversion._chunks import MIN_CHUNK_SIZE  # noqa: E402
from lazyconv.conversion._down import down_convert, down_convert_file  # noqa: E402
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords  # noqa: E402
from lazyconv.errors import ConfigurationError, LazyconvError  # noqa: E402
from lazyconv.protocol import (  # noqa: E402
    _api_versions as api_versions,
)
from lazyconv.protocol import (
    _find_coordinator as find_coordinator,
)
from lazyconv.protocol import (
    _init_producer_id as init_producer_id,
)
from lazyconv.protocol import (
    _list_offsets as list_offsets,
)
from lazyconv.protocol import (
    _metadata as metadata,
)
from lazyconv.protocol import (
    _produce as produce,
)
from lazyconv.protocol._fetch import FetchRequest, FetchResponse  # noqa: E402
from lazyconv.protocol._headers import decode_request_header, encode_request_header  # noqa: E402
from lazyconv.protocol._message_codec import encode_message  # noqa: E402
from lazyconv.protocol._primitives import Reader  # noqa: E402
from lazyconv.records import Compression, FileRecords, MemoryRecords, RecordsBuilder  # noqa: E402
from lazyconv.records._codec import crc32c  # noqa: E402
from lazyconv.serve._append_validation import validate_produce  # noqa: E402
from lazyconv.serve._producer_table import ProducerStateTable  # noqa: E402

__all__ = [
    "TARGETS",
    "FuzzTarget",
    "Finding",
    "FuzzReport",
    "Oracle",
    "make_target",
    "run_fuzz",
    "replay_corpus",
    "main",
]

log = logging.getLogger(__name__)

TARGETS = (
    "records", "file_records", "down_convert", "lazy_send", "protocol", "append_validation", "broker",
)
MAX_DECOMPRESSED = 1 << 20  # bound on each decompressed payload inside the fuzzer
_INTERESTING = (0, 1, -1, 2, 12, 14, 17, 61, 127, 128, 255, 256, 0x7FFF, -0x8000, 0xFFFF,
                0x7FFFFFFF, -0x80000000, 0xFFFFFFFF, 1 << 31, (1 << 63) - 1, -(1 << 63))
_MAX_INPUT = 64 * 1024


class _Timeout(BaseException):
    """Raised by the SIGALRM handler: a BaseException, so ``except Exception`` cannot hide it."""


@dataclass
class Finding:
    """An input that broke the oracle: ``kind`` is "exception", "hang", "memory" or "oracle"."""

    target: str
    kind: str
    detail: str
    data: bytes

    def __str__(self) -> str:
        return f"{self.target}: {self.kind}: {self.detail}"


@dataclass
class FuzzTarget:
    """A named entry point: ``run(data)`` exercises it (and may return a string naming the
    outcome, e.g. an error code, for corpus selection); ``seeds`` start its corpus."""

    name: str
    run: Callable[[bytes], str | None]
    seeds: list[bytes]
    repair_crcs: bool = False
    reset: Callable[[], None] | None = None
    close: Callable[[], None] | None = None


@dataclass
class FuzzReport:
    """What a run did: executions (per target), findings, traced peak, corpus growth."""

    executions: int = 0
    per_target: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    max_traced_bytes: int = 0
    seconds: float = 0.0
    corpus_sizes: dict[str, int] = field(default_factory=dict)
    saved: int = 0

    @property
    def hangs(self) -> int:
        return sum(1 for f in self.findings if f.kind == "hang")

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for finding in self.findings:
            kinds[finding.kind] = kinds.get(finding.kind, 0) + 1
        per_target = ", ".join(f"{name} {count:,}" for name, count in sorted(self.per_target.items()))
        rate = self.executions / self.seconds if self.seconds else 0.0
        return (
            f"{self.executions:,} executions in {self.seconds:.0f} s of budget ({rate:,.0f}/s): {per_target}\n"
            f"findings: {len(self.findings)} {kinds or ''}; max traced memory per input "
            f"{self.max_traced_bytes / 2**20:.1f} MiB; corpus {self.corpus_sizes}; saved {self.saved}"
        )


# -- the oracle ---------------------------------------------------------------------------------


class Oracle:
    """Runs one input under the time and memory bounds and classifies what happened."""

    def __init__(self, timeout: float = 2.0, memory_bound: int = 64 << 20, trace_memory: bool = True) -> None:
        if timeout <= 0 or memory_bound <= 0:
            raise ConfigurationError("timeout and memory_bound must be positive")
        self.timeout = timeout
        self.memory_bound = memory_bound
        self.trace_memory = trace_memory
        self.max_traced = 0

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Install the SIGALRM handler and tracemalloc for a series of inputs; a timer that
        was running (e.g. pytest-timeout's) is re-armed with what was left of it afterwards."""
        previous_timer = signal.getitimer(signal.ITIMER_REAL)
        armed_at = time.monotonic()
        previous = signal.signal(signal.SIGALRM, _raise_timeout)
        started = False
        if self.trace_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            started = True
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if previous_timer[0] > 0:
                left = max(previous_timer[0] - (time.monotonic() - armed_at), 0.001)
                signal.setitimer(signal.ITIMER_REAL, left, previous_timer[1])
            if started:
                tracemalloc.stop()

    def check(self, target: FuzzTarget, data: bytes) -> tuple[Finding | None, str]:
        """Run ``data`` through ``target``; returns ``(finding or None, outcome signature)``."""
        base = 0
        if self.trace_memory:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            outcome = target.run(data) or "ok"
        except _Timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if target.reset is not None:
                target.reset()
            return Finding(target.name, "hang", f"longer than {self.timeout} s", data), "hang"
        except LazyconvError as exc:
            outcome = f"{type(exc).__name__}: {_shape(str(exc))}"
        except Exception as exc:  # the finding this fuzzer exists for
            signal.setitimer(signal.ITIMER_REAL, 0)
            detail = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_tb(exc.__traceback__)[-4:])
            if target.reset is not None:
                target.reset()
            return Finding(target.name, "exception", detail, data), "exception"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if self.trace_memory:
            peak = tracemalloc.get_traced_memory()[1] - base
            self.max_traced = max(self.max_traced, peak)
            if peak > self.memory_bound:
                return Finding(target.name, "memory", f"traced peak {peak:,} bytes", data), outcome
        return None, outcome


def _raise_timeout(signum: int, frame: Any) -> None:
    raise _Timeout()


def _shape(message: str) -> str:
    """An error message without its numbers: the outcome class of an input."""
    return re.sub(r"0x[0-9a-fA-F]+|-?\d+", "#", message)[:80]


class OracleViolation(Exception):
    """A target's own consistency check failed (not a LazyconvError: a finding)."""


# -- mutation -----------------------------------------------------------------------------------


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """One to four stacked mutations of ``data``."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        choice = rng.randrange(10)
        n = len(out)
        if choice == 0 and n:
            out[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif choice == 1 and n:
            out[rng.randrange(n)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0xFE, 0x40))
        elif choice in (2, 3) and n >= 2:
            fmt = rng.choice((">h", ">i", ">i", ">q"))
            size = struct.calcsize(fmt)
            if n >= size:
                value = rng.choice(_INTERESTING)
                bits = size * 8
                value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
                struct.pack_into(fmt, out, rng.randrange(n - size + 1), value)
        elif choice == 4 and n >= 4:
            pos = rng.randrange(n - 3)
            (value,) = struct.unpack_from(">i", out, pos)
            value = max(-(1 << 31), min((1 << 31) - 1, value + rng.randint(-16, 16)))
            struct.pack_into(">i", out, pos, value)
        elif choice == 5:
            pos = rng.randrange(n + 1)
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif choice == 6 and n:
            pos = rng.randrange(n)
            del out[pos : pos + rng.randint(1, 16)]
        elif choice == 7 and n:
            del out[rng.randrange(n) :]
        elif choice == 8 and n:
            start = rng.randrange(n)
            piece = out[start : start + rng.randint(1, 64)]
            pos = rng.randrange(n + 1)
            out[pos:pos] = piece
        elif choice == 9 and others:
            other = rng.choice(others)
            out = out[: rng.randint(0, n)] + other[rng.randint(0, len(other)) :]
    return bytes(out[:_MAX_INPUT])


def repair_crcs(data: bytes) -> bytes:
    """Recompute the CRC of every complete top-level entry (v2: CRC-32C, v0/v1: CRC-32)."""
    out = bytearray(data)
    pos = 0
    while pos + 17 <= len(out):
        size = struct.unpack_from(">i", out, pos + 8)[0]
        end = pos + 12 + size
        if size < 14 or end > len(out):
            break
        if out[pos + 16] == 2 and size >= 49:
            struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + 21 : end])))
        elif out[pos + 16] in (0, 1):
            struct.pack_into(">I", out, pos + 12, zlib.crc32(bytes(out[pos + 16 : end])))
        pos = end
    return bytes(out)


# -- seeds ------------------------------------------------------------------------------------------


def _v2(count: int, compression: int = 0, base_offset: int = 0, **kwargs: Any) -> bytes:
    builder = RecordsBuilder(2, compression=compression, base_offset=base_offset, **kwargs)
    for i in range(count):
        builder.append(None, 1_000 + i, b"k%d" % i, b"value-%d" % i, (("h", b"x"),) if i % 2 else ())
    return builder.build()


def _legacy(magic: int, count: int, compression: int = 0, base_offset: int = 0) -> bytes:
    builder = RecordsBuilder(magic, compression=compression, base_offset=base_offset)
    for i in range(count):
        builder.append(None, 1_000 + i if magic else -1, b"k%d" % i, b"v%d" % i)
    return builder.build()


def record_seeds() -> list[bytes]:
    """Record sets of every magic and codec, with control batches and producer state."""
    from lazyconv.records import build_end_txn_marker

    seeds = [
        _v2(3),
        _v2(5, Compression.GZIP, 3),
        _v2(4, Compression.SNAPPY, 10),
        _v2(4, Compression.LZ4, 0),
        _v2(2, Compression.ZSTD, 0),
        _v2(3, producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True)
        + build_end_txn_marker(3, 2_000, 7, 1, True),
        _legacy(1, 3),
        _legacy(1, 3, Compression.GZIP, 5),
        _legacy(0, 2),
        _legacy(0, 3, Compression.SNAPPY),
        _v2(2) + _legacy(1, 2, 0, 2) + _v2(3, Compression.LZ4, 4),
    ]
    return seeds


def _frame(api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
    header_version = 2 if flexible else 1
    return encode_request_header(header_version, api_key, version, 7, "fuzz") + body


def request_seeds() -> list[tuple[int, int, bytes]]:
    """``(api key, version, body)`` for every request the server decodes, a few versions each."""
    records = _v2(3)
    produce_body = {"acks": 1, "timeout_ms": 100, "topic_data": [
        {"name": "fuzz", "partition_data": [{"index": 0, "records": records}]}]}
    fetch_body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                  "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                  "topics": [{"topic": "fuzz", "partitions": [
                      {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                      {"partition": 1, "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}]}
    list_body = {"replica_id": -1, "topics": [{"name": "fuzz", "partitions": [
        {"partition_index": 0, "timestamp": -1}, {"partition_index": 1, "timestamp": 1_001}]}]}
    out: list[tuple[int, int, bytes]] = []
    for version in (0, 1, 3, 4, 7, 11, 12):
        out.append((1, version, FetchRequest.encode(version, fetch_body)))
    simple: list[tuple[Any, dict[str, Any]]] = [
        (produce, produce_body),
        (metadata, {"topics": [{"name": "fuzz"}]}),
        (list_offsets, list_body),
        (api_versions, {"client_software_name": "fuzz", "client_software_version": "1"}),
        (find_coordinator, {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}),
        (init_producer_id, {"transactional_id": None, "transaction_timeout_ms": 1000}),
    ]
    for module, body in simple:
        spec = module.SPEC
        for version in sorted({spec.min_version, (spec.min_version + spec.max_version) // 2,
                               spec.max_version}):
            encoded = encode_message(spec.request, body, version, spec.is_flexible(version)).to_bytes()
            out.append((spec.key, version, encoded))
    return out


# -- targets --------------------------------------------------------------------------------------


def _records_run(data: bytes) -> None:
    records = MemoryRecords(data, MAX_DECOMPRESSED)
    for batch in records.batches():
        batch.is_valid()
        _ = (batch.last_offset, batch.next_offset, batch.timestamp_type, batch.max_timestamp,
             batch.record_count, batch.is_control)
        for _record in batch:
            pass
        _ = batch.base_offset
    records.valid_bytes()


def _conversion_arguments(data: bytes) -> tuple[int, int]:
    """A target magic and fetch offset derived from the input (replayable, no prefix)."""
    digest = zlib.crc32(data)
    return digest % 2, (0, 0, 1, 3, -1, 1 << 40)[(digest >> 1) % 6]


def _down_convert_run(data: bytes) -> None:
    to_magic, first_offset = _conversion_arguments(data)
    converted = down_convert(MemoryRecords(data, MAX_DECOMPRESSED).batches(), to_magic, first_offset)
    for batch in converted.records.batches():  # what we write, we must read back
        for _record in batch:
            pass


class _Channel:
    def __init__(self, pattern: tuple[int, ...]) -> None:
        self.pattern = pattern
        self.calls = 0
        self.received = 0

    def send(self, data: memoryview | bytes) -> int:
        n = min(len(data), self.pattern[self.calls % len(self.pattern)])
        self.calls += 1
        self.received += n
        return n


def _drive(send: Any, pattern: tuple[int, ...] = (1 << 16,)) -> int:
    channel = _Channel(pattern)
    while not send.completed:
        before = channel.received
        written = send.write_to(channel)
        if written != channel.received - before:
            raise OracleViolation(f"write_to returned {written}, channel took {channel.received - before}")
    return channel.received


def _lazy_send_run(data: bytes) -> None:
    to_magic, first_offset = _conversion_arguments(data)
    lazy = LazyDownConvertedRecords(MemoryRecords(data, MAX_DECOMPRESSED), to_magic, first_offset,
                                    chunk_size=MIN_CHUNK_SIZE)
    sent = _drive(lazy.to_send(), (5, 4096, 1 << 16))
    if sent != lazy.size_in_bytes:
        raise OracleViolation(f"lazy send wrote {sent} bytes, committed {lazy.size_in_bytes}")


_DECODERS: list[tuple[str, Callable[[int, bytes], Any], int]] = [
    ("fetch", lambda v, d: FetchRequest.decode(v, d), 17),
    ("fetch_response", lambda v, d: FetchResponse.decode(v, d), 17),
    ("produce", lambda v, d: produce.decode_request(v, d), produce.MAX_VERSION),
    ("metadata", lambda v, d: metadata.decode_request(v, d), metadata.MAX_VERSION),
    ("list_offsets", lambda v, d: list_offsets.decode_request(v, d), list_offsets.MAX_VERSION),
    ("api_versions", lambda v, d: api_versions.decode_request(v, d), api_versions.MAX_VERSION),
    ("find_coordinator", lambda v, d: find_coordinator.decode_request(v, d), find_coordinator.MAX_VERSION),
    ("init_producer_id", lambda v, d: init_producer_id.decode_request(v, d), init_producer_id.MAX_VERSION),
    ("header", lambda v, d: decode_request_header(Reader(d), v % 3), 2),
]
_DECODER_INDEX = {1: 0, 0: 2, 3: 3, 2: 4, 18: 5, 10: 6, 22: 7}


def _protocol_run(data: bytes) -> None:
    """``data[0]`` picks the decoder, ``data[1]`` the version, the rest is the body."""
    if len(data) < 2:
        return
    _name, decode, max_version = _DECODERS[data[0] % len(_DECODERS)]
    decode(data[1] % (max_version + 1), data[2:])


def protocol_seeds() -> list[bytes]:
    seeds = [bytes([_DECODER_INDEX[key], version]) + body for key, version, body in request_seeds()]
    response = FetchResponse(4, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 3, "records": _v2(3)}]}]}).to_bytes(1)[8:]
    seeds.append(bytes([1, 4]) + response)
    seeds.append(bytes([8, 2]) + encode_request_header(2, 1, 12, 5, "c") + b"\x00")
    return seeds


class _AppendTarget:
    """Produce validation with producer state that persists between inputs (reset now and then)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.table = ProducerStateTable()
        self.next_offset = 0
        self.runs = 0

    def run(self, data: bytes) -> str:
        self.runs += 1
        if self.runs % 10_000 == 0:
            self.reset()
        decision = validate_produce(data, produce_version=2 + zlib.crc32(data) % 7, producers=self.table)
        decision.response_fields()
        if decision.accepted and decision.entries:
            self.table.apply(decision, self.next_offset)
            self.next_offset += decision.offset_count
            for entry in decision.entries:  # what is accepted must read back
                for batch in MemoryRecords(entry.data, MAX_DECOMPRESSED).batches():
                    if not batch.is_valid():
                        raise OracleViolation("an accepted entry fails its CRC")
                    for _record in batch:
                        pass
        elif decision.accepted != (decision.error_code == 0):
            raise OracleViolation("accepted disagrees with the error code")
        return f"{decision.error_code.name}: {_shape(decision.error_message or '')}"


class _FileTarget:
    """FileRecords over one scratch file, rewritten for every input."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "scratch.log"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)

    def run(self, data: bytes) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        records = FileRecords(self.fd, max_decompressed_size=MAX_DECOMPRESSED)
        for batch in records.batches():
            batch.is_valid()
            for _record in batch:
                pass
        middle = records.size_in_bytes // 2
        for _batch in records.slice(middle, records.size_in_bytes).batches():
            pass
        converted = down_convert_file(records, zlib.crc32(data) % 2, 0)
        for converted_batch in converted.records.batches():
            for _record in converted_batch:
                pass

    def close(self) -> None:
        os.close(self.fd)


class _BrokerTarget:
    """``Broker.handle`` through the servers' front door on a scratch log directory: partition 0 healthy, partition 1 with a
    corrupt batch planted after good ones. Fetch waits run on a virtual clock."""

    def __init__(self, directory: Path) -> None:
        from lazyconv.serve import _fetch_handler as broker_module
        from lazyconv.serve._broker import Broker

        self.root = directory / "logs"
        self.loop = asyncio.new_event_loop()
        self.broker: Broker | None = None
        self.runs = 0
        # Fetch waits (max_wait_ms up to 24 days) must not stall the fuzzer: a virtual clock
        # that jumps far ahead on every reading ends each wait after one poll, and polls are
        # immediate. Only the broker module's view of time changes, until close().
        self._module = broker_module
        self._saved = {name: getattr(broker_module, name)
                       for name in ("time", "FETCH_POLL_INTERVAL_S") if hasattr(broker_module, name)}
        if "time" in self._saved:
            setattr(broker_module, "time", _JumpingClock())  # noqa: B010
        if "FETCH_POLL_INTERVAL_S" in self._saved:
            broker_module.FETCH_POLL_INTERVAL_S = 0
        self.reset()

    def reset(self) -> None:
        from lazyconv.logdir._directory import LogDirectory
        from lazyconv.logdir._naming import segment_file_name
        from lazyconv.net._model import Listener
        from lazyconv.net._requests import FrontDoor
        from lazyconv.net._session import Session
        from lazyconv.serve._broker import Broker

        if not self.loop.is_running():  # after a hang the interrupted task is dropped with it
            self.loop.close()
            self.loop = asyncio.new_event_loop()
        shutil.rmtree(self.root, ignore_errors=True)
        for partition, body in ((0, _v2(3) + _v2(4, Compression.GZIP, 3)),
                                (1, _v2(3) + _garbage_records(_v2(3, base_offset=3)) + _v2(2, 0, 6))):
            path = self.root / f"fuzz-{partition}"
            path.mkdir(parents=True)
            (path / segment_file_name(0)).write_bytes(body)
        self.listener = Listener(0, "127.0.0.1", 9092)
        if self.broker is not None:
            self.broker.close()  # its fetch threads and cached segment files
        self.broker = Broker(LogDirectory(self.root), [self.listener], offsets_in_memory=True)
        # every frame goes through the servers' own front door, as from a socket
        self.front_door = FrontDoor(self.broker)
        self.session = Session(self.listener, "/127.0.0.1")

    def run(self, data: bytes) -> str:
        self.runs += 1
        if self.runs % 5_000 == 0:
            self.reset()  # produced data must not pile up
        assert self.broker is not None  # made by reset()
        response = self.loop.run_until_complete(self.front_door.answer(data, self.session))
        if response is None:
            return "no response"
        try:
            sent = _drive(response.send)
            if sent != response.send.size:
                raise OracleViolation(f"response wrote {sent} bytes of {response.send.size}")
        finally:
            response.close()
        return f"response of {sent.bit_length()} bits length"

    def close(self) -> None:
        if self.broker is not None:
            self.broker.close()
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)
        for name, value in self._saved.items():
            setattr(self._module, name, value)


class _JumpingClock:
    """Stands in for the ``time`` module: ``monotonic()`` advances a million seconds a call."""

    def __init__(self) -> None:
        self._now = 0.0

    def monotonic(self) -> float:
        self._now += 1e6
        return self._now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _garbage_records(batch: bytes) -> bytes:
    bad = bytearray(batch)
    bad[61:] = b"\xfe" * (len(batch) - 61)
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    return bytes(bad)


def broker_seeds() -> list[bytes]:
    from lazyconv.protocol._registry import API_BY_KEY

    seeds = []
    for key, version, body in request_seeds():
        seeds.append(_frame(key, version, body, API_BY_KEY[key].is_flexible(version)))
    return seeds


def make_target(name: str, scratch: Path) -> FuzzTarget:
    """The target ``name`` (one of :data:`TARGETS`); ``scratch`` is a private temp directory."""
    if name == "records":
        return FuzzTarget(name, _records_run, record_seeds(), repair_crcs=True)
    if name == "down_convert":
        return FuzzTarget(name, _down_convert_run, record_seeds(), repair_crcs=True)
    if name == "lazy_send":
        return FuzzTarget(name, _lazy_send_run, record_seeds(), repair_crcs=True)
    if name == "protocol":
        return FuzzTarget(name, _protocol_run, protocol_seeds())
    if name == "append_validation":
        append = _AppendTarget()
        seeds = record_seeds() + [
            _v2(5, Compression.GZIP),
            _v2(3, producer_id=7, producer_epoch=0, base_sequence=0),
            _v2(2, producer_id=7, producer_epoch=0, base_sequence=3, is_transactional=True),
            _legacy(1, 3, Compression.GZIP),
        ]
        return FuzzTarget(name, append.run, seeds, repair_crcs=True, reset=append.reset)
    if name == "file_records":
        files = _FileTarget(scratch)
        return FuzzTarget(name, files.run, record_seeds(), repair_crcs=True, close=files.close)
    if name == "broker":
        broker = _BrokerTarget(scratch)
        return FuzzTarget(name, broker.run, broker_seeds(), reset=broker.reset, close=broker.close)
    raise ConfigurationError(f"unknown fuzz target {name!r}; known: {', '.join(TARGETS)}")


# -- the run --------------------------------------------------------------------------------------


def _save(save_dir: Path, target: str, data: bytes) -> None:
    directory = save_dir / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{hashlib.sha1(data).hexdigest()[:16]}.bin").write_bytes(data)


def run_fuzz(
    budget: float,
    *,
    targets: tuple[str, ...] = TARGETS,
    seed: int = 1,
    timeout: float = 2.0,
    memory_bound: int = 64 << 20,
    trace_memory: bool = True,
    save_dir: Path | None = None,
    max_saved: int = 25,
    max_saved_size: int = 2048,
    findings_dir: Path | None = None,
    progress: Callable[[FuzzReport], None] | None = None,
    cpu_budget: bool = False,
) -> FuzzReport:
    """Fuzz ``targets`` round-robin for ``budget`` seconds; returns the :class:`FuzzReport`.

    The budget is wall-clock time, or with ``cpu_budget`` this process's CPU time (so a run on
    a busy machine does the same work); ``FuzzReport.seconds`` is measured on the same clock.
    """
    clock = time.process_time if cpu_budget else time.perf_counter
    if budget <= 0:
        raise ConfigurationError(f"budget must be positive, got {budget}")
    rng = random.Random(seed)
    oracle = Oracle(timeout, memory_bound, trace_memory)
    report = FuzzReport()
    with _quiet_library(), tempfile.TemporaryDirectory(prefix="lazyconv-fuzz-") as tmp:
        fuzz_targets = [make_target(name, Path(tmp)) for name in targets]
        corpora = {t.name: list(t.seeds) for t in fuzz_targets}
        seen: dict[str, set[str]] = {t.name: set() for t in fuzz_targets}
        saved = {t.name: 0 for t in fuzz_targets}
        start = clock()
        deadline = start + budget
        next_progress = start + 30
        try:
            with oracle.armed():
                while clock() < deadline:
                    for target in fuzz_targets:
                        corpus = corpora[target.name]
                        for _ in range(50):
                            data = mutate(rng, rng.choice(corpus), corpus)
                            if target.repair_crcs and rng.random() < 0.7:
                                data = repair_crcs(data)
                            finding, outcome = oracle.check(target, data)
                            report.executions += 1
                            report.per_target[target.name] = report.per_target.get(target.name, 0) + 1
                            if finding is not None:
                                report.findings.append(finding)
                                if findings_dir is not None:
                                    _save(findings_dir, target.name, data)
                                continue
                            if outcome not in seen[target.name]:
                                seen[target.name].add(outcome)
                                if len(corpus) < 2_000:
                                    corpus.append(data)
                                if save_dir is not None and saved[target.name] < max_saved and len(data) <= max_saved_size:
                                    _save(save_dir, target.name, data)
                                    saved[target.name] += 1
                                    report.saved += 1
                    now = clock()
                    if progress is not None and now >= next_progress:
                        report.seconds = now - start
                        report.max_traced_bytes = oracle.max_traced
                        progress(report)
                        next_progress = now + 30
        finally:
            for target in fuzz_targets:
                if target.close is not None:
                    target.close()
        report.seconds = clock() - start
        report.max_traced_bytes = oracle.max_traced
        report.corpus_sizes = {name: len(corpus) for name, corpus in corpora.items()}
    return report


@contextmanager
def _quiet_library() -> Iterator[None]:
    """The library's log records silenced while inputs are fuzzed (errors are the point here),
    and its logger's level given back after: a caller in the same process (a test run, the CLI)
    keeps its warnings."""
    logger = logging.getLogger("lazyconv")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def replay_corpus(corpus_dir: Path, *, timeout: float = 2.0, memory_bound: int = 64 << 20) -> tuple[int, list[Finding]]:
    """Run every saved input of ``corpus_dir/<target>/*.bin`` once; returns ``(inputs, findings)``."""
    findings: list[Finding] = []
    count = 0
    oracle = Oracle(timeout, memory_bound)
    with _quiet_library(), tempfile.TemporaryDirectory(prefix="lazyconv-fuzz-") as tmp, oracle.armed():
        for directory in sorted(p for p in corpus_dir.iterdir() if p.is_dir()):
            target = make_target(directory.name, Path(tmp))
            try:
                for path in sorted(directory.glob("*.bin")):
                    finding, _outcome = oracle.check(target, path.read_bytes())
                    count += 1
                    if finding is not None:
                        findings.append(finding)
            finally:
                if target.close is not None:
                    target.close()
    return count, findings


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--budget``, ``--targets``, ``--seed``, ``--replay``, ... (see ``--help``)."""
    parser = argparse.ArgumentParser(prog="bench/fuzz.py", description="Mutation fuzzing of lazyconv's decoders and server handler.")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds to fuzz (default 600)")
    parser.add_argument("--cpu-budget", action="store_true",
                        help="count the budget in this process's CPU seconds, not wall-clock seconds")
    parser.add_argument("--targets", default="all", help=f"comma-separated subset of {','.join(TARGETS)}")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--timeout", type=float, default=2.0, help="per-input time bound in seconds")
    parser.add_argument("--memory-bound-mib", type=float, default=64.0, help="per-input traced memory bound")
    parser.add_argument("--no-trace-memory", action="store_true", help="skip tracemalloc (faster)")
    parser.add_argument("--save-corpus", type=Path, help="write new interesting inputs under DIR/<target>/")
    parser.add_argument("--max-saved", type=int, default=25, help="inputs saved per target")
    parser.add_argument("--findings", type=Path, default=Path(tempfile.gettempdir()) / "lazyconv-fuzz-findings",
                        help="where the inputs of findings are written (default: lazyconv-fuzz-findings in the temporary folder)")
    parser.add_argument("--replay", type=Path, help="only replay a saved corpus directory")
    args = parser.parse_args(argv)
    if args.replay is not None:
        count, findings = replay_corpus(args.replay, timeout=args.timeout)
        print(f"replayed {count} inputs: {len(findings)} findings")
        for finding in findings:
            print(finding)
        return 1 if findings else 0
    targets = TARGETS if args.targets == "all" else tuple(t.strip() for t in args.targets.split(","))
    report = run_fuzz(
        args.budget, targets=targets, seed=args.seed, timeout=args.timeout,
        memory_bound=int(args.memory_bound_mib * 2**20), trace_memory=not args.no_trace_memory,
        save_dir=args.save_corpus, max_saved=args.max_saved, findings_dir=args.findings,
        progress=lambda r: print(f"... {r.executions:,} executions, {len(r.findings)} findings", flush=True),
        cpu_budget=args.cpu_budget,
    )
    print(report.summary())
    for finding in report.findings[:20]:
        print(finding)
    if report.findings:
        print(f"inputs of the findings saved under {args.findings}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
