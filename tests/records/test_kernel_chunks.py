"""Differential tests of the lazy send's compiled chunking (``kernel.convert_v2_chunk``): the
chunks the kernel decides and converts are the reference policy's (``chunk_groups`` over batch
objects): the same bytes, the same pieces (chunk boundaries), the same stats and the same error
(type, message, position), for memory and file records, on well-formed and mutated inputs.

The reference runs inside ``_impl.using(_impl.REFERENCE)`` (the send then groups batches and
converts them in pure Python).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lazy_support import build_batch, v2_end_txn_marker

from lazyconv.conversion._chunks import MIN_CHUNK_SIZE
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import LazyconvError
from lazyconv.records import Compression, FileRecords, MemoryRecords, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")

KINDS = ["plain"] * 10 + ["gzip", "v1", "control", "zstd", "big"]


def _entry(kind: str, offset: int, rng: random.Random) -> tuple[bytes, int]:
    if kind == "control":
        return v2_end_txn_marker(offset, 1000, producer_id=5, commit=True), offset + 1
    count = rng.randint(1, 4)
    size = 40_000 if kind == "big" else rng.choice([10, 300, 1500, 3000])
    records = [(1_000 + i, b"k%d" % i if i % 2 else None, bytes([i % 251]) * size) for i in range(count)]
    offsets = list(range(offset, offset + count))
    if kind == "v1":
        return b"".join(build_batch(1, [rec], offsets=[off]) for rec, off in zip(records, offsets, strict=True)), offset + count
    codec = {"gzip": Compression.GZIP, "zstd": Compression.ZSTD}.get(kind, Compression.NONE)
    return build_batch(2, records, offsets=offsets, compression=codec), offset + count


def make_input(seed: int, kinds: list[str], mutate: bool) -> bytes:
    rng = random.Random(seed)
    offset = rng.randint(0, 1000)
    data = bytearray()
    for kind in kinds:
        entry, offset = _entry(kind, offset, rng)
        data += entry
    if mutate and data:
        for _ in range(rng.randint(1, 3)):
            choice = rng.random()
            position = rng.randrange(len(data))
            if choice < 0.5:
                data[position] ^= 1 << rng.randrange(8)
            elif choice < 0.8:
                del data[position:]
                if not data:
                    break
            else:  # a lying size field somewhere near the start of an entry
                data[position : position + 4] = rng.randrange(-20, 1 << 20).to_bytes(4, "big", signed=True)
    return bytes(data)


def send_outcome(make_records: Callable[[], Any], to_magic: int, first_offset: int, chunk_size: int) -> tuple[Any, ...]:
    try:
        lazy_records = LazyDownConvertedRecords(make_records(), to_magic, first_offset, chunk_size=chunk_size)
    except LazyconvError as exc:
        return ("init error", type(exc), str(exc), exc.position)
    send = lazy_records.to_send()
    data = send.to_bytes()
    error = send.error
    return (
        data,
        send.piece_sizes,
        send.chunks,
        send.stats.records_converted,
        send.stats.temporary_memory_bytes,
        None if error is None else (type(error), str(error), error.position),
    )


def reference(fn: Callable[[], Any]) -> Any:
    with _impl.using(_impl.REFERENCE):
        return fn()


def assert_same(make_records: Callable[[], Any], to_magic: int, first_offset: int, chunk_size: int) -> None:
    compiled = send_outcome(make_records, to_magic, first_offset, chunk_size)
    expected = reference(lambda: send_outcome(make_records, to_magic, first_offset, chunk_size))
    assert compiled == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=40),
    mutate=st.booleans(),
    to_magic=st.sampled_from([0, 1]),
    first_offset=st.sampled_from([0, 1005, 2**62]),
    chunk_size=st.sampled_from([MIN_CHUNK_SIZE, MIN_CHUNK_SIZE + 1, 40_000]),
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_kernel_chunks_equal_the_reference_policy(seed, kinds, mutate, to_magic, first_offset, chunk_size) -> None:
    data = make_input(seed, kinds, mutate)
    assert_same(lambda: MemoryRecords(data), to_magic, first_offset, chunk_size)


@pytest.mark.parametrize("mutate", [False, True])
def test_kernel_chunks_from_a_file_equal_the_reference_policy(tmp_path: Path, mutate: bool) -> None:
    rng = random.Random(12)
    for case in range(6):
        kinds = [rng.choice(KINDS[:4] + ["gzip", "control", "big"]) for _ in range(40)]
        path = tmp_path / f"segment{case}.log"
        path.write_bytes(make_input(case, kinds, mutate))
        for to_magic in (0, 1):

            def open_file(p: Path = path) -> FileRecords:
                return FileRecords.open(p)

            assert_same(open_file, to_magic, 0, MIN_CHUNK_SIZE)


def test_kernel_chunk_boundaries_follow_the_policy() -> None:
    """Whole batches up to chunk_size, at least one; a compressed batch the policy would take
    into the chunk hands the chunk to Python; what does not fit is left for the next call."""
    kernel: Any = _impl.kernel_module()
    batch = build_batch(2, [(1, b"k", b"v" * 1000)], offsets=[0])
    plain = batch * 5
    out = bytearray()
    end, stop, converted, _ = kernel.convert_v2_chunk(plain, out, 3 * len(batch), 1, 0)
    assert (end, stop, converted) == (3 * len(batch), kernel.CHUNK_DONE, 3)
    end, stop, _, _ = kernel.convert_v2_chunk(plain, bytearray(), len(batch) - 1, 1, 0)
    assert (end, stop) == (len(batch), kernel.CHUNK_DONE)  # the first batch always goes
    mixed = batch + build_batch(2, [(1, b"k", b"v" * 10)], offsets=[1], compression=Compression.GZIP)
    assert kernel.convert_v2_chunk(mixed, bytearray(), 1 << 20, 1, 0)[1] == kernel.CHUNK_MIXED
    assert kernel.convert_v2_chunk(mixed, bytearray(), len(batch), 1, 0)[:2] == (len(batch), kernel.CHUNK_DONE)
    assert kernel.convert_v2_chunk(plain[:-1], bytearray(), 1 << 20, 1, 0)[:2] == (4 * len(batch), kernel.CHUNK_DONE)
    assert kernel.convert_v2_chunk(b"", bytearray(), 1 << 20, 1, 0)[:2] == (0, kernel.CHUNK_DONE)


# -- send_plain_chunk: the chunk read from a file and written to a socket in one call ----------


class _Rig:
    """A segment file and a socket pair; the sending side's buffer is ``buffer`` bytes (small
    ones make the kernel's sends stop part-way)."""

    def __init__(self, tmp_path: Path, data: bytes, buffer: int | None = None) -> None:
        import socket

        path = tmp_path / "segment.log"
        path.write_bytes(data)
        self.file = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.send_side, self.receive_side = socket.socketpair()
        if buffer is not None:
            self.send_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        self.send_side.setblocking(False)
        self.receive_side.setblocking(False)

    def send(self, position: int, length: int, remaining: int, chunk_size: int, to_magic: int = 1,
             first_offset: int = 0) -> tuple[Any, ...]:
        kernel: Any = _impl.kernel_module()
        return kernel.send_plain_chunk(self.file.fileno(), position, length, self.send_side.fileno(), remaining,
                                       chunk_size, to_magic, first_offset)

    def received(self) -> bytes:
        out = bytearray()
        while True:
            try:
                piece = self.receive_side.recv(1 << 20)
            except BlockingIOError:
                return bytes(out)
            out += piece

    def close(self) -> None:
        self.file.close()
        self.send_side.close()
        self.receive_side.close()


def test_send_plain_chunk_writes_what_convert_v2_chunk_converts(tmp_path: Path) -> None:
    """The same chunk end, stats and bytes as convert_v2_chunk on the same window; a socket
    that takes part of them leaves the rest to the caller; `remaining` cuts the piece."""
    kernel: Any = _impl.kernel_module()
    batch = build_batch(2, [(1, b"k", b"v" * 20_000), (2, None, b"w" * 500)], offsets=[0, 1])
    data = batch * 6
    out = bytearray()
    end, _, converted, temporary = kernel.convert_v2_chunk(data, out, 3 * len(batch), 1, 1)
    rig = _Rig(tmp_path, data)
    try:
        stop, got_end, got_converted, got_temporary, out_len, sent, rest, elapsed, error = rig.send(
            0, len(data), 1 << 30, 3 * len(batch), first_offset=1)
        assert (stop, got_end, got_converted, got_temporary, out_len) == (
            kernel.SEND_CONVERTED, end, converted, temporary, len(out))
        assert (rest, error, sent) == (None, 0, len(out)) and elapsed > 0
        assert rig.received() == out
        # a cut: only `remaining` bytes are owed
        stop, got_end, *_, out_len, sent, rest, _, _ = rig.send(0, len(data), 100, 3 * len(batch), first_offset=1)
        assert (stop, got_end, out_len, sent, rest) == (kernel.SEND_CONVERTED, end, len(out), 100, None)
        assert rig.received() == out[:100]
    finally:
        rig.close()
    rig = _Rig(tmp_path, data, buffer=4096)  # the socket takes part of the chunk
    try:
        whole = bytearray()
        kernel.convert_v2_chunk(data, whole, 3 * len(batch), 1, 0)
        stop, _, _, _, out_len, sent, rest, _, error = rig.send(0, len(data), 1 << 30, 3 * len(batch))
        assert stop == kernel.SEND_CONVERTED and 0 < sent < out_len == len(whole) and error == 0
        assert rig.received() + rest == whole
    finally:
        rig.close()


def test_send_plain_chunk_declines_what_python_converts(tmp_path: Path) -> None:
    """A chunk the policy would mix with a compressed batch, a corrupt batch, and a window past
    the end of the file: nothing is written, the caller converts the chunk itself."""
    kernel: Any = _impl.kernel_module()
    batch = build_batch(2, [(1, b"k", b"v" * 1000)], offsets=[0])
    gzip = build_batch(2, [(1, b"k", b"v" * 10)], offsets=[1], compression=Compression.GZIP)
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF  # the CRC no longer holds
    for data, length_extra, expected in ((batch + gzip, 0, kernel.SEND_DECLINED),
                                         (bytes(corrupt) + batch, 0, kernel.SEND_DECLINED),
                                         (gzip + batch, 0, kernel.SEND_DECLINED),
                                         (batch * 2, 1, kernel.SEND_SHORT)):
        rig = _Rig(tmp_path, data)
        try:
            result = rig.send(0, len(data) + length_extra, 1 << 30, 1 << 20)
            assert result == (expected, 0, 0, 0, 0, 0, None, 0, 0)
            assert rig.received() == b""
        finally:
            rig.close()


def test_send_plain_chunk_refuses_bad_arguments_and_reports_read_errors(tmp_path: Path) -> None:
    rig = _Rig(tmp_path, build_batch(2, [(1, b"k", b"v")], offsets=[0]))
    try:
        for bad in ({"to_magic": 2}, {"first_offset": -1}):
            with pytest.raises(ValueError, match="send_plain_chunk needs"):
                rig.send(0, 10, 10, 10, **bad)
        with pytest.raises(ValueError, match="send_plain_chunk needs"):
            rig.send(-1, 10, 10, 10)
        with pytest.raises(ValueError, match="send_plain_chunk needs"):
            rig.send(0, 0, 10, 10)
        kernel: Any = _impl.kernel_module()
        with pytest.raises(OSError):  # not a readable descriptor
            kernel.send_plain_chunk(rig.send_side.fileno(), 0, 10, rig.send_side.fileno(), 10, 10, 1, 0)
    finally:
        rig.close()


def _socket_outcome(path: Path, to_magic: int, first_offset: int, chunk_size: int, size: int,
                    buffer: int | None) -> tuple[Any, ...]:
    """The lazy send of the first ``size`` bytes of the file drained into a socket (the kernel
    writes its plain chunks straight to it) or, with ``buffer`` None, into a plain channel."""
    import socket
    import threading

    from lazyconv._send import drain

    records = FileRecords.open(path)
    try:
        try:
            lazy = LazyDownConvertedRecords(records.slice(0, min(size, records.size_in_bytes)), to_magic,
                                            first_offset, chunk_size=chunk_size)
        except LazyconvError as exc:
            return ("init error", type(exc), str(exc), exc.position)
        send = lazy.to_send()
        received = bytearray()
        if buffer is None:
            class _Keep:
                def write(self, data: memoryview | bytes) -> int:
                    received.extend(data)
                    return len(data)

            drain(send, _Keep())
        else:
            sender, receiver = socket.socketpair()
            sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
            sender.setblocking(False)

            def read() -> None:
                while piece := receiver.recv(1 << 20):
                    received.extend(piece)

            reader = threading.Thread(target=read)
            reader.start()
            try:
                drain(send, sender, timeout=10)
            finally:
                sender.close()
                reader.join()
                receiver.close()
        error = send.error
        return (bytes(received), send.piece_sizes, send.chunks, send.stats.records_converted,
                send.stats.temporary_memory_bytes, send.padding_bytes, send.truncated,
                None if error is None else (type(error), str(error), error.position))
    finally:
        records.close()


@pytest.mark.parametrize("mutate", [False, True])
def test_lazy_sends_to_a_socket_equal_the_python_steps(tmp_path: Path, mutate: bool) -> None:
    """Sent to a socket, a file's plain chunks go through send_plain_chunk; the bytes, pieces,
    stats, padding and error are those of the same send drained into a plain channel (the
    Python steps), with sockets that take whole chunks or a few KiB at a time."""
    rng = random.Random(31 + mutate)
    for case in range(8):
        kinds = [rng.choice(KINDS[:6] + ["plain", "gzip", "control", "big"]) for _ in range(30)]
        path = tmp_path / f"segment{case}.log"
        path.write_bytes(make_input(case, kinds, mutate))
        for to_magic in (0, 1):
            chunk_size = rng.choice([MIN_CHUNK_SIZE, 40_000, 128 * 1024])
            size = rng.choice([1 << 30, rng.randint(1, 200_000)])
            first_offset = rng.choice([0, rng.randint(0, 1200)])
            expected = _socket_outcome(path, to_magic, first_offset, chunk_size, size, None)
            for buffer in (1 << 20, 4096):
                assert _socket_outcome(path, to_magic, first_offset, chunk_size, size, buffer) == expected
